/* conns.c — the connections of ./serve, so that slow or half-open clients cannot hold it:
 * a request must arrive whole (and its answer be taken) within the deadline, however slowly
 * its bytes trickle in (libmicrohttpd's own timeout only counts idle time); one client address
 * holds at most per_client connections, its oldest idle one closed for a new one; and the
 * last `reserve` slots below the limit are kept for newcomers by closing the connection that
 * has waited longest for its request. A connection being decoded for is never closed.
 *
 * Each connection's socket is duplicated when it starts: shutdown(2) on our copy ends the
 * connection (libmicrohttpd sees the end and closes its own), and our copy is closed only
 * when libmicrohttpd reports the connection closed, so the number never names another socket. */
#define _DEFAULT_SOURCE
#include "serve_internal.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct Conn {
    bool used, busy, ending;
    int fd;          /* our copy of its socket */
    uint32_t addr;   /* the client's IPv4 address (network order) */
    double since;    /* when the current request began, or its answer was queued (ms) */
} Conn;

struct Conns {
    pthread_mutex_t lock;
    Conn *slots;
    int cap, limit, per_client, reserve; /* cap: twice the limit, for connections libmicrohttpd
                                            has let go of but not yet reported closed */
    double deadline_ms;
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

Conns *serve_conns_new(int limit, int per_client, int reserve, int deadline_s) {
    Conns *cs = s2s_xcalloc(1, sizeof *cs);
    pthread_mutex_init(&cs->lock, NULL);
    cs->slots = s2s_xcalloc((size_t)limit * 2, sizeof *cs->slots);
    cs->cap = 2 * limit;
    cs->limit = limit;
    cs->per_client = per_client;
    cs->reserve = reserve;
    cs->deadline_ms = 1e3 * deadline_s;
    return cs;
}

void serve_conns_free(Conns *cs) {
    if (!cs) return;
    for (int i = 0; i < cs->cap; i++)
        if (cs->slots[i].used) close(cs->slots[i].fd);
    pthread_mutex_destroy(&cs->lock);
    free(cs->slots);
    free(cs);
}

static void end(Conn *k) {
    if (k->ending) return;
    k->ending = true;
    shutdown(k->fd, SHUT_RDWR);
}

/* The connection that has waited longest for its request, of one address (all: any), or NULL. */
static Conn *oldest_idle(Conns *cs, const Conn *self, bool any, uint32_t addr) {
    Conn *best = NULL;
    for (int i = 0; i < cs->cap; i++) {
        Conn *k = &cs->slots[i];
        if (k->used && k != self && !k->busy && !k->ending && (any || k->addr == addr) && (!best || k->since < best->since))
            best = k;
    }
    return best;
}

/* A new connection: its slot, then room made by the rules above (or it is refused). */
static void started(Conns *cs, struct MHD_Connection *c, void **ctx) {
    const union MHD_ConnectionInfo *fdi = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *ai = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    int fd = fdi ? fcntl(fdi->connect_fd, F_DUPFD_CLOEXEC, 0) : -1;
    if (fd < 0) return; /* no copy: only libmicrohttpd's own limits apply to it */
    uint32_t addr = ai && ai->client_addr->sa_family == AF_INET ? ((const struct sockaddr_in *)ai->client_addr)->sin_addr.s_addr : 0;
    pthread_mutex_lock(&cs->lock);
    Conn *self = NULL;
    int n = 0, same = 0;
    for (int i = 0; i < cs->cap; i++) {
        Conn *k = &cs->slots[i];
        if (!k->used && !self) self = k;
        else if (k->used && !k->ending) n++, same += k->addr == addr;
    }
    if (!self) { /* twice libmicrohttpd's limit at once: cannot happen; refuse */
        pthread_mutex_unlock(&cs->lock);
        shutdown(fd, SHUT_RDWR);
        close(fd);
        return;
    }
    *self = (Conn){.used = true, .fd = fd, .addr = addr, .since = now_ms()};
    *ctx = self;
    if (same >= cs->per_client) {
        Conn *v = oldest_idle(cs, self, false, addr);
        end(v ? v : self);
    } else if (n >= cs->limit - cs->reserve) {
        Conn *v = oldest_idle(cs, self, true, 0);
        if (v) end(v);
    }
    pthread_mutex_unlock(&cs->lock);
}

void serve_conns_notify(void *cls, struct MHD_Connection *c, void **ctx, enum MHD_ConnectionNotificationCode code) {
    Conns *cs = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        started(cs, c, ctx);
        return;
    }
    Conn *k = *ctx;
    if (!k) return;
    pthread_mutex_lock(&cs->lock);
    close(k->fd);
    *k = (Conn){0};
    pthread_mutex_unlock(&cs->lock);
    *ctx = NULL;
}

void serve_conns_busy(Conns *cs, struct MHD_Connection *c, bool busy) {
    const union MHD_ConnectionInfo *i = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    Conn *k = i ? i->socket_context : NULL;
    if (!k) return;
    pthread_mutex_lock(&cs->lock);
    k->busy = busy;
    k->since = now_ms();
    pthread_mutex_unlock(&cs->lock);
}

void serve_conns_sweep(Conns *cs) {
    double t = now_ms();
    pthread_mutex_lock(&cs->lock);
    for (int i = 0; i < cs->cap; i++) {
        Conn *k = &cs->slots[i];
        if (k->used && !k->busy && t - k->since > cs->deadline_ms) end(k);
    }
    pthread_mutex_unlock(&cs->lock);
}
