/* compare_runs.c — the results of finished runs, read from their folders (config, log, test
 * outputs), for ./compare. */
#include "s2s/report.h"
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

/* Keys that never name a variant: every run has its own seed and name, and the keys that
 * change no number (threads, logging, kept files, how ranks sum). */
static bool key_names_variants(int k) {
    const char *path = config_key_info(k).path;
    return config_key_changes_numbers(k) && strcmp(path, "seed") && strcmp(path, "name");
}

/* A key's value as a label: JSON strings without their quotes. */
static void label_value(const Config *c, int k, char *buf, size_t n) {
    char v[300];
    config_key_value(c, k, v, sizeof v);
    size_t len = strlen(v);
    size_t from = 0;
    if (len >= 2 && v[0] == '"' && v[len - 1] == '"') from = 1, len -= 2;
    if (len >= n) len = n - 1; /* cut */
    memcpy(buf, v + from, len);
    buf[len] = '\0';
}

/* Whether key k tells runs apart: two runs under which it means something (a transformer's
 * d_model means nothing to an RNN) hold different values; with a name, only that config
 * name's runs count. */
static bool key_differs(const RunResult *runs, int n, int k, const char *name) {
    for (int i = 0; i < n; i++) {
        if (!config_key_applies(&runs[i].cfg, k) || (name && strcmp(runs[i].cfg.name, name))) continue;
        char a[300], b[300];
        config_key_value(&runs[i].cfg, k, a, sizeof a);
        for (int j = i + 1; j < n; j++) {
            if (!config_key_applies(&runs[j].cfg, k) || (name && strcmp(runs[j].cfg.name, name))) continue;
            config_key_value(&runs[j].cfg, k, b, sizeof b);
            if (strcmp(a, b)) return true;
        }
    }
    return false;
}

/* Appends part to a name of cap bytes; a part that does not fit ends the name with "…". */
static bool append_part(char *dst, size_t cap, size_t *len, const char *part) {
    static const char MORE[] = "\xe2\x80\xa6"; /* … */
    size_t k = strlen(part);
    if (*len + k + sizeof MORE > cap) {
        if (*len + sizeof MORE <= cap) memcpy(dst + *len, MORE, sizeof MORE), *len += sizeof MORE - 1;
        return false;
    }
    memcpy(dst + *len, part, k + 1);
    *len += k;
    return true;
}

static void label_by_config(RunResult *runs, int n, char *header) {
    int nk = config_key_count(), *diff = s2s_xmalloc((size_t)nk * sizeof *diff), nd = 0;
    for (int k = 0; k < nk; k++)
        if (key_names_variants(k) && key_differs(runs, n, k, NULL)) diff[nd++] = k;
    /* runs of whole configs set side by side (an RNN's recipe against a Transformer's) are
     * named by their configs' names, and by the keys that vary within one config */
    bool by_name = false;
    for (int i = 1; i < n && nd; i++) by_name |= strcmp(runs[i].cfg.name, runs[0].cfg.name) != 0;
    if (by_name) {
        int m = 0;
        for (int d = 0; d < nd; d++) {
            bool within = false;
            for (int i = 0; i < n && !within; i++) within = key_differs(runs, n, diff[d], runs[i].cfg.name);
            if (within) diff[m++] = diff[d];
        }
        nd = m;
    }
    /* runs of one config (seeds apart) are named by their model where model.attention does not
     * apply to it (a Transformer has no attention variant to be named by) */
    bool one_model = !by_name && nd == 0 && !config_key_applies(&runs[0].cfg, config_key_index("model.attention"));
    bool attention_only =
        !by_name && !one_model && (nd == 0 || (nd == 1 && !strcmp(config_key_info(diff[0]).path, "model.attention")));
    snprintf(header, COMPARE_NAME, "%s",
             by_name          ? (nd ? "variant" : "config")
             : one_model         ? "model"
             : attention_only ? "attention"
             : nd == 1        ? config_key_info(diff[0]).path
                              : "variant");
    for (int i = 0; i < n; i++) {
        RunResult *r = &runs[i];
        if (one_model || attention_only) {
            snprintf(r->variant, sizeof r->variant, "%s", one_model ? MODEL_TYPE_NAMES[r->cfg.model.type] : ATTN_KIND_NAMES[r->cfg.model.attention]);
            continue;
        }
        size_t len = 0;
        r->variant[0] = '\0';
        bool first = true;
        if (by_name) {
            append_part(r->variant, sizeof r->variant, &len, r->cfg.name);
            first = false;
        }
        for (int d = 0; d < nd; d++) {
            if (!config_key_applies(&r->cfg, diff[d]) || (by_name && !key_differs(runs, n, diff[d], r->cfg.name))) continue;
            const char *path = config_key_info(diff[d]).path, *dot = strrchr(path, '.');
            char v[128], part[200];
            label_value(&r->cfg, diff[d], v, sizeof v);
            if (nd > 1 || by_name) snprintf(part, sizeof part, "%s%s=%s", first ? "" : ",", dot ? dot + 1 : path, v);
            else snprintf(part, sizeof part, "%s", v);
            first = false;
            if (!append_part(r->variant, sizeof r->variant, &len, part)) break;
        }
    }
    free(diff);
}

void compare_label_runs(RunResult *runs, int n, char *header) {
    /* the runs the user named, and fixed systems, keep their names and name none of the others */
    int n_auto = 0;
    for (int i = 0; i < n; i++) n_auto += !runs[i].label[0] && !runs[i].fixed;
    if (n_auto == n) {
        label_by_config(runs, n, header);
        return;
    }
    if (n_auto) {
        RunResult *a = s2s_xmalloc((size_t)n_auto * sizeof *a);
        int k = 0;
        for (int i = 0; i < n; i++)
            if (!runs[i].label[0] && !runs[i].fixed) a[k++] = runs[i];
        label_by_config(a, n_auto, header);
        k = 0;
        for (int i = 0; i < n; i++)
            if (!runs[i].label[0] && !runs[i].fixed) memcpy(runs[i].variant, a[k++].variant, sizeof runs[i].variant);
        free(a);
    }
    for (int i = 0; i < n; i++)
        if (runs[i].label[0]) memcpy(runs[i].variant, runs[i].label, sizeof runs[i].variant);
    snprintf(header, COMPARE_NAME, "%s", "variant");
}

S2sStatus compare_read_run(RunResult *r, const char *dir, const char *outputs, S2sError *err) {
    memset(r, 0, sizeof *r);
    snprintf(r->dir, sizeof r->dir, "%s", dir);
    char p[600];
    snprintf(p, sizeof p, "%s/config.json", dir);
    Config cfg;
    config_defaults(&cfg);
    S2sStatus st = config_load_run(&cfg, p, err);
    if (st) return st;
    snprintf(r->variant, sizeof r->variant, "%s", ATTN_KIND_NAMES[cfg.model.attention]);
    r->cfg = cfg;
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
    snprintf(r->outputs, sizeof r->outputs, "%s", outputs ? outputs : "");
    snprintf(p, sizeof p, "%s/%s", dir, outputs ? outputs : "test.hyp");
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
        return s2s_fail(err, S2S_ERR_DATA, "%s: %s has %d lines, test.ref %d", dir, outputs ? outputs : "test.hyp", nh, nr);
    }
    return S2S_OK;
}

S2sStatus compare_read_system(RunResult *r, const char *label, const char *path, const RunResult *like,
                              S2sError *err) {
    memset(r, 0, sizeof *r);
    S2S_ASSERT(!like->fixed);
    snprintf(r->dir, sizeof r->dir, "%s", path);
    snprintf(r->label, sizeof r->label, "%s", label); /* compare_label_runs makes it the variant */
    r->fixed = true;
    config_defaults(&r->cfg);
    r->translation = like->translation;
    r->sacre = like->sacre;
    r->best_valid_loss = r->seconds = NAN;
    int nh;
    S2sStatus st = text_read_lines(path, &r->hyp, &nh, err);
    if (st) return st;
    if (nh != like->n) {
        text_free_lines(r->hyp, nh);
        r->hyp = NULL;
        return s2s_fail(err, S2S_ERR_DATA, "%s: %d lines, but the runs' test.ref (%s) has %d", path, nh, like->dir, like->n);
    }
    r->n = nh;
    r->ref = s2s_xcalloc((size_t)(nh ? nh : 1), sizeof *r->ref);
    for (int i = 0; i < nh; i++) {
        size_t len = strlen(like->ref[i]) + 1;
        r->ref[i] = memcpy(s2s_xmalloc(len), like->ref[i], len);
    }
    return S2S_OK;
}
