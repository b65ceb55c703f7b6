/* test_cli_input.c — the programs given bad input: config errors, bad and poisoned model
 * files, bad lines, a NaN loss, unwritable outputs, NUL bytes, overlong and endless input, and
 * ./translate's outputs whole or absent. Runs the binaries of this build ($S2S_BIN_DIR). */
#include "test_cli.h"

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

/* --progress: after each --batch of lines, the lines done, their share of the input file and the
 * rate, then a closing line; on stderr only, the outputs unchanged. Without it and with stderr
 * not a terminal, stderr stays empty (no progress in a log nobody asked for). */
Test(cli, translate_progress_counts_the_blocks, .timeout = 120) {
    char *d = dir_with_small_model();
    const char *b = tu_bin();
    cr_assert_eq(tu_sh("cd %s && for i in $(seq 35); do echo abcdabcd; done > in.txt && "
                       "%s/translate run/model.bin --input in.txt --output a.txt --batch 10 --progress 2> a.err && "
                       "%s/translate run/model.bin --input in.txt --output b.txt --batch 10 2> b.err && "
                       "cat in.txt | %s/translate run/model.bin --batch 10 --progress > c.txt 2> c.err",
                       d, b, b, b),
                 0);
    cr_expect_eq(tu_sh("cd %s && cmp a.txt b.txt && cmp a.txt c.txt && test ! -s b.err", d), 0,
                 "--progress changed the outputs, or progress was written unasked");
    char *e = tu_slurp(tu_path(d, "a.err"), NULL);
    cr_expect(strstr(e, "translate: 10 lines (29%), ") && strstr(e, "translate: 30 lines (86%), ") &&
                  strstr(e, "lines/s, 0:0") && strstr(e, "translate: 35 lines in "),
              "%s", e);
    free(e);
    e = tu_slurp(tu_path(d, "c.err"), NULL); /* a pipe: no share of a size it cannot know */
    cr_expect(strstr(e, "translate: 20 lines, ") && !strstr(e, "%") && strstr(e, "translate: 35 lines in "), "%s", e);
    free(e);
    tu_rm_rf(d);
    free(d);
}
