/* progress.h — ./translate's progress on stderr: lines done, the share of an input file read,
 * lines/s and the time left, redrawn on one line of a terminal (or a line each block with
 * --progress into a log), then one closing line. Included by translate.c only; owns nothing. */
#ifndef S2S_CLI_PROGRESS_H
#define S2S_CLI_PROGRESS_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

typedef struct Progress {
    FILE *f;      /* stderr, or NULL: no progress */
    bool tty;     /* redraw one line; else a line each */
    double t0;    /* when decoding began */
    double total; /* the input file's bytes (0: unknown: a pipe) */
} Progress;

static double progress_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void progress_init(Progress *p, FILE *f, bool tty, FILE *in) {
    struct stat st;
    *p = (Progress){f, tty, progress_now(), 0};
    if (f && fstat(fileno(in), &st) == 0 && S_ISREG(st.st_mode)) p->total = (double)st.st_size;
}

static void progress_show(const Progress *p, long lines, double bytes) {
    if (!p->f) return;
    double el = progress_now() - p->t0, rate = (double)lines / fmax(el, 1e-9);
    char share[32] = "", left[32] = "";
    if (p->total > 0) {
        double s = fmin(bytes / p->total, 1), t = el * (1 - s) / fmax(s, 1e-9);
        snprintf(share, sizeof share, " (%.0f%%)", 100 * s);
        snprintf(left, sizeof left, ", %d:%02d left", (int)(t / 60), (int)fmod(t, 60));
    }
    fprintf(p->f, "%stranslate: %ld lines%s, %.1f lines/s%s%s", p->tty ? "\r" : "", lines, share, rate, left,
            p->tty ? "\033[K" : "\n");
    fflush(p->f);
}

static void progress_end(const Progress *p, long lines) {
    if (!p->f) return;
    double el = progress_now() - p->t0;
    fprintf(p->f, "%stranslate: %ld lines in %.1f s (%.1f lines/s)%s\n", p->tty ? "\r" : "", lines, el,
            (double)lines / fmax(el, 1e-9), p->tty ? "\033[K" : "");
}

#endif
