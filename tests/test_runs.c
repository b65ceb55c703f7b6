/* test_runs.c — what a run folder guarantees: one run per folder (refused, overwritten,
 * locked), no result printed that is not this run's, a resume state checked against the
 * config, the data and the log, checkpoints every N steps that survive SIGKILL at random
 * points bit for bit, signals during the final test, and sizes this machine cannot hold
 * refused before anything is allocated. Runs the binaries of this build ($S2S_BIN_DIR). */
#include "test_util.h"
#include "s2s/checkpoint.h"
#include "s2s/report.h"
#include "s2s/file.h"
#include "s2s/model.h"
#include "s2s/train_state.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The tiny.json: 200 pairs, 13 steps an epoch. */
static const char *TINY =
    "{\"name\": \"tiny\", \"seed\": 1,"
    " \"task\": {\"type\": \"reverse\", \"train_size\": 200, \"valid_size\": 50, \"test_size\": %d, \"max_len\": 10},"
    " \"model\": {\"embedding\": 8, \"encoder_hidden\": 16, \"decoder_hidden\": 16},"
    " \"train\": {\"batch_size\": 16, \"epochs\": %d}}";

static void tiny(const char *dir, int epochs, int test_size) {
    char p[512];
    snprintf(p, sizeof p, "%s/tiny.json", dir);
    tu_write(p, TINY, test_size, epochs);
}

/* dir/name in one of eight rotating buffers (several in one expression, nested too). */
static int count_in_log(const char *dir, const char *type) {
    char *log = tu_slurp(tu_path(dir, "log.jsonl"), NULL);
    if (!log) return -1;
    char want[64];
    snprintf(want, sizeof want, "{\"type\":\"%s\"", type);
    int n = 0;
    for (char *p = log; (p = strstr(p, want)); p++) n++;
    free(log);
    return n;
}

Test(runs, a_folder_with_a_run_is_refused_and_overwrite_starts_anew, .timeout = 120) {
    char *d = tu_tmpdir();
    tiny(d, 2, 50);
    cr_assert_eq(tu_sh("%s/train --config %s/tiny.json --out %s/D --set epochs=3 > /dev/null", tu_bin(), d, d), 0);
    cr_assert_eq(tu_sh("cp %s/D/model.bin %s/old.bin && cp %s/D/log.jsonl %s/old.log", d, d, d, d), 0);
    /* the D4: a new run into the folder would truncate the log and test the old model */
    int rc = tu_sh("%s/train --config %s/tiny.json --out %s/D --seed 5 --pause-at 3 > %s/out.txt 2> %s/err.txt", tu_bin(),
                   d, d, d, d);
    cr_expect_eq(rc, 2);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "holds a run already") && tu_file_has(tu_path(d, "err.txt"), "--resume") &&
                  tu_file_has(tu_path(d, "err.txt"), "--overwrite"),
              "the message says what to type instead");
    cr_expect(!tu_file_has(tu_path(d, "out.txt"), "test ("), "nothing was tested");
    cr_expect(tu_same_file(tu_path(d, "D/model.bin"), tu_path(d, "old.bin")), "model.bin untouched");
    cr_expect(tu_same_file(tu_path(d, "D/log.jsonl"), tu_path(d, "old.log")), "log untouched");

    /* --overwrite: the old run's files go; a pause before any validation tests nothing */
    rc = tu_sh("%s/train --config %s/tiny.json --out %s/D --seed 5 --pause-at 3 --overwrite > %s/out.txt 2> %s/err.txt",
               tu_bin(), d, d, d, d);
    cr_expect_eq(rc, 0);
    cr_expect(tu_file_has(tu_path(d, "out.txt"), "paused after step 3"), "paused is said");
    cr_expect(!tu_file_has(tu_path(d, "out.txt"), "test (") && !tu_file_has(tu_path(d, "out.txt"), "model:"), "no result, no model claimed");
    cr_expect(access(tu_path(d, "D/model.bin"), F_OK) != 0, "the old model.bin was deleted");
    cr_expect_eq(count_in_log(tu_path(d, "D"), "test"), 0);
    cr_expect(!compare_run_finished(tu_path(d, "D")), "a paused run is not finished");
    /* a pause at an epoch's end validates but does not test either (D31) */
    cr_expect_eq(tu_sh("%s/train --resume %s/D --pause-at 13 > %s/out.txt", tu_bin(), d, d), 0);
    cr_expect(tu_file_has(tu_path(d, "out.txt"), "epoch  1") && !tu_file_has(tu_path(d, "out.txt"), "test ("));
    cr_expect_eq(count_in_log(tu_path(d, "D"), "test"), 0);
    cr_expect(!compare_run_finished(tu_path(d, "D")));
    /* and it finishes as one run */
    cr_expect_eq(tu_sh("%s/train --resume %s/D > %s/out.txt", tu_bin(), d, d), 0);
    cr_expect(tu_file_has(tu_path(d, "out.txt"), "test (best checkpoint)") && tu_file_has(tu_path(d, "out.txt"), "model:"));
    cr_expect_eq(count_in_log(tu_path(d, "D"), "test"), 1);
    cr_expect(compare_run_finished(tu_path(d, "D")));

    /* a finished run whose model.bin went missing is an error, never a printed model (D25) */
    unlink(tu_path(d, "D/model.bin"));
    rc = tu_sh("%s/train --resume %s/D > %s/out.txt 2> %s/err.txt", tu_bin(), d, d, d);
    cr_expect_eq(rc, 1);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "model.bin: cannot open"));
    cr_expect(!tu_file_has(tu_path(d, "out.txt"), "model:"));
    cr_expect_eq(tu_sh("%s/train --resume %s/none > /dev/null 2>&1", tu_bin(), d), 1);
    tu_rm_rf(d);
    free(d);
}

Test(runs, a_folder_in_use_is_refused, .timeout = 120) {
    char *d = tu_tmpdir();
    tiny(d, 2, 50);
    char run[600];
    snprintf(run, sizeof run, "%s/D", d);
    cr_assert_eq(mkdir(run, 0755), 0);
    FileLock l;
    S2sError err;
    cr_assert_eq(file_lock(&l, run, &err), S2S_OK, "%s", err.msg);
    cr_expect(file_lock_held(run, NULL));
    int rc = tu_sh("%s/train --config %s/tiny.json --out %s > /dev/null 2> %s/err.txt", tu_bin(), d, run, d);
    cr_expect_eq(rc, 1);
    char want[64];
    snprintf(want, sizeof want, "in use by another process (pid %ld)", (long)getpid());
    cr_expect(tu_file_has(tu_path(d, "err.txt"), want), "the holder is named");
    cr_expect(access(tu_path(run, "config.json"), F_OK) != 0, "nothing was written");
    file_unlock(&l);
    cr_expect(!file_lock_held(run, NULL));

    /* two trainings at once (D5): the second is refused while the first holds the folder */
    cr_assert_eq(tu_sh("%s/train --config %s/tiny.json --out %s --set epochs=400 > /dev/null 2>&1 & p=$!;"
                       " until test -e %s/config.json || ! kill -0 $p 2> /dev/null; do sleep 0.02; done;"
                       " %s/train --config %s/tiny.json --out %s --overwrite > %s/out2.txt 2> %s/err2.txt; echo $? > %s/rc2;"
                       " kill -INT $p; wait $p; echo $? > %s/rc1",
                       tu_bin(), d, run, run, tu_bin(), d, run, d, d, d, d),
                 0);
    cr_expect(tu_file_has(tu_path(d, "rc2"), "1\n"), "the second run exits 1");
    cr_expect(tu_file_has(tu_path(d, "err2.txt"), "in use by another process"));
    cr_expect(tu_file_has(tu_path(d, "rc1"), "130\n"), "the first goes on until its SIGINT");
    char *log = tu_log_without_timing(tu_path(run, "log.jsonl"));
    cr_expect(log && !strstr(log, "not JSON"), "the log is one run's");
    free(log);
    cr_expect_eq(tu_sh("%s/train --resume %s --pause-at 1 > %s/out.txt", tu_bin(), run, d), 0);
    cr_expect(tu_file_has(tu_path(d, "out.txt"), "paused after step"), "the first run resumes (and pauses after a step)");
    tu_rm_rf(d);
    free(d);
}

Test(runs, run_names_never_leave_runs) {
    char *d = tu_tmpdir();
    char p[512];
    snprintf(p, sizeof p, "%s/cfg.json", d);
    tu_write(p, "{\"name\": \"../escaped\"}");
    cr_expect_eq(tu_sh("cd %s && %s/train --config cfg.json 2> err.txt", d, tu_bin()), 2);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "name: expected a plain name"));
    cr_expect_eq(tu_sh("cd %s && %s/train --config cfg.json --set name=../x 2> /dev/null", d, tu_bin()), 2);
    cr_expect(access(tu_path(d, "../escaped"), F_OK) != 0 && access(tu_path(d, "runs"), F_OK) != 0, "no folder was made");
    tu_rm_rf(d);
    free(d);
}

/* last.bin rewritten with another training state (and moments or not). */
typedef struct StateEdit {
    const char *state;
    bool moments;
} StateEdit;

static void set_state(ParamStore *ps, CkptSave *s, void *ctx) {
    (void)ps;
    const StateEdit *e = ctx;
    s->state_json = e->state;
    s->with_moments = s->with_moments && e->moments;
}

static void rewrite_last(const char *path, const char *state, bool moments) {
    StateEdit e = {state, moments};
    tu_rewrite_checkpoint(path, set_state, &e);
}

static char *state_of(const char *path) {
    Checkpoint c;
    S2sError err;
    cr_assert_eq(ckpt_load(&c, path, &err), S2S_OK, "%s", err.msg);
    char *s = strdup(c.state_json);
    ckpt_free(&c);
    return s;
}

/* The state with one field replaced by a JSON value. */
static char *with_field(const char *state, const char *key, const char *json) {
    cJSON *j = cJSON_Parse(state), *v = cJSON_Parse(json);
    cr_assert(j && v);
    cJSON_ReplaceItemInObject(j, key, v);
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return s;
}

Test(runs, resume_checks_every_field_of_the_state, .timeout = 120) {
    char *d = tu_tmpdir();
    tiny(d, 2, 50);
    cr_assert_eq(tu_sh("%s/train --config %s/tiny.json --out %s/D --pause-at 5 > /dev/null", tu_bin(), d, d), 0);
    char last[600], keep[600];
    snprintf(last, sizeof last, "%s/D/last.bin", d);
    snprintf(keep, sizeof keep, "%s/keep.bin", d);
    cr_assert_eq(tu_sh("cp %s %s", last, keep), 0);
    char *good = state_of(last);
    struct {
        const char *key, *value, *says;
    } bad[] = {
        {"batch", "-5", "\"batch\" is out of range"}, {"batch", "1e12", "\"batch\" is out of range"},
        {"batch", "13", "batch 13; epoch 1 has 13 batches"}, {"epoch", "-3", "\"epoch\" is out of range"},
        {"epoch", "99", "epoch 99 of a run of 2 epochs"}, {"log_bytes", "1e11", "the log was 100000000000 bytes long"},
        {"lr", "-1", "\"lr\" is out of range"}, {"lr", "0.5", "lr 0.5; expected (0, 0.001]"},
        {"step", "4", "step 4, but epoch 1 batch 5 is step 5"}, {"adam_step", "3", "3 optimizer steps in 5 steps"},
        {"best", "\"x\"", "\"best\" is not a number"}, {"loss_sum", "-1", "\"loss_sum\" is out of range"},
        {"bad_epochs", "2", "2 validations without improvement in 0"}, {"seconds", "1.5", NULL}, /* any time is fine */
        {"data", "\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"",
         "the data are not those the run started with"},
        {"data", "\"0123456789abcdeX\"", "is not 64 hex digits"},
    };
    struct stat before;
    cr_assert_eq(stat(tu_path(d, "D/log.jsonl"), &before), 0);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *s = with_field(good, bad[i].key, bad[i].value);
        cr_assert_eq(tu_sh("cp %s %s", keep, last), 0);
        rewrite_last(last, s, true);
        int rc = tu_sh("%s/train --resume %s/D --pause-at 6 > /dev/null 2> %s/err.txt", tu_bin(), d, d);
        if (bad[i].says) {
            cr_expect_eq(rc, 1, "%s = %s resumed (exit %d)", bad[i].key, bad[i].value, rc);
            cr_expect(tu_file_has(tu_path(d, "err.txt"), bad[i].says), "%s = %s: %s", bad[i].key, bad[i].value,
                      tu_slurp(tu_path(d, "err.txt"), NULL));
            struct stat after;
            cr_assert_eq(stat(tu_path(d, "D/log.jsonl"), &after), 0);
            cr_expect_eq(after.st_size, before.st_size, "%s = %s changed the log", bad[i].key, bad[i].value);
        } else {
            cr_expect_eq(rc, 0, "%s = %s is a valid state", bad[i].key, bad[i].value);
        }
        free(s);
    }
    /* a key twice; not JSON */
    const char *raw[] = {"{\"epoch\":0,\"epoch\":0}", "not json"};
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(tu_sh("cp %s %s", keep, last), 0);
        rewrite_last(last, raw[i], true);
        cr_expect_eq(tu_sh("%s/train --resume %s/D > /dev/null 2> %s/err.txt", tu_bin(), d, d), 1);
        cr_expect(tu_file_has(tu_path(d, "err.txt"), i ? "not a JSON object" : "has \"epoch\" twice"));
    }
    /* old D18: a state whose log_bytes cut the log's lines (0: every epoch line; 3: inside the
     * first) is refused, the log left as it was */
    cr_assert_eq(tu_sh("%s/train --config %s/tiny.json --out %s/E --pause-at 20 > /dev/null", tu_bin(), d, d), 0);
    char elast[600], ekeep[600];
    snprintf(elast, sizeof elast, "%s/E/last.bin", d);
    snprintf(ekeep, sizeof ekeep, "%s/ekeep.bin", d);
    cr_assert_eq(tu_sh("cp %s %s && cp %s/E/log.jsonl %s/elog.jsonl", elast, ekeep, d, d), 0);
    char *egood = state_of(elast);
    const char *cut[2][2] = {{"0", "hold 0 epoch lines up to step 0"}, {"3", "ends inside a line"}};
    for (int i = 0; i < 2; i++) {
        char *s = with_field(egood, "log_bytes", cut[i][0]);
        cr_assert_eq(tu_sh("cp %s %s", ekeep, elast), 0);
        rewrite_last(elast, s, true);
        cr_expect_eq(tu_sh("%s/train --resume %s/E > /dev/null 2> %s/err.txt", tu_bin(), d, d), 1, "log_bytes %s resumed", cut[i][0]);
        cr_expect(tu_file_has(tu_path(d, "err.txt"), cut[i][1]), "log_bytes %s: %s", cut[i][0], tu_slurp(tu_path(d, "err.txt"), NULL));
        cr_expect(tu_same_file(tu_path(d, "E/log.jsonl"), tu_path(d, "elog.jsonl")), "log_bytes %s: the log was cut", cut[i][0]);
        free(s);
    }
    free(egood);
    /* Adam without its moments (D19) */
    cr_assert_eq(tu_sh("cp %s %s", keep, last), 0);
    rewrite_last(last, good, false);
    cr_expect_eq(tu_sh("%s/train --resume %s/D > /dev/null 2> %s/err.txt", tu_bin(), d, d), 1);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "has no Adam moments after 5 steps"));
    /* the intact state resumes */
    cr_assert_eq(tu_sh("cp %s %s", keep, last), 0);
    cr_expect_eq(tu_sh("%s/train --resume %s/D > /dev/null", tu_bin(), d), 0);
    free(good);
    tu_rm_rf(d);
    free(d);
}

/* Tiny parallel files: n pairs of "wN wM" sentences. */
static void write_corpus(const char *dir, const char *split, int n, int shift) {
    char p[600];
    const char *lang[2] = {"de", "en"};
    for (int k = 0; k < 2; k++) {
        snprintf(p, sizeof p, "%s/%s.%s", dir, split, lang[k]);
        FILE *f = fopen(p, "w");
        cr_assert(f);
        for (int i = 0; i < n; i++) fprintf(f, "%s%d %s%d x\n", k ? "w" : "v", (i + shift) % 7, k ? "u" : "t", (i * 3) % 5);
        fclose(f);
    }
}

Test(runs, resume_refuses_data_that_changed, .timeout = 120) {
    char *d = tu_tmpdir();
    write_corpus(d, "train", 64, 0);
    write_corpus(d, "val", 8, 1);
    write_corpus(d, "test", 8, 2);
    char p[600];
    snprintf(p, sizeof p, "%s/t.json", d);
    tu_write(p,
             "{\"name\": \"t\", \"task\": {\"type\": \"translate\", \"data_dir\": \"%s\", \"train_prefix\": \"train\","
             " \"valid_prefix\": \"val\", \"test_prefix\": \"test\", \"min_freq\": 1},"
             " \"model\": {\"cell\": \"gru\", \"embedding\": 8, \"encoder_hidden\": 16, \"decoder_hidden\": 16},"
             " \"train\": {\"batch_size\": 8, \"epochs\": 2, \"metric\": \"bleu\"}}",
             d);
    cr_assert_eq(tu_sh("%s/train --config %s --out %s/D --pause-at 3 > /dev/null", tu_bin(), p, d), 0);
    cr_assert_eq(tu_sh("cp %s/train.en %s/train.en.keep", d, d), 0);
    /* a word of the target side replaced by another (D17): another vocabulary */
    cr_assert_eq(tu_sh("sed -i 's/w3/zz/' %s/train.en", d), 0);
    cr_expect_eq(tu_sh("%s/train --resume %s/D > /dev/null 2> %s/err.txt", tu_bin(), d, d), 1);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "the data give another target vocabulary"), "%s", tu_slurp(tu_path(d, "err.txt"), NULL));
    /* the same words in another order: same vocabularies, other sentences */
    cr_assert_eq(tu_sh("cp %s/train.en.keep %s/train.en && sed -i '1{h;d};2{G}' %s/train.en", d, d, d), 0);
    cr_expect_eq(tu_sh("%s/train --resume %s/D > /dev/null 2> %s/err.txt", tu_bin(), d, d), 1);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "the data are not those the run started with"), "%s",
              tu_slurp(tu_path(d, "err.txt"), NULL));
    cr_assert_eq(tu_sh("cp %s/train.en.keep %s/train.en", d, d), 0);
    cr_expect_eq(tu_sh("%s/train --resume %s/D > /dev/null", tu_bin(), d), 0);
    tu_rm_rf(d);
    free(d);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* SIGKILL at random points, resuming each time from what was saved (last.bin every 7 steps
 * and every epoch): the run ends with the weights, Adam moments, state, log, model.bin and
 * test outputs of an uninterrupted run, bit for bit, and no temporary file left behind. */
Test(runs, sigkill_at_random_points_then_resume_equals_uninterrupted, .timeout = 600) {
    char *d = tu_tmpdir();
    char p[600];
    snprintf(p, sizeof p, "%s/k.json", d);
    tu_write(p, "{\"name\": \"k\", \"seed\": 2,"
                " \"task\": {\"type\": \"reverse\", \"train_size\": 5000, \"valid_size\": 60, \"test_size\": 60, \"max_len\": 12},"
                " \"model\": {\"cell\": \"gru\", \"embedding\": 8, \"encoder_hidden\": 32, \"decoder_hidden\": 32},"
                " \"train\": {\"batch_size\": 16, \"epochs\": 3, \"save_every\": 7, \"log_every\": 5, \"lr\": 0.005}}");
    double t0 = now_s();
    cr_assert_eq(tu_sh("%s/train --config %s --out %s/full > /dev/null", tu_bin(), p, d), 0);
    double full = now_s() - t0;
    unsigned seed = (unsigned)time(NULL);
    srand(seed);
    int kills = 0, rounds = 0, rc = -1;
    char delays[512] = "";
    /* on a busy machine a resumed run may end before the next kill: then the whole sequence
     * starts again (up to three times) until at least three kills land before the end */
    for (int attempt = 0; attempt < 3 && (rc != 0 || kills < 3); attempt++) {
        if (attempt) {
            tu_sh("rm -rf %s/part", d);
            kills = rounds = 0;
            rc = -1;
            delays[0] = 0;
        }
        while (rc != 0 && rounds < 40) {
            /* up to ten kills, each 5-35 % of an uninterrupted run's time after a start (so they
             * land in setup, steps, saves and validation alike, and at least three land before the
             * end), then the run goes to its end */
            double delay = rounds < 10 ? full * (0.05 + 0.30 * rand() / (double)RAND_MAX) : -1;
            size_t used = strlen(delays);
            snprintf(delays + used, sizeof delays - used, "%s%.2f", used ? " " : "", delay);
            char args[1400], kill_part[64] = "";
            if (access(tu_path(d, "part/last.bin"), F_OK) == 0) snprintf(args, sizeof args, "--resume %s/part", d);
            else snprintf(args, sizeof args, "--config %s --out %s/part --overwrite", p, d); /* nothing saved yet */
            if (delay > 0) snprintf(kill_part, sizeof kill_part, "sleep %.3f; kill -9 $p 2> /dev/null;", delay);
            rc = tu_sh("{ %s/train %s > /dev/null 2>&1 & p=$!; %s wait $p; } 2> /dev/null", tu_bin(), args, kill_part);
            kills += rc == 137;
            rounds++;
        }
    }
    cr_log_info("SIGKILL test: %d kills in %d rounds (seed %u, delays in s: %s; an uninterrupted run: %.2f s)", kills, rounds,
                seed, delays, full);
    cr_assert_eq(rc, 0, "the run never finished (seed %u, delays %s)", seed, delays);
    cr_expect_geq(kills, 3, "only %d kills landed in %d rounds (seed %u, delays %s)", kills, rounds, seed, delays);
    char why[512] = "";
    cr_expect(tu_same_file(tu_path(d, "full/model.bin"), tu_path(d, "part/model.bin")), "model.bin (seed %u, delays %s)", seed,
              delays);
    cr_expect(tu_same_checkpoint(tu_path(d, "full/last.bin"), tu_path(d, "part/last.bin"), why, sizeof why),
              "last.bin: %s (seed %u, delays %s)", why, seed, delays);
    cr_expect(tu_same_file(tu_path(d, "full/test.hyp"), tu_path(d, "part/test.hyp")));
    char *la = tu_log_without_timing(tu_path(d, "full/log.jsonl")), *lb = tu_log_without_timing(tu_path(d, "part/log.jsonl"));
    size_t at = 0; /* the first difference, for the message */
    while (la[at] && la[at] == lb[at]) at++;
    size_t from = at > 200 ? at - 200 : 0;
    cr_expect_str_eq(la, lb, "log (seed %u, delays %s) differs at byte %zu:\n%.400s\n---\n%.400s", seed, delays, at, la + from,
                     lb + from);
    if (strcmp(la, lb)) tu_sh("cp -r %s /tmp/s2s_sigkill_failure_%u", d, seed);
    free(la);
    free(lb);
    cr_expect_eq(tu_sh("! ls %s/part/*.tmp.* %s/part/attention/*.tmp.* > /dev/null 2>&1", d, d), 0, "temporary files left");
    tu_rm_rf(d);
    free(d);
}

/* SIGINT while the best checkpoint is tested (D14): exit 130, no test line; the resumed run
 * tests it, once. SIGHUP stops a run as SIGINT does (D26). */
Test(runs, signals_during_the_final_test_and_sighup, .timeout = 240) {
    char *d = tu_tmpdir();
    tiny(d, 1, 150000); /* a test split that takes a while (a second here) to decode */
    /* the epoch line comes before last.bin, the pictures and the test: a signal from then on
     * reaches the test at the latest at its first batch */
    int rc = tu_sh("{ %s/train --config %s/tiny.json --out %s/D > %s/out.txt 2> %s/err.txt & p=$!;"
                   " until grep -q 'epoch  1' %s/out.txt 2> /dev/null || ! kill -0 $p 2> /dev/null; do sleep 0.01; done;"
                   " kill -INT $p; wait $p; } 2> /dev/null",
                   tu_bin(), d, d, d, d, d);
    cr_expect_eq(rc, 130, "SIGINT in the final test exits 130 (got %d)", rc);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "interrupted after step 13"));
    cr_expect(!tu_file_has(tu_path(d, "out.txt"), "test (") && !tu_file_has(tu_path(d, "out.txt"), "model:"));
    cr_expect_eq(count_in_log(tu_path(d, "D"), "test"), 0);
    cr_expect(!compare_run_finished(tu_path(d, "D")));
    cr_expect_eq(tu_sh("%s/train --resume %s/D > %s/out.txt", tu_bin(), d, d), 0);
    cr_expect(tu_file_has(tu_path(d, "out.txt"), "test (best checkpoint)"));
    cr_expect_eq(count_in_log(tu_path(d, "D"), "test"), 1);

    tiny(d, 400, 50);
    rc = tu_sh("{ %s/train --config %s/tiny.json --out %s/H > /dev/null 2>&1 & p=$!;"
               " until grep -q epoch %s/H/log.jsonl 2> /dev/null || ! kill -0 $p 2> /dev/null; do sleep 0.02; done;"
               " kill -HUP $p; wait $p; } 2> /dev/null",
               tu_bin(), d, d, d);
    cr_expect_eq(rc, 129, "SIGHUP exits 129 (got %d)", rc);
    cr_expect_eq(tu_sh("%s/train --resume %s/H --pause-at 60 > %s/out.txt", tu_bin(), d, d), 0);
    cr_expect(tu_file_has(tu_path(d, "out.txt"), "paused after step 60"));
    tu_rm_rf(d);
    free(d);
}

/* Sizes the schema allows but no machine holds (D6): refused with the estimate before any
 * allocation or folder, exit 2. */
Test(runs, sizes_this_machine_cannot_hold_are_refused_up_front, .timeout = 60) {
    char *d = tu_tmpdir();
    tiny(d, 1, 50);
    const char *sets[] = {
        "--set encoder_hidden=100000 --set decoder_hidden=100000", /* 10^11 weights */
        "--set max_len=10000 --set min_len=9000 --set batch_size=100000 --set train_size=400", /* a step of TBs */
        "--set train_size=100000000 --set max_len=10000",            /* data of PBs */
    };
    const char *says[] = {"with their gradients and Adam moments", "a training step", "the generated data need about"};
    for (int i = 0; i < 3; i++) {
        int rc = tu_sh("%s/train --config %s/tiny.json --out %s/M%d %s > /dev/null 2> %s/err.txt", tu_bin(), d, d, i, sets[i], d);
        cr_expect_eq(rc, 2, "%s: exit %d", sets[i], rc);
        cr_expect(tu_file_has(tu_path(d, "err.txt"), "this machine allows") && tu_file_has(tu_path(d, "err.txt"), says[i]), "%s: %s", sets[i],
                  tu_slurp(tu_path(d, "err.txt"), NULL));
        char m[16];
        snprintf(m, sizeof m, "M%d", i);
        cr_expect(access(tu_path(d, m), F_OK) != 0, "%s: a folder was made", sets[i]);
    }
    tu_rm_rf(d);
    free(d);
}

/* The estimate the refusal rests on bounds the arena peaks of real steps, and not by much. */
Test(runs, step_estimate_bounds_the_measured_arena_peaks, .timeout = 120) {
    struct {
        const char *cell, *attention, *combine;
        bool bidir;
        int layers, E, He, Hd, kq, Vs, Vt, B, S, T;
    } shapes[] = {
        {"gru", "scaled_dot", "concat", true, 1, 32, 48, 96, 40, 300, 250, 24, 17, 19},
        {"lstm", "dot", "luong", false, 2, 16, 32, 32, 32, 12, 12, 16, 60, 62},
        {"gru", "additive", "concat", false, 1, 8, 24, 24, 16, 40, 40, 32, 25, 30},
        {"lstm", "general", "luong", true, 1, 24, 20, 40, 8, 30, 500, 8, 12, 40},
    };
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        Config c;
        config_defaults(&c);
        ConfigModel *m = &c.model;
        char set[3][64];
        snprintf(set[0], sizeof set[0], "cell=%s", shapes[k].cell);
        snprintf(set[1], sizeof set[1], "attention=%s", shapes[k].attention);
        snprintf(set[2], sizeof set[2], "combine=%s", shapes[k].combine);
        for (int i = 0; i < 3; i++) tu_config_set(&c, set[i]);
        m->bidirectional = shapes[k].bidir;
        m->layers = shapes[k].layers;
        m->embedding = shapes[k].E;
        m->encoder_hidden = shapes[k].He;
        m->decoder_hidden = shapes[k].Hd;
        m->kq = shapes[k].kq;
        m->dropout = 0.2f;
        int B = shapes[k].B, S = shapes[k].S, T = shapes[k].T, Vs = shapes[k].Vs, Vt = shapes[k].Vt;
        Seq2Seq s;
        S2sError err;
        cr_assert_eq(model_init(&s, m, Vs, Vt, &err), S2S_OK, "%s", err.msg);
        cr_expect_eq(model_param_count(m, Vs, Vt), params_numel(&s.params));
        Rng rng;
        rng_init(&rng, 1, 0);
        model_init_weights(&s, &rng);
        Dataset d;
        dataset_init(&d);
        int32_t src[128], trg[128];
        for (int i = 0; i < B; i++) { /* every sentence as long as the batch: the worst case */
            for (int j = 0; j < S; j++) src[j] = 4 + (int32_t)rng_below(&rng, (uint32_t)(Vs - 4));
            trg[0] = TOK_SOS;
            for (int j = 1; j < T - 1; j++) trg[j] = 4 + (int32_t)rng_below(&rng, (uint32_t)(Vt - 4));
            trg[T - 1] = TOK_EOS;
            dataset_add(&d, src, S, trg, T);
        }
        int idx[64];
        for (int i = 0; i < B; i++) idx[i] = i;
        Batch b;
        batch_init(&b);
        batch_fill(&b, &d, idx, B);
        Tape t;
        tape_init(&t, 1 << 16);
        t.training = t.grad_enabled = true;
        t.free_values = true; /* as the trainer's step */
        ModelOutput o = model_forward(&t, &s, &b, &rng, NULL);
        params_zero_grad(&s.params);
        tape_backward(&t, o.loss);
        double peak = (double)t.arena.peak, est = model_step_bytes(m, Vs, Vt, MODEL_STEP_TRAIN, B, S, T);
        cr_expect(est >= peak && est <= 3.0 * peak, "shape %zu: training step estimate %.0f, peak %.0f", k, est, peak);
        tape_free(&t);
        tape_init(&t, 1 << 16);
        int L = 2 * S + 10;
        int32_t *out = malloc(sizeof *out * (size_t)B * L);
        int *len = malloc(sizeof *len * (size_t)B);
        model_greedy(&t, &s, &b, L, out, len, NULL);
        peak = (double)t.arena.peak;
        est = model_step_bytes(m, Vs, Vt, MODEL_STEP_GREEDY, B, S, L + 1);
        cr_expect(est >= peak && est <= 3.0 * peak + (1 << 20), "shape %zu: greedy estimate %.0f, peak %.0f", k, est, peak);
        free(out);
        free(len);
        tape_free(&t);
        batch_free(&b);
        dataset_free(&d);
        model_free(&s);
    }
}

/* The state reads back bit for bit: cJSON's own number printing keeps 15 digits when they
 * read back within a relative DBL_EPSILON, so a resumed run continued from a loss sum or a
 * learning rate one bit off (found by the SIGKILL test above). */
Test(runs, the_state_reads_back_bit_for_bit) {
    Rng rng;
    rng_init(&rng, 7, 0);
    for (int i = 0; i < 2000; i++) {
        TrainState s = {3, 5, 41, 41, 0, 0, 1, 0, 0, 4096, 0};
        s.lr = (double)(float)(1e-3 * rng_uniform(&rng)); /* a float's value, as the config's */
        s.lr *= 0.5 + rng_uniform(&rng);                   /* then plateau decays */
        s.best = 100.0 * rng_uniform(&rng) / 3.0;
        s.loss_sum = 1e4 * rng_uniform(&rng) / 7.0;
        s.tok_sum = 512;
        s.seconds = 1e3 * rng_uniform(&rng);
        Digest data = digest_of(&i, sizeof i), h;
        char *j = train_state_to_json(&s, &data);
        TrainState b;
        bool has;
        S2sError err;
        cr_assert_eq(train_state_from_json(&b, &h, &has, j, "t", &err), S2S_OK, "%s", err.msg);
        cr_assert(has && digest_equal(&h, &data));
        cr_assert(memcmp(&b.lr, &s.lr, sizeof s.lr) == 0 && memcmp(&b.best, &s.best, sizeof s.best) == 0 &&
                      memcmp(&b.loss_sum, &s.loss_sum, sizeof s.loss_sum) == 0 && memcmp(&b.seconds, &s.seconds, sizeof s.seconds) == 0,
                  "%s read back as lr %.17g best %.17g loss_sum %.17g", j, b.lr, b.best, b.loss_sum);
        free(j);
    }
}
