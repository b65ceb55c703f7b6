/* speed — throughput of the Multi30k model on this machine: training target tokens per
 * second over a fixed set of length-bucketed batches after warm-up, greedy and beam-5
 * decoding of the test set (sentences per second), peak RSS, and the step's GEMM rate
 * against a plain sgemm of the output layer's shape. One JSON line per measurement.
* Decoding runs on random weights, or on a trained model's (--model FILE): random weights
 * rarely say <eos>, so "greedy_full" decodes exactly 50 steps for every sentence — the work
 * of a decoder that never stops, comparable across implementations — and "greedy" stops at
 * <eos> as users' decoding does. train.precision=bf16 runs the GEMMs in bfloat16.
* --decode-batch N decodes N sentences at a time (128, as PyTorch's --decode-bench --bs).
* --decode-modes and --repeat pick the decoding runs and repeat each (A/B timing of two builds).
*   speed [--config multi30k] [--model FILE] [--warmup 5] [--iters 60] [--no-train] [--no-decode]
*         [--decode-batch 128] [--decode-modes greedy,greedy_full,beam] [--repeat 1] [--set key=value]... */
#include "s2s/eval.h"
#include "s2s/gemm.h"
#include "s2s/optim.h"

#include "s2s/args.h"
#include "s2s/dist.h"
#include "wait_policy.h"

#include <cblas.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double peak_rss_mb(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_maxrss / 1024.0;
}

/* GFLOP/s of one sgemm (M × K)·(K × N), best of 5 after a warm-up. */
static double gemm_rate(int M, int N, int K, bool bf16, bool openblas) {
    float *a = s2s_xcalloc((size_t)M * K, sizeof *a), *b = s2s_xcalloc((size_t)K * N, sizeof *b),
          *c = s2s_xcalloc((size_t)M * N, sizeof *c);
    for (size_t i = 0; i < (size_t)M * K; i++) a[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < (size_t)K * N; i++) b[i] = (float)(i % 5) * 0.1f;
    double best = 0;
    Tape t; /* for the bf16 path's conversions */
    tape_init(&t, 1 << 20);
    t.eng.precision = bf16 ? PRECISION_BF16 : PRECISION_FP32;
    t.eng.bf16_matmul = bf16 && gemm_cpu_has_amx(); /* as engine_init: the step's own path */
    t.eng.gemm = openblas ? GEMM_LIB_OPENBLAS : GEMM_LIB_ONEDNN;
    for (int r = 0; r < 6; r++) {
        double t0 = now_s();
        tape_gemm(&t, false, true, M, N, K, 1.0f, a, K, b, K, 0.0f, c, N); /* bf16: conversions included, as in the step */
        double dt = now_s() - t0;
        if (r > 0 && 2.0 * M * N * K / dt / 1e9 > best) best = 2.0 * M * N * K / dt / 1e9;
    }
    tape_free(&t);
    free(a);
    free(b);
    free(c);
    return best;
}

/* Decodes the test set: greedy (stopping at <eos>), greedy for exactly `full` steps when
 * full > 0, or beam search; returns sentences per second. */
static double decode_rate(Tape *t, Seq2Seq *m, const Dataset *test, int bs, int beam, int full, long *out_tokens) {
    BatchPlan ep;
    batchplan_make(&ep, test, bs, 0, 0, NULL);
    Batch b;
    batch_init(&b);
    double d0 = now_s();
    *out_tokens = 0;
    const int L = 50;
    int32_t *o = s2s_xmalloc((size_t)bs * L * sizeof *o);
    int *ol = s2s_xmalloc((size_t)bs * sizeof *ol);
    int32_t *tok = s2s_xmalloc((size_t)bs * sizeof *tok);
    for (int k = 0; k < ep.n_batches; k++) {
        batch_fill(&b, test, ep.order + ep.start[k], ep.start[k + 1] - ep.start[k]);
        tape_reset(t);
        if (full) { /* every row, every step: argmax fed back, <eos> ignored */
            tape_enter_inference(t); /* this tape only decodes */
            DecodeState ds;
            model_decode_start(t, m, &b, 1, full, &ds);
            for (int i = 0; i < b.B; i++) tok[i] = TOK_SOS;
            for (int step = 0; step < full; step++) {
                model_decode_step_pick(t, m, &ds, tok, NULL, tok); /* as greedy decoding picks */
                model_decode_settle(t, m, &ds, step);
            }
            *out_tokens += (long)b.B * full;
        } else if (beam == 1) {
            model_greedy(t, m, &b, L, o, ol, NULL);
            for (int i = 0; i < b.B; i++) *out_tokens += ol[i];
        } else {
            BeamHyp *h = s2s_xcalloc((size_t)b.B, sizeof *h);
            model_beam(t, m, &b, beam, L, 1.0f, 1, h);
            for (int i = 0; i < b.B; i++) *out_tokens += h[i].len;
            beam_hyps_free(h, b.B);
            free(h);
        }
    }
    double dt = now_s() - d0;
    free(o);
    free(ol);
    free(tok);
    batch_free(&b);
    batchplan_free(&ep);
    return test->n / dt;
}

static int by_time(const void *a, const void *b) {
    double x = ((const GemmShapeStat *)a)->seconds, y = ((const GemmShapeStat *)b)->seconds;
    return (x < y) - (x > y);
}

/* The products timed into st over `seconds` of a phase ("train": the timed steps;
 * "greedy_full": the fixed-length greedy decoding) by shape, slowest first, each beside the
 * same shape on a oneDNN matmul primitive (none for int8); then all of them: the phase's GEMM
 * rate against the primitives' on the same shapes (the shapes that make 98 % of the GEMM
 * time, at most 80 of them). */
static void print_gemm_profile(Tape *t, GemmStats *st, double seconds, const char *prec, const char *phase) {
    qsort(st->items, (size_t)st->n, sizeof *st->items, by_time);
    double total = 0, flops = 0;
    for (int i = 0; i < st->n; i++) {
        total += st->items[i].seconds;
        flops += 2.0 * st->items[i].M * st->items[i].N * st->items[i].K * st->items[i].calls;
    }
    double covered = 0, cov_flops = 0, prim_s = 0;
    for (int i = 0; i < st->n && i < 80 && covered < 0.98 * total; i++) {
        const GemmShapeStat *s = &st->items[i];
        double f = 2.0 * s->M * s->N * s->K * s->calls;
        bool b16 = s->path == GEMM_PATH_BF16_GEMM || s->path == GEMM_PATH_BF16_MATMUL || s->path == GEMM_PATH_BF16_PACKED;
        /* in the type it ran in; none for int8 (quantising is part of its path) */
        bool int8 = s->path == GEMM_PATH_INT8 || s->path == GEMM_PATH_Q8;
        GemmCtx g = tape_gemm_ctx(t);
        double prim = s->path == GEMM_PATH_ROW || int8 ? 0 : gemm_primitive_rate(&g, s, b16);
        if (prim > 0) {
            covered += s->seconds;
            cov_flops += f;
            prim_s += f / (prim * 1e9);
        }
        if (i < 15)
            printf("{\"event\":\"gemm_shape\",\"path\":\"%s\",\"ta\":%d,\"tb\":%d,\"M\":%d,\"N\":%d,\"K\":%d,"
                   "\"calls\":%ld,\"ms\":%.1f,\"gflops\":%.1f,\"primitive_gflops\":%.1f}\n",
                   GEMM_PATH_NAMES[s->path], s->ta, s->tb, s->M, s->N, s->K, s->calls, 1e3 * s->seconds,
                   f / s->seconds / 1e9, prim);
    }
    /* every product by back end: many small shapes can hide below the slowest 15 */
    for (int p = 0; p < GEMM_PATH_COUNT; p++) {
        long calls = 0;
        double sec = 0, f = 0;
        for (int i = 0; i < st->n; i++) {
            const GemmShapeStat *s = &st->items[i];
            if ((int)s->path != p) continue;
            calls += s->calls;
            sec += s->seconds;
            f += 2.0 * s->M * s->N * s->K * s->calls;
        }
        if (calls)
            printf("{\"event\":\"gemm_path\",\"path\":\"%s\",\"calls\":%ld,\"ms\":%.1f,\"share\":%.3f,\"gflops\":%.1f}\n",
                   GEMM_PATH_NAMES[p], calls, 1e3 * sec, sec / total, f / sec / 1e9);
    }
    printf("{\"event\":\"gemm_profile\",\"phase\":\"%s\",\"precision\":\"%s\",\"shapes\":%d,\"step_s\":%.3f,"
           "\"gemm_s\":%.3f,\"gemm_share\":%.3f,\"gemm_gflops\":%.1f,\"shapes_compared\":%.3f,"
           "\"primitive_gflops_same_shapes\":%.1f,\"step_gemm_vs_primitive\":%.3f,\"argmax_rows\":%ld,"
           "\"exact_logits_per_row\":%.2f}\n",
           phase, prec, st->n, seconds, total, total / seconds, flops / total / 1e9, covered / total,
           prim_s > 0 ? cov_flops / prim_s / 1e9 : 0.0, prim_s > 0 ? (cov_flops / covered) / (cov_flops / prim_s) : 0.0,
           st->argmax_rows, st->argmax_rows ? (double)st->argmax_exact / st->argmax_rows : 0.0);
    fflush(stdout);
    gemm_stats_free(st);
}

/* The decoding runs, in the order they are measured. */
typedef struct DecodeRun {
    const char *name;
    int beam, full;
} DecodeRun;
static const DecodeRun DECODE_RUNS[] = {{"greedy", 1, 0}, {"greedy_full", 1, 50}, {"beam", 5, 0}};
enum { DECODE_RUN_COUNT = sizeof DECODE_RUNS / sizeof *DECODE_RUNS };

/* "greedy,beam" into a mask of DECODE_RUNS. */
static S2sStatus parse_modes(const char *list, unsigned *mask, S2sError *err) {
    *mask = 0;
    for (const char *p = list;;) {
        size_t n = strcspn(p, ",");
        int r = 0;
        while (r < DECODE_RUN_COUNT && !(strlen(DECODE_RUNS[r].name) == n && !strncmp(p, DECODE_RUNS[r].name, n))) r++;
        if (r == DECODE_RUN_COUNT)
            return s2s_fail(err, S2S_ERR_CONFIG, "--decode-modes: '%.*s' is not one of greedy, greedy_full, beam",
                            (int)(n < 64 ? n : 64), p);
        *mask |= 1u << r;
        if (!p[n]) return S2S_OK;
        p += n + 1;
    }
}

static void usage(FILE *f) {
    fprintf(f, "usage: speed [--config NAME] [--model FILE] [--warmup N] [--iters N] [--no-train] [--no-decode]\n"
               "             [--decode-batch N] [--decode-modes LIST] [--repeat N] [--gemm-profile] [--set key=value]...\n"
               "\n"
               "Measures training and decoding throughput of a config (default multi30k) on this machine and prints\n"
               "one JSON line per measurement: --warmup batches first, then --iters timed ones (default 5 and 60).\n"
               "--gemm-profile times every product of the timed training steps and prints the slowest shapes, the\n"
               "products by back end, and the step's GEMM rate beside oneDNN matmul primitives' on the same shapes\n"
               "(slows the step a little); then the same for the fixed-length greedy decoding (\"phase\").\n"
               "--decode-modes takes some of greedy, greedy_full (50 steps for every sentence) and beam (5), comma-\n"
               "separated (default all three); --repeat N measures each N times, a line each (\"rep\": 0 .. N-1), to\n"
               "time two builds by alternating them on a machine whose speed drifts.\n"
               "Under mpirun (mpirun -np 2 ./speed --no-decode --set threads=1) the training steps run as ranks of a\n"
               "data-parallel run, and the line adds the gradient sum's time per batch.\n");
}

/* The command line. */
typedef struct Opts {
    const char *config, *model_path;
    int warmup, iters, decode_batch, repeat;
    unsigned modes;
    bool decode, train, profile;
    const char *sets[64];
    int n_sets;
} Opts;

/* Returns -1 to go on, else the exit code. */
static int parse_options(int argc, char **argv, Opts *o) {
    *o = (Opts){.config = "multi30k", .warmup = 5, .iters = 60, .decode_batch = 128, .repeat = 1,
                .modes = (1u << DECODE_RUN_COUNT) - 1, .decode = true, .train = true};
    S2sError err;
    enum {
        O_CONFIG = ARGS_OWN,
        O_MODEL,
        O_WARMUP,
        O_ITERS,
        O_DECODE_BATCH,
        O_NO_DECODE,
        O_NO_TRAIN,
        O_SET,
        O_PROFILE,
        O_MODES,
        O_REPEAT
    };
    static const struct option LONG[] = {
        {"help", no_argument, NULL, 'h'},         {"config", required_argument, NULL, O_CONFIG},
        {"model", required_argument, NULL, O_MODEL}, {"warmup", required_argument, NULL, O_WARMUP},
        {"iters", required_argument, NULL, O_ITERS}, {"decode-batch", required_argument, NULL, O_DECODE_BATCH},
        {"no-decode", no_argument, NULL, O_NO_DECODE}, {"no-train", no_argument, NULL, O_NO_TRAIN},
        {"set", required_argument, NULL, O_SET},  {"gemm-profile", no_argument, NULL, O_PROFILE},
        {"decode-modes", required_argument, NULL, O_MODES}, {"repeat", required_argument, NULL, O_REPEAT},
        {"version", no_argument, NULL, ARGS_VERSION}, {NULL, 0, NULL, 0}};
    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, ":h", LONG, NULL)) != -1) {
        S2sStatus bad = S2S_OK;
        switch (opt) {
        case O_CONFIG: o->config = optarg; break;
        case O_MODEL: o->model_path = optarg; break;
        case O_WARMUP: bad = args_int("--warmup", optarg, 0, 1000000, &o->warmup, &err); break;
        case O_ITERS: bad = args_int("--iters", optarg, 1, 1000000, &o->iters, &err); break;
        case O_DECODE_BATCH: bad = args_int("--decode-batch", optarg, 1, 100000, &o->decode_batch, &err); break;
        case O_NO_DECODE: o->decode = false; break;
        case O_NO_TRAIN: o->train = false; break;
        case O_PROFILE: o->profile = true; break;
        case O_MODES: bad = parse_modes(optarg, &o->modes, &err); break;
        case O_REPEAT: bad = args_int("--repeat", optarg, 1, 1000, &o->repeat, &err); break;
        case O_SET:
            if (o->n_sets == 64) bad = s2s_fail(&err, S2S_ERR_CONFIG, "too many --set options");
            else o->sets[o->n_sets++] = optarg;
            break;
        default: return args_common(opt, "speed", usage, argv, optind, optopt);
        }
        if (bad) {
            fprintf(stderr, "speed: %s\n", err.msg);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "speed: %s: unexpected argument (see speed --help)\n", argv[optind]);
        return 2;
    }
    if (argc == 1) { /* a benchmark takes minutes: never started by a bare name */
        usage(stderr);
        return 2;
    }
    return -1;
}

/* What is timed: the config, its data, the model (a model file's, or initialised from the
 * seed), a tape as the config asks. */
typedef struct Bench {
    Config cfg;
    TaskData d;
    Seq2Seq m;
    Tape t;
    bool has_data, has_model, has_tape;
} Bench;

/* Returns -1 to go on, else the exit code. */
static int bench_load(const Opts *o, Bench *w) {
    S2sError err;
    Vocab msrc, mtrg;
    config_defaults(&w->cfg);
    if (o->model_path) { /* the model's own config and weights */
        if (model_load_file(&w->m, &w->cfg, &msrc, &mtrg, o->model_path, &err)) {
            fprintf(stderr, "speed: %s\n", err.msg);
            return 1;
        }
        vocab_free(&msrc);
        vocab_free(&mtrg);
        w->has_model = true;
    } else {
        char path[PATH_MAX];
        config_find_file(o->config, path, sizeof path);
        if (config_load(&w->cfg, path, &err)) {
            fprintf(stderr, "speed: %s\n", err.msg);
            return 2;
        }
    }
    for (int i = 0; i < o->n_sets; i++)
        if (config_set(&w->cfg, o->sets[i], &err)) {
            fprintf(stderr, "speed: %s\n", err.msg);
            return 2;
        }
    if (o->train && w->cfg.train.precision == PRECISION_INT8) {
        fprintf(stderr, "speed: precision int8 decodes only: add --no-train\n");
        return 2;
    }
    const ConfigTrain *tc = &w->cfg.train;
    if (tape_init_engine(&w->t, tc->precision, tc->gemm, tc->threads, "speed: \"precision\": \"bf16\"", &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 2;
    }
    w->has_tape = true;
    if (task_load(&w->d, &w->cfg.task, &err)) {
        fprintf(stderr, "speed: %s\n", err.msg);
        return 1;
    }
    w->has_data = true;
    if (w->has_model) {
        if (w->d.src_vocab.size != w->m.src_vocab || w->d.trg_vocab.size != w->m.trg_vocab) {
            fprintf(stderr, "speed: %s: vocabularies %d/%d, but the data give %d/%d\n", o->model_path, w->m.src_vocab,
                    w->m.trg_vocab, w->d.src_vocab.size, w->d.trg_vocab.size);
            return 1;
        }
        return -1;
    }
    if (model_init(&w->m, &w->cfg.model, w->d.src_vocab.size, w->d.trg_vocab.size, &err)) {
        fprintf(stderr, "speed: %s\n", err.msg);
        return 2;
    }
    w->has_model = true;
    Rng rng;
    rng_init(&rng, (uint64_t)w->cfg.seed, RNG_STREAM_INIT);
    model_init_weights(&w->m, &rng);
    return -1;
}

/* One timed training step on batch b (k: its index, the dropout stream); returns its tokens. */
static int train_step(const Opts *o, Bench *w, const Batch *b, int k, Adam *adam, const Dist *dist, GradSum *gsum,
                      double *sum_s) {
    Tape *t = &w->t;
    const ModelLoss loss = {w->cfg.train.label_smoothing, w->cfg.train.loss_chunk}; /* as the trainer's */
    tape_reset(t);
    t->training = t->grad_enabled = true;
    t->free_values = true; /* as the trainer's step */
    t->recompute = w->cfg.train.recompute;
    t->loss_grads_early = true;
    Rng drop;
    rng_init(&drop, (uint64_t)k, RNG_STREAM_DROPOUT);
    params_freeze(&w->m.params, tape_bf16(t)); /* as the trainer's step */
    params_zero_grad(&w->m.params);
    ModelOutput out = model_forward(t, &w->m, b, &drop, &loss);
    double objective = tensor_item(out.loss, 0); /* before backward frees the values */
    int n_tok = out.n_tokens;
    float share = 1.0f;
    if (dist->size > 1) {
        double nll = out.nll, s0 = now_s();
        optim_objective_over_ranks(dist, objective, &n_tok, &nll, &share);
        if (k >= o->warmup) *sum_s += now_s() - s0;
    }
    if (dist->size > 1) optim_grad_sum_begin(gsum, t, share, optim_overlap_sum(dist, w->cfg.train.overlap_sum));
    tape_backward(t, out.loss);
    if (dist->size > 1) {
        double s0 = now_s();
        optim_grad_sum_end(gsum, t);
        if (k >= o->warmup) *sum_s += now_s() - s0;
    }
    params_thaw(&w->m.params);
    grad_clip_global_norm(&w->m.params, w->cfg.train.clip);
    adam_step(adam, &w->m.params);
    return n_tok;
}

/* The training steps timed (under mpirun: as ranks of a data-parallel run, each a share of
 * every batch, the gradient summed in rank order, timed on rank 0); one JSON line. */
static int time_training(const Opts *o, Bench *w, const Dist *dist) {
    Tape *t = &w->t;
    const ConfigTrain *tc = &w->cfg.train;
    GradSum gsum;
    if (dist->size > 1) optim_grad_sum_init(&gsum, dist, &w->m.params, (size_t)tc->sum_bucket_kb * 256);
    double sum_s = 0; /* time in the gradient sum after backward (all of it without overlap) */
    Adam adam = adam_from_config(tc);
    Rng shuf;
    rng_init(&shuf, 1, RNG_STREAM_SHUFFLE);
    BatchPlan plan;
    batchplan_make(&plan, &w->d.train, tc->batch_size, tc->batch_tokens, 100, &shuf);
    int rc = 0;
    if (o->warmup >= plan.n_batches) { /* nothing would be timed */
        fprintf(stderr, "speed: --warmup %d leaves no batch to time: the data make %d batches\n", o->warmup, plan.n_batches);
        rc = 2;
    }
    Batch b;
    batch_init(&b);
    long tokens = 0, positions = 0;
    double flops = 0, t0 = 0;
    int done = 0;
    GemmStats stats = {0};
    for (int k = 0; !rc && k < o->warmup + o->iters && k < plan.n_batches; k++) {
        if (k == o->warmup) {
            t0 = now_s();
            flops = t->flops;
            if (o->profile) t->eng.gemm_stats = &stats;
        }
        int lo = plan.start[k], nb = plan.start[k + 1] - plan.start[k];
        if (dist->size > 1) { /* this rank's share, as the trainer takes it */
            int a = (int)((long)nb * dist->rank / dist->size), z = (int)((long)nb * (dist->rank + 1) / dist->size);
            lo += a;
            nb = z - a;
        }
        S2sError err;
        if (batch_read(&b, &w->d.train, plan.order + lo, nb, &err) != S2S_OK) { /* a prepared corpus streams */
            fprintf(stderr, "speed: %s\n", err.msg);
            rc = 1;
            break;
        }
        int n_tok = train_step(o, w, &b, k, &adam, dist, &gsum, &sum_s);
        if (k >= o->warmup) {
            tokens += n_tok;
            positions += (long)(b.T - 1) * b.B;
            done++;
        }
    }
    if (!rc) {
        double dt = now_s() - t0, step_gflops = (t->flops - flops) / dt / 1e9;
        double rss = peak_rss_mb(); /* the steps': the reference GEMMs below allocate their own */
        t->eng.gemm_stats = NULL;
        if (o->profile) print_gemm_profile(t, &stats, dt, tape_bf16(t) ? "bf16" : "fp32", "train");
        int rows = (int)(positions / (done > 0 ? done : 1)), K = w->m.enc_dim + w->cfg.model.decoder_hidden;
        double ref = gemm_rate(rows, w->m.trg_vocab, K, false, tape_openblas(t));
        double ref16 = tape_bf16(t) ? gemm_rate(rows, w->m.trg_vocab, K, true, false) : 0;
        const char *lib = GEMM_LIB_NAMES[tape_bf16(t) ? GEMM_LIB_ONEDNN : tc->gemm]; /* bf16 is oneDNN's only */
        if (dist->rank == 0)
        printf("{\"event\":\"train\",\"ranks\":%d,\"machines\":%d,\"overlap_sum\":%s,\"params\":%zu,\"sum_ms_per_batch\":%.2f,\"threads\":%d,\"precision\":\"%s\",\"gemm\":\"%s\",\"attention\":\"%s\",\"batches\":%d,\"trg_tokens\":%ld,"
               "\"trg_positions\":%ld,\"seconds\":%.3f,\"tok_per_s\":%.1f,\"ms_per_batch\":%.1f,\"gemm_gflops\":%.1f,"
               "\"sgemm_gflops_output_shape\":%.1f,\"bf16_gemm_gflops_output_shape\":%.1f,\"arena_peak_mb\":%.1f,"
               "\"peak_rss_mb\":%.1f,\"openblas_core\":\"%s\"}\n",
               dist->size, dist->machines, dist->size > 1 && optim_overlap_sum(dist, tc->overlap_sum) ? "true" : "false",
               params_numel(&w->m.params), 1e3 * sum_s / (done > 0 ? done : 1), tc->threads, PRECISION_NAMES[tc->precision], lib,
               model_label(&w->cfg.model), done, tokens, positions, dt, tokens / dt,
               1e3 * dt / (done > 0 ? done : 1), step_gflops, ref, ref16, (double)t->arena.peak / 1048576.0, rss,
               gemm_openblas_core());
        fflush(stdout);
    }
    batch_free(&b);
    batchplan_free(&plan);
    if (dist->size > 1) optim_grad_sum_free(&gsum);
    return rc;
}

/* Decoding of the test split timed in each mode asked for, --repeat times; a JSON line each. */
static void time_decoding(const Opts *o, Bench *w) {
    Tape *t = &w->t;
    const char *prec = PRECISION_NAMES[w->cfg.train.precision];
    const char *lib = GEMM_LIB_NAMES[tape_bf16(t) ? GEMM_LIB_ONEDNN : w->cfg.train.gemm];
    const Dataset *test = &w->d.test;
    params_freeze(&w->m.params, tape_bf16(t));
    decode_rate(t, &w->m, test, o->decode_batch, 1, 0, &(long){0}); /* warm-up (pages, thread pools) */
    for (int r = 0; r < DECODE_RUN_COUNT; r++)
        for (int k = 0; k < o->repeat && (o->modes >> r & 1); k++) {
            const DecodeRun *run = &DECODE_RUNS[r];
            bool prof = o->profile && run->full && k == 0;
            long out_tokens;
            GemmStats dstats = {0};
            if (prof) t->eng.gemm_stats = &dstats;
            double rate = decode_rate(t, &w->m, test, o->decode_batch, run->beam, run->full, &out_tokens);
            t->eng.gemm_stats = NULL;
            printf("{\"event\":\"decode\",\"precision\":\"%s\",\"gemm\":\"%s\",\"mode\":\"%s\",\"beam\":%d,\"weights\":\"%s\","
                   "\"batch\":%d,\"sentences\":%d,\"sent_per_s\":%.1f,\"out_tokens\":%ld,\"peak_rss_mb\":%.1f,\"rep\":%d}\n",
                   prec, lib, run->name, run->beam, o->model_path ? "trained" : "random", o->decode_batch, test->n, rate,
                   out_tokens, peak_rss_mb(), k);
            if (prof) print_gemm_profile(t, &dstats, test->n / rate, prec, "greedy_full");
            fflush(stdout);
        }
}

static void bench_free(Bench *w) {
    if (w->has_tape) tape_free(&w->t);
    if (w->has_model) model_free(&w->m);
    if (w->has_data) task_free(&w->d);
}

int main(int argc, char **argv) {
    Opts o;
    int rc = parse_options(argc, argv, &o);
    if (rc >= 0) return rc;
    Bench *w = s2s_xcalloc(1, sizeof *w);
    rc = bench_load(&o, w);
    if (rc >= 0) {
        bench_free(w);
        free(w);
        return rc;
    }
    Dist dist;
    S2sError err;
    if (dist_init(&dist, &argc, &argv, &err)) {
        fprintf(stderr, "speed: %s\n", err.msg);
        bench_free(w);
        free(w);
        return 1;
    }
    bool decode = o.decode;
    if (dist.size > 1 && decode) {
        if (dist.rank == 0) fprintf(stderr, "speed: under mpirun only the training steps are timed (decoding is one process's)\n");
        decode = false;
    }
    rc = o.train ? time_training(&o, w, &dist) : 0;
    if (!rc && decode) time_decoding(&o, w);
    dist_finalize(&dist);
    bench_free(w);
    free(w);
    return rc;
}
