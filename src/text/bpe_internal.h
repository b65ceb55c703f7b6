/* bpe_internal.h — what bpe.c (the model, encoding, files) shares with bpe_learn.c
 * (learning): the pieces' and merges' tables and a binary heap. Not a public header. */
#ifndef S2S_BPE_INTERNAL_H
#define S2S_BPE_INTERNAL_H

#include "s2s/bpe.h"

#include <stdint.h>

uint64_t bpe_pair_key(int32_t l, int32_t r);
/* text → id of a character or merged piece, or −1 */
int32_t bpe_textmap_find(const HashIndex *m, char *const *tokens, const char *s);
/* A character: in the vocabulary's own index too (encoding looks characters up there). */
int32_t bpe_add_char(Bpe *b, const char *text);
/* The merge of l and r, its piece and its rank (the first merge of a pair). */
void bpe_add_merge(Bpe *b, int32_t l, int32_t r);
/* Whether left + right spells a special or a byte piece. */
bool bpe_spells_reserved(const Bpe *b, int32_t l, int32_t r);

/* A binary heap of (first, second) pairs, smallest first: learning keys pairs by (−count, ids),
 * encoding candidates by (rank, position). */
typedef struct HeapItem {
    int64_t first;
    uint64_t second;
} HeapItem;

typedef struct Heap {
    HeapItem *h;
    size_t n, cap;
} Heap;

void bpe_heap_push(Heap *q, HeapItem it);
HeapItem bpe_heap_pop(Heap *q);

#endif
