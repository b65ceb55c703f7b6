/* serve_client.c — what the ./serve tests share: a plain-socket HTTP client, ./serve started
 * in the background on a free port and stopped with SIGTERM, a small trained reversal model. */
#define _GNU_SOURCE /* strcasestr */
#include "serve_client.h"
#include "test_util.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

const char *const MODEL_CONFIG =
    "{\"name\": \"rev\", \"seed\": 1, \"task\": {\"type\": \"reverse\", \"alphabet\": \"abcd\", \"min_len\": 3, \"max_len\": 8, "
    "\"train_size\": 3000, \"valid_size\": 50, \"test_size\": 50}, \"model\": {\"cell\": \"gru\", \"embedding\": 16, "
    "\"encoder_hidden\": 32, \"decoder_hidden\": 32, \"attention\": \"dot\", \"combine\": \"luong\", \"dropout\": 0.0}, "
    "\"train\": {\"epochs\": 3, \"batch_size\": 32, \"lr\": 0.01, \"threads\": 1}}";

int serve_connect(int port, int timeout_s) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    if (timeout_s > 0) { /* a read then fails with EINTR on any signal, SA_RESTART or not (socket(7)) */
        struct timeval tv = {timeout_s, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
    return fd;
}

/* One request on its own connection (Connection: close); status 0 when no answer came. */
Reply http(int port, const char *method, const char *path, const char *body, size_t body_len) {
    Reply r = {0};
    int fd = serve_connect(port, 0);
    if (fd < 0) return r;
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
int serve_start(const char *d, const char *args) {
    tu_sh("cd %s && rm -f rc.txt serve.txt; (%s/serve %s --port 0 --threads 1 > serve.txt 2>&1; echo $? > rc.txt) &", d, tu_bin(), args);
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

int start_serving(const char *d, bool model, const char *extra) {
    char args[1024];
    snprintf(args, sizeof args, "%s%s/%s %s", model ? "" : "--runs ", d, model ? "model.bin" : "runs", extra);
    return serve_start(d, args);
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


/* ---- a DevTools-protocol client for headless Chromium ---- */

static bool read_exact(int fd, void *buf, size_t n) {
    for (size_t got = 0; got < n;) {
        ssize_t k = read(fd, (char *)buf + got, n - got);
        if (k <= 0) return false;
        got += (size_t)k;
    }
    return true;
}

/* One text frame, masked as a client's must be (the mask all zero: the bytes stay as they are). */
static bool ws_send(int fd, const char *text) {
    size_t n = strlen(text), h = 0;
    unsigned char head[14];
    head[h++] = 0x81;
    if (n < 126) {
        head[h++] = (unsigned char)(0x80 | n);
    } else if (n < 65536) {
        head[h++] = 0x80 | 126;
        head[h++] = (unsigned char)(n >> 8);
        head[h++] = (unsigned char)n;
    } else {
        head[h++] = 0x80 | 127;
        for (int i = 7; i >= 0; i--) head[h++] = (unsigned char)((uint64_t)n >> (8 * i));
    }
    memset(head + h, 0, 4);
    h += 4;
    return write(fd, head, h) == (ssize_t)h && write(fd, text, n) == (ssize_t)n;
}

/* The next whole text message (fragments joined), malloc'd; NULL when the connection ended. */
static char *ws_recv(int fd) {
    char *msg = NULL;
    size_t len = 0;
    for (;;) {
        unsigned char h[2];
        if (!read_exact(fd, h, 2)) break;
        uint64_t n = h[1] & 0x7f;
        if (n == 126 || n == 127) {
            unsigned char e[8];
            int k = n == 126 ? 2 : 8;
            if (!read_exact(fd, e, (size_t)k)) break;
            n = 0;
            for (int i = 0; i < k; i++) n = n << 8 | e[i];
        }
        if (n > (64u << 20)) break;
        char *part = malloc(n + 1);
        if (!read_exact(fd, part, n)) {
            free(part);
            break;
        }
        int op = h[0] & 0x0f;
        if (op == 0x1 || op == 0x0) {
            msg = realloc(msg, len + n + 1);
            memcpy(msg + len, part, n);
            len += n;
            msg[len] = '\0';
        }
        free(part);
        if ((h[0] & 0x80) && msg && (op == 0x1 || op == 0x0)) return msg;
    }
    free(msg);
    return NULL;
}

/* GET path from the DevTools HTTP server, which keeps the connection open: the body by its
 * Content-Length (malloc'd), or NULL. */
static char *devtools_get(int port, const char *path) {
    int fd = serve_connect(port, 10);
    char req[256], head[4096];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", path, port);
    if (fd < 0 || write(fd, req, (size_t)n) != n) {
        if (fd >= 0) close(fd);
        return NULL;
    }
    size_t got = 0;
    head[0] = '\0';
    while (got < sizeof head - 1 && !strstr(head, "\r\n\r\n")) {
        if (read(fd, head + got, 1) != 1) break;
        head[++got] = '\0';
    }
    const char *cl = strcasestr(head, "Content-Length:");
    size_t len = cl ? strtoul(cl + 15, NULL, 10) : 0;
    char *body = len && len < (16u << 20) ? malloc(len + 1) : NULL;
    if (body && !read_exact(fd, body, len)) {
        free(body);
        body = NULL;
    }
    if (body) body[len] = '\0';
    close(fd);
    return body;
}

bool browser_open(Browser *b, char *why, size_t n_why) {
    memset(b, 0, sizeof *b);
    b->fd = -1;
    if (tu_sh("command -v chromium > /dev/null") != 0) {
        snprintf(why, n_why, "no chromium (Debian: apt-get install chromium)");
        return false;
    }
    char *d = tu_tmpdir();
    snprintf(b->dir, sizeof b->dir, "%s", d);
    free(d);
    tu_sh("cd %s && (chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking "
          "--disable-component-update --disable-sync --window-size=1000,900 --remote-debugging-port=0 --user-data-dir=%s/profile "
          "about:blank > chromium.txt 2>&1 & echo $! > pid)",
          b->dir, b->dir);
    int port = 0;
    for (int i = 0; i < 400 && !port; i++) {
        char *p = tu_slurp(tu_path(b->dir, "profile/DevToolsActivePort"), NULL);
        if (p) port = atoi(p);
        free(p);
        if (!port) nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    if (!port) {
        snprintf(why, n_why, "chromium gave no DevTools port: %s", tu_slurp(tu_path(b->dir, "chromium.txt"), NULL));
        return false;
    }
    char *targets = devtools_get(port, "/json/list");
    cJSON *list = cJSON_Parse(targets ? targets : ""), *t;
    free(targets);
    char path[256] = "";
    cJSON_ArrayForEach(t, list) {
        const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t, "type"));
        const char *ws = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t, "webSocketDebuggerUrl"));
        const char *at = ws ? strstr(ws, "/devtools/") : NULL;
        if (type && !strcmp(type, "page") && at) {
            snprintf(path, sizeof path, "%s", at);
            break;
        }
    }
    cJSON_Delete(list);
    int fd = serve_connect(port, 30);
    char head[512], buf[2048];
    int n = snprintf(head, sizeof head,
                     "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
                     path, port);
    size_t got = 0;
    buf[0] = '\0';
    bool ok = path[0] && fd >= 0 && write(fd, head, (size_t)n) == n;
    while (ok && got < sizeof buf - 1 && !strstr(buf, "\r\n\r\n")) { /* the handshake's answer, byte by byte */
        if (read(fd, buf + got, 1) != 1) ok = false;
        buf[++got] = '\0';
    }
    if (!ok || strncmp(buf, "HTTP/1.1 101", 12) != 0) {
        snprintf(why, n_why, "no DevTools page to drive (%s)", path[0] ? "the WebSocket was refused" : "no page target");
        if (fd >= 0) close(fd);
        return false;
    }
    b->fd = fd;
    return true;
}

void browser_close(Browser *b) {
    if (b->fd >= 0) close(b->fd);
    if (b->dir[0]) {
        tu_sh("kill $(cat %s/pid) 2>/dev/null; for i in $(seq 1 50); do kill -0 $(cat %s/pid) 2>/dev/null || break; sleep 0.1; done", b->dir,
              b->dir);
        tu_rm_rf(b->dir);
    }
    b->fd = -1;
}

cJSON *browser_call(Browser *b, const char *method, cJSON *params) {
    int id = ++b->next_id;
    cJSON *m = cJSON_CreateObject();
    cJSON_AddNumberToObject(m, "id", id);
    cJSON_AddStringToObject(m, "method", method);
    cJSON_AddItemToObject(m, "params", params ? params : cJSON_CreateObject());
    char *text = cJSON_PrintUnformatted(m);
    cJSON_Delete(m);
    bool sent = ws_send(b->fd, text);
    free(text);
    if (!sent) return NULL;
    for (char *msg; (msg = ws_recv(b->fd));) { /* events come between: skip them */
        cJSON *j = cJSON_Parse(msg);
        free(msg);
        const cJSON *jid = cJSON_GetObjectItemCaseSensitive(j, "id");
        if (cJSON_IsNumber(jid) && jid->valueint == id) {
            cJSON *res = cJSON_DetachItemFromObjectCaseSensitive(j, "result");
            cJSON_Delete(j);
            return res;
        }
        cJSON_Delete(j);
    }
    return NULL;
}

char *browser_eval(Browser *b, const char *js) {
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "expression", js);
    cJSON_AddBoolToObject(p, "awaitPromise", true);
    cJSON_AddBoolToObject(p, "returnByValue", true);
    cJSON *res = browser_call(b, "Runtime.evaluate", p);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(res, "result"), "value");
    char *out = cJSON_IsString(v) ? strdup(v->valuestring) : v ? cJSON_PrintUnformatted(v) : strdup("");
    cJSON_Delete(res);
    return out;
}

bool browser_wait(Browser *b, const char *js, double seconds) {
    for (int i = 0; i < (int)(seconds * 20); i++) {
        char *v = browser_eval(b, js);
        bool yes = !strcmp(v, "true");
        free(v);
        if (yes) return true;
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    return false;
}

static void mouse(Browser *b, const char *type, double x, double y) {
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "type", type);
    cJSON_AddNumberToObject(p, "x", x);
    cJSON_AddNumberToObject(p, "y", y);
    cJSON_AddStringToObject(p, "button", "left");
    cJSON_AddNumberToObject(p, "clickCount", 1);
    cJSON_Delete(browser_call(b, "Input.dispatchMouseEvent", p));
}

bool browser_click(Browser *b, const char *selector) {
    char js[512];
    snprintf(js, sizeof js,
             "(() => { const e = document.querySelector('%s'); if (!e) return ''; e.scrollIntoView({block: 'center'}); "
             "const r = e.getBoundingClientRect(); return r.width > 0 ? `${r.x + r.width / 2} ${r.y + r.height / 2}` : ''; })()",
             selector);
    char *at = browser_eval(b, js);
    double x, y;
    bool ok = sscanf(at, "%lf %lf", &x, &y) == 2;
    free(at);
    if (!ok) return false;
    mouse(b, "mousePressed", x, y);
    mouse(b, "mouseReleased", x, y);
    return true;
}

bool browser_type(Browser *b, const char *selector, const char *text) {
    if (!browser_click(b, selector)) return false;
    char js[256];
    snprintf(js, sizeof js, "document.querySelector('%s').select(), true", selector);
    free(browser_eval(b, js));
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "text", text);
    cJSON_Delete(browser_call(b, "Input.insertText", p));
    return true;
}
