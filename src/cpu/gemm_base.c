/* gemm_base.c — what every gemm file stands on: what this CPU and its libraries offer
 * (oneDNN's ISA, OpenBLAS's core, a bf16 self-check), the threads the products run on (a
 * small one on one), operands copied into bf16, and the per-shape statistics. */
#include "gemm_impl.h"
#include "s2s/bf16.h"
#include "s2s/par.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

void gemm_set_threads(int n) {
    if (n <= 0) return;
    openblas_set_num_threads(n);
    omp_set_num_threads(n);
}

int gemm_cpus(void) { return omp_get_num_procs(); }

int gemm_quota_threads(size_t *milli) {
    size_t m = s2s_cpu_quota_milli();
    if (milli) *milli = m;
    if (!m || getenv("OMP_NUM_THREADS")) return 0;
    int q = m >= 1000 ? (int)(m / 1000) : 1; /* 1.5 CPUs: one thread, never throttled mid-step */
    return q < omp_get_num_procs() ? q : 0; /* OpenMP's default: the CPUs it may run on */
}

/* The ISA values are bit sets, not an order: avx2_vnni (0x407) is above avx512_core_amx (0x3e7). */
bool gemm_cpu_isa_has(dnnl_cpu_isa_t want) {
    return ((unsigned)dnnl_get_effective_cpu_isa() & (unsigned)want) == (unsigned)want;
}

bool gemm_cpu_has_amx(void) { return gemm_cpu_isa_has(dnnl_cpu_isa_avx512_core_amx); }

bool gemm_cpu_has_bf16(void) { return gemm_cpu_isa_has(dnnl_cpu_isa_avx512_core_bf16); }

/* Without AVX-512 VNNI oneDNN's u8 × s8 kernels add pairs of products in int16 with
 * saturation (vpmaddubsw): 2 · 255 · 127 overflows it, 2 · 255 · 63 does not. AVX2 VNNI is
 * counted as without: whether oneDNN's GEMM uses it there is not something we can see. */
int gemm_int8_weight_max(void) { return gemm_cpu_isa_has(dnnl_cpu_isa_avx512_core_vnni) ? 127 : 63; }

const char *gemm_openblas_core(void) {
    const char *core = openblas_get_corename();
    return core ? core : "unknown";
}

S2sStatus gemm_bf16_check(const char *what, S2sError *err) {
    enum { N = 8 };
    uint16_t a[N * N], b[N * N];
    float ones[N * N], c[N * N];
    for (int i = 0; i < N * N; i++) ones[i] = 1.0f;
    bf16_from_f32(ones, a, N * N);
    bf16_from_f32(ones, b, N * N);
    dnnl_status_t s = dnnl_gemm_bf16bf16f32('N', 'N', N, N, N, 1.0f, a, N, b, N, 0.0f, c, N);
    if (s != dnnl_success || c[0] != (float)N || c[N * N - 1] != (float)N)
        return s2s_fail(err, S2S_ERR_CONFIG, "%s: oneDNN cannot run bfloat16 GEMMs on this CPU (status %d); use \"fp32\"",
                        what, (int)s);
    return S2S_OK;
}

bool gemm_cpu_has_int8(void) { return gemm_cpu_isa_has(dnnl_cpu_isa_avx2); }

/* A product this small runs on one thread (GEMM_SERIAL_MACS): returns the thread count to
 * give back to serial_end, or 0 when nothing changed. */
int gemm_serial_begin(int M, int N, int K) {
    int threads = omp_get_max_threads();
    if (threads <= 1) return 0;
    if ((long)M * N * K >= GEMM_SERIAL_MACS) {
        par_park(); /* oneDNN's threads run it: the pool's stay out of their way */
        return -1;
    }
    omp_set_num_threads(1);
    return threads;
}

void gemm_serial_end(int restore) {
    if (restore < 0) par_unpark();
    else if (restore) omp_set_num_threads(restore);
}

typedef struct Bf16Job {
    const float *x;
    uint16_t *y;
    size_t cols, ld;
} Bf16Job;


static void bf16_rows(void *ctx, size_t r0, size_t r1) {
    const Bf16Job *j = ctx;
    if (j->ld == j->cols) {
        bf16_from_f32(j->x + r0 * j->ld, j->y + r0 * j->cols, (r1 - r0) * j->cols);
        return;
    }
    for (size_t r = r0; r < r1; r++) bf16_from_f32(j->x + r * j->ld, j->y + r * j->cols, j->cols);
}


/* The stored matrix behind op(X) (rows × cols with leading dimension ld), packed into bf16,
 * split over the threads (large operands: a step rounds tens of millions of values). */
const uint16_t *gemm_to_bf16(const GemmCtx *g, const float *x, int rows, int cols, int ld) {
    uint16_t *y = arena_alloc(g->arena, (size_t)rows * cols * sizeof *y);
    Bf16Job j = {x, y, (size_t)cols, (size_t)ld};
    par_for((size_t)rows, (size_t)cols, bf16_rows, &j);
    return y;
}


void gemm_stats_add(GemmStats *st, const GemmShapeStat *x, long calls, double seconds) {
    for (int i = 0; i < st->n; i++) {
        GemmShapeStat *s = &st->items[i];
        if (s->path == x->path && s->ta == x->ta && s->tb == x->tb && s->M == x->M && s->N == x->N && s->K == x->K) {
            s->calls += calls;
            s->seconds += seconds;
            return;
        }
    }
    if (st->n == st->cap) {
        st->cap = st->cap ? 2 * st->cap : 64;
        st->items = s2s_xrealloc(st->items, (size_t)st->cap * sizeof *st->items);
    }
    st->items[st->n] = *x;
    st->items[st->n].calls = calls;
    st->items[st->n].seconds = seconds;
    st->n++;
}

