/* test_build.c — the build's flags do what the hot loops need: the elementwise loops over
 * exp, sigmoid and tanh (the RNN steps, the softmax and loss rows) are vectorised by the
 * compiler that built this tree, with the flags it used ($(BUILD)/.flags). gcc keeps a loop
 * scalar when a select on a float comparison could trap (its default -ftrapping-math): the
 * GRU step ran a value at a time and training the reversal model took 1.7× as long. */
#include "test_util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct VecLoop {
    const char *compile; /* the source compiled */
    const char *file;    /* the file holding the loop (a header's loop is reported in it) */
    const char *marker;  /* the loop is the first line from here on that has "for (" */
} VecLoop;

static const VecLoop LOOPS[] = {
    {"src/core/ops_rnn_seq.c", "src/core/ops_rnn_seq.c", "static void gru_step("},
    {"src/core/ops_rnn_seq.c", "src/core/ops_rnn_seq.c", "static void lstm_step("},
    {"src/core/ops_rnn_seq.c", "src/core/ops_rnn_seq.c", "static void gru_step_backward("},
    {"src/core/ops_elementwise.c", "src/core/ops_elementwise.c", "Tensor *op_sigmoid("},
    {"src/core/ops_elementwise.c", "src/core/ops_elementwise.c", "Tensor *op_tanh("},
    {"src/core/ops_softmax.c", "src/core/ops_softmax.c", "d[c] = g * s2s_expf(d[c] - l) - gs"},
    {"src/core/ops_softmax.c", "include/s2s/fastmath.h", "part[j] += s2s_expf(x[i + j] - mx)"},
    {"src/core/ops_softmax.c", "src/core/ops_softmax.c", "mx[i] = xs[i] > mx[i] ? xs[i] : mx[i]"},
    {"src/core/ops_softmax.c", "src/core/ops_softmax.c", "xs[i] = os[i] ? s2s_expf(xs[i] - mx[i])"},
    {"src/core/ops_softmax.c", "src/core/ops_softmax.c", "xs[i] = s2s_expf(xs[i] - mx[i]);"},
};

/* The line number of the loop a marker names, or 0. */
static int loop_line(const char *file, const char *marker) {
    FILE *f = fopen(file, "r");
    cr_assert(f, "%s: cannot open", file);
    char line[1024];
    int n = 0, found = 0;
    bool seen = false;
    while (!found && fgets(line, sizeof line, f)) {
        n++;
        seen = seen || strstr(line, marker);
        if (seen && strstr(line, "for (")) found = n;
    }
    fclose(f);
    return found;
}

/* The flags the build compiled with ($(BUILD)/.flags, one line), or the test skipped: without
 * that file, or at an optimisation level below -O2 (SANITIZE=1 builds at -O1), where no loop is
 * vectorised and none becomes a libc call. The caller frees it. */
static char *optimised_build_flags(void) {
    char flags_path[1024];
    snprintf(flags_path, sizeof flags_path, "%s/../.flags", tu_bin());
    char *flags = tu_slurp(flags_path, NULL);
    if (!flags) TU_SKIP("%s: not found (make test writes it)", flags_path);
    flags[strcspn(flags, "\n")] = '\0';
    if (!strstr(flags, "-O2") && !strstr(flags, "-O3")) {
        free(flags);
        TU_SKIP("the build's flags are not -O2 or -O3 (SANITIZE=1 builds at -O1): no loop is vectorised");
    }
    return flags;
}

/* The compiler (the flags' first word) into cc; whether it is clang. */
static bool build_compiler(const char *flags, char *cc, size_t n) {
    snprintf(cc, n, "%.*s", (int)strcspn(flags, " "), flags);
    return tu_sh("%s --version 2>/dev/null | grep -q clang", cc) == 0;
}

Test(build, hot_loops_vectorise) {
    char *flags = optimised_build_flags();
    char cc[256];
    bool clang = build_compiler(flags, cc, sizeof cc);
    const char *report = clang ? "-Rpass=loop-vectorize" : "-fopt-info-vec-optimized";
    char *dir = tu_tmpdir();
    const char *last = NULL;
    char *out = NULL;
    for (size_t i = 0; i < sizeof LOOPS / sizeof LOOPS[0]; i++) {
        const VecLoop *l = &LOOPS[i];
        if (!last || strcmp(last, l->compile) != 0) { /* one compile per source */
            cr_assert_eq(tu_sh("%s %s -c %s -o /dev/null > %s 2>&1", flags, report, l->compile, tu_path(dir, "out.txt")), 0,
                         "%s did not compile with the build's flags", l->compile);
            free(out);
            out = tu_slurp(tu_path(dir, "out.txt"), NULL);
            cr_assert(out);
            last = l->compile;
        }
        int at = loop_line(l->file, l->marker);
        cr_assert(at > 0, "%s: no loop after \"%s\"", l->file, l->marker);
        char where[600];
        snprintf(where, sizeof where, "%s:%d:", l->file, at);
        bool vectorised = false;
        for (const char *p = strstr(out, where); p && !vectorised; p = strstr(p + 1, where)) {
            const char *eol = strchr(p, '\n');
            const char *v = strstr(p, "vectorized");
            vectorised = v && (!eol || v < eol);
        }
        cr_expect(vectorised, "%s (the loop after \"%s\") is not vectorised by `%s` (%s)", where, l->marker, cc, report);
    }
    free(out);
    free(flags);
    tu_rm_rf(dir);
    free(dir);
}

/* The per-row copies of the batched small products (gemm_small.c: a Transformer step's
 * attention heads, a million rows a step) stay inline: gcc turns a loop of whole-vector moves,
 * or of zeros, into a libc call per row, which cost more than the copy. With AVX2 or wider no
 * small_* function of the build's object calls memcpy or memmove, nor (gcc) memset; clang
 * zeroes a block's accumulators with memset in one of its instantiations, left to it. */
Test(build, attention_products_copy_rows_inline) {
    char *flags = optimised_build_flags();
    if (tu_sh("%s -dM -E -x c /dev/null 2>/dev/null | grep -q '__AVX2__'", flags) != 0) {
        free(flags);
        TU_SKIP("the build has no AVX2: the rows are copied by memcpy on purpose");
    }
    char cc[256];
    bool clang = build_compiler(flags, cc, sizeof cc);
    char *dir = tu_tmpdir();
    cr_assert_eq(tu_sh("%s -c src/cpu/gemm_small.c -o %s", flags, tu_path(dir, "small.o")), 0,
                 "gemm_small.c did not compile with the build's flags");
    /* one line per call: the function it is in, then the callee */
    cr_assert_eq(tu_sh("objdump -dr %s | awk '/^[0-9a-f]+ <.*>:$/ {fn = $2} /R_X86_64_PLT32/ {print fn, $NF}' > %s",
                       tu_path(dir, "small.o"), tu_path(dir, "calls.txt")),
                 0, "objdump failed");
    cr_assert_eq(tu_sh("objdump -d %s | grep -q '<small_range>:'", tu_path(dir, "small.o")), 0,
                 "small_range not found in the object: the check would see nothing");
    char *calls = tu_slurp(tu_path(dir, "calls.txt"), NULL);
    cr_assert(calls);
    for (char *line = strtok(calls, "\n"); line; line = strtok(NULL, "\n")) {
        bool copy = strstr(line, " memcpy") || strstr(line, " memmove"), zero = strstr(line, " memset") && !clang;
        cr_expect(strncmp(line, "<small_", 7) || !(copy || zero), "%s: a libc call in a small product (`%s`)", line, cc);
    }
    free(calls);
    free(flags);
    tu_rm_rf(dir);
    free(dir);
}
