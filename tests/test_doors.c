/* test_doors.c — the doors added since the programs (the C API, the library calls under
 * Python, prepared corpora, teachers) keep the programs' promises: no call writes onto a
 * file it reads, nothing blocks on a FIFO or crashes on a bad argument, and every answer is
 * the one the model and the files give. Each test names the defect it holds shut. */
#include "serve_client.h"
#include "test_util.h"
#include "s2s/bpe.h"
#include "s2s/checkpoint.h"
#include "s2s/file.h"
#include "s2s/model.h"
#include "s2s/s2s.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *TINY_JSON =
    "{\"name\": \"tiny\", \"seed\": 3,"
    " \"task\": {\"type\": \"reverse\", \"alphabet\": \"abcd\", \"min_len\": 3, \"max_len\": 8, \"train_size\": 200,"
    "          \"valid_size\": 20, \"test_size\": 20, \"data_seed\": 5},"
    " \"model\": {\"cell\": \"gru\", \"embedding\": 8, \"encoder_hidden\": 16, \"decoder_hidden\": 16, \"attention\": \"dot\"},"
    " \"train\": {\"lr\": 0.01, \"batch_size\": 32, \"epochs\": 1, \"log_every\": 5}}";

/* A folder with a tiny trained run in run/ (model.bin, last.bin) and its config as tiny.json. */
static char *tiny_dir(void) {
    char *d = tu_tmpdir();
    tu_write(tu_path(d, "tiny.json"), "%s", TINY_JSON);
    cr_assert_eq(tu_sh("cd %s && %s/train --config tiny.json --out run > train.txt 2>&1", d, tu_bin()), 0, "%s",
                 tu_slurp(tu_path(d, "train.txt"), NULL));
    return d;
}

/* Whether the file at path still has the bytes of the copy made before (path.before). */
static bool unchanged(const char *d, const char *name) {
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/%s", d, name);
    snprintf(b, sizeof b, "%s/%s.before", d, name);
    return tu_same_file(a, b);
}

static void keep_copy(const char *d, const char *name) { cr_assert_eq(tu_sh("cd %s && cp %s %s.before", d, name, name), 0); }

/* 74.1: the output-onto-input rule is the library's, for every call that writes a file: the C
 * API's export, the library's export, import, average, subword learning, a run's folder. */
Test(doors, no_library_call_writes_onto_a_file_it_reads, .timeout = 120) {
    char *d = tiny_dir();
    cr_assert_eq(tu_sh("cd %s && cp run/model.bin v.bin && ln -s v.bin v.link && ln v.bin v.hard && "
                       "printf 'a b c\\nb c d\\n' > text.txt",
                       d),
                 0);
    keep_copy(d, "v.bin");
    S2sError err = {0};
    const char *outs[] = {"v.bin", "v.link", "v.hard"};
    for (int i = 0; i < 3; i++) {
        char in[512], out[512];
        snprintf(in, sizeof in, "%s/v.bin", d);
        snprintf(out, sizeof out, "%s/%s", d, outs[i]);
        cr_expect_eq(s2s_export(in, out, false, &err), S2S_ERR_CONFIG, "s2s_export onto %s", outs[i]);
        cr_expect(strstr(err.msg, "is the file read as"), "%s", err.msg);
        cr_expect(unchanged(d, "v.bin"), "s2s_export(v.bin, %s) changed the model", outs[i]);
        const char *paths[] = {tu_path(d, "run/model.bin"), in};
        cr_expect_eq(ckpt_average(paths, 2, out, &err), S2S_ERR_CONFIG, "ckpt_average onto %s", outs[i]);
        cr_expect(unchanged(d, "v.bin"), "ckpt_average onto %s changed the model", outs[i]);
    }
    /* import onto its safetensors file */
    cr_assert_eq(s2s_export(tu_path(d, "v.bin"), tu_path(d, "v.safetensors"), false, &err), S2S_OK, "%s", err.msg);
    keep_copy(d, "v.safetensors");
    ModelImport im = {.path = tu_path(d, "v.safetensors"), .out = tu_path(d, "v.safetensors")};
    cr_expect_eq(model_import(&im, &err), S2S_ERR_CONFIG);
    cr_expect(unchanged(d, "v.safetensors"), "model_import onto its input changed it");
    /* subword learning onto one of its inputs */
    keep_copy(d, "text.txt");
    Bpe b;
    bpe_init(&b);
    int learned = 0;
    const char *ins[] = {tu_path(d, "v.bin"), tu_path(d, "text.txt")};
    cr_expect_eq(bpe_learn_files(&b, ins, 2, &(BpeLearnOpts){.merges = 2, .min_count = 1}, ins[1], &learned, &err),
                 S2S_ERR_CONFIG);
    bpe_free(&b);
    cr_expect(unchanged(d, "text.txt"), "bpe_learn_files onto its input changed it");
    tu_rm_rf(d);
    free(d);
}

/* 74.1: a run's folder holds none of the run's inputs: a teacher (or its config) that is a file
 * the run would replace or, with --overwrite, delete is refused before anything is touched;
 * the run's own config.json restarts it. */
Test(doors, a_run_never_replaces_or_deletes_what_it_reads, .timeout = 120) {
    char *d = tiny_dir();
    const char *b = tu_bin();
    keep_copy(d, "run/model.bin");
    cr_assert_eq(tu_sh("cd %s && mkdir -p run/checkpoints && cp run/model.bin run/checkpoints/step000000007.bin", d), 0);
    const char *teachers[] = {"run/model.bin", "run/last.bin", "run/checkpoints/step000000007.bin"};
    for (int i = 0; i < 3; i++) {
        int rc = tu_sh("cd %s && %s/train --config tiny.json --set task.type=translate --set task.data_dir=. "
                       "--set task.teacher=%s --out run --overwrite > out.txt 2> err.txt",
                       d, b, teachers[i]);
        char *msg = tu_slurp(tu_path(d, "err.txt"), NULL);
        cr_expect_eq(rc, 2, "teacher %s: exit %d: %s", teachers[i], rc, msg);
        cr_expect(msg && strstr(msg, "is the file read as a teacher"), "%s", msg);
        free(msg);
        cr_expect_eq(access(tu_path(d, teachers[i]), F_OK), 0, "--overwrite deleted the teacher %s", teachers[i]);
    }
    cr_expect(unchanged(d, "run/model.bin"), "the refused run changed run/model.bin");
    /* the run's own config.json is read whole, then written back as its resolution */
    cr_expect_eq(tu_sh("cd %s && %s/train --config run/config.json --out run --overwrite > /dev/null 2>&1", d, b), 0);
    tu_rm_rf(d);
    free(d);
}

/* 74.2: `./translate M --output f < f`: standard input is an input too. */
Test(doors, translate_never_writes_onto_its_standard_input, .timeout = 120) {
    char *d = tiny_dir();
    cr_assert_eq(tu_sh("cd %s && printf 'abc\\nabcd\\n' > f && ln -s f f.link", d), 0);
    keep_copy(d, "f");
    const char *cmds[] = {"--output f < f", "--output f.link < f", "--output f --input - < f"};
    for (int i = 0; i < 3; i++) {
        int rc = tu_sh("cd %s && %s/translate run/model.bin %s 2> err.txt", d, tu_bin(), cmds[i]);
        char *msg = tu_slurp(tu_path(d, "err.txt"), NULL);
        cr_expect_eq(rc, 2, "%s: exit %d: %s", cmds[i], rc, msg);
        cr_expect(msg && strstr(msg, "standard input"), "%s", msg);
        free(msg);
        cr_expect(unchanged(d, "f"), "translate %s replaced its input", cmds[i]);
    }
    /* another file: translated */
    cr_expect_eq(tu_sh("cd %s && %s/translate run/model.bin --output g < f && test $(wc -l < g) -eq 2", d, tu_bin()), 0);
    tu_rm_rf(d);
    free(d);
}

/* 74.22 and 74.1: heatmaps are numbered from 0 (the docs' pics/0000.png, as n-best lists and
 * --logits number lines); a second translation into a folder with pictures is refused rather
 * than mixed with the first; no picture is an input. */
Test(doors, heatmaps_start_at_0000_and_never_mix_two_translations, .timeout = 120) {
    char *d = tiny_dir();
    const char *b = tu_bin();
    cr_assert_eq(tu_sh("cd %s && printf 'abc\\nabcd\\n' | %s/translate run/model.bin --heatmap pics > /dev/null", d, b), 0);
    cr_expect_eq(access(tu_path(d, "pics/0000.png"), F_OK), 0);
    cr_expect_eq(access(tu_path(d, "pics/0001.png"), F_OK), 0);
    cr_expect_neq(access(tu_path(d, "pics/0002.png"), F_OK), 0);
    keep_copy(d, "pics/0000.png");
    int rc = tu_sh("cd %s && printf 'dcba\\n' | %s/translate run/model.bin --heatmap pics > /dev/null 2> err.txt", d, b);
    cr_expect_eq(rc, 2);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "earlier translation"), "%s", tu_slurp(tu_path(d, "err.txt"), NULL));
    cr_expect(unchanged(d, "pics/0000.png"));
    /* --logits numbers from 0 too */
    cr_assert_eq(tu_sh("cd %s && printf 'abc\\nabcd\\n' > in.txt && printf 'cba\\ndcba\\n' > ref.txt && "
                       "%s/translate run/model.bin --input in.txt --score ref.txt --logits l.jsonl > /dev/null",
                       d, b),
                 0);
    char *l = tu_slurp(tu_path(d, "l.jsonl"), NULL);
    cr_expect(l && !strncmp(l, "{\"line\":0,", 10) && strstr(l, "\n{\"line\":1,"), "%.40s", l);
    free(l);
    tu_rm_rf(d);
    free(d);
}

/* 74.12: a JSON string holding \u0000 is refused, never cut at the NUL: a config file, --set, a
 * config from the C API, score options, ./attend's input. */
Test(doors, a_json_string_holding_a_nul_is_refused, .timeout = 60) {
    char *d = tu_tmpdir();
    const char *b = tu_bin();
    tu_write(tu_path(d, "a.json"), "{\"name\": \"x\", \"model\": {\"attention\": \"dot\\u0000bogus\"}}");
    tu_write(tu_path(d, "n.json"), "{\"name\": \"ti\\u0000ny/../../x\"}");
    tu_write(tu_path(d, "k.json"), "{\"na\\u0000me\": \"x\"}");
    const char *cmds[] = {"--config a.json", "--config n.json", "--config k.json",
                          "--config tiny.json --set 'model.attention=\"dot\\u0000bogus\"'"};
    tu_write(tu_path(d, "tiny.json"), "%s", TINY_JSON);
    for (int i = 0; i < 4; i++) {
        int rc = tu_sh("cd %s && %s/train %s --out run%d > /dev/null 2> err.txt", d, b, cmds[i], i);
        cr_expect_eq(rc, 2, "train %s: exit %d", cmds[i], rc);
        cr_expect(tu_file_has(tu_path(d, "err.txt"), "NUL"), "train %s: %s", cmds[i], tu_slurp(tu_path(d, "err.txt"), NULL));
    }
    cr_expect_neq(access(tu_path(d, "runs/ti"), F_OK), 0);
    /* an escaped backslash before u0000 is no NUL: a name with a backslash is taken */
    cr_expect_eq(tu_sh("cd %s && %s/train --config tiny.json --set 'name=\"a\\\\u0000\"' --out ok > /dev/null 2>&1", d, b), 0);
    S2sError err = {0};
    cr_expect_null(s2s_training_new(NULL, "{\"name\": \"x\", \"model\": {\"attention\": \"dot\\u0000bogus\"}}", NULL, 0,
                                    tu_path(d, "api"), false, &err));
    cr_expect(strstr(err.msg, "NUL"), "%s", err.msg);
    cr_expect_null(s2s_score_corpus("{\"metric\": \"sacrebleu\", \"tokenize\": \"13a\\u0000x\"}", (const char *[]){"a"},
                                    (const char *[]){"a"}, 1, 1, &err));
    cr_expect(strstr(err.msg, "NUL"), "%s", err.msg);
    cr_expect_null(s2s_attend("{\"Q\\u0000x\": [[1]], \"K\": [[1]], \"V\": [[1]]}", &err));
    cr_expect(strstr(err.msg, "NUL"), "%s", err.msg);
    tu_rm_rf(d);
    free(d);
}

/* 74.6: s2s_draw_heatmap checks its labels as the other calls check their text. */
Test(doors, the_c_api_checks_heatmap_labels, .timeout = 30) {
    char *d = tu_tmpdir();
    float w[4] = {0.1f, 0.9f, 0.5f, 0.5f};
    S2sError err = {0};
    const char *rows_null[] = {"a", NULL}, *cols[] = {"x", "y"}, *bad_utf8[] = {"a", "\xff"};
    cr_expect_eq(s2s_draw_heatmap(tu_path(d, "h.png"), w, 2, 2, rows_null, cols, NULL, &err), S2S_ERR_CONFIG);
    cr_expect(strstr(err.msg, "row_labels[1]"), "%s", err.msg);
    cr_expect_eq(s2s_draw_heatmap(tu_path(d, "h.png"), w, 2, 2, cols, bad_utf8, NULL, &err), S2S_ERR_DATA);
    cr_expect(strstr(err.msg, "col_labels[1]"), "%s", err.msg);
    cr_expect_eq(s2s_draw_heatmap(tu_path(d, "h.png"), w, 2, 2, cols, cols, "\xc3", &err), S2S_ERR_DATA);
    cr_expect_neq(access(tu_path(d, "h.png"), F_OK), 0);
    cr_expect_eq(s2s_draw_heatmap(tu_path(d, "h.png"), w, 2, 2, cols, cols, "title", &err), S2S_OK, "%s", err.msg);
    cr_expect_eq(s2s_draw_heatmap(tu_path(d, "h2.png"), w, 2, 2, NULL, NULL, NULL, &err), S2S_OK, "%s", err.msg);
    tu_rm_rf(d);
    free(d);
}

#if defined(__SANITIZE_ADDRESS__)
#define DOORS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DOORS_ASAN 1
#endif
#endif

/* 74.4: a weighted epoch (train:1000 of 200,000 pairs: 2e8 pairs, 2.4 GB to plan) counts in the
 * memory check: refused up front with the epoch named, not killed half way (the old build ran
 * out of memory making the epoch's order). The limit is an address-space one (ulimit -v), which
 * the check reads; AddressSanitizer's shadow memory cannot live under it. */
Test(doors, a_weighted_epoch_is_counted_in_the_memory_check, .timeout = 120) {
#ifdef DOORS_ASAN
    TU_SKIP("AddressSanitizer cannot run under ulimit -v");
#else
    char *d = tu_tmpdir();
    tu_write_pairs(d, "train", 200000);
    tu_write_pairs(d, "val", 20);
    tu_write_pairs(d, "test", 20);
    const char *limited = "ulimit -v 2500000; exec %s/train --config %s/configs/multi30k.json --set data_dir=. "
                          "--set valid_prefix=val --set test_prefix=test --set min_freq=1 --set cache_dir= "
                          "--set train.max_steps=1 --set train.warmup_steps=1 --set train.max_decode_len=4 "
                          "--set model.embedding=8 --set model.encoder_hidden=8 --set model.decoder_hidden=8 --set model.kq=4";
    char cmd[1024];
    snprintf(cmd, sizeof cmd, limited, tu_bin(), getenv("PWD") ? getenv("PWD") : ".");
    int rc = tu_sh("cd %s && bash -c '%s --set train_prefix=train:1000 --out run' > out.txt 2> err.txt", d, cmd);
    char *msg = tu_slurp(tu_path(d, "err.txt"), NULL);
    cr_expect_eq(rc, 2, "exit %d: %s", rc, msg);
    cr_expect(msg && strstr(msg, "an epoch of 200000000 pairs") && strstr(msg, "task.train_prefix"), "%s", msg);
    cr_expect_neq(access(tu_path(d, "run/config.json"), F_OK), 0, "a refused run left a folder");
    free(msg);
    /* the same corpus and limit, an epoch that fits */
    rc = tu_sh("cd %s && bash -c '%s --set train_prefix=train:2 --out ok' > out.txt 2>&1", d, cmd);
    cr_expect_eq(rc, 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    tu_rm_rf(d);
    free(d);
#endif
}

/* The train.max_decode_len values of the shipped translation configs, and 0 (the reversal
 * configs': 2 × the source + 10) and 6 (one that cuts every line); their count. */
static int shipped_decode_lens(int *lens, int cap) {
    int n = 0;
    lens[n++] = 0;
    lens[n++] = 6;
    DIR *dir = opendir("configs");
    cr_assert(dir, "configs/: run the tests from the tree's root");
    for (struct dirent *e; (e = readdir(dir));) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json")) continue;
        char p[512];
        snprintf(p, sizeof p, "configs/%s", e->d_name);
        cJSON *j = tu_json_load(p);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "train"), "max_decode_len");
        bool seen = !cJSON_IsNumber(t);
        for (int k = 0; k < n && !seen; k++) seen = lens[k] == t->valueint;
        if (!seen && n < cap) lens[n++] = t->valueint;
        cJSON_Delete(j);
    }
    closedir(dir);
    return n;
}

/* 74.7: ./serve, ./translate and the C API (Python's path) decode with the model's own
 * settings, through translator_make: the same outputs, greedy and beam, for every shipped
 * config's train.max_decode_len (the old server ignored it: 2 × the source + 10 always). */
Test(doors, serve_translate_and_the_api_decode_alike_with_the_model_settings, .timeout = 240) {
    int lens[16], n_lens = shipped_decode_lens(lens, 16);
    cr_assert_geq(n_lens, 3, "no shipped config sets train.max_decode_len");
    const char *lines[] = {"abc", "abcdabcdab", "abcdabcdabcdabcdabcdabcdabcdabcdabcdabcd"};
    bool cut = false;
    for (int k = 0; k < n_lens; k++) {
        char *d = tu_tmpdir();
        tu_write(tu_path(d, "tiny.json"), "%s", TINY_JSON);
        tu_write(tu_path(d, "in.txt"), "%s\n%s\n%s\n", lines[0], lines[1], lines[2]);
        cr_assert_eq(tu_sh("cd %s && %s/train --config tiny.json --set train.max_decode_len=%d --out run > /dev/null 2>&1 && "
                           "cp run/model.bin model.bin",
                           d, tu_bin(), lens[k]),
                     0);
        int port = start_server(d, "");
        cr_assert(port > 0, "serve did not start: %s", tu_slurp(tu_path(d, "serve.txt"), NULL));
        S2sError err = {0};
        S2sModel *m = s2s_open(tu_path(d, "model.bin"), 1, &err);
        cr_assert(m, "%s", err.msg);
        for (int beam = 1; beam <= 3; beam += 2) {
            cr_assert_eq(tu_sh("cd %s && %s/translate model.bin --beam %d --input in.txt > out.txt 2>/dev/null", d, tu_bin(), beam), 0);
            char *want = tu_slurp(tu_path(d, "out.txt"), NULL), *save = NULL, *line = strtok_r(want, "\n", &save);
            char req[512];
            snprintf(req, sizeof req, "{\"text\": [\"%s\", \"%s\", \"%s\"], \"beam\": %d}", lines[0], lines[1], lines[2], beam);
            cJSON *j = translate_ok(port, req);
            const cJSON *list = cJSON_GetObjectItemCaseSensitive(j, "translations");
            S2sTranslations *t = s2s_translate_lines(m, lines, 3, beam, 1, 1.0f, 0, 0, &err);
            cr_assert(t, "%s", err.msg);
            for (int i = 0; i < 3; i++, line = strtok_r(NULL, "\n", &save)) {
                const char *served = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(list, i), "text"));
                const char *api = s2s_translations_text(t, i, 0);
                if (!line) line = "";
                cr_expect(served && !strcmp(served, line), "max_decode_len %d, beam %d, line %d: serve \"%s\", translate \"%s\"",
                          lens[k], beam, i, served ? served : "(none)", line);
                cr_expect_str_eq(api, line, "max_decode_len %d, beam %d, line %d: the API", lens[k], beam, i);
                if (lens[k] > 0 && (int)strlen(line) == lens[k]) cut = true;
            }
            s2s_translations_free(t);
            cJSON_Delete(j);
            free(want);
        }
        s2s_close(m);
        stop_server(d);
        tu_rm_rf(d);
        free(d);
    }
    cr_expect(cut, "no output reached its model's max_decode_len: the test did not exercise the setting");
}
