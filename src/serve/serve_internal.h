/* serve_internal.h — what the rooms of ./serve share: the server, the models it decodes with
 * (models.c: one decoding thread each, reloaded when their file changes, the least recently
 * used evicted), the runs folder (runs.c: every file opened below its descriptor, no link
 * followed), the connections (conns.c: a cap per client address, a deadline per request, a
 * reserve for newcomers), the front door (gate.c: connections accepted and their first head
 * read before libmicrohttpd takes them) and the translate route (request.c). http.c is the
 * HTTP layer. */
#ifndef S2S_SERVE_INTERNAL_H
#define S2S_SERVE_INTERNAL_H

#include "s2s/model.h"
#include "s2s/server.h"
#include "s2s/translator.h"

#include <cJSON.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>

#define SERVE_MAX_MODELS 8 /* models held at once; past it the least recently used run model goes */

/* A request's lines waiting for a model's decoding thread. */
typedef struct Job {
    const char **lines;
    int n, beam, n_best;
    float alpha;
    bool attention;
    TranslatedLine *out; /* (n) filled by the decoding thread */
    bool done;
    struct Job *next;
} Job;

/* A model and the one thread that decodes with it (its tape is not shared). Held by the
 * table and by each request using it (refs); freed by whoever drops the last reference. */
typedef struct Served {
    char name[256];       /* the run's name, or the config's name for the command line's model */
    char run[600];        /* the run it comes from ("" for the command line's model) */
    char path[PATH_MAX + 700]; /* as shown in /api/models */
    struct stat id;       /* the file loaded: device, inode, size, modification time */
    Seq2Seq m;
    Config cfg;
    Vocab src, trg;
    Tape tape;
    int batch_wait_ms;
    pthread_mutex_t lock; /* the queue and the counters */
    pthread_cond_t wake, done;
    Job *head;
    bool quit, started;
    pthread_t worker;
    long requests, decodes, lines;
    int refs;             /* under the server's models_lock */
    long used;            /* the server's use count when last found (least recently used) */
} Served;

typedef struct Conns Conns;

typedef struct Server {
    const ServeOptions *o;
    const char *model_path;          /* the command line's model file, or NULL */
    Served *models[SERVE_MAX_MODELS];
    int n_models;
    long uses;
    pthread_mutex_t models_lock;     /* models[], n_models, uses, every Served's refs */
    char runs[PATH_MAX];             /* the runs folder, resolved (realpath), or "" */
    int runs_fd;                     /* the runs folder, open; −1 without one */
    atomic_int inflight;             /* requests begun and not yet answered */
    Conns *conns;
    atomic_bool started;             /* listening: libmicrohttpd's messages are printed */
} Server;

/* ---- models.c ---- */
/* The model a request names (run NULL: the command line's), loaded or reloaded as its file is
 * now, with a reference the caller drops with serve_model_release; else the HTTP status and
 * why, in msg. */
unsigned serve_model_find(Server *s, const char *run, Served **out, char *msg, size_t n_msg);
void serve_model_release(Server *s, Served *m);
/* Decodes a job on the model's thread; returns when its results are in. */
void serve_model_decode(Served *m, Job *j);
/* GET /api/models: every model held. */
cJSON *serve_models_json(Server *s);
void serve_models_free(Server *s);

/* ---- runs.c ---- */
/* A name as a path below the runs folder: segments of letters, digits and . _ - = , + (not
 * starting with a dot), at most 3 deep. */
bool serve_safe_relative(const char *name);
/* The folder NAME below the runs folder, opened without following a link, if it is a run (a
 * log.jsonl) or a comparison (a summary.json); else −1. */
int serve_run_open(const Server *s, const char *name);
/* The last line of each type of a log open as fd (up to its last 64 KB) into run, with its size. */
void serve_log_summary(int fd, cJSON *run);
enum MHD_Result serve_get_runs(Server *s, struct MHD_Connection *c);
enum MHD_Result serve_get_run_path(Server *s, struct MHD_Connection *c, const char *rest);

/* ---- request.c ---- */
enum MHD_Result serve_post_translate(Server *s, struct MHD_Connection *c, const char *body, size_t len);

/* ---- conns.c: the connections (MHD_OPTION_NOTIFY_CONNECTION) ---- */
Conns *serve_conns_new(int limit, int per_client, int reserve, int deadline_s);
void serve_conns_free(Conns *cs);
void serve_conns_notify(void *cls, struct MHD_Connection *c, void **socket_context, enum MHD_ConnectionNotificationCode code);
/* The request on c is complete and handled now (no deadline while the model decodes it), or
 * its answer is queued (the deadline runs again, for sending it and for the next request). */
void serve_conns_busy(Conns *cs, struct MHD_Connection *c, bool busy);
/* Closes the connections past their deadline; called by the server's main loop. */
void serve_conns_sweep(Conns *cs);

/* ---- gate.c: the front door (the first head read before libmicrohttpd takes it) ---- */
typedef struct Gate Gate;
/* Listens on addr; the port bound into *port (for port 0: the one the system chose). */
Gate *serve_gate_open(const struct sockaddr_in *addr, int *port, S2sError *err);
/* Accepts connections for d (started with MHD_USE_NO_LISTEN_SOCKET) on a thread of its own. */
S2sStatus serve_gate_start(Gate *g, struct MHD_Daemon *d, S2sError *err);
/* Stops accepting, waits for the connections at the gate to go on, closes; NULL is fine. */
void serve_gate_close(Gate *g);

/* ---- reply.c: answers ---- */
enum MHD_Result serve_send_json(struct MHD_Connection *c, unsigned status, cJSON *j);
enum MHD_Result serve_send_error(struct MHD_Connection *c, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* 405 with the methods the path takes (an Allow header too) */
enum MHD_Result serve_send_405(struct MHD_Connection *c, const char *path, const char *allow);
enum MHD_Result serve_send_page(struct MHD_Connection *c);

#endif
