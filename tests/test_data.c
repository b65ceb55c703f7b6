/* test_data.c — vocabularies, the reversal generator, padded batches, batch plans. */
#include "test_util.h"
#include "s2s/data.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

Test(vocab, specials_then_tokens) {
    Vocab v;
    vocab_init(&v);
    cr_expect_eq(v.size, TOK_SPECIALS);
    cr_expect_eq(vocab_find(&v, "<pad>"), TOK_PAD);
    cr_expect_eq(vocab_find(&v, "<eos>"), TOK_EOS);
    char w[16];
    for (int i = 0; i < 1000; i++) {
        snprintf(w, sizeof w, "w%d", i);
        cr_assert_eq(vocab_add(&v, w), TOK_SPECIALS + i);
    }
    cr_expect_eq(vocab_add(&v, "w5"), TOK_SPECIALS + 5, "adding again returns the same id");
    cr_expect_eq(vocab_find(&v, "w999"), TOK_SPECIALS + 999);
    cr_expect_eq(vocab_find(&v, "nope"), -1);
    cr_expect_eq(vocab_id(&v, "nope"), TOK_UNK);
    vocab_free(&v);
}

static ConfigTask small_task(void) {
    Config c;
    config_defaults(&c);
    c.task.min_len = 2;
    c.task.max_len = 6;
    c.task.train_size = 500;
    c.task.valid_size = 50;
    c.task.test_size = 50;
    return c.task;
}

static void seq_str(const Vocab *v, const int32_t *ids, int n, char *out) {
    for (int i = 0; i < n; i++) out[i] = v->tokens[ids[i]][0];
    out[n] = '\0';
}

Test(reverse, targets_reverse_sources_and_heldout_is_unseen) {
    ConfigTask task = small_task();
    TaskData d;
    S2sError err;
    cr_assert_eq(task_load(&d, &task, &err), S2S_OK, "%s", err.msg);
    cr_expect_eq(d.train.n, 500);
    cr_expect_eq(d.src_vocab.size, TOK_SPECIALS + 4);
    for (int i = 0; i < d.train.n; i++) {
        int ls = d.train.src_len[i], lt = d.train.trg_len[i];
        cr_assert(ls >= 2 && ls <= 6);
        cr_assert_eq(lt, ls + 2);
        const int32_t *s = d.train.ids + d.train.src_off[i], *t = d.train.ids + d.train.trg_off[i];
        cr_assert_eq(t[0], TOK_SOS);
        cr_assert_eq(t[lt - 1], TOK_EOS);
        for (int k = 0; k < ls; k++) cr_assert_eq(t[1 + k], s[ls - 1 - k]);
    }
    /* no test string appears in training */
    char a[16], b[16];
    for (int i = 0; i < d.test.n; i++) {
        seq_str(&d.src_vocab, d.test.ids + d.test.src_off[i], d.test.src_len[i], a);
        for (int j = 0; j < d.train.n; j++) {
            seq_str(&d.src_vocab, d.train.ids + d.train.src_off[j], d.train.src_len[j], b);
            cr_assert_str_neq(a, b, "test string %s is also in training", a);
        }
    }
    task_free(&d);
}

Test(reverse, deterministic_from_the_data_seed) {
    ConfigTask task = small_task();
    TaskData d1, d2;
    S2sError err;
    task_load(&d1, &task, &err);
    task_load(&d2, &task, &err);
    cr_assert_eq(d1.train.n_ids, d2.train.n_ids);
    cr_expect_eq(memcmp(d1.train.ids, d2.train.ids, d1.train.n_ids * sizeof(int32_t)), 0);
    task.data_seed = 2;
    TaskData d3;
    task_load(&d3, &task, &err);
    cr_expect(d3.train.n_ids != d1.train.n_ids || memcmp(d1.train.ids, d3.train.ids, d1.train.n_ids * 4) != 0);
    task_free(&d1);
    task_free(&d2);
    task_free(&d3);
}

Test(reverse, encode_text) {
    ConfigTask task = small_task();
    TaskData d;
    S2sError err;
    task_load(&d, &task, &err);
    int32_t *ids;
    int n;
    cr_assert_eq(task_encode_source(&task, &d.src_vocab, "abdc", false, &ids, &n, &err), S2S_OK);
    cr_expect_eq(n, 4);
    char *back = task_decode_target(&task, &d.trg_vocab, ids, n);
    cr_expect_str_eq(back, "abdc");
    free(back);
    free(ids);
    cr_expect_eq(task_encode_source(&task, &d.src_vocab, "abz", false, &ids, &n, &err), S2S_ERR_DATA);
    cr_expect(strstr(err.msg, "'z' is not in the model's alphabet"), "%s", err.msg);
    cr_expect_eq(task_encode_source(&task, &d.src_vocab, "a\xc3\xa4", false, &ids, &n, &err), S2S_ERR_DATA);
    task_free(&d);
}

Test(batch, pads_time_major_with_masks) {
    Dataset d;
    dataset_init(&d);
    int32_t s1[] = {5, 6, 7}, t1[] = {2, 7, 6, 5, 3}, s2[] = {8}, t2[] = {2, 8, 3};
    dataset_add(&d, s1, 3, t1, 5);
    dataset_add(&d, s2, 1, t2, 3);
    Batch b;
    batch_init(&b);
    batch_fill(&b, &d, (int[]){1, 0}, 2);
    cr_expect(b.B == 2 && b.S == 3 && b.T == 5);
    /* column 0 is example 1: [8, pad, pad] */
    int32_t want_src[] = {8, 5, 0, 6, 0, 7};
    for (int i = 0; i < 6; i++) cr_expect_eq(b.src[i], want_src[i], "src[%d]", i);
    uint8_t want_mask[] = {1, 0, 0, 1, 1, 1};
    for (int i = 0; i < 6; i++) cr_expect_eq(b.src_mask[i], want_mask[i], "mask[%d]", i);
    cr_expect_eq(b.trg[2 * 2 + 0], TOK_EOS);
    cr_expect_eq(b.trg[3 * 2 + 0], TOK_PAD);
    cr_expect_eq(b.index[0], 1);
    batch_free(&b);
    dataset_free(&d);
}

Test(batch, plan_is_a_permutation_deterministic_and_bucketed) {
    ConfigTask task = small_task();
    TaskData d;
    S2sError err;
    task_load(&d, &task, &err);
    Rng r1, r2;
    rng_init(&r1, 9, RNG_STREAM_SHUFFLE);
    rng_init(&r2, 9, RNG_STREAM_SHUFFLE);
    BatchPlan p1, p2;
    batchplan_make(&p1, &d.train, 32, 0, 100, &r1);
    batchplan_make(&p2, &d.train, 32, 0, 100, &r2);
    cr_assert_eq(p1.n_batches, 16);
    cr_expect_eq(memcmp(p1.order, p2.order, (size_t)p1.n * sizeof(int)), 0, "same seed, same plan");
    int *seen = calloc((size_t)d.train.n, sizeof *seen);
    for (int i = 0; i < p1.n; i++) seen[p1.order[i]]++;
    for (int i = 0; i < d.train.n; i++) cr_assert_eq(seen[i], 1);
    /* within the one window, every batch's sources span a narrow length range */
    int spread = 0;
    for (int k = 0; k < p1.n_batches; k++) {
        int lo = 99, hi = 0;
        for (int i = p1.start[k]; i < p1.start[k + 1]; i++) {
            int l = d.train.src_len[p1.order[i]];
            lo = l < lo ? l : lo;
            hi = l > hi ? l : hi;
        }
        spread += hi - lo;
    }
    cr_expect_lt(spread, p1.n_batches * 2, "length-bucketed batches (total spread %d)", spread);
    free(seen);
    batchplan_free(&p1);
    batchplan_free(&p2);
    /* a token budget: every batch within it, every example once */
    rng_init(&r1, 9, RNG_STREAM_SHUFFLE);
    batchplan_make(&p1, &d.train, 1000, 60, 100, &r1);
    int total = 0;
    for (int k = 0; k < p1.n_batches; k++) {
        int longest = 0, n = p1.start[k + 1] - p1.start[k];
        for (int i = p1.start[k]; i < p1.start[k + 1]; i++) {
            int e = p1.order[i];
            int l = d.train.src_len[e] > d.train.trg_len[e] ? d.train.src_len[e] : d.train.trg_len[e];
            longest = l > longest ? l : longest;
        }
        cr_expect(n == 1 || longest * n <= 60, "batch %d: %d x %d positions", k, n, longest);
        total += n;
    }
    cr_expect_eq(total, d.train.n);
    batchplan_free(&p1);
    task_free(&d);
}
