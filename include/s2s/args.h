/* args.h — what the programs share in reading their command lines: strict numbers (the
 * whole argument, in range, no overflow: "2x", "" and 1e30 are refused, not read as 2, 0 or
 * LONG_MAX), comma lists, and getopt_long's failures as one line.
 *
 * Messages go into the caller's S2sError, starting with the option's name; the programs
 * print them with their own name and exit 2. Owns nothing. */
#ifndef S2S_ARGS_H
#define S2S_ARGS_H

#include "s2s/common.h"

#include <stdio.h>

S2sStatus args_long(const char *opt, const char *text, long lo, long hi, long *out, S2sError *err);
S2sStatus args_int(const char *opt, const char *text, int lo, int hi, int *out, S2sError *err);
S2sStatus args_float(const char *opt, const char *text, double lo, double hi, float *out, S2sError *err);

/* Splits a comma-separated list in place into at most cap non-empty items: an empty list, an
 * empty item or more than cap items is an error naming opt. Returns the count, or −1. */
int args_split(const char *opt, char *list, char **items, int cap, S2sError *err);

/* The options every program has: {"help", no_argument, NULL, 'h'} and
 * {"version", no_argument, NULL, ARGS_VERSION} in its getopt_long table (optstring ":h"). */
#define ARGS_VERSION 255
/* A program numbers its own long-only options from here up (its enum's first value), so no
 * option of its own can be --version (a shared value once made --version another option). */
#define ARGS_OWN 256
/* What every program does with getopt_long's return c when it is not one of its own: --help
 * (usage to stdout), --version, or '?' and ':' (one line on stderr naming the option: "prog:
 * --bogus: unknown option", "prog: --config: needs a value"). Returns the exit code (0 or 2). */
int args_common(int c, const char *prog, void (*usage)(FILE *), char *const argv[], int optind, int optopt);

#endif
