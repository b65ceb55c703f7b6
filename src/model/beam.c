/* beam.c — beam search over a batch of sentences (one model or an ensemble), and forced
 * decoding (the log-probability of given targets). */
#include "model_internal.h"
#include "s2s/fastmath.h"
#include "s2s/par.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef BeamCand Cand;

static int cmp_cand(const void *a, const void *b) {
    const Cand *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? 1 : -1;
    if (x->slot != y->slot) return x->slot - y->slot; /* ties: a total order, deterministic */
    return x->token - y->token;
}

static int cmp_hyp(const void *a, const void *b) {
    const BeamHyp *x = a, *y = b;
    if (x->norm != y->norm) return x->norm < y->norm ? 1 : -1;
    return x->len - y->len;
}

typedef struct Sentence {
    BeamHyp *fin;
    int n_fin, cap_fin;
    bool done;
} Sentence;

static void finish(Sentence *s, const int32_t *ids, int len, float score, bool ended, float alpha) {
    if (s->n_fin == s->cap_fin) s->fin = s2s_xrealloc(s->fin, (size_t)(s->cap_fin = s->cap_fin ? 2 * s->cap_fin : 8) * sizeof *s->fin);
    BeamHyp *h = &s->fin[s->n_fin++];
    h->ids = s2s_xmalloc((size_t)(len ? len : 1) * sizeof *ids);
    memcpy(h->ids, ids, (size_t)len * sizeof *ids);
    h->len = len;
    h->score = score;
    h->norm = score / powf((float)(len + (ended ? 1 : 0) > 0 ? len + (ended ? 1 : 0) : 1), alpha);
}

/* Whether a score base + (x − lse) of x[0..16) is not ≤ last (a NaN is not): the scalar
 * sums in each lane, one block test. */
static bool any_above16(const float *x, float base, float lse, float last) {
    S2sF8 b, l, t, x0, x1;
    s2s_f8_splat(&b, base);
    s2s_f8_splat(&l, lse);
    s2s_f8_splat(&t, last);
    s2s_f8_load(&x0, x);
    s2s_f8_load(&x1, x + 8);
    S2sI8 le = (b + (x0 - l) <= t) & (b + (x1 - l) <= t);
    uint64_t w[4];
    memcpy(w, &le, sizeof w);
    return (w[0] & w[1] & w[2] & w[3]) != UINT64_MAX;
}

int beam_top_tokens(const float *x, int V, float base, float lse, int C, int slot, BeamCand *top) {
    /* insertion into a small sorted list. Once it is full, a token whose score is not above
     * the last one's cannot enter (a tie goes to the smaller token, scanned earlier): blocks
     * of 16 with none above it are skipped after one vectorised test */
    int nt = 0;
    for (int v0 = 0; v0 < V; v0 += 16) {
        int v1 = v0 + 16 < V ? v0 + 16 : V;
        if (nt == C && v1 - v0 == 16 && !any_above16(x + v0, base, lse, top[C - 1].score)) continue;
        for (int v = v0; v < v1; v++) {
            if (v == TOK_PAD || v == TOK_SOS) continue;
            Cand c = {base + (x[v] - lse), slot, v};
            if (nt == C && cmp_cand(&c, &top[nt - 1]) >= 0) continue;
            int p = nt < C ? nt++ : C - 1;
            while (p > 0 && cmp_cand(&c, &top[p - 1]) < 0) {
                top[p] = top[p - 1];
                p--;
            }
            top[p] = c;
        }
    }
    return nt;
}

void beam_hyps_free(BeamHyp *h, int n) {
    for (int i = 0; i < n; i++) free(h[i].ids);
}

/* One step of the search for the sentences in slots [b0, b1): each writes only its own rows,
 * candidates and finished list, so sentences run on several threads (par_for). */
typedef struct BeamStep {
    const float *logits;          /* or, for an ensemble, log-probabilities already */
    bool log_probs;
    int V, K, C, step, max_len;
    float alpha;
    float *score;
    const int32_t *hist;
    int32_t *nhist, *tok, *parent;
    Cand *cand;        /* K × C per slot */
    Sentence *sent;    /* by sentence */
    const int32_t *of; /* slot → sentence: the slots are the sentences still decoded */
} BeamStep;

static void beam_sentences(void *ctx, size_t b0, size_t b1) {
    const BeamStep *j = ctx;
    int V = j->V, K = j->K, C = j->C, step = j->step, stride = j->max_len + 1;
    float *score = j->score;
    for (size_t bi = b0; bi < b1; bi++) {
        Sentence *s = &j->sent[j->of[bi]];
        Cand *cand = j->cand + bi * (size_t)K * C;
        int nc = 0;
        for (int k = 0; k < K; k++) {
            int row = (int)bi * K + k;
            j->parent[row] = row; /* dead hypotheses and finished sentences keep their rows */
            if (s->done || score[row] == -INFINITY) continue;
            const float *x = j->logits + (size_t)row * V;
            float lse = j->log_probs ? 0.0f : s2s_logsumexp(x, V);
            Cand top[64];
            int nt = beam_top_tokens(x, V, score[row], lse, C, k, top);
            memcpy(cand + nc, top, (size_t)nt * sizeof *top);
            nc += nt;
        }
        if (s->done) continue;
        qsort(cand, (size_t)nc, sizeof *cand, cmp_cand);
        int live = 0;
        for (int r = 0; r < nc && live < K; r++) {
            const Cand *c = &cand[r];
            int from = (int)bi * K + c->slot;
            if (c->token == TOK_EOS) {
                if (r < K) finish(s, j->hist + (size_t)from * stride, step, c->score, true, j->alpha);
                continue;
            }
            int to = (int)bi * K + live++;
            j->parent[to] = from;
            memcpy(j->nhist + (size_t)to * stride, j->hist + (size_t)from * stride, (size_t)step * sizeof *j->hist);
            j->nhist[(size_t)to * stride + step] = c->token;
            score[to] = c->score;
            j->tok[to] = c->token;
        }
        for (int k = live; k < K; k++) score[bi * K + k] = -INFINITY;
        if (s->n_fin >= K || live == 0) s->done = true;
    }
}

/* The ensemble's log-probabilities: the mean over the models of each row's log-softmax. */
typedef struct MeanJob {
    Tensor *const *logits;
    float *out;
    int n, V;
} MeanJob;

static void mean_rows(void *ctx, size_t r0, size_t r1) {
    const MeanJob *j = ctx;
    int V = j->V;
    for (size_t r = r0; r < r1; r++) {
        float *o = j->out + r * (size_t)V;
        for (int k = 0; k < j->n; k++) {
            const float *x = tensor_read(j->logits[k]) + r * (size_t)V;
            float lse = s2s_logsumexp(x, V);
            for (int v = 0; v < V; v++) o[v] = (k ? o[v] : 0.0f) + (x[v] - lse);
        }
        float inv = 1.0f / (float)j->n;
        for (int v = 0; v < V; v++) o[v] *= inv;
    }
}

void model_beam(Tape *t, Seq2Seq *m, const Batch *b, int K, int max_decode_len, float alpha, int n_best, BeamHyp *out) {
    model_beam_ensemble(&t, &m, 1, b, K, max_decode_len, alpha, n_best, out);
}

/* At a sentence's own cap, its live hypotheses end unfinished (what the end of the steps does
 * to all of them), as they would when it is decoded alone. */
static void cap_sentences(const BeamStep *j, const Batch *b, int ns, int max_decode_len) {
    int K = j->K, stride = j->max_len + 1, len = j->step + 1;
    for (int si = 0; si < ns; si++) {
        Sentence *s = &j->sent[j->of[si]];
        if (s->done || len < model_max_output(max_decode_len, b->src_len[j->of[si]])) continue;
        for (int k = 0; k < K; k++)
            if (j->score[si * K + k] != -INFINITY)
                finish(s, j->nhist + (size_t)(si * K + k) * stride, len, j->score[si * K + k], false, j->alpha);
        s->done = true;
    }
}

void model_beam_ensemble(Tape *const *tapes, Seq2Seq *const *ms, int n_models, const Batch *b, int K, int max_decode_len,
                         float alpha, int n_best, BeamHyp *out) {
    int max_len = model_max_output(max_decode_len, b->S); /* the histories' stride; each sentence's own cap in cap_sentences */
    S2S_ASSERT(K >= 1 && K <= 32 && n_best >= 1 && n_best <= K); /* 2K candidates per slot fit top[64] */
    S2S_ASSERT(n_models >= 1 && n_models <= MODEL_MAX_ENSEMBLE);
    Seq2Seq *m = ms[0];
    TapeMode mode[MODEL_MAX_ENSEMBLE];
    for (int k = 0; k < n_models; k++) {
        S2S_ASSERT(ms[k]->trg_vocab == m->trg_vocab);
        mode[k] = tape_enter_inference(tapes[k]);
    }
    int B = b->B, N = B * K, V = m->trg_vocab, C = 2 * K; /* candidates kept per slot */
    if (C > V) C = V;
    DecodeState dss[MODEL_MAX_ENSEMBLE];
    for (int k = 0; k < n_models; k++) model_decode_start(tapes[k], ms[k], b, K, max_len, &dss[k]);
    float *mean = n_models > 1 ? s2s_xmalloc((size_t)N * V * sizeof *mean) : NULL;
    float *score = s2s_xmalloc((size_t)N * sizeof *score);
    int32_t *hist = s2s_xmalloc((size_t)N * (max_len + 1) * sizeof *hist), *nhist = s2s_xmalloc((size_t)N * (max_len + 1) * sizeof *nhist);
    int32_t *tok = s2s_xmalloc((size_t)N * sizeof *tok), *parent = s2s_xmalloc((size_t)N * sizeof *parent);
    Cand *cand = s2s_xmalloc((size_t)B * K * C * sizeof *cand);
    Sentence *sent = s2s_xcalloc((size_t)B, sizeof *sent);
    for (int i = 0; i < N; i++) {
        score[i] = i % K == 0 ? 0.0f : -INFINITY; /* one live hypothesis to start */
        tok[i] = TOK_SOS;
    }
    int32_t *of = s2s_xmalloc((size_t)B * sizeof *of), *rows = s2s_xmalloc((size_t)N * sizeof *rows);
    for (int i = 0; i < B; i++) of[i] = i;
    int step = 0, n_done = 0, ns = B; /* slots: the sentences still in the batch, K rows each */
    for (; step < max_len && n_done < B; step++) {
        int n = ns * K;
        Tensor *logits[MODEL_MAX_ENSEMBLE];
        for (int k = 0; k < n_models; k++) logits[k] = model_decode_step(tapes[k], ms[k], &dss[k], tok, NULL);
        if (mean) {
            MeanJob mj = {logits, mean, n_models, V};
            par_for((size_t)n, (size_t)V * n_models, mean_rows, &mj);
        }
        BeamStep job = {mean ? mean : tensor_read(logits[0]), mean != NULL, V, K, C, step, max_len, alpha, score, hist, nhist, tok,
                        parent, cand, sent, of};
        par_for((size_t)ns, (size_t)K * V, beam_sentences, &job);
        cap_sentences(&job, b, ns, max_decode_len);
        /* a done sentence's rows are read no more (nor its history): only the others count */
        int alive = 0;
        for (int si = 0; si < ns; si++) alive += !sent[of[si]].done;
        n_done = B - alive; /* the dropped sentences were done */
        int32_t *sw = hist;
        hist = nhist;
        nhist = sw;
        for (int k = 0; k < n_models; k++) {
            model_decode_reorder(tapes[k], ms[k], &dss[k], parent);
            model_decode_settle(tapes[k], ms[k], &dss[k], step);
        }
        /* drop the done sentences once an eighth of the slots are (greedy decoding's rule:
         * the copy costs less than the output layer would spend on their rows) */
        if (alive == 0 || alive > ns - (ns + 7) / 8) continue;
        int a = 0;
        for (int si = 0; si < ns; si++) {
            if (sent[of[si]].done) continue;
            for (int k = 0; k < K; k++) {
                int from = si * K + k, to = a * K + k;
                rows[to] = from;
                score[to] = score[from];
                tok[to] = tok[from];
                memmove(hist + (size_t)to * (max_len + 1), hist + (size_t)from * (max_len + 1), (size_t)(step + 1) * sizeof *hist);
            }
            of[a++] = of[si];
        }
        for (int k = 0; k < n_models; k++) model_decode_keep_rows(ms[k], &dss[k], rows, alive * K);
        ns = alive;
    }
    /* at max_len the unfinished hypotheses compete with the finished, after normalisation */
    for (int si = 0; si < ns; si++) {
        Sentence *s = &sent[of[si]];
        if (!s->done)
            for (int k = 0; k < K; k++)
                if (score[si * K + k] != -INFINITY)
                    finish(s, hist + (size_t)(si * K + k) * (max_len + 1), step, score[si * K + k], false, alpha);
    }
    for (int bi = 0; bi < B; bi++) {
        Sentence *s = &sent[bi];
        qsort(s->fin, (size_t)s->n_fin, sizeof *s->fin, cmp_hyp);
        for (int j = 0; j < n_best; j++) {
            BeamHyp *o = &out[(size_t)bi * n_best + j];
            if (j < s->n_fin) {
                *o = s->fin[j];
                s->fin[j].ids = NULL;
            } else {
                memset(o, 0, sizeof *o);
            }
        }
        for (int j = 0; j < s->n_fin; j++) free(s->fin[j].ids);
        free(s->fin);
    }
    free(sent);
    free(of);
    free(rows);
    free(cand);
    free(parent);
    free(tok);
    free(hist);
    free(nhist);
    free(score);
    free(mean);
    for (int k = 0; k < n_models; k++) {
        tape_leave(tapes[k], mode[k]);
    }
}

void model_score_targets(Tape *const *tapes, Seq2Seq *const *ms, int n_models, const Batch *b, float *lp) {
    S2S_ASSERT(n_models >= 1 && n_models <= MODEL_MAX_ENSEMBLE);
    int B = b->B, T1 = b->T - 1;
    memset(lp, 0, (size_t)B * T1 * sizeof *lp);
    for (int k = 0; k < n_models; k++) {
        Tape *t = tapes[k];
        TapeMode mode = tape_enter_inference(t);
        tape_reset(t);
        ModelOutput o = model_forward_all(t, ms[k], b); /* logits ((T-1)·B, V), time-major */
        int V = ms[k]->trg_vocab;
        for (int i = 0; i < T1; i++)
            for (int r = 0; r < B; r++) {
                int32_t y = b->trg[(size_t)(i + 1) * B + r];
                if (y == TOK_PAD) continue;
                const float *x = tensor_read(o.logits) + ((size_t)i * B + r) * V;
                lp[(size_t)r * T1 + i] += (x[y] - s2s_logsumexp(x, V)) / (float)n_models;
            }
        tape_reset(t);
        tape_leave(t, mode);
    }
}
