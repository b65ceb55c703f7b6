/* serve_client.c — what the ./serve tests share: a plain-socket HTTP client, ./serve started
 * in the background on a free port and stopped with SIGTERM, a small trained reversal model. */
#include "serve_client.h"
#include "test_util.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

const char *const MODEL_CONFIG =
    "{\"name\": \"rev\", \"seed\": 1, \"task\": {\"type\": \"reverse\", \"alphabet\": \"abcd\", \"min_len\": 3, \"max_len\": 8, "
    "\"train_size\": 3000, \"valid_size\": 50, \"test_size\": 50}, \"model\": {\"cell\": \"gru\", \"embedding\": 16, "
    "\"encoder_hidden\": 32, \"decoder_hidden\": 32, \"attention\": \"dot\", \"combine\": \"luong\", \"dropout\": 0.0}, "
    "\"train\": {\"epochs\": 3, \"batch_size\": 32, \"lr\": 0.01, \"threads\": 1}}";

/* One request on its own connection (Connection: close); status 0 when no answer came. */
Reply http(int port, const char *method, const char *path, const char *body, size_t body_len) {
    Reply r = {0};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return r;
    }
    char head[512];
    int n = snprintf(head, sizeof head,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n",
                     method, path, body ? body_len : 0);
    ssize_t w = write(fd, head, (size_t)n);
    for (size_t off = 0; body && w >= 0 && off < body_len; off += (size_t)w)
        if ((w = write(fd, body + off, body_len - off)) <= 0) break; /* the server may close early (413) */
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    ssize_t k;
    while ((k = read(fd, buf + len, cap - len - 1)) > 0) {
        len += (size_t)k;
        if (len + 1 == cap) buf = realloc(buf, cap *= 2);
    }
    close(fd);
    buf[len] = '\0';
    char *split = strstr(buf, "\r\n\r\n");
    if (strncmp(buf, "HTTP/1.1 ", 9) == 0 && split) {
        r.status = atoi(buf + 9);
        *split = '\0';
        r.head = strdup(buf);
        r.body = strdup(split + 4);
    }
    free(buf);
    return r;
}

void reply_free(Reply *r) {
    free(r->head);
    free(r->body);
}

/* POST /api/translate that must succeed: its answer parsed. */
cJSON *translate_ok(int port, const char *req) {
    Reply r = http(port, "POST", "/api/translate", req, strlen(req));
    cr_assert_eq(r.status, 200, "%s: %d %s", req, r.status, r.body ? r.body : "");
    cJSON *j = cJSON_Parse(r.body);
    cr_assert(j != NULL, "%s", r.body);
    reply_free(&r);
    return j;
}

/* A 4xx whose body is {"error": "..."} containing `want`. */
void expect_error(Reply r, int status, const char *want, const char *what) {
    cr_expect_eq(r.status, status, "%s: status %d, body %s", what, r.status, r.body ? r.body : "");
    cJSON *j = r.body ? cJSON_Parse(r.body) : NULL;
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    cr_expect(cJSON_IsString(e) && strstr(e->valuestring, want), "%s: body %s, wanted an error with \"%s\"", what,
              r.body ? r.body : "(none)", want);
    cJSON_Delete(j);
    reply_free(&r);
}

/* ./serve in the background in d, serving d/model.bin (model) or the runs in d/runs (else),
 * with more arguments; returns its port (0 when it did not start). */
int start_serving(const char *d, bool model, const char *extra) {
    tu_sh("cd %s && rm -f rc.txt serve.txt; (%s/serve %s%s/%s --port 0 --threads 1 %s > serve.txt 2>&1; echo $? > rc.txt) &", d,
          tu_bin(), model ? "" : "--runs ", d, model ? "model.bin" : "runs", extra);
    for (int i = 0; i < 200; i++) {
        char *out = tu_slurp(tu_path(d, "serve.txt"), NULL);
        const char *p = out ? strstr(out, "http://127.0.0.1:") : NULL;
        int port = p ? atoi(p + 17) : 0;
        free(out);
        if (port) return port;
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    return 0;
}

int start_server(const char *d, const char *extra) { return start_serving(d, true, extra); }

/* Skips the running test where there is no browser to load the page in. */
void require_chromium(void) {
    if (tu_sh("command -v chromium > /dev/null") != 0)
        TU_SKIP("no chromium (Debian: apt-get install chromium): the page is not tested in a browser");
}

/* SIGTERM to the server (this test's: its folder is in the command line): exit 0, "serve: stopped". */
void stop_server(const char *d) {
    cr_assert_eq(tu_sh("pkill -TERM -f '^%s/serve .*%s/' ; for i in $(seq 1 100); do [ -s %s/rc.txt ] && break; sleep 0.05; done",
                       tu_bin(), d, d),
                 0);
    char *rc = tu_slurp(tu_path(d, "rc.txt"), NULL);
    cr_expect(rc && atoi(rc) == 0, "serve exit %s\n%s", rc ? rc : "(still running)", tu_slurp(tu_path(d, "serve.txt"), NULL));
    free(rc);
    cr_expect(tu_file_has(tu_path(d, "serve.txt"), "serve: stopped"));
}

char *trained_model_dir(void) {
    char *d = tu_tmpdir();
    tu_write(tu_path(d, "m.json"), "%s", MODEL_CONFIG);
    cr_assert_eq(tu_sh("cd %s && %s/train --config m.json --out run > /dev/null 2>&1 && cp run/model.bin model.bin", d, tu_bin()), 0);
    return d;
}

