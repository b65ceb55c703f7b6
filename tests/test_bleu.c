/* test_bleu.c — BLEU against Moses' multi-bleu.perl: each expected line below is what
 * multi-bleu.perl printed for the same files (run here once; the script is not shipped).
 * Cases: identical, shorter and longer hypotheses, no 4-gram match, clipping of repeated
 * n-grams, empty lines, a mixed corpus. Also the ./bleu program on files. */
#include "test_util.h"
#include "s2s/multibleu.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct BleuCase {
    const char *name;
    int n;
    const char *hyp[4];
    const char *ref[4];
    const char *expected;
} BleuCase;

static const BleuCase CASES[] = {
    {"identical", 2, {"the cat sat on the mat .", "a dog runs in the park"},
     {"the cat sat on the mat .", "a dog runs in the park"},
     "BLEU = 100.00, 100.0/100.0/100.0/100.0 (BP=1.000, ratio=1.000, hyp_len=13, ref_len=13)"},
    {"shorter", 2, {"the cat sat", "a dog runs"},
     {"the cat sat on the mat .", "a dog runs in the park"},
     "BLEU = 0.00, 100.0/100.0/100.0/0.0 (BP=0.311, ratio=0.462, hyp_len=6, ref_len=13)"},
    {"longer", 2, {"the cat sat on the mat . the cat sat on the mat .", "a dog runs in the big green park today"},
     {"the cat sat on the mat .", "a dog runs in the park"},
     "BLEU = 44.72, 56.5/47.6/42.1/35.3 (BP=1.000, ratio=1.769, hyp_len=23, ref_len=13)"},
    {"no_4gram", 2, {"the cat on mat the dog", "park the in runs"},
     {"the cat sat on the mat .", "a dog runs in the park"},
     "BLEU = 0.00, 90.0/12.5/0.0/0.0 (BP=0.741, ratio=0.769, hyp_len=10, ref_len=13)"},
    {"clipping", 2, {"the the the the the the the", "park park park"},
     {"the cat sat on the mat .", "a dog runs in the park"},
     "BLEU = 0.00, 30.0/0.0/0.0/0.0 (BP=0.741, ratio=0.769, hyp_len=10, ref_len=13)"},
    {"empty_lines", 4, {"", "a dog runs in the park", "", "two men are playing football on a field ."},
     {"the cat sat on the mat .", "a dog runs in the park", "a woman is reading", "two men play football on the grass ."},
     "BLEU = 24.01, 73.3/53.8/36.4/33.3 (BP=0.513, ratio=0.600, hyp_len=15, ref_len=25)"},
    {"mixed", 4, {"a man in a red shirt is riding a bike .", "two young children are playing in the sand .", "a group of people stand outside a building .", "the woman is cooking ."},
     {"a man in a red shirt rides a bicycle .", "two children play in the sand at the beach .", "a group of people standing in front of a building .", "a woman cooks dinner in a kitchen ."},
     "BLEU = 30.28, 67.6/40.0/30.8/18.2 (BP=0.863, ratio=0.872, hyp_len=34, ref_len=39)"},
};
#define N_CASES ((int)(sizeof CASES / sizeof CASES[0]))

ParameterizedTestParameters(bleu, matches_multi_bleu) {
    static int idx[N_CASES];
    for (int i = 0; i < N_CASES; i++) idx[i] = i;
    return cr_make_param_array(int, idx, N_CASES);
}

ParameterizedTest(int *i, bleu, matches_multi_bleu) {
    const BleuCase *c = &CASES[*i];
    Bleu b;
    bleu_init(&b);
    for (int k = 0; k < c->n; k++) bleu_add_text(&b, c->hyp[k], c->ref[k]);
    BleuScore s = bleu_score(&b);
    char line[256];
    bleu_format(&s, line, sizeof line);
    cr_expect_str_eq(line, c->expected, "case %s", c->name);
    bleu_free(&b);
}

Test(bleu_cli, program_reads_files_like_multi_bleu) {
    const BleuCase *c = &CASES[N_CASES - 1];
    char *dir = tu_tmpdir();
    char ref[64], hyp[64], out[64], cmd[512];
    snprintf(ref, sizeof ref, "%s/ref", dir);
    snprintf(hyp, sizeof hyp, "%s/hyp", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    FILE *fr = fopen(ref, "w"), *fh = fopen(hyp, "w");
    for (int k = 0; k < c->n; k++) {
        fprintf(fr, "%s\n", c->ref[k]);
        fprintf(fh, "%s\n", c->hyp[k]);
    }
    fclose(fr);
    fclose(fh);
    snprintf(cmd, sizeof cmd, "%s/bleu %s < %s > %s", tu_bin(), ref, hyp, out);
    cr_assert_eq(system(cmd), 0);
    FILE *f = fopen(out, "r");
    char line[256] = "";
    cr_assert(fgets(line, sizeof line, f) != NULL);
    fclose(f);
    line[strcspn(line, "\n")] = '\0';
    cr_expect_str_eq(line, c->expected);
    /* a reference file with another number of lines is an error */
    fh = fopen(hyp, "a");
    fprintf(fh, "one more\n");
    fclose(fh);
    snprintf(cmd, sizeof cmd, "%s/bleu %s < %s > /dev/null 2>&1", tu_bin(), ref, hyp);
    cr_expect_neq(system(cmd), 0);
    tu_rm_rf(dir);
    free(dir);
}

Test(bleu, no_reference_words) {
    Bleu b;
    bleu_init(&b);
    bleu_add_text(&b, "a b c", "");
    BleuScore s = bleu_score(&b);
    char line[256];
    bleu_format(&s, line, sizeof line);
    cr_expect_str_eq(line, "BLEU = 0, 0/0/0/0 (BP=0, ratio=0, hyp_len=0, ref_len=0)");
    bleu_free(&b);
}

/* D12: clipped counts by sorting, not by comparing every n-gram with every other: a line of a
 * million tokens (50,000 distinct) scores in about a second here, where the quadratic count
 * took hours. Its counts are checked exactly. */
Test(bleu, million_token_line, .timeout = 120) {
    const int n = 1000000;
    char *h = malloc((size_t)n * 8), *r = malloc((size_t)n * 8);
    size_t lh = 0, lr = 0;
    for (int i = 0; i < n; i++) {
        lh += (size_t)sprintf(h + lh, "w%d ", i % 50000);
        lr += (size_t)sprintf(r + lr, "w%d ", (i + (i % 2)) % 50000); /* every other token shifted */
    }
    Bleu b;
    bleu_init(&b);
    bleu_add_text(&b, h, h);
    BleuScore s = bleu_score(&b);
    cr_expect(s.bleu == 100.0 && s.hyp_len == n, "BLEU %.2f of a line with itself", s.bleu);
    bleu_free(&b);
    bleu_init(&b);
    bleu_add_text(&b, h, r);
    /* unigrams: hyp has each word 20 times; ref has the even words 40 times and no odd word */
    cr_expect_eq(b.correct[0], 500000, "clipped unigrams %ld", b.correct[0]);
    bleu_free(&b);
    free(h);
    free(r);
}

Test(bleu_cli, program_refuses_what_it_cannot_score) {
    char *d = tu_tmpdir();
    cr_expect_eq(tu_sh("printf '' > %s/empty && %s/bleu %s/empty %s/empty 2> %s/err", d, tu_bin(), d, d, d), 1);
    char p[512];
    snprintf(p, sizeof p, "%s/err", d);
    char *e = tu_slurp(p, NULL);
    cr_expect(strstr(e, "no sentences to score"), "%s", e);
    free(e);
    /* D28: input without a newline is refused at the line limit, not read into memory */
    cr_expect_eq(tu_sh("printf 'a\\n' > %s/r && %s/bleu /dev/zero %s/r 2> %s/err", d, tu_bin(), d, d), 1);
    e = tu_slurp(p, NULL);
    cr_expect(strstr(e, "/dev/zero:1: longer than 1048576 bytes"), "%s", e);
    free(e);
    cr_expect_eq(tu_sh("%s/bleu %s/r %s/r %s/r 2> /dev/null", tu_bin(), d, d, d), 2);
    cr_expect_eq(tu_sh("%s/bleu --bogus 2> /dev/null", tu_bin()), 2);
    cr_expect_eq(tu_sh("%s/bleu --version > /dev/null", tu_bin()), 0);
    /* options of one scorer with the other: refused, not ignored */
    cr_expect_eq(tu_sh("%s/bleu -lc %s/r %s/r 2> /dev/null", tu_bin(), d, d), 2);
    cr_expect_eq(tu_sh("%s/bleu --ref %s/r %s/r %s/r 2> /dev/null", tu_bin(), d, d, d), 2);
    cr_expect_eq(tu_sh("%s/bleu --word-order 2 --sacrebleu %s/r %s/r 2> /dev/null", tu_bin(), d, d), 2);
    cr_expect_eq(tu_sh("%s/bleu --normalize en --chrf %s/r %s/r 2> /dev/null", tu_bin(), d, d), 2);
    cr_expect_eq(tu_sh("%s/bleu --tokenize 14a %s/r %s/r 2> /dev/null", tu_bin(), d, d), 2);
    cr_expect_eq(tu_sh("printf 'b\\n' > %s/r2 && %s/bleu --sacrebleu --ref %s/r2 %s/r %s/r > /dev/null", d, tu_bin(), d, d, d), 0);
    cr_expect_eq(tu_sh("printf 'b\\nc\\n' > %s/r3 && %s/bleu --sacrebleu --ref %s/r3 %s/r %s/r 2> %s/err", d, tu_bin(), d, d, d, d), 1);
    cr_expect(tu_file_has(p, "r3 has 2 lines, the hypotheses 1"), "%s", tu_slurp(p, NULL));
    tu_rm_rf(d);
    free(d);
}

/* --normalize: raw hypotheses lowercased and tokenised as the Multi30k files before
 * multi-bleu, so a raw-text system scores on the word path's line. */
Test(bleu_cli, normalize_makes_raw_hypotheses_comparable) {
    char *d = tu_tmpdir();
    cr_assert_eq(tu_sh("printf \"A man's dog, running.\\n\" > %s/h && printf 'a man &apos;s dog , running .\\n' > %s/r && "
                       "%s/bleu --normalize en %s/r %s/h > %s/out",
                       d, d, tu_bin(), d, d, d),
                 0);
    cr_expect(tu_file_has(tu_path(d, "out"), "BLEU = 100.00"), "%s", tu_slurp(tu_path(d, "out"), NULL));
    cr_assert_eq(tu_sh("%s/bleu %s/r %s/h > %s/out", tu_bin(), d, d, d), 0);
    cr_expect(tu_file_has(tu_path(d, "out"), "BLEU = 0.00"), "%s", tu_slurp(tu_path(d, "out"), NULL));
    tu_rm_rf(d);
    free(d);
}
