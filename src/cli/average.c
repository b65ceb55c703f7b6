/* average — checkpoint averaging: the element-wise mean of model files of one architecture.
 *   average MODEL.bin MODEL.bin... --out OUT.bin
 *   average --last K RUN --out OUT.bin     (RUN/checkpoints/: train.keep_last)
 *   exit 0 · 1 unreadable, corrupt or unlike files · 2 usage */
#include "s2s/args.h"
#include "s2s/file.h"
#include "s2s/checkpoint.h"
#include "s2s/rundir.h"
#include "wait_policy.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MODELS 1000

static void usage(FILE *f) {
    fprintf(f, "usage: average MODEL.bin MODEL.bin... --out OUT.bin\n"
               "       average --last K RUN --out OUT.bin\n"
               "Writes the element-wise mean of the models' weights (checkpoint averaging) as a model file.\n"
               "The models must share the architecture, vocabularies and subword model.\n"
               "  --out FILE   the averaged model (written whole, or not at all)\n"
               "  --last K     the K latest checkpoints a run kept in RUN/%s/ (train.keep_last)\n",
            RUN_CHECKPOINTS);
}

/* The k latest RUN/checkpoints/stepN.bin into paths (malloc'd strings), oldest first; -1 with a
 * message. */
static int latest(const char *run, int k, char **paths) {
    char dir[PATH_MAX];
    rundir_path(dir, sizeof dir, run, RUN_CHECKPOINTS);
    long *steps;
    int n = rundir_checkpoint_steps(run, &steps);
    if (n < 0) {
        fprintf(stderr, "average: %s: no kept checkpoints (train.keep_last keeps them)\n", dir);
        return -1;
    }
    if (n < k) {
        fprintf(stderr, "average: %s holds %d checkpoint%s, --last asks for %d\n", dir, n, n == 1 ? "" : "s", k);
        free(steps);
        return -1;
    }
    for (int i = 0; i < k; i++) {
        size_t len = strlen(run) + sizeof RUN_CHECKPOINTS + 32;
        paths[i] = s2s_xmalloc(len);
        rundir_checkpoint_path(paths[i], len, run, steps[n - k + i]);
    }
    free(steps);
    return k;
}

int main(int argc, char **argv) {
    static const struct option LONG[] = {{"help", no_argument, NULL, 'h'},
                                         {"version", no_argument, NULL, ARGS_VERSION},
                                         {"out", required_argument, NULL, 'o'},
                                         {"last", required_argument, NULL, 'l'},
                                         {NULL, 0, NULL, 0}};
    const char *out = NULL;
    int last = 0;
    S2sError err;
    opterr = 0;
    int o;
    while ((o = getopt_long(argc, argv, ":h", LONG, NULL)) != -1) {
        switch (o) {
        case 'o': out = optarg; break;
        case 'l':
            if (args_int("--last", optarg, 1, MAX_MODELS, &last, &err)) {
                fprintf(stderr, "average: %s\n", err.msg);
                return 2;
            }
            break;
        default: return args_common(o, "average", usage, argv, optind, optopt);
        }
    }
    int n_args = argc - optind;
    if (!out || n_args < 1 || (last && n_args != 1) || (!last && n_args < 2) || n_args > MAX_MODELS) {
        fprintf(stderr, "average: %s (see average --help)\n",
                !out              ? "--out: where the averaged model goes is required"
                : last            ? "--last K takes one run folder"
                : n_args > MAX_MODELS ? "too many models"
                                  : "two models at least, or --last K RUN");
        return 2;
    }
    char **paths = s2s_xcalloc((size_t)(last ? last : n_args), sizeof *paths);
    int n = last ? latest(argv[optind], last, paths) : n_args;
    if (!last)
        for (int i = 0; i < n; i++) paths[i] = s2s_xstrdup(argv[optind + i]);
    int rc = 0;
    if (n < 0) {
        rc = 1;
    } else {
        FileRole *ins = s2s_xcalloc((size_t)(n ? n : 1), sizeof *ins);
        for (int i = 0; i < n; i++) ins[i] = (FileRole){"MODEL", paths[i]};
        S2sStatus st = file_distinct(ins, n, &(FileRole){"--out", out}, 1, &err);
        free(ins);
        if (!st) st = ckpt_average((const char *const *)paths, n, out, &err);
        if (st) {
            fprintf(stderr, "average: %s\n", err.msg);
            rc = st == S2S_ERR_CONFIG ? 2 : 1;
        } else {
            printf("averaged %d model%s into %s\n", n, n == 1 ? "" : "s", out);
        }
    }
    for (int i = 0; i < (last ? last : n_args); i++) free(paths[i]);
    free(paths);
    return rc;
}
