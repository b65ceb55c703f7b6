/* dist_check.c — run under mpirun by test_dist.c: every rank's sums must be the rank-order
 * sums of the inputs (which each rank can make for all ranks), bit for bit, on every rank, and
 * an evaluation shared among the ranks must give every rank the figures and outputs of the
 * same evaluation run whole on one rank, bit for bit, with each rank doing only its share;
 * exits 0 when they do, prints the first difference and exits 1 otherwise. */
#include "s2s/config.h"
#include "s2s/data.h"
#include "s2s/dist.h"
#include "s2s/eval.h"
#include "s2s/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rank r's value i: values of several magnitudes, so that the order of the additions shows. */
static float value(int r, size_t i) { return (float)(sin((double)(i * 7 + (size_t)r * 13)) * pow(10.0, (double)((i + (size_t)r) % 7) - 3)); }

static const char *EVAL_CONFIG =
    "{\"task\": {\"type\": \"reverse\", \"alphabet\": \"abcdef\", \"min_len\": 2, \"max_len\": 12, \"train_size\": 10, "
    "\"valid_size\": 101, \"test_size\": 10}, \"model\": {\"cell\": \"gru\", \"embedding\": 8, \"encoder_hidden\": 10, "
    "\"decoder_hidden\": 10, \"attention\": \"additive\", \"kq\": 6}, \"train\": {\"threads\": 1}}";

/* The validation split of a small reversal model, whole on this rank and shared among the
 * ranks: the same figures and outputs, and this rank's share of the GEMM work. */
static int check_eval(const Dist *d) {
    Config c;
    config_defaults(&c);
    S2sError err;
    TaskData td;
    Seq2Seq m;
    Tape t;
    if (config_parse(&c, EVAL_CONFIG, "dist_check", &err) || task_load(&td, &c.task, &err) ||
        model_init(&m, &c.model, td.src_vocab.size, td.trg_vocab.size, &err) ||
        tape_init_engine(&t, c.train.precision, c.train.gemm, 1, "dist_check", &err)) {
        fprintf(stderr, "rank %d: %s\n", d->rank, err.msg);
        return 1;
    }
    Rng rng;
    rng_init(&rng, 5, RNG_STREAM_INIT);
    model_init_weights(&m, &rng);
    EvalOptions o = {.batch_size = 16, .greedy = true, .trg = &td.trg_vocab, .align_offset = 0};
    EvalResult whole, shared;
    IdSeqs hw, hs;
    double f0 = t.flops;
    eval_dataset(&t, &m, &td.valid, &o, &whole, &hw);
    double f1 = t.flops;
    o.dist = d;
    eval_dataset(&t, &m, &td.valid, &o, &shared, &hs);
    double mine = t.flops - f1, all = mine;
    dist_sum_doubles(d, &all, 1);
    int bad = 0;
    if (memcmp(&whole, &shared, sizeof whole)) {
        fprintf(stderr, "rank %d: shared evaluation: loss %.17g exact %.17g token_acc %.17g entropy %.17g align %.17g; "
                        "whole: %.17g %.17g %.17g %.17g %.17g\n",
                d->rank, shared.loss, shared.exact_match, shared.token_acc, shared.attn_entropy, shared.align_acc, whole.loss,
                whole.exact_match, whole.token_acc, whole.attn_entropy, whole.align_acc);
        bad = 1;
    }
    for (int e = 0; e < hw.n && !bad; e++)
        if (hw.len[e] != hs.len[e] || memcmp(hw.ids[e], hs.ids[e], (size_t)hw.len[e] * sizeof *hw.ids[e])) {
            fprintf(stderr, "rank %d: sentence %d: another output when shared\n", d->rank, e);
            bad = 1;
        }
    /* every batch evaluated once, by one rank: the ranks' work adds up to the whole's */
    if (all != f1 - f0 || (d->size > 1 && !(mine < 0.8 * (f1 - f0)))) {
        fprintf(stderr, "rank %d: GEMM work %.0f of the whole's %.0f; all ranks %.0f\n", d->rank, mine, f1 - f0, all);
        bad = 1;
    }
    idseqs_free(&hw);
    idseqs_free(&hs);
    tape_free(&t);
    model_free(&m);
    task_free(&td);
    return bad;
}

int main(int argc, char **argv) {
    Dist d;
    S2sError err;
    if (dist_init(&d, &argc, &argv, &err)) {
        fprintf(stderr, "dist_check: %s\n", err.msg);
        return 1;
    }
    int bad = 0;
    size_t sizes[] = {1, 2, 3, 7, 1000, 100003};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes && !bad; s++) {
        size_t n = sizes[s];
        float *x = malloc(n * sizeof *x), *scratch = malloc((dist_scratch_floats(&d, n) + 1) * sizeof *scratch);
        for (size_t i = 0; i < n; i++) x[i] = value(d.rank, i);
        dist_sum_floats(&d, x, n, scratch);
        for (size_t i = 0; i < n && !bad; i++) {
            float want = value(0, i);
            for (int r = 1; r < d.size; r++) want += value(r, i);
            if (memcmp(&want, &x[i], sizeof want)) {
                fprintf(stderr, "rank %d: n %zu element %zu: %.9g, the rank-order sum is %.9g\n", d.rank, n, i, x[i], want);
                bad = 1;
            }
        }
        free(x);
        free(scratch);
    }
    double t[2] = {0.1 * (d.rank + 1), 1e20 * (d.rank % 2 ? -1 : 1)}, want[2] = {0, 0};
    for (int r = 0; r < d.size; r++) want[0] += 0.1 * (r + 1), want[1] += 1e20 * (r % 2 ? -1 : 1);
    dist_sum_doubles(&d, t, 2);
    if (memcmp(t, want, sizeof t)) {
        fprintf(stderr, "rank %d: doubles %.17g %.17g, want %.17g %.17g\n", d.rank, t[0], t[1], want[0], want[1]);
        bad = 1;
    }
    if (dist_max_int(&d, d.rank == d.size - 1 ? 42 : d.rank) != 42) { /* the last rank's 42, on every rank */
        fprintf(stderr, "rank %d: max\n", d.rank);
        bad = 1;
    }
    char msg[32] = "";
    if (d.rank == 0) snprintf(msg, sizeof msg, "from rank 0 of %d", d.size);
    dist_bcast(&d, msg, sizeof msg, 0);
    char want_msg[32];
    snprintf(want_msg, sizeof want_msg, "from rank 0 of %d", d.size);
    if (strcmp(msg, want_msg)) {
        fprintf(stderr, "rank %d: broadcast gave \"%s\"\n", d.rank, msg);
        bad = 1;
    }
    bad |= check_eval(&d);
    bad = dist_max_int(&d, bad);
    if (d.rank == 0) printf("dist_check: %d ranks%s\n", d.size, bad ? ": FAILED" : ": sums in rank order on every rank, evaluation shared");
    dist_finalize(&d);
    return bad;
}
