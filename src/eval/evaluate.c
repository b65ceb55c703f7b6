/* evaluate.c — loss, perplexity and accuracies over a dataset, batched by length. */
#include "s2s/bleu.h"
#include "s2s/subword.h"
#include "s2s/sacrebleu.h"
#include "s2s/eval.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void idseqs_free(IdSeqs *s) {
    for (int i = 0; i < s->n; i++) free(s->ids[i]);
    free(s->ids);
    free(s->len);
    memset(s, 0, sizeof *s);
}

int eval_max_len(int max_decode_len, int S) { return max_decode_len > 0 ? max_decode_len : 2 * S + 10; }

/* Entropy of the attention rows at real targets, and (reversal) arg-max alignment. */
static void attention_stats(const ModelOutput *o, const Batch *b, int align_offset, double *ent, long *rows,
                            long *aligned, long *align_n) {
    if (!o->attention) return;
    int B = b->B, T1 = b->T - 1, S = b->S;
    for (int bi = 0; bi < B; bi++) {
        int n_out = b->trg_len[bi] - 1; /* outputs with <eos> */
        for (int i = 0; i < n_out; i++) {
            const float *w = o->attention->data + ((size_t)bi * T1 + i) * S;
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

void eval_dataset(Tape *t, Seq2Seq *m, const Dataset *d, const EvalOptions *opt, EvalResult *r, IdSeqs *hyps) {
    int batch_size = opt->batch_size, max_decode_len = opt->max_decode_len;
    bool greedy = opt->greedy;
    const Vocab *trg = opt->trg;
    char *const *refs = opt->refs;
    double ent = 0.0;
    long ent_rows = 0, aligned = 0, align_n = 0;
    memset(r, 0, sizeof *r);
    bool grad = t->grad_enabled, training = t->training;
    t->grad_enabled = false;
    t->training = false;
    BatchPlan plan;
    batchplan_make(&plan, d, batch_size, 0, 0, NULL);
    Batch b;
    batch_init(&b);
    if (hyps) {
        hyps->n = d->n;
        hyps->ids = s2s_xcalloc((size_t)d->n, sizeof *hyps->ids);
        hyps->len = s2s_xcalloc((size_t)d->n, sizeof *hyps->len);
    }
    Bleu bleu;
    bool with_bleu = greedy && refs && trg;
    /* a subword task: its outputs as raw text, scored at the end as sacreBLEU scores them */
    char **texts = with_bleu && trg->sub ? s2s_xcalloc((size_t)(d->n ? d->n : 1), sizeof *texts) : NULL;
    if (with_bleu) bleu_init(&bleu);
    const char **words = NULL;
    int words_cap = 0;
    double loss_sum = 0.0;
    long tf_correct = 0, exact = 0, tok_correct = 0, ref_tokens = 0;
    int V = m->trg_vocab;
    for (int k = 0; k < plan.n_batches; k++) {
        if (opt->stop && atomic_load(opt->stop)) {
            r->interrupted = true;
            break;
        }
        int n = plan.start[k + 1] - plan.start[k];
        batch_fill(&b, d, plan.order + plan.start[k], n);
        tape_reset(t);
        ModelOutput o = model_forward(t, m, &b, NULL);
        loss_sum += (double)o.loss->data[0] * o.n_tokens;
        attention_stats(&o, &b, opt->align_offset, &ent, &ent_rows, &aligned, &align_n);
        r->tokens += o.n_tokens;
        for (int row = 0; row < tensor_rows(o.logits); row++) {
            if (o.targets[row] == TOK_PAD) continue;
            const float *x = o.logits->data + (size_t)row * V;
            int best = 0;
            for (int v = 1; v < V; v++)
                if (x[v] > x[best]) best = v;
            tf_correct += best == o.targets[row];
        }
        if (!greedy) continue;
        tape_reset(t);
        int L = eval_max_len(max_decode_len, b.S);
        int32_t *out = s2s_xmalloc((size_t)n * L * sizeof *out);
        int *out_len = s2s_xmalloc((size_t)n * sizeof *out_len);
        model_greedy(t, m, &b, L, out, out_len, NULL);
        for (int i = 0; i < n; i++) {
            int e = b.index[i];
            const int32_t *ref = d->ids + d->trg_off[e] + 1; /* without <sos> … */
            int rl = d->trg_len[e] - 2;                       /* … and <eos> */
            const int32_t *h = out + (size_t)i * L;
            int same = 0;
            for (int p = 0; p < rl && p < out_len[i]; p++) same += h[p] == ref[p];
            tok_correct += same;
            ref_tokens += rl;
            exact += out_len[i] == rl && same == rl;
            if (texts) {
                texts[e] = subword_decode(trg->sub, h, out_len[i]);
            } else if (with_bleu) {
                if (out_len[i] > words_cap) words = s2s_xrealloc(words, (size_t)(words_cap = 2 * out_len[i]) * sizeof *words);
                for (int p = 0; p < out_len[i]; p++) words[p] = trg->tokens[h[p]];
                char *ref_copy = strdup(refs[e]);
                char **rt = NULL;
                int rcap = 0, nr = text_split(ref_copy, &rt, &rcap);
                bleu_add_tokens(&bleu, words, out_len[i], (const char *const *)rt, nr);
                free(rt);
                free(ref_copy);
            }
            if (hyps) {
                hyps->len[e] = out_len[i];
                hyps->ids[e] = s2s_xmalloc((size_t)(out_len[i] ? out_len[i] : 1) * sizeof(int32_t));
                memcpy(hyps->ids[e], h, (size_t)out_len[i] * sizeof(int32_t));
            }
        }
        free(out);
        free(out_len);
    }
    r->n = d->n;
    r->loss = r->tokens ? loss_sum / (double)r->tokens : 0.0;
    r->ppl = exp(r->loss);
    r->tf_token_acc = r->tokens ? (double)tf_correct / (double)r->tokens : 0.0;
    if (greedy) {
        r->exact_match = d->n ? (double)exact / d->n : 0.0;
        r->token_acc = ref_tokens ? (double)tok_correct / (double)ref_tokens : 0.0;
    }
    r->has_attn = ent_rows > 0;
    r->attn_entropy = ent_rows ? ent / (double)ent_rows : 0.0;
    r->has_align = align_n > 0;
    r->align_acc = align_n ? (double)aligned / (double)align_n : 0.0;
    if (texts && !r->interrupted) {
        SbBleuOpts bo = sb_bleu_defaults();
        SbChrfOpts co = sb_chrf_defaults();
        SbBleu sb;
        char *const *const one[1] = {refs};
        sb_bleu(&bo, texts, one, 1, d->n, &sb);
        r->bleu = sb.score;
        r->chrf = sb_chrf(&co, texts, one, 1, d->n);
        r->has_bleu = r->sacre = true;
    } else if (with_bleu && !texts) {
        r->bleu = bleu_score(&bleu).bleu;
        r->has_bleu = true;
    }
    if (with_bleu) bleu_free(&bleu);
    if (texts) text_free_lines(texts, d->n);
    free(words);
    batch_free(&b);
    batchplan_free(&plan);
    t->grad_enabled = grad;
    t->training = training;
}
