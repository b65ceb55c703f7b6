/* test_bleu.c — BLEU against Moses' multi-bleu.perl: each expected line below is what
 * multi-bleu.perl printed for the same files (run here once; the script is not shipped).
 * Cases: identical, shorter and longer hypotheses, no 4-gram match, clipping of repeated
 * n-grams, empty lines, a mixed corpus. Also the ./bleu program on files. */
#include "test_util.h"
#include "s2s/bleu.h"

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

Test(bleu, program_reads_files_like_multi_bleu) {
    const BleuCase *c = &CASES[N_CASES - 1];
    char dir[] = "/tmp/s2s_bleu_XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
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
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    system(cmd);
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
