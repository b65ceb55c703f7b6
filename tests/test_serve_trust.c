/* test_serve_trust.c — ./serve against hostile runs folders and clients: no symbolic link in
 * a run leads outside the runs folder (on every route), a run's model is its file as it is now
 * (replaced, truncated, deleted; the least recently used evicted), slow and half-open clients
 * do not hold the server, HTTP is read strictly, and a line with a NUL gets its own error. */
#include "s2s/server.h"
#include "serve_client.h"
#include "test_util.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Raw bytes as a request; the answer's status (0: none) and, when body is not NULL, its bytes. */
static int raw_http(int port, const char *req, size_t len, char **body) {
    int fd = serve_connect(port, 20);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, req, len), (ssize_t)len);
    char buf[65536];
    size_t n = 0;
    ssize_t k;
    while (n < sizeof buf - 1 && (k = read(fd, buf + n, sizeof buf - 1 - n)) > 0) n += (size_t)k;
    close(fd);
    buf[n] = '\0';
    if (body) {
        char *split = strstr(buf, "\r\n\r\n");
        *body = strdup(split ? split + 4 : "");
    }
    return strncmp(buf, "HTTP/1.1 ", 9) == 0 ? atoi(buf + 9) : 0;
}

Test(serve_trust, no_link_in_a_run_leads_outside_the_runs_folder, .timeout = 240) {
    char *d = trained_model_dir();
    cr_assert_eq(tu_sh("cd %s && mkdir -p runs outdir && "
                       "cp run/log.jsonl outside.jsonl && echo '{\"type\":\"test\",\"secret\":\"SECRET-LOG\"}' >> outside.jsonl && "
                       "echo '{\"name\": \"SECRET-CONFIG\"}' > outside.json && cp run/curves.png outdir/ && "
                       "cp run/attention/* outdir/ && "
                       "for r in one log conf model att pic fifo rel; do cp -r run runs/$r; done && "
                       "ln -sf ../../outside.jsonl runs/log/log.jsonl.new && mv runs/log/log.jsonl.new runs/log/log.jsonl && "
                       "rm runs/conf/config.json && ln -s ../../outside.json runs/conf/config.json && "
                       "rm runs/model/model.bin && ln -s ../../model.bin runs/model/model.bin && "
                       "rm -r runs/att/attention && ln -s ../../outdir runs/att/attention && "
                       "rm runs/pic/curves.png && ln -s ../../outdir/curves.png runs/pic/curves.png && "
                       "rm runs/fifo/config.json && mkfifo runs/fifo/config.json && "
                       "rm runs/rel/log.jsonl && ln -s ../one/log.jsonl runs/rel/log.jsonl",
                       d),
                 0);
    int port = start_serving(d, false, "");
    cr_assert(port > 0, "serve --runs did not start: %s", tu_slurp(tu_path(d, "serve.txt"), NULL));
    /* the list: no run whose log is a link, no config read through a link (nor a FIFO: no hang) */
    Reply r = http(port, "GET", "/api/runs", NULL, 0);
    cr_assert_eq(r.status, 200);
    cr_expect(!strstr(r.body, "SECRET"), "GET /api/runs shows an outside file: %s", r.body);
    cJSON *j = cJSON_Parse(r.body);
    int listed = 0;
    const cJSON *run;
    cJSON_ArrayForEach(run, cJSON_GetObjectItemCaseSensitive(j, "runs")) {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(run, "name"));
        listed++;
        cr_expect(strcmp(name, "log") && strcmp(name, "rel"), "run \"%s\" listed: its log.jsonl is a link", name);
        if (!strcmp(name, "conf") || !strcmp(name, "fifo"))
            cr_expect(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(run, "config")), "%s: a config through a link or a FIFO", name);
        if (!strcmp(name, "model")) cr_expect(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(run, "has_model")));
    }
    cr_expect_eq(listed, 6, "%s", r.body);
    cJSON_Delete(j);
    reply_free(&r);
    /* every route: a link is as absent as a missing file */
    const char *gone[] = {"/api/runs/log/log", "/api/runs/rel/log", "/api/runs/att/attention/epoch01_ex1.png",
                          "/api/runs/att/files/attention/epoch01_ex1.png", "/api/runs/pic/files/curves.png",
                          "/api/runs/log/files", "/api/runs/conf/files/config.json"};
    for (size_t i = 0; i < sizeof gone / sizeof *gone; i++) {
        r = http(port, "GET", gone[i], NULL, 0);
        cr_expect_eq(r.status, 404, "%s: %d", gone[i], r.status);
        cr_expect(!r.body || !strstr(r.body, "SECRET"), "%s: %s", gone[i], r.body);
        reply_free(&r);
    }
    r = http(port, "GET", "/api/runs/pic/files", NULL, 0);
    cr_expect(r.status == 200 && r.body && !strstr(r.body, "curves.png") && strstr(r.body, "test.hyp"), "%s", r.body);
    reply_free(&r);
    r = http(port, "GET", "/api/runs/att/files", NULL, 0);
    cr_expect(r.status == 200 && r.body && !strstr(r.body, "attention/"), "%s", r.body);
    reply_free(&r);
    expect_error(http(port, "POST", "/api/translate", "{\"model\": \"model\", \"text\": \"abc\"}", 34), 404, "has no model.bin",
                 "a model.bin that is a link");
    /* the same run's files where they are real */
    r = http(port, "GET", "/api/runs/one/log", NULL, 0);
    cr_expect_eq(r.status, 200);
    reply_free(&r);
    j = translate_ok(port, "{\"model\": \"one\", \"text\": \"abc\"}");
    cJSON_Delete(j);
    stop_server(d);
    tu_rm_rf(d);
    free(d);
}

/* ./translate's output for one line with model file m (in d). */
static char *translate_line(const char *d, const char *m, const char *line) {
    cr_assert_eq(tu_sh("cd %s && echo %s | %s/translate %s > want.txt 2>/dev/null", d, line, tu_bin(), m), 0);
    char *t = tu_slurp(tu_path(d, "want.txt"), NULL);
    t[strcspn(t, "\n")] = '\0';
    return t;
}

static char *served_text(int port, const char *run, const char *line) {
    char body[256];
    snprintf(body, sizeof body, "{\"model\": \"%s\", \"text\": \"%s\"}", run, line);
    cJSON *j = translate_ok(port, body);
    const char *t = cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "translations"), 0), "text"));
    char *out = strdup(t ? t : "(none)");
    cJSON_Delete(j);
    return out;
}

Test(serve_trust, a_run_model_is_its_file_as_it_is_now, .timeout = 300) {
    char *d = trained_model_dir();
    /* a second model, another size and name: its answers and its config tell it apart */
    char *cfg2 = strdup(MODEL_CONFIG);
    char *p = strstr(cfg2, "\"rev\"");
    memcpy(p, "\"re2\"", 5);
    p = strstr(cfg2, "\"epochs\": 3");
    p[10] = '1';
    tu_write(tu_path(d, "m2.json"), "%s", cfg2);
    free(cfg2);
    cr_assert_eq(tu_sh("cd %s && %s/train --config m2.json --out run2 --set seed=7 > /dev/null 2>&1 && mkdir runs && cp -r run runs/one",
                       d, tu_bin()),
                 0);
    int port = start_serving(d, false, "");
    cr_assert(port > 0);
    const char *lines[] = {"abcd", "dcbaab", "aabbccdd", "cab"};
    for (int i = 0; i < 4; i++) {
        char *want = translate_line(d, "run/model.bin", lines[i]), *got = served_text(port, "one", lines[i]);
        cr_expect_str_eq(got, want, "before: %s", lines[i]);
        free(want), free(got);
    }
    /* replaced as training replaces it (a rename): the next request decodes with the new file */
    cr_assert_eq(tu_sh("cd %s && cp run2/model.bin runs/one/model.bin.new && mv runs/one/model.bin.new runs/one/model.bin", d), 0);
    for (int i = 0; i < 4; i++) {
        char *want = translate_line(d, "run2/model.bin", lines[i]), *got = served_text(port, "one", lines[i]);
        cr_expect_str_eq(got, want, "after the replacement: %s", lines[i]);
        free(want), free(got);
    }
    Reply r = http(port, "GET", "/api/models", NULL, 0);
    cr_expect(r.body && strstr(r.body, "\"name\":\"re2\"") && !strstr(r.body, "\"name\":\"rev\""), "%s", r.body);
    reply_free(&r);
    /* cut short: refused, naming the file; the earlier model is not served in its place */
    cr_assert_eq(tu_sh("cd %s && head -c 3000 run2/model.bin > runs/one/model.bin", d), 0);
    expect_error(http(port, "POST", "/api/translate", "{\"model\": \"one\", \"text\": \"abc\"}", 32), 500,
                 "run \"one\" cannot be loaded: its file is damaged", "truncated");
    r = http(port, "GET", "/api/models", NULL, 0);
    cr_expect(r.body && !strstr(r.body, "\"one\""), "a truncated model is still held: %s", r.body);
    reply_free(&r);
    cr_assert_eq(tu_sh("rm %s/runs/one/model.bin", d), 0);
    expect_error(http(port, "POST", "/api/translate", "{\"model\": \"one\", \"text\": \"abc\"}", 32), 404, "has no model.bin", "deleted");
    /* more runs than the server holds: each answered, the least recently used evicted */
    cr_assert_eq(tu_sh("cd %s && for i in 0 1 2 3 4 5 6 7 8 9 10; do cp -r run runs/r$i; done", d), 0);
    char *want = translate_line(d, "run/model.bin", "abcd");
    for (int round = 0; round < 2; round++)
        for (int i = 0; i <= 10; i++) {
            char name[16];
            snprintf(name, sizeof name, "r%d", i);
            char *got = served_text(port, name, "abcd");
            cr_expect_str_eq(got, want, "%s", name);
            free(got);
        }
    free(want);
    r = http(port, "GET", "/api/models", NULL, 0);
    cJSON *j = cJSON_Parse(r.body ? r.body : "");
    int held = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "models"));
    cr_expect(held >= 1 && held <= 8, "models held: %d", held);
    cr_expect(strstr(r.body, "\"r10\"") != NULL, "the last used is held: %s", r.body);
    cJSON_Delete(j);
    reply_free(&r);
    stop_server(d);
    tu_rm_rf(d);
    free(d);
}

typedef struct Timed {
    int port;
    double worst;
    int failed;
} Timed;

static void *normal_requests(void *arg) {
    Timed *t = arg;
    for (int i = 0; i < 20; i++) {
        double t0 = now_s();
        Reply r = http(t->port, "POST", "/api/translate", "{\"text\": \"abcd\"}", 16);
        double dt = now_s() - t0;
        if (r.status != 200) t->failed++;
        if (dt > t->worst) t->worst = dt;
        reply_free(&r);
    }
    return NULL;
}

/* The load test: 300 half-sent requests and a request trickled a byte at a time beside normal
 * requests. Before, the half-sent ones held every slot (normal requests waited > 10 s) and the
 * trickled one was answered long after --timeout. */
Test(serve_trust, slow_and_half_open_clients_do_not_hold_the_server, .timeout = 240) {
    char *d = trained_model_dir();
    int port = start_server(d, "--timeout 6");
    cr_assert(port > 0);
    Timed base = {port, 0, 0};
    normal_requests(&base); /* the usual time */
    cr_assert_eq(base.failed, 0);
    int half[300];
    const char *head = "POST /api/translate HTTP/1.1\r\nHost: x\r\nContent-Length: 16\r\n";
    for (int i = 0; i < 300; i++) {
        half[i] = serve_connect(port, 20);
        if (half[i] >= 0 && write(half[i], head, strlen(head)) < 0) {
        }
    }
    Timed t = {port, 0, 0};
    normal_requests(&t);
    cr_expect_eq(t.failed, 0, "%d of 20 normal requests failed beside 300 half-sent ones", t.failed);
    cr_expect_lt(t.worst, 2.0, "a normal request took %.2f s beside 300 half-sent ones (alone: %.3f s at worst)", t.worst, base.worst);
    /* a request trickled a byte every 0.4 s (33 s for all of it): cut off at the deadline (6 s), never answered */
    int fd = serve_connect(port, 20);
    cr_assert_geq(fd, 0);
    const char *req = "POST /api/translate HTTP/1.1\r\nHost: x\r\nContent-Length: 16\r\n\r\n{\"text\": \"abcd\"}";
    double t0 = now_s();
    bool cut = false;
    for (size_t i = 0; i < strlen(req) && now_s() - t0 < 20; i++) {
        if (send(fd, req + i, 1, MSG_NOSIGNAL) != 1) {
            cut = true;
            break;
        }
        nanosleep(&(struct timespec){0, 400 * 1000 * 1000}, NULL);
    }
    char buf[256];
    ssize_t k = read(fd, buf, sizeof buf - 1);
    double waited = now_s() - t0;
    cr_expect((cut || k <= 0) && waited < 12, "a trickled request was %s after %.1f s", k > 0 ? "answered" : "kept", waited);
    close(fd);
    for (int i = 0; i < 300; i++)
        if (half[i] >= 0) close(half[i]);
    Timed after = {port, 0, 0};
    normal_requests(&after);
    cr_expect_eq(after.failed, 0);
    stop_server(d);
    tu_rm_rf(d);
    free(d);
}

Test(serve_trust, http_is_read_strictly_and_a_nul_is_a_line_error, .timeout = 240) {
    char *d = trained_model_dir();
    cr_assert_eq(tu_sh("cd %s && mkdir runs && cp -r run runs/one", d), 0);
    char args[600];
    snprintf(args, sizeof args, "%s/model.bin --runs %s/runs", d, d); /* d in the command line: stop_server finds it */
    int port = serve_start(d, args);
    cr_assert(port > 0);
    const struct {
        const char *req;
        int status;
        const char *want;
    } cases[] = {
        {"POST /api/translate HTTP/1.1\r\nHost: x\r\nContent-Length: 16\r\nContent-Length: 5\r\n\r\n{\"text\": \"abcd\"}", 400, "twice"},
        {"POST /api/translate HTTP/1.1\r\nHost: x\r\nContent-Length: 16\r\nContent-Length: 16\r\n\r\n{\"text\": \"abcd\"}", 400, "twice"},
        {"POST /api/translate HTTP/1.1\r\nHost: x\r\nContent-Length: 16\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n{\"text\": \"abcd\"}\r\n0\r\n\r\n",
         400, "Transfer-Encoding"},
        {"POST /api/translate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nabc", 411, "Content-Length"},
        {"GET /api/runs/one/log?from=-5 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 400, "byte offset"},
        {"GET /api/runs/one/log?from=99999999999999999999 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 400, "byte offset"},
        {"GET /api/runs/one/log?from=+5 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 400, "byte offset"},
        {"GET /api/runs/one/log?from= HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 400, "byte offset"},
        {"POST /api/translate HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 19\r\n\r\n{\"text\": \"a\\ud800\"}", 400,
         "surrogate \\\\ud800"},
        {"POST /api/translate HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 21\r\n\r\n{\"text\": [\"\\udc00a\"]}", 400,
         "surrogate \\\\udc00"},
        {"HEAD / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 200, NULL},
        {"HEAD /api/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 200, NULL},
        {"GET /api/runs/one/log?from=100 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 200, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *body;
        int st = raw_http(port, cases[i].req, strlen(cases[i].req), &body);
        cr_expect_eq(st, cases[i].status, "case %zu: %d %s", i, st, body);
        if (cases[i].want) cr_expect(strstr(body, cases[i].want) != NULL, "case %zu: %s, wanted \"%s\"", i, body, cases[i].want);
        if (!strncmp(cases[i].req, "HEAD", 4)) cr_expect_str_eq(body, "", "HEAD: no body");
        free(body);
    }
    /* a NUL in a line: that line's error, the others translated; an escaped backslash is no NUL */
    char *want = translate_line(d, "model.bin", "abcd");
    cJSON *j = translate_ok(port, "{\"text\": [\"ab\\u0000cd\", \"abcd\", \"ab\\\\u0000\"]}");
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(j, "translations");
    const char *e0 = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(list, 0), "error"));
    cr_expect(e0 && strstr(e0, "NUL"), "line 0: %s", e0 ? e0 : "no error: the line was cut at the NUL and translated");
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(list, 1), "text")), want);
    const char *e2 = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(list, 2), "error"));
    cr_expect(e2 && !strstr(e2, "NUL"), "line 2 (a backslash, then u0000): %s", e2 ? e2 : "(none)");
    cJSON_Delete(j);
    free(want);
    cr_expect(serve_check_request("{\"text\": \"a\\u0000\"}", 19, 4, (char[64]){0}, 64), "a NUL is the line's error, not the request's");
    stop_server(d);
    /* an address that is not this machine's: one message, serve's own */
    cr_expect_eq(tu_sh("%s/serve %s/model.bin --host 192.0.2.1 --port 0 > /dev/null 2> %s/err.txt", tu_bin(), d, d), 1);
    char *err = tu_slurp(tu_path(d, "err.txt"), NULL);
    cr_expect(err && strstr(err, "serve: cannot listen on 192.0.2.1") && !strstr(err, "Failed to bind"), "%s", err);
    int lines = 0;
    for (const char *q = err ? err : ""; *q; q++) lines += *q == '\n';
    cr_expect_eq(lines, 1, "one line: %s", err);
    free(err);
    tu_rm_rf(d);
    free(d);
}
