/* transformer.c — nn.Transformer's stacks (see transformer.h), op by op as PyTorch computes
 * them: TransformerEncoderLayer / TransformerDecoderLayer with norm_first false or true. */
#include "s2s/transformer.h"
#include "s2s/common.h"
#include "s2s/par.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- declaration ---- */

static void attention_init(TfAttention *a, ParamStore *ps, const char *prefix, int d) {
    char name[2 * PARAM_NAME_MAX]; /* params_add asserts the length */
    snprintf(name, sizeof name, "%s.in_proj_weight", prefix);
    Tensor *w = params_add(ps, name, 2, (int[]){3 * d, d});
    snprintf(name, sizeof name, "%s.in_proj_bias", prefix);
    Tensor *b = params_add(ps, name, 1, (int[]){3 * d});
    Linear *l[3] = {&a->q, &a->k, &a->v};
    for (int k = 0; k < 3; k++)
        *l[k] = (Linear){params_view(ps, w, (size_t)k * d * d, 2, (int[]){d, d}), params_view(ps, b, (size_t)k * d, 1, (int[]){d})};
    snprintf(name, sizeof name, "%s.out_proj", prefix);
    linear_init(&a->out, ps, name, d, d, true);
}

static void norm_init(TfNorm *n, ParamStore *ps, const char *prefix, int d) {
    char name[2 * PARAM_NAME_MAX]; /* params_add asserts the length */
    snprintf(name, sizeof name, "%s.weight", prefix);
    n->gain = params_add(ps, name, 1, (int[]){d});
    snprintf(name, sizeof name, "%s.bias", prefix);
    n->bias = params_add(ps, name, 1, (int[]){d});
}

void transformer_init(Transformer *tf, ParamStore *ps, const char *prefix, int d, int heads, int ff, int enc_layers,
                      int dec_layers, bool norm_first, TfActivation activation) {
    S2S_ASSERT(heads > 0 && d % heads == 0 && ff > 0);
    S2S_ASSERT(enc_layers >= 1 && enc_layers <= TF_MAX_LAYERS && dec_layers >= 1 && dec_layers <= TF_MAX_LAYERS);
    memset(tf, 0, sizeof *tf);
    tf->d = d;
    tf->heads = heads;
    tf->ff = ff;
    tf->enc_layers = enc_layers;
    tf->dec_layers = dec_layers;
    tf->norm_first = norm_first;
    tf->activation = activation;
    tf->eps = 1e-5f;
    char p[PARAM_NAME_MAX];
    /* nn.TransformerEncoderLayer's parameters in its order: self_attn, linear1, linear2, norms */
    for (int l = 0; l < enc_layers; l++) {
        TfEncoderLayer *e = &tf->enc[l];
        snprintf(p, sizeof p, "%s.encoder.layers.%d.self_attn", prefix, l);
        attention_init(&e->self_attn, ps, p, d);
        snprintf(p, sizeof p, "%s.encoder.layers.%d.linear1", prefix, l);
        linear_init(&e->linear1, ps, p, d, ff, true);
        snprintf(p, sizeof p, "%s.encoder.layers.%d.linear2", prefix, l);
        linear_init(&e->linear2, ps, p, ff, d, true);
        snprintf(p, sizeof p, "%s.encoder.layers.%d.norm1", prefix, l);
        norm_init(&e->norm1, ps, p, d);
        snprintf(p, sizeof p, "%s.encoder.layers.%d.norm2", prefix, l);
        norm_init(&e->norm2, ps, p, d);
    }
    snprintf(p, sizeof p, "%s.encoder.norm", prefix);
    norm_init(&tf->enc_norm, ps, p, d);
    for (int l = 0; l < dec_layers; l++) {
        TfDecoderLayer *e = &tf->dec[l];
        snprintf(p, sizeof p, "%s.decoder.layers.%d.self_attn", prefix, l);
        attention_init(&e->self_attn, ps, p, d);
        snprintf(p, sizeof p, "%s.decoder.layers.%d.multihead_attn", prefix, l);
        attention_init(&e->cross_attn, ps, p, d);
        snprintf(p, sizeof p, "%s.decoder.layers.%d.linear1", prefix, l);
        linear_init(&e->linear1, ps, p, d, ff, true);
        snprintf(p, sizeof p, "%s.decoder.layers.%d.linear2", prefix, l);
        linear_init(&e->linear2, ps, p, ff, d, true);
        snprintf(p, sizeof p, "%s.decoder.layers.%d.norm1", prefix, l);
        norm_init(&e->norm1, ps, p, d);
        snprintf(p, sizeof p, "%s.decoder.layers.%d.norm2", prefix, l);
        norm_init(&e->norm2, ps, p, d);
        snprintf(p, sizeof p, "%s.decoder.layers.%d.norm3", prefix, l);
        norm_init(&e->norm3, ps, p, d);
    }
    snprintf(p, sizeof p, "%s.decoder.norm", prefix);
    norm_init(&tf->dec_norm, ps, p, d);
}

/* ---- blocks ---- */

static Tensor *norm(Tape *t, const Transformer *tf, const TfNorm *n, Tensor *x) {
    return op_layer_norm(t, x, n->gain, n->bias, tf->eps);
}

static Tensor *drop(Tape *t, Tensor *x, TfDropout d) { return d.rng && d.p > 0 ? op_dropout(t, x, d.p, d.rng) : x; }

/* x on the (T, B) grid: its rows where r says (zeros elsewhere), or x itself (r NULL). Rows
 * that are the whole grid (increasing, so 0, 1, …) are x as it is. */
static Tensor *on_grid(Tape *t, Tensor *x, const TfRows *r) {
    if (!r) return x;
    int R = r->T * r->B, d = tensor_cols(x);
    return tape_reshape3(t, r->n == R ? x : op_scatter_rows(t, x, r->ids, r->n, R), r->T, r->B, d);
}

/* The grid x's rows where r says, or x itself. */
static Tensor *off_grid(Tape *t, Tensor *x, const TfRows *r) {
    if (!r) return x;
    return r->n == r->T * r->B ? tape_reshape2(t, x, r->n, tensor_cols(x)) : op_gather_rows(t, x, r->ids, r->n);
}

/* Multi-head attention: queries from q_in (T, B, d), keys and values from kv_in (S, B, d);
 * either may be only its real rows (n, d) where qr or kvr says, laid on the grid for the
 * scores and the queries' context taken back off it (the projections skip the padding).
 * The mask: with rows = B·heads·T, score row (b·heads + h)·T + i uses mask row
 * r / (rows / mask_rows): a (B, S) key mask serves every head and query, a full
 * (B·heads·T, S) one anything (causal with padding). *w gets the weights (B·heads, T, S). */
static Tensor *attend(Tape *t, const Transformer *tf, const TfAttention *a, Tensor *q_in, Tensor *kv_in, const TfRows *qr,
                      const TfRows *kvr, const uint8_t *mask, int mask_rows, TfDropout dr, Tensor **w) {
    Tensor *q = on_grid(t, linear_forward(t, &a->q, q_in), qr);
    Tensor *k = on_grid(t, linear_forward(t, &a->k, kv_in), kvr), *v = on_grid(t, linear_forward(t, &a->v, kv_in), kvr);
    Tensor *ctx = mha_forward(t, q, k, v, tf->heads, mask, mask_rows, dr.p, dr.rng, w);
    return linear_forward(t, &a->out, off_grid(t, ctx, qr));
}

static Tensor *feed_forward(Tape *t, const Transformer *tf, const Linear *l1, const Linear *l2, Tensor *x, TfDropout dr) {
    Tensor *h = linear_forward(t, l1, x);
    h = tf->activation == TF_GELU ? op_gelu(t, h) : op_relu(t, h);
    return linear_forward(t, l2, drop(t, h, dr));
}


Tensor *transformer_encode(Tape *t, const Transformer *tf, Tensor *x, const uint8_t *src_mask, TfDropout dr, Tensor **self) {
    S2S_ASSERT(x->ndim == 3 && x->shape[2] == tf->d);
    int B = x->shape[1];
    /* Without gradients nothing needs a layer's temporaries once its output is out: each layer's
     * output is copied into one tensor and the arena rewound, so a batch touches one layer's
     * worth of memory, not the stack's (the first batch's page faults were most of a batch-64
     * decode). The attention maps (self) live on the arena, so they keep everything. */
    Tensor *carry = !t->grad_enabled && !self ? tape_tensor(t, 3, x->shape) : NULL;
    for (int l = 0; l < tf->enc_layers; l++) {
        const TfEncoderLayer *e = &tf->enc[l];
        ArenaMark mark = arena_mark(&t->arena);
        Tensor *h = tf->norm_first ? norm(t, tf, &e->norm1, x) : x;
        Tensor *sa = drop(t, attend(t, tf, &e->self_attn, h, h, NULL, NULL, src_mask, B, dr, self ? &self[l] : NULL), dr);
        x = tf->norm_first ? op_add(t, x, sa) : norm(t, tf, &e->norm1, op_add(t, x, sa));
        h = tf->norm_first ? norm(t, tf, &e->norm2, x) : x;
        Tensor *ff = drop(t, feed_forward(t, tf, &e->linear1, &e->linear2, h, dr), dr);
        x = tf->norm_first ? op_add(t, x, ff) : norm(t, tf, &e->norm2, op_add(t, x, ff));
        if (carry) { /* x may be carry itself: copied only once the layer is done with it */
            tensor_copy(carry, x);
            arena_rewind(&t->arena, mark);
            x = carry;
        }
    }
    return norm(t, tf, &tf->enc_norm, x);
}

/* (B·heads·T, T): query i of row b sees key j when j ≤ i and j is real (trg_mask). */
static const uint8_t *causal_mask(Tape *t, int B, int H, int T, const uint8_t *trg_mask) {
    uint8_t *m = arena_alloc(&t->arena, (size_t)B * H * T * T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++) {
                uint8_t *row = m + (((size_t)b * H + h) * T + i) * T;
                for (int j = 0; j < T; j++) row[j] = j <= i && (!trg_mask || trg_mask[(size_t)b * T + j]);
            }
    return m;
}

Tensor *transformer_decode(Tape *t, const Transformer *tf, Tensor *y, Tensor *memory, const uint8_t *src_mask,
                           const uint8_t *trg_mask, const TfRows *rows, TfDropout dr, Tensor **cross) {
    S2S_ASSERT(memory->ndim == 3 && y->shape[y->ndim - 1] == tf->d);
    S2S_ASSERT(rows ? y->ndim == 2 && y->shape[0] == rows->n : y->ndim == 3);
    int T = rows ? rows->T : y->shape[0], B = rows ? rows->B : y->shape[1], H = tf->heads;
    S2S_ASSERT(memory->shape[1] == B);
    const uint8_t *causal = causal_mask(t, B, H, T, trg_mask);
    for (int l = 0; l < tf->dec_layers; l++) {
        const TfDecoderLayer *e = &tf->dec[l];
        Tensor *h = tf->norm_first ? norm(t, tf, &e->norm1, y) : y;
        Tensor *sa = drop(t, attend(t, tf, &e->self_attn, h, h, rows, rows, causal, B * H * T, dr, NULL), dr);
        y = tf->norm_first ? op_add(t, y, sa) : norm(t, tf, &e->norm1, op_add(t, y, sa));
        h = tf->norm_first ? norm(t, tf, &e->norm2, y) : y;
        Tensor *ca = drop(t, attend(t, tf, &e->cross_attn, h, memory, rows, NULL, src_mask, B, dr, cross ? &cross[l] : NULL), dr);
        y = tf->norm_first ? op_add(t, y, ca) : norm(t, tf, &e->norm2, op_add(t, y, ca));
        h = tf->norm_first ? norm(t, tf, &e->norm3, y) : y;
        Tensor *ff = drop(t, feed_forward(t, tf, &e->linear1, &e->linear2, h, dr), dr);
        y = tf->norm_first ? op_add(t, y, ff) : norm(t, tf, &e->norm3, op_add(t, y, ff));
    }
    return norm(t, tf, &tf->dec_norm, y);
}

/* ---- step-by-step decoding ---- */

void transformer_cache_init(Tape *t, const Transformer *tf, TfCache *c, int N, int group, int cap) {
    S2S_ASSERT(N > 0 && cap > 0 && group > 0 && N % group == 0);
    memset(c, 0, sizeof *c);
    c->N = N;
    c->group = group;
    c->cap = cap;
    for (int l = 0; l < tf->dec_layers; l++) {
        c->self_k[l] = tape_tensor3(t, cap, N, tf->d);
        c->self_v[l] = tape_tensor3(t, cap, N, tf->d);
    }
    c->slot = arena_alloc(&t->arena, (size_t)cap * N * sizeof *c->slot);
}

/* x (1, N, d) appended to a cache (cap, N, d) at position pos. */
static void cache_put(Tensor *cache, int pos, const Tensor *x) {
    size_t n = x->size;
    S2S_ASSERT(n == (size_t)cache->shape[1] * cache->shape[2] && pos < cache->shape[0]);
    memcpy(tensor_write(cache) + (size_t)pos * n, tensor_read(x), n * sizeof(float));
}

static void cache_lay_out(TfCache *c);
static void cross_lay_out(TfCache *c);

/* Attention of one position's queries q_in (1, N, d) over keys and values (L, N / G, d): the
 * G rows of a sentence (b·G + g) as G queries over its one copy (small products of G rows,
 * as in training, not G one-row products over G copies). cross: the memory's (k, v
 * c->cross_k[l] and cross_v[l], their sentences where c->cross_slot says); else the
 * self-attention's (its rows where c->slot says). A step that does not fuse reads the rows
 * laid out. */
static Tensor *attend_cached(Tape *t, const Transformer *tf, const TfAttention *a, Tensor *q_in, Tensor *k, Tensor *v,
                             const uint8_t *mask, int G, TfCache *c, bool cross, Tensor **w) {
    int N = q_in->shape[1], B = N / G, d = tf->d;
    S2S_ASSERT(cross || (G == 1 && !mask && !w));
    Tensor *q = tape_reshape2(t, linear_forward(t, &a->q, q_in), N, d);
    if (G > 1) q = op_transpose_rows(t, q, B, G); /* row g·B + b */
    Tensor *ctx = NULL, *q1 = tape_reshape3(t, q, 1, N, d);
    if (!cross) {
        ctx = mha_step_slots(t, q1, k, v, tf->heads, NULL, 1, c->moved ? c->slot : NULL, NULL);
        if (!ctx) cache_lay_out(c);
    } else if (c->cross_moved) {
        ctx = mha_step_slots(t, q1, k, v, tf->heads, mask, B, c->cross_slot, w);
        if (!ctx) cross_lay_out(c);
    }
    S2S_ASSERT(ctx || k->shape[1] == B);
    if (!ctx) ctx = mha_forward(t, tape_reshape3(t, q, G, B, d), k, v, tf->heads, mask, B, 0.0f, NULL, w); /* (G, B, d); w (B·H, G, L) */
    ctx = tape_reshape2(t, ctx, N, d);
    if (G > 1) ctx = op_transpose_rows(t, ctx, G, B);
    return linear_forward(t, &a->out, tape_reshape3(t, ctx, 1, N, d));
}

Tensor *transformer_decode_step(Tape *t, const Transformer *tf, Tensor *y, Tensor *memory, const uint8_t *src_mask,
                                TfCache *c, Tensor **cross) {
    S2S_ASSERT(y->ndim == 3 && y->shape[0] == 1 && y->shape[1] == c->N && y->shape[2] == tf->d && c->len < c->cap);
    int pos = c->len, d = tf->d, N = c->N;
    for (int i = 0; i < N; i++) c->slot[(size_t)pos * N + i] = i; /* the new position's rows: where they are put */
    TfDropout none = {0};
    for (int l = 0; l < tf->dec_layers; l++) {
        const TfDecoderLayer *e = &tf->dec[l];
        Tensor *h = tf->norm_first ? norm(t, tf, &e->norm1, y) : y;
        cache_put(c->self_k[l], pos, linear_forward(t, &e->self_attn.k, h));
        cache_put(c->self_v[l], pos, linear_forward(t, &e->self_attn.v, h));
        Tensor *k = tape_view(t, c->self_k[l], 0, 3, (int[]){pos + 1, N, d}), *v = tape_view(t, c->self_v[l], 0, 3, (int[]){pos + 1, N, d});
        Tensor *sa = attend_cached(t, tf, &e->self_attn, h, k, v, NULL, 1, c, false, NULL);
        y = tf->norm_first ? op_add(t, y, sa) : norm(t, tf, &e->norm1, op_add(t, y, sa));
        h = tf->norm_first ? norm(t, tf, &e->norm2, y) : y;
        if (!c->cross_k[l]) { /* the memory does not change: its projections once, and their index */
            c->cross_k[l] = linear_forward(t, &e->cross_attn.k, memory);
            c->cross_v[l] = linear_forward(t, &e->cross_attn.v, memory);
            if (!c->cross_slot) {
                int B = N / c->group;
                c->cross_slot = arena_alloc(&t->arena, (size_t)memory->shape[0] * B * sizeof *c->cross_slot);
                for (int i = 0; i < B; i++) c->cross_slot[i] = i; /* position 0's; the rest once it moves */
            }
        }
        Tensor *ca = attend_cached(t, tf, &e->cross_attn, h, c->cross_k[l], c->cross_v[l], src_mask, c->group, c, true,
                                   cross ? &cross[l] : NULL);
        y = tf->norm_first ? op_add(t, y, ca) : norm(t, tf, &e->norm2, op_add(t, y, ca));
        h = tf->norm_first ? norm(t, tf, &e->norm3, y) : y;
        Tensor *ff = feed_forward(t, tf, &e->linear1, &e->linear2, h, none);
        y = tf->norm_first ? op_add(t, y, ff) : norm(t, tf, &e->norm3, op_add(t, y, ff));
    }
    c->len++;
    return norm(t, tf, &tf->dec_norm, y);
}

void transformer_cache_keep_rows(TfCache *c, const int32_t *rows, int n, const int32_t *sents) {
    S2S_ASSERT(n % c->group == 0);
    cache_lay_out(c); /* the kept rows copied where they are */
    int ns = n / c->group;
    bool index = c->group == 1 && c->cross_k[0]; /* greedy: the memory's rows stay, the index moves */
    if (index) { /* sents increase, sents[i] >= i: each entry read before it is written */
        int32_t *x = c->cross_slot;
        for (int i = 0; i < ns; i++) x[i] = x[sents[i]];
        for (int s = 1; s < c->cross_k[0]->shape[0]; s++) memcpy(x + (size_t)s * ns, x, (size_t)ns * sizeof *x);
        c->cross_moved = true;
    }
    for (int l = 0; l < TF_MAX_LAYERS; l++) {
        /* only the positions decoded so far: the rest of the capacity holds nothing yet */
        if (c->self_k[l]) tensor_keep_rows_tm(c->self_k[l], c->len, rows, n);
        if (c->self_v[l]) tensor_keep_rows_tm(c->self_v[l], c->len, rows, n);
        if (!index && c->cross_k[l]) tensor_keep_rows_tm(c->cross_k[l], c->cross_k[l]->shape[0], sents, ns);
        if (!index && c->cross_v[l]) tensor_keep_rows_tm(c->cross_v[l], c->cross_v[l]->shape[0], sents, ns);
    }
    c->N = n;
    for (int s = 0; s < c->len; s++) /* the slots in rows of the new width: each its own row */
        for (int i = 0; i < n; i++) c->slot[(size_t)s * n + i] = i;
}

/* One cached position of one tensor a range item (layer, k or v, position): the positions
 * are independent, so they split over the threads; each range reads a position's misplaced
 * rows into its own scratch before writing any of them (the slots may form cycles). */
typedef struct LayOutJob {
    float *data[2 * TF_MAX_LAYERS];
    const int32_t *slot;
    int len, N, D;
} LayOutJob;

static void lay_out_positions(void *ctx, size_t i0, size_t i1) {
    const LayOutJob *j = ctx;
    size_t D = (size_t)j->D;
    float *tmp = NULL;
    int32_t *dest = s2s_xmalloc((size_t)j->N * sizeof *dest);
    for (size_t i = i0; i < i1; i++) {
        int s = (int)(i % (size_t)j->len), moved = 0;
        const int32_t *slot = j->slot + (size_t)s * j->N;
        for (int r = 0; r < j->N; r++)
            if (slot[r] != r) dest[moved++] = r;
        if (!moved) continue;
        if (!tmp) tmp = s2s_xmalloc((size_t)j->N * D * sizeof *tmp);
        float *row = j->data[i / (size_t)j->len] + (size_t)s * j->N * D;
        for (int m = 0; m < moved; m++) memcpy(tmp + m * D, row + (size_t)slot[dest[m]] * D, D * sizeof *tmp);
        for (int m = 0; m < moved; m++) memcpy(row + (size_t)dest[m] * D, tmp + m * D, D * sizeof *tmp);
    }
    free(tmp);
    free(dest);
}

/* Every position's rows copied to where its slots say, the slots then their own rows. */
static void cache_lay_out(TfCache *c) {
    if (!c->moved) return;
    LayOutJob j = {.slot = c->slot, .len = c->len, .N = c->N, .D = c->self_k[0]->shape[2]};
    int n = 0; /* tensors; d is the same in every layer */
    for (int l = 0; l < TF_MAX_LAYERS && c->self_k[l]; l++) {
        j.data[n++] = tensor_write(c->self_k[l]);
        j.data[n++] = tensor_write(c->self_v[l]);
    }
    if (c->len) par_for((size_t)n * c->len, (size_t)c->N * j.D, lay_out_positions, &j);
    for (int s = 0; s < c->len; s++)
        for (int i = 0; i < c->N; i++) c->slot[(size_t)s * c->N + i] = i;
    c->moved = false;
}

/* The memory's projections copied to the sentences' own rows (a step that does not fuse). */
static void cross_lay_out(TfCache *c) {
    if (!c->cross_moved) return;
    int ns = c->N / c->group; /* position 0's index increases: tensor_keep_rows_tm's order */
    for (int l = 0; l < TF_MAX_LAYERS && c->cross_k[l]; l++) {
        tensor_keep_rows_tm(c->cross_k[l], c->cross_k[l]->shape[0], c->cross_slot, ns);
        tensor_keep_rows_tm(c->cross_v[l], c->cross_v[l]->shape[0], c->cross_slot, ns);
    }
    for (int i = 0; i < ns; i++) c->cross_slot[i] = i;
    c->cross_moved = false;
}

void transformer_cache_reorder(TfCache *c, const int32_t *parent) {
    int N = c->N;
    bool moves = false;
    for (int i = 0; i < N && !moves; i++) moves = parent[i] != i;
    if (!moves || c->len == 0) return;
    /* row i takes row parent[i]'s place at every position: its slots */
    int32_t *tmp = s2s_xmalloc((size_t)N * sizeof *tmp);
    for (int s = 0; s < c->len; s++) {
        int32_t *slot = c->slot + (size_t)s * N;
        for (int i = 0; i < N; i++) tmp[i] = slot[parent[i]];
        memcpy(slot, tmp, (size_t)N * sizeof *slot);
    }
    free(tmp);
    c->moved = true;
    /* the cross-attention's keys and values are the memory's, the same for a sentence's rows:
     * a parent is always a row of the same sentence */
}

/* ---- initialisation ---- */

static void xavier(Tensor *w, Rng *rng) {
    int fan_out = w->shape[0], fan_in = w->shape[1];
    float a = sqrtf(6.0f / (float)(fan_in + fan_out));
    float *wd = tensor_write(w);
    for (size_t i = 0; i < w->size; i++) wd[i] = rng_uniform_range(rng, -a, a);
}

static void fill(Tensor *x, float v) { tensor_fill(x, v); }

static void init_attention(const TfAttention *a, int d, Rng *rng) {
    /* nn.MultiheadAttention: Xavier over the whole in_proj_weight (3d, d), biases 0 */
    Tensor whole = *a->q.w;
    whole.shape[0] = 3 * d;
    whole.size = (size_t)3 * d * d;
    xavier(&whole, rng); /* q, k, v are consecutive views */
    fill(a->q.b, 0);
    fill(a->k.b, 0);
    fill(a->v.b, 0);
    xavier(a->out.w, rng);
    fill(a->out.b, 0);
}

static void init_ff(const Linear *l1, const Linear *l2, Rng *rng) {
    xavier(l1->w, rng);
    fill(l1->b, 0);
    xavier(l2->w, rng);
    fill(l2->b, 0);
}

static void init_norm(const TfNorm *n) {
    fill(n->gain, 1);
    fill(n->bias, 0);
}

void transformer_init_weights(const Transformer *tf, Rng *rng) {
    for (int l = 0; l < tf->enc_layers; l++) {
        const TfEncoderLayer *e = &tf->enc[l];
        init_attention(&e->self_attn, tf->d, rng);
        init_ff(&e->linear1, &e->linear2, rng);
        init_norm(&e->norm1);
        init_norm(&e->norm2);
    }
    init_norm(&tf->enc_norm);
    for (int l = 0; l < tf->dec_layers; l++) {
        const TfDecoderLayer *e = &tf->dec[l];
        init_attention(&e->self_attn, tf->d, rng);
        init_attention(&e->cross_attn, tf->d, rng);
        init_ff(&e->linear1, &e->linear2, rng);
        init_norm(&e->norm1);
        init_norm(&e->norm2);
        init_norm(&e->norm3);
    }
    init_norm(&tf->dec_norm);
}
