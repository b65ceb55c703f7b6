/* vocab.c — token ↔ id: the tokens in id order, found by hash.h's index. */
#include "s2s/vocab.h"

#include <stdlib.h>
#include <string.h>

void vocab_init(Vocab *v) {
    memset(v, 0, sizeof *v);
    hash_index_init(&v->index, 32);
    const char *sp[TOK_SPECIALS] = {"<pad>", "<unk>", "<sos>", "<eos>"};
    for (int i = 0; i < TOK_SPECIALS; i++) vocab_add(v, sp[i]);
}

void vocab_free(Vocab *v) {
    if (v->sub) v->sub_free(v->sub); /* subword_attach left it: a vocabulary knows no subword code */
    for (int i = 0; i < v->size; i++) free(v->tokens[i]);
    free(v->tokens);
    hash_index_free(&v->index);
    memset(v, 0, sizeof *v);
}

typedef struct Lookup {
    const Vocab *v;
    const char *tok;
} Lookup;

static bool same_token(const void *ctx, int32_t id) {
    const Lookup *l = ctx;
    return strcmp(l->v->tokens[id], l->tok) == 0;
}

int vocab_find(const Vocab *v, const char *tok) {
    return hash_index_find(&v->index, hash_str(tok), same_token, &(Lookup){v, tok});
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
    uint64_t h = hash_str(tok);
    int id = hash_index_find(&v->index, h, same_token, &(Lookup){v, tok});
    if (id >= 0) return id;
    if (v->size == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 64;
        v->tokens = s2s_xrealloc(v->tokens, (size_t)v->cap * sizeof *v->tokens);
    }
    size_t n = strlen(tok) + 1;
    v->tokens[v->size] = memcpy(s2s_xmalloc(n), tok, n);
    hash_index_add(&v->index, h, v->size);
    return v->size++;
}
