/* arena.c — chained bump allocator, merged into one block on reset; or one reserved range. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE */
#include "s2s/arena.h"
#include "s2s/common.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define ARENA_ALIGN 64

struct ArenaBlock {
    ArenaBlock *next;
    size_t size; /* usable bytes in data */
    size_t used;
    unsigned char *data; /* aligned */
    void *raw;
    bool mapped; /* raw is an mmap reservation of size bytes (arena_init_reserved) */
};

static ArenaBlock *block_new(size_t size) {
    ArenaBlock *b = s2s_xmalloc(sizeof *b);
    b->raw = s2s_xmalloc(size + ARENA_ALIGN);
    b->data = (unsigned char *)(((uintptr_t)b->raw + ARENA_ALIGN - 1) & ~(uintptr_t)(ARENA_ALIGN - 1));
    b->size = size;
    b->used = 0;
    b->next = NULL;
    b->mapped = false;
    return b;
}

static void chain_free(ArenaBlock *b) {
    while (b) {
        ArenaBlock *n = b->next;
        if (b->mapped) munmap(b->raw, b->size);
        else free(b->raw);
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

void arena_init_reserved(Arena *a, size_t initial_bytes) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t size = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
    void *raw = size ? mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
                     : MAP_FAILED;
    if (raw == MAP_FAILED) { /* strict overcommit, an address-space limit: the chain still works */
        arena_init(a, initial_bytes);
        return;
    }
    memset(a, 0, sizeof *a);
    a->min_block = initial_bytes < 4096 ? 4096 : initial_bytes;
    ArenaBlock *b = s2s_xmalloc(sizeof *b);
    *b = (ArenaBlock){.size = size, .data = raw, .raw = raw, .mapped = true}; /* page-aligned */
    a->head = a->cur = b;
    a->capacity = size;
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
            /* double the total; past a reservation (all of RAM) just what is needed */
            size_t size = a->head->mapped ? need : a->capacity > need ? a->capacity : need;
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
    if (a->head->next && !a->head->mapped) { /* grew during the step: merge into one block of the total size */
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
