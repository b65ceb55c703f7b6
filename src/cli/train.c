/* train — trains a model from a JSON config. Thin: arguments, signals, messages, exit codes.
 *   exit 0 done or paused (--pause-at) · 1 runtime, IO, corrupt files, NaN · 2 usage and config
 *   · 128 + signal interrupted (resumable) */
#include "s2s/args.h"
#include "s2s/dist.h"
#include "s2s/optim.h"
#include "s2s/trainer.h"
#include "stop_signals.h"
#include "wait_policy.h"

#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: train --config FILE [--seed N] [--out DIR] [--overwrite] [--pause-at N] [--set key=value]...\n"
            "       train --resume DIR [--epochs N] [--pause-at N]\n"
            "       train --config FILE --prepare [--set key=value]...\n"
            "\n"
            "  --config FILE     a JSON config; a bare name is looked up in configs/ (reverse → configs/reverse.json),\n"
            "                    then among the installed configs (PREFIX/share/s2s/configs)\n"
            "  --seed N          overrides \"seed\"\n"
            "  --out DIR         the run's folder (default runs/<name>); it must not hold another run\n"
            "  --overwrite       start anew in a folder that holds a run (deletes that run's files)\n"
            "  --pause-at N      pause once the run has made N optimizer steps in all (resume it with --resume;\n"
            "                    to end a run after N steps, with its test: --set train.max_steps=N)\n"
            "  --set key=value   overrides any config key by dotted path or unique name (--set attention=dummy)\n"
            "  --resume DIR      continue the run in DIR from its last.bin\n"
            "  --epochs N        train to N epochs in all; with --resume it extends a run, a finished one too\n"
            "                    (linear and cosine schedules then span the new length)\n"
            "  --prepare         only prepare the data into task.cache_dir (read the corpus, learn the subwords,\n"
            "                    encode both sides; with task.teacher, have the teacher translate the training\n"
            "                    sources first) for the runs that follow, and say what was kept\n"
            "  --list-keys       print every config key with its type, default and meaning\n"
            "  --version         print the version\n"
            "\n"
            "Writes DIR/config.json (resolved), DIR/log.jsonl, DIR/model.bin (best) and DIR/last.bin (latest).\n"
            "Keys and defaults: docs/reference/config.md.\n");
}

static int fail(const char *msg, int code) {
    fprintf(stderr, "train: %s\n", msg);
    return code;
}

static void list_keys(void) { /* the schema: key, type, default, meaning */
    Config d;
    config_defaults(&d);
    for (int k = 0; k < config_key_count(); k++) {
        ConfigKeyInfo ki = config_key_info(k);
        char v[300];
        config_key_value(&d, k, v, sizeof v);
        printf("%s\t%s\t%s\t%s%s", ki.path, ki.type, v, ki.help, ki.names ? ": " : "");
        for (int i = 0; i < ki.n_names; i++) printf("%s%s", i ? "|" : "", ki.names[i]);
        printf("\n");
    }
}

/* The config of --config with --seed, --set and --epochs applied, checked. */
static S2sStatus make_config(Config *cfg, const char *config_arg, const char *seed_arg, const char **sets, int n_sets,
                             long epochs, S2sError *err) {
    char path[PATH_MAX], set[300];
    config_defaults(cfg);
    config_find_file(config_arg, path, sizeof path);
    S2sStatus st = config_load(cfg, path, err);
    if (!st && seed_arg) {
        snprintf(set, sizeof set, "seed=%s", seed_arg);
        st = config_set(cfg, set, err);
    }
    for (int i = 0; i < n_sets && !st; i++) st = config_set(cfg, sets[i], err);
    if (!st && epochs > 0) {
        snprintf(set, sizeof set, "train.epochs=%ld", epochs);
        st = config_set(cfg, set, err);
    }
    if (!st) st = train_check_config(cfg, err);
    char idle[2048]; /* keys given that change nothing here: said, not refused */
    if (!st && config_idle_keys(cfg, path, sets, n_sets, idle, sizeof idle)) fputs(idle, stderr);
    return st;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* epoch lines appear as they happen, also in a log file */
    const char *config_arg = NULL, *out_arg = NULL, *resume = NULL, *seed_arg = NULL;
    const char *sets[256];
    int n_sets = 0;
    long pause_at = 0, epochs = 0;
    bool overwrite = false, prepare = false;
    S2sError err = {0};
    enum { O_LIST = ARGS_OWN, O_OVERWRITE, O_PAUSE_AT, O_EPOCHS, O_OLD_MAX_STEPS, O_PREPARE };
    static const struct option LONG[] = {
        {"help", no_argument, NULL, 'h'},       {"config", required_argument, NULL, 'c'},
        {"out", required_argument, NULL, 'o'},  {"resume", required_argument, NULL, 'r'},
        {"seed", required_argument, NULL, 's'}, {"set", required_argument, NULL, 'S'},
        {"pause-at", required_argument, NULL, O_PAUSE_AT}, {"max-steps", required_argument, NULL, O_OLD_MAX_STEPS}, {"overwrite", no_argument, NULL, O_OVERWRITE},
        {"epochs", required_argument, NULL, O_EPOCHS}, {"prepare", no_argument, NULL, O_PREPARE},
        {"list-keys", no_argument, NULL, O_LIST}, {"version", no_argument, NULL, ARGS_VERSION}, {NULL, 0, NULL, 0}};
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", LONG, NULL)) != -1) {
        switch (c) {
        case O_LIST: list_keys(); return 0;
        case 'c': config_arg = optarg; break;
        case 'o': out_arg = optarg; break;
        case 'r': resume = optarg; break;
        case 's': seed_arg = optarg; break;
        case O_OVERWRITE: overwrite = true; break;
        case O_PREPARE: prepare = true; break;
        case O_PAUSE_AT:
            if (args_long("--pause-at", optarg, 1, 1000000000000000L, &pause_at, &err)) return fail(err.msg, 2);
            break;
        case O_OLD_MAX_STEPS: /* it once paused, while train.max_steps ends: one name per meaning now */
            return fail("--max-steps is gone: --pause-at N pauses the run after N steps (resumable); "
                        "--set train.max_steps=N ends it there, with its test", 2);
        case O_EPOCHS:
            if (args_long("--epochs", optarg, 1, 1000000, &epochs, &err)) return fail(err.msg, 2);
            break;
        case 'S':
            if (n_sets == 256) return fail("too many --set options", 2);
            sets[n_sets++] = optarg;
            break;
        default: return args_common(c, "train", usage, argv, optind, optopt);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "train: %s: unexpected argument (see train --help)\n", argv[optind]);
        return 2;
    }
    if (!config_arg == !resume) {
        usage(stderr);
        return 2;
    }
    if (prepare && (resume || out_arg || overwrite || pause_at))
        return fail("--prepare takes --config (and --set); it trains nothing and writes no run", 2);
    if (resume && (n_sets || seed_arg || out_arg || overwrite))
        return fail("--resume takes the run's own config and folder; --set, --seed, --out and --overwrite do not apply", 2);

    Config cfg;
    char out_dir[PATH_MAX];
    if (config_arg && make_config(&cfg, config_arg, seed_arg, sets, n_sets, epochs, &err)) return fail(err.msg, 2);
    if (prepare) { /* Ctrl-C stops it at once, leaving nothing that looks prepared (exit 130) */
        catch_stop_signals();
        S2sStatus st = train_prepare(&cfg, stdout, isatty(STDERR_FILENO) ? stderr : NULL, &g_stop, &err);
        if (st && atomic_load(&g_stop)) {
            fprintf(stderr, "train: %s\n", err.msg);
            return 128 + atomic_load(&g_stop);
        }
        return st ? fail(err.msg, st == S2S_ERR_CONFIG ? 2 : 1) : 0;
    }
    if (config_arg && out_arg) snprintf(out_dir, sizeof out_dir, "%s", out_arg);
    else if (config_arg) snprintf(out_dir, sizeof out_dir, "runs/%s", cfg.name); /* the name is a plain name (config.c) */
    else snprintf(out_dir, sizeof out_dir, "%s", resume);
    if (!config_arg) config_defaults(&cfg);

    catch_stop_signals();

    TrainOptions opt = {out_dir, resume != NULL, overwrite, stdout, isatty(STDERR_FILENO) ? stderr : NULL, &g_stop, pause_at,
                        (int)epochs, NULL, NULL, NULL};
    /* under mpirun: one rank of a data-parallel run; rank 0 alone prints and writes */
    Dist dist;
    if (dist_init(&dist, &argc, &argv, &err)) return fail(err.msg, 1);
    opt.dist = &dist;
    bool root = dist.rank == 0;
    if (!root) opt.out = opt.progress = NULL;
    if (root && !resume) printf("train: %s → %s\n", cfg.path, out_dir);
    else if (root) printf("train: resuming %s\n", out_dir);
    if (root && dist.size > 1)
        printf("train: %d ranks on %d machine%s, each a share of every batch; gradients summed %s\n", dist.size, dist.machines,
               dist.machines > 1 ? "s" : "",
               optim_overlap_sum(&dist, cfg.train.overlap_sum) ? "while backward runs" : "after backward");
    fflush(stdout);
    TrainSummary sum;
    S2sStatus st = train_run(&cfg, &opt, &sum, &err);
    int rc = 0;
    if (st) {
        rc = st == S2S_ERR_CONFIG ? 2 : 1;
        if (atomic_load(&g_stop) && st == S2S_ERR_IO) rc = 128 + atomic_load(&g_stop); /* stopped while preparing the data */
        if (dist.size > 1) fprintf(stderr, "train: rank %d: %s\n", dist.rank, err.msg);
        else fail(err.msg, rc);
        if (dist.size > 1) dist_abort(&dist, rc); /* the other ranks must not wait for this one */
    } else if (sum.interrupted) {
        if (root)
            fprintf(stderr, "train: interrupted after step %ld; resume with: %s--resume %s\n", sum.steps,
                    dist.size > 1 ? "mpirun ... ./train " : "./train ", out_dir);
        rc = 128 + (sum.stop_signal ? sum.stop_signal : atomic_load(&g_stop));
    } else if (sum.paused) {
        if (root) printf("train: paused after step %ld (--pause-at); continue with: %s--resume %s\n", sum.steps,
                         dist.size > 1 ? "mpirun ... ./train " : "./train ", out_dir);
    } else if (root) {
        printf("train: %d epochs%s, %ld steps, %.1f s; model: %s/model.bin\n", sum.epochs,
               sum.early_stopped ? " (stopped early)" : "", sum.steps, sum.seconds, out_dir);
    }
    dist_finalize(&dist);
    return rc;
}
