/* serve_client.h — helpers of the ./serve tests (serve_client.c). */
#ifndef S2S_TESTS_SERVE_CLIENT_H
#define S2S_TESTS_SERVE_CLIENT_H

#include <cJSON.h>
#include <stdbool.h>
#include <stddef.h>

/* The config of the small reversal model trained_model_dir trains. */
extern const char *const MODEL_CONFIG;

typedef struct Reply {
    int status;
    char *head, *body;
} Reply;

/* One request on its own connection (Connection: close); status 0 when no answer came. */
Reply http(int port, const char *method, const char *path, const char *body, size_t body_len);
void reply_free(Reply *r);
/* POST /api/translate that must succeed: its answer parsed. */
cJSON *translate_ok(int port, const char *req);
/* A 4xx whose body is {"error": "..."} containing `want`. */
void expect_error(Reply r, int status, const char *want, const char *what);
/* ./serve in the background in d, serving d/model.bin (model) or the runs in d/runs (else),
 * with more arguments; returns its port (0 when it did not start). */
int start_serving(const char *d, bool model, const char *extra);
int start_server(const char *d, const char *extra);
/* Skips the running test where there is no browser to load the page in. */
void require_chromium(void);
/* SIGTERM to the server (this test's: its folder is in the command line): exit 0, "serve: stopped". */
void stop_server(const char *d);
/* A new folder holding run/ (a trained reversal model's run) and model.bin (a copy). */
char *trained_model_dir(void);

#endif
