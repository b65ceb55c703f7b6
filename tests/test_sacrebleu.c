/* test_sacrebleu.c — ./bleu's sacreBLEU lines against sacreBLEU 2.6.0's own, for the cases
 * in tests/golden-extra/sacrebleu.json (made by make_sacrebleu.py, which ran sacreBLEU on
 * the same files: empty hypotheses, no 4-gram match, every smoothing, punctuation, numbers
 * and entities under 13a, Unicode case and whitespace, several references, chrF and chrF++),
 * and on Multi30k's raw test references where the data are here. Also Python's str.lower()
 * on the cases where it is not one character to one. */
#include "test_util.h"
#include "s2s/sacrebleu.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cJSON *load_cases(void) {
    char *text = tu_slurp("tests/golden-extra/sacrebleu.json", NULL);
    cr_assert(text != NULL, "tests/golden-extra/sacrebleu.json is missing");
    cJSON *j = cJSON_Parse(text);
    free(text);
    cr_assert(j != NULL, "sacrebleu.json does not parse");
    return j;
}

static void write_lines(const char *path, const cJSON *lines) {
    FILE *f = fopen(path, "w");
    cr_assert(f);
    const cJSON *l;
    cJSON_ArrayForEach(l, lines) fprintf(f, "%s\n", l->valuestring);
    fclose(f);
}

/* ./bleu's arguments, quoted for the shell (they are plain options and numbers) */
static void join_args(const cJSON *args, char *out, size_t cap) {
    out[0] = '\0';
    const cJSON *a;
    cJSON_ArrayForEach(a, args) {
        strncat(out, " '", cap - strlen(out) - 1);
        strncat(out, a->valuestring, cap - strlen(out) - 1);
        strncat(out, "'", cap - strlen(out) - 1);
    }
}

static char *first_line(const char *path) {
    char *s = tu_slurp(path, NULL);
    cr_assert(s != NULL);
    char *nl = strchr(s, '\n');
    if (nl) *nl = '\0';
    return s;
}

Test(sacrebleu_cli, equals_sacrebleu_on_hand_made_cases) {
    cJSON *j = load_cases();
    char *d = tu_tmpdir();
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(j, "cases")) {
        const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
        write_lines(tu_path(d, "hyp"), cJSON_GetObjectItem(c, "hyp"));
        const cJSON *refs = cJSON_GetObjectItem(c, "refs"), *r;
        char refargs[1024] = "", args[512], p[64];
        int k = 0;
        cJSON_ArrayForEach(r, refs) {
            snprintf(p, sizeof p, "ref%d", k);
            write_lines(tu_path(d, p), r);
            if (k) {
                strncat(refargs, " --ref ", sizeof refargs - strlen(refargs) - 1);
                strncat(refargs, tu_path(d, p), sizeof refargs - strlen(refargs) - 1);
            }
            k++;
        }
        join_args(cJSON_GetObjectItem(c, "args"), args, sizeof args);
        const char *want = cJSON_GetObjectItem(c, "expected")->valuestring;
        /* sacreBLEU's default is 13a BLEU: say so where the case names no metric */
        bool metric = strstr(args, "--chrf") || strstr(args, "--tokenize");
        int rc = tu_sh("%s/bleu%s%s %s/ref0 %s/hyp%s > %s/out 2> %s/err", tu_bin(), metric ? "" : " --sacrebleu", args, d, d,
                       refargs, d, d);
        cr_expect_eq(rc, 0, "%s: exit %d: %s", name, rc, tu_slurp(tu_path(d, "err"), NULL));
        char *got = first_line(tu_path(d, "out"));
        cr_expect_str_eq(got, want, "%s:\n got  %s\n want %s", name, got, want);
        free(got);
        n++;
    }
    cr_expect_gt(n, 20, "%d cases", n);
    tu_rm_rf(d);
    free(d);
    cJSON_Delete(j);
}

Test(sacrebleu_cli, equals_sacrebleu_on_multi30k, .timeout = 60) {
    const char *dir = tu_multi30k_dir("raw/test_2016_flickr.en.gz");
    if (!dir) cr_skip_test("Multi30k not found (set MULTI30K_DIR)");
    cJSON *j = load_cases();
    char *d = tu_tmpdir();
    cr_assert_eq(tu_sh("zcat %s/raw/test_2016_flickr.en.gz > %s/ref && zcat %s/raw/test_2016_flickr.de.gz > %s/source_de && "
                       "cp %s/tok/test_2016_flickr.lc.norm.tok.en %s/lc_tok_en",
                       dir, d, dir, d, dir, d),
                 0);
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(j, "multi30k_test_2016_flickr")) {
        char args[512];
        join_args(cJSON_GetObjectItem(c, "args"), args, sizeof args);
        const char *hyp = cJSON_GetObjectItem(c, "hyp")->valuestring, *want = cJSON_GetObjectItem(c, "expected")->valuestring;
        bool metric = strstr(args, "--chrf") || strstr(args, "--tokenize");
        cr_assert_eq(tu_sh("%s/bleu%s%s %s/ref %s/%s > %s/out", tu_bin(), metric ? "" : " --sacrebleu", args, d, d, hyp, d), 0);
        char *got = first_line(tu_path(d, "out"));
        cr_expect_str_eq(got, want, "%s%s:\n got  %s\n want %s", hyp, args, got, want);
        free(got);
        n++;
    }
    cr_expect_gt(n, 0);
    tu_rm_rf(d);
    free(d);
    cJSON_Delete(j);
}

/* str.lower()'s context and expansions: a capital sigma ends a word after a cased letter
 * (case-ignorable marks skipped) and not before one; İ becomes i + a combining dot. */
Test(sacrebleu, lowercases_as_python) {
    struct {
        const char *in, *want;
    } cases[] = {
        {"ΟΔΟΣ", "οδος"},  {"ΣΑΣ ΣΑΣ.", "σας σας."}, {"Σ", "σ"},      {"ΑΣΑ", "ασα"},    {"Α̈Σ", "α̈ς"},
        {"ΑΣ̈", "ας̈"},     {"İ", "i̇"},                {"ÄÖÜ ẞ", "äöü ß"}, {"ABC xyz", "abc xyz"}, {"", ""},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char *got = sb_lower(cases[k].in);
        cr_expect_str_eq(got, cases[k].want, "lower(%s) = %s, want %s", cases[k].in, got, cases[k].want);
        free(got);
    }
}

/* BLEU: a hand-derived case. Tokens (13a): "The cat sat on the mat ." + "Hello , world !" = 11;
 * hypothesis "The cat sat on a mat ." + "Hello world !" = 10. Matches 9/10, 5/8, 2/6, 1/4;
 * BP = exp(1 − 11/10); BLEU = BP (90 · 62.5 · 33.33 · 25)^¼ = 42.10. */
Test(sacrebleu, bleu_by_hand) {
    char *hyp[] = {"The cat sat on a mat.", "Hello world!"}, *ref[] = {"The cat sat on the mat.", "Hello, world!"};
    char **refs[] = {ref};
    SbBleuOpts o = sb_bleu_defaults();
    SbBleu s;
    sb_bleu(&o, hyp, (char *const *const *)refs, 1, 2, &s);
    cr_expect_eq(s.sys_len, 10);
    cr_expect_eq(s.ref_len, 11);
    double p[4] = {90.0, 62.5, 100.0 / 3.0, 25.0};
    for (int k = 0; k < 4; k++) cr_expect_float_eq(s.precision[k], p[k], 1e-9, "order %d", k + 1);
    cr_expect_float_eq(s.score, exp(1.0 - 1.1) * pow(90.0 * 62.5 * (100.0 / 3.0) * 25.0, 0.25), 1e-9);
}

/* The paired bootstrap: its full difference is the two corpus scores' (sb_bleu), its interval
 * holds it, a system against itself differs by nothing with p = 1, a much better one wins every
 * resample (p = 0), and the same seed gives the same figures. */
Test(sacrebleu, paired_bootstrap) {
    enum { N = 40 };
    char *ref[N], *good[N], *bad[N];
    const char *words[] = {"a", "dog", "runs", "over", "the", "red", "street", "with", "a", "ball"};
    for (int i = 0; i < N; i++) {
        char r[200] = "", g[200] = "", b[200] = "";
        for (int k = 0; k < 6 + i % 5; k++) {
            const char *w = words[(i * 7 + k * 3) % 10];
            strcat(r, k ? " " : ""), strcat(r, w);
            strcat(g, k ? " " : ""), strcat(g, k == 2 && i % 3 == 0 ? "walks" : w);
            strcat(b, k ? " " : ""), strcat(b, k % 2 ? "cat" : w);
        }
        ref[i] = strdup(r), good[i] = strdup(g), bad[i] = strdup(b);
    }
    SbBleuOpts o = sb_bleu_defaults();
    char *const *const refs[1] = {ref};
    SbStats sg[N], sbad[N];
    sb_bleu_stats(&o, good, refs, 1, N, sg, NULL);
    sb_bleu_stats(&o, bad, refs, 1, N, sbad, NULL);
    SbBleu bg, bb;
    sb_bleu(&o, good, refs, 1, N, &bg);
    sb_bleu(&o, bad, refs, 1, N, &bb);
    SbPaired t, u, same;
    sb_paired_bootstrap(&o, sbad, sg, N, 500, 7, &t);
    cr_expect_eq(t.a, bb.score);
    cr_expect_eq(t.b, bg.score);
    cr_expect_eq(t.diff, bg.score - bb.score);
    cr_expect(t.diff > 10 && t.lo <= t.diff && t.diff <= t.hi && t.lo > 0, "%g [%g, %g]", t.diff, t.lo, t.hi);
    cr_expect_eq(t.p, 0.0);
    sb_paired_bootstrap(&o, sbad, sg, N, 500, 7, &u);
    cr_expect(u.lo == t.lo && u.hi == t.hi && u.p == t.p, "the same seed, the same test");
    sb_paired_bootstrap(&o, sg, sbad, N, 500, 7, &u); /* the other way round: the signs flip */
    cr_expect(u.diff == -t.diff && u.hi < 0 && u.p == 0.0, "%g [%g, %g] p %g", u.diff, u.lo, u.hi, u.p);
    sb_paired_bootstrap(&o, sg, sg, N, 200, 7, &same);
    cr_expect(same.diff == 0 && same.lo == 0 && same.hi == 0 && same.p == 1.0);
    for (int i = 0; i < N; i++) free(ref[i]), free(good[i]), free(bad[i]);
}

/* ./bleu --paired-bootstrap: the test's line; its options refused where they cannot apply. */
Test(sacrebleu_cli, paired_bootstrap_program) {
    char *d = tu_tmpdir();
    cr_assert_eq(tu_sh("cd %s && printf 'a dog runs over the street\\na man sits on a red bench\\n' > ref && "
                       "printf 'a dog runs over the street\\na man sits on a bench\\n' > hyp && "
                       "printf 'a cat runs\\na man\\n' > base && printf 'x\\n' > one", d),
                 0);
    cr_expect_eq(tu_sh("cd %s && %s/bleu --sacrebleu ref hyp --paired-bootstrap base --resamples 100 > out 2>&1", d, tu_bin()), 0);
    cr_expect(tu_file_has(tu_path(d, "out"), "paired bootstrap (100 resamples of 2 lines): BLEU"), "%s", tu_slurp(tu_path(d, "out"), NULL));
    cr_expect(tu_file_has(tu_path(d, "out"), " (base): +"), "%s", tu_slurp(tu_path(d, "out"), NULL));
    cr_expect_eq(tu_sh("cd %s && %s/bleu ref hyp --paired-bootstrap base 2> out", d, tu_bin()), 2);
    cr_expect(tu_file_has(tu_path(d, "out"), "--paired-bootstrap tests sacreBLEU's BLEU"));
    cr_expect_eq(tu_sh("cd %s && %s/bleu --sacrebleu ref hyp --resamples 10 2> out", d, tu_bin()), 2);
    cr_expect_eq(tu_sh("cd %s && %s/bleu --sacrebleu ref hyp --paired-bootstrap one > /dev/null 2> out", d, tu_bin()), 1);
    cr_expect(tu_file_has(tu_path(d, "out"), "one has 1 lines, the hypotheses 2"), "%s", tu_slurp(tu_path(d, "out"), NULL));
    cr_expect_eq(tu_sh("cd %s && %s/bleu --sacrebleu ref hyp --paired-bootstrap nothing > /dev/null 2> out", d, tu_bin()), 1);
    tu_rm_rf(d);
    free(d);
}
