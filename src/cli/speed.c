/* speed — throughput of the Multi30k model on this machine: training target tokens per
 * second over a fixed set of length-bucketed batches after warm-up, greedy and beam-5
 * decoding of the test set (sentences per second), peak RSS, and the step's GEMM rate
 * against a plain sgemm of the output layer's shape. One JSON line per measurement.
*   speed [--config multi30k] [--warmup 5] [--iters 60] [--no-decode] [--set key=value]... */
#include "s2s/eval.h"
#include "s2s/gemm.h"
#include "s2s/optim.h"

#include <cblas.h>
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
static double sgemm_rate(int M, int N, int K) {
    float *a = calloc((size_t)M * K, sizeof *a), *b = calloc((size_t)K * N, sizeof *b), *c = calloc((size_t)M * N, sizeof *c);
    for (size_t i = 0; i < (size_t)M * K; i++) a[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < (size_t)K * N; i++) b[i] = (float)(i % 5) * 0.1f;
    double best = 0;
    for (int r = 0; r < 6; r++) {
        double t0 = now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, b, K, 0.0f, c, N);
        double dt = now_s() - t0;
        if (r > 0 && 2.0 * M * N * K / dt / 1e9 > best) best = 2.0 * M * N * K / dt / 1e9;
    }
    free(a);
    free(b);
    free(c);
    return best;
}

int main(int argc, char **argv) {
    const char *config = "multi30k";
    int warmup = 5, iters = 60;
    bool decode = true;
    Config cfg;
    config_defaults(&cfg);
    const char *sets[64];
    int n_sets = 0;
    for (int i = 1; i < argc; i++) {
        bool v = i + 1 < argc;
        if (!strcmp(argv[i], "--config") && v) config = argv[++i];
        else if (!strcmp(argv[i], "--warmup") && v) warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--iters") && v) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-decode")) decode = false;
        else if (!strcmp(argv[i], "--set") && v && n_sets < 64) sets[n_sets++] = argv[++i];
        else {
            fprintf(stderr, "usage: speed [--config NAME] [--warmup N] [--iters N] [--no-decode] [--set key=value]...\n");
            return 2;
        }
    }
    char path[PATH_MAX];
    S2sError err;
    config_find_file(config, path, sizeof path);
    if (config_load(&cfg, path, &err)) {
        fprintf(stderr, "speed: %s\n", err.msg);
        return 2;
    }
    for (int i = 0; i < n_sets; i++)
        if (config_set(&cfg, sets[i], &err)) {
            fprintf(stderr, "speed: %s\n", err.msg);
            return 2;
        }
    gemm_set_threads(cfg.train.threads);
    bool bf16 = strcmp(cfg.train.precision, "bf16") == 0;
    if (bf16 && gemm_bf16_check("speed: \"precision\": \"bf16\"", &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 2;
    }
    TaskData d;
    if (task_load(&d, &cfg.task, &err)) {
        fprintf(stderr, "speed: %s\n", err.msg);
        return 1;
    }
    Seq2Seq m;
    if (model_init(&m, &cfg.model, d.src_vocab.size, d.trg_vocab.size, &err)) {
        fprintf(stderr, "speed: %s\n", err.msg);
        return 2;
    }
    Rng rng;
    rng_init(&rng, (uint64_t)cfg.seed, RNG_STREAM_INIT);
    model_init_weights(&m, &rng);
    Tape t;
    tape_init(&t, 1 << 24);
    t.bf16 = bf16;
    Adam adam = adam_default();
    adam.lr = cfg.train.lr;
    Rng shuf;
    rng_init(&shuf, 1, RNG_STREAM_SHUFFLE);
    BatchPlan plan;
    batchplan_make(&plan, &d.train, cfg.train.batch_size, cfg.train.batch_tokens, 100, &shuf);
    Batch b;
    batch_init(&b);
    long tokens = 0, positions = 0;
    double flops = 0, t0 = 0;
    for (int k = 0; k < warmup + iters && k < plan.n_batches; k++) {
        if (k == warmup) {
            t0 = now_s();
            flops = t.flops;
        }
        batch_fill(&b, &d.train, plan.order + plan.start[k], plan.start[k + 1] - plan.start[k]);
        tape_reset(&t);
        t.training = true;
        Rng drop;
        rng_init(&drop, (uint64_t)k, RNG_STREAM_DROPOUT);
        ModelOutput o = model_forward(&t, &m, &b, &drop);
        params_zero_grad(&m.params);
        tape_backward(&t, o.loss);
        grad_clip_global_norm(&m.params, cfg.train.clip);
        adam_step(&adam, &m.params);
        if (k >= warmup) {
            tokens += o.n_tokens;
            positions += (long)(b.T - 1) * b.B;
        }
    }
    double dt = now_s() - t0, step_gflops = (t.flops - flops) / dt / 1e9;
    int rows = (int)(positions / (iters > 0 ? iters : 1));
    double ref = sgemm_rate(rows, m.trg_vocab, m.enc_dim + cfg.model.decoder_hidden);
    printf("{\"event\":\"train\",\"attention\":\"%s\",\"batches\":%d,\"trg_tokens\":%ld,\"trg_positions\":%ld,\"seconds\":%.3f,"
           "\"tok_per_s\":%.1f,\"ms_per_batch\":%.1f,\"gemm_gflops\":%.1f,\"sgemm_gflops_output_shape\":%.1f,"
           "\"arena_peak_mb\":%.1f,\"peak_rss_mb\":%.1f}\n",
           cfg.model.attention, iters, tokens, positions, dt, tokens / dt, 1e3 * dt / iters, step_gflops, ref,
           (double)t.arena.peak / 1048576.0, peak_rss_mb());
    fflush(stdout);
    if (decode) {
        for (int beam = 1; beam <= 5; beam += 4) {
            BatchPlan ep;
            batchplan_make(&ep, &d.test, 128, 0, 0, NULL);
            double d0 = now_s();
            long out_tokens = 0;
            for (int k = 0; k < ep.n_batches; k++) {
                batch_fill(&b, &d.test, ep.order + ep.start[k], ep.start[k + 1] - ep.start[k]);
                tape_reset(&t);
                int L = 50;
                if (beam == 1) {
                    int32_t *o = malloc((size_t)b.B * L * sizeof *o);
                    int *ol = malloc((size_t)b.B * sizeof *ol);
                    model_greedy(&t, &m, &b, L, o, ol, NULL);
                    for (int i = 0; i < b.B; i++) out_tokens += ol[i];
                    free(o);
                    free(ol);
                } else {
                    BeamHyp *h = calloc((size_t)b.B, sizeof *h);
                    model_beam(&t, &m, &b, beam, L, 1.0f, 1, h);
                    for (int i = 0; i < b.B; i++) out_tokens += h[i].len;
                    beam_hyps_free(h, b.B);
                    free(h);
                }
            }
            double ddt = now_s() - d0;
            printf("{\"event\":\"decode\",\"beam\":%d,\"sentences\":%d,\"seconds\":%.3f,\"sent_per_s\":%.1f,\"out_tokens\":%ld,"
                   "\"peak_rss_mb\":%.1f}\n",
                   beam, d.test.n, ddt, d.test.n / ddt, out_tokens, peak_rss_mb());
            fflush(stdout);
            batchplan_free(&ep);
        }
    }
    batch_free(&b);
    batchplan_free(&plan);
    tape_free(&t);
    model_free(&m);
    task_free(&d);
    return 0;
}
