/* gemm_cpu.c — what this CPU and its libraries offer the GEMMs (oneDNN's ISA, OpenBLAS's
 * core, a bf16 self-check), and the threads they run on (a small product on one). */
#include "gemm_impl.h"
#include "s2s/bf16.h"


/* Products below this many multiply-adds run on one thread: waking OpenMP's threads costs
 * more than they save, and far more when the cores are busy with other work. */
#define GEMM_SERIAL_MACS (1L << 24)

void gemm_set_threads(int n) {
    if (n <= 0) return;
    openblas_set_num_threads(n);
    omp_set_num_threads(n);
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
    if (threads <= 1 || (long)M * N * K >= GEMM_SERIAL_MACS) return 0;
    omp_set_num_threads(1);
    return threads;
}

void gemm_serial_end(int restore) {
    if (restore) omp_set_num_threads(restore);
}
