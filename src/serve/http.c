/* http.c — the HTTP layer of ./serve (server.h) on libmicrohttpd: a thread per connection,
 * the request checked (one Content-Length, a body within the limit) and gathered whole before
 * a route sees it, the routes, and the server's life (start, the connections' sweep, a stop
 * that answers the requests in flight). The rooms behind it: serve_internal.h. */
#define _DEFAULT_SOURCE /* realpath */
#include "serve_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define CONN_LIMIT 256     /* connections at once (libmicrohttpd's limit) */
#define CONN_PER_CLIENT 128 /* of them from one address (make bench-serve holds 64) */
#define CONN_RESERVE 16    /* slots kept for newcomers */

/* One request's body, gathered across the handler's calls. */
typedef struct Upload {
    char *body;
    size_t len;
    bool too_big, answered;
} Upload;

ServeOptions serve_defaults(void) {
    return (ServeOptions){.host = NULL, .port = 8080, .threads = 0, .max_body = 1 << 20, .max_sentences = 256,
                          .timeout_s = 30, .batch_wait_ms = 0, .out = NULL, .stop = NULL};
}

/* ---- the request's head: what is refused before a byte of the body is read ---- */

typedef struct HeadCount {
    int content_length, transfer_encoding;
    char bad_name[64];   /* a header name that is no token ("Transfer-Encoding " before its colon) */
    char twice[64];      /* a query key given twice (from=5&from=7: which one would count?) */
    const char *keys[16];
    int n_keys;
} HeadCount;

/* RFC 9110 §5.6.2: a field name is a token; whitespace before the colon is an error (RFC 9112
 * §5.1: a server MUST answer 400), since a proxy may read the field another way. */
static bool is_token(const char *s) {
    if (!*s) return false;
    for (; *s; s++)
        if (!(((*s | 32) >= 'a' && (*s | 32) <= 'z') || (*s >= '0' && *s <= '9') || strchr("!#$%&'*+-.^_`|~", *s))) return false;
    return true;
}

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)value;
    HeadCount *h = cls;
    if (kind == MHD_GET_ARGUMENT_KIND) {
        for (int i = 0; i < h->n_keys && !h->twice[0]; i++)
            if (!strcmp(h->keys[i], key)) snprintf(h->twice, sizeof h->twice, "%s", key);
        if (h->n_keys < 16) h->keys[h->n_keys++] = key;
        else if (!h->twice[0]) snprintf(h->twice, sizeof h->twice, "%s", "(more than 16 query keys)");
        return MHD_YES;
    }
    if (!is_token(key) && !h->bad_name[0]) snprintf(h->bad_name, sizeof h->bad_name, "%s", key);
    h->content_length += !strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH);
    h->transfer_encoding += !strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    return MHD_YES;
}

/* A head whose body length is ambiguous (two Content-Lengths, or one beside a
 * Transfer-Encoding: RFC 9112 §6.3, request smuggling behind a proxy) or over the limit. */
static enum MHD_Result check_head(Server *s, struct MHD_Connection *c, Upload *u, bool *refused) {
    HeadCount h = {0};
    MHD_get_connection_values(c, MHD_HEADER_KIND | MHD_GET_ARGUMENT_KIND, count_header, &h);
    *refused = true;
    if (h.bad_name[0])
        return serve_send_error(c, MHD_HTTP_BAD_REQUEST, "the header name \"%s\" is not a token (a space before its colon?)",
                                h.bad_name);
    if (h.twice[0])
        return serve_send_error(c, MHD_HTTP_BAD_REQUEST, "the query key \"%s\" is given twice: give it once", h.twice);
    if (h.content_length > 1 || (h.content_length && h.transfer_encoding))
        return serve_send_error(c, MHD_HTTP_BAD_REQUEST, "%s: the body's length must be given once",
                                h.content_length > 1 ? "Content-Length given twice" : "Content-Length beside Transfer-Encoding");
    /* libmicrohttpd cannot answer while it reads a body, so a chunked body past the limit (or
     * one announcing 2^64 − 1 bytes) could only be cut off unanswered: a body comes with its
     * length, or is refused here */
    if (h.transfer_encoding)
        return serve_send_error(c, MHD_HTTP_LENGTH_REQUIRED, "a body with Transfer-Encoding is not taken: send it with a "
                                                             "Content-Length (at most %zu bytes)", s->o->max_body);
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > s->o->max_body) {
        u->too_big = true;
        return serve_send_error(c, MHD_HTTP_CONTENT_TOO_LARGE, "the body is over %zu bytes (serve --max-body)", s->o->max_body);
    }
    *refused = false;
    return MHD_YES;
}

/* ---- the routes ---- */

static bool is_get(const char *method) { return !strcmp(method, MHD_HTTP_METHOD_GET) || !strcmp(method, MHD_HTTP_METHOD_HEAD); }

static enum MHD_Result route(Server *s, struct MHD_Connection *c, const char *url, const char *method, const Upload *u) {
    if (!strcmp(url, "/api/translate")) {
        if (strcmp(method, MHD_HTTP_METHOD_POST)) return serve_send_405(c, url, "POST");
        return serve_post_translate(s, c, u->body, u->len);
    }
    if (!strcmp(url, "/")) return is_get(method) ? serve_send_page(c) : serve_send_405(c, url, "GET, HEAD");
    if (!strcmp(url, "/api/runs") || !strncmp(url, "/api/runs/", 10)) {
        if (!is_get(method)) return serve_send_405(c, url, "GET, HEAD");
        return url[9] ? serve_get_run_path(s, c, url + 10) : serve_get_runs(s, c);
    }
    if (!strcmp(url, "/api/models")) return is_get(method) ? serve_send_json(c, MHD_HTTP_OK, serve_models_json(s)) : serve_send_405(c, url, "GET, HEAD");
    return serve_send_error(c, MHD_HTTP_NOT_FOUND,
                            "no such path: %.200s (the page: GET /; the API: POST /api/translate, GET /api/models, GET /api/runs)", url);
}

/* libmicrohttpd calls it once with the head, then with each part of the body, then once more
 * with none. */
static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *data, size_t *data_size, void **con_cls) {
    (void)version;
    Server *s = cls;
    Upload *u = *con_cls;
    if (!u) {
        u = calloc(1, sizeof *u);
        if (!u) return MHD_NO;
        *con_cls = u;
        atomic_fetch_add(&s->inflight, 1); /* until request_done */
        bool refused;
        enum MHD_Result r = check_head(s, c, u, &refused);
        u->answered = refused;
        return r;
    }
    if (*data_size) {
        if (!u->too_big && u->len + *data_size <= s->o->max_body) {
            char *b = realloc(u->body, u->len + *data_size + 1);
            if (!b) return MHD_NO;
            memcpy(b + u->len, data, *data_size);
            u->body = b;
            u->len += *data_size;
        } else {
            u->too_big = true; /* more than its Content-Length said: libmicrohttpd reads no more */
        }
        *data_size = 0;
        return MHD_YES;
    }
    if (u->answered) return MHD_YES;
    u->answered = true;
    if (u->too_big)
        return serve_send_error(c, MHD_HTTP_CONTENT_TOO_LARGE, "the body is over %zu bytes (serve --max-body)", s->o->max_body);
    serve_conns_busy(s->conns, c, true);
    enum MHD_Result r = route(s, c, url, method, u);
    serve_conns_busy(s->conns, c, false);
    return r;
}

static void request_done(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)c, (void)toe;
    Server *s = cls;
    Upload *u = *con_cls;
    if (u) {
        free(u->body);
        free(u);
        *con_cls = NULL;
        atomic_fetch_sub(&s->inflight, 1);
    }
}

/* ---- the server ---- */

/* libmicrohttpd's own messages: after start-up on stderr, as serve's; before it, our own
 * message (which names the address and the reason) says it instead. */
static void mhd_log(void *cls, const char *fmt, va_list ap) {
    const atomic_bool *started = cls;
    if (!atomic_load(started)) return;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    fprintf(stderr, "serve: libmicrohttpd: %s%s", msg, msg[0] && msg[strlen(msg) - 1] == '\n' ? "" : "\n");
}

static void free_server(Server *s) {
    serve_models_free(s);
    serve_conns_free(s->conns);
    if (s->runs_fd >= 0) close(s->runs_fd);
    pthread_mutex_destroy(&s->models_lock);
    free(s);
}

/* The runs folder (resolved and held open) and the command line's model; errors before serving. */
static S2sStatus open_sources(Server *s, const char *model_path, S2sError *err) {
    const ServeOptions *o = s->o;
    if (o->runs_dir) {
        if (!realpath(o->runs_dir, s->runs) || (s->runs_fd = open(s->runs, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
            return s2s_fail(err, S2S_ERR_IO, "--runs %s: not a folder", o->runs_dir);
    }
    if (!model_path) return S2S_OK;
    s->model_path = model_path;
    Served *m;
    char msg[1024];
    if (serve_model_find(s, NULL, &m, msg, sizeof msg) != MHD_HTTP_OK) return s2s_fail(err, S2S_ERR_IO, "%s", msg);
    serve_model_release(s, m); /* the table keeps it */
    return S2S_OK;
}

static void print_listening(const Server *s, const char *host, int port) {
    FILE *f = s->o->out;
    if (!f) return;
    if (strncmp(host, "127.", 4) != 0)
        fprintf(f, "serve: warning: %s is not a loopback address: anyone who can reach this machine can use the model\n", host);
    fprintf(f, "serve: listening on http://%s:%d/ (", host, port);
    if (s->n_models) fprintf(f, "model %s, %s%s", s->models[0]->name, s->model_path, s->runs[0] ? "; " : "");
    if (s->runs[0]) fprintf(f, "runs in %s", s->runs);
    fprintf(f, ")\n");
    fflush(f);
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

S2sStatus serve_run(const char *model_path, const ServeOptions *o, S2sError *err) {
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    const char *host = o->host ? o->host : "127.0.0.1";
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1)
        return s2s_fail(err, S2S_ERR_CONFIG, "--host %s: expected an IPv4 address such as 127.0.0.1", host);
    if (o->port < 0 || o->port > 65535) return s2s_fail(err, S2S_ERR_CONFIG, "--port %d: expected 0 to 65535", o->port);
    Server *s = s2s_xcalloc(1, sizeof *s);
    s->o = o;
    s->runs_fd = -1;
    pthread_mutex_init(&s->models_lock, NULL);
    S2sStatus st = open_sources(s, model_path, err);
    if (st) {
        free_server(s);
        return st;
    }
    s->conns = serve_conns_new(CONN_LIMIT, CONN_PER_CLIENT, CONN_RESERVE, o->timeout_s);
    int port = o->port;
    S2sError why;
    Gate *gate = serve_gate_open(&addr, &port, &why); /* the connections come in through it (gate.c) */
    errno = 0;
    struct MHD_Daemon *d = !gate ? NULL : MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC |
            MHD_USE_ERROR_LOG, 0, NULL, NULL, handle, s,
        MHD_OPTION_NOTIFY_COMPLETED, request_done, s,
        MHD_OPTION_NOTIFY_CONNECTION, serve_conns_notify, s->conns, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, &s->started,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->timeout_s, MHD_OPTION_CONNECTION_LIMIT, (unsigned)CONN_LIMIT, MHD_OPTION_END);
    if (!d || serve_gate_start(gate, d, &why)) {
        int e = errno;
        if (d) MHD_stop_daemon(d);
        serve_gate_close(gate);
        free_server(s);
        return s2s_fail(err, S2S_ERR_IO, "cannot listen on %s:%d: %s", host, o->port,
                        !gate ? why.msg : e ? strerror(e) : "the port is in use or the address is not this machine's");
    }
    atomic_store(&s->started, true);
    print_listening(s, host, port);
    while (!o->stop || !atomic_load(o->stop)) {
        sleep_ms(50);
        serve_conns_sweep(s->conns);
    }
    serve_gate_close(gate); /* no new connections */
    /* the requests begun are answered before the connections are closed (a minute at most: a
     * request is bounded by --max-sentences; a stalled upload ends by --timeout) */
    for (int waited = 0; atomic_load(&s->inflight) > 0 && waited < 6000; waited++) {
        sleep_ms(10);
        if (waited % 5 == 0) serve_conns_sweep(s->conns);
    }
    MHD_stop_daemon(d);
    if (o->out) {
        fprintf(o->out, "serve: stopped\n");
        fflush(o->out);
    }
    free_server(s);
    return S2S_OK;
}
