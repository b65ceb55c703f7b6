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
/* ./serve ARGS in the background in d on a free port, one thread; returns its port (0 when
 * it did not start). stop_server finds it by d in its command line. */
int serve_start(const char *d, const char *args);
/* ./serve in the background in d, serving d/model.bin (model) or the runs in d/runs (else),
 * with more arguments; returns its port (0 when it did not start). */
int start_serving(const char *d, bool model, const char *extra);
/* A connection to 127.0.0.1:port, or −1; reads on it fail after timeout_s (0: never). */
int serve_connect(int port, int timeout_s);
int start_server(const char *d, const char *extra);
/* Skips the running test where there is no browser to load the page in. */
void require_chromium(void);
/* SIGTERM to the server (this test's: its folder is in the command line): exit 0, "serve: stopped". */
void stop_server(const char *d);
/* A new folder holding run/ (a trained reversal model's run) and model.bin (a copy). */
char *trained_model_dir(void);

/* Headless Chromium driven over the DevTools protocol (a WebSocket to the page), so a test can
 * click and type as a person does and read what the page shows. */
typedef struct Browser {
    int fd, next_id;
    char dir[512];   /* its profile folder and pid file */
} Browser;
/* Starts it on about:blank; false (with the reason in why) where it cannot. */
bool browser_open(Browser *b, char *why, size_t n_why);
void browser_close(Browser *b);
/* A DevTools method's "result" (the caller deletes it), or NULL with an error. */
cJSON *browser_call(Browser *b, const char *method, cJSON *params);
/* A JavaScript expression's value (promises awaited) as text: a string as it is, anything
 * else as JSON; malloc'd ("" on an error). */
char *browser_eval(Browser *b, const char *js);
/* Waits (up to seconds) until the expression is true. */
bool browser_wait(Browser *b, const char *js, double seconds);
/* A mouse click at the middle of the element the CSS selector names (false: not on screen). */
bool browser_click(Browser *b, const char *selector);
/* Focuses the element, selects what it holds and types text over it, as from a keyboard. */
bool browser_type(Browser *b, const char *selector, const char *text);

#endif
