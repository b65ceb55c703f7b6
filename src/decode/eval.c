/* eval.c — loss, perplexity and accuracies over a dataset, batched by length; under mpirun
 * the batches are shared among the ranks and the figures gathered (the same on every rank, and
 * the same as one process with the ranks' thread count). */
#include "s2s/multibleu.h"
#include "s2s/subword.h"
#include "s2s/sacrebleu.h"
#include "s2s/eval.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void idseqs_free(IdSeqs *s) {
    for (int i = 0; i < s->n; i++) free(s->ids[i]);
    free(s->ids);
    free(s->len);
    memset(s, 0, sizeof *s);
}


/* Entropy of the attention rows at real targets, and (reversal) arg-max alignment. */
static void attention_stats(const ModelOutput *o, const Batch *b, int align_offset, double *ent, long *rows,
                            long *aligned, long *align_n) {
    if (!o->attention) return;
    int B = b->B, T1 = b->T - 1, S = b->S;
    for (int bi = 0; bi < B; bi++) {
        int n_out = b->trg_len[bi] - 1; /* outputs with <eos> */
        for (int i = 0; i < n_out; i++) {
            const float *w = tensor_read(o->attention) + ((size_t)bi * T1 + i) * S;
            double h = 0.0;
            int best = 0;
            for (int s = 0; s < S; s++) {
                if (w[s] > 0.0f) h -= (double)w[s] * log((double)w[s]);
                if (w[s] > w[best]) best = s;
            }
            *ent += h;
            (*rows)++;
            int chars = b->trg_len[bi] - 2;
            if (align_offset >= 0 && i < chars) { /* output i mirrors source character chars-1-i */
                *aligned += best == align_offset + chars - 1 - i;
                (*align_n)++;
            }
        }
    }
}

/* One batch's sums; a dataset's are the batches' added in batch order, so that the figures do
 * not depend on which rank evaluated which batch. */
enum { ST_LOSS, ST_TOKENS, ST_ENT, ST_ENT_ROWS, ST_ALIGNED, ST_ALIGN_N, ST_TF_CORRECT, ST_EXACT, ST_TOK_CORRECT,
       ST_REF_TOKENS, ST_N };

/* Every rank's outputs to every rank: rank p sends the lengths and ids of its batches'
 * sentences (batch k is rank k mod P's), in plan order. */
static void gather_hyps(const Dist *dist, const BatchPlan *plan, IdSeqs *h) {
    int P = dist->size;
    for (int p = 0; p < P; p++) {
        long n = 0, ids = 0;
        for (int k = p; k < plan->n_batches; k += P)
            for (int j = plan->start[k]; j < plan->start[k + 1]; j++, n++)
                if (p == dist->rank) ids += h->len[plan->order[j]];
        if (!n) continue;
        int *len = s2s_xmalloc((size_t)n * sizeof *len);
        long i = 0;
        if (p == dist->rank)
            for (int k = p; k < plan->n_batches; k += P)
                for (int j = plan->start[k]; j < plan->start[k + 1]; j++) len[i++] = h->len[plan->order[j]];
        dist_bcast(dist, len, (size_t)n * sizeof *len, p);
        if (p != dist->rank)
            for (i = 0; i < n; i++) ids += len[i];
        int32_t *all = s2s_xmalloc((size_t)(ids ? ids : 1) * sizeof *all), *w = all;
        i = 0;
        for (int k = p; k < plan->n_batches; k += P)
            for (int j = plan->start[k]; j < plan->start[k + 1]; j++, i++) {
                int e = plan->order[j];
                if (p == dist->rank) memcpy(w, h->ids[e], (size_t)len[i] * sizeof *w);
                w += len[i];
            }
        dist_bcast(dist, all, (size_t)ids * sizeof *all, p);
        if (p != dist->rank) {
            w = all;
            i = 0;
            for (int k = p; k < plan->n_batches; k += P)
                for (int j = plan->start[k]; j < plan->start[k + 1]; j++, i++) {
                    int e = plan->order[j];
                    h->len[e] = len[i];
                    h->ids[e] = s2s_xmalloc((size_t)(len[i] ? len[i] : 1) * sizeof(int32_t));
                    memcpy(h->ids[e], w, (size_t)len[i] * sizeof(int32_t));
                    w += len[i];
                }
        }
        free(all);
        free(len);
    }
}

/* A batch's teacher-forced pass: the plain loss, the attention's statistics and the argmax
 * of each real target's logits, into st. */
static void teacher_forced_batch(Tape *t, Seq2Seq *m, const Batch *b, int align_offset, double *st) {
    int V = m->trg_vocab;
    tape_reset(t);
    ModelOutput o = model_forward(t, m, b, NULL, NULL); /* the plain loss */
    st[ST_LOSS] = (double)tensor_item(o.loss, 0) * o.n_tokens;
    st[ST_TOKENS] = o.n_tokens;
    long ent_rows = 0, aligned = 0, align_n = 0, tf_correct = 0;
    attention_stats(&o, b, align_offset, &st[ST_ENT], &ent_rows, &aligned, &align_n);
    for (int row = 0; row < tensor_rows(o.logits); row++) {
        if (o.targets[row] == TOK_PAD) continue;
        const float *x = tensor_read(o.logits) + (size_t)row * V;
        int best = 0;
        for (int v = 1; v < V; v++)
            if (x[v] > x[best]) best = v;
        tf_correct += best == o.targets[row];
    }
    st[ST_ENT_ROWS] = (double)ent_rows;
    st[ST_ALIGNED] = (double)aligned;
    st[ST_ALIGN_N] = (double)align_n;
    st[ST_TF_CORRECT] = (double)tf_correct;
}

/* A batch's greedy pass: outputs into out_ids (dataset order), exact matches and tokens
 * right against the references into st. */
static void greedy_batch(Tape *t, Seq2Seq *m, const Dataset *d, const Batch *b, int max_decode_len, IdSeqs *out_ids,
                         double *st) {
    int n = b->B;
    tape_reset(t);
    int L = model_max_output(max_decode_len, b->S);
    int32_t *out = s2s_xmalloc((size_t)n * L * sizeof *out);
    int *out_len = s2s_xmalloc((size_t)n * sizeof *out_len);
    model_greedy(t, m, b, max_decode_len, out, out_len, NULL);
    long exact = 0, tok_correct = 0, ref_tokens = 0;
    for (int i = 0; i < n; i++) {
        int e = b->index[i];
        const int32_t *ref = d->ids + d->trg_off[e] + 1; /* without <sos> … */
        int rl = d->trg_len[e] - 2;                       /* … and <eos> */
        const int32_t *h = out + (size_t)i * L;
        int same = 0;
        for (int p = 0; p < rl && p < out_len[i]; p++) same += h[p] == ref[p];
        tok_correct += same;
        ref_tokens += rl;
        exact += out_len[i] == rl && same == rl;
        out_ids->len[e] = out_len[i];
        out_ids->ids[e] = s2s_xmalloc((size_t)(out_len[i] ? out_len[i] : 1) * sizeof(int32_t));
        memcpy(out_ids->ids[e], h, (size_t)out_len[i] * sizeof(int32_t));
    }
    st[ST_EXACT] = (double)exact;
    st[ST_TOK_CORRECT] = (double)tok_correct;
    st[ST_REF_TOKENS] = (double)ref_tokens;
    free(out);
    free(out_len);
}

/* The figures from the sums over the batches. */
static void eval_figures(const double *sum, int n, bool greedy, EvalResult *r) {
    r->tokens = (long)sum[ST_TOKENS];
    r->n = n;
    r->loss = r->tokens ? sum[ST_LOSS] / (double)r->tokens : 0.0;
    r->ppl = exp(r->loss);
    r->tf_token_acc = r->tokens ? sum[ST_TF_CORRECT] / (double)r->tokens : 0.0;
    if (greedy) {
        r->exact_match = n ? sum[ST_EXACT] / n : 0.0;
        r->token_acc = sum[ST_REF_TOKENS] > 0 ? sum[ST_TOK_CORRECT] / sum[ST_REF_TOKENS] : 0.0;
    }
    r->has_attn = sum[ST_ENT_ROWS] > 0;
    r->attn_entropy = sum[ST_ENT_ROWS] > 0 ? sum[ST_ENT] / sum[ST_ENT_ROWS] : 0.0;
    r->has_align = sum[ST_ALIGN_N] > 0;
    r->align_acc = sum[ST_ALIGN_N] > 0 ? sum[ST_ALIGNED] / sum[ST_ALIGN_N] : 0.0;
}

/* BLEU of the greedy outputs: a subword task's as sacreBLEU scores the raw text (and chrF),
 * a word task's as multi-bleu.perl scores the words. */
static void eval_bleu(const Dataset *d, const IdSeqs *out_ids, const Vocab *trg, char *const *refs, EvalResult *r) {
    if (trg->sub) {
        char **texts = s2s_xcalloc((size_t)(d->n ? d->n : 1), sizeof *texts);
        for (int e = 0; e < d->n; e++) texts[e] = subword_decode(trg->sub, out_ids->ids[e], out_ids->len[e]);
        SbBleuOpts bo = sb_bleu_defaults();
        SbChrfOpts co = sb_chrf_defaults();
        SbBleu sb;
        char *const *const one[1] = {refs};
        sb_bleu(&bo, texts, one, 1, d->n, &sb);
        r->bleu = sb.score;
        r->chrf = sb_chrf(&co, texts, one, 1, d->n);
        r->has_bleu = r->sacre = true;
        text_free_lines(texts, d->n);
        return;
    }
    Bleu bleu;
    bleu_init(&bleu);
    const char **words = NULL;
    int words_cap = 0;
    for (int e = 0; e < d->n; e++) {
        int nh = out_ids->len[e];
        if (nh > words_cap) words = s2s_xrealloc(words, (size_t)(words_cap = 2 * nh) * sizeof *words);
        for (int p = 0; p < nh; p++) words[p] = trg->tokens[out_ids->ids[e][p]];
        char *ref_copy = strdup(refs[e]);
        char **rt = NULL;
        int rcap = 0, nr = text_split(ref_copy, &rt, &rcap);
        bleu_add_tokens(&bleu, words, nh, (const char *const *)rt, nr);
        free(rt);
        free(ref_copy);
    }
    r->bleu = bleu_score(&bleu).bleu;
    r->has_bleu = true;
    free(words);
    bleu_free(&bleu);
}

void eval_dataset(Tape *t, Seq2Seq *m, const Dataset *d, const EvalOptions *opt, EvalResult *r, IdSeqs *hyps) {
    bool greedy = opt->greedy;
    const Dist *dist = opt->dist && opt->dist->size > 1 ? opt->dist : NULL;
    int P = dist ? dist->size : 1, me = dist ? dist->rank : 0;
    assert(!dist || !opt->stop); /* every rank must take part in the gathering */
    memset(r, 0, sizeof *r);
    TapeMode mode = tape_enter_inference(t);
    BatchPlan plan;
    batchplan_make(&plan, d, opt->batch_size, 0, 0, NULL);
    Batch b;
    batch_init(&b);
    /* the outputs, in dataset order: for BLEU after the loop (from every rank's), and for the caller */
    IdSeqs own = {0}, *out_ids = hyps ? hyps : &own;
    if (greedy || hyps) {
        out_ids->n = d->n;
        out_ids->ids = s2s_xcalloc((size_t)(d->n ? d->n : 1), sizeof *out_ids->ids);
        out_ids->len = s2s_xcalloc((size_t)(d->n ? d->n : 1), sizeof *out_ids->len);
    }
    double *stats = s2s_xcalloc((size_t)(plan.n_batches ? plan.n_batches : 1) * ST_N, sizeof *stats);
    for (int k = me; k < plan.n_batches; k += P) {
        if (opt->stop && atomic_load(opt->stop)) {
            r->interrupted = true;
            break;
        }
        double *st = stats + (size_t)k * ST_N;
        batch_fill(&b, d, plan.order + plan.start[k], plan.start[k + 1] - plan.start[k]);
        teacher_forced_batch(t, m, &b, opt->align_offset, st);
        if (greedy) greedy_batch(t, m, d, &b, opt->max_decode_len, out_ids, st);
    }
    if (dist) { /* each batch's row is one rank's, zeros elsewhere: the sums are that rank's values exactly */
        for (size_t off = 0, total = (size_t)plan.n_batches * ST_N; off < total;) {
            int part = total - off > (1 << 20) ? 1 << 20 : (int)(total - off);
            dist_sum_doubles(dist, stats + off, part);
            off += (size_t)part;
        }
        if (greedy) gather_hyps(dist, &plan, out_ids);
    }
    double sum[ST_N] = {0};
    for (int k = 0; k < plan.n_batches; k++)
        for (int j = 0; j < ST_N; j++) sum[j] += stats[(size_t)k * ST_N + j];
    free(stats);
    eval_figures(sum, d->n, greedy, r);
    if (greedy && opt->refs && opt->trg && !r->interrupted) eval_bleu(d, out_ids, opt->trg, opt->refs, r);
    idseqs_free(&own);
    batch_free(&b);
    batchplan_free(&plan);
    tape_leave(t, mode);
}
