/* server.h — ./serve: a model behind an HTTP JSON API (libmicrohttpd), on 127.0.0.1 unless
 * told otherwise.
 *
 *   POST /api/translate  {"text": "…" or ["…", …], "model": RUN, "beam": 1, "n_best": 1,
 *                         "alpha": 1, "attention": false} (model: a run's model.bin, loaded on
 *                         first use; without it, the command line's model. A model is its
 *                         file as it is now: a replaced file is loaded again, a deleted one is
 *                         404, an unreadable one 500; up to 8 are held, the least recently used
 *                         run model making room)
 *                        → {"model", "translations": [{"text", "n_best"?, "attention"?,
 *                           "error"?}], "ms"}
 *   GET  /api/models     → {"models": [{"name", "path", "type", "attention", "params", "requests",
 *                           "decodes", "lines", "config", "metrics"}]} (metrics: the test line of
 *                           the log beside the model file, or null)
 *   GET  /api/runs       → {"runs": [{"name", "config", "has_model", "log_bytes", "last_step",
 *                           "last_epoch", "last_valid", "last_test"}], "compares": [{"name"}]}
 *                           (folders with a log.jsonl or a summary.json, 3 deep)
 *   GET  /api/runs/NAME/files            → {"files": [...]}: what the next route serves
 *   GET  /api/runs/NAME/log?from=BYTES   the log from that byte on (X-File-Size: its size)
 *   GET  /api/runs/NAME/files/REL        a picture, summary or text file of the run
 *   GET  /api/runs/NAME/attention/FILE   the same as files/attention/FILE
 *   GET  /                               the page
 * Nothing outside the runs folder is opened: names of safe characters only, each opened below
 * the folder without following a symbolic link (a link is as absent as a missing file), and
 * files of those kinds. GET routes take HEAD too.
 *
 * Every refused request is a 4xx with {"error": "…"}: a body that is not a JSON object of those
 * keys and types (400), over the body limit (413), a body without one Content-Length (two: 400;
 * Transfer-Encoding: 411), more sentences than the limit, beam or n_best out of range, text that
 * is not UTF-8 or holds a lone UTF-16 surrogate (400), an unknown path (404), another method
 * (405). A line holding a NUL (\u0000) gets its own "error", as a line the model cannot read.
 * A request must arrive whole within --timeout seconds (a trickle is cut off); one client
 * address holds at most 128 connections, and the last 16 free slots go to newcomers.
 * The server owns the model it loads and the one thread that decodes with it: concurrent
 * requests decoded alike are translated as one batch. The options are borrowed. */
#ifndef S2S_SERVER_H
#define S2S_SERVER_H

#include "s2s/common.h"

#include <stdatomic.h>
#include <stdio.h>

#define SERVE_MAX_BEAM 32

typedef struct ServeOptions {
    const char *host;         /* IPv4 address to bind; NULL: 127.0.0.1 */
    const char *runs_dir;     /* the runs folder to serve (read only), or NULL */
    int port;                 /* 0: any free port (printed) */
    int threads;              /* decoding threads (the tape's) */
    size_t max_body;          /* bytes of a request body; more: 413 */
    int max_sentences;        /* sentences in one request */
    int timeout_s;            /* a request must arrive whole within it; an idle connection is closed */
    int batch_wait_ms;        /* the decoding thread waits this long after a request for others to
                                 join its batch (0: requests that queue while it decodes join the next) */
    FILE *out;                /* "serve: listening on …" and warnings, or NULL */
    const atomic_int *stop;   /* set (a signal): stop accepting, finish the requests in flight, return */
} ServeOptions;

ServeOptions serve_defaults(void);

/* Whether body[0..len) is a valid POST /api/translate request (else the reason, in msg, as the
 * 400 answer says it): the parser the server uses, for tests and the fuzzer. */
bool serve_check_request(const char *body, size_t len, int max_sentences, char *msg, size_t n_msg);

/* Loads the model file (or none: NULL with o->runs_dir) and serves it until *o->stop is set.
 * Errors (the model, the runs folder, the address, the port in use) return before anything
 * is served. */
S2sStatus serve_run(const char *model_path, const ServeOptions *o, S2sError *err);

#endif
