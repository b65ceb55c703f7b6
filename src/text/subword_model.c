/* subword_model.c — BPE and SentencePiece models behind one interface (see subword.h). */
#include "s2s/subword.h"

#include <stdlib.h>
#include <string.h>

SubwordModel *subword_of_bpe(Bpe *b) {
    SubwordModel *m = s2s_xcalloc(1, sizeof *m);
    m->kind = SUBWORD_KIND_BPE;
    m->bpe = b;
    return m;
}

S2sStatus subword_from_bytes(SubwordModel **out, SubwordKind kind, const void *bytes, size_t len, const char *origin, S2sError *err) {
    S2S_ASSERT(kind == SUBWORD_KIND_BPE || kind == SUBWORD_KIND_SENTENCEPIECE);
    *out = NULL;
    S2sStatus st;
    if (kind == SUBWORD_KIND_BPE) {
        Bpe *b = s2s_xmalloc(sizeof *b);
        bpe_init(b);
        if ((st = bpe_parse(b, bytes, len, origin, err))) {
            bpe_free(b);
            free(b);
            return st;
        }
        *out = subword_of_bpe(b);
        return S2S_OK;
    }
    Spm *s = s2s_xmalloc(sizeof *s);
    if ((st = spm_parse(s, bytes, len, origin, err))) {
        free(s);
        return st;
    }
    SubwordModel *m = s2s_xcalloc(1, sizeof *m);
    m->kind = SUBWORD_KIND_SENTENCEPIECE;
    m->spm = s;
    *out = m;
    return S2S_OK;
}

void subword_vocab(SubwordModel *m, Vocab *v) {
    if (m->bpe) {
        bpe_vocab(m->bpe, v);
        return;
    }
    /* the specials, then SentencePiece's pieces in order; its unknown piece is ours, and a
     * piece spelled as one of our specials is that special */
    vocab_init(v);
    const Spm *s = m->spm;
    free(m->to_vocab);
    m->to_vocab = s2s_xmalloc((size_t)s->n * sizeof *m->to_vocab);
    for (int i = 0; i < s->n; i++) m->to_vocab[i] = i == s->unk_id ? TOK_UNK : vocab_add(v, s->piece[i]);
    free(m->from_vocab);
    m->n_vocab = v->size;
    m->from_vocab = s2s_xmalloc((size_t)v->size * sizeof *m->from_vocab);
    for (int i = 0; i < v->size; i++) m->from_vocab[i] = -1;
    for (int i = s->n - 1; i >= 0; i--) m->from_vocab[m->to_vocab[i]] = i; /* the first spelling wins */
    m->from_vocab[TOK_UNK] = s->unk_id;
}

int subword_encode(const SubwordModel *m, const char *line, int32_t **ids, int *cap) {
    return subword_encode_sampled(m, line, 0, NULL, ids, cap);
}

int subword_encode_sampled(const SubwordModel *m, const char *line, float dropout, Rng *rng, int32_t **ids, int *cap) {
    if (m->bpe) return bpe_encode_sampled(m->bpe, line, dropout, rng, ids, cap);
    S2S_ASSERT_MSG(dropout == 0, "BPE-dropout on a SentencePiece model (the config check refuses it)");
    S2S_ASSERT(m->to_vocab); /* subword_vocab made the tables */
    int n = spm_encode_ids(m->spm, line, ids, cap);
    for (int i = 0; i < n; i++) (*ids)[i] = m->to_vocab[(*ids)[i]];
    return n;
}

char *subword_decode(const SubwordModel *m, const int32_t *ids, int n) {
    if (m->bpe) return bpe_decode(m->bpe, ids, n);
    S2S_ASSERT(m->from_vocab);
    size_t len = 1;
    for (int i = 0; i < n; i++) {
        int s = ids[i] >= 0 && ids[i] < m->n_vocab ? m->from_vocab[ids[i]] : -1;
        if (s >= 0) len += strlen(m->spm->piece[s]) + 1;
    }
    char *pieces = s2s_xmalloc(len), *p = pieces;
    for (int i = 0; i < n; i++) {
        int s = ids[i] >= 0 && ids[i] < m->n_vocab ? m->from_vocab[ids[i]] : -1;
        if (s < 0) continue; /* <pad>, <sos>, <eos>: nothing to write */
        size_t k = strlen(m->spm->piece[s]);
        if (p > pieces) *p++ = ' ';
        memcpy(p, m->spm->piece[s], k);
        p += k;
    }
    *p = '\0';
    char *text = spm_decode_text(m->spm, pieces);
    free(pieces);
    return text;
}

char *subword_bytes(const SubwordModel *m, size_t *len) {
    if (m->bpe) return bpe_format(m->bpe, len);
    *len = m->spm->raw_len;
    char *b = s2s_xmalloc(*len ? *len : 1);
    memcpy(b, m->spm->raw, *len);
    return b;
}

SubwordModel *subword_copy(const SubwordModel *m) {
    size_t len;
    char *b = subword_bytes(m, &len);
    SubwordModel *c;
    S2sError err;
    S2sStatus st = subword_from_bytes(&c, m->kind, b, len, "copy", &err);
    S2S_ASSERT_MSG(st == S2S_OK, "a subword model's own bytes do not read back: %s", err.msg);
    free(b);
    if (m->to_vocab) { /* the same id tables */
        Vocab v;
        subword_vocab(c, &v);
        vocab_free(&v);
    }
    return c;
}

void subword_attach(Vocab *v, SubwordModel *m) {
    v->sub = m;
    v->sub_free = subword_free;
}

void subword_free(SubwordModel *m) {
    if (!m) return;
    if (m->bpe) {
        bpe_free(m->bpe);
        free(m->bpe);
    }
    if (m->spm) {
        spm_free(m->spm);
        free(m->spm);
    }
    free(m->to_vocab);
    free(m->from_vocab);
    free(m);
}
