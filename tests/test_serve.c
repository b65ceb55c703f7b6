/* test_serve.c — ./serve end to end: a small reversal model trained here, served on a free
 * port; its translations equal ./translate's (greedy and beam with n-best), its attention rows
 * are distributions over the source tokens; every bad request is a 4xx with a JSON error and
 * the server keeps serving; SIGTERM ends it with exit 0. The client is a plain socket. */
#include "test_util.h"

#include <arpa/inet.h>
#include <cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "serve_client.h"

/* The weights an API answer's translations hold: one heatmap cell each on the page. */
static int answer_weights(const cJSON *answer) {
    int n = 0;
    const cJSON *t, *row;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(answer, "translations"))
        cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "attention"), "weights"))
            n += cJSON_GetArraySize(row);
    return n;
}

Test(serve, translations_equal_translate_and_attention_is_a_distribution, .timeout = 240) {
    char *d = trained_model_dir();
    tu_write(tu_path(d, "in.txt"), "abcd\ndcba\naabbcc\nbad\n");
    cr_assert_eq(tu_sh("cd %s && %s/translate model.bin --input in.txt > greedy.txt 2>/dev/null && "
                       "%s/translate model.bin --input in.txt --beam 3 --n-best 2 > nbest.txt 2>/dev/null && "
                       "%s/translate model.bin --input in.txt --beam 3 --attention beam.jsonl > /dev/null 2>&1",
                       d, tu_bin(), tu_bin(), tu_bin()),
                 0);
    int port = start_server(d, "");
    cr_assert(port > 0, "serve did not start: %s", tu_slurp(tu_path(d, "serve.txt"), NULL));
    cJSON *j = translate_ok(port, "{\"text\": [\"abcd\", \"dcba\", \"aabbcc\", \"bad\"], \"attention\": true}");
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(j, "translations");
    cr_assert_eq(cJSON_GetArraySize(list), 4);
    char *greedy = tu_slurp(tu_path(d, "greedy.txt"), NULL), *save = NULL, *line = strtok_r(greedy, "\n", &save);
    const char *src[4] = {"abcd", "dcba", "aabbcc", "bad"};
    for (int i = 0; i < 4; i++, line = strtok_r(NULL, "\n", &save)) {
        const cJSON *e = cJSON_GetArrayItem(list, i);
        const char *text = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "text"));
        cr_assert(text && line);
        cr_expect_str_eq(text, line, "line %d: serve \"%s\", translate \"%s\"", i, text, line);
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(e, "attention");
        {
            const cJSON *ss = cJSON_GetObjectItemCaseSensitive(a, "source"), *ts = cJSON_GetObjectItemCaseSensitive(a, "target"),
                        *w = cJSON_GetObjectItemCaseSensitive(a, "weights");
            int ns = cJSON_GetArraySize(ss), nt = cJSON_GetArraySize(ts);
            cr_expect_eq(ns, (int)strlen(src[i]), "line %d: %d source tokens", i, ns);
            cr_expect_eq(nt, (int)strlen(text) + 1, "line %d: %d target tokens for \"%s\" and <eos>", i, nt, text);
            cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetArrayItem(ts, nt - 1)), "<eos>");
            cr_expect_eq(cJSON_GetArraySize(w), nt);
            for (int row = 0; row < nt; row++) {
                const cJSON *wr = cJSON_GetArrayItem(w, row);
                cr_expect_eq(cJSON_GetArraySize(wr), ns);
                double sum = 0;
                for (int k = 0; k < ns; k++) sum += cJSON_GetArrayItem(wr, k)->valuedouble;
                cr_expect_lt(fabs(sum - 1), 1e-5, "line %d row %d: weights sum to %g", i, row, sum);
            }
        }
    }
    free(greedy);
    cJSON_Delete(j);
    /* beam 3 with 2 hypotheses: translate's n-best lines, best first */
    j = translate_ok(port, "{\"text\": [\"abcd\", \"dcba\", \"aabbcc\", \"bad\"], \"beam\": 3, \"n_best\": 2}");
    list = cJSON_GetObjectItemCaseSensitive(j, "translations");
    char *nbest = tu_slurp(tu_path(d, "nbest.txt"), NULL);
    save = NULL;
    line = strtok_r(nbest, "\n", &save);
    for (int i = 0; i < 4; i++) {
        const cJSON *hs = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(list, i), "n_best");
        cr_assert_eq(cJSON_GetArraySize(hs), 2, "line %d", i);
        for (int k = 0; k < 2; k++, line = strtok_r(NULL, "\n", &save)) {
            cr_assert(line != NULL);
            char want[256]; /* Moses: "i ||| text ||| F0= logprob ||| score" */
            const cJSON *h = cJSON_GetArrayItem(hs, k);
            snprintf(want, sizeof want, "%d ||| %s |||", i, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(h, "text")));
            cr_expect(strncmp(line, want, strlen(want)) == 0, "line %d hyp %d: serve \"%s\", translate \"%s\"", i, k, want, line);
        }
        double s0 = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(hs, 0), "score")->valuedouble,
               s1 = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(hs, 1), "score")->valuedouble;
        cr_expect_geq(s0, s1, "line %d: best first", i);
    }
    free(nbest);
    cJSON_Delete(j);
    /* beam 3 with attention: each line's is ./translate --beam 3 --attention's (the best hypothesis's) */
    j = translate_ok(port, "{\"text\": [\"abcd\", \"dcba\", \"aabbcc\", \"bad\"], \"beam\": 3, \"attention\": true}");
    list = cJSON_GetObjectItemCaseSensitive(j, "translations");
    char *beam = tu_slurp(tu_path(d, "beam.jsonl"), NULL);
    save = NULL;
    line = strtok_r(beam, "\n", &save);
    for (int i = 0; i < 4; i++, line = strtok_r(NULL, "\n", &save)) {
        cr_assert(line != NULL, "./translate --attention wrote %d lines", i);
        cJSON *want = cJSON_Parse(line);
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(list, i), "attention");
        const char *keys[3] = {"source", "target", "weights"};
        for (int k = 0; k < 3; k++)
            cr_expect(a && cJSON_Compare(cJSON_GetObjectItemCaseSensitive(a, keys[k]), cJSON_GetObjectItemCaseSensitive(want, keys[k]), true),
                      "line %d: serve's \"%s\" under beam 3 is not ./translate's", i, keys[k]);
        cJSON_Delete(want);
    }
    free(beam);
    cJSON_Delete(j);
    /* a line the model cannot read: an error on its entry, the others translated */
    j = translate_ok(port, "{\"text\": [\"abcx\", \"abc\"]}");
    list = cJSON_GetObjectItemCaseSensitive(j, "translations");
    cr_expect(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(list, 0), "error")));
    cr_expect(!cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(list, 1), "error"));
    cJSON_Delete(j);
    /* the page: src/serve/page.html as it is, as HTML */
    Reply r = http(port, "GET", "/", NULL, 0);
    cr_expect_eq(r.status, 200);
    cr_expect(r.head && strstr(r.head, "Content-Type: text/html"), "%s", r.head ? r.head : "");
    size_t page_len;
    char *page = tu_slurp("src/serve/page.html", &page_len);
    cr_expect(page && r.body && !strcmp(page, r.body), "GET / is not src/serve/page.html (%zu bytes against %zu)",
              r.body ? strlen(r.body) : 0, page_len);
    free(page);
    reply_free(&r);
    r = http(port, "GET", "/api/models", NULL, 0);
    cr_expect_eq(r.status, 200);
    cr_expect(r.body && strstr(r.body, "\"name\":\"rev\"") && strstr(r.body, "\"attention\":\"dot\""), "%s", r.body);
    reply_free(&r);
    stop_server(d);
    tu_rm_rf(d);
    free(d);
}

Test(serve, bad_requests_are_4xx_with_a_json_error_and_the_server_goes_on, .timeout = 240) {
    char *d = trained_model_dir();
    int port = start_server(d, "--max-body 2048 --max-sentences 4");
    cr_assert(port > 0, "serve did not start: %s", tu_slurp(tu_path(d, "serve.txt"), NULL));
    const struct {
        const char *body, *want;
    } bad[] = {
        {"{\"text\": [\"abc\"", "not JSON"},
        {"[1, 2]", "JSON object"},
        {"{\"text\": 5}", "a string or an array"},
        {"{\"text\": [\"abc\", 5]}", "[1]: not a string"},
        {"{\"beam\": 2}", "\"text\": missing"},
        {"{\"text\": \"abc\", \"beam\": 0}", "\"beam\": an integer from 1"},
        {"{\"text\": \"abc\", \"beam\": 10000}", "\"beam\": an integer from 1"},
        {"{\"text\": \"abc\", \"beam\": 2.5}", "\"beam\": an integer"},
        {"{\"text\": \"abc\", \"beam\": 2, \"n_best\": 3}", "more than \"beam\""},
        {"{\"text\": \"abc\", \"attention\": 1}", "true or false"},
        {"{\"text\": \"abc\", \"alpha\": -1}", "\"alpha\""},
        {"{\"text\": \"abc\", \"beams\": 2}", "unknown key \"beams\""},
        {"{\"text\": \"abc\", \"text\": [\"abd\"]}", "\"text\" given twice"},
        {"{\"text\": [\"a\", \"b\", \"c\", \"d\", \"a\"]}", "at most 4"},
        {"{\"text\": \"ab\xff\"}", "not valid UTF-8"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        expect_error(http(port, "POST", "/api/translate", bad[i].body, strlen(bad[i].body)), 400, bad[i].want, bad[i].body);
    char big[5000];
    memset(big, ' ', sizeof big);
    expect_error(http(port, "POST", "/api/translate", big, sizeof big), 413, "over 2048 bytes", "a body over the limit");
    expect_error(http(port, "GET", "/nowhere", NULL, 0), 404, "no such path", "an unknown path");
    expect_error(http(port, "GET", "/../../etc/passwd", NULL, 0), 404, "no such path", "a path out of the API");
    Reply r = http(port, "GET", "/api/translate", NULL, 0);
    cr_expect(r.head && strstr(r.head, "Allow: POST"), "%s", r.head ? r.head : "");
    expect_error(r, 405, "takes POST", "GET /api/translate");
    expect_error(http(port, "POST", "/api/models", "{}", 2), 405, "takes GET", "POST /api/models");
    /* still serving */
    r = http(port, "POST", "/api/translate", "{\"text\": \"abc\"}", 15);
    cr_expect_eq(r.status, 200, "%s", r.body ? r.body : "");
    reply_free(&r);
    stop_server(d);
    /* the command line: a host that is no address, a model that is not there, a port in use */
    cr_expect_eq(tu_sh("%s/serve %s/model.bin --host nowhere > /dev/null 2> %s/err.txt", tu_bin(), d, d), 2);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "--host nowhere: expected an IPv4 address"));
    /* 10,000 sentences in one request (60 kB, under the default body limit): refused by count */
    port = start_server(d, "");
    cr_assert(port > 0);
    size_t len;
    char *many = malloc(10000 * 8 + 64);
    len = (size_t)sprintf(many, "{\"text\": [");
    for (int i = 0; i < 10000; i++) len += (size_t)sprintf(many + len, "%s\"abc\"", i ? ", " : "");
    len += (size_t)sprintf(many + len, "]}");
    expect_error(http(port, "POST", "/api/translate", many, len), 400, "10000 sentences; at most 256", "10,000 sentences");
    free(many);
    stop_server(d);
    /* another address than loopback: served, with a warning */
    tu_sh("cd %s && rm -f rc.txt serve.txt; (%s/serve %s/model.bin --host 0.0.0.0 --port 0 > serve.txt 2>&1; echo $? > rc.txt) &", d,
          tu_bin(), d);
    for (int i = 0; i < 200 && !tu_file_has(tu_path(d, "serve.txt"), "listening"); i++)
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    cr_expect(tu_file_has(tu_path(d, "serve.txt"), "warning: 0.0.0.0 is not a loopback address"), "%s",
              tu_slurp(tu_path(d, "serve.txt"), NULL));
    stop_server(d);
    cr_expect_eq(tu_sh("%s/serve %s/missing.bin --port 0 > /dev/null 2> %s/err.txt", tu_bin(), d, d), 1);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "missing.bin"));
    cr_expect_eq(tu_sh("%s/serve --port 99999 %s/model.bin 2> %s/err.txt", tu_bin(), d, d), 2);
    port = start_server(d, "");
    cr_assert(port > 0);
    cr_expect_eq(tu_sh("timeout 20 %s/serve %s/model.bin --port %d > /dev/null 2> %s/err.txt", tu_bin(), d, port, d), 1);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "cannot listen on 127.0.0.1"), "%s", tu_slurp(tu_path(d, "err.txt"), NULL));
    stop_server(d);
    tu_rm_rf(d);
    free(d);
}

/* Concurrent requests: each gets the answer it gets alone, and with --batch-wait the
 * decoding thread serves them in fewer decodings than requests (they share batches). */
#define N_CLIENTS 8
typedef struct Client {
    int port;
    const char *body;
    pthread_barrier_t *go;
    Reply r;
} Client;

static void *client(void *arg) {
    Client *c = arg;
    pthread_barrier_wait(c->go);
    c->r = http(c->port, "POST", "/api/translate", c->body, strlen(c->body));
    return NULL;
}

static long models_count(int port, const char *key) {
    Reply r = http(port, "GET", "/api/models", NULL, 0);
    cJSON *j = cJSON_Parse(r.body ? r.body : "");
    const cJSON *m = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "models"), 0);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, key);
    long n = cJSON_IsNumber(v) ? (long)v->valuedouble : -1;
    cJSON_Delete(j);
    reply_free(&r);
    return n;
}

Test(serve, concurrent_requests_share_decodings_and_get_their_own_answers, .timeout = 240) {
    char *d = trained_model_dir();
    int port = start_server(d, "--batch-wait 300");
    cr_assert(port > 0, "serve did not start: %s", tu_slurp(tu_path(d, "serve.txt"), NULL));
    static const char *bodies[N_CLIENTS] = {
        "{\"text\": [\"abc\", \"dd\", \"abcdabcd\"]}", "{\"text\": [\"bcd\"]}", "{\"text\": [\"aaab\", \"cab\"]}",
        "{\"text\": [\"dcba\", \"bbbb\", \"acbd\"]}", "{\"text\": \"cdcdc\"}", "{\"text\": [\"ab\", \"ba\"]}",
        "{\"text\": [\"dabc\"]}", "{\"text\": [\"ccc\", \"ddda\"]}"};
    char *alone[N_CLIENTS];
    for (int i = 0; i < N_CLIENTS; i++) { /* one by one: the answers to expect */
        Reply r = http(port, "POST", "/api/translate", bodies[i], strlen(bodies[i]));
        cr_assert_eq(r.status, 200);
        cJSON *j = cJSON_Parse(r.body);
        alone[i] = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(j, "translations"));
        cJSON_Delete(j);
        reply_free(&r);
    }
    long before = models_count(port, "decodes");
    cr_expect_eq(before, N_CLIENTS, "one by one: %ld decodings for %d requests", before, N_CLIENTS);
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, N_CLIENTS);
    Client c[N_CLIENTS];
    pthread_t th[N_CLIENTS];
    for (int i = 0; i < N_CLIENTS; i++) {
        c[i] = (Client){port, bodies[i], &go, {0}};
        pthread_create(&th[i], NULL, client, &c[i]);
    }
    for (int i = 0; i < N_CLIENTS; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&go);
    for (int i = 0; i < N_CLIENTS; i++) {
        cr_assert_eq(c[i].r.status, 200, "client %d: %s", i, c[i].r.body ? c[i].r.body : "");
        cJSON *j = cJSON_Parse(c[i].r.body);
        char *got = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(j, "translations"));
        cr_expect_str_eq(got, alone[i], "client %d: together %s, alone %s", i, got, alone[i]);
        free(got);
        free(alone[i]);
        cJSON_Delete(j);
        reply_free(&c[i].r);
    }
    long together = models_count(port, "decodes") - before;
    cr_expect(together >= 1 && together < N_CLIENTS, "%d concurrent requests took %ld decodings", N_CLIENTS, together);
    cr_expect_eq(models_count(port, "requests"), 2 * N_CLIENTS);
    stop_server(d);
    tu_rm_rf(d);
    free(d);
}

/* The page in a real browser (headless Chromium, where it is installed: CI installs it): a
 * link with two sentences translates them on load; the DOM then holds ./translate's outputs
 * and one heatmap cell per attention weight the API gives; a screenshot is kept in
 * build/test-artifacts/serve-page.png. */
Test(serve, the_page_translates_in_a_browser, .timeout = 240) {
    require_chromium();
    char *d = trained_model_dir();
    tu_write(tu_path(d, "in.txt"), "abcd\nbcdaa\n");
    cr_assert_eq(tu_sh("cd %s && %s/translate model.bin --input in.txt > greedy.txt 2>/dev/null", d, tu_bin()), 0);
    int port = start_server(d, "");
    cr_assert(port > 0, "serve did not start: %s", tu_slurp(tu_path(d, "serve.txt"), NULL));
    const char *flags = "--headless --no-sandbox --disable-gpu --virtual-time-budget=20000 --window-size=900,700";
    cr_assert_eq(tu_sh("cd %s && timeout 120 chromium %s --dump-dom 'http://127.0.0.1:%d/?text=abcd%%0Abcdaa' > dom.html 2> chromium.txt",
                       d, flags, port),
                 0, "%s", tu_slurp(tu_path(d, "chromium.txt"), NULL));
    char *dom = tu_slurp(tu_path(d, "dom.html"), NULL), *greedy = tu_slurp(tu_path(d, "greedy.txt"), NULL);
    cr_assert(dom && greedy);
    cr_expect(strstr(dom, "data-done=\"1\""), "the page did not finish translating:\n%s", dom);
    char *save = NULL;
    const char *p = dom;
    for (char *line = strtok_r(greedy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char want[128];
        snprintf(want, sizeof want, "<span class=\"txt\">%s</span>", line);
        const char *at = strstr(p, want);
        cr_expect(at != NULL, "the page does not show \"%s\" (./translate's) in order", line);
        if (at) p = at + 1;
    }
    cJSON *j = translate_ok(port, "{\"text\": [\"abcd\", \"bcdaa\"], \"attention\": true}");
    int weights = answer_weights(j), cells = 0;
    for (const char *q = dom; (q = strstr(q, "<td ")); q++) cells++;
    cr_expect(weights > 0 && cells == weights, "%d heatmap cells on the page, %d weights from the API", cells, weights);
    cJSON_Delete(j);
    /* beam search: its attention is drawn too, the best hypothesis's */
    cr_assert_eq(tu_sh("cd %s && timeout 120 chromium %s --dump-dom 'http://127.0.0.1:%d/?text=abcd&beam=3' > dom3.html 2> chromium.txt",
                       d, flags, port),
                 0);
    char *dom3 = tu_slurp(tu_path(d, "dom3.html"), NULL);
    cJSON *j3 = translate_ok(port, "{\"text\": [\"abcd\"], \"beam\": 3, \"attention\": true}");
    int weights3 = answer_weights(j3), cells3 = 0;
    for (const char *q = dom3 ? dom3 : ""; (q = strstr(q, "<td ")); q++) cells3++;
    cr_expect(dom3 && strstr(dom3, "data-done=\"1\"") && weights3 > 0 && cells3 == weights3,
              "beam 3: %d heatmap cells on the page, %d weights from the API:\n%s", cells3, weights3, dom3);
    cJSON_Delete(j3);
    free(dom3);
    tu_sh("mkdir -p build/test-artifacts && timeout 120 chromium %s --screenshot=build/test-artifacts/serve-page.png "
          "'http://127.0.0.1:%d/?text=abcd%%0Abcdaa' > /dev/null 2>&1",
          flags, port);
    cr_expect(access("build/test-artifacts/serve-page.png", F_OK) == 0, "no screenshot");
    free(dom);
    free(greedy);
    stop_server(d);
    tu_rm_rf(d);
    free(d);
}

/* --runs: the runs below the folder are listed (nested ones too, symlinks not followed), a
 * log is served whole or from a byte on, a run's pictures as they are; every way out of the
 * folder (.., encoded dots, absolute paths, symlinked folders and files, hidden names, kinds
 * of file not served) is a 404, and nothing else than GET is taken. */
Test(serve, runs_are_served_read_only_and_nothing_outside_them, .timeout = 240) {
    char *d = trained_model_dir();
    cr_assert_eq(tu_sh("cd %s && mkdir -p runs/group && cp -r run runs/one && cp -r run runs/group/a-seed1 && "
                       "ln -s %s/run runs/evil && ln -s ../../m.json runs/one/secret.json && mkdir runs/.hidden && "
                       "cp run/log.jsonl runs/.hidden/",
                       d, d),
                 0);
    int port = start_serving(d, false, "");
    cr_assert(port > 0, "serve --runs did not start: %s", tu_slurp(tu_path(d, "serve.txt"), NULL));
    Reply r = http(port, "GET", "/api/runs", NULL, 0);
    cr_assert_eq(r.status, 200);
    cJSON *j = cJSON_Parse(r.body);
    int seen_one = 0, seen_nested = 0, seen_other = 0;
    const cJSON *run;
    cJSON_ArrayForEach(run, cJSON_GetObjectItemCaseSensitive(j, "runs")) {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(run, "name"));
        if (!strcmp(name, "one")) {
            seen_one++;
            cr_expect(cJSON_GetObjectItemCaseSensitive(run, "last_test") != NULL, "one: no test line");
            cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(run, "config"), "name")),
                             "rev");
        } else if (!strcmp(name, "group/a-seed1")) {
            seen_nested++;
        } else {
            seen_other++;
        }
    }
    cr_expect(seen_one == 1 && seen_nested == 1 && seen_other == 0, "runs listed: %s", r.body);
    cJSON_Delete(j);
    reply_free(&r);
    /* the log: whole, and from a byte on */
    size_t log_len;
    char *log = tu_slurp(tu_path(d, "run/log.jsonl"), &log_len);
    r = http(port, "GET", "/api/runs/one/log", NULL, 0);
    cr_expect(r.status == 200 && r.body && !strcmp(r.body, log), "the log differs");
    char want[64];
    snprintf(want, sizeof want, "X-File-Size: %zu", log_len);
    cr_expect(r.head && strstr(r.head, want), "%s", r.head ? r.head : "");
    reply_free(&r);
    r = http(port, "GET", "/api/runs/one/log?from=100", NULL, 0);
    cr_expect(r.status == 200 && r.body && !strcmp(r.body, log + 100), "the log from byte 100 differs");
    reply_free(&r);
    expect_error(http(port, "GET", "/api/runs/one/log?from=x", NULL, 0), 400, "byte offset", "from=x");
    /* a log that grows (a run training): from the old size on, exactly the new lines */
    tu_sh("echo '{\"type\":\"step\",\"epoch\":9,\"step\":99999,\"loss\":0.5}' >> %s/runs/one/log.jsonl", d);
    char from[64];
    snprintf(from, sizeof from, "/api/runs/one/log?from=%zu", log_len);
    r = http(port, "GET", from, NULL, 0);
    cr_expect(r.status == 200 && r.body && !strcmp(r.body, "{\"type\":\"step\",\"epoch\":9,\"step\":99999,\"loss\":0.5}\n"),
              "the new line: %s", r.body ? r.body : "");
    reply_free(&r);
    free(log);
    r = http(port, "GET", "/api/runs/one/attention/epoch01_ex1.png", NULL, 0);
    cr_expect(r.status == 200 && r.body && !strncmp(r.body, "\x89PNG", 4), "attention/: %d", r.status);
    reply_free(&r);
    r = http(port, "GET", "/api/runs/group/a-seed1/files/curves.png", NULL, 0);
    cr_expect(r.status == 200 && r.head && strstr(r.head, "Content-Type: image/png") && r.body && !strncmp(r.body, "\x89PNG", 4),
              "curves.png: %d", r.status);
    reply_free(&r);
    /* ways out */
    const char *out[] = {"/api/runs/../m.json/log",
                         "/api/runs/one/files/../../m.json",
                         "/api/runs/one/files/%2e%2e/%2e%2e/m.json",
                         "/api/runs/%2e%2e/run/log",
                         "/api/runs//etc/log",
                         "/api/runs/evil/log",
                         "/api/runs/evil/files/curves.png",
                         "/api/runs/one/files/secret.json",
                         "/api/runs/one/files/model.bin",
                         "/api/runs/one/files//etc/passwd",
                         "/api/runs/.hidden/log",
                         "/api/runs/one",
                         "/api/runs/nothing/log"};
    for (size_t i = 0; i < sizeof out / sizeof *out; i++) expect_error(http(port, "GET", out[i], NULL, 0), 404, "", out[i]);
    expect_error(http(port, "POST", "/api/runs", "{}", 2), 405, "takes GET", "POST /api/runs");
    expect_error(http(port, "POST", "/api/translate", "{\"text\": \"abc\"}", 15), 404, "no model", "translate without a model");
    /* a run's model, loaded on its first request: ./translate's output */
    cr_assert_eq(tu_sh("cd %s && echo abcd | %s/translate run/model.bin > want.txt 2>/dev/null", d, tu_bin()), 0);
    char *want_text = tu_slurp(tu_path(d, "want.txt"), NULL);
    want_text[strcspn(want_text, "\n")] = '\0';
    const char *names[] = {"one", "group/a-seed1", "one"};
    for (int i = 0; i < 3; i++) {
        char body[128];
        snprintf(body, sizeof body, "{\"model\": \"%s\", \"text\": \"abcd\"}", names[i]);
        r = http(port, "POST", "/api/translate", body, strlen(body));
        cr_expect_eq(r.status, 200, "%s: %s", names[i], r.body ? r.body : "");
        j = cJSON_Parse(r.body ? r.body : "");
        const char *got = cJSON_GetStringValue(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "translations"), 0), "text"));
        cr_expect(got && !strcmp(got, want_text), "%s: \"%s\", ./translate \"%s\"", names[i], got ? got : "", want_text);
        cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "model")), names[i]);
        cJSON_Delete(j);
        reply_free(&r);
    }
    free(want_text);
    r = http(port, "GET", "/api/models", NULL, 0);
    j = cJSON_Parse(r.body ? r.body : "");
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "models")), 2, "models loaded: %s", r.body);
    const cJSON *metrics = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "models"), 1), "metrics");
    cr_expect(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(metrics, "test_exact_match")), "a run's model's metrics: %s", r.body);
    cJSON_Delete(j);
    reply_free(&r);
    const struct {
        const char *body, *want;
        int status;
    } bad_model[] = {{"{\"model\": \"nothing\", \"text\": \"a\"}", "no run \"nothing\"", 404},
                     {"{\"model\": \"../run\", \"text\": \"a\"}", "a run's name", 400},
                     {"{\"model\": \"evil\", \"text\": \"a\"}", "no run \"evil\"", 404},
                     {"{\"model\": \"group\", \"text\": \"a\"}", "no run \"group\"", 404},
                     {"{\"model\": 3, \"text\": \"a\"}", "a run's name", 400}};
    for (size_t i = 0; i < sizeof bad_model / sizeof *bad_model; i++)
        expect_error(http(port, "POST", "/api/translate", bad_model[i].body, strlen(bad_model[i].body)), bad_model[i].status,
                     bad_model[i].want, bad_model[i].body);
    stop_server(d);
    cr_expect_eq(tu_sh("%s/serve --runs %s/m.json --port 0 > /dev/null 2> %s/err.txt", tu_bin(), d, d), 1);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "not a folder"));
    cr_expect_eq(tu_sh("%s/serve > /dev/null 2> %s/err.txt", tu_bin(), d), 2);
    tu_rm_rf(d);
    free(d);
}

/* The runs part of the page in headless Chromium: /?run=one draws the run's learning curve
 * (one point per logged step) and shows the last epoch's attention pictures. */
Test(serve, the_page_shows_a_run_in_a_browser, .timeout = 240) {
    require_chromium();
    char *d = trained_model_dir();
    cr_assert_eq(tu_sh("cd %s && mkdir runs && cp -r run runs/one", d), 0);
    int port = start_serving(d, false, "");
    cr_assert(port > 0);
    cr_assert_eq(tu_sh("cd %s && timeout 120 chromium --headless --no-sandbox --disable-gpu --virtual-time-budget=8000 "
                       "--dump-dom 'http://127.0.0.1:%d/?run=one' > dom.html 2> chromium.txt",
                       d, port),
                 0);
    char *dom = tu_slurp(tu_path(d, "dom.html"), NULL), *log = tu_slurp(tu_path(d, "run/log.jsonl"), NULL);
    cr_assert(dom && log);
    cr_expect(strstr(dom, "data-run-done=\"1\""), "the page did not read the log");
    int steps = 0, points = 1, epochs = 0;
    for (const char *q = log; (q = strstr(q, "\"type\":\"step\"")); q++) steps++;
    for (const char *q = log; (q = strstr(q, "\"type\":\"epoch\"")); q++) epochs++;
    const char *train = strstr(dom, "class=\"train\"");
    const char *pts = train ? strstr(dom, "points=\"") : NULL; /* the train line is the first polyline */
    for (const char *q = pts ? pts + 8 : NULL; q && *q && *q != '"'; q++) points += *q == ' ';
    cr_expect(pts && points == steps, "the curve has %d points, the log %d steps", points, steps);
    char want[128];
    snprintf(want, sizeof want, "src=\"/api/runs/one/files/attention/epoch%02d_ex1.png\"", epochs);
    cr_expect(strstr(dom, want), "the last epoch's attention (%s) is not shown", want);
    /* the axes say what they measure and carry values (they once had neither): the x axis
     * ends at the last logged step */
    cr_expect(strstr(dom, "class=\"axis-label x\">step</text>") && strstr(dom, "class=\"axis-label y\">loss"), "axis labels:\n%s", dom);
    int ticks_x = 0, ticks_y = 0;
    for (const char *q = dom; (q = strstr(q, "class=\"tick x\">")); q++) ticks_x++;
    for (const char *q = dom; (q = strstr(q, "class=\"tick y\">")); q++) ticks_y++;
    cr_expect(ticks_x == 3 && ticks_y == 3, "%d x and %d y values on the axes", ticks_x, ticks_y);
    long last_step = 0;
    for (const char *q = log; (q = strstr(q, "\"step\":")); q++) {
        long v = atol(q + 7);
        if (v > last_step) last_step = v;
    }
    snprintf(want, sizeof want, "class=\"tick x\">%ld</text>", last_step);
    cr_expect(strstr(dom, want), "the x axis does not end at step %ld", last_step);
    free(dom);
    free(log);
    stop_server(d);
    tu_rm_rf(d);
    free(d);
}

/* SIGTERM while a request is being served: the server stops taking connections, answers the
 * request in flight (held 1.5 s by --batch-wait) and exits 0. A client that opens a connection
 * and sends half a request is cut off after --timeout. */
typedef struct Late {
    int port;
    Reply r;
} Late;

static void *late_request(void *arg) {
    Late *l = arg;
    l->r = http(l->port, "POST", "/api/translate", "{\"text\": \"abc\"}", 15);
    return NULL;
}

Test(serve, a_stop_finishes_the_requests_in_flight_and_slow_clients_time_out, .timeout = 240) {
    char *d = trained_model_dir();
    int port = start_server(d, "--batch-wait 1500 --timeout 1");
    cr_assert(port > 0, "serve did not start: %s", tu_slurp(tu_path(d, "serve.txt"), NULL));
    /* half a request, then silence: closed by the server after about a second */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    const char *half = "POST /api/translate HTTP/1.1\r\nHost: x\r\n";
    cr_assert_eq(write(fd, half, strlen(half)), (ssize_t)strlen(half));
    struct timeval tv = {10, 0}; /* the test's own limit, far above --timeout */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[256];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ssize_t k = read(fd, buf, sizeof buf);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double waited = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    cr_expect(k <= 0 && waited < 9, "a silent client was not cut off (read %zd after %.1f s)", k, waited);
    close(fd);
    /* a request in flight when SIGTERM comes */
    Late l = {port, {0}};
    pthread_t th;
    pthread_create(&th, NULL, late_request, &l);
    nanosleep(&(struct timespec){0, 500 * 1000 * 1000}, NULL);
    cr_assert_eq(tu_sh("pkill -TERM -f '^%s/serve .*%s/'", tu_bin(), d), 0);
    pthread_join(th, NULL);
    cr_expect_eq(l.r.status, 200, "the request in flight: %d %s", l.r.status, l.r.body ? l.r.body : "");
    cr_expect(l.r.body && strstr(l.r.body, "\"translations\""));
    reply_free(&l.r);
    stop_server(d); /* waits for the exit: 0, "serve: stopped" */
    tu_rm_rf(d);
    free(d);
}

/* Models with several heads: the answer carries every layer's every head ("layers"), each a
 * distribution per output row, and "weights" is the last layer's heads' mean; for a
 * Transformer (2 decoder layers, 2 heads) and a multi-head RNN (1 layer, 3 heads). */
Test(serve, heads_and_layers_of_multi_head_models, .timeout = 240) {
    const char *models[2] = {"\"model\": {\"type\": \"transformer\", \"layers\": 2, \"d_model\": 16, \"heads\": 2, \"ff\": 32, "
                             "\"dropout\": 0.0}",
                             "\"model\": {\"cell\": \"gru\", \"embedding\": 12, \"encoder_hidden\": 12, \"decoder_hidden\": 12, "
                             "\"attention\": \"multihead\", \"heads\": 3, \"kq\": 12, \"dropout\": 0.0}"};
    const int want_layers[2] = {2, 1}, want_heads[2] = {2, 3};
    for (int k = 0; k < 2; k++) {
        char *d = tu_tmpdir();
        tu_write(tu_path(d, "m.json"),
                 "{\"name\": \"h\", \"task\": {\"type\": \"reverse\", \"alphabet\": \"abcd\", \"min_len\": 3, \"max_len\": 6, "
                 "\"train_size\": 300, \"valid_size\": 20, \"test_size\": 20}, %s, \"train\": {\"epochs\": 1, \"batch_size\": 32, "
                 "\"threads\": 1}}",
                 models[k]);
        cr_assert_eq(tu_sh("cd %s && %s/train --config m.json --out run > train.txt 2>&1 && cp run/model.bin model.bin", d, tu_bin()), 0,
                     "%s", tu_slurp(tu_path(d, "train.txt"), NULL));
        int port = start_server(d, "");
        cr_assert(port > 0, "serve did not start: %s", tu_slurp(tu_path(d, "serve.txt"), NULL));
        cJSON *j = translate_ok(port, "{\"text\": [\"abcd\", \"dbca\"], \"attention\": true}");
        const cJSON *t;
        cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(j, "translations")) {
            const cJSON *a = cJSON_GetObjectItemCaseSensitive(t, "attention"), *w = cJSON_GetObjectItemCaseSensitive(a, "weights"),
                        *layers = cJSON_GetObjectItemCaseSensitive(a, "layers");
            cr_assert_eq(cJSON_GetArraySize(layers), want_layers[k], "model %d", k);
            int rows = cJSON_GetArraySize(w), cols = cJSON_GetArraySize(cJSON_GetArrayItem(w, 0));
            const cJSON *last = cJSON_GetArrayItem(layers, want_layers[k] - 1), *layer;
            cJSON_ArrayForEach(layer, layers) {
                cr_assert_eq(cJSON_GetArraySize(layer), want_heads[k]);
                const cJSON *head;
                cJSON_ArrayForEach(head, layer) {
                    cr_assert_eq(cJSON_GetArraySize(head), rows);
                    for (int i = 0; i < rows; i++) {
                        double sum = 0;
                        for (int c = 0; c < cols; c++) sum += cJSON_GetArrayItem(cJSON_GetArrayItem(head, i), c)->valuedouble;
                        cr_expect_lt(fabs(sum - 1), 1e-5, "model %d: a head's row sums to %g", k, sum);
                    }
                }
            }
            double worst = 0;
            for (int i = 0; i < rows; i++)
                for (int c = 0; c < cols; c++) {
                    double mean = 0;
                    for (int h = 0; h < want_heads[k]; h++)
                        mean += cJSON_GetArrayItem(cJSON_GetArrayItem(cJSON_GetArrayItem(last, h), i), c)->valuedouble;
                    mean /= want_heads[k];
                    worst = fmax(worst, fabs(mean - cJSON_GetArrayItem(cJSON_GetArrayItem(w, i), c)->valuedouble));
                }
            cr_expect_lt(worst, 1e-5, "model %d: the weights are not the last layer's heads' mean (off by %g)", k, worst);
        }
        cJSON_Delete(j);
        stop_server(d);
        tu_rm_rf(d);
        free(d);
    }
}

/* The page as a person uses it, in headless Chromium driven over DevTools: type two sentences,
 * set the beam, click translate, read what is shown (./translate's outputs; with beam search the
 * best hypothesis's attention, a cell a weight of ./translate --beam 3 --attention's), back to
 * greedy (the attention tables, no note), then pick the run in its list and read the chart (axis
 * names and values, once missing) and the attention pictures. */
Test(serve, the_page_is_clicked_through_in_a_browser, .timeout = 240) {
    char *d = trained_model_dir();
    cr_assert_eq(tu_sh("cd %s && mkdir runs && cp -r run runs/one && printf 'abcd\\nbcdaa\\n' > in.txt && "
                       "%s/translate model.bin --input in.txt --beam 3 --attention beam.jsonl > beam.txt && "
                       "%s/translate model.bin --input in.txt > greedy.txt",
                       d, tu_bin(), tu_bin()),
                 0);
    char args[600];
    snprintf(args, sizeof args, "%s/model.bin --runs %s/runs", d, d); /* d in the command line: stop_server finds it */
    int port = serve_start(d, args);
    cr_assert(port > 0);
    Browser b;
    char why[512];
    if (!browser_open(&b, why, sizeof why)) {
        stop_server(d);
        tu_rm_rf(d);
        TU_SKIP("%s: the page is not clicked through", why);
    }
    char js[256];
    snprintf(js, sizeof js, "location.href = 'http://127.0.0.1:%d/', true", port);
    free(browser_eval(&b, js));
    cr_assert(browser_wait(&b, "document.readyState === 'complete' && $('model').textContent.includes('rev')", 30), "the page did not load");
    const char *outs = "[...document.querySelectorAll('#out .txt')].map((e) => e.innerText).join('\\n') + '\\n'";
    /* beam 3 */
    cr_assert(browser_type(&b, "#text", "abcd\nbcdaa"));
    cr_assert(browser_type(&b, "#beam", "3"));
    cr_assert(browser_click(&b, "#translate"));
    cr_assert(browser_wait(&b, "document.body.dataset.done === '1'", 30), "no translation after the click");
    char *shown = browser_eval(&b, outs), *want = tu_slurp(tu_path(d, "beam.txt"), NULL);
    cr_expect_str_eq(shown, want, "beam 3: the page shows what ./translate --beam 3 writes");
    free(shown), free(want);
    char *att = tu_slurp(tu_path(d, "beam.jsonl"), NULL), *save = NULL, want_cells[16];
    int weights = 0;
    for (char *l = strtok_r(att, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        cJSON *a = cJSON_Parse(l);
        const cJSON *row;
        cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(a, "weights")) weights += cJSON_GetArraySize(row);
        cJSON_Delete(a);
    }
    free(att);
    snprintf(want_cells, sizeof want_cells, "%d", weights);
    char *cells = browser_eval(&b, "String(document.querySelectorAll('#heatmaps td').length)");
    cr_expect(weights > 0 && !strcmp(cells, want_cells), "beam 3: %s heatmap cells, ./translate --beam 3 --attention gives %d weights",
              cells, weights);
    free(cells);
    /* back to greedy: the attention tables */
    free(browser_eval(&b, "delete document.body.dataset.done, true"));
    cr_assert(browser_type(&b, "#beam", "1"));
    cr_assert(browser_click(&b, "#translate"));
    cr_assert(browser_wait(&b, "document.body.dataset.done === '1'", 30));
    shown = browser_eval(&b, outs), want = tu_slurp(tu_path(d, "greedy.txt"), NULL);
    cr_expect_str_eq(shown, want, "greedy: the page shows what ./translate writes");
    free(shown), free(want);
    char *heat = browser_eval(&b, "$('heatmaps').innerText");
    cells = browser_eval(&b, "String(document.querySelectorAll('#heatmaps td').length)");
    cr_expect(!strstr(heat, "No attention") && atoi(cells) > 0, "greedy: %s attention cells, \"%.200s\"", cells, heat);
    free(heat), free(cells);
    /* the run: chosen in its list, its chart read as text */
    free(browser_eval(&b, "$('run').value = 'one', $('run').dispatchEvent(new Event('change')), delete document.body.dataset.runDone, true"));
    cr_assert(browser_wait(&b, "document.body.dataset.runDone === '1' && !!document.querySelector('#curve svg')", 30));
    char *chart = browser_eval(&b, "[...document.querySelectorAll('#curve text')].map((t) => t.textContent).join('|')");
    cr_expect(strstr(chart, "step") && strstr(chart, "loss (train blue, validation orange)") && strstr(chart, "|0|"), "the chart's text: %s", chart);
    free(chart);
    cr_expect(browser_wait(&b, "[...document.querySelectorAll('#epoch-imgs img')].some((i) => i.complete && i.naturalWidth > 0)", 30),
              "no attention picture shown for the run");
    browser_close(&b);
    stop_server(d);
    tu_rm_rf(d);
    free(d);
}
