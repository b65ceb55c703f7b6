/* peak.c — this CPU's multiply-add rate per number format, measured: every thread runs
 * independent multiply-adds on registers only (no memory), the most the vector units give and
 * so the ceiling of any GEMM here. make bench records it beside the step's GEMM rates, which
 * tells a ratio held back by our code from one held back by the machine.
 *   build/bench/peak [THREADS [SECONDS]]   (default: the online CPUs, 0.2 s a try)
 * prints one JSON line: float32 GFLOP/s (fused multiply-adds, 2 flops each), bf16 GFLOP/s
 * (vdpbf16ps: two products and their sum into float32, 4 flops a lane), int8 GOP/s (vpdpbusd
 * with AVX-512 VNNI: 4 u8 × s8 products a lane; without it the AVX2 sequence of gemm_q8.c:
 * two vpmaddubsw added in int16, then vpmaddwd), each the best of three tries, with the
 * instructions used; null where the CPU has none. Every thread runs the same count of
 * instructions; the rate is all of them over the wall time from a common start to the last
 * thread's end. */
#define _POSIX_C_SOURCE 200809L
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

enum { ACC = 12 }; /* independent accumulators: more than latency × ports on current cores */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The empty asm makes x look changed on every pass, so the compiler cannot hoist a product of
 * loop-invariant operands out of the loop; it emits no instruction. */
#define OPAQUE(x) __asm__ volatile("" : "+v"(x))

typedef double (*Kernel)(long iters); /* returns a value that depends on every result */

__attribute__((target("avx2,fma"))) static double f32_avx2(long iters) {
    __m256 acc[ACC], a = _mm256_set1_ps(1.0f), b = _mm256_set1_ps(-0.0f);
    for (int i = 0; i < ACC; i++) acc[i] = _mm256_set1_ps((float)i);
    for (long it = 0; it < iters; it++) {
        OPAQUE(a);
        OPAQUE(b);
        for (int i = 0; i < ACC; i++) acc[i] = _mm256_fmadd_ps(a, b, acc[i]);
    }
    float s[8], sum = 0;
    for (int i = 0; i < ACC; i++) {
        _mm256_storeu_ps(s, acc[i]);
        sum += s[0];
    }
    return sum;
}

__attribute__((target("avx512f"))) static double f32_avx512(long iters) {
    __m512 acc[ACC], a = _mm512_set1_ps(1.0f), b = _mm512_set1_ps(-0.0f);
    for (int i = 0; i < ACC; i++) acc[i] = _mm512_set1_ps((float)i);
    for (long it = 0; it < iters; it++) {
        OPAQUE(a);
        OPAQUE(b);
        for (int i = 0; i < ACC; i++) acc[i] = _mm512_fmadd_ps(a, b, acc[i]);
    }
    double sum = 0;
    for (int i = 0; i < ACC; i++) sum += _mm512_reduce_add_ps(acc[i]);
    return sum;
}

__attribute__((target("avx512f,avx512bf16"))) static double bf16_avx512(long iters) {
    __m512 acc[ACC];
    __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = (__m512bh)_mm512_set1_epi16(0); /* 1.0, 0.0 */
    for (int i = 0; i < ACC; i++) acc[i] = _mm512_set1_ps((float)i);
    for (long it = 0; it < iters; it++) {
        OPAQUE(a);
        OPAQUE(b);
        for (int i = 0; i < ACC; i++) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
    }
    double sum = 0;
    for (int i = 0; i < ACC; i++) sum += _mm512_reduce_add_ps(acc[i]);
    return sum;
}

__attribute__((target("avx512f,avx512vnni"))) static double int8_vnni(long iters) {
    __m512i acc[ACC], a = _mm512_set1_epi8(1), b = _mm512_set1_epi8(0);
    for (int i = 0; i < ACC; i++) acc[i] = _mm512_set1_epi32(i);
    for (long it = 0; it < iters; it++) {
        OPAQUE(a);
        OPAQUE(b);
        for (int i = 0; i < ACC; i++) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
    }
    double sum = 0;
    for (int i = 0; i < ACC; i++) sum += _mm512_reduce_add_epi32(acc[i]);
    return sum;
}

/* 64 products a group, as gemm_q8 makes them: two vpmaddubsw, their int16 sum, one vpmaddwd;
 * each group its own operand, or the compiler would compute one group and reuse it */
__attribute__((target("avx2"))) static double int8_avx2(long iters) {
    enum { G = ACC / 2 };
    __m256i acc[G], x[G], b = _mm256_set1_epi8(0), one = _mm256_set1_epi16(1);
    for (int i = 0; i < G; i++) acc[i] = _mm256_set1_epi32(i), x[i] = _mm256_set1_epi8((char)(i + 1));
    for (long it = 0; it < iters; it++) {
        for (int i = 0; i < G; i++) OPAQUE(x[i]);
        OPAQUE(b);
        for (int i = 0; i < G; i++) {
            __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(x[i], b), _mm256_maddubs_epi16(b, x[i]));
            acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(p, one));
        }
    }
    int s[8];
    double sum = 0;
    for (int i = 0; i < G; i++) {
        _mm256_storeu_si256((__m256i *)s, acc[i]);
        sum += s[0];
    }
    return sum;
}

typedef struct Run {
    Kernel k;
    long iters;
    pthread_barrier_t *start;
    double sink;
} Run;

static void *run_thread(void *p) {
    Run *r = p;
    pthread_barrier_wait(r->start);
    r->sink = r->k(r->iters);
    return NULL;
}

/* wall seconds for every thread to run `iters` passes, started together */
static double timed(Kernel k, long iters, int threads, double *sink) {
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
    pthread_t tid[64];
    Run run[64];
    for (int i = 0; i < threads; i++) {
        run[i] = (Run){k, iters, &start, 0};
        if (pthread_create(&tid[i], NULL, run_thread, &run[i])) {
            fprintf(stderr, "peak: cannot start thread %d\n", i);
            exit(1);
        }
    }
    pthread_barrier_wait(&start);
    double t0 = now();
    for (int i = 0; i < threads; i++) pthread_join(tid[i], NULL);
    double dt = now() - t0;
    pthread_barrier_destroy(&start);
    for (int i = 0; i < threads; i++) *sink += run[i].sink;
    return dt;
}

/* operations a second: the pass count grown until a try lasts `seconds`, then the best of 3 */
static double rate(Kernel k, double ops_per_pass, int threads, double seconds, double *sink) {
    long iters = 1000;
    double dt;
    while ((dt = timed(k, iters, threads, sink)) < seconds / 4 && iters < (1L << 40)) iters *= 4;
    iters = (long)((double)iters * seconds / (dt > 1e-6 ? dt : 1e-6)) + 1;
    double best = 0;
    for (int t = 0; t < 3; t++) {
        double r = ops_per_pass * (double)iters * threads / timed(k, iters, threads, sink);
        if (r > best) best = r;
    }
    return best;
}

static void print_rate(const char *key, const char *isa, double r) {
    if (r > 0) printf(",\"%s\":%.1f,\"%s_isa\":\"%s\"", key, r * 1e-9, key, isa);
    else printf(",\"%s\":null,\"%s_isa\":null", key, key);
}

int main(int argc, char **argv) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = argc > 1 ? atoi(argv[1]) : (int)(online > 0 ? online : 1);
    double seconds = argc > 2 ? atof(argv[2]) : 0.2;
    if (argc > 3 || threads < 1 || threads > 64 || !(seconds > 0 && seconds <= 60)) {
        fprintf(stderr, "usage: peak [THREADS (1..64) [SECONDS (0..60]]]\n");
        return 2;
    }
    __builtin_cpu_init();
    double sink = 0, f32 = 0, bf16 = 0, i8 = 0;
    const char *f32_isa = "", *i8_isa = "";
    if (__builtin_cpu_supports("avx512f")) {
        f32 = rate(f32_avx512, ACC * 16 * 2, threads, seconds, &sink);
        f32_isa = "avx512f";
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        f32 = rate(f32_avx2, ACC * 8 * 2, threads, seconds, &sink);
        f32_isa = "avx2+fma";
    }
    if (__builtin_cpu_supports("avx512bf16")) bf16 = rate(bf16_avx512, ACC * 16 * 4, threads, seconds, &sink);
    if (__builtin_cpu_supports("avx512vnni")) {
        i8 = rate(int8_vnni, ACC * 64 * 2, threads, seconds, &sink);
        i8_isa = "avx512_vnni";
    } else if (__builtin_cpu_supports("avx2")) {
        i8 = rate(int8_avx2, ACC / 2 * 64 * 2, threads, seconds, &sink);
        i8_isa = "avx2";
    }
    printf("{\"event\":\"peak\",\"threads\":%d", threads);
    print_rate("f32_gflops", f32_isa, f32);
    print_rate("bf16_gflops", "avx512_bf16", bf16);
    print_rate("int8_gops", i8_isa, i8);
    printf(",\"check\":%g}\n", sink);
    return 0;
}
