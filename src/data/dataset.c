/* dataset.c — flat id storage, padded batches, and length-bucketed batch plans. */
#include "s2s/data.h"
#include "data_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void dataset_init(Dataset *d) { memset(d, 0, sizeof *d); }

void dataset_free(Dataset *d) {
    if (d->streamed) close(d->fd);
    free(d->every64);
    free(d->ids);
    free(d->src_off);
    free(d->trg_off);
    free(d->src_len);
    free(d->trg_len);
    memset(d, 0, sizeof *d);
}

static void push_ids(Dataset *d, const int32_t *x, int n) {
    if (d->n_ids + (size_t)n > d->cap_ids) {
        d->cap_ids = d->cap_ids ? 2 * d->cap_ids : 4096;
        while (d->cap_ids < d->n_ids + (size_t)n) d->cap_ids *= 2;
        d->ids = s2s_xrealloc(d->ids, d->cap_ids * sizeof *d->ids);
    }
    memcpy(d->ids + d->n_ids, x, (size_t)n * sizeof *x);
    d->n_ids += (size_t)n;
}

void dataset_add(Dataset *d, const int32_t *src, int src_len, const int32_t *trg, int trg_len) {
    S2S_ASSERT(!d->streamed); /* a prepared file's split is read-only */
    if (d->n == d->cap) {
        d->cap = d->cap ? 2 * d->cap : 256;
        d->src_off = s2s_xrealloc(d->src_off, (size_t)d->cap * sizeof *d->src_off);
        d->trg_off = s2s_xrealloc(d->trg_off, (size_t)d->cap * sizeof *d->trg_off);
        d->src_len = s2s_xrealloc(d->src_len, (size_t)d->cap * sizeof *d->src_len);
        d->trg_len = s2s_xrealloc(d->trg_len, (size_t)d->cap * sizeof *d->trg_len);
    }
    d->src_off[d->n] = d->n_ids;
    push_ids(d, src, src_len);
    d->trg_off[d->n] = d->n_ids;
    push_ids(d, trg, trg_len);
    d->src_len[d->n] = src_len;
    d->trg_len[d->n] = trg_len;
    d->n++;
}

void batch_init(Batch *b) { memset(b, 0, sizeof *b); }

void batch_free(Batch *b) {
    free(b->src);
    free(b->trg);
    free(b->src_len);
    free(b->trg_len);
    free(b->src_mask);
    free(b->index);
    free(b->raw);
    memset(b, 0, sizeof *b);
}

/* Sizes b for rows idx[0..n) of d: B, S, T set, buffers grown (only ever: after the largest
 * batch, no allocation). */
static void batch_shape(Batch *b, const Dataset *d, const int *idx, int n) {
    S2S_ASSERT(n > 0);
    int S = 0, T = 0;
    for (int i = 0; i < n; i++) {
        if (d->src_len[idx[i]] > S) S = d->src_len[idx[i]];
        if (d->trg_len[idx[i]] > T) T = d->trg_len[idx[i]];
    }
    if ((size_t)n > b->cap_b) {
        b->cap_b = (size_t)n;
        b->src_len = s2s_xrealloc(b->src_len, b->cap_b * sizeof(int));
        b->trg_len = s2s_xrealloc(b->trg_len, b->cap_b * sizeof(int));
        b->index = s2s_xrealloc(b->index, b->cap_b * sizeof(int));
    }
    if ((size_t)S * n > b->cap_src) {
        b->cap_src = (size_t)S * n;
        b->src = s2s_xrealloc(b->src, b->cap_src * sizeof(int32_t));
        b->src_mask = s2s_xrealloc(b->src_mask, b->cap_src);
    }
    if ((size_t)T * n > b->cap_trg) {
        b->cap_trg = (size_t)T * n;
        b->trg = s2s_xrealloc(b->trg, b->cap_trg * sizeof(int32_t));
    }
    b->B = n;
    b->S = S;
    b->T = T;
}

/* Row i of b: example e's source s (sl ids) and target t (tl), padded. */
static void batch_row(Batch *b, int i, int e, const int32_t *s, int sl, const int32_t *t, int tl) {
    int n = b->B;
    b->index[i] = e;
    b->src_len[i] = sl;
    b->trg_len[i] = tl;
    for (int k = 0; k < b->S; k++) {
        bool real = k < sl;
        b->src[(size_t)k * n + i] = real ? s[k] : TOK_PAD;
        b->src_mask[(size_t)i * b->S + k] = real;
    }
    for (int k = 0; k < b->T; k++) b->trg[(size_t)k * n + i] = k < tl ? t[k] : TOK_PAD;
}

void batch_fill(Batch *b, const Dataset *d, const int *idx, int n) {
    S2S_ASSERT_MSG(!d->streamed, "a streamed dataset is read with batch_read");
    batch_shape(b, d, idx, n);
    for (int i = 0; i < n; i++) {
        int e = idx[i];
        batch_row(b, i, e, d->ids + d->src_off[e], d->src_len[e], d->ids + d->trg_off[e], d->trg_len[e]);
    }
}

/* The number of ids before pair e of a streamed dataset. */
static uint64_t streamed_at(const Dataset *d, int e) {
    uint64_t at = d->every64[e / 64];
    for (int j = e / 64 * 64; j < e; j++) at += (uint64_t)d->src_len[j] + (uint64_t)d->trg_len[j];
    return at;
}

/* Reads ids [at, at + n) of a streamed dataset into out as int32 (raw: a scratch buffer). */
static bool streamed_ids(const Dataset *d, uint64_t at, size_t n, int32_t *out, unsigned char **raw, size_t *cap) {
    errno = 0;
    size_t bytes = n * (size_t)d->id_bytes;
    if (bytes > *cap) *raw = s2s_xrealloc(*raw, *cap = bytes);
    for (size_t got = 0; got < bytes;) {
        ssize_t k = pread(d->fd, *raw + got, bytes - got, (off_t)(d->ids_at + at * (uint64_t)d->id_bytes + got));
        if (k <= 0) return false; /* an error, or the file cut short under us */
        got += (size_t)k;
    }
    const unsigned char *p = *raw;
    if (d->id_bytes == 2)
        for (size_t i = 0; i < n; i++) out[i] = (int32_t)(p[2 * i] | p[2 * i + 1] << 8);
    else
        for (size_t i = 0; i < n; i++)
            out[i] = (int32_t)((uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
                               (uint32_t)p[4 * i + 3] << 24);
    return true;
}

S2sStatus batch_read(Batch *b, const Dataset *d, const int *idx, int n, S2sError *err) {
    if (!d->streamed) {
        batch_fill(b, d, idx, n);
        return S2S_OK;
    }
    batch_shape(b, d, idx, n);
    int32_t *row = s2s_xmalloc((size_t)(b->S + b->T) * sizeof *row);
    S2sStatus st = S2S_OK;
    for (int i = 0; i < n && !st; i++) {
        int e = idx[i], sl = d->src_len[e], tl = d->trg_len[e];
        if (!streamed_ids(d, streamed_at(d, e), (size_t)sl + (size_t)tl, row, &b->raw, &b->cap_raw)) {
            st = s2s_fail(err, S2S_ERR_IO, "the prepared training data: reading pair %d: %s", e + 1,
                          errno ? strerror(errno) : "the file is shorter than it was");
            break;
        }
        for (int k = 0; k < sl + tl; k++)
            if (row[k] < 0 || row[k] >= (k < sl ? d->vocab_src : d->vocab_trg))
                st = s2s_fail(err, S2S_ERR_CORRUPT, "the prepared training data changed under the run (pair %d has id %d)",
                              e + 1, row[k]);
        if (!st) batch_row(b, i, e, row, sl, row + sl, tl);
    }
    free(row);
    /* after the reads: a write to the file before or during them moved its stamp, so no batch
     * read from a file changed under the run is used (ids that stay in range included) */
    FileStamp now;
    if (!st && (!file_stamp(d->fd, &now) || !file_stamp_same_writes(&now, &d->stamp)))
        st = s2s_fail(err, S2S_ERR_CORRUPT, "the prepared training data file was written to under the run (a prepared file "
                      "is never changed in place: another program wrote it); start the run again, or --resume it");
    return st;
}

bool dataset_hash_ids(const Dataset *d, DigestCtx *c) {
    if (!d->streamed) {
        digest_update(c, d->ids, d->n_ids * sizeof *d->ids);
        return true;
    }
    enum { STEP = 1 << 18 };
    int32_t *buf = s2s_xmalloc(STEP * sizeof *buf);
    unsigned char *raw = NULL;
    size_t cap = 0;
    bool ok = true;
    for (uint64_t at = 0; at < d->n_ids && ok; at += STEP) {
        size_t k = d->n_ids - at < STEP ? (size_t)(d->n_ids - at) : STEP;
        if ((ok = streamed_ids(d, at, k, buf, &raw, &cap))) digest_update(c, buf, k * sizeof *buf);
    }
    free(raw);
    free(buf);
    return ok;
}

/* Sorts order[0..n) by source length, then target length, then index (a total order: the plan
 * is the same on every libc): one 64-bit key each (lengths below 2^16 in the high bits), sorted
 * by bytes from the lowest (radix), the bytes that are the same in every key skipped. */
static void sort_range(const Dataset *d, int *order, int n) {
    uint64_t *key = s2s_xmalloc((size_t)n * 2 * sizeof *key), *tmp = key + n, and_all = ~0ull, or_all = 0;
    for (int i = 0; i < n; i++) {
        int e = order[i];
        S2S_ASSERT(d->src_len[e] < 65536 && d->trg_len[e] < 65536);
        key[i] = (uint64_t)d->src_len[e] << 48 | (uint64_t)d->trg_len[e] << 32 | (uint32_t)e;
        and_all &= key[i];
        or_all |= key[i];
    }
    for (int shift = 0; shift < 64; shift += 8) {
        if (!(((and_all ^ or_all) >> shift) & 0xff)) continue; /* this byte orders nothing */
        size_t count[257] = {0};
        for (int i = 0; i < n; i++) count[((key[i] >> shift) & 0xff) + 1]++;
        for (int b = 0; b < 256; b++) count[b + 1] += count[b];
        for (int i = 0; i < n; i++) tmp[count[(key[i] >> shift) & 0xff]++] = key[i];
        uint64_t *t = key;
        key = tmp;
        tmp = t;
    }
    for (int i = 0; i < n; i++) order[i] = (int)(uint32_t)key[i];
    free(key < tmp ? key : tmp); /* the block's start, whichever half holds the keys now */
}

void batchplan_make(BatchPlan *p, const Dataset *d, int batch_size, int max_tokens, int window, Rng *rng) {
    S2S_ASSERT(d->n > 0);
    int *order = s2s_xmalloc((size_t)d->n * sizeof *order);
    for (int i = 0; i < d->n; i++) order[i] = i;
    batchplan_make_from(p, d, order, d->n, batch_size, max_tokens, window, rng);
}

void batchplan_make_from(BatchPlan *p, const Dataset *d, int *order, int n, int batch_size, int max_tokens, int window,
                         Rng *rng) {
    S2S_ASSERT(batch_size > 0 && max_tokens >= 0 && n > 0);
    memset(p, 0, sizeof *p);
    p->n = n;
    p->order = order;
    if (rng) {
        rng_shuffle_int(rng, p->order, p->n);
        int w = batch_size * (window > 0 ? window : 1);
        for (int s = 0; s < p->n; s += w) sort_range(d, p->order + s, p->n - s < w ? p->n - s : w);
    } else {
        sort_range(d, p->order, p->n);
    }
    /* cut: at most batch_size sentences, and with a token budget, at most max_tokens padded
     * positions (rows × the longest side in the batch) */
    p->start = s2s_xmalloc((size_t)(p->n + 1) * sizeof *p->start);
    p->n_batches = 0;
    for (int i = 0; i < p->n;) {
        p->start[p->n_batches++] = i;
        int longest = 0, count = 0;
        while (i < p->n && count < batch_size) {
            int e = p->order[i], l = d->src_len[e] > d->trg_len[e] ? d->src_len[e] : d->trg_len[e];
            int nl = l > longest ? l : longest;
            if (max_tokens > 0 && count > 0 && (long)nl * (count + 1) > max_tokens) break;
            longest = nl;
            count++;
            i++;
        }
    }
    p->start[p->n_batches] = p->n;
    if (rng) { /* shuffle the batches, not just their contents */
        int *perm = s2s_xmalloc((size_t)p->n_batches * sizeof *perm);
        for (int k = 0; k < p->n_batches; k++) perm[k] = k;
        rng_shuffle_int(rng, perm, p->n_batches);
        int *shuffled = s2s_xmalloc((size_t)p->n * sizeof *shuffled);
        int *start = s2s_xmalloc((size_t)(p->n_batches + 1) * sizeof *start);
        int pos = 0;
        for (int k = 0; k < p->n_batches; k++) {
            int a = p->start[perm[k]], b = p->start[perm[k] + 1];
            start[k] = pos;
            memcpy(shuffled + pos, p->order + a, (size_t)(b - a) * sizeof *shuffled);
            pos += b - a;
        }
        start[p->n_batches] = pos;
        free(p->order);
        free(p->start);
        free(perm);
        p->order = shuffled;
        p->start = start;
    }
}

void batchplan_free(BatchPlan *p) {
    free(p->order);
    free(p->start);
    memset(p, 0, sizeof *p);
}
