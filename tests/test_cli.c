/* test_cli.c — the programs end to end: small runs that must learn (reversal, multi-head,
 * Transformer, bf16, chunked loss), determinism, resume (paused, extended, after SIGINT) equal
 * to an uninterrupted run, validation every n steps and the schedule. Bad input:
 * test_cli_input.c; ./speed and the bench tools: test_cli_tools.c. Runs the binaries of this
 * build ($S2S_BIN_DIR). */
#include "test_cli.h"

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

/* Every "step" line of dir/run/log.jsonl logs the lr want(step) (step 1-based), n of them. */
static void expect_logged_lr(const char *dir, const char *run, int n, double (*want)(int step)) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s/log.jsonl", dir, run);
    char *log = tu_slurp(path, NULL);
    cr_assert(log != NULL, "%s", path);
    int steps = 0;
    for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strstr(line, "\"type\":\"step\"")) continue;
        cJSON *j = cJSON_Parse(line);
        int step = (int)cJSON_GetObjectItem(j, "step")->valuedouble;
        double w = want(step);
        cr_expect_float_eq(cJSON_GetObjectItem(j, "lr")->valuedouble, w, 1e-6 * w + 1e-12, "%s: step %d", path, step);
        cJSON_Delete(j);
        steps++;
    }
    cr_expect_eq(steps, n, "%s: %d step lines", path, steps);
    free(log);
}

/* lr 0.005, a cosine over 50 steps after 8 of warmup; a constant 0.005 after 5. */
static double cosine_after_8(int step) {
    return 0.005 * 0.5 * (1.0 + cos(3.14159265358979323846 * (step - 1) / 50.0)) * (step < 8 ? step / 8.0 : 1.0);
}
static double constant_after_5(int step) { return 0.005 * (step < 5 ? step / 5.0 : 1.0); }

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
    expect_logged_lr(d, "full", 50, cosine_after_8); /* 25 steps an epoch, 2 epochs; 8 of warmup */
    tu_rm_rf(d);
    free(d);
}

/* A warmup longer than the run (a config written for a bigger corpus, a shortened run) is fitted,
 * never refused: a warning naming the key, the lr at train.lr from the run's first tenth on,
 * config.json holding the value used, and a resumed run on the same schedule. */
Test(cli, a_warmup_longer_than_the_run_is_fitted, .timeout = 240) {
    char *d = tu_tmpdir();
    write_config(d, 2); /* 25 steps an epoch, 2 epochs */
    const char *set = "--set train_size=800 --set log_every=1 --set warmup_steps=100000";
    cr_assert_eq(tu_sh("%s/train --config %s/small.json %s --out %s/full > %s/full.txt", tu_bin(), d, set, d, d), 0);
    cr_assert_eq(tu_sh("%s/train --config %s/small.json %s --out %s/part --pause-at 3 > /dev/null", tu_bin(), d, set, d), 0);
    cr_assert_eq(tu_sh("%s/train --resume %s/part > %s/resume.txt", tu_bin(), d, d), 0);
    char a[256], b[256];
    snprintf(a, sizeof a, "%s/full/model.bin", d);
    snprintf(b, sizeof b, "%s/part/model.bin", d);
    cr_expect(tu_same_file(a, b), "model.bin of the resumed run differs");
    snprintf(a, sizeof a, "%s/full.txt", d);
    char *out = tu_slurp(a, NULL);
    cr_expect(strstr(out, "warning: train.warmup_steps=100000 is longer than the run (50 steps: 2 epochs of 25 batches); "
                          "the lr warms up over its first 5 instead (set train.warmup_steps to choose)"), "%s", out);
    free(out);
    snprintf(a, sizeof a, "%s/resume.txt", d);
    out = tu_slurp(a, NULL);
    cr_expect(!strstr(out, "warmup"), "a resumed run keeps the fitted warmup silently: %s", out);
    free(out);
    snprintf(a, sizeof a, "%s/full/config.json", d);
    out = tu_slurp(a, NULL);
    cJSON *conf = cJSON_Parse(out);
    cr_assert(conf, "%s", out);
    cJSON *w = cJSON_GetObjectItem(cJSON_GetObjectItem(conf, "train"), "warmup_steps");
    cr_expect(cJSON_IsNumber(w) && w->valueint == 5, "config.json keeps the warmup used: %s", out);
    cJSON_Delete(conf);
    free(out);
    expect_logged_lr(d, "full", 50, constant_after_5);
    /* shortened by train.max_steps: the same, said so */
    cr_assert_eq(tu_sh("%s/train --config %s/small.json %s --set max_steps=20 --out %s/short > %s/short.txt", tu_bin(), d, set,
                       d, d), 0);
    snprintf(a, sizeof a, "%s/short.txt", d);
    out = tu_slurp(a, NULL);
    cr_expect(strstr(out, "is longer than the run (20 steps: train.max_steps); the lr warms up over its first 2 instead"), "%s", out);
    free(out);
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
