/* gate.c — ./serve's front door: it accepts the connections itself and reads (without taking
 * them) the first request's head before libmicrohttpd does. libmicrohttpd 0.9 answers a
 * Content-Length it cannot parse ("+21", "21, 21") with an HTML page whose head it writes
 * twice, before any handler of ours could speak; the gate answers such a head with one JSON
 * 400 and closes. Every other connection goes on to libmicrohttpd (MHD_add_connection) as it
 * came: a head that is not whole within GATE_MS (a slow sender, which conns.c then times),
 * or when GATE_MAX connections wait at the gate, passes unread. The requests after the first
 * on a kept-alive connection are libmicrohttpd's alone. */
#define _GNU_SOURCE /* accept4 */
#include "serve_internal.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define GATE_MS 200      /* a head not whole by then passes unread */
#define GATE_MAX 64      /* connections read at the gate at once */
#define GATE_PEEK 16384  /* the head's bytes looked at */

struct Gate {
    struct MHD_Daemon *d;
    int listen_fd;
    atomic_bool stop;
    atomic_int waiting; /* gate threads alive */
    pthread_t acceptor;
};

typedef struct Arrival {
    Gate *g;
    int fd;
    struct sockaddr_in addr;
} Arrival;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

/* The value of the head's first Content-Length that is not digits alone, into bad; false when
 * every one is (or there is none). RFC 9110 §8.6: 1*DIGIT, no sign, no list. */
static bool bad_length(const char *head, char *bad, size_t n) {
    for (const char *line = strstr(head, "\n"); line && line[1]; line = strstr(line + 1, "\n")) {
        const char *name = line + 1;
        if (strncasecmp(name, "Content-Length:", 15) != 0) continue;
        const char *v = name + 15, *end = v + strcspn(v, "\r\n");
        while (v < end && (*v == ' ' || *v == '\t')) v++;
        while (end > v && (end[-1] == ' ' || end[-1] == '\t')) end--;
        bool digits = end > v;
        for (const char *p = v; p < end; p++) digits = digits && *p >= '0' && *p <= '9';
        if (!digits) {
            snprintf(bad, n, "%.*s", (int)(end - v) < 40 ? (int)(end - v) : 40, v);
            return true;
        }
    }
    return false;
}

static void answer_400(int fd, char *value) {
    for (char *p = value; *p; p++) /* what the client sent, as printable ASCII (cJSON escapes the rest) */
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e) *p = '?';
    char why[120], msg[400];
    snprintf(why, sizeof why, "Content-Length \"%s\": expected digits alone, given once", value);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "error", why);
    char *body = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!body) return;
    int n = snprintf(msg, sizeof msg,
                     "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n%s",
                     strlen(body), body);
    free(body);
    for (int at = 0; at < n && n < (int)sizeof msg;) {
        ssize_t k = send(fd, msg + at, (size_t)(n - at), MSG_NOSIGNAL);
        if (k <= 0) break;
        at += (int)k;
    }
    shutdown(fd, SHUT_WR);
}

/* Waits for the first head (peeked, not taken), then lets the connection in or answers it. */
static void *arrive(void *arg) {
    Arrival *a = arg;
    char *head = malloc(GATE_PEEK + 1);
    double until = now_ms() + GATE_MS;
    bool whole = false;
    for (ssize_t k = 0; head && !whole;) {
        int left = (int)(until - now_ms());
        struct pollfd p = {a->fd, POLLIN, 0};
        if (left <= 0 || poll(&p, 1, left) <= 0) break;
        k = recv(a->fd, head, GATE_PEEK, MSG_PEEK | MSG_DONTWAIT);
        if (k <= 0 && !(k < 0 && (errno == EAGAIN || errno == EINTR))) break;
        if (k <= 0) continue;
        head[k] = '\0';
        whole = strstr(head, "\r\n\r\n") || strstr(head, "\n\n");
        if (k == GATE_PEEK) break; /* a head this long is libmicrohttpd's to refuse */
        if (!whole) nanosleep(&(struct timespec){0, 2000000}, NULL); /* more of it is on the way */
    }
    char bad[48];
    if (whole && bad_length(head, bad, sizeof bad)) {
        answer_400(a->fd, bad);
        close(a->fd);
    } else { /* libmicrohttpd owns the socket now, and closes it itself if it cannot take it */
        MHD_add_connection(a->g->d, a->fd, (struct sockaddr *)&a->addr, sizeof a->addr);
    }
    free(head);
    atomic_fetch_sub(&a->g->waiting, 1);
    free(a);
    return NULL;
}

static void *accept_loop(void *arg) {
    Gate *g = arg;
    while (!atomic_load(&g->stop)) {
        struct pollfd p = {g->listen_fd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0) continue;
        Arrival *a = s2s_xcalloc(1, sizeof *a);
        socklen_t len = sizeof a->addr;
        a->g = g;
        a->fd = accept4(g->listen_fd, (struct sockaddr *)&a->addr, &len, SOCK_CLOEXEC);
        if (a->fd < 0) {
            free(a);
            continue;
        }
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&at, 256 << 10);
        bool gated = atomic_fetch_add(&g->waiting, 1) < GATE_MAX && pthread_create(&t, &at, arrive, a) == 0;
        pthread_attr_destroy(&at);
        if (!gated) { /* the gate is full: in as it came */
            atomic_fetch_sub(&g->waiting, 1);
            MHD_add_connection(g->d, a->fd, (struct sockaddr *)&a->addr, len); /* closes it when it cannot take it */
            free(a);
        }
    }
    return NULL;
}

Gate *serve_gate_open(const struct sockaddr_in *addr, int *port, S2sError *err) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    struct sockaddr_in got;
    socklen_t len = sizeof got;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (const struct sockaddr *)addr, sizeof *addr) != 0 || listen(fd, 128) != 0 ||
        getsockname(fd, (struct sockaddr *)&got, &len) != 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        s2s_fail(err, S2S_ERR_IO, "%s", strerror(e));
        return NULL;
    }
    Gate *g = s2s_xcalloc(1, sizeof *g);
    g->listen_fd = fd;
    *port = ntohs(got.sin_port);
    return g;
}

S2sStatus serve_gate_start(Gate *g, struct MHD_Daemon *d, S2sError *err) {
    g->d = d;
    if (pthread_create(&g->acceptor, NULL, accept_loop, g) != 0)
        return s2s_fail(err, S2S_ERR_IO, "cannot start the thread that accepts connections");
    return S2S_OK;
}

void serve_gate_close(Gate *g) {
    if (!g) return;
    if (g->d) {
        atomic_store(&g->stop, true);
        pthread_join(g->acceptor, NULL);
        while (atomic_load(&g->waiting) > 0) nanosleep(&(struct timespec){0, 5000000}, NULL); /* at most GATE_MS */
    }
    close(g->listen_fd);
    free(g);
}
