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

/* The line for getopt_long's return c ('?' or ':', optstring starting with ':') at optind:
 * "--bogus: unknown option", "--config: needs a value". */
void args_getopt_error(char *buf, size_t n, char *const argv[], int optind, int optopt, int c);

/* Prints "PROG (s2s VERSION)" for --version. */
void args_print_version(FILE *f, const char *prog);

#endif
