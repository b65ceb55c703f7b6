/* dataset.c — flat id storage, padded batches, and length-bucketed batch plans. */
#include "s2s/data.h"

#include <stdlib.h>
#include <string.h>

void dataset_init(Dataset *d) { memset(d, 0, sizeof *d); }

void dataset_free(Dataset *d) {
    if (d->borrowed) { /* the mapping's: its owner unmaps it */
        memset(d, 0, sizeof *d);
        return;
    }
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
    S2S_ASSERT(!d->borrowed); /* a mapped split is read-only */
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
    memset(b, 0, sizeof *b);
}

void batch_fill(Batch *b, const Dataset *d, const int *idx, int n) {
    S2S_ASSERT(n > 0);
    int S = 0, T = 0;
    for (int i = 0; i < n; i++) {
        if (d->src_len[idx[i]] > S) S = d->src_len[idx[i]];
        if (d->trg_len[idx[i]] > T) T = d->trg_len[idx[i]];
    }
    /* buffers only grow: after the largest batch, no allocation */
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
    for (int i = 0; i < n; i++) {
        int e = idx[i];
        b->index[i] = e;
        b->src_len[i] = d->src_len[e];
        b->trg_len[i] = d->trg_len[e];
        const int32_t *s = d->ids + d->src_off[e], *t = d->ids + d->trg_off[e];
        for (int k = 0; k < S; k++) {
            bool real = k < d->src_len[e];
            b->src[(size_t)k * n + i] = real ? s[k] : TOK_PAD;
            b->src_mask[(size_t)i * S + k] = real;
        }
        for (int k = 0; k < T; k++) b->trg[(size_t)k * n + i] = k < d->trg_len[e] ? t[k] : TOK_PAD;
    }
}

/* Sort key: source length, then target length, then index (a total order: the plan is
 * the same on every libc). */
typedef struct SortItem {
    int src, trg, idx;
} SortItem;

static int cmp_item(const void *a, const void *b) {
    const SortItem *x = a, *y = b;
    if (x->src != y->src) return x->src - y->src;
    if (x->trg != y->trg) return x->trg - y->trg;
    return x->idx - y->idx;
}

static void sort_range(const Dataset *d, int *order, int n) {
    SortItem *it = s2s_xmalloc((size_t)n * sizeof *it);
    for (int i = 0; i < n; i++) it[i] = (SortItem){d->src_len[order[i]], d->trg_len[order[i]], order[i]};
    qsort(it, (size_t)n, sizeof *it, cmp_item);
    for (int i = 0; i < n; i++) order[i] = it[i].idx;
    free(it);
}

void batchplan_make(BatchPlan *p, const Dataset *d, int batch_size, int max_tokens, int window, Rng *rng) {
    S2S_ASSERT(batch_size > 0 && max_tokens >= 0 && d->n > 0);
    memset(p, 0, sizeof *p);
    p->n = d->n;
    p->order = s2s_xmalloc((size_t)d->n * sizeof *p->order);
    for (int i = 0; i < d->n; i++) p->order[i] = i;
    if (rng) {
        rng_shuffle_int(rng, p->order, d->n);
        int w = batch_size * (window > 0 ? window : 1);
        for (int s = 0; s < d->n; s += w) sort_range(d, p->order + s, d->n - s < w ? d->n - s : w);
    } else {
        sort_range(d, p->order, d->n);
    }
    /* cut: at most batch_size sentences, and with a token budget, at most max_tokens padded
     * positions (rows × the longest side in the batch) */
    p->start = s2s_xmalloc((size_t)(d->n + 1) * sizeof *p->start);
    p->n_batches = 0;
    for (int i = 0; i < d->n;) {
        p->start[p->n_batches++] = i;
        int longest = 0, count = 0;
        while (i < d->n && count < batch_size) {
            int e = p->order[i], l = d->src_len[e] > d->trg_len[e] ? d->src_len[e] : d->trg_len[e];
            int nl = l > longest ? l : longest;
            if (max_tokens > 0 && count > 0 && (long)nl * (count + 1) > max_tokens) break;
            longest = nl;
            count++;
            i++;
        }
    }
    p->start[p->n_batches] = d->n;
    if (rng) { /* shuffle the batches, not just their contents */
        int *perm = s2s_xmalloc((size_t)p->n_batches * sizeof *perm);
        for (int k = 0; k < p->n_batches; k++) perm[k] = k;
        rng_shuffle_int(rng, perm, p->n_batches);
        int *order = s2s_xmalloc((size_t)d->n * sizeof *order);
        int *start = s2s_xmalloc((size_t)(p->n_batches + 1) * sizeof *start);
        int pos = 0;
        for (int k = 0; k < p->n_batches; k++) {
            int a = p->start[perm[k]], b = p->start[perm[k] + 1];
            start[k] = pos;
            memcpy(order + pos, p->order + a, (size_t)(b - a) * sizeof *order);
            pos += b - a;
        }
        start[p->n_batches] = pos;
        free(p->order);
        free(p->start);
        free(perm);
        p->order = order;
        p->start = start;
    }
}

void batchplan_free(BatchPlan *p) {
    free(p->order);
    free(p->start);
    memset(p, 0, sizeof *p);
}
