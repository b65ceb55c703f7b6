/* compare_runs.c — the results of finished runs, read from their folders (config, log, test
 * outputs), for ./compare. */
#include "s2s/compare.h"
#include "s2s/config.h"
#include "s2s/data.h"
#include "s2s/file.h"
#include "s2s/rundir.h"
#include "s2s/runlog.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void compare_free_run(RunResult *r) {
    text_free_lines(r->hyp, r->hyp ? r->n : 0);
    text_free_lines(r->ref, r->ref ? r->n : 0);
    r->hyp = r->ref = NULL;
}

static void note_test(void *ctx, const char *type, const cJSON *j) {
    (void)j;
    if (!strcmp(type, LOG_TEST)) *(bool *)ctx = true;
}

bool compare_run_finished(const char *dir) {
    bool done = false;
    S2sError err;
    return runlog_each(dir, note_test, &done, &err) == S2S_OK && done;
}

typedef struct LogRead {
    RunResult *r;
    bool finished;
} LogRead;

static void read_line_of(void *ctx, const char *type, const cJSON *j) {
    LogRead *lr = ctx;
    RunResult *r = lr->r;
    if (!strcmp(type, LOG_EPOCH)) {
        r->best_valid_loss = fmin(r->best_valid_loss, runlog_num(j, LOG_VALID_ LOG_LOSS, INFINITY));
        r->seconds += runlog_num(j, LOG_EPOCH_S, 0.0);
        int e = (int)runlog_num(j, LOG_EPOCH, 0);
        if (e >= 1 && e <= COMPARE_MAX_EPOCHS) {
            for (int k = r->curve_n; k < e - 1; k++) r->valid_curve[k] = NAN; /* a gap */
            r->valid_curve[e - 1] = r->translation ? runlog_num(j, r->sacre ? LOG_VALID_ LOG_SACREBLEU : LOG_VALID_ LOG_BLEU, NAN)
                                                   : 100.0 * runlog_num(j, LOG_VALID_ LOG_EXACT_MATCH, NAN);
            if (e > r->curve_n) r->curve_n = e;
        }
    } else if (!strcmp(type, LOG_TEST)) {
        lr->finished = true;
        r->epochs = (int)runlog_num(j, LOG_EPOCHS, 0);
        r->test_bleu = runlog_num(j, r->sacre ? LOG_TEST_ LOG_SACREBLEU : LOG_TEST_ LOG_BLEU, NAN);
        r->test_exact = 100.0 * runlog_num(j, LOG_TEST_ LOG_EXACT_MATCH, NAN);
        r->test_token_acc = 100.0 * runlog_num(j, LOG_TEST_ LOG_TOKEN_ACCURACY, NAN);
    }
}

S2sStatus compare_read_run(RunResult *r, const char *dir, S2sError *err) {
    memset(r, 0, sizeof *r);
    snprintf(r->dir, sizeof r->dir, "%s", dir);
    char p[600];
    snprintf(p, sizeof p, "%s/config.json", dir);
    Config cfg;
    config_defaults(&cfg);
    S2sStatus st = config_load(&cfg, p, err);
    if (st) return st;
    snprintf(r->variant, sizeof r->variant, "%s", ATTN_KIND_NAMES[cfg.model.attention]);
    r->seed = cfg.seed;
    r->translation = cfg.task.type == TASK_TRANSLATE;
    r->sacre = cfg.task.subword != SUBWORD_NONE;
    long pid;
    if (file_lock_held(dir, &pid))
        return s2s_fail(err, S2S_ERR_DATA, "%s: a run trains there now (pid %ld); its results are not final", dir, pid);
    r->best_valid_loss = INFINITY;
    LogRead lr = {r, false};
    if ((st = runlog_each(dir, read_line_of, &lr, err))) return st;
    if (!lr.finished) return s2s_fail(err, S2S_ERR_DATA, "%s: the run has not finished (no test line in its log)", dir);
    int nh, nr;
    snprintf(p, sizeof p, "%s/test.hyp", dir);
    if ((st = text_read_lines(p, &r->hyp, &nh, err))) return st;
    snprintf(p, sizeof p, "%s/test.ref", dir);
    if ((st = text_read_lines(p, &r->ref, &nr, err))) {
        text_free_lines(r->hyp, nh);
        r->hyp = NULL;
        return st;
    }
    r->n = nh;
    if (nh != nr) {
        compare_free_run(r);
        return s2s_fail(err, S2S_ERR_DATA, "%s: test.hyp has %d lines, test.ref %d", dir, nh, nr);
    }
    return S2S_OK;
}
