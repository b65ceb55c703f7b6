/* test_dist.c — the ranks' sums: one rank without mpirun (sums are the values), and under
 * mpirun with 2 and 3 ranks (tests/mpi/dist_check.c) the rank-order sums bit for bit on
 * every rank, where the build has MPI and mpirun is installed. */
#include "test_util.h"
#include "s2s/checkpoint.h"
#include "s2s/dist.h"
#include "s2s/model.h"
#include "s2s/optim.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Open MPI does not free what MPI_Init allocates (in itself and in the components it loads and
 * unloads, which LeakSanitizer cannot name for a suppression): processes under mpirun run
 * without the leak check in the sanitizer build; the same code is leak-checked as one process. */
#define MPI_ENV "ASAN_OPTIONS=detect_leaks=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1"
#define MPIRUN MPI_ENV " mpirun"

Test(dist, one_rank_without_mpirun) {
    Dist d;
    S2sError err;
    int argc = 1;
    char *args[] = {"x", NULL}, **argv = args;
    cr_assert_eq(dist_init(&d, &argc, &argv, &err), S2S_OK);
    cr_expect(d.rank == 0 && d.size == 1 && d.machines == 1 && !d.mpi);
    float x[3] = {1.5f, -2, 3};
    cr_expect_eq(dist_scratch_floats(&d, 3), 0);
    dist_sum_floats(&d, x, 3, NULL);
    cr_expect(x[0] == 1.5f && x[1] == -2 && x[2] == 3);
    double y[2] = {0.25, 7};
    dist_sum_doubles(&d, y, 2);
    cr_expect(y[0] == 0.25 && y[1] == 7);
    cr_expect_eq(dist_max_int(&d, 5), 5);
    dist_finalize(&d);
}

/* Skips the running test where there is no MPI to run ranks with; else a folder of the test's
 * own, made its TMPDIR: Open MPI 4's mpiruns share $TMPDIR/ompi.<host>.<uid> and the one that
 * ends removes it, failing one starting beside it (tests run in parallel; compare.c says more). */
static char *require_mpi(void) {
    if (!dist_available() || tu_sh("command -v mpirun > /dev/null") != 0)
        TU_SKIP("no MPI in this build or no mpirun: the test's ranks are not run");
    char *d = tu_tmpdir();
    setenv("TMPDIR", d, 1);
    return d;
}

Test(dist, sums_in_rank_order_under_mpirun, .timeout = 120) {
    char *d = require_mpi();
    for (int np = 2; np <= 3; np++) {
        int rc = tu_sh(MPIRUN " -np %d %s/../tests/dist_check > %s/out.txt 2>&1", np, tu_bin(), d);
        char *out = tu_slurp(tu_path(d, "out.txt"), NULL);
        char want[64];
        snprintf(want, sizeof want, "dist_check: %d ranks: sums in rank order", np);
        cr_expect(rc == 0 && out && strstr(out, want), "mpirun -np %d: exit %d\n%s", np, rc, out ? out : "");
        free(out);
    }
    tu_rm_rf(d);
    free(d);
}

/* A checkpoint's weights against another's: the largest absolute difference. */
static double weight_gap(const char *a, const char *b) {
    Checkpoint x, y;
    S2sError err;
    cr_assert_eq(ckpt_load(&x, a, &err), S2S_OK, "%s", err.msg);
    cr_assert_eq(ckpt_load(&y, b, &err), S2S_OK, "%s", err.msg);
    cr_assert_eq(x.n_tensors, y.n_tensors);
    double worst = 0;
    for (int t = 0; t < x.n_tensors; t++)
        for (size_t i = 0; i < x.tensors[t].size; i++) {
            float p, q;
            memcpy(&p, (const char *)x.tensors[t].data + 4 * i, 4);
            memcpy(&q, (const char *)y.tensors[t].data + 4 * i, 4);
            worst = fmax(worst, fabs((double)p - q));
        }
    ckpt_free(&x);
    ckpt_free(&y);
    return worst;
}

static const char *SMALL_MPI =
    "{\"name\": \"m\", \"seed\": 3, \"task\": {\"type\": \"reverse\", \"alphabet\": \"abcdef\", \"min_len\": 3, \"max_len\": 10, "
    "\"train_size\": 1000, \"valid_size\": 50, \"test_size\": 50}, \"model\": {\"cell\": \"gru\", \"embedding\": 16, "
    "\"encoder_hidden\": 24, \"decoder_hidden\": 24, \"attention\": \"dot\", \"combine\": \"luong\", \"dropout\": 0.0}, "
    "\"train\": {\"epochs\": 2, \"batch_size\": 32, \"lr\": 0.005, \"threads\": 1}}";

/* mpirun -np 2: two runs give the same files bit for bit; against one process over the same
 * global batches the weights after 64 steps agree within 1e-4 (the gradient is summed in
 * another order: float32 rounding, here about 4e-7) and so do the logged losses; rank 0
 * alone writes. A batch smaller than the ranks and ranks with different configs are refused
 * on every rank, exit 2. */
Test(dist, two_ranks_train_as_one_process, .timeout = 240) {
    char *d = require_mpi();
    FILE *f = fopen(tu_path(d, "m.json"), "w");
    fputs(SMALL_MPI, f);
    fclose(f);
    cr_assert_eq(tu_sh("%s/train --config %s/m.json --out %s/one > /dev/null", tu_bin(), d, d), 0);
    /* twice the same, the gradients summed in 1 KB buckets while backward runs; then in one
     * sum after backward: the same weights and moments */
    const char *sets[3] = {"sum_bucket_kb=1 --set overlap_sum=on", "sum_bucket_kb=1 --set overlap_sum=on", "overlap_sum=off"};
    for (int k = 0; k < 3; k++) {
        char out[32];
        snprintf(out, sizeof out, "out%d.txt", k);
        cr_assert_eq(tu_sh(MPIRUN " -np 2 %s/train --config %s/m.json --set %s --out %s/two%d > %s/%s 2>&1", tu_bin(), d, sets[k], d,
                           k, d, out),
                     0, "%s", tu_slurp(tu_path(d, out), NULL));
    }
    char why[256] = "";
    cr_expect(tu_same_file(tu_path(d, "two0/model.bin"), tu_path(d, "two1/model.bin")), "two -np 2 runs: model.bin differs");
    cr_expect(tu_same_checkpoint(tu_path(d, "two0/last.bin"), tu_path(d, "two1/last.bin"), why, sizeof why), "last.bin: %s", why);
    cr_expect_eq(weight_gap(tu_path(d, "two0/last.bin"), tu_path(d, "two2/last.bin")), 0.0, "with and without overlap");
    cr_expect_eq(weight_gap(tu_path(d, "two0/model.bin"), tu_path(d, "two2/model.bin")), 0.0, "with and without overlap");
    double gap = weight_gap(tu_path(d, "one/last.bin"), tu_path(d, "two0/last.bin"));
    cr_expect_lt(gap, 1e-4, "one process and two ranks: weights differ by %g", gap);
    cr_expect_gt(gap, 0, "the sums' order differs: some weight should show it");
    char *out = tu_slurp(tu_path(d, "out0.txt"), NULL);
    cr_expect(out && strstr(out, "train: 2 ranks on 1 machine") && strstr(out, "summed while backward runs") &&
                  strstr(out, "test (best checkpoint)"),
              "%s", out ? out : "");
    free(out);
    out = tu_slurp(tu_path(d, "out2.txt"), NULL);
    cr_expect(out && strstr(out, "summed after backward"), "%s", out ? out : "");
    free(out);
    char *la = tu_log_without_timing(tu_path(d, "one/log.jsonl")), *lb = tu_log_without_timing(tu_path(d, "two0/log.jsonl"));
    int epochs = 0;
    for (const char *p = la, *q = lb; (p = strstr(p, "\"train_loss\":")) && (q = strstr(q, "\"train_loss\":")); p++, q++) {
        double x = atof(p + 13), y = atof(q + 13);
        cr_expect_lt(fabs(x - y), 1e-6 * fabs(x), "train_loss %g and %g", x, y);
        epochs++;
    }
    cr_expect_eq(epochs, 2);
    free(la);
    free(lb);
    /* refused: a batch smaller than the ranks; ranks with different configs */
    cr_expect_eq(tu_sh(MPIRUN " -np 2 %s/train --config %s/m.json --set batch_size=1 --out %s/x > %s/err.txt 2>&1", tu_bin(), d, d, d), 2);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "smaller than the 2 ranks"), "%s", tu_slurp(tu_path(d, "err.txt"), NULL));
    cr_expect_eq(tu_sh(MPIRUN " -np 1 %s/train --config %s/m.json --out %s/y : -np 1 %s/train --config %s/m.json --set lr=0.01 "
                       "--out %s/y > %s/err.txt 2>&1",
                       tu_bin(), d, d, tu_bin(), d, d, d),
                 2);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "rank 1 of 2 started with another config or build than rank 0"), "%s",
              tu_slurp(tu_path(d, "err.txt"), NULL));
    cr_expect_eq(tu_sh("cd %s && ! test -e y/config.json && ! test -e y/log.jsonl", d), 0, "a refused start left a run's files");
    tu_rm_rf(d);
    free(d);
}

/* SIGTERM to rank 1 alone: every rank stops after the same step, rank 0 writes last.bin,
 * mpirun exits 143; resumed under mpirun, the run ends with the model an uninterrupted -np 2
 * run makes (dropout on: each rank's masks come back too). A paused (--pause-at) run resumed
 * gives that model as well, with rank 1 started where the run folder is not (machines without a
 * shared folder: rank 0 sends last.bin). */
Test(dist, a_signal_on_one_rank_stops_all_and_resume_is_exact, .timeout = 300) {
    char *d = require_mpi();
    FILE *f = fopen(tu_path(d, "m.json"), "w");
    fputs(SMALL_MPI, f);
    fclose(f);
    const char *set = "--set dropout=0.2 --set train_size=20000 --set epochs=2 --set log_every=5";
    cr_assert_eq(tu_sh(MPIRUN " -np 2 %s/train --config %s/m.json %s --out %s/full > /dev/null 2>&1", tu_bin(), d, set, d), 0);
    /* started in the background; SIGTERM to rank 1 once the log shows steps (the pattern names
     * this run's folder: tests running beside it start trainings with the same config name) */
    int rc = tu_sh("cd %s && (" MPIRUN " -np 2 %s/train --config m.json %s --out part > out.txt 2>&1; echo $? > rc.txt) & "
                   "for i in $(seq 1 600); do grep -q '\"type\":\"step\"' %s/part/log.jsonl 2>/dev/null && break; sleep 0.05; done; "
                   "kill -TERM $(pgrep -f '^%s/train --config m.json .*--out part$' | sort -n | tail -1); wait",
                   d, tu_bin(), set, d, tu_bin());
    cr_assert_eq(rc, 0);
    char *code = tu_slurp(tu_path(d, "rc.txt"), NULL);
    cr_expect(code && atoi(code) == 143, "mpirun exit %s\n%s", code ? code : "?", tu_slurp(tu_path(d, "out.txt"), NULL));
    free(code);
    cr_expect(tu_file_has(tu_path(d, "out.txt"), "train: interrupted after step"), "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    cr_assert_eq(tu_sh(MPIRUN " -np 2 %s/train --resume %s/part > /dev/null 2>&1", tu_bin(), d), 0);
    cr_expect(tu_same_file(tu_path(d, "full/model.bin"), tu_path(d, "part/model.bin")), "resumed after SIGTERM: another model");
    cr_assert_eq(tu_sh(MPIRUN " -np 2 %s/train --config %s/m.json %s --out %s/paused --pause-at 40 > /dev/null 2>&1", tu_bin(), d, set, d), 0);
    /* rank 1 resumes from another folder, where there is no run: rank 0 sends it last.bin */
    cr_assert_eq(tu_sh("mkdir -p %s/elsewhere && cd %s && " MPIRUN " -np 1 %s/train --resume paused : -np 1 -wdir %s/elsewhere "
                       "%s/train --resume paused > out2.txt 2>&1",
                       d, d, tu_bin(), d, tu_bin()),
                 0, "%s", tu_slurp(tu_path(d, "out2.txt"), NULL));
    cr_expect(tu_same_file(tu_path(d, "full/model.bin"), tu_path(d, "paused/model.bin")), "paused and resumed: another model");
    cr_expect(access(tu_path(d, "elsewhere/paused"), F_OK) != 0, "rank 1 wrote a run folder");
    tu_rm_rf(d);
    free(d);
}

/* A hostfile naming a host that does not exist: mpirun cannot start the ranks there and ends
 * with an error (Open MPI's own message: ssh's, or that no remote agent is installed) before
 * any rank starts; no run folder is made. */
Test(dist, a_missing_host_fails_before_training, .timeout = 120) {
    char *d = require_mpi();
    tu_write(tu_path(d, "hosts"), "localhost slots=1\nno-such-host.invalid slots=1\n");
    FILE *f = fopen(tu_path(d, "m.json"), "w");
    fputs(SMALL_MPI, f);
    fclose(f);
    int rc = tu_sh("cd %s && " MPIRUN " -np 2 --hostfile hosts %s/train --config m.json --out run > out.txt 2>&1", d, tu_bin());
    cr_expect_neq(rc, 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    cr_expect(access(tu_path(d, "run"), F_OK) != 0, "a run folder was made");
    tu_rm_rf(d);
    free(d);
}

/* ./compare --ranks 2 trains each run as two ranks: the model of `mpirun -np 2 ./train` with
 * the same config and seed, bit for bit. Two such jobs at once, each mpirun with a TMPDIR of
 * its own that compare removes afterwards. */
Test(dist, compare_runs_each_training_as_ranks, .timeout = 240) {
    char *d = require_mpi();
    FILE *f = fopen(tu_path(d, "m.json"), "w");
    fputs(SMALL_MPI, f);
    fclose(f);
    cr_assert_eq(tu_sh("cd %s && " MPIRUN " -np 2 %s/train --config m.json --seed 5 --out direct > /dev/null 2>&1", d, tu_bin()), 0);
    cr_assert_eq(tu_sh("cd %s && " MPI_ENV " "
                       "%s/compare --config m.json --vary model.attention=dot --seeds 5,6 --jobs 2 --ranks 2 --out cmp > out.txt 2>&1",
                       d, tu_bin()),
                 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    cr_expect(tu_file_has(tu_path(d, "out.txt"), "(2 ranks, 1 threads each)"), "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    cr_expect(tu_same_file(tu_path(d, "direct/model.bin"), tu_path(d, "cmp/dot-seed5/model.bin")),
              "compare --ranks 2 and mpirun -np 2 gave other models");
    cr_expect(tu_file_has(tu_path(d, "cmp/summary.md"), "| dot | 2 |"), "%s", tu_slurp(tu_path(d, "cmp/summary.md"), NULL));
    cr_expect_eq(tu_sh("ls -d %s/s2s-mpi.* > /dev/null 2>&1", d), 2, "compare left an mpirun folder in TMPDIR");
    tu_rm_rf(d);
    free(d);
}

/* The overlapped sum's readiness: when a bucket is called final, its part of the gradient
 * block must hold its final values already (nothing written there later in backward), for
 * every architecture's ops (tied, viewed and gathered weights, the chunked loss, the
 * recomputing GRU); every bucket goes, and the first before backward is half done. */
typedef struct Snap {
    GradSum *g;
    const float *grad;
    float *copy;    /* each bucket's values when it was called final */
    int first_move; /* the node after which the first bucket went */
    int went;
} Snap;

static void snap_after(void *ctx, int node) {
    Snap *s = ctx;
    int n = optim_grad_ready_after(s->g, node);
    for (int q = s->g->next - n; q < s->g->next; q++) {
        size_t from, to;
        dist_sum_bucket(s->g->sum, s->g->order[q], &from, &to);
        memcpy(s->copy + from, s->grad + from, (to - from) * sizeof *s->copy);
        if (!s->went++) s->first_move = node;
    }
}

Test(dist, gradients_are_final_when_their_bucket_leaves) {
    const char *cases[][6] = {
        {"model.cell=gru", "model.bidirectional=true", "model.attention=scaled_dot", "model.layers=2", "", ""},
        {"model.cell=lstm", "model.attention=multihead", "model.heads=2", "model.combine=luong", "model.tie_embeddings=decoder", ""},
        {"model.embedding_type=onehot", "model.attention=additive", "model.cell=gru", "train.recompute=true", "", ""},
        {"model.type=transformer", "model.tie_embeddings=all", "model.norm=post", "train.loss_chunk=4", "", ""},
        {"model.type=transformer", "model.norm=pre", "model.positions=learned", "model.activation=gelu", "model.layers=2", ""},
    };
    Dist one = {0, 1, 1, false};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        Config cfg;
        config_defaults(&cfg);
        const char *sizes[] = {"model.embedding=12", "model.encoder_hidden=12", "model.decoder_hidden=12", "model.kq=12",
                               "model.d_model=16",   "model.ff=24",             "model.heads=2",           "model.dropout=0.1"};
        for (int k = 0; k < 8; k++) tu_config_set(&cfg, sizes[k]);
        for (int k = 0; k < 6 && cases[c][k][0]; k++) tu_config_set(&cfg, cases[c][k]);
        int V = 13;
        Seq2Seq m;
        S2sError err;
        cr_assert_eq(model_init(&m, &cfg.model, V, V, &err), S2S_OK, "case %zu: %s", c, err.msg);
        const ModelLoss loss = {cfg.train.label_smoothing, cfg.train.loss_chunk};
        Rng rng;
        rng_init(&rng, 3, 0);
        model_init_weights(&m, &rng);
        Dataset d;
        dataset_init(&d);
        int idx[4];
        for (int b = 0; b < 4; b++) {
            int32_t src[9], trg[9];
            int ns = 4 + b, nt = 8 - b;
            for (int i = 0; i < ns; i++) src[i] = 4 + (int32_t)rng_below(&rng, (uint32_t)(V - 4));
            trg[0] = TOK_SOS;
            for (int i = 1; i < nt - 1; i++) trg[i] = 4 + (int32_t)rng_below(&rng, (uint32_t)(V - 4));
            trg[nt - 1] = TOK_EOS;
            dataset_add(&d, src, ns, trg, nt);
            idx[b] = b;
        }
        Batch bt;
        batch_init(&bt);
        batch_fill(&bt, &d, idx, 4);
        Tape t;
        tape_init(&t, 1 << 20);
        t.training = t.grad_enabled = true;
        t.free_values = true; /* as the trainer's step */
        t.recompute = cfg.train.recompute;
        t.loss_grads_early = true; /* the chunked loss's gradients are written in forward */
        params_freeze(&m.params, false);
        params_zero_grad(&m.params);
        ModelOutput o = model_forward(&t, &m, &bt, &rng, &loss);
        GradSum g;
        optim_grad_sum_init(&g, &one, &m.params, 64); /* small buckets: many of them */
        int nb = dist_sum_buckets(g.sum);
        cr_expect_gt(nb, 6, "case %zu: %d buckets", c, nb);
        optim_grad_ready_init(&g, &t);
        Snap s = {&g, m.params.grad, calloc(m.params.total, sizeof(float)), -1, 0};
        t.after_node = snap_after;
        t.after_node_ctx = &s;
        int nodes = t.n_nodes;
        tape_backward(&t, o.loss);
        params_thaw(&m.params);
        cr_expect_eq(s.went, nb, "case %zu: %d of %d buckets went", c, s.went, nb);
        cr_expect_gt(s.first_move, nodes / 2, "case %zu: the first bucket went after node %d of %d", c, s.first_move, nodes);
        size_t bad = 0, nonzero = 0;
        for (size_t i = 0; i < m.params.total; i++) {
            bad += memcmp(&s.copy[i], &m.params.grad[i], sizeof(float)) != 0;
            nonzero += m.params.grad[i] != 0;
        }
        cr_expect_eq(bad, 0, "case %zu: %zu gradient elements changed after their bucket went", c, bad);
        cr_expect_gt(nonzero, m.params.total / 4, "case %zu", c);
        free(s.copy);
        optim_grad_sum_free(&g);
        tape_free(&t);
        batch_free(&bt);
        dataset_free(&d);
        model_free(&m);
    }
}

/* Two ranks on a translation corpus prepared on the spot: rank 0 prepares the one file while
 * rank 1 waits, both then stream their own rows of every batch from it; the run gives the model
 * two ranks train on the text in memory, and a second run reads the file. */
Test(dist, two_ranks_share_one_prepared_file, .timeout = 240) {
    char *d = require_mpi();
    const char *de[4] = {"ein hund läuft", "eine frau spielt", "ein kind im park", "der mann liest"};
    const char *en[4] = {"a dog runs", "a woman plays", "a child in the park", "the man reads"};
    const char *splits[3] = {"train", "val", "test"};
    for (int k = 0; k < 3; k++) {
        char ps[64], pt[64];
        snprintf(ps, sizeof ps, "%s.de", splits[k]);
        snprintf(pt, sizeof pt, "%s.en", splits[k]);
        FILE *fs = fopen(tu_path(d, ps), "w"), *ft = fopen(tu_path(d, pt), "w");
        for (int i = 0; i < (k ? 4 : 200); i++) fprintf(fs, "%s %d\n", de[i % 4], i % 9), fprintf(ft, "%s %d\n", en[i % 4], i % 9);
        fclose(fs);
        fclose(ft);
    }
    char sets[900];
    snprintf(sets, sizeof sets,
             "--set data_dir=%s --set train_prefix=train --set valid_prefix=val --set test_prefix=test --set min_freq=1 "
             "--set subword=bpe --set bpe_merges=20 --set train.epochs=2 --set train.batch_size=16 --set train.threads=1 "
             "--set model.embedding=16 --set model.encoder_hidden=16 --set model.decoder_hidden=16 --set model.kq=8",
             d);
    const char *runs[3] = {"file", "again", "memory"};
    for (int k = 0; k < 3; k++)
        cr_assert_eq(tu_sh(MPIRUN " -np 2 %s/train --config configs/multi30k.json --out %s/%s %s --set cache_dir=%s > %s/%s.txt 2>&1",
                           tu_bin(), d, runs[k], sets, k < 2 ? tu_path(d, "cache") : "\"\"", d, runs[k]),
                     0, "%s", tu_slurp(tu_path(d, k == 0 ? "file.txt" : k == 1 ? "again.txt" : "memory.txt"), NULL));
    cr_expect(tu_file_has(tu_path(d, "file.txt"), "data: prepared into "), "%s", tu_slurp(tu_path(d, "file.txt"), NULL));
    cr_expect(tu_file_has(tu_path(d, "again.txt"), "data: prepared data read from "), "%s", tu_slurp(tu_path(d, "again.txt"), NULL));
    cr_expect_eq(tu_sh("test $(ls %s/cache/*.s2sdata | wc -l) = 1", d), 0, "the ranks prepared more than one file");
    cr_expect(tu_same_file(tu_path(d, "file/model.bin"), tu_path(d, "again/model.bin")), "read back: another model");
    cr_expect_eq(weight_gap(tu_path(d, "file/model.bin"), tu_path(d, "memory/model.bin")), 0.0,
                 "streamed and in memory: other weights");
    tu_rm_rf(d);
    free(d);
}
