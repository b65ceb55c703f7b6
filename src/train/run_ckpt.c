/* run_ckpt.c — a run's checkpoints: last.bin (with the training state) and model.bin
 * written, and the checkpoints kept for averaging pruned to keep_last and keep_best. */
#include "run_internal.h"
#include "s2s/subword.h"
#include "s2s/runlog.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

S2sStatus run_save(Run *r, const char *path, bool last, S2sError *err) {
    if (!r->root) return S2S_OK; /* rank 0 writes the run's files */
    char *conf = config_to_json(r->cfg);
    char *state = NULL;
    if (last) {
        r->st.adam_step = r->adam.step;
        double now = run_now();
        r->st.seconds += now - r->t0;
        r->t0 = now;
        if (fflush(r->log) != 0) {
            free(conf);
            return s2s_fail(err, S2S_ERR_IO, "%s: cannot write: %s", r->dir.log, strerror(errno));
        }
        r->st.log_bytes = ftell(r->log);
        state = train_state_to_json(&r->st, &r->data_digest);
    }
    size_t sub_len = 0, trg_len = 0;
    char *sub = r->data.src_vocab.sub ? subword_bytes(r->data.src_vocab.sub, &sub_len) : NULL;
    char *trg = r->data.trg_vocab.sub ? subword_bytes(r->data.trg_vocab.sub, &trg_len) : NULL;
    if (trg && trg_len == sub_len && !memcmp(trg, sub, sub_len)) { /* one model, both sides */
        free(trg);
        trg = NULL;
        trg_len = 0;
    }
    CkptSave s = {conf,
                  (const char *const *)r->data.src_vocab.tokens, r->data.src_vocab.size,
                  (const char *const *)r->data.trg_vocab.tokens, r->data.trg_vocab.size,
                  &r->model.params, last && r->model.params.m != NULL, state, sub, sub_len, trg, trg_len,
                  last && r->model.params.ema != NULL};
    S2sStatus rc = ckpt_save(path, &s, err);
    free(sub);
    free(trg);
    free(conf);
    free(state);
    return rc;
}

typedef struct Kept {
    long step;
    double metric;
    bool known;
} Kept;

typedef struct KeptLog {
    Kept *k;
    int n;
} KeptLog;

static void kept_metric(void *ctx, const char *type, const cJSON *j) {
    KeptLog *kl = ctx;
    if (strcmp(type, LOG_EPOCH) != 0 && strcmp(type, LOG_VALID) != 0) return;
    long step = (long)runlog_num(j, LOG_STEP, -1);
    double m = runlog_num(j, LOG_METRIC, NAN);
    for (int i = 0; i < kl->n; i++)
        if (kl->k[i].step == step && isfinite(m)) {
            kl->k[i].metric = m;
            kl->k[i].known = true;
        }
}

/* After a validation's log line: of checkpoints/, the last keep_last by step and the best
 * keep_best by the metric (read back from the log, so a resumed run decides as an
 * uninterrupted one) stay; the others are deleted. A file whose metric the log lacks counts
 * among the last only. */
void run_prune_checkpoints(Run *r) {
    const ConfigTrain *tc = &r->cfg->train;
    if (tc->keep_last <= 0 && tc->keep_best <= 0) return;
    char path[PATH_MAX + 64];
    long *steps;
    int n = rundir_checkpoint_steps(r->dir.dir, &steps);
    if (n <= 0) return;
    KeptLog kl = {s2s_xmalloc((size_t)n * sizeof *kl.k), n};
    for (int i = 0; i < n; i++) kl.k[i] = (Kept){steps[i], NAN, false};
    free(steps);
    S2sError err;
    if (tc->keep_best > 0 && runlog_each(r->dir.dir, kept_metric, &kl, &err) != S2S_OK) {
        free(kl.k);
        return; /* keep everything rather than delete on a guess */
    }
    bool higher = run_higher_is_better(tc->metric);
    for (int i = 0; i < kl.n; i++) {
        bool keep = i >= kl.n - tc->keep_last;
        if (!keep && kl.k[i].known) { /* among the best keep_best: fewer than that many are better */
            int better = 0; /* strictly better, or as good and later */
            for (int j = 0; j < kl.n; j++) {
                if (j == i || !kl.k[j].known) continue;
                double a = kl.k[j].metric, b = kl.k[i].metric;
                better += (higher ? a > b : a < b) || (a == b && j > i);
            }
            keep = better < tc->keep_best;
        }
        if (!keep) {
            rundir_checkpoint_path(path, sizeof path, r->dir.dir, kl.k[i].step);
            unlink(path);
        }
    }
    free(kl.k);
}
