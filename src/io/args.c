/* args.c — strict command-line numbers and lists, getopt_long's messages. */
#include "s2s/args.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

S2sStatus args_long(const char *opt, const char *text, long lo, long hi, long *out, S2sError *err) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end || errno == ERANGE || v < lo || v > hi || text[0] == ' ')
        return s2s_fail(err, S2S_ERR_CONFIG, "%s: expected an integer in [%ld, %ld], got \"%s\"", opt, lo, hi, text);
    *out = v;
    return S2S_OK;
}

S2sStatus args_int(const char *opt, const char *text, int lo, int hi, int *out, S2sError *err) {
    long v = 0;
    S2sStatus st = args_long(opt, text, lo, hi, &v, err);
    if (!st) *out = (int)v;
    return st;
}

S2sStatus args_float(const char *opt, const char *text, double lo, double hi, float *out, S2sError *err) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end || errno == ERANGE || !isfinite(v) || v < lo || v > hi || text[0] == ' ')
        return s2s_fail(err, S2S_ERR_CONFIG, "%s: expected a number in [%g, %g], got \"%s\"", opt, lo, hi, text);
    *out = (float)v;
    return S2S_OK;
}

int args_split(const char *opt, char *list, char **items, int cap, S2sError *err) {
    if (!*list) {
        s2s_fail(err, S2S_ERR_CONFIG, "%s: expected a comma-separated list, got nothing", opt);
        return -1;
    }
    int n = 0;
    for (char *p = list;;) {
        char *comma = strchr(p, ',');
        if (comma) *comma = '\0';
        if (!*p) {
            s2s_fail(err, S2S_ERR_CONFIG, "%s: an empty item in the list", opt);
            return -1;
        }
        if (n == cap) {
            s2s_fail(err, S2S_ERR_CONFIG, "%s: at most %d items", opt, cap);
            return -1;
        }
        items[n++] = p;
        if (!comma) break;
        p = comma + 1;
    }
    return n;
}

static void getopt_error(char *buf, size_t n, char *const argv[], int optind, int optopt, int c) {
    char shortopt[3] = {'-', (char)optopt, '\0'};
    /* a short option names itself in optopt; a long one is the argument getopt just passed */
    const char *what = optopt && optopt < 128 && argv[optind - 1][1] != '-' ? shortopt : argv[optind - 1];
    char name[128];
    snprintf(name, sizeof name, "%s", what);
    char *eq = strchr(name, '=');
    if (eq) *eq = '\0';
    bool long_opt = what[0] == '-' && what[1] == '-';
    const char *why = c == ':' ? "needs a value" : optopt && long_opt && eq ? "takes no value" : "unknown option";
    snprintf(buf, n, "%s: %s", name, why);
}

#ifndef S2S_BUILD /* the Makefile gives the commit */
#define S2S_BUILD "unknown"
#endif

int args_common(int c, const char *prog, void (*usage)(FILE *), char *const argv[], int optind, int optopt) {
    if (c == 'h') {
        usage(stdout);
        return 0;
    }
    if (c == ARGS_VERSION) {
        printf("%s (s2s %s, build %s)\n", prog, S2S_VERSION, S2S_BUILD);
        return 0;
    }
    char msg[256];
    getopt_error(msg, sizeof msg, argv, optind, optopt, c);
    fprintf(stderr, "%s: %s (see %s --help)\n", prog, msg, prog);
    return 2;
}
