/* test_api.c — the stable C API (s2s.h) against the programs on the same inputs: a run
 * trained through it, its translations, n-best lists, attention and scores equal to
 * ./translate's, a stopped training resumed bit for bit, the tools equal to ./attend, ./bleu
 * and ./subword, and bad input as errors with messages. */
#include "test_util.h"
#include "s2s/file.h"
#include "s2s/s2s.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *TINY =
    "{\"name\": \"tiny\", \"seed\": 3,"
    " \"task\": {\"type\": \"reverse\", \"alphabet\": \"abcd\", \"min_len\": 3, \"max_len\": 8, \"train_size\": 400,"
    "          \"valid_size\": 40, \"test_size\": 40, \"data_seed\": 5},"
    " \"model\": {\"cell\": \"gru\", \"embedding\": 16, \"encoder_hidden\": 32, \"decoder_hidden\": 32, \"attention\": \"dot\"},"
    " \"train\": {\"lr\": 0.01, \"batch_size\": 32, \"epochs\": 2, \"log_every\": 5}}";

typedef struct Events {
    int lines, steps;
    S2sTraining *stop_after; /* stop this training at its first step line */
} Events;

static void count_event(const char *line, void *user) {
    Events *e = user;
    e->lines++;
    cJSON *j = cJSON_Parse(line);
    cr_assert(j, "an event that is not JSON: %s", line);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(j, "type");
    cr_assert(cJSON_IsString(type), "an event without a type: %s", line);
    if (!strcmp(type->valuestring, "step") && e->steps++ == 0 && e->stop_after) s2s_training_stop(e->stop_after);
    cJSON_Delete(j);
}

static int file_lines(const char *path) {
    char *txt = tu_slurp(path, NULL);
    cr_assert(txt, "%s: cannot read", path);
    int n = 0;
    for (char *p = txt; *p; p++) n += *p == '\n';
    free(txt);
    return n;
}

/* A tiny run trained through the API into dir/run; its events counted. */
static void train_tiny(const char *dir, const char *name, Events *ev) {
    S2sError err = {0};
    char out[512];
    snprintf(out, sizeof out, "%s/%s", dir, name);
    S2sTraining *t = s2s_training_new(NULL, TINY, NULL, 0, out, false, &err);
    cr_assert(t, "%s", err.msg);
    cr_assert_eq(s2s_training_run(t, 0, count_event, ev, &err), S2S_OK, "%s", err.msg);
    char *sum = s2s_training_summary(t);
    cr_expect(strstr(sum, "\"tested\":true") && strstr(sum, "\"interrupted\":false"), "%s", sum);
    s2s_free_string(sum);
    s2s_training_free(t);
}

Test(api, the_abi_version_is_the_headers) {
    cr_expect_eq(s2s_abi_version(), S2S_ABI_VERSION);
    cr_expect_str_eq(s2s_version(), S2S_VERSION);
}

static const char *LINES[] = {"abcd", "dcba", "aabbc", "", "abcdabcd", "cab", "bbbbbd"};
#define N_LINES 7

/* the lines as a file, one a line */
static void write_lines(const char *path, const char *const *lines, int n) {
    FILE *f = fopen(path, "w");
    cr_assert(f);
    for (int i = 0; i < n; i++) fprintf(f, "%s\n", lines[i]);
    fclose(f);
}

Test(api, a_run_trained_here_translates_and_scores_as_translate_does, .timeout = 240) {
    char *d = tu_tmpdir();
    Events ev = {0};
    train_tiny(d, "run", &ev);
    cr_expect_eq(ev.lines, file_lines(tu_path(d, "run/log.jsonl")), "every log line an event");
    cr_expect_gt(ev.steps, 0);
    S2sError err = {0};
    S2sModel *m = s2s_open(tu_path(d, "run/model.bin"), 1, &err);
    cr_assert(m, "%s", err.msg);
    cr_expect(s2s_model_has_attention(m));
    cr_expect_gt(s2s_model_params(m), 1000);
    char *cfg = s2s_model_config(m);
    cJSON *cj = cJSON_Parse(cfg);
    cr_expect_str_eq(cJSON_GetObjectItemCaseSensitive(tu_get(cj, "model"), "attention")->valuestring, "dot");
    cJSON_Delete(cj);
    s2s_free_string(cfg);
    write_lines(tu_path(d, "in.txt"), LINES, N_LINES);

    /* greedy with attention, beam 3 with its n-best list */
    cr_assert_eq(tu_sh("%s/translate %s/run/model.bin --input %s/in.txt --attention %s/attn.jsonl > %s/greedy.txt",
                       tu_bin(), d, d, d, d), 0);
    cr_assert_eq(tu_sh("%s/translate %s/run/model.bin --input %s/in.txt --beam 3 --n-best 3 > %s/nbest.txt", tu_bin(),
                       d, d, d), 0);
    /* under beam search, the best hypothesis's attention: its rows' tokens are its text */
    cr_assert_eq(tu_sh("%s/translate %s/run/model.bin --input %s/in.txt --beam 3 --attention %s/battn.jsonl > %s/beam.txt",
                       tu_bin(), d, d, d, d), 0);
    cr_expect_eq(tu_sh("cd %s && python3 -c 'import json,sys\n"
                       "for a, t in zip(open(\"battn.jsonl\"), open(\"beam.txt\")):\n"
                       "    a = json.loads(a); toks = [x for x in a.get(\"target\", []) if x != \"<eos>\"]\n"
                       "    assert \"\".join(toks) == t.rstrip(\"\\n\"), (toks, t)\n"
                       "    assert all(abs(sum(r) - 1) < 1e-5 for r in a.get(\"weights\", [])), a\n"
                       "    assert len(a.get(\"weights\", [])) == len(a.get(\"target\", []))\n"
                       "'",
                       d),
                 0, "beam search's attention is not its best hypothesis's");
    S2sTranslations *ba = s2s_translate_lines(m, LINES, N_LINES, 3, 1, 1.0f, 0, S2S_TRANSLATE_ATTENTION, &err);
    cr_assert(ba, "%s", err.msg);
    int bo, bs;
    cr_expect(s2s_translations_attention(ba, 0, &bo, &bs) && bs == 4 && bo >= 1, "the library's beam attention");
    s2s_translations_free(ba);
    S2sTranslations *g = s2s_translate_lines(m, LINES, N_LINES, 1, 1, 1.0f, 0, S2S_TRANSLATE_ATTENTION, &err);
    S2sTranslations *b = s2s_translate_lines(m, LINES, N_LINES, 3, 3, 1.0f, 0, 0, &err);
    cr_assert(g && b, "%s", err.msg);
    char *want = tu_slurp(tu_path(d, "greedy.txt"), NULL), *want_nb = tu_slurp(tu_path(d, "nbest.txt"), NULL);
    char *attn = tu_slurp(tu_path(d, "attn.jsonl"), NULL);
    size_t cap = 1 << 16;
    char *got = calloc(cap, 1), *got_nb = calloc(cap, 1);
    for (int i = 0; i < N_LINES; i++) {
        cr_assert_eq(s2s_translations_status(g, i, NULL), S2S_OK);
        snprintf(got + strlen(got), cap - strlen(got), "%s\n", s2s_translations_text(g, i, 0));
        for (int h = 0; h < s2s_translations_hyps(b, i); h++)
            snprintf(got_nb + strlen(got_nb), cap - strlen(got_nb), "%d ||| %s ||| F0= %.4f ||| %.4f\n", i,
                     s2s_translations_text(b, i, h), s2s_translations_logprob(b, i, h), s2s_translations_score(b, i, h));
    }
    cr_expect_str_eq(got, want);
    cr_expect_str_eq(got_nb, want_nb);
    /* line 1's attention: the same numbers as --attention's first JSON line */
    int n_out, n_src;
    const float *w = s2s_translations_attention(g, 0, &n_out, &n_src);
    cr_assert(w && n_out >= 1 && n_src == 4, "abcd: %d × %d attention", n_out, n_src);
    cJSON *j = cJSON_Parse(strtok(attn, "\n"));
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(j, "weights"), *src = tu_get(j, "source"), *out = tu_get(j, "target");
    cr_assert_eq(cJSON_GetArraySize(rows), n_out);
    cr_assert_eq(cJSON_GetArraySize(out), n_out);
    for (int k = 0; k < n_src; k++) cr_expect_str_eq(s2s_translations_src_token(g, 0, k), cJSON_GetArrayItem(src, k)->valuestring);
    for (int r = 0; r < n_out; r++) cr_expect_str_eq(s2s_translations_out_token(g, 0, r), cJSON_GetArrayItem(out, r)->valuestring);
    for (int r = 0; r < n_out; r++)
        for (int k = 0; k < n_src; k++)
            cr_expect_eq((float)cJSON_GetArrayItem(cJSON_GetArrayItem(rows, r), k)->valuedouble, w[r * n_src + k]);
    cr_expect_str_eq(s2s_translations_src_token(g, 0, 0), "a");
    cr_expect_null(s2s_translations_attention(g, 3, NULL, NULL), "the empty line has none");
    cJSON_Delete(j);
    s2s_translations_free(g);
    s2s_translations_free(b);

    /* forced decoding: --score's lines */
    const char *trgs[N_LINES] = {"dcba", "abcd", "cbbaa", "a", "dcbadcba", "bac", "dbbbbb"};
    write_lines(tu_path(d, "trg.txt"), trgs, N_LINES);
    tu_sh("%s/translate %s/run/model.bin --input %s/in.txt --score %s/trg.txt > %s/score.txt 2>/dev/null", tu_bin(), d, d,
          d, d);
    S2sScores *s = s2s_score_pairs(m, LINES, trgs, N_LINES, true, &err);
    cr_assert(s, "%s", err.msg);
    char *want_sc = tu_slurp(tu_path(d, "score.txt"), NULL), *line = strtok(want_sc, "\n");
    for (int i = 0; i < N_LINES; i++) {
        const char *why;
        if (s2s_scores_status(s, i, &why)) { /* the empty source: no score, an empty line */
            cr_expect_eq(i, 3, "pair %d: %s", i, why);
            continue;
        }
        char head[64];
        snprintf(head, sizeof head, "%.4f |||", s2s_scores_total(s, i));
        cr_expect(line && !strncmp(line, head, strlen(head)), "pair %d: %s, want %s", i, head, line);
        int V, n;
        const float *lp;
        cr_expect_eq(s2s_scores_tokens(s, i, &lp), (int)strlen(trgs[i]) + 1);
        cr_expect(s2s_scores_logits(s, i, &V) && V > 4);
        cr_expect(s2s_scores_ids(s, i, false, &n) && n == (int)strlen(trgs[i]) + 1);
        line = strtok(NULL, "\n");
    }
    s2s_scores_free(s);
    s2s_close(m);
    free(want), free(want_nb), free(attn), free(got), free(got_nb), free(want_sc);
    tu_rm_rf(d);
}

Test(api, a_stopped_training_resumes_to_the_uninterrupted_runs_bits, .timeout = 240) {
    char *d = tu_tmpdir();
    Events full = {0};
    train_tiny(d, "full", &full);
    S2sError err = {0};
    S2sTraining *t = s2s_training_new(NULL, TINY, NULL, 0, tu_path(d, "part"), false, &err);
    cr_assert(t, "%s", err.msg);
    Events ev = {.stop_after = t};
    cr_assert_eq(s2s_training_run(t, 0, count_event, &ev, &err), S2S_OK, "%s", err.msg);
    char *sum = s2s_training_summary(t);
    cr_expect(strstr(sum, "\"interrupted\":true") && strstr(sum, "\"tested\":false"), "%s", sum);
    s2s_free_string(sum);
    cr_expect_eq(s2s_training_run(t, 0, NULL, NULL, &err), S2S_ERR_CONFIG, "a training runs once");
    s2s_training_free(t);
    t = s2s_training_resume(tu_path(d, "part"), 0, &err);
    cr_assert(t, "%s", err.msg);
    cr_assert_eq(s2s_training_run(t, 0, NULL, NULL, &err), S2S_OK, "%s", err.msg);
    s2s_training_free(t);
    char why[256];
    cr_expect(tu_same_checkpoint(tu_path(d, "full/model.bin"), tu_path(d, "part/model.bin"), why, sizeof why), "%s", why);
    tu_rm_rf(d);
}

Test(api, bad_input_is_an_error_with_a_message, .timeout = 120) {
    char *d = tu_tmpdir();
    S2sError err = {0};
    tu_write(tu_path(d, "junk.bin"), "not a model at all");
    cr_expect_null(s2s_open(tu_path(d, "junk.bin"), 0, &err));
    cr_expect(strstr(err.msg, "junk.bin"), "%s", err.msg);
    cr_expect_null(s2s_open_precision(tu_path(d, "junk.bin"), "fp16", 0, &err));
    cr_expect(strstr(err.msg, "fp16") && strstr(err.msg, "bf16"), "%s", err.msg);
    /* an unknown key: the CLI's "did you mean" */
    cr_expect_null(s2s_training_new(NULL, "{\"name\": \"x\", \"model\": {\"atention\": \"dot\"}}", NULL, 0, d, false, &err));
    cr_expect(strstr(err.msg, "atention") && strstr(err.msg, "attention"), "%s", err.msg);
    cr_expect_null(s2s_training_new(NULL, "{\"name\": ", NULL, 0, d, false, &err));
    cr_expect_null(s2s_training_new(NULL, NULL, NULL, 0, d, false, &err));
    const char *bad_set[] = {"train.lr=-1"};
    cr_expect_null(s2s_training_new(NULL, TINY, bad_set, 1, d, false, &err));
    cr_expect(strstr(err.msg, "lr"), "%s", err.msg);
    cr_expect_null(s2s_training_resume(tu_path(d, "none"), -1, &err));
    /* a folder another training holds: the holder named */
    S2sTraining *a = s2s_training_new(NULL, TINY, NULL, 0, tu_path(d, "held"), false, &err);
    cr_assert(a, "%s", err.msg);
    cr_assert_eq(tu_sh("mkdir -p %s/held", d), 0);
    FileLock lock;
    cr_assert_eq(file_lock(&lock, tu_path(d, "held"), &err), S2S_OK, "%s", err.msg);
    cr_expect_neq(s2s_training_run(a, 0, NULL, NULL, &err), S2S_OK);
    char pid[32];
    snprintf(pid, sizeof pid, "pid %ld", (long)getpid());
    cr_expect(strstr(err.msg, "held") && strstr(err.msg, pid), "%s", err.msg);
    file_unlock(&lock);
    s2s_training_free(a);
    cr_expect_null(s2s_score_corpus("{\"metric\": \"blue\"}", (const char *[]){"a"}, (const char *[]){"a"}, 1, 1, &err));
    cr_expect(strstr(err.msg, "metric"), "%s", err.msg);
    cr_expect_null(s2s_score_corpus("{\"tokenize\": \"13a\"}", (const char *[]){"a"}, (const char *[]){"a"}, 1, 1, &err));
    cr_expect_null(s2s_score_corpus(NULL, (const char *[]){"\xff"}, (const char *[]){"a"}, 1, 1, &err));
    cr_expect(strstr(err.msg, "UTF-8"), "%s", err.msg);
    cr_expect_null(s2s_attend("{\"Q\": [[1, 2]], \"K\": [[1]], \"V\": [[1]]}", &err));
    cr_expect_null(s2s_subword_open("/nonexistent/bpe.model", &err));
    cr_expect(strstr(err.msg, "/nonexistent/bpe.model"), "%s", err.msg);
    tu_rm_rf(d);
}

Test(api, the_tools_answer_as_attend_bleu_and_subword_do, .timeout = 120) {
    char *d = tu_tmpdir();
    S2sError err = {0};
    const char *q = "{\"Q\": [[1, 2, 1]], \"K\": [[1, 2, 3], [1, 2, 1], [0, 1, -1]], \"V\": [[1, 2, 3], [1, 2, 1], [0, 1, -1]],"
                    " \"heads\": 1, \"scaled\": false}";
    tu_write(tu_path(d, "q.json"), "%s", q);
    cr_assert_eq(tu_sh("%s/attend %s/q.json --json > %s/attend.json", tu_bin(), d, d), 0);
    char *a = s2s_attend(q, &err), *want = tu_slurp(tu_path(d, "attend.json"), NULL);
    cr_assert(a, "%s", err.msg);
    cr_expect_eq(strlen(want), strlen(a) + 1);
    cr_expect(!strncmp(a, want, strlen(a)), "%s\n%s", a, want);
    s2s_free_string(a);
    free(want);

    const char *hyp[] = {"the cat sat on the mat .", "a dog runs", "Ünïcode wörds here"};
    const char *ref[] = {"the cat sat on a mat .", "a dog runs fast", "Ünïcode wörds here"};
    write_lines(tu_path(d, "hyp"), hyp, 3);
    write_lines(tu_path(d, "ref"), ref, 3);
    static const struct {
        const char *opts, *args;
    } CASES[] = {{NULL, ""},
                 {"{\"metric\": \"sacrebleu\", \"tokenize\": \"intl\", \"lowercase\": true}", "--tokenize intl -lc"},
                 {"{\"metric\": \"sacrebleu\", \"smooth_method\": \"floor\", \"width\": 3}", "--sacrebleu --smooth-method floor --width 3"},
                 {"{\"metric\": \"chrf\", \"word_order\": 2}", "--chrf --word-order 2"}};
    for (size_t c = 0; c < sizeof CASES / sizeof *CASES; c++) {
        cr_assert_eq(tu_sh("%s/bleu %s %s/ref %s/hyp > %s/bleu.txt", tu_bin(), CASES[c].args, d, d, d), 0);
        char *line = tu_slurp(tu_path(d, "bleu.txt"), NULL), *j = s2s_score_corpus(CASES[c].opts, hyp, ref, 3, 1, &err);
        cr_assert(j, "%s", err.msg);
        cJSON *o = cJSON_Parse(j);
        line[strcspn(line, "\n")] = '\0';
        cr_expect_str_eq(tu_get(o, "line")->valuestring, line);
        if (c > 0) cr_expect(!strncmp(line, tu_get(o, "signature")->valuestring, strlen(tu_get(o, "signature")->valuestring)));
        cJSON_Delete(o);
        s2s_free_string(j);
        free(line);
    }

    const char *corpus[] = {"lower lowest newer newest", "wider widest low new", "the newest and the lowest"};
    write_lines(tu_path(d, "corpus.txt"), corpus, 3);
    cr_assert_eq(tu_sh("%s/subword learn --input %s/corpus.txt --merges 12 --out %s/cli.bpe 2>/dev/null", tu_bin(), d, d), 0);
    cr_assert_eq(s2s_subword_learn(corpus, 3, 12, 0, 0, tu_path(d, "api.bpe"), &err), 12, "%s", err.msg);
    cr_expect(tu_same_file(tu_path(d, "cli.bpe"), tu_path(d, "api.bpe")));
    S2sSubword *sw = s2s_subword_open(tu_path(d, "api.bpe"), &err);
    cr_assert(sw, "%s", err.msg);
    cr_assert_eq(tu_sh("printf 'the lowest wider one\\n' | %s/subword encode --model %s/cli.bpe > %s/enc.txt", tu_bin(), d, d), 0);
    char *enc = s2s_subword_encode(sw, "the lowest wider one", &err), *want_enc = tu_slurp(tu_path(d, "enc.txt"), NULL);
    cr_assert(enc, "%s", err.msg);
    want_enc[strcspn(want_enc, "\n")] = '\0';
    cr_expect_str_eq(enc, want_enc);
    char *dec = s2s_subword_decode(sw, enc, &err);
    cr_expect_str_eq(dec, "the lowest wider one");
    cr_expect_null(s2s_subword_encode(sw, "\xc3", &err), "not UTF-8");
    s2s_free_string(enc), s2s_free_string(dec), free(want_enc);
    s2s_subword_free(sw);
    tu_rm_rf(d);
}
