/* decode.c — step-by-step decoding as every family has it: the state started by the family,
 * one step's output layer and pick, beam reordering, the state settled and rows dropped
 * between steps, and greedy decoding of a batch on top (beam.c is the other caller). */
#include "model_internal.h"

#include <stdlib.h>
#include <string.h>

void model_decode_start(Tape *t, Seq2Seq *m, const Batch *b, int K, int max_steps, DecodeState *ds) {
    memset(ds, 0, sizeof *ds);
    ds->fam = arena_alloc(&t->arena, m->family->decode_size); /* before the state's mark: it stays */
    memset(ds->fam, 0, m->family->decode_size);
    m->family->decode_start(t, m, b, K, max_steps, ds);
}

uint8_t *model_decode_mask(Tape *t, const Batch *b) {
    uint8_t *mask = arena_alloc(&t->arena, (size_t)b->B * b->S);
    memcpy(mask, b->src_mask, (size_t)b->B * b->S);
    return mask;
}

void model_decode_settle(Tape *t, Seq2Seq *m, DecodeState *ds, int step) {
    if (step == 0) { /* the first step's allocations (the cached keys) stay */
        ds->mark = arena_mark(&t->arena);
        return;
    }
    if (m->family->decode_settle) m->family->decode_settle(m, ds, step);
    arena_rewind(&t->arena, ds->mark);
}

Tensor *model_decode_step(Tape *t, Seq2Seq *m, DecodeState *ds, const int32_t *tokens, Tensor **weights) {
    AttnWeights w = {.skip = !weights};
    Tensor *logits = model_decode_step_heads(t, m, ds, tokens, &w);
    if (weights) *weights = w.mean;
    return logits;
}

Tensor *model_decode_step_heads(Tape *t, Seq2Seq *m, DecodeState *ds, const int32_t *tokens, AttnWeights *w) {
    return linear_forward(t, &m->out, m->family->decode_features(t, m, ds, tokens, w)); /* (N, V) */
}

void model_decode_step_pick(Tape *t, Seq2Seq *m, DecodeState *ds, const int32_t *tokens, AttnWeights *w,
                            int32_t *best) {
    AttnWeights none = {.skip = true};
    Tensor *x = m->family->decode_features(t, m, ds, tokens, w ? w : &none);
    model_pick(t, m, x, ds->N, best);
}

void model_decode_reorder(Tape *t, Seq2Seq *m, DecodeState *ds, const int32_t *parent) {
    m->family->decode_reorder(t, m, ds, parent);
}

void model_decode_keep_rows(Seq2Seq *m, DecodeState *ds, const int32_t *rows, int n) {
    int N = ds->N, S = ds->S, G = ds->group;
    S2S_ASSERT(n > 0 && n <= N && n % G == 0);
    for (int i = 1; i < n; i++) S2S_ASSERT(rows[i] > rows[i - 1]);
    /* the sentences kept, whole groups of rows: the encoder's side is kept by sentence */
    int ns = n / G;
    int32_t *sent = s2s_xmalloc((size_t)ns * sizeof *sent);
    for (int i = 0; i < ns; i++) {
        sent[i] = rows[i * G] / G;
        for (int k = 0; k < G; k++) S2S_ASSERT(rows[i * G + k] == sent[i] * G + k);
    }
    uint8_t *mask = (uint8_t *)ds->mask; /* the state's own copy (model_decode_mask) */
    for (int i = 0; i < ns; i++) memmove(mask + (size_t)i * S, mask + (size_t)sent[i] * S, (size_t)S);
    m->family->decode_keep_rows(m, ds, rows, n, sent, ns);
    free(sent);
    ds->N = n;
}

int model_max_output(int max_decode_len, int n) { return max_decode_len > 0 ? max_decode_len : 2 * n + 10; }

void model_greedy(Tape *t, Seq2Seq *m, const Batch *b, int max_decode_len, int32_t *out, int *out_len, float *attn) {
    model_greedy_heads(t, m, b, max_decode_len, out, out_len, attn, NULL);
}

void model_greedy_heads(Tape *t, Seq2Seq *m, const Batch *b, int max_decode_len, int32_t *out, int *out_len, float *attn,
                        float *heads_attn) {
    int max_len = model_max_output(max_decode_len, b->S); /* the rows' stride; each row's own cap below */
    int H = model_heads(m);
    S2S_ASSERT(!heads_attn || H > 1);
    TapeMode mode = tape_enter_inference(t);
    int B = b->B, S = b->S;
    DecodeState ds;
    model_decode_start(t, m, b, 1, max_len, &ds);
    int32_t *tok = arena_alloc(&t->arena, (size_t)B * sizeof *tok);
    int32_t *sent = arena_alloc(&t->arena, (size_t)B * sizeof *sent); /* row → sentence */
    int32_t *rows = arena_alloc(&t->arena, (size_t)B * sizeof *rows);
    int32_t *bests = arena_alloc(&t->arena, (size_t)B * sizeof *bests);
    uint8_t *done = arena_calloc(&t->arena, (size_t)B); /* by sentence */
    for (int i = 0; i < B; i++) {
        tok[i] = TOK_SOS;
        sent[i] = i;
        out_len[i] = 0;
    }
    if (attn) memset(attn, 0, (size_t)B * max_len * S * sizeof *attn);
    if (heads_attn) memset(heads_attn, 0, (size_t)B * max_len * H * S * sizeof *heads_attn);
    for (int step = 0; step < max_len && ds.N > 0; step++) {
        AttnWeights aw = {.want_heads = heads_attn != NULL, .skip = !attn && !heads_attn};
        model_decode_step_pick(t, m, &ds, tok, &aw, bests);
        const Tensor *w = aw.mean;
        int alive = 0;
        for (int r = 0; r < ds.N; r++) {
            int i = sent[r];
            if (done[i]) continue; /* finished, not yet dropped */
            int best = bests[r];
            if (attn && w) memcpy(attn + ((size_t)i * max_len + step) * S, tensor_read(w) + (size_t)r * S, (size_t)S * sizeof *attn);
            if (heads_attn && aw.heads) /* (N·H, 1, S): row r's heads are rows r·H … */
                memcpy(heads_attn + ((size_t)i * max_len + step) * H * S, tensor_read(aw.heads) + (size_t)r * H * S,
                       (size_t)H * S * sizeof *heads_attn);
            if (best == TOK_EOS) {
                done[i] = 1;
                continue;
            }
            out[(size_t)i * max_len + out_len[i]++] = best;
            if (out_len[i] >= model_max_output(max_decode_len, b->src_len[i])) { /* its own cap, as alone */
                done[i] = 1;
                continue;
            }
            tok[r] = best;
            rows[alive++] = r;
        }
        model_decode_settle(t, m, &ds, step);
        /* drop finished sentences once an eighth of the rows are: the copy costs less than
         * the output layer would spend on them */
        if (alive == 0) break;
        if (alive <= ds.N - (ds.N + 7) / 8) {
            for (int k = 0; k < alive; k++) {
                tok[k] = tok[rows[k]];
                sent[k] = sent[rows[k]];
            }
            model_decode_keep_rows(m, &ds, rows, alive);
        }
    }
    tape_leave(t, mode);
}
