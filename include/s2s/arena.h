/* arena.h — the per-step allocator for activations, the tape and temporaries.
 *
 * Owns a chain of blocks obtained from malloc. arena_alloc hands out 64-byte aligned
 * pieces; arena_reset frees them all at once. When a step needs more than the arena holds,
 * a new block is chained on (never an abort on a long batch); at the next reset a chain of
 * several blocks is merged into one block of the total size, so the steady state is one
 * block, O(1) resets and no malloc inside a training step. The high-water mark is kept for
 * the logs. Memory handed out is not zeroed unless arena_calloc is used.
 * arena_init_reserved (the tapes' arenas) reserves address space instead: see there. */
#ifndef S2S_ARENA_H
#define S2S_ARENA_H

#include <stddef.h>

typedef struct ArenaBlock ArenaBlock;

typedef struct Arena {
    ArenaBlock *head;  /* first block */
    ArenaBlock *cur;   /* block being filled */
    size_t used;       /* bytes handed out since the last reset (all blocks) */
    size_t peak;       /* high-water mark of used */
    size_t capacity;   /* bytes in all blocks */
    size_t min_block;  /* smallest block to allocate */
} Arena;

void arena_init(Arena *a, size_t initial_bytes);
/* One block reserving the machine's RAM in address space only (mmap, MAP_NORESERVE): pages
 * become memory when first touched and stay for the next steps, so a growing step never
 * refaults what earlier steps touched, and nothing is ever merged. Falls back to arena_init
 * where the reservation is refused. */
void arena_init_reserved(Arena *a, size_t initial_bytes);
void arena_free(Arena *a);
void *arena_alloc(Arena *a, size_t bytes);
void *arena_calloc(Arena *a, size_t bytes);
void arena_reset(Arena *a);

/* A position to return to: everything allocated after the mark is released by the rewind
 * (the blocks stay, for the next allocations). For loops whose iterations need only their
 * own temporaries, such as decoding steps. */
typedef struct ArenaMark {
    ArenaBlock *block;
    size_t block_used, used;
} ArenaMark;
ArenaMark arena_mark(const Arena *a);
void arena_rewind(Arena *a, ArenaMark m);
size_t arena_blocks(const Arena *a);

#endif
