/* gemm_plans.c — oneDNN's matmul primitives made once per shape and kept in the engine's
 * GemmPlans, and frozen weights packed (or quantised) once per freeze in the layout a plan wants. */
#include "gemm_impl.h"
#include "s2s/hash.h"
#include "s2s/par.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- matmul primitives, cached per shape (GemmPlans) ---- */

GemmPlans *gemm_plans_get(const GemmCtx *g) {
    if (*g->plans) return *g->plans;
    GemmPlans *p = s2s_xcalloc(1, sizeof *p);
    DNNL_OK(dnnl_engine_create(&p->engine, dnnl_cpu, 0));
    DNNL_OK(dnnl_stream_create(&p->stream, p->engine, dnnl_stream_default_flags));
    return *g->plans = p;
}

static void plan_destroy(Plan *pl) {
    dnnl_memory_destroy(pl->a);
    dnnl_memory_destroy(pl->b);
    dnnl_memory_destroy(pl->c);
    dnnl_memory_destroy(pl->scratch);
    if (pl->bias) dnnl_memory_destroy(pl->bias);
    dnnl_primitive_destroy(pl->prim);
    free(pl);
}

static void plans_clear(GemmPlans *p) {
    for (int i = 0; i < PLAN_BUCKETS; i++) {
        for (Plan *pl = p->bucket[i], *next; pl; pl = next) {
            next = pl->next;
            plan_destroy(pl);
        }
        p->bucket[i] = NULL;
    }
    p->n_plans = 0;
    p->clears++;
}

void gemm_plans_free(GemmPlans *p) {
    if (!p) return;
    plans_clear(p);
    for (int i = 0; i < p->n_packs; i++) {
        free(p->packs[i].buf);
        free(p->packs[i].scale);
        free(p->packs[i].colsum);
        free(p->packs[i].norm);
        free(p->packs[i].l1);
    }
    for (int i = 0; i < PIECES_MAX; i++)
        if (p->piece_stream[i]) dnnl_stream_destroy(p->piece_stream[i]);
    dnnl_stream_destroy(p->stream);
    dnnl_engine_destroy(p->engine);
    free(p);
}

static uint32_t key_hash(const PlanKey *k) { return (uint32_t)hash_fnv(HASH_FNV_BASIS, k, sizeof *k); }

/* A row-major rows × cols matrix stored at leading dimension ld, or its transpose's storage. */
static void md_2d(dnnl_memory_desc_t *md, int rows, int cols, bool trans, int ld, dnnl_data_type_t dt) {
    dnnl_dims_t dims = {rows, cols}, strides = {trans ? 1 : ld, trans ? ld : 1};
    DNNL_OK(dnnl_memory_desc_init_by_strides(md, 2, dims, dt, strides));
}

static Plan *plan_make(GemmPlans *p, const PlanKey *k, float alpha, float beta) {
    dnnl_data_type_t dt = k->int8 ? dnnl_s8 : k->bf16 ? dnnl_bf16 : dnnl_f32;
    dnnl_memory_desc_t a_md, b_md, c_md;
    md_2d(&a_md, k->M, k->K, k->ta, k->lda, k->int8 ? dnnl_u8 : dt);
    if (k->packed) {
        dnnl_dims_t dims = {k->K, k->N};
        DNNL_OK(dnnl_memory_desc_init_by_tag(&b_md, 2, dims, dt, dnnl_format_tag_any));
    } else {
        md_2d(&b_md, k->K, k->N, k->tb, k->ldb, dt);
    }
    md_2d(&c_md, k->M, k->N, false, k->ldc, k->int8 ? dnnl_s32 : dnnl_f32);
    dnnl_memory_desc_t bias_md;
    if (k->bias) md_2d(&bias_md, 1, k->N, false, k->N, dnnl_f32);
    dnnl_matmul_desc_t desc;
    DNNL_OK(dnnl_matmul_desc_init(&desc, &a_md, &b_md, k->bias ? &bias_md : NULL, &c_md));
    dnnl_primitive_attr_t attr;
    DNNL_OK(dnnl_primitive_attr_create(&attr));
    DNNL_OK(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user)); /* from the arena */
    if (alpha != 1.0f) DNNL_OK(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha));
    if (beta != 0.0f) { /* C = alpha AB + beta C */
        dnnl_post_ops_t po;
        DNNL_OK(dnnl_post_ops_create(&po));
        DNNL_OK(dnnl_post_ops_append_sum(po, beta));
        DNNL_OK(dnnl_primitive_attr_set_post_ops(attr, po));
        dnnl_post_ops_destroy(po);
    }
    dnnl_primitive_desc_t pd;
    DNNL_OK(dnnl_primitive_desc_create(&pd, &desc, attr, p->engine, NULL));
    dnnl_primitive_attr_destroy(attr);
    Plan *pl = s2s_xcalloc(1, sizeof *pl);
    pl->key = *k;
    pl->w_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *s_md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    pl->scratch_bytes = dnnl_memory_desc_get_size(s_md);
    const char *impl = NULL;
    pl->amx = dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl && strstr(impl, "amx");
    DNNL_OK(dnnl_primitive_create(&pl->prim, pd));
    DNNL_OK(dnnl_memory_create(&pl->a, &a_md, p->engine, DNNL_MEMORY_NONE));
    DNNL_OK(dnnl_memory_create(&pl->b, &pl->w_md, p->engine, DNNL_MEMORY_NONE));
    DNNL_OK(dnnl_memory_create(&pl->c, &c_md, p->engine, DNNL_MEMORY_NONE));
    DNNL_OK(dnnl_memory_create(&pl->scratch, s_md, p->engine, DNNL_MEMORY_NONE));
    if (k->bias) DNNL_OK(dnnl_memory_create(&pl->bias, &bias_md, p->engine, DNNL_MEMORY_NONE));
    dnnl_primitive_desc_destroy(pd);
    return pl;
}

Plan *gemm_plan_get(GemmPlans *p, const PlanKey *k, float alpha, float beta) {
    uint32_t h = key_hash(k) % PLAN_BUCKETS;
    for (Plan *pl = p->bucket[h]; pl; pl = pl->next)
        if (!memcmp(&pl->key, k, sizeof *k)) return pl;
    if (p->n_plans >= PLAN_MAX) plans_clear(p); /* the same shapes make the same kernels again */
    Plan *pl = plan_make(p, k, alpha, beta);
    pl->next = p->bucket[h];
    p->bucket[h] = pl;
    p->n_plans++;
    return pl;
}

/* A slot for a new packed copy of B: a stale copy's (B changed since), a free one, or the
 * oldest; emptied. */
Pack *gemm_pack_slot(GemmPlans *p, const float *B, uint64_t stamp) {
    Pack *q = NULL;
    for (int i = 0; i < p->n_packs && !q; i++) /* a stale copy of this weight (it changed since) */
        if (p->packs[i].src == B && p->packs[i].stamp != stamp) q = &p->packs[i];
    if (!q && p->n_packs < PACK_MAX) q = &p->packs[p->n_packs++];
    if (!q) {
        q = &p->packs[p->next_pack];
        p->next_pack = (p->next_pack + 1) % PACK_MAX;
    }
    free(q->buf);
    free(q->scale);
    free(q->colsum);
    free(q->norm);
    free(q->l1);
    memset(q, 0, sizeof *q);
    return q;
}

/* op(B) (K × N, B stored with ldb) quantised per column into quant, in op(B)'s own strides
 * (N × K when tb, else K × N): scale = max |column| / top, values rounded to nearest even
 * and clamped to ±top, and each column's sum of them. */
void gemm_quantise_columns(const float *B, int ldb, bool tb, int K, int N, int top, int8_t *quant, float *scale,
                                  int32_t *colsum) {
    for (int n = 0; n < N; n++) {
        size_t step = tb ? 1 : (size_t)ldb, at = tb ? (size_t)n * ldb : (size_t)n; /* op(B)[k, n] = B[at + k step] */
        size_t qstep = tb ? 1 : (size_t)N, qat = tb ? (size_t)n * K : (size_t)n;
        float mx = 0.0f;
        for (int kk = 0; kk < K; kk++) mx = fmaxf(mx, fabsf(B[at + kk * step]));
        float s = mx > 0.0f ? mx / (float)top : 1.0f, inv = 1.0f / s;
        int32_t sum = 0;
        for (int kk = 0; kk < K; kk++) {
            int v = (int)nearbyintf(B[at + kk * step] * inv);
            v = v > top ? top : v < -top ? -top : v;
            quant[qat + kk * qstep] = (int8_t)v;
            sum += v;
        }
        scale[n] = s;
        colsum[n] = sum;
    }
}

/* The weight B (op(B) is K × N, stored with ldb) in the plan's packed layout: made by one
 * reorder (float32 to the plan's type) the first time, then kept while the weight stays frozen. */
Pack *gemm_pack_get(GemmPlans *p, const Plan *pl, const float *B, int ldb, uint64_t stamp) {
    bool tb = pl->key.tb;
    for (int i = 0; i < p->n_packs; i++) {
        Pack *q = &p->packs[i];
        if (q->src == B && q->stamp == stamp && q->tb == tb && !q->q8 && !q->rows && dnnl_memory_desc_equal(&q->md, &pl->w_md))
            return q;
    }
    Pack *q = gemm_pack_slot(p, B, stamp);
    size_t bytes = dnnl_memory_desc_get_size(&pl->w_md);
    *q = (Pack){.src = B, .stamp = stamp, .tb = tb, .md = pl->w_md, .buf = s2s_xmalloc(bytes)};
    dnnl_memory_desc_t src_md;
    const void *src = B;
    int8_t *quant = NULL;
    if (pl->key.int8) { /* quantised per column of op(B) first, into op(B)'s own strides */
        int K = pl->key.K, N = pl->key.N;
        quant = s2s_xmalloc((size_t)K * N);
        q->scale = s2s_xmalloc((size_t)N * sizeof *q->scale);
        q->colsum = s2s_xmalloc((size_t)N * sizeof *q->colsum);
        gemm_quantise_columns(B, ldb, tb, K, N, gemm_int8_weight_max(), quant, q->scale, q->colsum);
        md_2d(&src_md, K, N, tb, tb ? K : N, dnnl_s8);
        src = quant;
    } else {
        md_2d(&src_md, pl->key.K, pl->key.N, tb, ldb, dnnl_f32);
    }
    dnnl_primitive_desc_t rpd;
    dnnl_primitive_t r;
    dnnl_memory_t from, to;
    DNNL_OK(dnnl_reorder_primitive_desc_create(&rpd, &src_md, p->engine, &pl->w_md, p->engine, NULL));
    DNNL_OK(dnnl_primitive_create(&r, rpd));
    DNNL_OK(dnnl_memory_create(&from, &src_md, p->engine, (void *)src));
    DNNL_OK(dnnl_memory_create(&to, &pl->w_md, p->engine, q->buf));
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    DNNL_OK(dnnl_primitive_execute(r, p->stream, 2, args));
    DNNL_OK(dnnl_stream_wait(p->stream));
    dnnl_memory_destroy(from);
    dnnl_memory_destroy(to);
    dnnl_primitive_destroy(r);
    dnnl_primitive_desc_destroy(rpd);
    free(quant);
    return q;
}

bool gemm_rows_apply(void) { return !gemm_cpu_isa_has(dnnl_cpu_isa_avx512_core); }

bool gemm_rows_for_activations(void) {
#if defined(__FMA__)
    return gemm_rows_apply();
#else
    return true;
#endif
}

Pack *gemm_rows_pack_get(GemmPlans *p, const float *B, int ldb, bool tb, uint64_t stamp, int N, int K) {
    for (int i = 0; i < p->n_packs; i++) {
        Pack *q = &p->packs[i];
        if (q->rows && q->src == B && q->stamp == stamp && q->tb == tb) return q;
    }
    Pack *q = gemm_pack_slot(p, B, stamp);
    *q = (Pack){.src = B, .stamp = stamp, .tb = tb, .rows = true,
                .buf = s2s_xmalloc(gemm_rows_packed_floats(N, K) * sizeof(float))};
    gemm_rows_pack(B, ldb, tb, K, N, q->buf);
    return q;
}

/* Executes a plan on these operands (bias: the plan's, or NULL), its scratchpad borrowed
 * from the arena. */
static void plan_execute_on(const Plan *pl, dnnl_stream_t stream, const void *A, const void *B, void *C, const float *bias,
                            void *scratch) {
    S2S_ASSERT(!pl->key.bias == !bias);
    DNNL_OK(dnnl_memory_set_data_handle(pl->a, (void *)A));
    DNNL_OK(dnnl_memory_set_data_handle(pl->b, (void *)B));
    DNNL_OK(dnnl_memory_set_data_handle(pl->c, C));
    DNNL_OK(dnnl_memory_set_data_handle(pl->scratch, scratch));
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, pl->a}, {DNNL_ARG_WEIGHTS, pl->b}, {DNNL_ARG_DST, pl->c},
                               {DNNL_ARG_SCRATCHPAD, pl->scratch}, {DNNL_ARG_BIAS, pl->bias}};
    if (bias) DNNL_OK(dnnl_memory_set_data_handle(pl->bias, (void *)bias));
    DNNL_OK(dnnl_primitive_execute(pl->prim, stream, bias ? 5 : 4, args));
    DNNL_OK(dnnl_stream_wait(stream));
}

void gemm_plan_execute(const GemmCtx *g, GemmPlans *p, const Plan *pl, const void *A, const void *B, void *C, const float *bias) {
    ArenaMark m = arena_mark(g->arena);
    void *scratch = pl->scratch_bytes ? arena_alloc(g->arena, pl->scratch_bytes) : NULL;
    plan_execute_on(pl, p->stream, A, B, C, bias, scratch);
    arena_rewind(g->arena, m);
}

/* ---- a product by a packed weight in pieces of rows on the library's pool ----
 * The recurrent steps' products (128 rows by a packed weight, about 85 a batch of the RNN)
 * ran on oneDNN's OpenMP threads, which sleep at once after each (wait_policy.h): waking them
 * cost about 50 µs a product. Here C's rows are cut by the thread count alone into pieces of whole
 * 16-row tiles, each a one-thread primitive of its own (its memory objects, stream and
 * scratchpad), run by whichever pool thread takes it: the pool spins between the loops of a
 * step. A piece is a plan of its height and index; all share the weight packed once. */
enum { PIECE_MIN_ROWS = 16 };

typedef struct PieceJob {
    GemmPlans *p;
    const Plan *pl[PIECES_MAX];
    void *scratch[PIECES_MAX];
    int r0[PIECES_MAX + 1];
    const char *A;
    size_t a_row; /* bytes from a row of A to the next */
    const void *B;
    float *C;
    int ldc;
    const float *bias;
} PieceJob;

static void pieces_run(void *ctx, size_t i0, size_t i1) {
    const PieceJob *j = ctx;
    int restore = omp_get_max_threads();
    if (restore != 1) omp_set_num_threads(1); /* a pool thread: no OpenMP team under it */
    for (size_t i = i0; i < i1; i++)
        plan_execute_on(j->pl[i], j->p->piece_stream[i], j->A + (size_t)j->r0[i] * j->a_row, j->B,
                        j->C + (size_t)j->r0[i] * j->ldc, j->bias, j->scratch[i]);
    if (restore != 1) omp_set_num_threads(restore);
}

/* How many pieces a product by a packed weight runs as on the pool (0: as one primitive). */
static int pieces_for(const PlanKey *k, uint64_t Bstamp) {
    int threads = omp_get_max_threads(), n = k->M / PIECE_MIN_ROWS;
    if (!Bstamp || k->int8 || k->ta || (k->bf16 && gemm_cpu_has_amx()) || threads < 2) return 0;
    if ((long)k->M * k->N * k->K < GEMM_SERIAL_MACS) return 0;
    if (n > threads) n = threads;
    if (n > PIECES_MAX) n = PIECES_MAX;
    return n >= 2 ? n : 0;
}

/* The product in n pieces; false (nothing done) when the pieces' plans want the weight in
 * different layouts. */
static bool matmul_pieces(const GemmCtx *g, GemmPlans *p, const PlanKey *k, int n, float alpha, float beta, const void *A,
                          const float *B, uint64_t Bstamp, float *C, const float *bias, Pack **pk) {
    PieceJob j = {.p = p, .ldc = k->ldc, .C = C, .bias = bias, .A = A};
    j.a_row = (size_t)k->lda * (k->bf16 ? sizeof(uint16_t) : sizeof(float));
    for (int i = 0; i <= n; i++) j.r0[i] = i == n ? k->M : k->M * i / n / PIECE_MIN_ROWS * PIECE_MIN_ROWS;
    int restore = omp_get_max_threads();
    omp_set_num_threads(1); /* the pieces' kernels are made for one thread */
    for (int tries = 0; tries < 2; tries++) { /* a full cache starts again: fetch them all anew */
        unsigned clears = p->clears;
        for (int i = 0; i < n; i++) {
            PlanKey kp = *k;
            kp.M = j.r0[i + 1] - j.r0[i], kp.threads = 1, kp.piece = (uint8_t)(i + 1);
            j.pl[i] = gemm_plan_get(p, &kp, alpha, beta);
        }
        if (p->clears == clears) break;
    }
    omp_set_num_threads(restore);
    for (int i = 1; i < n; i++)
        if (!dnnl_memory_desc_equal(&j.pl[i]->w_md, &j.pl[0]->w_md)) return false;
    *pk = gemm_pack_get(p, j.pl[0], B, k->ldb, Bstamp);
    j.B = (*pk)->buf;
    ArenaMark m = arena_mark(g->arena);
    for (int i = 0; i < n; i++) {
        if (!p->piece_stream[i]) DNNL_OK(dnnl_stream_create(&p->piece_stream[i], p->engine, dnnl_stream_default_flags));
        j.scratch[i] = j.pl[i]->scratch_bytes ? arena_alloc(g->arena, j.pl[i]->scratch_bytes) : NULL;
    }
    par_for((size_t)n, (size_t)k->M / (size_t)n * k->N * k->K, pieces_run, &j);
    arena_rewind(g->arena, m);
    return true;
}

/* oneDNN 2.x multiplies a bf16 row by a packed weight with AVX-512 bf16 kernels when the rows are
 * few (one, or up to 8 for a small weight) and with AMX above: the two round differently, so a
 * sentence's logits would change with the batch beside it. On an AMX CPU such a product runs
 * as the fewest rows (a power of two) that take AMX, the rest zero: every row through one kernel. */
static PlanKey key_rows(const PlanKey *k, int rows) {
    PlanKey kp = *k;
    if (rows != k->M) kp.M = rows, kp.lda = k->K, kp.ldc = k->N; /* A and C copied in and out */
    return kp;
}

/* The plan to run a bf16 product by a packed weight with: k's own, or the padded one. The
 * height is found once per plan; probing may clear a full cache, so k's plan is fetched again. */
static Plan *amx_plan(GemmPlans *p, const PlanKey *k, float alpha, float beta) {
    Plan *pl = gemm_plan_get(p, k, alpha, beta);
    if (!pl->pad_rows) {
        int rows = k->M; /* also where no height takes AMX: then none does */
        for (int r = 2; !pl->amx && gemm_cpu_has_amx() && r <= PACK_MAX_ROWS; r *= 2) {
            PlanKey kp = key_rows(k, r);
            if (r > k->M && gemm_plan_get(p, &kp, alpha, beta)->amx) {
                rows = r;
                break;
            }
        }
        (pl = gemm_plan_get(p, k, alpha, beta))->pad_rows = rows;
    }
    if (pl->pad_rows == k->M) return pl;
    PlanKey kp = key_rows(k, pl->pad_rows);
    return gemm_plan_get(p, &kp, alpha, beta);
}

/* A (k->M rows, bf16) times the packed B through pl, the padded plan of the same product (the
 * padding rows of C, never read, are left as they are). */
static void matmul_padded(const GemmCtx *g, GemmPlans *p, const Plan *pl, const PlanKey *k, float beta, const uint16_t *A,
                          const void *B, float *C, const float *bias) {
    int rows = pl->key.M;
    ArenaMark m = arena_mark(g->arena);
    uint16_t *Ap = arena_calloc(g->arena, (size_t)rows * k->K * sizeof *Ap);
    float *Cp = arena_alloc(g->arena, (size_t)rows * k->N * sizeof *Cp);
    for (int r = 0; r < k->M; r++) {
        memcpy(Ap + (size_t)r * k->K, A + (size_t)r * k->lda, (size_t)k->K * sizeof *Ap);
        if (beta != 0.0f) memcpy(Cp + (size_t)r * k->N, C + (size_t)r * k->ldc, (size_t)k->N * sizeof *Cp);
    }
    gemm_plan_execute(g, p, pl, Ap, B, Cp, bias);
    for (int r = 0; r < k->M; r++) memcpy(C + (size_t)r * k->ldc, Cp + (size_t)r * k->N, (size_t)k->N * sizeof *C);
    arena_rewind(g->arena, m);
}

/* One product through a cached matmul primitive. A and B are bf16 (packed as the key says)
 * when key.bf16, else float32; B is the float32 weight (packed here) when Bstamp != 0; bias:
 * a row added to every row of the product (alpha 1), or NULL. */
Pack *gemm_matmul_run(const GemmCtx *g, PlanKey *k, float alpha, float beta, const void *A, const void *B, uint64_t Bstamp,
                       float *C, const float *bias) {
    S2S_ASSERT(!bias || alpha == 1.0f);
    GemmPlans *p = gemm_plans_get(g);
    k->packed = Bstamp != 0;
    k->bias = bias != NULL;
    memcpy(&k->alpha, &alpha, sizeof alpha);
    memcpy(&k->beta, &beta, sizeof beta);
    int n = pieces_for(k, Bstamp);
    Pack *pieces_pk = NULL;
    if (n && matmul_pieces(g, p, k, n, alpha, beta, A, B, Bstamp, C, bias, &pieces_pk)) return pieces_pk;
    int restore = gemm_serial_begin(k->M, k->N, k->K);
    k->threads = omp_get_max_threads(); /* some kernels are made for a thread count */
    Plan *pl = k->bf16 && Bstamp && !k->ta ? amx_plan(p, k, alpha, beta) : gemm_plan_get(p, k, alpha, beta);
    Pack *pk = NULL;
    if (Bstamp) {
        pk = gemm_pack_get(p, pl, B, k->ldb, Bstamp);
        B = pk->buf;
    }
    if (pl->key.M != k->M) matmul_padded(g, p, pl, k, beta, A, B, C, bias); /* its layout packed B, too */
    else gemm_plan_execute(g, p, pl, A, B, C, bias);
    gemm_serial_end(restore);
    return pk;
}

double gemm_primitive_rate(const GemmCtx *g, const GemmShapeStat *s, bool bf16) {
    int M = s->M, N = s->N, K = s->K;
    size_t es = bf16 ? sizeof(uint16_t) : sizeof(float);
    void *A = s2s_xcalloc((size_t)M * K, es), *B = s2s_xcalloc((size_t)K * N, es);
    float *C = s2s_xcalloc((size_t)M * N, sizeof *C);
    if (bf16) { /* ones and small integers: exact, and no subnormal slows a kernel down */
        for (size_t i = 0; i < (size_t)M * K; i++) ((uint16_t *)A)[i] = (uint16_t)(0x3f80 + i % 3);
        for (size_t i = 0; i < (size_t)K * N; i++) ((uint16_t *)B)[i] = (uint16_t)(0x3f80 + i % 5);
    } else {
        for (size_t i = 0; i < (size_t)M * K; i++) ((float *)A)[i] = (float)(i % 3);
        for (size_t i = 0; i < (size_t)K * N; i++) ((float *)B)[i] = (float)(i % 5);
    }
    PlanKey k;
    memset(&k, 0, sizeof k);
    k.M = M, k.N = N, k.K = K, k.ta = s->ta, k.tb = s->tb, k.bf16 = bf16;
    k.lda = s->ta ? M : K, k.ldb = s->tb ? K : N, k.ldc = N;
    double best = 0;
    for (int r = 0; r < 4; r++) { /* the first makes the kernel */
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        gemm_matmul_run(g, &k, 1.0f, 0.0f, A, B, 0, C, NULL);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        if (r > 0 && (best == 0 || sec < best)) best = sec;
    }
    free(A);
    free(B);
    free(C);
    return 2.0 * M * N * K / best / 1e9;
}
