/* arena.c — chained bump allocator, merged into one block on reset. */
#include "s2s/arena.h"
#include "s2s/common.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_ALIGN 64

struct ArenaBlock {
    ArenaBlock *next;
    size_t size; /* usable bytes in data */
    size_t used;
    unsigned char *data; /* aligned */
    void *raw;
};

static ArenaBlock *block_new(size_t size) {
    ArenaBlock *b = s2s_xmalloc(sizeof *b);
    b->raw = s2s_xmalloc(size + ARENA_ALIGN);
    b->data = (unsigned char *)(((uintptr_t)b->raw + ARENA_ALIGN - 1) & ~(uintptr_t)(ARENA_ALIGN - 1));
    b->size = size;
    b->used = 0;
    b->next = NULL;
    return b;
}

static void chain_free(ArenaBlock *b) {
    while (b) {
        ArenaBlock *n = b->next;
        free(b->raw);
        free(b);
        b = n;
    }
}

void arena_init(Arena *a, size_t initial_bytes) {
    memset(a, 0, sizeof *a);
    a->min_block = initial_bytes < 4096 ? 4096 : initial_bytes;
    a->head = a->cur = block_new(a->min_block);
    a->capacity = a->min_block;
}

void arena_free(Arena *a) {
    chain_free(a->head);
    memset(a, 0, sizeof *a);
}

void *arena_alloc(Arena *a, size_t bytes) {
    S2S_ASSERT(a->head != NULL);
    size_t need = (bytes + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (need == 0) need = ARENA_ALIGN;
    ArenaBlock *b = a->cur;
    while (b->used + need > b->size) {
        if (!b->next) {
            size_t size = a->capacity > need ? a->capacity : need; /* double the total */
            if (size < a->min_block) size = a->min_block;
            b->next = block_new(size);
            a->capacity += size;
        }
        b = b->next;
        b->used = 0;
    }
    a->cur = b;
    void *p = b->data + b->used;
    b->used += need;
    a->used += need;
    if (a->used > a->peak) a->peak = a->used;
    return p;
}

void *arena_calloc(Arena *a, size_t bytes) {
    void *p = arena_alloc(a, bytes);
    memset(p, 0, bytes);
    return p;
}

void arena_reset(Arena *a) {
    if (a->head->next) { /* grew during the step: merge into one block of the total size */
        size_t total = a->capacity;
        chain_free(a->head);
        a->head = block_new(total);
        a->capacity = total;
    }
    a->cur = a->head;
    a->head->used = 0;
    a->used = 0;
}

ArenaMark arena_mark(const Arena *a) { return (ArenaMark){a->cur, a->cur->used, a->used}; }

void arena_rewind(Arena *a, ArenaMark m) {
    S2S_ASSERT(m.used <= a->used);
    a->cur = m.block;
    a->cur->used = m.block_used;
    a->used = m.used;
}

size_t arena_blocks(const Arena *a) {
    size_t n = 0;
    for (const ArenaBlock *b = a->head; b; b = b->next) n++;
    return n;
}
