/* test_cli_tools.c — ./speed's modes and refusals, the command-line conventions every
 * program shares, and make bench's tools (bench/peak, the summary). Runs the binaries of this
 * build ($S2S_BIN_DIR). */
#include "test_cli.h"

/* D29: a warm-up that leaves no timed batch is refused, never a timing of nothing; and the
 * options that choose what ./speed measures. */
Test(cli, speed_refuses_a_warmup_past_the_batches, .timeout = 60) {
    char *d = tu_tmpdir();
    cr_expect_eq(tu_sh("%s/speed --config reverse --set train_size=100 --warmup 10 --no-decode > %s/out 2> %s/err", tu_bin(), d, d), 2);
    char p[512];
    snprintf(p, sizeof p, "%s/err", d);
    char *e = tu_slurp(p, NULL);
    cr_expect(strstr(e, "--warmup 10 leaves no batch to time: the data make 4 batches"), "%s", e);
    free(e);
    snprintf(p, sizeof p, "%s/out", d);
    e = tu_slurp(p, NULL);
    cr_expect(e && !strstr(e, "tok_per_s"), "nothing printed as a measurement: %s", e);
    free(e);
    cr_expect_eq(tu_sh("%s/speed --config reverse --set train_size=100 --warmup 1 --iters 2 --no-decode > /dev/null", tu_bin()), 0);
#if defined(__x86_64__) /* Prescott (SSE3) is a kernel set of x86-64 OpenBLAS builds */
    /* make bench picks OpenBLAS's kernel set by this field: it is the set the library runs */
    cr_expect_eq(tu_sh("OPENBLAS_CORETYPE=PRESCOTT %s/speed --config reverse --set train_size=100 --set gemm=openblas --warmup 1 "
                       "--iters 1 --no-decode > %s/out",
                       tu_bin(), d),
                 0);
    e = tu_slurp(p, NULL);
    cr_expect(e && strstr(e, "\"openblas_core\":\"Prescott\"}"), "%s", e);
    free(e);
#endif
    /* --gemm-profile: every product counted under its back end, the heads' small products too */
    cr_expect_eq(tu_sh("%s/speed --config reverse --set train_size=100 --set model.type=transformer --set d_model=32 --set heads=4 "
                       "--set ff=64 --set layers=1 --warmup 1 --iters 2 --no-decode --gemm-profile > %s/out",
                       tu_bin(), d),
                 0);
    e = tu_slurp(p, NULL);
    cr_assert(e);
    double share = 0;
    int paths = 0;
    bool small = false;
    for (const char *q = strstr(e, "\"event\":\"gemm_path\""); q; q = strstr(q + 1, "\"event\":\"gemm_path\"")) {
        const char *sh = strstr(q, "\"share\":");
        long calls = 0;
        cr_assert(sh && sscanf(strstr(q, "\"calls\":") + 8, "%ld", &calls) == 1);
        share += strtod(sh + 8, NULL);
        paths++;
        small |= !strncmp(strstr(q, "\"path\":\"") + 8, "small\"", 6) && calls > 0;
    }
    cr_expect(paths >= 2 && small, "%s", e);
    cr_expect(fabs(share - 1.0) < 0.01, "the paths' shares add up to %g", share);
    free(e);
    /* and of the fixed-length greedy decoding, after the training steps' */
    cr_expect_eq(tu_sh("%s/speed --config reverse --set train_size=100 --set test_size=100 --warmup 1 --iters 1 --gemm-profile "
                       "> %s/out",
                       tu_bin(), d),
                 0);
    e = tu_slurp(p, NULL);
    cr_assert(e);
    const char *tr = strstr(e, "\"phase\":\"train\""), *gr = strstr(e, "\"phase\":\"greedy_full\"");
    cr_expect(tr && gr && tr < gr && strstr(gr, "\"gemm_s\":") && strtod(strstr(gr, "\"gemm_s\":") + 9, NULL) > 0, "%s", e);
    free(e);
    cr_expect_eq(tu_sh("%s/speed --warmup 2x 2> /dev/null", tu_bin()), 2);
    cr_expect_eq(tu_sh("%s/speed 2> /dev/null", tu_bin()), 2, "a bare ./speed shows its usage, starts no benchmark");
    tu_rm_rf(d);
    free(d);
}

/* --decode-modes and --repeat, and bench/ab-speed.sh, which alternates two builds' runs
 * (a test of its own: under ASan on a slow machine the speed test above took its minute). */
Test(cli, speed_decode_modes_repeat_and_ab_script, .timeout = 60) {
    char *d = tu_tmpdir();
    char p[512];
    snprintf(p, sizeof p, "%s/out", d);
    char *e;
    /* --decode-modes and --repeat: only the runs named, each as often as asked, in order */
    cr_expect_eq(tu_sh("%s/speed --config reverse --set train_size=100 --set test_size=100 --no-train "
                       "--decode-modes beam,greedy_full --repeat 2 > %s/out",
                       tu_bin(), d),
                 0);
    e = tu_slurp(p, NULL);
    cr_assert(e);
    const char *want[] = {"\"mode\":\"greedy_full\"", "\"rep\":0}", "\"mode\":\"greedy_full\"", "\"rep\":1}",
                          "\"mode\":\"beam\"",        "\"rep\":0}", "\"mode\":\"beam\"",        "\"rep\":1}"};
    const char *at = e;
    for (int i = 0; i < 8 && at; i++)
        if ((at = strstr(at, want[i]))) at++;
    int lines = 0;
    for (const char *q = strstr(e, "\"event\":\"decode\""); q; q = strstr(q + 1, "\"event\":\"decode\"")) lines++;
    cr_expect(at && lines == 4 && !strstr(e, "\"mode\":\"greedy\""), "%s", e);
    free(e);
    cr_expect_eq(tu_sh("%s/speed --config reverse --no-train --decode-modes greedy,beams 2> %s/err", tu_bin(), d), 2);
    snprintf(p, sizeof p, "%s/err", d);
    e = tu_slurp(p, NULL);
    cr_expect(e && strstr(e, "--decode-modes: 'beams' is not one of greedy, greedy_full, beam"), "%s", e);
    free(e);
    cr_expect_eq(tu_sh("%s/speed --config reverse --no-train --repeat 0 2> /dev/null", tu_bin()), 2);
    /* bench/ab-speed.sh: two builds (here one, twice) alternated, a median per measurement */
    cr_expect_eq(tu_sh("bench/ab-speed.sh --rounds 2 %s/speed %s/speed --config reverse --set train_size=100 --set test_size=100 "
                       "--no-train --decode-modes greedy_full --repeat 2 > %s/out 2> %s/err",
                       tu_bin(), tu_bin(), d, d),
                 0);
    snprintf(p, sizeof p, "%s/out", d);
    e = tu_slurp(p, NULL);
    cr_expect(e && strstr(e, "decode/fp32/greedy_full") && strstr(e, " A  n 4  median ") && strstr(e, " B  n 4  median ") &&
                  strstr(e, "B/A "),
              "%s", e);
    free(e);
    cr_expect_eq(tu_sh("bench/ab-speed.sh %s/speed 2> /dev/null", tu_bin()), 2, "one build is no comparison");
    tu_rm_rf(d);
    free(d);
}

/* Every program answers --help and --version, names an unknown option, and reads an option's
 * value both as --opt value and --opt=value. */
Test(cli, every_program_shares_its_command_line_conventions, .timeout = 60) {
    const char *progs[] = {"train", "translate", "bleu", "subword", "attend", "compare", "speed", "average"};
    for (int i = 0; i < 8; i++) {
        cr_expect_eq(tu_sh("%s/%s --help | grep -q usage", tu_bin(), progs[i]), 0, "%s --help", progs[i]);
        /* the version and the build: a commit (with -dirty for changes not committed), or unknown */
        cr_expect_eq(tu_sh("%s/%s --version | grep -Eq '^%s \\(s2s [0-9]+\\.[0-9]+\\.[0-9]+, build ([0-9a-f]{7,}(-dirty)?|unknown)\\)$'",
                           tu_bin(), progs[i], progs[i]),
                     0, "%s --version", progs[i]);
        cr_expect_eq(tu_sh("%s/%s --bogus 2>&1 | grep -q '%s: --bogus: unknown option'", tu_bin(), progs[i], progs[i]), 0,
                     "%s names an unknown option", progs[i]);
    }
    char *d = tu_tmpdir();
    /* --opt=value and --opt value read the same */
    cr_expect_eq(tu_sh("%s/attend --q='[[1,0]]' --k '[[1,0],[0,1]]' --v='[[1],[2]]' > %s/a.txt && "
                       "%s/attend --q '[[1,0]]' --k='[[1,0],[0,1]]' --v '[[1],[2]]' > %s/b.txt && cmp -s %s/a.txt %s/b.txt",
                       tu_bin(), d, tu_bin(), d, d, d), 0);
    cr_expect_eq(tu_sh("%s/train --config=reverse --set=train_size=64 --set epochs=1 --pause-at=2 --out=%s/r > /dev/null", tu_bin(), d),
                 0);
    cr_expect_eq(tu_sh("grep -q '\"train_size\":\t64' %s/r/config.json", d), 0);
    tu_rm_rf(d);
    free(d);
}

/* bench/peak (make bench's ceiling per number format) prints one JSON line with a positive
 * rate for each format the CPU has instructions for and null for the others, each beside the
 * instructions it timed; a bad thread count or duration is a usage error. */
Test(cli, bench_peak_prints_a_rate_per_format) {
    char *d = tu_tmpdir();
    cr_assert_eq(tu_sh("%s/../bench/peak 1 0.01 > %s", tu_bin(), tu_path(d, "peak.json")), 0);
    cJSON *j = tu_json_load(tu_path(d, "peak.json"));
    cr_assert(j, "not JSON: %s", tu_slurp(tu_path(d, "peak.json"), NULL));
    cr_expect_float_eq(tu_get(j, "threads")->valuedouble, 1.0, 1e-9);
    __builtin_cpu_init();
    const char *keys[] = {"f32_gflops", "bf16_gflops", "int8_gops"};
    bool has[] = {__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"),
                  __builtin_cpu_supports("avx512bf16"), __builtin_cpu_supports("avx2")};
    for (int k = 0; k < 3; k++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, keys[k]);
        char isa[32];
        snprintf(isa, sizeof isa, "%s_isa", keys[k]);
        const cJSON *i = cJSON_GetObjectItemCaseSensitive(j, isa);
        if (has[k]) {
            cr_expect(cJSON_IsNumber(x) && x->valuedouble > 0, "%s", keys[k]);
            cr_expect(cJSON_IsString(i) && i->valuestring[0], "%s", isa);
        } else {
            cr_expect(cJSON_IsNull(x) && cJSON_IsNull(i), "%s: this CPU has no instructions for it", keys[k]);
        }
    }
    cJSON_Delete(j);
    cr_expect_eq(tu_sh("%s/../bench/peak 0 > /dev/null 2>&1", tu_bin()), 2);
    cr_expect_eq(tu_sh("%s/../bench/peak 1 -1 > /dev/null 2>&1", tu_bin()), 2);
    tu_rm_rf(d);
    free(d);
}

/* make bench's summary line (bench/bench-summary.awk) is JSON with the ratios of the lines
 * it was given; on a CPU without bf16 (no bf16 line, ours or PyTorch's, and no bf16 peak) its
 * bf16 figures and ratios are null, not missing values that leave the line unreadable. The
 * step's GEMM rates are also given as shares of bench/peak's figures. */
Test(cli, bench_summary_is_json_with_or_without_bf16) {
    char *d = tu_tmpdir();
    const char *fp32 =
        "{\"event\":\"train\",\"ranks\":1,\"params\":1000,\"precision\":\"fp32\",\"gemm\":\"onednn\",\"batches\":4,"
        "\"trg_tokens\":400,\"tok_per_s\":3000.0,\"gemm_gflops\":100.0,\"sgemm_gflops_output_shape\":150.0,"
        "\"bf16_gemm_gflops_output_shape\":0.0,\"peak_rss_mb\":600.0}\n"
        "{\"event\":\"train\",\"ranks\":1,\"params\":1000,\"precision\":\"fp32\",\"gemm\":\"openblas\",\"batches\":4,"
        "\"trg_tokens\":400,\"tok_per_s\":2000.0,\"gemm_gflops\":80.0,\"sgemm_gflops_output_shape\":120.0,\"peak_rss_mb\":"
        "600.0}\n"
        "{\"event\":\"decode\",\"precision\":\"fp32\",\"mode\":\"greedy_full\",\"beam\":1,\"sent_per_s\":250.0}\n"
        "{\"event\":\"decode\",\"precision\":\"fp32\",\"mode\":\"beam\",\"beam\":5,\"sent_per_s\":50.0}\n"
        "{\"event\":\"decode\",\"precision\":\"int8\",\"mode\":\"greedy_full\",\"beam\":1,\"sent_per_s\":300.0}\n"
        "{\"torch\": \"fp32\", \"event\": \"bench\", \"tok_per_s\": 2000.0, \"peak_rss_mb\": 1000.0}\n"
        "{\"event\": \"decode_bench\", \"sent_per_s\": 100.0}\n"
        "{\"event\":\"train_busy\",\"ranks\":1,\"precision\":\"fp32\",\"gemm\":\"onednn\",\"tok_per_s\":1500.0}\n"
        "{\"event\":\"decode_busy\",\"precision\":\"fp32\",\"mode\":\"greedy_full\",\"beam\":1,\"sent_per_s\":200.0}\n"
        "{\"event\":\"decode_busy\",\"precision\":\"fp32\",\"mode\":\"beam\",\"beam\":5,\"sent_per_s\":25.0}\n"
        "{\"event\":\"train_busy_t1\",\"ranks\":1,\"precision\":\"fp32\",\"gemm\":\"onednn\",\"tok_per_s\":1200.0}\n"
        "{\"torch\": \"fp32\", \"event\": \"bench_busy\", \"tok_per_s\": 500.0, \"peak_rss_mb\": 1000.0}\n"
        "{\"event\": \"decode_bench_busy\", \"sent_per_s\": 40.0}\n"
        "{\"event\": \"python_translate\", \"lines\": 1000, \"beam\": 1, \"rounds\": 3, \"translate_s\": 3.4, "
        "\"python_s\": 3.23, \"python_vs_translate\": 0.95, \"identical\": true, \"library\": \"libs2s.so.0.6.0\"}\n"
        "{\"event\": \"python_translate\", \"lines\": 1000, \"beam\": 5, \"rounds\": 3, \"translate_s\": 20.0, "
        "\"python_s\": 20.4, \"python_vs_translate\": 1.02, \"identical\": true, \"library\": \"libs2s.so.0.6.0\"}\n";
    const char *bf16 =
        "{\"event\":\"train\",\"ranks\":1,\"params\":1000,\"precision\":\"bf16\",\"gemm\":\"onednn\",\"batches\":4,"
        "\"trg_tokens\":400,\"tok_per_s\":6000.0,\"gemm_gflops\":300.0,\"sgemm_gflops_output_shape\":150.0,"
        "\"bf16_gemm_gflops_output_shape\":500.0,\"peak_rss_mb\":600.0}\n"
        "{\"event\":\"decode\",\"precision\":\"bf16\",\"mode\":\"greedy_full\",\"beam\":1,\"sent_per_s\":400.0}\n"
        "{\"event\":\"decode\",\"precision\":\"bf16\",\"mode\":\"beam\",\"beam\":5,\"sent_per_s\":80.0}\n"
        "{\"torch\": \"--bf16\", \"event\": \"bench\", \"tok_per_s\": 3000.0, \"peak_rss_mb\": 1000.0}\n";
    const char *peak[2] = {
        "{\"event\":\"peak\",\"threads\":2,\"f32_gflops\":200.0,\"f32_gflops_isa\":\"avx2+fma\",\"bf16_gflops\":null,"
        "\"bf16_gflops_isa\":null,\"int8_gops\":400.0,\"int8_gops_isa\":\"avx2\",\"check\":0}\n",
        "{\"event\":\"peak\",\"threads\":2,\"f32_gflops\":200.0,\"f32_gflops_isa\":\"avx512f\",\"bf16_gflops\":500.0,"
        "\"bf16_gflops_isa\":\"avx512_bf16\",\"int8_gops\":800.0,\"int8_gops_isa\":\"avx512_vnni\",\"check\":0}\n"};
    for (int with = 0; with < 2; with++) {
        tu_write(tu_path(d, "lines"), "%s%s%s", peak[with], fp32, with ? bf16 : "");
        cr_assert_eq(tu_sh("awk -f bench/bench-summary.awk -v commit=abc -v cpu='AMD EPYC' -v family=25 -v cmodel=1 "
                           "-v isa=avx2 -v cores=2 %s > %s",
                           tu_path(d, "lines"), tu_path(d, "line.json")),
                     0);
        cJSON *j = tu_json_load(tu_path(d, "line.json"));
        cr_assert(j, "not JSON: %s", tu_slurp(tu_path(d, "line.json"), NULL));
        cr_expect_float_eq(tu_get(j, "train_ratio")->valuedouble, 1.5, 1e-9);
        cr_expect_float_eq(tu_get(j, "greedy_full_ratio")->valuedouble, 2.5, 1e-9);
        cr_expect_float_eq(tu_get(j, "greedy_full_int8_ratio")->valuedouble, 3.0, 1e-9);
        cr_expect_float_eq(tu_get(j, "step_gemm_of_peak")->valuedouble, 0.5, 1e-9);
        cr_expect_float_eq(tu_get(j, "sgemm_of_peak")->valuedouble, 0.75, 1e-9);
        cr_expect_float_eq(tu_get(j, "peak_int8_gops")->valuedouble, with ? 800.0 : 400.0, 1e-9);
        cr_expect_float_eq(tu_get(j, "python_vs_translate")->valuedouble, 0.95, 1e-9);
        cr_expect_float_eq(tu_get(j, "python_beam5_vs_translate")->valuedouble, 1.02, 1e-9);
        cr_expect(cJSON_IsTrue(tu_get(j, "python_identical")));
        /* beside a busy process: against the quiet lines, threads=1 and PyTorch's busy lines */
        cr_expect_float_eq(tu_get(j, "train_busy_of_quiet")->valuedouble, 0.5, 1e-9);
        cr_expect_float_eq(tu_get(j, "train_busy_vs_threads1")->valuedouble, 1.25, 1e-9);
        cr_expect_float_eq(tu_get(j, "greedy_full_busy_of_quiet")->valuedouble, 0.8, 1e-9);
        cr_expect_float_eq(tu_get(j, "beam5_busy_of_quiet")->valuedouble, 0.5, 1e-9);
        cr_expect_float_eq(tu_get(j, "torch_train_busy_of_quiet")->valuedouble, 0.25, 1e-9);
        cr_expect_float_eq(tu_get(j, "train_busy_ratio")->valuedouble, 3.0, 1e-9);
        cr_expect_float_eq(tu_get(j, "greedy_full_busy_ratio")->valuedouble, 5.0, 1e-9);
        cr_expect_float_eq(tu_get(j, "train_ratio")->valuedouble, 1.5, 1e-9, "the busy lines leave the quiet ones");
        const char *keys[] = {"train_bf16_tok_per_s", "bf16_gemm_gflops", "random_greedy_full_bf16_sent_per_s",
                              "greedy_full_bf16_ratio", "beam5_bf16_vs_torch_greedy", "peak_bf16_gflops",
                              "step_gemm_bf16_of_peak", "bf16_gemm_of_peak"};
        for (int k = 0; k < 8; k++) {
            const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, keys[k]);
            cr_expect(x && (with ? cJSON_IsNumber(x) : cJSON_IsNull(x)), "%s, bf16 lines %d", keys[k], with);
        }
        if (with) {
            cr_expect_float_eq(tu_get(j, "greedy_full_bf16_ratio")->valuedouble, 4.0, 1e-9);
            cr_expect_float_eq(tu_get(j, "train_bf16_ratio")->valuedouble, 2.0, 1e-9);
            cr_expect_float_eq(tu_get(j, "step_gemm_bf16_of_peak")->valuedouble, 0.6, 1e-9);
            cr_expect_float_eq(tu_get(j, "bf16_gemm_of_peak")->valuedouble, 1.0, 1e-9);
        } else {
            cr_expect_null(cJSON_GetObjectItemCaseSensitive(j, "train_bf16_ratio"), "no PyTorch bf16 line, no ratio");
        }
        cJSON_Delete(j);
    }
    tu_rm_rf(d);
    free(d);
}
