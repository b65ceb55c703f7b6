/* hash.c — the open-addressing index of hash.h: linear probing from the key's mixed bits. */
#include "s2s/hash.h"

#include <stdlib.h>

/* The key's bits mixed (a murmur finaliser), so keys that differ in their high bits alone (id
 * pairs, FNV of short strings) spread over the slots. */
static inline size_t slot_of(uint64_t k, size_t cap) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (size_t)k & (cap - 1);
}

static void alloc_slots(HashIndex *t, size_t cap) {
    t->key = s2s_xmalloc(cap * sizeof *t->key);
    t->val = s2s_xmalloc(cap * sizeof *t->val);
    memset(t->val, 0xff, cap * sizeof *t->val); /* −1 everywhere */
    t->cap = cap;
    t->n = 0;
}

void hash_index_init(HashIndex *t, size_t n) {
    size_t cap = 16;
    while (cap < 2 * n + 2) cap *= 2;
    alloc_slots(t, cap);
}

void hash_index_free(HashIndex *t) {
    free(t->key);
    free(t->val);
    memset(t, 0, sizeof *t);
}

int32_t hash_index_find(const HashIndex *t, uint64_t key, HashSame same, const void *ctx) {
    for (size_t i = slot_of(key, t->cap);; i = (i + 1) & (t->cap - 1)) {
        int32_t v = t->val[i];
        if (v < 0) return -1;
        if (t->key[i] == key && (!same || same(ctx, v))) return v;
    }
}

static void put(HashIndex *t, uint64_t key, int32_t v) {
    size_t i = slot_of(key, t->cap);
    while (t->val[i] >= 0) i = (i + 1) & (t->cap - 1);
    t->key[i] = key;
    t->val[i] = v;
    t->n++;
}

void hash_index_add(HashIndex *t, uint64_t key, int32_t v) {
    S2S_ASSERT(v >= 0);
    if (2 * (t->n + 1) > t->cap) { /* grow: every value to its place in twice the slots */
        HashIndex old = *t;
        alloc_slots(t, 2 * old.cap);
        for (size_t i = 0; i < old.cap; i++)
            if (old.val[i] >= 0) put(t, old.key[i], old.val[i]);
        free(old.key);
        free(old.val);
    }
    put(t, key, v);
}
