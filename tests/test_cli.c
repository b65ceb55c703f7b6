/* test_cli.c — the programs end to end: a small reversal run that must learn, determinism,
 * resume equal to an uninterrupted run, ./translate on unseen strings, and the messages
 * and exit codes of bad input. Runs the binaries of this build ($S2S_BIN_DIR). */
#include "test_util.h"
#include "s2s/checkpoint.h"
#include "s2s/data.h"
#include "s2s/viz.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


static const char *SMALL =
    "{\"name\": \"small\", \"seed\": 3,"
    " \"task\": {\"type\": \"reverse\", \"alphabet\": \"abcd\", \"min_len\": 3, \"max_len\": 8, \"train_size\": 6000,"
    "          \"valid_size\": 100, \"test_size\": 100, \"data_seed\": 5},"
    " \"model\": {\"cell\": \"gru\", \"embedding\": 16, \"encoder_hidden\": 48, \"decoder_hidden\": 48, \"attention\": \"dot\","
    "           \"dropout\": 0.1},"
    " \"train\": {\"lr\": 0.005, \"batch_size\": 32, \"epochs\": %d, \"log_every\": 20}}";

static void write_config(const char *dir, int epochs) {
    char path[256];
    snprintf(path, sizeof path, "%s/small.json", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, SMALL, epochs);
    fclose(f);
}

/* A temporary folder holding a small reversal model trained for one epoch (run/model.bin),
 * for the tests of ./translate. */
static char *dir_with_small_model(void) {
    char *d = tu_tmpdir();
    write_config(d, 1);
    cr_assert_eq(tu_sh("%s/train --config %s/small.json --set train_size=400 --out %s/run > /dev/null", tu_bin(), d, d), 0);
    return d;
}

static double last_test_metric(const char *dir, const char *key) {
    char path[512];
    snprintf(path, sizeof path, "%s/log.jsonl", dir);
    char *txt = tu_slurp(path, NULL);
    cr_assert(txt != NULL);
    char *test = strstr(txt, "{\"type\":\"test\"");
    cr_assert(test != NULL, "no test line in %s", path);
    cJSON *j = cJSON_Parse(strtok(test, "\n"));
    double v = cJSON_GetObjectItemCaseSensitive(j, key)->valuedouble;
    cJSON_Delete(j);
    free(txt);
    return v;
}

Test(cli, small_reversal_run_learns_and_translate_reverses_unseen_strings, .timeout = 240) {
    char *d = tu_tmpdir();
    write_config(d, 6);
    cr_assert_eq(tu_sh("%s/train --config %s/small.json --out %s/run > %s/out.txt 2>&1", tu_bin(), d, d, d), 0);
    char run[256];
    snprintf(run, sizeof run, "%s/run", d);
    double exact = last_test_metric(run, "test_exact_match");
    cr_expect_geq(exact, 0.95, "test exact match %.3f after 6 epochs", exact);
    /* held-out strings of the same task: never in training by construction */
    Config c;
    config_defaults(&c);
    char cfg[256];
    snprintf(cfg, sizeof cfg, "%s/small.json", d);
    S2sError err;
    cr_assert_eq(config_load(&c, cfg, &err), S2S_OK);
    TaskData td;
    cr_assert_eq(task_load(&td, &c.task, &err), S2S_OK);
    char in[256], out[256];
    snprintf(in, sizeof in, "%s/in.txt", d);
    snprintf(out, sizeof out, "%s/hyp.txt", d);
    FILE *f = fopen(in, "w");
    char (*want)[16] = malloc((size_t)td.test.n * sizeof *want);
    for (int i = 0; i < td.test.n; i++) {
        int n = td.test.src_len[i];
        char s[16];
        for (int k = 0; k < n; k++) {
            s[k] = td.src_vocab.tokens[td.test.ids[td.test.src_off[i] + k]][0];
            want[i][n - 1 - k] = s[k];
        }
        s[n] = want[i][n] = '\0';
        fprintf(f, "%s\n", s);
    }
    fclose(f);
    for (int int8 = 0; int8 < 2; int8++) { /* float32, then int8 weights: both reverse */
        cr_assert_eq(tu_sh("%s/translate %s/run/model.bin %s --input %s --output %s", tu_bin(), d, int8 ? "--int8" : "", in,
                           out), 0);
        char *hyp = tu_slurp(out, NULL);
        int right = 0, lines = 0;
        for (char *line = strtok(hyp, "\n"); line; line = strtok(NULL, "\n"), lines++) right += !strcmp(line, want[lines]);
        cr_expect_eq(lines, td.test.n);
        cr_expect_geq(right, td.test.n * 95 / 100, "%s: %d of %d unseen strings reversed", int8 ? "int8" : "fp32", right,
                      td.test.n);
        free(hyp);
    }
    cr_expect_eq(tu_sh("echo abc | %s/translate %s/run/model.bin --int8 --bf16 > /dev/null 2>&1", tu_bin(), d), 2);
    free(want);
    task_free(&td);
    tu_rm_rf(d);
    free(d);
}

/* Multi-head attention learns the reversal too, and its pictures show the heads: after each
 * epoch attention/epochNN_exK_heads.png beside the mean's picture, and ./translate --heatmap
 * writes NNNN_heads.png (the mean and each head, one panel each) beside NNNN.png. */
Test(cli, multihead_run_learns_and_draws_its_heads, .timeout = 240) {
    char *d = tu_tmpdir();
    write_config(d, 6);
    cr_assert_eq(tu_sh("%s/train --config %s/small.json --set attention=multihead --set heads=4 --out %s/run > %s/out.txt 2>&1",
                       tu_bin(), d, d, d),
                 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    char run[256];
    snprintf(run, sizeof run, "%s/run", d);
    double exact = last_test_metric(run, "test_exact_match");
    cr_expect_geq(exact, 0.95, "test exact match %.3f after 6 epochs", exact);
    Image one, heads;
    S2sError err;
    cr_assert_eq(png_read(tu_path(run, "attention/epoch06_ex1.png"), &one, &err), S2S_OK, "%s", err.msg);
    cr_assert_eq(png_read(tu_path(run, "attention/epoch06_ex1_heads.png"), &heads, &err), S2S_OK, "%s", err.msg);
    cr_expect_geq(heads.w, 2 * one.w, "5 panels, 3 a row: %d pixels wide, one heatmap %d", heads.w, one.w);
    cr_expect_geq(heads.h, 2 * one.h - 40);
    image_free(&one);
    image_free(&heads);
    cr_assert_eq(tu_sh("printf 'abcd\\ndcba\\n' | %s/translate %s/model.bin --heatmap %s/pics > /dev/null", tu_bin(), run, d), 0);
    cr_expect(access(tu_path(d, "pics/0000.png"), F_OK) == 0 && access(tu_path(d, "pics/0000_heads.png"), F_OK) == 0 &&
              access(tu_path(d, "pics/0001_heads.png"), F_OK) == 0 && access(tu_path(d, "pics/0002.png"), F_OK) != 0);
    /* heads must divide decoder_hidden: a config error naming both */
    cr_expect_eq(tu_sh("%s/train --config %s/small.json --set attention=multihead --set heads=5 --out %s/bad > /dev/null 2> %s/err.txt",
                       tu_bin(), d, d, d),
                 2);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "model.heads") && tu_file_has(tu_path(d, "err.txt"), "(48)"), "%s",
              tu_slurp(tu_path(d, "err.txt"), NULL));
    tu_rm_rf(d);
    free(d);
}

/* A Transformer (model.type) learns the reversal through the same trainer, is reproducible
 * bit for bit, and a run paused mid-epoch and resumed ends with the same model file; its
 * model translates with greedy and beam search. */
Test(cli, transformer_run_learns_resumes_and_is_reproducible, .timeout = 240) {
    char *d = tu_tmpdir();
    write_config(d, 6);
    const char *tf = "--set model.type=transformer --set d_model=32 --set heads=4 --set ff=64 --set layers=2 --set norm=pre "
                     "--set lr=0.002 --set dropout=0.05";
    cr_assert_eq(tu_sh("%s/train --config %s/small.json %s --out %s/a > %s/out.txt 2>&1", tu_bin(), d, tf, d, d), 0, "%s",
                 tu_slurp(tu_path(d, "out.txt"), NULL));
    char run[256];
    snprintf(run, sizeof run, "%s/a", d);
    double exact = last_test_metric(run, "test_exact_match");
    cr_expect_geq(exact, 0.9, "test exact match %.3f after 6 epochs", exact);
    cr_assert_eq(tu_sh("%s/train --config %s/small.json %s --out %s/b > /dev/null 2>&1", tu_bin(), d, tf, d), 0);
    cr_expect(tu_same_file(tu_path(d, "a/model.bin"), tu_path(d, "b/model.bin")), "the same config and seed, the same model");
    cr_assert_eq(tu_sh("%s/train --config %s/small.json %s --out %s/c --pause-at 250 > /dev/null 2>&1 && "
                       "%s/train --resume %s/c > /dev/null 2>&1",
                       tu_bin(), d, tf, d, tu_bin(), d),
                 0);
    cr_expect(tu_same_file(tu_path(d, "a/model.bin"), tu_path(d, "c/model.bin")), "paused and resumed: the same model");
    /* bf16 products where the CPU has them: reproducible too */
    if (tu_sh("%s/train --config %s/small.json %s --set precision=bf16 --set epochs=1 --out %s/h1 > %s/bf.txt 2>&1", tu_bin(), d, tf, d,
              d) == 0) {
        cr_assert_eq(tu_sh("%s/train --config %s/small.json %s --set precision=bf16 --set epochs=1 --out %s/h2 > /dev/null 2>&1", tu_bin(),
                           d, tf, d),
                     0);
        cr_expect(tu_same_file(tu_path(d, "h1/model.bin"), tu_path(d, "h2/model.bin")), "bf16: the same model twice");
    } else {
        cr_expect(tu_file_has(tu_path(d, "bf.txt"), "bf16"), "a CPU without bf16 says so: %s", tu_slurp(tu_path(d, "bf.txt"), NULL));
    }
    cr_assert_eq(tu_sh("printf 'abcd\\nddcab\\n' | %s/translate %s/a/model.bin > %s/g.txt && "
                       "printf 'abcd\\nddcab\\n' | %s/translate %s/a/model.bin --beam 4 > %s/b.txt",
                       tu_bin(), d, d, tu_bin(), d, d),
                 0);
    char *g = tu_slurp(tu_path(d, "g.txt"), NULL), *bm = tu_slurp(tu_path(d, "b.txt"), NULL);
    cr_expect_str_eq(g, "dcba\nbacdd\n");
    cr_expect_str_eq(bm, "dcba\nbacdd\n");
    free(g);
    free(bm);
    /* pictures: the last layer (mean and heads), every decoder layer, every encoder layer */
    cr_assert_eq(tu_sh("printf 'abcd\\n' | %s/translate %s/a/model.bin --heatmap %s/pics > /dev/null", tu_bin(), d, d), 0);
    const char *pics[] = {"0000.png", "0000_heads.png", "0000_layers.png", "0000_encoder.png", "0000_layer1_heads.png",
                          "0000_layer2_heads.png"};
    for (int i = 0; i < 6; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s/pics/%s", d, pics[i]);
        Image im;
        S2sError err;
        cr_assert_eq(png_read(p, &im, &err), S2S_OK, "%s: %s", pics[i], err.msg);
        if (i == 2 || i == 3) cr_expect_gt(im.w, 3 * im.h / 2, "%s: two layers side by side, %d x %d", pics[i], im.w, im.h);
        image_free(&im);
    }
    tu_rm_rf(d);
    free(d);
}

Test(cli, same_seed_same_logs_and_model_files, .timeout = 240) {
    char *d = tu_tmpdir();
    write_config(d, 1);
    for (int k = 0; k < 2; k++)
        cr_assert_eq(tu_sh("%s/train --config %s/small.json --set train_size=800 --out %s/run%d > /dev/null", tu_bin(), d, d, k), 0);
    char a[256], b[256];
    snprintf(a, sizeof a, "%s/run0/model.bin", d);
    snprintf(b, sizeof b, "%s/run1/model.bin", d);
    cr_expect(tu_same_file(a, b), "model.bin differs between two runs with the same seed");
    snprintf(a, sizeof a, "%s/run0/log.jsonl", d);
    snprintf(b, sizeof b, "%s/run1/log.jsonl", d);
    char *la = tu_log_without_timing(a), *lb = tu_log_without_timing(b);
    cr_expect_str_eq(la, lb);
    free(la);
    free(lb);
    /* and another seed gives another model */
    cr_assert_eq(tu_sh("%s/train --config %s/small.json --set train_size=800 --seed 4 --out %s/run2 > /dev/null", tu_bin(), d, d), 0);
    snprintf(a, sizeof a, "%s/run0/model.bin", d);
    snprintf(b, sizeof b, "%s/run2/model.bin", d);
    cr_expect(!tu_same_file(a, b));
    tu_rm_rf(d);
    free(d);
}

/* bfloat16 GEMMs: the small run still learns, is reproducible, and differs from float32's. */
Test(cli, bf16_run_learns_and_is_reproducible, .timeout = 240) {
    tu_require_bf16();
    char *d = tu_tmpdir();
    write_config(d, 6);
    for (int k = 0; k < 2; k++)
        cr_assert_eq(tu_sh("%s/train --config %s/small.json --set precision=bf16 --out %s/bf%d > /dev/null", tu_bin(), d, d, k), 0);
    char a[256], b[256];
    snprintf(a, sizeof a, "%s/bf0", d);
    double exact = last_test_metric(a, "test_exact_match");
    cr_expect_geq(exact, 0.95, "bf16: test exact match %.3f after 6 epochs", exact);
    snprintf(a, sizeof a, "%s/bf0/model.bin", d);
    snprintf(b, sizeof b, "%s/bf1/model.bin", d);
    cr_expect(tu_same_file(a, b), "bf16 model.bin differs between two runs with the same seed");
    cr_assert_eq(tu_sh("%s/train --config %s/small.json --set epochs=1 --set test_each_epoch=true --out %s/f32 > /dev/null",
                    tu_bin(), d, d), 0);
    /* test_each_epoch: with one epoch, the epoch line's test score is the final test score */
    snprintf(a, sizeof a, "%s/f32/log.jsonl", d);
    char *log = tu_slurp(a, NULL), *ep = log ? strstr(log, "{\"type\":\"epoch\"") : NULL;
    cr_assert(ep != NULL);
    cJSON *j = cJSON_Parse(strtok(ep, "\n"));
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, "test_loss");
    cr_assert(cJSON_IsNumber(x), "no test_loss in the epoch line");
    snprintf(a, sizeof a, "%s/f32", d);
    cr_expect_eq(x->valuedouble, last_test_metric(a, "test_loss"));
    cr_expect(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(j, "elapsed_s")));
    cJSON_Delete(j);
    free(log);
    cr_assert_eq(tu_sh("%s/train --config %s/small.json --set epochs=1 --set precision=bf16 --out %s/b16 > /dev/null", tu_bin(), d, d), 0);
    snprintf(a, sizeof a, "%s/f32/model.bin", d);
    snprintf(b, sizeof b, "%s/b16/model.bin", d);
    cr_expect(!tu_same_file(a, b), "bf16 and fp32 gave the same weights");
    cr_expect_eq(tu_sh("%s/train --config %s/small.json --set precision=fp16 --out %s/x 2> %s/err.txt", tu_bin(), d, d, d), 2);
    snprintf(a, sizeof a, "%s/err.txt", d);
    char *msg = tu_slurp(a, NULL);
    cr_expect(msg && strstr(msg, "precision") && strstr(msg, "fp32,bf16"), "message: %s", msg ? msg : "(none)");
    free(msg);
    cr_expect_eq(tu_sh("%s/train --config %s/small.json --set precision=int8 --out %s/x 2> %s/err.txt", tu_bin(), d, d, d), 2);
    msg = tu_slurp(a, NULL);
    cr_expect(msg && strstr(msg, "int8") && strstr(msg, "decoding"), "message: %s", msg ? msg : "(none)");
    free(msg);
    cr_expect_eq(tu_sh("%s/speed --model %s/bf0/model.bin --set precision=int8 --no-decode 2> %s/err.txt", tu_bin(), d, d), 2);
    msg = tu_slurp(a, NULL);
    cr_expect(msg && strstr(msg, "int8") && strstr(msg, "--no-train"), "message: %s", msg ? msg : "(none)");
    free(msg);
    tu_rm_rf(d);
    free(d);
}

/* d/small.json with `set` (train_size=800: 25 steps an epoch) trained whole into d/full and
 * in three sessions into d/part (paused mid-epoch 1 and in epoch 2, resumed): the same
 * model.bin, last.bin (moments and moving average too) and log, timings aside. */
static void paused_twice_equals_full(const char *d, const char *set) {
    cr_assert_eq(tu_sh("%s/train --config %s/small.json --set train_size=800 %s --out %s/full > %s/out.txt 2>&1", tu_bin(), d, set, d,
                       d),
                 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    cr_assert_eq(tu_sh("%s/train --config %s/small.json --set train_size=800 %s --out %s/part --pause-at 13 > /dev/null", tu_bin(),
                       d, set, d),
                 0);
    cr_assert_eq(tu_sh("%s/train --resume %s/part --pause-at 31 > /dev/null", tu_bin(), d), 0);
    cr_assert_eq(tu_sh("%s/train --resume %s/part > /dev/null", tu_bin(), d), 0);
    char a[256], b[256], why[512] = "";
    snprintf(a, sizeof a, "%s/full/model.bin", d);
    snprintf(b, sizeof b, "%s/part/model.bin", d);
    cr_expect(tu_same_file(a, b), "model.bin of the resumed run differs");
    snprintf(a, sizeof a, "%s/full/last.bin", d);
    snprintf(b, sizeof b, "%s/part/last.bin", d);
    cr_expect(tu_same_checkpoint(a, b, why, sizeof why), "last.bin: %s", why);
    snprintf(a, sizeof a, "%s/full/log.jsonl", d);
    snprintf(b, sizeof b, "%s/part/log.jsonl", d);
    char *la = tu_log_without_timing(a), *lb = tu_log_without_timing(b);
    cr_expect_str_eq(la, lb);
    free(la);
    free(lb);
}

Test(cli, resume_equals_uninterrupted, .timeout = 240) {
    char *d = tu_tmpdir();
    write_config(d, 2);
    paused_twice_equals_full(d, "");
    tu_rm_rf(d);
    free(d);
}

/* The log without its "extend" line (which it returns, malloc'd, in *ext). */
static char *log_without_extend(const char *path, char **ext) {
    char *log = tu_log_without_timing(path), *at = strstr(log, "{\"type\":\"extend\"");
    *ext = NULL;
    if (!at) return log;
    char *end = strchr(at, '\n');
    cr_assert(end != NULL);
    *ext = strndup(at, (size_t)(end - at));
    memmove(at, end + 1, strlen(end + 1) + 1);
    return log;
}

/* --resume --epochs N extends a run, a finished one too: trained one epoch and tested, then
 * extended to two (paused within the second, resumed without --epochs), it equals a run of two
 * epochs (model.bin, last.bin, config.json's epochs, the log but for the "extend" line, which
 * keeps the first test's line). Fewer epochs than begun, and runs that ended at max_steps,
 * are refused. */
Test(cli, resume_with_more_epochs_extends_a_finished_run, .timeout = 240) {
    char *d = tu_tmpdir();
    write_config(d, 2);
    const char *data = "--set train_size=800"; /* 25 steps an epoch */
    cr_assert_eq(tu_sh("%s/train --config %s/small.json %s --out %s/full > /dev/null", tu_bin(), d, data, d), 0);
    cr_assert_eq(tu_sh("%s/train --config %s/small.json %s --epochs 1 --out %s/ext > /dev/null", tu_bin(), d, data, d), 0);
    double first_test = last_test_metric(tu_path(d, "ext"), "test_loss");
    /* paused at once (the run is at step 25): last.bin must hold the new count already */
    cr_assert_eq(tu_sh("%s/train --resume %s/ext --epochs 2 --pause-at 25 > %s/out.txt", tu_bin(), d, d), 0);
    char *out = tu_slurp(tu_path(d, "out.txt"), NULL);
    cr_expect(out && strstr(out, "2 epochs in all (the config said 1)") && strstr(out, "paused after step 25"), "%s",
              out ? out : "(none)");
    free(out);
    cr_assert_eq(tu_sh("%s/train --resume %s/ext --pause-at 30 > /dev/null", tu_bin(), d), 0);
    cr_assert_eq(tu_sh("%s/train --resume %s/ext > /dev/null", tu_bin(), d), 0, "a plain --resume keeps the new count");
    char why[512] = "";
    /* model.bin: the same weights (its config is of the epoch that saved it: 1 or 2 epochs) */
    Checkpoint ma, mb;
    S2sError err;
    cr_assert_eq(ckpt_load(&ma, tu_path(d, "full/model.bin"), &err), S2S_OK, "%s", err.msg);
    cr_assert_eq(ckpt_load(&mb, tu_path(d, "ext/model.bin"), &err), S2S_OK, "%s", err.msg);
    cr_assert_eq(ma.n_tensors, mb.n_tensors);
    for (int t = 0; t < ma.n_tensors; t++)
        cr_expect(ma.tensors[t].size == mb.tensors[t].size &&
                      !memcmp(ma.tensors[t].data, mb.tensors[t].data, 4 * ma.tensors[t].size),
                  "model.bin: %s differs", ma.tensors[t].name);
    ckpt_free(&ma);
    ckpt_free(&mb);
    cr_expect(tu_same_checkpoint(tu_path(d, "full/last.bin"), tu_path(d, "ext/last.bin"), why, sizeof why), "last.bin: %s", why);
    char *conf = tu_slurp(tu_path(d, "ext/config.json"), NULL);
    cJSON *cj = cJSON_Parse(conf);
    cr_expect_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(cj, "train"), "epochs")->valueint, 2, "config.json: %s", conf);
    cJSON_Delete(cj);
    free(conf);
    char *ext, *la = tu_log_without_timing(tu_path(d, "full/log.jsonl")), *lb = log_without_extend(tu_path(d, "ext/log.jsonl"), &ext);
    cr_expect_str_eq(la, lb);
    cr_assert(ext != NULL, "no extend line");
    cJSON *j = cJSON_Parse(ext);
    cr_expect_eq(cJSON_GetObjectItem(j, "epochs_before")->valueint, 1);
    cr_expect_eq(cJSON_GetObjectItem(j, "epochs")->valueint, 2);
    cr_expect_eq(cJSON_GetObjectItem(j, "step")->valueint, 25);
    const cJSON *before = cJSON_GetObjectItem(j, "test_before");
    cr_expect(before && cJSON_GetObjectItem(before, "test_loss") &&
                  cJSON_GetObjectItem(before, "test_loss")->valuedouble == first_test,
              "the first test's line is kept: %s", ext);
    cJSON_Delete(j);
    free(ext);
    free(la);
    free(lb);
    /* refused: fewer epochs than begun; a run that ended at train.max_steps */
    cr_expect_eq(tu_sh("%s/train --resume %s/ext --epochs 1 2> %s/err.txt", tu_bin(), d, d), 2);
    char *msg = tu_slurp(tu_path(d, "err.txt"), NULL);
    cr_expect(msg && strstr(msg, "--epochs 1") && strstr(msg, "has begun 2 epochs"), "%s", msg ? msg : "(none)");
    free(msg);
    cr_assert_eq(tu_sh("%s/train --config %s/small.json %s --set max_steps=10 --out %s/steps > /dev/null", tu_bin(), d, data, d), 0);
    cr_expect_eq(tu_sh("%s/train --resume %s/steps --epochs 3 2> %s/err.txt", tu_bin(), d, d), 2);
    msg = tu_slurp(tu_path(d, "err.txt"), NULL);
    cr_expect(msg && strstr(msg, "train.max_steps") && strstr(msg, "stop again"), "%s", msg ? msg : "(none)");
    free(msg);
    tu_rm_rf(d);
    free(d);
}

/* The recipe's keys together (label smoothing, AdamW, tied embeddings, the weights' moving
 * average) on a Transformer: a run paused twice and resumed equals the uninterrupted one
 * (model.bin, last.bin with its moving average, the log); after one epoch model.bin holds the
 * average (last.bin's EMAW), not the training weights. */
Test(cli, recipe_keys_resume_bit_for_bit, .timeout = 240) {
    char *d = tu_tmpdir();
    write_config(d, 2);
    const char *set = "--set model.type=transformer --set d_model=16 --set heads=2 --set ff=32 "
                      "--set layers=1 --set label_smoothing=0.1 --set optimizer=adamw --set weight_decay=0.01 "
                      "--set tie_embeddings=all --set ema_decay=0.9";
    paused_twice_equals_full(d, set);
    /* one epoch: model.bin is that epoch's average */
    cr_assert_eq(tu_sh("%s/train --config %s/small.json --set train_size=800 %s --set epochs=1 --out %s/one > /dev/null", tu_bin(), d, set, d), 0);
    Checkpoint best, last;
    S2sError err;
    cr_assert_eq(ckpt_load(&best, tu_path(d, "one/model.bin"), &err), S2S_OK, "%s", err.msg);
    cr_assert_eq(ckpt_load(&last, tu_path(d, "one/last.bin"), &err), S2S_OK, "%s", err.msg);
    cr_expect(last.has_ema && !best.has_ema);
    cr_assert_eq(best.n_tensors, last.n_tensors);
    bool all_avg = true, any_weight_differs = false;
    for (int i = 0; i < best.n_tensors && last.has_ema; i++) {
        size_t n = best.tensors[i].size * 4;
        all_avg &= memcmp(best.tensors[i].data, last.tensors[i].ema, n) == 0;
        any_weight_differs |= memcmp(best.tensors[i].data, last.tensors[i].data, n) != 0;
    }
    cr_expect(all_avg, "model.bin holds the moving average");
    cr_expect(any_weight_differs, "the moving average is not the training weights");
    ckpt_free(&best);
    ckpt_free(&last);
    tu_rm_rf(d);
    free(d);
}

/* The checkpoints of each "valid"/"epoch" line of a log: steps and train.metric values. */
typedef struct Validations {
    long step[64];
    double metric[64], epochs_done[64]; /* epochs_done: "valid" lines' fraction, else the epoch */
    int n;
} Validations;

static Validations read_validations(const char *log_path) {
    Validations v = {{0}, {0}, {0}, 0};
    char *log = tu_slurp(log_path, NULL);
    cr_assert(log != NULL);
    for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strstr(line, "\"type\":\"valid\"") && !strstr(line, "\"type\":\"epoch\"")) continue;
        cJSON *j = cJSON_Parse(line);
        cr_assert(v.n < 64 && cJSON_GetObjectItem(j, "metric"), "%s", line);
        v.step[v.n] = (long)cJSON_GetObjectItem(j, "step")->valuedouble;
        const cJSON *done = cJSON_GetObjectItem(j, "epochs_done");
        v.epochs_done[v.n] = done ? done->valuedouble : cJSON_GetObjectItem(j, "epoch")->valuedouble;
        v.metric[v.n++] = cJSON_GetObjectItem(j, "metric")->valuedouble;
        cJSON_Delete(j);
    }
    free(log);
    return v;
}

/* train.valid_every validates within epochs ("valid" lines at every 10th step, none at an
 * epoch's end, which validates anyway), keep_last and keep_best leave exactly the files their
 * rules name (the last 2 by step and the best 1 by the logged metric, ties to the later), a
 * run paused twice and resumed ends with the same files, log and model; ./average --last 2
 * writes the mean of the last two; patience counts validations. */
Test(cli, validation_every_n_steps_kept_checkpoints_and_average, .timeout = 240) {
    char *d = tu_tmpdir();
    write_config(d, 2);
    const char *set = "--set valid_every=10 --set keep_last=2 --set keep_best=1 --set metric=valid_loss";
    paused_twice_equals_full(d, set);
    Validations v = read_validations(tu_path(d, "full/log.jsonl"));
    long want_steps[] = {10, 20, 25, 30, 40, 50}; /* 25 steps an epoch */
    cr_assert_eq(v.n, 6);
    for (int i = 0; i < 6; i++) {
        cr_expect_eq(v.step[i], want_steps[i]);
        cr_expect_float_eq(v.epochs_done[i], want_steps[i] / 25.0, 1e-12, "line %d: epochs done %g", i, v.epochs_done[i]);
    }
    int best = 0;
    for (int i = 1; i < v.n; i++)
        if (v.metric[i] <= v.metric[best]) best = i; /* valid_loss: lower; ties to the later */
    for (int i = 0; i < v.n; i++) {
        char name[64], a[256], b[256];
        snprintf(name, sizeof name, "checkpoints/step%09ld.bin", v.step[i]);
        snprintf(a, sizeof a, "%s/full/%s", d, name);
        snprintf(b, sizeof b, "%s/part/%s", d, name);
        bool want = i >= v.n - 2 || i == best;
        cr_expect_eq(access(a, F_OK) == 0, want, "%s %s", name, want ? "missing" : "kept");
        if (want) cr_expect(tu_same_file(a, b), "%s differs after resuming", name);
        else cr_expect(access(b, F_OK) != 0, "%s kept by the resumed run", name);
    }
    /* the mean of the last two */
    cr_assert_eq(tu_sh("%s/average --last 2 %s/full --out %s/avg.bin > /dev/null", tu_bin(), d, d), 0);
    Checkpoint x, y, m;
    S2sError err;
    char a[256], b[256];
    snprintf(a, sizeof a, "%s/full/checkpoints/step%09ld.bin", d, v.step[4]);
    snprintf(b, sizeof b, "%s/full/checkpoints/step%09ld.bin", d, v.step[5]);
    cr_assert_eq(ckpt_load(&x, a, &err), S2S_OK, "%s", err.msg);
    cr_assert_eq(ckpt_load(&y, b, &err), S2S_OK, "%s", err.msg);
    cr_assert_eq(ckpt_load(&m, tu_path(d, "avg.bin"), &err), S2S_OK, "%s", err.msg);
    size_t wrong = 0, differ = 0;
    for (int t = 0; t < m.n_tensors; t++)
        for (size_t i = 0; i < m.tensors[t].size; i++) {
            float p, q, r;
            memcpy(&p, (const char *)x.tensors[t].data + 4 * i, 4);
            memcpy(&q, (const char *)y.tensors[t].data + 4 * i, 4);
            memcpy(&r, (const char *)m.tensors[t].data + 4 * i, 4);
            wrong += r != (float)(((double)p + q) / 2);
            differ += p != q;
        }
    cr_expect_eq(wrong, 0, "%zu weights are not the mean", wrong);
    cr_expect_gt(differ, 0, "the two checkpoints differ");
    ckpt_free(&x);
    ckpt_free(&y);
    ckpt_free(&m);
    cr_expect_eq(tu_sh("printf 'abc\\n' | %s/translate %s/avg.bin > /dev/null", tu_bin(), d), 0, "the average translates");
    /* unlike models: one line naming the difference, exit 1; too few kept: exit 1 */
    cr_assert_eq(tu_sh("%s/train --config %s/small.json --set train_size=64 --set epochs=1 --set embedding=24 --out %s/other > /dev/null",
                       tu_bin(), d, d),
                 0);
    cr_expect_eq(tu_sh("%s/average %s/full/model.bin %s/other/model.bin --out %s/x.bin 2> %s/err.txt", tu_bin(), d, d, d, d), 1);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "model.embedding differs"), "%s", tu_slurp(tu_path(d, "err.txt"), NULL));
    cr_expect_eq(tu_sh("%s/average --last 5 %s/full --out %s/x.bin 2> %s/err.txt", tu_bin(), d, d, d), 1);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "--last asks for 5"), "%s", tu_slurp(tu_path(d, "err.txt"), NULL));
    cr_expect(access(tu_path(d, "x.bin"), F_OK) != 0, "nothing written");
    cr_expect_eq(tu_sh("%s/average %s/full/model.bin --out %s/x.bin 2> /dev/null", tu_bin(), d, d), 2, "one model: usage");
    /* patience 1 in validations: the run stops at the first one without improvement */
    cr_assert_eq(tu_sh("%s/train --config %s/small.json --set train_size=800 --set valid_every=2 --set patience=1 "
                       "--set metric=exact_match --out %s/early > /dev/null",
                       tu_bin(), d, d),
                 0);
    Validations e = read_validations(tu_path(d, "early/log.jsonl"));
    cr_assert_geq(e.n, 2);
    double best_before = e.metric[0];
    for (int i = 1; i < e.n - 1; i++) {
        cr_expect_gt(e.metric[i], best_before, "validation %d did not improve, yet the run went on", i + 1);
        best_before = fmax(best_before, e.metric[i]);
    }
    cr_expect_leq(e.metric[e.n - 1], best_before, "the last validation (the stop) did not improve");
    cr_expect(e.step[e.n - 1] < 50, "stopped early, at step %ld", e.step[e.n - 1]);
    cr_expect(tu_file_has(tu_path(d, "early/log.jsonl"), "\"type\":\"test\""), "tested after the early stop");
    tu_rm_rf(d);
    free(d);
}

/* lr_schedule: every step's logged lr is the base lr times the schedule at that step's share
 * of the configured epochs, and a run stopped and resumed mid-epoch gives the same model. */
Test(cli, lr_schedule_follows_the_steps_and_resumes, .timeout = 240) {
    char *d = tu_tmpdir();
    write_config(d, 2);
    const char *set = "--set train_size=800 --set lr_schedule=cosine --set log_every=1 --set warmup_steps=8";
    cr_assert_eq(tu_sh("%s/train --config %s/small.json %s --out %s/full > /dev/null", tu_bin(), d, set, d), 0);
    cr_assert_eq(tu_sh("%s/train --config %s/small.json %s --out %s/part --pause-at 13 > /dev/null", tu_bin(), d, set, d), 0);
    cr_assert_eq(tu_sh("%s/train --resume %s/part > /dev/null", tu_bin(), d), 0);
    char a[256], b[256];
    snprintf(a, sizeof a, "%s/full/model.bin", d);
    snprintf(b, sizeof b, "%s/part/model.bin", d);
    cr_expect(tu_same_file(a, b), "model.bin of the resumed run differs");
    snprintf(a, sizeof a, "%s/full/log.jsonl", d);
    char *log = tu_slurp(a, NULL);
    cr_assert(log != NULL);
    int steps = 0;
    for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strstr(line, "\"type\":\"step\"")) continue;
        cJSON *j = cJSON_Parse(line);
        int step = (int)cJSON_GetObjectItem(j, "step")->valuedouble; /* 1-based; 25 steps an epoch, 2 epochs; 8 of warmup */
        double want = 0.005 * 0.5 * (1.0 + cos(3.14159265358979323846 * (step - 1) / 50.0)) * (step < 8 ? step / 8.0 : 1.0);
        cr_expect_float_eq(cJSON_GetObjectItem(j, "lr")->valuedouble, want, 1e-6 * want + 1e-12, "step %d", step);
        cJSON_Delete(j);
        steps++;
    }
    cr_expect_eq(steps, 50);
    free(log);
    tu_rm_rf(d);
    free(d);
}

Test(cli, config_errors_exit_2_with_one_line) {
    char *d = tu_tmpdir();
    char p[256];
    snprintf(p, sizeof p, "%s/bad.json", d);
    FILE *f = fopen(p, "w");
    fprintf(f, "{\n  \"model\": {\n    \"encoder_hidden\": -3\n  }\n}\n");
    fclose(f);
    cr_expect_eq(tu_sh("%s/train --config %s --out %s/r 2> %s/err.txt", tu_bin(), p, d, d), 2);
    snprintf(p, sizeof p, "%s/err.txt", d);
    char *e = tu_slurp(p, NULL);
    cr_expect(strstr(e, "train: ") == e && strstr(e, "bad.json:3:5: model.encoder_hidden: expected a positive integer, got -3\n"),
              "%s", e);
    free(e);
    cr_expect_eq(tu_sh("%s/train --config %s/missing.json 2> /dev/null", tu_bin(), d), 2);
    cr_expect_eq(tu_sh("%s/train --config reverse --set nonsense=1 2> /dev/null", tu_bin()), 2);
    cr_expect_eq(tu_sh("%s/train --config reverse --set attention=dot --set bidirectional=true 2> %s/err.txt > /dev/null", tu_bin(), d), 2);
    e = tu_slurp(p, NULL);
    cr_expect(strstr(e, "decoder_hidden (96) must equal the encoder output size (192 = 2 x 96)"), "%s", e);
    free(e);
    /* the recipe's keys (issue 18): each mistake one line naming the key, exit 2, no run folder */
    const struct {
        const char *set, *says;
    } recipe[] = {
        {"--set label_smoothing=1", "train.label_smoothing: expected a number in [0, 0.999], got 1"},
        {"--set label_smoothing=-0.1", "train.label_smoothing"},
        {"--set warmup_steps=100000", "train.warmup_steps: 100000 steps of warmup in a run of"},
        {"--set tie_embeddings=decoder", "model.tie_embeddings: \"decoder\" makes the output layer's weight the embedding"},
        {"--set tie_embeddings=sideways", "model.tie_embeddings"},
        {"--set optimizer=adamw --set adam_beta2=1", "train.adam_beta2"},
        {"--set ema_decay=1", "train.ema_decay"},
        {"--set keep_last=-1", "train.keep_last"},
    };
    for (size_t i = 0; i < sizeof recipe / sizeof recipe[0]; i++) {
        cr_expect_eq(tu_sh("%s/train --config reverse %s --out %s/rr 2> %s/err.txt > /dev/null", tu_bin(), recipe[i].set, d, d), 2,
                     "%s", recipe[i].set);
        e = tu_slurp(p, NULL);
        cr_expect(strstr(e, recipe[i].says) && !strchr(strchr(e, '\n') + 1, '\n'), "%s: %s", recipe[i].set, e);
        free(e);
        cr_expect(access(tu_path(d, "rr"), F_OK) != 0, "%s made a run folder", recipe[i].set);
    }
    cr_expect_eq(tu_sh("%s/train 2> /dev/null", tu_bin()), 2);
    cr_expect_eq(tu_sh("%s/train --bogus 2> /dev/null", tu_bin()), 2);
    /* D32: an unknown last option is unknown, not "needs a value"; a missing value is said */
    cr_expect_eq(tu_sh("%s/train --config reverse --bogus 2> %s/err.txt", tu_bin(), d), 2);
    e = tu_slurp(p, NULL);
    cr_expect(strstr(e, "train: --bogus: unknown option"), "%s", e);
    free(e);
    cr_expect_eq(tu_sh("%s/train --config reverse --pause-at 2> %s/err.txt", tu_bin(), d), 2);
    e = tu_slurp(p, NULL);
    cr_expect(strstr(e, "train: --pause-at: needs a value"), "%s", e);
    free(e);
    cr_expect_eq(tu_sh("%s/train --config reverse --pause-at 1e3 2> /dev/null", tu_bin()), 2, "strict numbers");
    cr_expect_eq(tu_sh("%s/train --version | grep -q 's2s '", tu_bin()), 0);
    /* D35: a folder named like a config is not the config: configs/reverse.json is */
    cr_assert_eq(tu_sh("mkdir -p %s/w/reverse %s/w/configs && cp configs/reverse.json %s/w/configs/", d, d, d), 0);
    cr_expect_eq(tu_sh("cd %s/w && %s/train --config reverse --set train_size=64 --set epochs=1 --pause-at 1 --out r > out.txt",
                       d, tu_bin()), 0);
    cr_expect_eq(tu_sh("grep -q 'train: configs/reverse.json' %s/w/out.txt", d), 0);
    tu_rm_rf(d);
    free(d);
}

Test(cli, translate_bad_model_files_exit_1) {
    char *d = tu_tmpdir();
    cr_expect_eq(tu_sh("echo abc | %s/translate %s/none.bin 2> /dev/null", tu_bin(), d), 1);
    cr_expect_eq(tu_sh("echo 'not a model' > %s/t.bin; echo abc | %s/translate %s/t.bin 2> %s/err.txt", d, tu_bin(), d, d), 1);
    char p[256];
    snprintf(p, sizeof p, "%s/err.txt", d);
    char *e = tu_slurp(p, NULL);
    cr_expect(strstr(e, "t.bin: not an s2s model file"), "%s", e);
    free(e);
    cr_expect_eq(tu_sh("%s/translate 2> /dev/null", tu_bin()), 2);
    tu_rm_rf(d);
    free(d);
}

Test(cli, translate_reports_bad_lines_and_goes_on, .timeout = 120) {
    char *d = dir_with_small_model();
    cr_expect_eq(tu_sh("printf 'abc\\nxyz\\n\\nab\\377\\ndcba\\n' | %s/translate %s/run/model.bin > %s/out.txt 2> %s/err.txt", tu_bin(), d, d, d), 1);
    char p[256];
    snprintf(p, sizeof p, "%s/out.txt", d);
    char *o = tu_slurp(p, NULL);
    int lines = 0;
    for (char *c = o; *c; c++) lines += *c == '\n';
    cr_expect_eq(lines, 5, "one output line per input line:\n%s", o);
    free(o);
    snprintf(p, sizeof p, "%s/err.txt", d);
    char *e = tu_slurp(p, NULL);
    cr_expect(strstr(e, "line 2: 'x' is not in the model's alphabet"), "%s", e);
    cr_expect(strstr(e, "line 4: byte 0xff"), "%s", e);
    cr_expect(!strstr(e, "line 3"), "an empty line is not an error: %s", e);
    free(e);
    tu_rm_rf(d);
    free(d);
}

/* SIGINT mid-run: the step finishes, last.bin is written, exit 130; resuming gives the
 * model of an uninterrupted run. */
Test(cli, sigint_then_resume_equals_uninterrupted, .timeout = 240) {
    char *d = tu_tmpdir();
    write_config(d, 6); /* long enough (~2 s) that the signals land mid-run */
    cr_assert_eq(tu_sh("%s/train --config %s/small.json --out %s/full > /dev/null", tu_bin(), d, d), 0);
    int rc = tu_sh("%s/train --config %s/small.json --out %s/part > %s/part.txt 2> %s/err.txt & pid=$!; sleep 0.4;"
                " kill -INT $pid; wait $pid", tu_bin(), d, d, d, d);
    cr_assert_eq(rc, 130, "an interrupted run exits 130 (got %d)", rc);
    char p[256];
    snprintf(p, sizeof p, "%s/err.txt", d);
    char *e = tu_slurp(p, NULL);
    cr_expect(strstr(e, "interrupted after step") && strstr(e, "--resume"), "%s", e);
    free(e);
    cr_assert_eq(tu_sh("%s/train --resume %s/part > /dev/null", tu_bin(), d), 0);
    char a[256], b[256];
    snprintf(a, sizeof a, "%s/full/model.bin", d);
    snprintf(b, sizeof b, "%s/part/model.bin", d);
    cr_expect(tu_same_file(a, b), "model.bin after SIGINT and --resume differs from the uninterrupted run");
    /* SIGTERM likewise, exit 143 */
    rc = tu_sh("%s/train --config %s/small.json --out %s/term > /dev/null 2>&1 & pid=$!; sleep 0.4; kill -TERM $pid; wait $pid",
            tu_bin(), d, d);
    cr_assert_eq(rc, 143, "SIGTERM exits 143 (got %d)", rc);
    cr_assert_eq(tu_sh("%s/train --resume %s/term > /dev/null", tu_bin(), d), 0);
    snprintf(b, sizeof b, "%s/term/model.bin", d);
    cr_expect(tu_same_file(a, b), "model.bin after SIGTERM and --resume differs from the uninterrupted run");
    tu_rm_rf(d);
    free(d);
}

/* A model file whose weights are finite but whose loss overflows: an output bias of 3e38 for
 * <pad> (never a target) and -3e38 for every other token puts each target's log-probability
 * near -6e38, past float range (a file with a NaN in it is refused at load). Made from a real
 * last.bin, so the checksum holds. */
static void overflow_bias(ParamStore *ps, CkptSave *s, void *ctx) {
    (void)s, (void)ctx;
    Tensor *bias = params_find(ps, "decoder.out.bias")->t;
    for (size_t i = 0; i < bias->size; i++) bias->data[i] = i == TOK_PAD ? 3e38f : -3e38f;
}

static void poison_checkpoint(const char *path) { tu_rewrite_checkpoint(path, overflow_bias, NULL); }

static void nan_bias(ParamStore *ps, CkptSave *s, void *ctx) {
    (void)s, (void)ctx;
    params_find(ps, "decoder.out.bias")->t->data[2] = NAN;
}

/* A NaN or Inf in a model file is refused at load (D21): it would decode as <unk>. */
Test(cli, model_files_with_nan_weights_are_refused, .timeout = 120) {
    char *d = dir_with_small_model();
    char p[512];
    snprintf(p, sizeof p, "%s/run/model.bin", d);
    tu_rewrite_checkpoint(p, nan_bias, NULL);
    cr_expect_eq(tu_sh("echo abc | %s/translate %s > /dev/null 2> %s/err.txt", tu_bin(), p, d), 1);
    snprintf(p, sizeof p, "%s/err.txt", d);
    char *e = tu_slurp(p, NULL);
    cr_expect(strstr(e, "corrupt: the weights of \"decoder.out.bias\" hold nan at index 2"), "%s", e);
    free(e);
    tu_rm_rf(d);
    free(d);
}

/* The target vocabulary with entry 5 replaced by ctx. */
static void replace_token_5(ParamStore *ps, CkptSave *s, void *ctx) {
    (void)ps;
    static const char *toks[64];
    for (int i = 0; i < s->n_trg && i < 64; i++) toks[i] = s->trg_tokens[i];
    toks[5] = ctx;
    s->trg_tokens = toks;
}

/* A vocabulary entry with a line break would print more output lines than input lines
 * (D22): such a file is refused at load. */
Test(cli, model_files_with_multiline_tokens_are_refused, .timeout = 120) {
    char *d = dir_with_small_model();
    char p[512];
    snprintf(p, sizeof p, "%s/run/model.bin", d);
    const char *bad[] = {"b\nx", "b x", ""};
    cr_assert_eq(tu_sh("cp %s %s/good.bin", p, d), 0);
    for (int k = 0; k < 3; k++) {
        cr_assert_eq(tu_sh("cp %s/good.bin %s", d, p), 0);
        tu_rewrite_checkpoint(p, replace_token_5, (void *)bad[k]);
        cr_expect_eq(tu_sh("printf 'abc\\nab\\n' | %s/translate %s > %s/out.txt 2> %s/err.txt", tu_bin(), p, d, d), 1);
        char q[600];
        snprintf(q, sizeof q, "%s/err.txt", d);
        cr_expect(tu_file_has(q, "target vocabulary entry 5 is not one word"), "%s", bad[k]);
    }
    tu_rm_rf(d);
    free(d);
}

Test(cli, nan_loss_stops_and_keeps_the_last_good_state, .timeout = 120) {
    char *d = tu_tmpdir();
    write_config(d, 2);
    cr_assert_eq(tu_sh("%s/train --config %s/small.json --out %s/run --pause-at 5 > /dev/null", tu_bin(), d, d), 0);
    char p[256], q[600];
    snprintf(p, sizeof p, "%s/run/last.bin", d);
    poison_checkpoint(p);
    snprintf(q, sizeof q, "cp %s %s/poisoned.bin", p, d);
    cr_assert_eq(system(q), 0);
    int rc = tu_sh("%s/train --resume %s/run > /dev/null 2> %s/err.txt", tu_bin(), d, d);
    cr_expect_eq(rc, 1, "an infinite loss exits 1");
    snprintf(q, sizeof q, "%s/err.txt", d);
    char *e = tu_slurp(q, NULL);
    cr_expect(strstr(e, "step 6 ") && strstr(e, "the loss is infinite") && strstr(e, "keeps the last good state"), "%s", e);
    free(e);
    snprintf(q, sizeof q, "%s/poisoned.bin", d);
    cr_expect(tu_same_file(p, q), "last.bin is left as it was");
    tu_rm_rf(d);
    free(d);
}

Test(cli, unwritable_output_is_reported_before_training) {
    char *d = tu_tmpdir();
    cr_expect_eq(tu_sh("%s/train --config reverse --out /dev/null/run > /dev/null 2> %s/err.txt", tu_bin(), d), 1);
    char p[256];
    snprintf(p, sizeof p, "%s/err.txt", d);
    char *e = tu_slurp(p, NULL);
    cr_expect(strstr(e, "/dev/null") && !strstr(e, "epoch"), "%s", e);
    free(e);
    tu_rm_rf(d);
    free(d);
}

/* --output is written to a temporary file and renamed at the end: an interrupt leaves the old
 * file as it was and no temporary, and a full disk is an error. Naming the input is refused
 * (test_trust.c: no output is an input). */
Test(cli, translate_output_is_whole_or_absent, .timeout = 240) {
    char *d = dir_with_small_model();
    cr_assert_eq(tu_sh("printf 'abcd\\nbbca\\n' > %s/in.txt && %s/translate %s/run/model.bin < %s/in.txt > %s/want.txt",
                    d, tu_bin(), d, d, d), 0);
    cr_assert_eq(tu_sh("cd %s && %s/translate run/model.bin --input in.txt --output out.txt && cmp out.txt want.txt", d, tu_bin()), 0,
                 "--output differs from what stdout gave");
    char a[256];

    /* wait until the temporary file exists, so the signal reaches the translation itself */
    cr_assert_eq(tu_sh("yes abcdabcd | head -n 3000000 > %s/big.txt && echo old > %s/out.txt && "
                    "{ %s/translate %s/run/model.bin --input %s/big.txt --output %s/out.txt & p=$!; "
                    "until ls %s/out.txt.tmp.* > /dev/null 2>&1 || ! kill -0 $p 2> /dev/null; do sleep 0.05; done; "
                    "kill -INT $p; wait $p; test $? -eq 130; }", d, d, tu_bin(), d, d, d, d), 0);
    cr_expect_eq(tu_sh("cd %s && test \"$(cat out.txt)\" = old", d), 0, "the interrupted output replaced the old file");
    cr_expect_eq(tu_sh("cd %s && ! ls out.txt.tmp.* > /dev/null 2>&1", d), 0, "a temporary file was left behind");

    cr_expect_eq(tu_sh("%s/translate %s/run/model.bin < %s/want.txt > /dev/full 2> %s/err.txt", tu_bin(), d, d, d), 1);
    snprintf(a, sizeof a, "%s/err.txt", d);
    char *e = tu_slurp(a, NULL);
    cr_expect(strstr(e, "translate: standard output: write error"), "%s", e);
    free(e);
    tu_rm_rf(d);
    free(d);
}

Test(cli, translate_nul_bytes_and_overlong_lines, .timeout = 120) {
    char *d = dir_with_small_model();
    /* line 2 has a NUL byte, line 3 is 1 MB long */
    char p[256];
    snprintf(p, sizeof p, "%s/in.txt", d);
    FILE *f = fopen(p, "wb");
    fputs("abc\n", f);
    fwrite("ab\0cd\n", 1, 6, f);
    for (int i = 0; i < (1 << 20); i++) fputc("abcd"[i % 4], f);
    fputs("\ndcba\n", f);
    fclose(f);
    cr_expect_eq(tu_sh("%s/translate %s/run/model.bin --input %s --output %s/out.txt 2> %s/err.txt", tu_bin(), d, p, d, d), 1);
    snprintf(p, sizeof p, "%s/err.txt", d);
    char *e = tu_slurp(p, NULL);
    cr_expect(strstr(e, "line 2: contains a NUL byte"), "%s", e);
    cr_expect(strstr(e, "line 3: source of 1048576 tokens; the limit is"), "%s", e);
    free(e);
    snprintf(p, sizeof p, "%s/out.txt", d);
    size_t n = 0;
    char *o = tu_slurp(p, &n);
    int lines = 0;
    for (size_t i = 0; i < n; i++) lines += o[i] == '\n';
    cr_expect_eq(lines, 4, "every line answered");
    free(o);
    tu_rm_rf(d);
    free(d);
}

/* D9: BLEU only when every output has its reference; D1: --output keeps devices and links as
 * they are; D28: endless input stops in bounded memory and time. */
Test(cli, translate_refs_outputs_and_endless_input, .timeout = 120) {
    char *d = dir_with_small_model();
    char p[600];
    cr_assert_eq(tu_sh("cd %s && printf 'abc\\nabd\\nbbb\\n' > in3 && printf 'cba\\ndba\\n' > ref2 && printf '' > empty"
                       " && printf 'cba\\ndba\\nbbb\\nabc\\n' > ref4", d), 0);
    const char *refs[] = {"ref2", "ref4"};
    for (int k = 0; k < 2; k++) {
        cr_expect_eq(tu_sh("cd %s && %s/translate run/model.bin --input in3 --ref %s > out.txt 2> err.txt", d, tu_bin(), refs[k]), 1);
        snprintf(p, sizeof p, "%s/err.txt", d);
        char *e = tu_slurp(p, NULL);
        cr_expect(strstr(e, k ? "ref4 has 4 lines, the input 3: no BLEU" : "ref2 has 2 lines, the input 3: no BLEU"), "%s", e);
        cr_expect(!strstr(e, "BLEU ="), "no score printed: %s", e);
        free(e);
    }
    cr_expect_eq(tu_sh("cd %s && %s/translate run/model.bin --input empty --ref empty 2> err.txt", d, tu_bin()), 1);
    snprintf(p, sizeof p, "%s/err.txt", d);
    char *e = tu_slurp(p, NULL);
    cr_expect(strstr(e, "no input lines: no BLEU") && !strstr(e, "BLEU ="), "%s", e);
    free(e);
    cr_expect_eq(tu_sh("cd %s && %s/translate run/model.bin --input in3 --ref in3 2> err.txt > /dev/null && grep -q 'BLEU = ' err.txt",
                       d, tu_bin()), 0);

    /* --output to a device, through a symlink, onto a symlink's target */
    cr_expect_eq(tu_sh("cd %s && %s/translate run/model.bin --input in3 --output /dev/null && test -c /dev/null", d, tu_bin()), 0);
    cr_assert_eq(tu_sh("cd %s && echo old > target.txt && ln -s target.txt link.txt", d), 0);
    cr_expect_eq(tu_sh("cd %s && %s/translate run/model.bin --input in3 --output link.txt && test -L link.txt"
                       " && test $(wc -l < target.txt) -eq 3", d, tu_bin()), 0, "the link stays, its target has the output");
    cr_expect_eq(tu_sh("cd %s && %s/translate run/model.bin --input in3 --output /dev/stdout > via_stdout.txt"
                       " && test $(wc -l < via_stdout.txt) -eq 3", d, tu_bin()), 0);

    /* /dev/zero: the first line is too long, then no line break in 64 MiB: stopped, exit 1 */
    cr_expect_eq(tu_sh("cd %s && %s/translate run/model.bin --input /dev/zero > out.txt 2> err.txt", d, tu_bin()), 1);
    e = tu_slurp(p, NULL);
    cr_expect(strstr(e, "line 1: longer than 1048576 bytes") && strstr(e, "no line break in 64 MiB"), "%s", e);
    free(e);
    cr_expect_eq(tu_sh("cd %s && %s/translate run/model.bin --input in3 --ref /dev/zero > /dev/null 2> err.txt", d, tu_bin()), 1);
    e = tu_slurp(p, NULL);
    cr_expect(strstr(e, "/dev/zero: a read error, or not text") && !strstr(e, "BLEU ="), "%s", e);
    free(e);
    /* arguments: an unknown last option is unknown, not "needs a value" (D32); strict numbers */
    cr_expect_eq(tu_sh("cd %s && %s/translate run/model.bin --bogus 2> err.txt", d, tu_bin()), 2);
    e = tu_slurp(p, NULL);
    cr_expect(strstr(e, "--bogus: unknown option"), "%s", e);
    free(e);
    cr_expect_eq(tu_sh("cd %s && %s/translate run/model.bin --beam 2x 2> err.txt", d, tu_bin()), 2);
    cr_expect_eq(tu_sh("cd %s && %s/translate run/model.bin --beam=2 < in3 > /dev/null", d, tu_bin()), 0, "--opt=value");
    tu_rm_rf(d);
    free(d);
}

/* D29: a warm-up that leaves no timed batch is refused, never a timing of nothing; and the
 * options that choose what ./speed measures. */
Test(cli, speed_refuses_a_warmup_past_the_batches, .timeout = 60) {
    char *d = tu_tmpdir();
    cr_expect_eq(tu_sh("%s/speed --config reverse --set train_size=100 --warmup 10 --no-decode > %s/out 2> %s/err", tu_bin(), d, d), 2);
    char p[512];
    snprintf(p, sizeof p, "%s/err", d);
    char *e = tu_slurp(p, NULL);
    cr_expect(strstr(e, "--warmup 10 leaves no batch to time: the data make 4 batches"), "%s", e);
    free(e);
    snprintf(p, sizeof p, "%s/out", d);
    e = tu_slurp(p, NULL);
    cr_expect(e && !strstr(e, "tok_per_s"), "nothing printed as a measurement: %s", e);
    free(e);
    cr_expect_eq(tu_sh("%s/speed --config reverse --set train_size=100 --warmup 1 --iters 2 --no-decode > /dev/null", tu_bin()), 0);
#if defined(__x86_64__) /* Prescott (SSE3) is a kernel set of x86-64 OpenBLAS builds */
    /* make bench picks OpenBLAS's kernel set by this field: it is the set the library runs */
    cr_expect_eq(tu_sh("OPENBLAS_CORETYPE=PRESCOTT %s/speed --config reverse --set train_size=100 --set gemm=openblas --warmup 1 "
                       "--iters 1 --no-decode > %s/out",
                       tu_bin(), d),
                 0);
    e = tu_slurp(p, NULL);
    cr_expect(e && strstr(e, "\"openblas_core\":\"Prescott\"}"), "%s", e);
    free(e);
#endif
    /* --gemm-profile: every product counted under its back end, the heads' small products too */
    cr_expect_eq(tu_sh("%s/speed --config reverse --set train_size=100 --set model.type=transformer --set d_model=32 --set heads=4 "
                       "--set ff=64 --set layers=1 --warmup 1 --iters 2 --no-decode --gemm-profile > %s/out",
                       tu_bin(), d),
                 0);
    e = tu_slurp(p, NULL);
    cr_assert(e);
    double share = 0;
    int paths = 0;
    bool small = false;
    for (const char *q = strstr(e, "\"event\":\"gemm_path\""); q; q = strstr(q + 1, "\"event\":\"gemm_path\"")) {
        const char *sh = strstr(q, "\"share\":");
        long calls = 0;
        cr_assert(sh && sscanf(strstr(q, "\"calls\":") + 8, "%ld", &calls) == 1);
        share += strtod(sh + 8, NULL);
        paths++;
        small |= !strncmp(strstr(q, "\"path\":\"") + 8, "small\"", 6) && calls > 0;
    }
    cr_expect(paths >= 2 && small, "%s", e);
    cr_expect(fabs(share - 1.0) < 0.01, "the paths' shares add up to %g", share);
    free(e);
    /* and of the fixed-length greedy decoding, after the training steps' */
    cr_expect_eq(tu_sh("%s/speed --config reverse --set train_size=100 --set test_size=100 --warmup 1 --iters 1 --gemm-profile "
                       "> %s/out",
                       tu_bin(), d),
                 0);
    e = tu_slurp(p, NULL);
    cr_assert(e);
    const char *tr = strstr(e, "\"phase\":\"train\""), *gr = strstr(e, "\"phase\":\"greedy_full\"");
    cr_expect(tr && gr && tr < gr && strstr(gr, "\"gemm_s\":") && strtod(strstr(gr, "\"gemm_s\":") + 9, NULL) > 0, "%s", e);
    free(e);
    cr_expect_eq(tu_sh("%s/speed --warmup 2x 2> /dev/null", tu_bin()), 2);
    cr_expect_eq(tu_sh("%s/speed 2> /dev/null", tu_bin()), 2, "a bare ./speed shows its usage, starts no benchmark");
    tu_rm_rf(d);
    free(d);
}

/* --decode-modes and --repeat, and scripts/ab-speed.sh, which alternates two builds' runs
 * (a test of its own: under ASan on a slow machine the speed test above took its minute). */
Test(cli, speed_decode_modes_repeat_and_ab_script, .timeout = 60) {
    char *d = tu_tmpdir();
    char p[512];
    snprintf(p, sizeof p, "%s/out", d);
    char *e;
    /* --decode-modes and --repeat: only the runs named, each as often as asked, in order */
    cr_expect_eq(tu_sh("%s/speed --config reverse --set train_size=100 --set test_size=100 --no-train "
                       "--decode-modes beam,greedy_full --repeat 2 > %s/out",
                       tu_bin(), d),
                 0);
    e = tu_slurp(p, NULL);
    cr_assert(e);
    const char *want[] = {"\"mode\":\"greedy_full\"", "\"rep\":0}", "\"mode\":\"greedy_full\"", "\"rep\":1}",
                          "\"mode\":\"beam\"",        "\"rep\":0}", "\"mode\":\"beam\"",        "\"rep\":1}"};
    const char *at = e;
    for (int i = 0; i < 8 && at; i++)
        if ((at = strstr(at, want[i]))) at++;
    int lines = 0;
    for (const char *q = strstr(e, "\"event\":\"decode\""); q; q = strstr(q + 1, "\"event\":\"decode\"")) lines++;
    cr_expect(at && lines == 4 && !strstr(e, "\"mode\":\"greedy\""), "%s", e);
    free(e);
    cr_expect_eq(tu_sh("%s/speed --config reverse --no-train --decode-modes greedy,beams 2> %s/err", tu_bin(), d), 2);
    snprintf(p, sizeof p, "%s/err", d);
    e = tu_slurp(p, NULL);
    cr_expect(e && strstr(e, "--decode-modes: 'beams' is not one of greedy, greedy_full, beam"), "%s", e);
    free(e);
    cr_expect_eq(tu_sh("%s/speed --config reverse --no-train --repeat 0 2> /dev/null", tu_bin()), 2);
    /* scripts/ab-speed.sh: two builds (here one, twice) alternated, a median per measurement */
    cr_expect_eq(tu_sh("scripts/ab-speed.sh --rounds 2 %s/speed %s/speed --config reverse --set train_size=100 --set test_size=100 "
                       "--no-train --decode-modes greedy_full --repeat 2 > %s/out 2> %s/err",
                       tu_bin(), tu_bin(), d, d),
                 0);
    snprintf(p, sizeof p, "%s/out", d);
    e = tu_slurp(p, NULL);
    cr_expect(e && strstr(e, "decode/fp32/greedy_full") && strstr(e, " A  n 4  median ") && strstr(e, " B  n 4  median ") &&
                  strstr(e, "B/A "),
              "%s", e);
    free(e);
    cr_expect_eq(tu_sh("scripts/ab-speed.sh %s/speed 2> /dev/null", tu_bin()), 2, "one build is no comparison");
    tu_rm_rf(d);
    free(d);
}

/* Every program answers --help and --version, names an unknown option, and reads an option's
 * value both as --opt value and --opt=value. */
Test(cli, every_program_shares_its_command_line_conventions, .timeout = 60) {
    const char *progs[] = {"train", "translate", "bleu", "subword", "attend", "compare", "speed", "average"};
    for (int i = 0; i < 8; i++) {
        cr_expect_eq(tu_sh("%s/%s --help | grep -q usage", tu_bin(), progs[i]), 0, "%s --help", progs[i]);
        /* the version and the build: a commit (with -dirty for changes not committed), or unknown */
        cr_expect_eq(tu_sh("%s/%s --version | grep -Eq '^%s \\(s2s [0-9]+\\.[0-9]+\\.[0-9]+, build ([0-9a-f]{7,}(-dirty)?|unknown)\\)$'",
                           tu_bin(), progs[i], progs[i]),
                     0, "%s --version", progs[i]);
        cr_expect_eq(tu_sh("%s/%s --bogus 2>&1 | grep -q '%s: --bogus: unknown option'", tu_bin(), progs[i], progs[i]), 0,
                     "%s names an unknown option", progs[i]);
    }
    char *d = tu_tmpdir();
    /* --opt=value and --opt value read the same */
    cr_expect_eq(tu_sh("%s/attend --q='[[1,0]]' --k '[[1,0],[0,1]]' --v='[[1],[2]]' > %s/a.txt && "
                       "%s/attend --q '[[1,0]]' --k='[[1,0],[0,1]]' --v '[[1],[2]]' > %s/b.txt && cmp -s %s/a.txt %s/b.txt",
                       tu_bin(), d, tu_bin(), d, d, d), 0);
    cr_expect_eq(tu_sh("%s/train --config=reverse --set=train_size=64 --set epochs=1 --pause-at=2 --out=%s/r > /dev/null", tu_bin(), d),
                 0);
    cr_expect_eq(tu_sh("grep -q '\"train_size\":\t64' %s/r/config.json", d), 0);
    tu_rm_rf(d);
    free(d);
}

/* train.loss_chunk: the small run learns as well with the output layer and loss in chunks
 * of 16 target rows (the op itself is checked against linear + loss in test_gemm). */
Test(cli, loss_chunk_run_learns, .timeout = 240) {
    char *d = tu_tmpdir();
    write_config(d, 6);
    cr_assert_eq(tu_sh("%s/train --config %s/small.json --set loss_chunk=16 --out %s/run > /dev/null", tu_bin(), d, d), 0);
    char run[256];
    snprintf(run, sizeof run, "%s/run", d);
    double exact = last_test_metric(run, "test_exact_match");
    cr_expect_geq(exact, 0.95, "loss_chunk 16: test exact match %.3f after 6 epochs", exact);
    tu_rm_rf(d);
    free(d);
}

/* bench/peak (make bench's ceiling per number format) prints one JSON line with a positive
 * rate for each format the CPU has instructions for and null for the others, each beside the
 * instructions it timed; a bad thread count or duration is a usage error. */
Test(cli, bench_peak_prints_a_rate_per_format) {
    char *d = tu_tmpdir();
    cr_assert_eq(tu_sh("%s/../bench/peak 1 0.01 > %s", tu_bin(), tu_path(d, "peak.json")), 0);
    cJSON *j = tu_json_load(tu_path(d, "peak.json"));
    cr_assert(j, "not JSON: %s", tu_slurp(tu_path(d, "peak.json"), NULL));
    cr_expect_float_eq(tu_get(j, "threads")->valuedouble, 1.0, 1e-9);
    __builtin_cpu_init();
    const char *keys[] = {"f32_gflops", "bf16_gflops", "int8_gops"};
    bool has[] = {__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"),
                  __builtin_cpu_supports("avx512bf16"), __builtin_cpu_supports("avx2")};
    for (int k = 0; k < 3; k++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, keys[k]);
        char isa[32];
        snprintf(isa, sizeof isa, "%s_isa", keys[k]);
        const cJSON *i = cJSON_GetObjectItemCaseSensitive(j, isa);
        if (has[k]) {
            cr_expect(cJSON_IsNumber(x) && x->valuedouble > 0, "%s", keys[k]);
            cr_expect(cJSON_IsString(i) && i->valuestring[0], "%s", isa);
        } else {
            cr_expect(cJSON_IsNull(x) && cJSON_IsNull(i), "%s: this CPU has no instructions for it", keys[k]);
        }
    }
    cJSON_Delete(j);
    cr_expect_eq(tu_sh("%s/../bench/peak 0 > /dev/null 2>&1", tu_bin()), 2);
    cr_expect_eq(tu_sh("%s/../bench/peak 1 -1 > /dev/null 2>&1", tu_bin()), 2);
    tu_rm_rf(d);
    free(d);
}

/* make bench's summary line (scripts/bench-summary.awk) is JSON with the ratios of the lines
 * it was given; on a CPU without bf16 (no bf16 line, ours or PyTorch's, and no bf16 peak) its
 * bf16 figures and ratios are null, not missing values that leave the line unreadable. The
 * step's GEMM rates are also given as shares of bench/peak's figures. */
Test(cli, bench_summary_is_json_with_or_without_bf16) {
    char *d = tu_tmpdir();
    const char *fp32 =
        "{\"event\":\"train\",\"ranks\":1,\"params\":1000,\"precision\":\"fp32\",\"gemm\":\"onednn\",\"batches\":4,"
        "\"trg_tokens\":400,\"tok_per_s\":3000.0,\"gemm_gflops\":100.0,\"sgemm_gflops_output_shape\":150.0,"
        "\"bf16_gemm_gflops_output_shape\":0.0,\"peak_rss_mb\":600.0}\n"
        "{\"event\":\"train\",\"ranks\":1,\"params\":1000,\"precision\":\"fp32\",\"gemm\":\"openblas\",\"batches\":4,"
        "\"trg_tokens\":400,\"tok_per_s\":2000.0,\"gemm_gflops\":80.0,\"sgemm_gflops_output_shape\":120.0,\"peak_rss_mb\":"
        "600.0}\n"
        "{\"event\":\"decode\",\"precision\":\"fp32\",\"mode\":\"greedy_full\",\"beam\":1,\"sent_per_s\":250.0}\n"
        "{\"event\":\"decode\",\"precision\":\"fp32\",\"mode\":\"beam\",\"beam\":5,\"sent_per_s\":50.0}\n"
        "{\"event\":\"decode\",\"precision\":\"int8\",\"mode\":\"greedy_full\",\"beam\":1,\"sent_per_s\":300.0}\n"
        "{\"torch\": \"fp32\", \"event\": \"bench\", \"tok_per_s\": 2000.0, \"peak_rss_mb\": 1000.0}\n"
        "{\"event\": \"decode_bench\", \"sent_per_s\": 100.0}\n"
        "{\"event\": \"python_translate\", \"lines\": 1000, \"beam\": 1, \"rounds\": 3, \"translate_s\": 3.4, "
        "\"python_s\": 3.23, \"python_vs_translate\": 0.95, \"identical\": true, \"library\": \"libs2s.so.0.6.0\"}\n"
        "{\"event\": \"python_translate\", \"lines\": 1000, \"beam\": 5, \"rounds\": 3, \"translate_s\": 20.0, "
        "\"python_s\": 20.4, \"python_vs_translate\": 1.02, \"identical\": true, \"library\": \"libs2s.so.0.6.0\"}\n";
    const char *bf16 =
        "{\"event\":\"train\",\"ranks\":1,\"params\":1000,\"precision\":\"bf16\",\"gemm\":\"onednn\",\"batches\":4,"
        "\"trg_tokens\":400,\"tok_per_s\":6000.0,\"gemm_gflops\":300.0,\"sgemm_gflops_output_shape\":150.0,"
        "\"bf16_gemm_gflops_output_shape\":500.0,\"peak_rss_mb\":600.0}\n"
        "{\"event\":\"decode\",\"precision\":\"bf16\",\"mode\":\"greedy_full\",\"beam\":1,\"sent_per_s\":400.0}\n"
        "{\"event\":\"decode\",\"precision\":\"bf16\",\"mode\":\"beam\",\"beam\":5,\"sent_per_s\":80.0}\n"
        "{\"torch\": \"--bf16\", \"event\": \"bench\", \"tok_per_s\": 3000.0, \"peak_rss_mb\": 1000.0}\n";
    const char *peak[2] = {
        "{\"event\":\"peak\",\"threads\":2,\"f32_gflops\":200.0,\"f32_gflops_isa\":\"avx2+fma\",\"bf16_gflops\":null,"
        "\"bf16_gflops_isa\":null,\"int8_gops\":400.0,\"int8_gops_isa\":\"avx2\",\"check\":0}\n",
        "{\"event\":\"peak\",\"threads\":2,\"f32_gflops\":200.0,\"f32_gflops_isa\":\"avx512f\",\"bf16_gflops\":500.0,"
        "\"bf16_gflops_isa\":\"avx512_bf16\",\"int8_gops\":800.0,\"int8_gops_isa\":\"avx512_vnni\",\"check\":0}\n"};
    for (int with = 0; with < 2; with++) {
        tu_write(tu_path(d, "lines"), "%s%s%s", peak[with], fp32, with ? bf16 : "");
        cr_assert_eq(tu_sh("awk -f scripts/bench-summary.awk -v commit=abc -v cpu='AMD EPYC' -v family=25 -v cmodel=1 "
                           "-v isa=avx2 -v cores=2 %s > %s",
                           tu_path(d, "lines"), tu_path(d, "line.json")),
                     0);
        cJSON *j = tu_json_load(tu_path(d, "line.json"));
        cr_assert(j, "not JSON: %s", tu_slurp(tu_path(d, "line.json"), NULL));
        cr_expect_float_eq(tu_get(j, "train_ratio")->valuedouble, 1.5, 1e-9);
        cr_expect_float_eq(tu_get(j, "greedy_full_ratio")->valuedouble, 2.5, 1e-9);
        cr_expect_float_eq(tu_get(j, "greedy_full_int8_ratio")->valuedouble, 3.0, 1e-9);
        cr_expect_float_eq(tu_get(j, "step_gemm_of_peak")->valuedouble, 0.5, 1e-9);
        cr_expect_float_eq(tu_get(j, "sgemm_of_peak")->valuedouble, 0.75, 1e-9);
        cr_expect_float_eq(tu_get(j, "peak_int8_gops")->valuedouble, with ? 800.0 : 400.0, 1e-9);
        cr_expect_float_eq(tu_get(j, "python_vs_translate")->valuedouble, 0.95, 1e-9);
        cr_expect_float_eq(tu_get(j, "python_beam5_vs_translate")->valuedouble, 1.02, 1e-9);
        cr_expect(cJSON_IsTrue(tu_get(j, "python_identical")));
        const char *keys[] = {"train_bf16_tok_per_s", "bf16_gemm_gflops", "random_greedy_full_bf16_sent_per_s",
                              "greedy_full_bf16_ratio", "beam5_bf16_vs_torch_greedy", "peak_bf16_gflops",
                              "step_gemm_bf16_of_peak", "bf16_gemm_of_peak"};
        for (int k = 0; k < 8; k++) {
            const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, keys[k]);
            cr_expect(x && (with ? cJSON_IsNumber(x) : cJSON_IsNull(x)), "%s, bf16 lines %d", keys[k], with);
        }
        if (with) {
            cr_expect_float_eq(tu_get(j, "greedy_full_bf16_ratio")->valuedouble, 4.0, 1e-9);
            cr_expect_float_eq(tu_get(j, "train_bf16_ratio")->valuedouble, 2.0, 1e-9);
            cr_expect_float_eq(tu_get(j, "step_gemm_bf16_of_peak")->valuedouble, 0.6, 1e-9);
            cr_expect_float_eq(tu_get(j, "bf16_gemm_of_peak")->valuedouble, 1.0, 1e-9);
        } else {
            cr_expect_null(cJSON_GetObjectItemCaseSensitive(j, "train_bf16_ratio"), "no PyTorch bf16 line, no ratio");
        }
        cJSON_Delete(j);
    }
    tu_rm_rf(d);
    free(d);
}
