/* test_doors.c — the doors added since the programs (the C API, the library calls under
 * Python, prepared corpora, teachers) keep the programs' promises: no call writes onto a
 * file it reads, nothing blocks on a FIFO or crashes on a bad argument, and every answer is
 * the one the model and the files give. Each test names the defect it holds shut. */
#include "serve_client.h"
#include "test_util.h"
#include "s2s/bpe.h"
#include "s2s/checkpoint.h"
#include "s2s/data.h"
#include "s2s/file.h"
#include "s2s/model.h"
#include "s2s/s2s.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

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

/* A translation task over dir's train/val/test.{de,en}, its prepared data in dir/cache. */
static ConfigTask word_task(const char *dir) {
    Config c;
    config_defaults(&c);
    ConfigTask t = c.task;
    t.type = TASK_TRANSLATE;
    snprintf(t.data_dir, sizeof t.data_dir, "%.200s", dir);
    snprintf(t.train_prefix, sizeof t.train_prefix, "train");
    snprintf(t.valid_prefix, sizeof t.valid_prefix, "val");
    snprintf(t.test_prefix, sizeof t.test_prefix, "test");
    snprintf(t.cache_dir, sizeof t.cache_dir, "%.200s/cache", dir);
    t.min_freq = 1;
    t.subword = SUBWORD_NONE;
    return t;
}

/* Letter swaps that keep a text's size, CRC-32 and Adler-32: each swaps two letters 65,521
 * bytes apart (Adler-32's modulus: neither of its sums moves), and a set of them whose CRC-32
 * changes cancel (CRC-32 is affine: the changes of disjoint swaps add as XOR; 40 candidates
 * in 32 bits have a dependent subset, found by elimination). Returns the swaps made. */
static int collide(unsigned char *b, size_t n) {
    enum { GAP = 65521, CAND = 40 };
    size_t at[CAND];
    uint32_t delta[CAND], base = (uint32_t)crc32(0L, b, (uInt)n);
    int k = 0;
    for (size_t i = 0; i + GAP < n && k < CAND; i += 97) {
        unsigned char x = b[i], y = b[i + GAP];
        if (x == y || x < 'a' || x > 'z' || y < 'a' || y > 'z') continue;
        b[i] = y, b[i + GAP] = x;
        delta[k] = (uint32_t)crc32(0L, b, (uInt)n) ^ base;
        b[i] = x, b[i + GAP] = y;
        at[k++] = i;
    }
    cr_assert_eq(k, CAND, "too few letters to swap");
    uint64_t used[CAND]; /* which candidates each reduced row combines */
    for (int i = 0; i < CAND; i++) used[i] = 1ull << i;
    for (int bit = 31, row = 0; bit >= 0 && row < CAND; bit--) {
        int p = -1;
        for (int i = row; i < CAND && p < 0; i++)
            if (delta[i] >> bit & 1) p = i;
        if (p < 0) continue;
        uint32_t td = delta[p];
        uint64_t tu = used[p];
        delta[p] = delta[row], used[p] = used[row], delta[row] = td, used[row] = tu;
        for (int i = 0; i < CAND; i++)
            if (i != row && delta[i] >> bit & 1) delta[i] ^= delta[row], used[i] ^= used[row];
        row++;
    }
    for (int i = 0; i < CAND; i++)
        if (!delta[i] && used[i]) { /* these swaps' changes cancel */
            int swaps = 0;
            for (int c = 0; c < CAND; c++)
                if (used[i] >> c & 1) {
                    unsigned char x = b[at[c]];
                    b[at[c]] = b[at[c] + GAP], b[at[c] + GAP] = x;
                    swaps++;
                }
            return swaps;
        }
    cr_assert_fail("no dependent set of swaps");
    return 0;
}

/* 74.10: the prepared-data key is a digest made for the purpose: a corpus changed by letter
 * swaps that keep its size, CRC-32 and Adler-32 (the old key's parts) is another key and is
 * prepared anew, never read as the old one's data. */
Test(doors, a_corpus_with_the_old_checksums_is_another_key, .timeout = 60) {
    char *d = tu_tmpdir();
    tu_word_corpus(d, "train", 9000, 11);
    tu_word_corpus(d, "val", 5, 12);
    tu_word_corpus(d, "test", 5, 13);
    ConfigTask t = word_task(d);
    TaskData a, b;
    S2sError err;
    cr_assert_eq(task_load(&a, &t, &err), S2S_OK, "%s", err.msg);
    cr_assert_eq(a.prepared_state, PREPARED_WRITTEN);
    size_t n;
    unsigned char *text = (unsigned char *)tu_slurp(tu_path(d, "train.de"), &n);
    cr_assert(n > 70000, "the corpus is %zu bytes: too small to swap letters 65,521 apart", n);
    uLong crc0 = crc32(0L, text, (uInt)n), ad0 = adler32(1L, text, (uInt)n);
    int swaps = collide(text, n);
    cr_expect(crc32(0L, text, (uInt)n) == crc0 && adler32(1L, text, (uInt)n) == ad0, "the swaps changed the checksums");
    FILE *f = fopen(tu_path(d, "train.de"), "wb");
    cr_assert(f && fwrite(text, 1, n, f) == n);
    fclose(f);
    cr_assert_eq(task_load(&b, &t, &err), S2S_OK, "%s", err.msg);
    cr_expect_eq(b.prepared_state, PREPARED_WRITTEN, "%d letter swaps with the old CRC-32 and Adler-32 read the old data",
                 swaps);
    cr_expect(strcmp(a.prepared, b.prepared) != 0, "one key for two corpora");
    cr_expect(!tu_same_data(&a, &b));
    task_free(&a);
    task_free(&b);
    free(text);
    tu_rm_rf(d);
    free(d);
}

/* d/c.json: a small GRU on d's word corpus (train, val, test), its cache in d/cache. */
static void word_config(const char *d) {
    tu_write(tu_path(d, "c.json"),
             "{\"name\": \"t\", \"seed\": 1, \"task\": {\"type\": \"translate\", \"data_dir\": \"%s\", \"train_prefix\": "
             "\"train\", \"valid_prefix\": \"val\", \"test_prefix\": \"test\", \"subword\": \"none\", \"min_freq\": 1, "
             "\"cache_dir\": \"%s/cache\", \"teacher_beam\": 1}, \"model\": {\"cell\": \"gru\", \"embedding\": 16, "
             "\"encoder_hidden\": 16, \"decoder_hidden\": 16, \"attention\": \"dot\"}, \"train\": {\"epochs\": 1, "
             "\"batch_size\": 32, \"lr\": 0.01, \"log_every\": 1000, \"max_decode_len\": 12}}",
             d, d);
}

/* 74.8: a teacher's file replaced while a student starts (a teacher still training renames a
 * better model.bin over it at every validation): the translations are cached under the key of
 * the bytes that made them. Two teachers are swapped over one path, by rename, as fast as the
 * machine goes, while students prepare; every cached file must then hold the translations of
 * the teacher its name is the key of (the old build hashed the file again after loading it:
 * one teacher's translations under the other's key). */
Test(doors, teacher_translations_are_keyed_by_the_bytes_loaded, .timeout = 240) {
    char *d = tu_word_corpus_dir(400, 10, false);
    word_config(d);
    const char *b = tu_bin();
    cr_assert_eq(tu_sh("cd %s && %s/train --config c.json --out t1 > /dev/null 2>&1 && "
                       "%s/train --config c.json --seed 2 --set train.lr=0.02 --out t2 > /dev/null 2>&1",
                       d, b, b),
                 0);
    /* each teacher alone: its key's file and its translations */
    for (int k = 1; k <= 2; k++)
        cr_assert_eq(tu_sh("cd %s && rm -f cache/*.teacher.en && cp t%d/model.bin T.bin && "
                           "%s/train --config c.json --set task.teacher=T.bin --prepare > /dev/null 2>&1 && "
                           "f=$(ls cache/*.teacher.en) && cp $f want%d.en && basename $f > name%d.txt",
                           d, k, b, k, k),
                     0);
    cr_assert_neq(tu_sh("cd %s && cmp -s want1.en want2.en", d), 0, "the two teachers translate alike: no test");
    int mixed = 0;
    for (int i = 0; i < 60; i++) {
        int rc = tu_sh("cd %s || exit 9; rm -f cache/*.teacher.en; "
                       "(while :; do cp t1/model.bin a.tmp && mv -f a.tmp T.bin; cp t2/model.bin b.tmp && mv -f b.tmp T.bin; "
                       "done) 2>/dev/null & s=$!; "
                       "%s/train --config c.json --set task.teacher=T.bin --prepare > prep.txt 2>&1; rc=$?; { kill $s; wait $s; } 2>/dev/null; "
                       "[ $rc -eq 0 ] || exit 3; for f in cache/*.teacher.en; do n=$(basename $f); "
                       "if [ \"$n\" = \"$(cat name1.txt)\" ]; then cmp -s $f want1.en || exit 1; "
                       "elif [ \"$n\" = \"$(cat name2.txt)\" ]; then cmp -s $f want2.en || exit 1; else exit 2; fi; done",
                       d, b);
        cr_expect(rc == 0 || rc == 3, "round %d: exit %d (1: a teacher's translations under the other's key; 2: a key of "
                                      "neither teacher)", i, rc);
        if (rc == 3) /* a file written in place while read is refused; a rename never is */
            cr_expect(tu_file_has(tu_path(d, "prep.txt"), "changed while it was read"), "%s",
                      tu_slurp(tu_path(d, "prep.txt"), NULL));
        mixed += rc == 1;
    }
    cr_expect_eq(mixed, 0, "%d of 60 rounds cached one teacher's translations under the other's key", mixed);
    tu_rm_rf(d);
    free(d);
}

/* Runs cmd in d under a 30-second timeout; its exit status (124: it blocked). */
static int bounded(const char *d, const char *cmd) { return tu_sh("cd %s && timeout 30 sh -c '%s' > out.txt 2>&1", d, cmd); }

/* 74.5: a FIFO planted where s2s keeps its own files (the prepared data, its key memo, a
 * teacher's translations and their .part, a run's checkpoints, last.bin and log) never blocks:
 * every such file is opened without blocking and must be a regular file; the caches make
 * theirs again over it, the others refuse it with a message. */
Test(doors, a_fifo_in_a_folder_s2s_manages_never_blocks, .timeout = 240) {
    char *d = tu_word_corpus_dir(200, 10, false);
    word_config(d);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/train --config c.json --prepare", tu_bin());
    cr_assert_eq(bounded(d, cmd), 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    /* the prepared file and its memo: made again over the FIFO */
    const char *globs[] = {"cache/*.s2sdata", "cache/*.key"};
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(tu_sh("cd %s && for f in %s; do rm $f && mkfifo $f; done", d, globs[i]), 0);
        int rc = bounded(d, cmd);
        cr_expect_eq(rc, 0, "a FIFO at %s: exit %d: %s", globs[i], rc, tu_slurp(tu_path(d, "out.txt"), NULL));
        cr_expect_eq(tu_sh("cd %s && for f in %s; do [ -f $f ] || exit 1; done", d, globs[i]), 0, "%s was not made again", globs[i]);
    }
    /* a teacher's translations and their .part */
    snprintf(cmd, sizeof cmd, "%s/train --config c.json --out t1 && cp t1/model.bin T.bin && "
             "%s/train --config c.json --set task.teacher=T.bin --prepare", tu_bin(), tu_bin());
    cr_assert_eq(bounded(d, cmd), 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    cr_assert_eq(tu_sh("cd %s && f=$(ls cache/*.teacher.en) && rm $f && mkfifo $f && mkfifo $f.part", d), 0);
    snprintf(cmd, sizeof cmd, "%s/train --config c.json --set task.teacher=T.bin --prepare", tu_bin());
    int rc = bounded(d, cmd);
    cr_expect_eq(rc, 0, "a FIFO at the teacher's translations: exit %d: %s", rc, tu_slurp(tu_path(d, "out.txt"), NULL));
    cr_expect_eq(tu_sh("cd %s && [ -f \"$(ls cache/*.teacher.en)\" ]", d), 0);
    /* a run's checkpoints (average --last), last.bin and log (--resume) */
    snprintf(cmd, sizeof cmd, "%s/train --config c.json --set train.epochs=2 --set train.keep_last=2 --out r", tu_bin());
    cr_assert_eq(bounded(d, cmd), 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    cr_assert_eq(tu_sh("cd %s && f=$(ls r/checkpoints/step*.bin | tail -1) && rm $f && mkfifo $f", d), 0);
    snprintf(cmd, sizeof cmd, "%s/average --last 2 r --out avg.bin", tu_bin());
    rc = bounded(d, cmd);
    cr_expect(rc == 1 && tu_file_has(tu_path(d, "out.txt"), "not a regular file"), "average over a FIFO: exit %d: %s", rc,
              tu_slurp(tu_path(d, "out.txt"), NULL));
    const char *run_files[] = {"last.bin", "log.jsonl"};
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(tu_sh("cd %s && rm -rf r2 && cp -r r r2 && rm r2/%s && mkfifo r2/%s", d, run_files[i], run_files[i]), 0);
        snprintf(cmd, sizeof cmd, "%s/train --resume r2 --epochs 3", tu_bin());
        rc = bounded(d, cmd);
        cr_expect(rc == 1 || rc == 2, "--resume with a FIFO at %s: exit %d: %s", run_files[i], rc,
                  tu_slurp(tu_path(d, "out.txt"), NULL));
    }
    tu_rm_rf(d);
    free(d);
}

/* 74.16: a cached teacher's translations cut short (or extended) are made again, with a note,
 * rather than refused on every run. */
Test(doors, a_damaged_teacher_translations_file_is_made_again, .timeout = 120) {
    char *d = tu_word_corpus_dir(200, 10, false);
    word_config(d);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/train --config c.json --out t1 && cp t1/model.bin T.bin && "
             "%s/train --config c.json --set task.teacher=T.bin --prepare && cp cache/*.teacher.en want.en",
             tu_bin(), tu_bin());
    cr_assert_eq(bounded(d, cmd), 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    const char *damage[] = {"head -c 300 want.en > x", "cat want.en want.en > x", "head -c -3 want.en > x"};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(tu_sh("cd %s && f=$(ls cache/*.teacher.en) && %s && mv x $f", d, damage[i]), 0);
        snprintf(cmd, sizeof cmd, "%s/train --config c.json --set task.teacher=T.bin --prepare", tu_bin());
        int rc = bounded(d, cmd);
        cr_expect_eq(rc, 0, "%s: exit %d: %s", damage[i], rc, tu_slurp(tu_path(d, "out.txt"), NULL));
        cr_expect(tu_file_has(tu_path(d, "out.txt"), "was damaged"), "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
        cr_expect_eq(tu_sh("cd %s && cmp -s cache/*.teacher.en want.en", d), 0, "%s: not made again as it was", damage[i]);
    }
    tu_rm_rf(d);
    free(d);
}

/* path: text as gzip; with cut_after > 0, the stream is flushed whole after that many bytes of
 * text and never finished (every line before looks whole), else finished and then cut in the
 * middle of its compressed bytes when cut_middle. */
static void write_gz(const char *path, const char *text, size_t cut_after, bool cut_middle) {
    z_stream z = {0};
    cr_assert_eq(deflateInit2(&z, 9, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY), Z_OK);
    size_t n = strlen(text), cap = n + 1024;
    unsigned char *out = malloc(cap);
    z.next_in = (unsigned char *)text;
    z.avail_in = (uInt)(cut_after ? cut_after : n);
    z.next_out = out;
    z.avail_out = (uInt)cap;
    cr_assert_neq(deflate(&z, cut_after ? Z_FULL_FLUSH : Z_FINISH), Z_STREAM_ERROR);
    size_t len = cap - z.avail_out;
    deflateEnd(&z);
    FILE *f = fopen(path, "wb");
    cr_assert(f && fwrite(out, 1, cut_middle ? len / 2 : len, f) == (cut_middle ? len / 2 : len));
    fclose(f);
    free(out);
}

/* 74.9: a .gz corpus whose stream ends early is an error naming the file: cut cleanly after a
 * full flush (the old build read the 300 whole lines as the corpus) or in the middle of a block
 * (the old build blamed the line counts). */
Test(doors, a_gzip_corpus_cut_short_is_an_error_naming_it, .timeout = 60) {
    char *d = tu_word_corpus_dir(400, 5, false);
    for (int kind = 0; kind < 2; kind++) {
        for (int side = 0; side < 2; side++) {
            char *text = tu_slurp(tu_path(d, side ? "train.en" : "train.de"), NULL);
            size_t cut = 0;
            for (int line = 0, i = 0; text[i] && line < 300; i++)
                if (text[i] == '\n' && ++line == 300) cut = (size_t)i + 1;
            char name[32];
            snprintf(name, sizeof name, "cut%d.%s.gz", kind, side ? "en" : "de");
            write_gz(tu_path(d, name), text, kind == 0 ? cut : 0, kind == 1 && side == 0);
            free(text);
        }
        int rc = tu_sh("cd %s && %s/train --config %s/configs/multi30k.json --set data_dir=. --set train_prefix=cut%d "
                       "--set valid_prefix=val --set test_prefix=test --set min_freq=1 --set cache_dir= "
                       "--set train.max_steps=1 --set train.warmup_steps=1 --out r%d > out.txt 2>&1",
                       d, tu_bin(), getenv("PWD") ? getenv("PWD") : ".", kind, kind);
        char *out = tu_slurp(tu_path(d, "out.txt"), NULL);
        cr_expect_eq(rc, 1, "%s: exit %d: %s", kind ? "cut mid-block" : "cut after a full flush", rc, out);
        cr_expect(out && strstr(out, kind ? "cut1.de.gz: read error" : "cut0.de.gz: read error") && strstr(out, "gzip stream"),
                  "%s", out);
        free(out);
    }
    /* the same text gzipped whole: read */
    char *text = tu_slurp(tu_path(d, "train.de"), NULL);
    write_gz(tu_path(d, "whole.de.gz"), text, 0, false);
    free(text);
    text = tu_slurp(tu_path(d, "train.en"), NULL);
    write_gz(tu_path(d, "whole.en.gz"), text, 0, false);
    free(text);
    cr_expect_eq(tu_sh("cd %s && %s/train --config %s/configs/multi30k.json --set data_dir=. --set train_prefix=whole "
                       "--set valid_prefix=val --set test_prefix=test --set min_freq=1 --set cache_dir= "
                       "--set train.max_steps=1 --set train.warmup_steps=1 --out ok > out.txt 2>&1 && "
                       "grep -q 'data: 400 training pairs' out.txt",
                       d, tu_bin(), getenv("PWD") ? getenv("PWD") : "."),
                 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    tu_rm_rf(d);
    free(d);
}

/* 74.11: a prepared file written in place under a running training (ids that stay valid, the
 * same length) stops the run at its next batch: every batch read is checked against the file's
 * stamp as it was checked whole (the old build used the new ids). */
Test(doors, a_prepared_file_written_under_a_run_stops_it_at_the_next_batch, .timeout = 60) {
    char *d = tu_word_corpus_dir(300, 5, false);
    ConfigTask t = word_task(d);
    TaskData td;
    S2sError err;
    cr_assert_eq(task_load(&td, &t, &err), S2S_OK, "%s", err.msg);
    cr_assert(td.train.streamed);
    int rows[4] = {0, 1, 2, 3};
    Batch b;
    batch_init(&b);
    cr_assert_eq(batch_read(&b, &td.train, rows, 4, &err), S2S_OK, "%s", err.msg);
    nanosleep(&(struct timespec){0, 20000000}, NULL); /* past the clock tick of the file's own making: a change time can move */
    /* the first id made the second's (both valid), in place */
    cr_assert_eq(tu_sh("f=%s; dd if=$f of=$f bs=1 skip=98 seek=96 count=2 conv=notrunc status=none", td.prepared), 0);
    cr_expect_eq(batch_read(&b, &td.train, rows, 4, &err), S2S_ERR_CORRUPT, "a batch read from a changed file");
    cr_expect(strstr(err.msg, "written to under the run"), "%s", err.msg);
    batch_free(&b);
    task_free(&td);
    tu_rm_rf(d);
    free(d);
}

/* dir/PREFIX.{de,en}: n lines of 8 made-up words of 3 to 9 letters each, nearly all distinct
 * (subwords take long to learn from them). */
static void random_words(const char *dir, const char *prefix, int n, uint32_t seed) {
    for (int side = 0; side < 2; side++) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s.%s", dir, prefix, side ? "en" : "de");
        FILE *f = fopen(p, "w");
        cr_assert(f);
        for (int i = 0; i < n; i++)
            for (int w = 0; w < 8; w++) {
                seed = seed * 1664525u + 1013904223u;
                int len = 3 + (int)(seed >> 28) % 7;
                for (int k = 0; k < len; k++) {
                    seed = seed * 1664525u + 1013904223u;
                    fputc('a' + (int)((seed >> 24) % 26), f);
                }
                fputc(w == 7 ? '\n' : ' ', f);
            }
        fclose(f);
    }
}

/* 74.15: Ctrl-C while the subwords are learned stops the run at once (the old build went on
 * learning for seconds, then stopped at the next chunk of encoding), and --prepare heeds it too. */
Test(doors, ctrl_c_stops_subword_learning_at_once, .timeout = 120) {
    char *d = tu_tmpdir();
    random_words(d, "train", 30000, 7);
    random_words(d, "val", 3, 8);
    random_words(d, "test", 3, 9);
    const char *modes[] = {"--out run", "--prepare"};
    for (int m = 0; m < 2; m++) {
        int rc = tu_sh("cd %s && rm -rf cache && { %s/train --config %s/configs/multi30k.json %s --set data_dir=. "
                       "--set train_prefix=train --set valid_prefix=val --set test_prefix=test --set subword=bpe "
                       "--set bpe_merges=3000 --set cache_dir=cache > out.txt 2>&1 & pid=$!; sleep 2.5; "
                       "a=$(date +%%s%%N); kill -INT $pid; wait $pid; rc=$?; b=$(date +%%s%%N); "
                       "echo $(( (b - a) / 1000000 )) > ms.txt; exit $rc; }",
                       d, tu_bin(), getenv("PWD") ? getenv("PWD") : ".", modes[m]);
        char *out = tu_slurp(tu_path(d, "out.txt"), NULL), *ms = tu_slurp(tu_path(d, "ms.txt"), NULL);
        cr_expect_eq(rc, 130, "%s: exit %d: %s", modes[m], rc, out);
        cr_expect(out && strstr(out, "while learning the subwords"), "%s: %s", modes[m], out);
        cr_expect(ms && atoi(ms) < 1000, "%s: %s ms from Ctrl-C to the exit", modes[m], ms ? ms : "?");
        cr_expect_eq(tu_sh("ls %s/cache 2>/dev/null | grep -q s2sdata", d), 1, "%s: a prepared or temporary file was left", modes[m]);
        cr_expect_neq(access(tu_path(d, "run"), F_OK), 0, "%s: a run folder was left", modes[m]);
        free(out);
        free(ms);
    }
    tu_rm_rf(d);
    free(d);
}

/* 74.14: `train --prepare` that prepared nothing is a failure a script sees (`--prepare &&
 * mpirun …`): no cache folder, a generated task, a folder that cannot take the file. */
Test(doors, prepare_that_prepared_nothing_fails, .timeout = 60) {
    char *d = tu_word_corpus_dir(100, 5, false);
    word_config(d);
    const char *b = tu_bin();
    int rc = tu_sh("cd %s && %s/train --config c.json --set cache_dir= --prepare > out.txt 2>&1", d, b);
    cr_expect_eq(rc, 2, "no cache folder: exit %d: %s", rc, tu_slurp(tu_path(d, "out.txt"), NULL));
    cr_expect(tu_file_has(tu_path(d, "out.txt"), "task.cache_dir"));
    rc = tu_sh("cd %s && %s/train --config %s/configs/reverse.json --prepare > out.txt 2>&1", d, b,
               getenv("PWD") ? getenv("PWD") : ".");
    cr_expect_eq(rc, 2, "reversal: exit %d: %s", rc, tu_slurp(tu_path(d, "out.txt"), NULL));
    /* the file's name taken by a folder: the data load (into memory), nothing is prepared */
    cr_assert_eq(tu_sh("cd %s && %s/train --config c.json --prepare > out.txt 2>&1 && f=$(ls cache/*.s2sdata) && rm $f && "
                       "mkdir $f", d, b),
                 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    rc = tu_sh("cd %s && %s/train --config c.json --prepare > out.txt 2>&1", d, b);
    cr_expect_eq(rc, 1, "a folder at the file's name: exit %d: %s", rc, tu_slurp(tu_path(d, "out.txt"), NULL));
    cr_expect(tu_file_has(tu_path(d, "out.txt"), "nothing was prepared"), "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    /* and prepared: 0 */
    cr_expect_eq(tu_sh("cd %s && rmdir cache/*.s2sdata && %s/train --config c.json --prepare > out.txt 2>&1", d, b), 0);
    tu_rm_rf(d);
    free(d);
}

/* 74.20 and 74.21: ./serve counts a model's parameters as ./train and Python do (not its padded
 * storage), and a translation model's config (config.json, the model file's, /api/models), and
 * its log hold only what applies to it: no alphabet, no min_len, no exact_match. */
Test(doors, a_model_is_described_by_what_applies_to_it, .timeout = 120) {
    char *d = tu_word_corpus_dir(200, 10, false);
    word_config(d);
    cr_assert_eq(tu_sh("cd %s && %s/train --config c.json --out run > train.txt 2>&1 && cp run/model.bin model.bin", d, tu_bin()),
                 0);
    char *out = tu_slurp(tu_path(d, "train.txt"), NULL);
    const char *p = strstr(out, "parameters: ");
    cr_assert(p, "%s", out);
    long printed = atol(p + 12);
    free(out);
    S2sError err = {0};
    S2sModel *m = s2s_open(tu_path(d, "model.bin"), 1, &err);
    cr_assert(m, "%s", err.msg);
    cr_expect_eq(s2s_model_params(m), printed);
    char *api_conf = s2s_model_config(m);
    s2s_close(m);
    int port = start_server(d, "");
    cr_assert(port > 0, "serve did not start: %s", tu_slurp(tu_path(d, "serve.txt"), NULL));
    Reply r = http(port, "GET", "/api/models", NULL, 0);
    cr_assert_eq(r.status, 200);
    cJSON *j = cJSON_Parse(r.body), *first = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "models"), 0);
    if (!first) first = cJSON_GetArrayItem(j, 0);
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(first, "params");
    cr_expect(cJSON_IsNumber(params) && (long)params->valuedouble == printed, "/api/models: %s; ./train printed %ld", r.body,
              printed);
    char *served_conf = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(first, "config"));
    stop_server(d);
    char *run_conf = tu_slurp(tu_path(d, "run/config.json"), NULL), *log = tu_slurp(tu_path(d, "run/log.jsonl"), NULL);
    const char *texts[] = {run_conf, api_conf, served_conf};
    const char *names[] = {"run/config.json", "s2s_model_config", "/api/models"};
    for (int i = 0; i < 3; i++) {
        cr_expect(texts[i] && !strstr(texts[i], "alphabet") && !strstr(texts[i], "min_len") && !strstr(texts[i], "train_size"),
                  "%s holds the reversal task's keys: %s", names[i], texts[i]);
        cr_expect(texts[i] && strstr(texts[i], "data_dir"), "%s lost a key that applies: %s", names[i], texts[i]);
    }
    cr_expect(log && strstr(log, "test_bleu") && !strstr(log, "exact_match") && !strstr(log, "\"test_token_accuracy\""),
              "the log: %s", log);
    free(run_conf);
    free(log);
    free(served_conf);
    s2s_free_string(api_conf);
    cJSON_Delete(j);
    reply_free(&r);
    /* a reversal run's config: no translation keys, and the reversal's there */
    tu_write(tu_path(d, "tiny.json"), "%s", TINY_JSON);
    cr_assert_eq(tu_sh("cd %s && %s/train --config tiny.json --out rev > /dev/null 2>&1", d, tu_bin()), 0);
    char *rev = tu_slurp(tu_path(d, "rev/config.json"), NULL);
    cr_expect(rev && strstr(rev, "alphabet") && !strstr(rev, "data_dir") && !strstr(rev, "bpe_merges"), "%s", rev);
    free(rev);
    tu_rm_rf(d);
    free(d);
}

/* 74.17: a model that does not load is a 500 naming the error's kind and the model, never a
 * path of the server's or its memory; the detail goes to the server's log. */
Test(doors, a_server_error_names_no_server_path, .timeout = 120) {
    char *d = tiny_dir();
    cr_assert_eq(tu_sh("cd %s && mkdir -p runs && cp -r run runs/one && head -c 3000 run/model.bin > runs/one/model.bin", d), 0);
    int port = start_serving(d, false, "");
    cr_assert(port > 0, "serve did not start: %s", tu_slurp(tu_path(d, "serve.txt"), NULL));
    Reply r = http(port, "POST", "/api/translate", "{\"model\": \"one\", \"text\": \"abc\"}", 32);
    cr_expect_eq(r.status, 500);
    cr_expect(r.body && strstr(r.body, "run \\\"one\\\" cannot be loaded") && !strstr(r.body, d) && !strstr(r.body, "GB") &&
                  !strstr(r.body, "/tmp"),
              "%s", r.body);
    reply_free(&r);
    stop_server(d);
    cr_expect(tu_file_has(tu_path(d, "serve.txt"), "runs/one/model.bin"), "the server's log lacks the detail: %s",
              tu_slurp(tu_path(d, "serve.txt"), NULL));
    tu_rm_rf(d);
    free(d);
}

/* 74.18: every malformed request gets one JSON 400: a header name with a space before its colon
 * (a Transfer-Encoding a proxy may read, beside a Content-Length), a query key given twice, a
 * Content-Length of "+21" or "21, 21" (which libmicrohttpd answered itself: an HTML page after
 * its head written twice; the gate answers it now). */
Test(doors, malformed_requests_get_one_json_400, .timeout = 120) {
    char *d = tiny_dir();
    cr_assert_eq(tu_sh("cd %s && mkdir -p runs && cp -r run runs/one && cp run/model.bin model.bin", d), 0);
    int port = start_serving(d, false, "");
    cr_assert(port > 0, "serve did not start: %s", tu_slurp(tu_path(d, "serve.txt"), NULL));
    const char *body = "{\"model\": \"one\", \"text\": [\"abc\"]}";
    char req[4][512];
    snprintf(req[0], sizeof req[0],
             "POST /api/translate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\nContent-Length: %zu\r\n"
             "Connection: close\r\n\r\n%s",
             strlen(body), body);
    snprintf(req[1], sizeof req[1], "GET /api/runs/one/log?from=5&from=7 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    snprintf(req[2], sizeof req[2], "POST /api/translate HTTP/1.1\r\nHost: x\r\nContent-Length: +%zu\r\nConnection: close\r\n\r\n%s",
             strlen(body), body);
    snprintf(req[3], sizeof req[3],
             "POST /api/translate HTTP/1.1\r\nHost: x\r\nContent-Length: %zu, %zu\r\nConnection: close\r\n\r\n%s",
             strlen(body), strlen(body), body);
    for (int i = 0; i < 4; i++) {
        int fd = serve_connect(port, 5);
        cr_assert(fd >= 0);
        cr_assert_eq(write(fd, req[i], strlen(req[i])), (ssize_t)strlen(req[i]));
        char got[4096];
        size_t n = 0;
        for (ssize_t k; n < sizeof got - 1 && (k = read(fd, got + n, sizeof got - 1 - n)) > 0;) n += (size_t)k;
        got[n] = '\0';
        close(fd);
        char *second = strstr(got + 1, "HTTP/1.1");
        cr_expect(!strncmp(got, "HTTP/1.1 400", 12) && !second && strstr(got, "application/json") && strstr(got, "{\"error\":"),
                  "request %d answered: %s", i, got);
    }
    stop_server(d);
    tu_rm_rf(d);
    free(d);
}

/* 74.23: the golden cases and their generators live in the tree: a clean clone runs every golden
 * test and can make them again (the base cases used to live in ../shared/golden). With PyTorch
 * here, tests/golden/make_base.py makes the stored cases again, to float64's last digits. */
Test(doors, the_golden_cases_and_their_generator_are_in_the_tree, .timeout = 300) {
    cr_expect_eq(tu_sh("grep -rl 'shared/golden' Makefile tests/*.c tests/*.h tests/golden tests/golden-extra/*.py | "
                       "grep -v test_doors.c"),
                 1, "a test or generator still reads ../shared/golden");
    const char *cases[] = {"bigru_dummy", "bigru_meanpool", "bigru_scaled_dot", "bigru_dot", "lstm_dummy",
                           "lstm_dot",    "gru_cell",       "lstm_cell",        "exercises"};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        cr_expect_eq(tu_sh("test -s tests/golden/%s.json", cases[i]), 0, "tests/golden/%s.json is missing", cases[i]);
    if (tu_sh("/usr/bin/python3 -c 'import torch' 2>/dev/null") != 0)
        TU_SKIP("python3-torch is not installed: tests/golden/make_base.py not run (the cases above are in the tree)");
    char *d = tu_tmpdir();
    cr_assert_eq(tu_sh("/usr/bin/python3 tests/golden/make_base.py %s > /dev/null", d), 0);
    int rc = tu_sh("/usr/bin/python3 - %s <<'EOF'\n"
                   "import json, os, sys\n"
                   "def flat(x):\n"
                   "    if isinstance(x, list):\n"
                   "        for y in x: yield from flat(y)\n"
                   "    elif isinstance(x, dict):\n"
                   "        for k in sorted(x): yield k; yield from flat(x[k])\n"
                   "    else: yield x\n"
                   "for f in sorted(os.listdir(sys.argv[1])):\n"
                   "    a = list(flat(json.load(open(os.path.join(sys.argv[1], f)))))\n"
                   "    b = list(flat(json.load(open(os.path.join('tests/golden', f)))))\n"
                   "    assert len(a) == len(b), f\n"
                   "    for x, y in zip(a, b):\n"
                   "        assert x == y or (isinstance(x, float) and abs(x - y) <= 1e-12 * max(1.0, abs(y))), (f, x, y)\n"
                   "EOF",
                   d);
    cr_expect_eq(rc, 0, "tests/golden/make_base.py does not make the stored cases");
    tu_rm_rf(d);
    free(d);
}
