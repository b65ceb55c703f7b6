/* vocab.c — token ↔ id with an open-addressing hash (FNV-1a). */
#include "s2s/data.h"

#include <stdlib.h>
#include <string.h>

static uint32_t fnv1a(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static void rehash(Vocab *v, int n_slots) {
    free(v->slots);
    v->slots = s2s_xcalloc((size_t)n_slots, sizeof *v->slots);
    v->n_slots = n_slots;
    for (int id = 0; id < v->size; id++) {
        uint32_t h = fnv1a(v->tokens[id]) & (uint32_t)(n_slots - 1);
        while (v->slots[h]) h = (h + 1) & (uint32_t)(n_slots - 1);
        v->slots[h] = id + 1;
    }
}

void vocab_init(Vocab *v) {
    memset(v, 0, sizeof *v);
    rehash(v, 64);
    const char *sp[TOK_SPECIALS] = {"<pad>", "<unk>", "<sos>", "<eos>"};
    for (int i = 0; i < TOK_SPECIALS; i++) vocab_add(v, sp[i]);
}

void vocab_free(Vocab *v) {
    if (v->sub) v->sub_free(v->sub); /* subword_attach left it: a vocabulary knows no subword code */
    for (int i = 0; i < v->size; i++) free(v->tokens[i]);
    free(v->tokens);
    free(v->slots);
    memset(v, 0, sizeof *v);
}

int vocab_find(const Vocab *v, const char *tok) {
    uint32_t h = fnv1a(tok) & (uint32_t)(v->n_slots - 1);
    while (v->slots[h]) {
        int id = v->slots[h] - 1;
        if (strcmp(v->tokens[id], tok) == 0) return id;
        h = (h + 1) & (uint32_t)(v->n_slots - 1);
    }
    return -1;
}

int vocab_id(const Vocab *v, const char *tok) {
    int id = vocab_find(v, tok);
    return id < 0 ? TOK_UNK : id;
}

int vocab_first_difference(const Vocab *v, char *const *tokens, int n) {
    int i = 0;
    while (i < v->size && i < n && strcmp(v->tokens[i], tokens[i]) == 0) i++;
    return i == v->size && i == n ? -1 : i;
}

void vocab_count(Vocab *v, const char *tok, long **count, int *cap) {
    int id = vocab_add(v, tok);
    if (id >= *cap) {
        int nc = *cap ? 2 * *cap : 4096;
        while (nc <= id) nc *= 2;
        *count = s2s_xrealloc(*count, (size_t)nc * sizeof **count);
        memset(*count + *cap, 0, (size_t)(nc - *cap) * sizeof **count);
        *cap = nc;
    }
    (*count)[id]++;
}

int vocab_add(Vocab *v, const char *tok) {
    int id = vocab_find(v, tok);
    if (id >= 0) return id;
    if (v->size == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 64;
        v->tokens = s2s_xrealloc(v->tokens, (size_t)v->cap * sizeof *v->tokens);
    }
    size_t n = strlen(tok) + 1;
    v->tokens[v->size] = memcpy(s2s_xmalloc(n), tok, n);
    v->size++;
    if (2 * v->size > v->n_slots) rehash(v, 2 * v->n_slots);
    else {
        uint32_t h = fnv1a(tok) & (uint32_t)(v->n_slots - 1);
        while (v->slots[h]) h = (h + 1) & (uint32_t)(v->n_slots - 1);
        v->slots[h] = v->size;
    }
    return v->size - 1;
}
