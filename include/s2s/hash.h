/* hash.h — the project's one hash for tables: FNV-1a, and a small open-addressing index.
 *
 * hash_fnv is FNV-1a over bytes (64 bits): fast, and enough where a collision costs a probe (the
 * tables) or a redraw (the reversal generator's string set). Where two inputs must never be
 * taken for one, the hash is digest.h's SHA-256. A HashIndex finds the caller's values (ids,
 * indices into the caller's own arrays) by a 64-bit key: the key itself (an id pair, a struct
 * packed into it), or the hash of a key the caller keeps, confirmed by the caller's same().
 * It owns its slots; the keys behind them stay the caller's. */
#ifndef S2S_HASH_H
#define S2S_HASH_H

#include "s2s/common.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define HASH_FNV_BASIS 0xcbf29ce484222325ull

static inline uint64_t hash_fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static inline uint64_t hash_str(const char *s) { return hash_fnv(HASH_FNV_BASIS, s, strlen(s)); }

typedef struct HashIndex {
    uint64_t *key;   /* (cap) a slot's key */
    int32_t *val;    /* (cap) its value; −1: the slot is empty */
    size_t cap, n;   /* cap a power of two, n below cap / 2 */
} HashIndex;

/* Whether value v of the caller's is the key being looked for (ctx: what the caller needs). */
typedef bool (*HashSame)(const void *ctx, int32_t v);

/* An empty index with room for about n values before it first grows. */
void hash_index_init(HashIndex *t, size_t n);
void hash_index_free(HashIndex *t);
/* The value stored under key for which same(ctx, value) holds, or −1; same NULL: the key is
 * the whole key. */
int32_t hash_index_find(const HashIndex *t, uint64_t key, HashSame same, const void *ctx);
/* Stores v (≥ 0) under key: the caller has found it absent. Grows at half full. */
void hash_index_add(HashIndex *t, uint64_t key, int32_t v);

#endif
