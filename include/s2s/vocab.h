/* vocab.h — words and their ids: the Multi30k tokenisation a typed sentence goes through
 * (tokenize.c), and vocabularies (vocab.c).
 *
 * A Vocab owns its token strings, a hash index, and the subword model whose pieces they are
 * (subword.h), if any. The special ids are fixed: <pad> 0, <unk> 1, <sos> 2, <eos> 3. */
#ifndef S2S_VOCAB_H
#define S2S_VOCAB_H

#include "s2s/common.h"
#include "s2s/hash.h"

enum { TOK_PAD = 0, TOK_UNK = 1, TOK_SOS = 2, TOK_EOS = 3, TOK_SPECIALS = 4 };

struct SubwordModel;

typedef struct Vocab {
    char **tokens;   /* id → token */
    int size, cap;
    HashIndex index; /* token → id (hash.h) */
    struct SubwordModel *sub; /* owned: the subword model whose pieces these are (subword.h), or NULL (words);
                                 attached by subword_attach, which leaves sub_free */
    void (*sub_free)(struct SubwordModel *m);
} Vocab;

/* An empty vocabulary holding only the four specials. */
void vocab_init(Vocab *v);
void vocab_free(Vocab *v);
int vocab_add(Vocab *v, const char *tok);       /* id (existing or new) */
/* Adds tok and counts it: (*count)[id]++, the array grown (zeroed) as ids grow; *cap its size. */
void vocab_count(Vocab *v, const char *tok, long **count, int *cap);
int vocab_find(const Vocab *v, const char *tok); /* id or −1 */
int vocab_id(const Vocab *v, const char *tok);   /* id or TOK_UNK */
/* −1 when v holds exactly tokens[0..n), else the first entry where they differ (the shorter
 * one's size when one is the other's beginning). */
int vocab_first_difference(const Vocab *v, char *const *tokens, int n);

/* Raw text → the Multi30k token convention (lowercased, normalised, Moses-tokenised,
 * tokens separated by single spaces); lang is "en", "de", … (apostrophes differ).
 * The input must be valid UTF-8. Returns a malloc'd string. */
char *tok_normalize(const char *line, const char *lang);

#endif
