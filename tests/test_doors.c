/* test_doors.c — the doors added since the programs (the C API, the library calls under
 * Python, prepared corpora, teachers) keep the programs' promises: no call writes onto a
 * file it reads, nothing blocks on a FIFO or crashes on a bad argument, and every answer is
 * the one the model and the files give. Each test names the defect it holds shut. This file:
 * files, the C API, the server and the goldens; corpora, teachers and models:
 * test_doors_data.c. */
#include "test_doors.h"

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
    tu_write(tu_path(d, "tiny.json"), "%s", tiny_json());
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
        tu_write(tu_path(d, "tiny.json"), "%s", tiny_json());
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
