/* run_outputs.c — what a run shows: its log lines, the test split's outputs (test.hyp,
 * test.ref), the pictures of each epoch and the live progress line. */
#include "run_internal.h"
#include "s2s/runlog.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* One line of the log; a line that cannot be written stops the run (a full disk). */
S2sStatus run_log_line(Run *r, cJSON *j, S2sError *err) {
    if (!r->log) { /* a rank other than 0: rank 0 writes the log */
        cJSON_Delete(j);
        return S2S_OK;
    }
    char *txt = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    bool bad = fprintf(r->log, "%s\n", txt) < 0 || fflush(r->log) != 0;
    if (!bad && r->opt->on_log) r->opt->on_log(r->opt->log_user, txt);
    free(txt);
    if (bad) return s2s_fail(err, S2S_ERR_IO, "%s: cannot write: %s", r->dir.log, strerror(errno));
    return S2S_OK;
}

cJSON *run_eval_json(cJSON *j, const char *prefix, const EvalResult *e, bool greedy) {
    char k[64];
#define ADD(name, val) (snprintf(k, sizeof k, "%s%s", prefix, name), cJSON_AddNumberToObject(j, k, val))
    ADD(LOG_LOSS, e->loss);
    ADD(LOG_PPL, e->ppl);
    ADD(LOG_TF_TOKEN_ACCURACY, e->tf_token_acc);
    if (greedy && !e->has_bleu) { /* a reversal's: a translation is scored by BLEU, not position by position */
        ADD(LOG_EXACT_MATCH, e->exact_match);
        ADD(LOG_TOKEN_ACCURACY, e->token_acc);
    }
    if (e->has_bleu) ADD(e->sacre ? LOG_SACREBLEU : LOG_BLEU, e->bleu); /* two metrics: never under one name */
    if (e->sacre) ADD(LOG_CHRF, e->chrf);
    if (e->has_attn) ADD(LOG_ATTENTION_ENTROPY, e->attn_entropy);
    if (e->has_align) ADD(LOG_ALIGNMENT_ACCURACY, e->align_acc);
#undef ADD
    return j;
}

/* test.hyp and test.ref: the greedy outputs and references of the test split, one a line,
 * for significance tests between runs (./compare) and for the user. */
S2sStatus run_write_test_outputs(Run *r, const IdSeqs *hyps, S2sError *err) {
    const Dataset *d = &r->data.test;
    size_t cap = 1 << 16, n[2] = {0, 0};
    char *buf[2] = {s2s_xmalloc(cap), s2s_xmalloc(cap)};
    size_t caps[2] = {cap, cap};
    for (int i = 0; i < d->n; i++) {
        char *line[2];
        line[0] = task_decode_target(&r->cfg->task, &r->data.trg_vocab, hyps->ids[i], hyps->len[i]);
        line[1] = r->data.test_refs ? strdup(r->data.test_refs[i])
                                    : task_decode_target(&r->cfg->task, &r->data.trg_vocab, d->ids + d->trg_off[i] + 1,
                                                         d->trg_len[i] - 2);
        for (int k = 0; k < 2; k++) {
            size_t len = strlen(line[k]);
            while (n[k] + len + 2 > caps[k]) buf[k] = s2s_xrealloc(buf[k], caps[k] *= 2);
            memcpy(buf[k] + n[k], line[k], len);
            n[k] += len;
            buf[k][n[k]++] = '\n';
            free(line[k]);
        }
    }
    char path[PATH_MAX];
    S2sStatus st;
    rundir_path(path, sizeof path, r->dir.dir, RUN_TEST_HYP);
    st = file_write_atomic(path, buf[0], n[0], err);
    rundir_path(path, sizeof path, r->dir.dir, RUN_TEST_REF);
    if (!st) st = file_write_atomic(path, buf[1], n[1], err);
    free(buf[0]);
    free(buf[1]);
    return st;
}

/* After an epoch: heatmaps of the first validation examples (greedy decoding) into
 * dir/attention/, and dir/curves.png. Pictures are secondary: a failure is a warning, and
 * they are drawn after last.bin is safe. */
void run_draw_epoch(Run *r) {
    S2sError err;
    char path[PATH_MAX + 64], title[256];
    const char *dir = r->dir.dir;
    if (model_has_attention(&r->model) && r->data.valid.n > 0) {
        rundir_path(path, sizeof path, dir, RUN_ATTENTION);
        if (file_mkdirs(path, &err)) goto warn;
        int n = r->data.valid.n < 4 ? r->data.valid.n : 4, idx[4] = {0, 1, 2, 3};
        Batch b;
        batch_init(&b);
        batch_fill(&b, &r->data.valid, idx, n);
        int L = model_max_output(r->cfg->train.max_decode_len, b.S);
        int32_t *out = s2s_xmalloc((size_t)n * L * sizeof *out);
        int *len = s2s_xmalloc((size_t)n * sizeof *len);
        float *attn = s2s_xmalloc((size_t)n * L * b.S * sizeof *attn);
        int H = model_heads(&r->model); /* multihead: each head's weights too, in a second picture */
        float *heads = H > 1 ? s2s_xmalloc((size_t)n * L * H * b.S * sizeof *heads) : NULL;
        tape_reset(&r->tape);
        model_greedy_heads(&r->tape, &r->model, &b, r->cfg->train.max_decode_len, out, len, attn, heads);
        S2sStatus st = S2S_OK;
        for (int i = 0; i < n && !st; i++) {
            int e = b.index[i];
            DecodedAttention a = {r->data.valid.ids + r->data.valid.src_off[e], r->data.valid.src_len[e], out + (size_t)i * L,
                                  len[i], len[i] < L, attn + (size_t)i * L * b.S, b.S};
            snprintf(path, sizeof path, "%s/%s/epoch%02d_ex%d.png", dir, RUN_ATTENTION, r->st.epoch, i + 1);
            snprintf(title, sizeof title, "%s - %s attention - epoch %d - validation example %d", r->cfg->name,
                     model_attention_name(&r->model), r->st.epoch, i + 1);
            st = visuals_heatmap(path, title, &r->data.src_vocab, &r->data.trg_vocab, &a, r->font, &err);
            if (!st && heads) {
                snprintf(path, sizeof path, "%s/%s/epoch%02d_ex%d_heads.png", dir, RUN_ATTENTION, r->st.epoch, i + 1);
                snprintf(title, sizeof title, "%s - epoch %d - example %d - mean of %d heads", r->cfg->name, r->st.epoch, i + 1, H);
                st = visuals_heatmap_heads(path, title, &r->data.src_vocab, &r->data.trg_vocab, &a, H,
                                           heads + (size_t)i * L * H * b.S, r->font, &err);
            }
        }
        free(out);
        free(len);
        free(attn);
        free(heads);
        batch_free(&b);
        if (st) goto warn;
    }
    snprintf(title, sizeof title, "%s - learning curves", r->cfg->name);
    if (visuals_curves(dir, title, r->font, &err)) goto warn;
    return;
warn:
    if (r->opt->out) fprintf(r->opt->out, "warning: pictures not drawn: %s\n", err.msg);
}

void run_progress_start(Run *r, int epoch, int k, int nb) {
    if (!r->opt->progress) return;
    fprintf(r->opt->progress, "\r\033[Kepoch %d/%d  step %d/%d  (the first step of the epoch: reading, planning)",
            epoch + 1, r->cfg->train.epochs, k + 1, nb);
    fflush(r->opt->progress);
}

void run_progress(Run *r, int epoch, int k, int nb, double loss, double tps, double eta) {
    if (!r->opt->progress) return;
    int em = (int)(eta / 60), es = (int)eta % 60;
    fprintf(r->opt->progress, "\r\033[Kepoch %d/%d  step %d/%d  loss %.4f  %.0f tok/s  ETA %d:%02d", epoch + 1,
            r->cfg->train.epochs, k + 1, nb, loss, tps, em, es);
    if (r->cfg->train.max_steps > 0) fprintf(r->opt->progress, "  (train.max_steps %ld)", r->cfg->train.max_steps);
    fflush(r->opt->progress);
}
