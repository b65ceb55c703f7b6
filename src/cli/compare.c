/* compare — variants × seeds: the attention (--attention), any config keys (--vary, several
 * for a grid) or whole configs (--config, several); trains each pair as its own run (its own process,
 * threads split between jobs unless the config sets them), skips finished runs and resumes
 * interrupted ones, then tabulates: mean, variance, range, paired bootstrap tests;
 * summary.{md,csv,json,png}. A signal stops the trainings too (they save and can resume).
 *   exit 0 · 1 a run failed, or IO · 2 usage · 128 + signal interrupted (resumable) */
#define _DEFAULT_SOURCE /* realpath */
#include "s2s/args.h"
#include "s2s/report.h"
#include "s2s/config.h"
#include "s2s/file.h"
#include "s2s/model.h"
#include "wait_policy.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SEEDS 256
#define MAX_VARY COMPARE_MAX_VARY
#define MAX_CONFIGS 8
#define MAX_AGAINST 4

static void usage(FILE *f) {
    fprintf(f, "usage: compare --config FILE (--attention A,B,... | --vary key=A,B,... | --config FILE2...) --seeds 1,2,3\n"
               "               [--jobs N] [--ranks N] [--out DIR] [--set key=value]...\n"
               "       compare --runs [DIR...] [--name NAME=DIR,DIR...]... [--outputs FILE] [--against NAME=FILE]...\n"
               "               [--out DIR]\n"
               "\n"
               "  --attention A,B  the attention variants (the same as --vary model.attention=A,B)\n"
               "  --vary key=A,B   any config key's values; several --vary make a grid (at most %d keys, %d variants)\n"
               "  --config FILE    several (at most %d): each config is a variant, named by its \"name\" (an RNN's recipe\n"
               "                   against a Transformer's); --vary and --set apply to each\n"
               "\n"
               "Trains every (variant, seed) pair as DIR/<variant>-seed<N> (default DIR: runs/compare-<name>),\n"
               "skipping finished runs and resuming interrupted ones, then writes DIR/summary.md (printed too),\n"
               "summary.csv, summary.json, summary.png and curves.png: per variant the test metric's mean,\n"
               "variance, sd, min and max, the best validation loss's, epochs and time, the validation metric\n"
               "by epoch; paired bootstrap tests between variants. GEMM threads: the config's (train.threads),\n"
               "else the cores split between the --jobs (and their ranks).\n"
               "  --ranks N        each training as N ranks of one MPI job (mpirun -np N ./train ...)\n"
               "--runs tabulates existing run folders instead; their variants are named by the config keys\n"
               "in which the runs differ.\n"
               "  --name NAME=DIR,DIR  these runs are variant NAME (seeds of one recipe under different configs)\n"
               "  --outputs FILE   each run's test outputs are DIR/FILE (say, an averaged model's beam search),\n"
               "                   scored against its test.ref, not test.hyp and its log's test line\n"
               "  --against NAME=FILE  a system that is no run (an ensemble): its test outputs, scored and\n"
               "                   tested against every run of each variant (at most %d)\n",
            MAX_VARY, COMPARE_MAX_VARIANTS, MAX_CONFIGS, MAX_AGAINST);
}

static volatile sig_atomic_t g_stop;
static void on_signal(int sig) { g_stop = sig; }

static int usage_error(const char *msg) {
    fprintf(stderr, "compare: %s\n", msg);
    return 2;
}

/* The command line. */
typedef struct Opts {
    const char *config[MAX_CONFIGS], *out;
    char *attention, *seeds, *vary[MAX_VARY];
    const char *sets[128];
    int n_sets, jobs, n_vary, ranks, n_configs, n_runs;
    bool runs_mode;
    char **runs; /* --runs: the folders */
    char *names[COMPARE_MAX_VARIANTS], *against[MAX_AGAINST]; /* NAME=DIR,DIR and NAME=FILE */
    int n_names, n_against;
    const char *outputs; /* --outputs: each run's test outputs file */
} Opts;

/* Parses the options into o; returns -1 to go on, else the exit code. */
static int parse_options(int argc, char **argv, Opts *o) {
    memset(o, 0, sizeof *o);
    o->jobs = o->ranks = 1;
    S2sError err;
    enum { O_CONFIG = ARGS_OWN, O_ATTENTION, O_SEEDS, O_OUT, O_JOBS, O_SET, O_RUNS, O_VARY, O_RANKS, O_NAME, O_OUTPUTS, O_AGAINST };
    static const struct option LONG[] = {
        {"help", no_argument, NULL, 'h'},          {"config", required_argument, NULL, O_CONFIG},
        {"attention", required_argument, NULL, O_ATTENTION}, {"seeds", required_argument, NULL, O_SEEDS},
        {"out", required_argument, NULL, O_OUT},   {"jobs", required_argument, NULL, O_JOBS},
        {"set", required_argument, NULL, O_SET},   {"runs", no_argument, NULL, O_RUNS},
        {"vary", required_argument, NULL, O_VARY}, {"ranks", required_argument, NULL, O_RANKS},
        {"name", required_argument, NULL, O_NAME}, {"outputs", required_argument, NULL, O_OUTPUTS},
        {"against", required_argument, NULL, O_AGAINST},
        {"version", no_argument, NULL, ARGS_VERSION}, {NULL, 0, NULL, 0}};
    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, ":h", LONG, NULL)) != -1) {
        switch (opt) {
        case O_CONFIG:
            if (o->n_configs == MAX_CONFIGS) return usage_error("--config: at most 8 configs");
            o->config[o->n_configs++] = optarg;
            break;
        case O_ATTENTION: o->attention = optarg; break;
        case O_SEEDS: o->seeds = optarg; break;
        case O_OUT: o->out = optarg; break;
        case O_RUNS: o->runs_mode = true; break;
        case O_NAME:
            if (o->n_names == COMPARE_MAX_VARIANTS) return usage_error("--name: at most 16 variants");
            o->names[o->n_names++] = optarg;
            break;
        case O_AGAINST:
            if (o->n_against == MAX_AGAINST) return usage_error("--against: at most 4 systems");
            o->against[o->n_against++] = optarg;
            break;
        case O_OUTPUTS: o->outputs = optarg; break;
        case O_JOBS:
            if (args_int("--jobs", optarg, 1, 64, &o->jobs, &err)) return usage_error(err.msg);
            break;
        case O_RANKS:
            if (args_int("--ranks", optarg, 1, 1024, &o->ranks, &err)) return usage_error(err.msg);
            break;
        case O_SET:
            if (o->n_sets == 128) return usage_error("too many --set options");
            o->sets[o->n_sets++] = optarg;
            break;
        case O_VARY:
            if (o->n_vary == MAX_VARY) return usage_error("--vary: at most 4 keys");
            o->vary[o->n_vary++] = optarg;
            break;
        default: return args_common(opt, "compare", usage, argv, optind, optopt);
        }
    }
    o->n_runs = argc - optind;
    o->runs = argv + optind;
    if (o->runs_mode) {
        if ((!o->n_runs && !o->n_names) || o->n_configs || o->attention || o->seeds || o->n_sets || o->n_vary) {
            usage(stderr);
            return 2;
        }
        if (o->outputs && (!o->outputs[0] || o->outputs[0] == '/'))
            return usage_error("--outputs: the name of a file inside each run folder");
        return -1;
    }
    if (o->n_names || o->outputs || o->n_against) return usage_error("--name, --outputs and --against go with --runs");
    if (o->n_runs) {
        fprintf(stderr, "compare: %s: unexpected argument (see compare --help)\n", o->runs[0]);
        return 2;
    }
    if (!o->n_configs || (!o->attention && !o->n_vary && o->n_configs < 2) || !o->seeds) {
        usage(stderr);
        return 2;
    }
    return -1;
}

/* The configs, each checked with every --set as the train program checks them, told apart by
 * their names; the output folder. Returns -1 to go on, else the exit code. */
static int load_configs(const Opts *o, Config *cfgs, char (*paths)[PATH_MAX], char *outdir, size_t outdir_len) {
    S2sError err;
    for (int c = 0; c < o->n_configs; c++) {
        config_defaults(&cfgs[c]);
        config_find_file(o->config[c], paths[c], PATH_MAX);
        if (config_load(&cfgs[c], paths[c], &err)) return usage_error(err.msg);
        for (int i = 0; i < o->n_sets; i++)
            if (config_set(&cfgs[c], o->sets[i], &err)) return usage_error(err.msg);
        if (config_check(&cfgs[c], &err)) return usage_error(err.msg);
        for (int d = 0; d < c; d++)
            if (!strcmp(cfgs[c].name, cfgs[d].name)) {
                fprintf(stderr, "compare: %s and %s are both named \"%s\"; the configs must have names of their own\n",
                        paths[d], paths[c], cfgs[c].name);
                return 2;
            }
    }
    if (o->out) {
        snprintf(outdir, outdir_len, "%s", o->out);
        return -1;
    }
    size_t len = (size_t)snprintf(outdir, outdir_len, "runs/compare-%s", cfgs[0].name);
    for (int c = 1; c < o->n_configs && len < outdir_len; c++)
        len += (size_t)snprintf(outdir + len, outdir_len - len, "-vs-%s", cfgs[c].name);
    if (len >= outdir_len) return usage_error("the configs' names make too long a folder name; give --out");
    return -1;
}

/* The keys varied, their values and the seeds. */
typedef struct Grid {
    char *keys[MAX_VARY + 1], *vals[MAX_VARY + 1][COMPARE_MAX_VARIANTS];
    int nval[MAX_VARY + 1], key_index[MAX_VARY + 1], nk;
    int nv; /* variants: the configs times the grid */
    long seed[MAX_SEEDS];
    int ns;
} Grid;

/* The keys and values of --attention (--vary model.attention) and --vary, split. */
static int split_grid(Opts *o, Grid *g) {
    S2sError err;
    static char attention_key[] = "model.attention";
    if (o->attention) {
        g->keys[g->nk] = attention_key;
        if ((g->nval[g->nk] = args_split("--attention", o->attention, g->vals[g->nk], COMPARE_MAX_VARIANTS, &err)) < 0)
            return usage_error(err.msg);
        g->nk++;
    }
    for (int i = 0; i < o->n_vary; i++) {
        char *eq = strchr(o->vary[i], '=');
        if (!eq || eq == o->vary[i] || !eq[1]) {
            fprintf(stderr, "compare: --vary %s: expected key=value,value,...\n", o->vary[i]);
            return 2;
        }
        *eq = '\0';
        g->keys[g->nk] = o->vary[i];
        if ((g->nval[g->nk] = args_split("--vary", eq + 1, g->vals[g->nk], COMPARE_MAX_VARIANTS, &err)) < 0)
            return usage_error(err.msg);
        g->nk++;
    }
    return -1;
}

/* Each value valid and given once; each key a config key (found by its path or its last part,
 * as --set finds it), varied once, and neither the seed (--seeds) nor the threads. */
static int check_grid(const Opts *o, const Config *cfgs, Grid *g) {
    S2sError err;
    for (int k = 0; k < g->nk; k++) {
        for (int v = 0; v < g->nval[k]; v++) {
            char set[400];
            snprintf(set, sizeof set, "%s=%s", g->keys[k], g->vals[k][v]);
            for (int c = 0; c < o->n_configs; c++) {
                Config probe = cfgs[c];
                if (config_set(&probe, set, &err)) return usage_error(err.msg);
            }
            for (int w = 0; w < v; w++)
                if (!strcmp(g->vals[k][w], g->vals[k][v])) {
                    bool att = o->attention && k == 0;
                    fprintf(stderr, "compare: %s%s: %s is given twice\n", att ? "--attention" : "--vary ", att ? "" : g->keys[k],
                            g->vals[k][v]);
                    return 2;
                }
        }
        g->key_index[k] = -1;
        for (int i = 0; i < config_key_count(); i++) {
            const char *kp = config_key_info(i).path, *dot = strrchr(kp, '.');
            if (!strcmp(kp, g->keys[k]) || (dot && !strcmp(dot + 1, g->keys[k]))) g->key_index[k] = i;
        }
        S2S_ASSERT(g->key_index[k] >= 0); /* config_set took it */
        const char *kp = config_key_info(g->key_index[k]).path;
        if (!strcmp(kp, "seed") || !strcmp(kp, "name") || !strcmp(kp, "train.threads")) {
            fprintf(stderr, "compare: --vary %s: %s\n", kp,
                    !strcmp(kp, "seed")   ? "the seeds are --seeds"
                    : !strcmp(kp, "name") ? "every run has a folder of its own"
                                          : "threads change no number (set them with --set)");
            return 2;
        }
        for (int m = 0; m < k; m++)
            if (g->key_index[k] == g->key_index[m]) {
                fprintf(stderr, "compare: %s is varied twice\n", kp);
                return 2;
            }
    }
    g->nv = o->n_configs;
    for (int k = 0; k < g->nk; k++) {
        if (g->nv * g->nval[k] > COMPARE_MAX_VARIANTS) {
            fprintf(stderr, "compare: the grid of --vary values makes more than %d variants\n", COMPARE_MAX_VARIANTS);
            return 2;
        }
        g->nv *= g->nval[k];
    }
    return -1;
}

/* --seeds: distinct integers. */
static int read_seeds(const Opts *o, Grid *g) {
    S2sError err;
    char *ss[MAX_SEEDS];
    g->ns = args_split("--seeds", o->seeds, ss, MAX_SEEDS, &err);
    if (g->ns < 0) return usage_error(err.msg);
    for (int s = 0; s < g->ns; s++) {
        if (args_long("--seeds", ss[s], 0, 1000000000000000L, &g->seed[s], &err)) return usage_error(err.msg);
        for (int k = 0; k < s; k++)
            if (g->seed[k] == g->seed[s]) {
                fprintf(stderr, "compare: --seeds: %ld is given twice\n", g->seed[s]);
                return 2;
            }
    }
    return -1;
}

/* Variant a of the grid: its --set arguments, its folder's name and its config (c2). */
static int make_variant(const Opts *o, const Grid *g, int a, bool attention_only, CompareJob *proto, Config *c2) {
    S2sError err;
    int nv_config = g->nv / o->n_configs; /* variants of each config: its --vary grid */
    size_t len = 0;
    if (o->n_configs > 1) /* the folder: the config's name first */
        len = (size_t)snprintf(proto->variant, sizeof proto->variant, "%.60s", c2->name);
    for (int k = 0, rest = a % nv_config; k < g->nk; k++) { /* the last key varies fastest */
        int div = 1;
        for (int m = k + 1; m < g->nk; m++) div *= g->nval[m];
        const char *v = g->vals[k][rest / div];
        rest %= div;
        const char *kp = config_key_info(g->key_index[k]).path, *dot = strrchr(kp, '.');
        snprintf(proto->sets[proto->n_sets], sizeof proto->sets[0], "%s=%s", kp, v);
        if (config_set(c2, proto->sets[proto->n_sets++], &err)) return usage_error(err.msg);
        /* the folder: the value alone for the attention (as before --vary), else key=value pairs */
        char part[COMPARE_NAME];
        if (attention_only) snprintf(part, sizeof part, "%.80s", v);
        else snprintf(part, sizeof part, "%s%.30s=%.50s", k || o->n_configs > 1 ? "," : "", dot ? dot + 1 : kp, v);
        size_t pl = strlen(part);
        if (len + pl >= sizeof proto->variant) pl = sizeof proto->variant - 1 - len;
        memcpy(proto->variant + len, part, pl);
        len += pl;
        proto->variant[len] = '\0';
    }
    for (char *p = proto->variant; *p; p++)
        if (*p == '/') *p = '_';
    if (config_check(c2, &err) || model_check_config(&c2->model, proto->config_path, &err)) return usage_error(err.msg);
    return -1;
}

/* Every (variant, seed) pair as a job, in order; threads: the user's (config or --set), else
 * the cores shared between the jobs. */
static int make_jobs(const Opts *o, const Config *cfgs, char (*paths)[PATH_MAX], const Grid *g, const char *outdir,
                     CompareJob *job, int *n_jobs) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int shared_threads = (int)(cores / (o->jobs * o->ranks) > 0 ? cores / (o->jobs * o->ranks) : 1);
    bool attention_only =
        o->n_configs == 1 && g->nk == 1 && !strcmp(config_key_info(g->key_index[0]).path, "model.attention");
    for (int a = 0; a < g->nv; a++) {
        CompareJob proto;
        memset(&proto, 0, sizeof proto);
        int ci = a / (g->nv / o->n_configs);
        Config c2 = cfgs[ci];
        proto.config_path = paths[ci];
        proto.set_threads = c2.train.threads <= 0;
        proto.threads = proto.set_threads ? shared_threads : c2.train.threads;
        int rc = make_variant(o, g, a, attention_only, &proto, &c2);
        if (rc >= 0) return rc;
        for (int s = 0; s < g->ns; s++) {
            CompareJob *j = &job[(*n_jobs)++];
            *j = proto;
            snprintf(j->dir, sizeof j->dir, "%s/%s-seed%ld", outdir, proto.variant, g->seed[s]);
            j->seed = g->seed[s];
            j->want = c2;
            j->want.seed = g->seed[s];
            j->want.train.threads = proto.threads;
        }
    }
    return -1;
}

/* Runs the jobs through the library (compare_run_jobs), the train program beside this one; a
 * stop signal is caught here and passed on to the trainings there. Returns how many failed. */
static int run_jobs(const Opts *o, CompareJob *job, int n_jobs, const char *argv0) {
    char train[PATH_MAX];
    const char *slash = strrchr(argv0, '/');
    snprintf(train, sizeof train, "%.*strain", slash ? (int)(slash - argv0 + 1) : 2, slash ? argv0 : "./");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: wait() returns to look at the flag */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    CompareRunner r = {train, o->sets, o->n_sets, o->jobs, o->ranks, &g_stop, stdout, stderr};
    return compare_run_jobs(&r, job, n_jobs);
}

/* "NAME=REST": NAME into label (a table cell: not empty, no "|"); returns REST, or NULL. */
static const char *split_name(const char *opt, const char *arg, char *label) {
    const char *eq = strchr(arg, '=');
    size_t k = eq ? (size_t)(eq - arg) : 0;
    if (!eq || !k || k >= COMPARE_NAME || memchr(arg, '|', k) || !eq[1]) {
        fprintf(stderr, "compare: %s %s: expected NAME=%s (a name of 1 to %d bytes without \"|\")\n", opt, arg,
                strcmp(opt, "--name") ? "FILE" : "DIR,DIR...", COMPARE_NAME - 1);
        return NULL;
    }
    memcpy(label, arg, k);
    label[k] = '\0';
    return eq + 1;
}

/* What --runs tabulates: the folders given, each --name's (copies in *buf), then the --against
 * systems; returns -1 to go on, else the exit code. */
static int inputs_of(const Opts *o, CompareInput **in, int *n, char **buf) {
    size_t bytes = 1;
    for (int i = 0; i < o->n_names; i++) bytes += strlen(o->names[i]) + 1;
    /* a --name has fewer folders than bytes: room enough */
    CompareInput *s = *in = s2s_xcalloc((size_t)o->n_runs + (size_t)o->n_against + bytes, sizeof *s);
    char *b = *buf = s2s_xmalloc(bytes);
    *n = 0;
    for (int i = 0; i < o->n_runs; i++) s[(*n)++].path = o->runs[i];
    for (int i = 0; i < o->n_names; i++) {
        char label[COMPARE_NAME];
        const char *rest = split_name("--name", o->names[i], label);
        if (!rest) return 2;
        strcpy(b, rest);
        for (char *dir = strtok(b, ","); dir; dir = strtok(NULL, ",")) {
            s[*n].path = dir;
            memcpy(s[(*n)++].label, label, sizeof label);
        }
        b += strlen(rest) + 1;
    }
    for (int i = 0; i < *n; i++) /* a folder twice would count twice */
        for (int k = 0; k < i; k++) {
            char x[PATH_MAX], y[PATH_MAX];
            if (realpath(s[i].path, x) && realpath(s[k].path, y) && !strcmp(x, y)) {
                fprintf(stderr, "compare: --runs: %s is given twice (as %s)\n", s[i].path, s[k].path);
                return 2;
            }
        }
    for (int i = 0; i < o->n_against; i++, (*n)++) {
        s[*n].fixed = true;
        if (!(s[*n].path = split_name("--against", o->against[i], s[*n].label))) return 2;
    }
    return -1;
}

/* Trains the grid's runs (those not finished) and tabulates them; returns the exit code. */
static int compare_grid(Opts *o, const char *argv0) {
    Config *cfgs = s2s_xcalloc(MAX_CONFIGS, sizeof *cfgs);
    char(*paths)[PATH_MAX] = s2s_xcalloc(MAX_CONFIGS, sizeof *paths);
    char outdir[PATH_MAX - 160]; /* room for /<variant>-seed<N> */
    Grid *g = s2s_xcalloc(1, sizeof *g);
    CompareJob *job = NULL;
    int n_jobs = 0, rc = load_configs(o, cfgs, paths, outdir, sizeof outdir);
    if (rc < 0) rc = split_grid(o, g);
    if (rc < 0) rc = check_grid(o, cfgs, g);
    if (rc < 0) rc = read_seeds(o, g);
    if (rc < 0) {
        job = s2s_xcalloc((size_t)g->nv * g->ns, sizeof *job);
        rc = make_jobs(o, cfgs, paths, g, outdir, job, &n_jobs);
    }
    FileLock out_lock = {-1};
    S2sError err;
    if (rc < 0 && (file_mkdirs(outdir, &err) || file_lock(&out_lock, outdir, &err))) {
        fprintf(stderr, "compare: %s%s\n", err.msg, strstr(err.msg, "in use") ? ": another comparison runs there" : "");
        rc = 1;
    }
    if (rc < 0) {
        file_remove_stale_tmps(outdir);
        int failed = run_jobs(o, job, n_jobs, argv0);
        if (g_stop) {
            fprintf(stderr, "compare: interrupted; run the same command again to resume\n");
            rc = 128 + (int)g_stop;
        } else {
            if (failed) fprintf(stderr, "compare: %d run(s) failed; the table holds the others\n", failed);
            CompareInput *in = s2s_xcalloc((size_t)(n_jobs ? n_jobs : 1), sizeof *in);
            for (int i = 0; i < n_jobs; i++) in[i].path = job[i].dir;
            rc = compare_tabulate(in, n_jobs, NULL, outdir, stdout, stderr) || failed ? 1 : 0;
            free(in);
        }
    }
    file_unlock(&out_lock);
    free(job);
    free(g);
    free(paths);
    free(cfgs);
    return rc;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress lines in order, also into a file */
    Opts o;
    int rc = parse_options(argc, argv, &o);
    if (rc >= 0) return rc;
    if (!o.runs_mode) return compare_grid(&o, argv[0]);
    CompareInput *in;
    char *buf;
    int n;
    rc = inputs_of(&o, &in, &n, &buf);
    if (rc < 0) rc = compare_tabulate(in, n, o.outputs, o.out ? o.out : "runs/compare", stdout, stderr) ? 1 : 0;
    free(in);
    free(buf);
    return rc;
}
