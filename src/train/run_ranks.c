/* run_ranks.c — a data-parallel run's ranks joined before the first step (the same config,
 * build and data; rank 0's weights and state everywhere), and last.bin read by rank 0 for all. */
#include "run_internal.h"

#include <stdlib.h>
#include <string.h>

/* A data-parallel run's ranks agree before the first step: the same config, data, build and
 * parameter count as rank 0 (else every rank stops, rank 0 naming the first that differs),
 * at least one sentence of each global batch per rank, and rank 0's weights, moments, moving
 * average and state everywhere. */
S2sStatus run_join_ranks(Run *r, S2sError *err) {
    const Dist *d = r->dist;
    if (!d || d->size == 1) return S2S_OK;
    const ConfigTrain *tc = &r->cfg->train;
    if (tc->batch_size > 0 && tc->batch_size < d->size)
        return s2s_fail(err, S2S_ERR_CONFIG,
                        "train.batch_size %d is smaller than the %d ranks: each rank takes a share of every batch",
                        tc->batch_size, d->size);
    char *conf = config_to_json(r->cfg);
    DigestCtx c;
    digest_init(&c);
    digest_str(&c, S2S_VERSION " " __DATE__ " " __TIME__);
    digest_str(&c, conf);
    free(conf);
    struct {
        Digest config, data;
        uint64_t params;
    } mine = {digest_final(&c), r->data_digest, (uint64_t)r->model.params.total}, root;
    root = mine;
    dist_bcast(d, &root, sizeof root, 0);
    bool config_differs = !digest_equal(&root.config, &mine.config), data_differs = !digest_equal(&root.data, &mine.data);
    int first_bad = dist_max_int(d, config_differs || data_differs || root.params != mine.params ? d->rank : 0);
    if (first_bad)
        return s2s_fail(err, S2S_ERR_CONFIG,
                        "rank %d of %d started with another %s than rank 0: every rank must run the same build with the "
                        "same --config, --set and data",
                        first_bad, d->size,
                        first_bad == d->rank ? (config_differs ? "config or build" : data_differs ? "data" : "model")
                                             : "config, build or data");
    ParamStore *ps = &r->model.params;
    dist_bcast(d, ps->data, ps->total * sizeof *ps->data, 0);
    if (ps->m) dist_bcast(d, ps->m, ps->total * sizeof *ps->m, 0);
    if (ps->v) dist_bcast(d, ps->v, ps->total * sizeof *ps->v, 0);
    if (ps->ema) dist_bcast(d, ps->ema, ps->total * sizeof *ps->ema, 0);
    dist_bcast(d, &r->st, sizeof r->st, 0);
    optim_grad_sum_init(&r->grad_sum, d, ps, (size_t)r->cfg->train.sum_bucket_kb * 256);
    return S2S_OK;
}

/* last.bin for --resume: rank 0 reads it and sends it to the other ranks, which need neither
 * the run folder nor a shared file system (machines of a hostfile). A file rank 0 cannot read
 * stops every rank: rank 0 with the reason, the others saying where it is. */
S2sStatus run_load_last(Run *r, Checkpoint *ck, S2sError *err) {
    const Dist *d = r->dist;
    if (!d || d->size == 1) return ckpt_load(ck, r->dir.last, err);
    S2sStatus st = r->root ? ckpt_load(ck, r->dir.last, err) : S2S_OK;
    uint64_t len = r->root && !st ? (uint64_t)ck->len : 0;
    dist_bcast(d, &len, sizeof len, 0);
    if (r->root) {
        if (!st) dist_bcast(d, ck->buf, ck->len, 0);
        return st;
    }
    if (!len) return s2s_fail(err, S2S_ERR_IO, "%s: rank 0 could not read it", r->dir.last);
    unsigned char *buf = malloc((size_t)len);
    if (!buf) return s2s_fail(err, S2S_ERR_NOMEM, "%s: out of memory for %llu bytes from rank 0", r->dir.last,
                              (unsigned long long)len);
    dist_bcast(d, buf, (size_t)len, 0);
    st = ckpt_from_memory(ck, buf, (size_t)len, r->dir.last, err);
    free(buf);
    return st;
}
