/* test_bpe.c — byte-pair encoding: merges derived by hand on Sennrich's example, raw text
 * back from pieces (whitespace runs made one space), bytes for unseen characters, the same
 * file from the same text, vocabulary sizes, long words, hostile model files, ./subword. */
#include "test_util.h"
#include "s2s/bpe.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void learn(Bpe *b, char **lines, size_t n, int merges, int vocab_size) {
    bpe_init(b);
    BpeLearnOpts o = {.merges = merges, .vocab_size = vocab_size, .min_count = 2};
    S2sError err;
    int learned;
    cr_assert_eq(bpe_learn(b, lines, n, &o, &learned, &err), S2S_OK, "%s", err.msg);
}

static char *pieces(const Bpe *b, const char *line) {
    int32_t *ids = NULL;
    int cap = 0, n = bpe_encode(b, line, &ids, &cap);
    size_t len = 0;
    char *out = calloc(1, 1);
    for (int k = 0; k < n; k++) {
        const char *p = bpe_piece(b, ids[k]);
        out = realloc(out, len + strlen(p) + 2);
        len += (size_t)sprintf(out + len, "%s%s", k ? " " : "", p);
    }
    free(ids);
    return out;
}

static char *round_trip(const Bpe *b, const char *line) {
    int32_t *ids = NULL;
    int cap = 0, n = bpe_encode(b, line, &ids, &cap);
    char *text = bpe_decode(b, ids, n);
    free(ids);
    return text;
}

/* "low"×5 "lower"×2 "newest"×6 "widest"×3, each word "▁"+characters. Characters by count:
 * e 17, w 16, ▁ 16 (w's code point is smaller), s 9, t 9, l 7, o 7, n 6, d 3, i 3, r 2: ids
 * 260.. in that order, merged pieces after them. Ties go to the pair of smaller ids.
 * (e,s) 9 = (s,t) 9 → "es"; (es,t) 9 → "est"; then (▁,l), (l,o), (o,w) at 7 → "▁l" (262,265);
 * (▁l,o) = (273,266) against (o,w) = (266,261) → "ow"; then "▁low"; at 6: (▁,n), (n,e), (e,w),
 * (w,est) → "ew" (260,261); (▁,n) (262,267) → "▁n"; (ew,est) (276,272) before (▁n,ew) → "ewest". */
Test(bpe, merges_by_hand) {
    char *lines[] = {"low low low low low lower lower", "newest newest newest newest newest newest", "widest widest widest"};
    Bpe b;
    learn(&b, lines, 3, 8, 0);
    cr_assert_eq(b.n_chars, 11);
    const char *want[][2] = {{"e", "s"}, {"es", "t"}, {"\xe2\x96\x81", "l"}, {"o", "w"},
                             {"\xe2\x96\x81l", "ow"}, {"e", "w"}, {"\xe2\x96\x81", "n"}, {"ew", "est"}};
    cr_assert_eq(b.n_merges, 8);
    for (int k = 0; k < 8; k++) {
        cr_expect_str_eq(bpe_piece(&b, b.merges[k].left), want[k][0], "merge %d left", k);
        cr_expect_str_eq(bpe_piece(&b, b.merges[k].right), want[k][1], "merge %d right", k);
    }
    char *p = pieces(&b, "lowest newer");
    cr_expect_str_eq(p, "\xe2\x96\x81low est \xe2\x96\x81n ew e r", "%s", p);
    free(p);
    bpe_free(&b);
}

static const char *SAMPLE[] = {
    "Ein Mann in einem blauen Hemd steht auf einer Leiter und putzt ein Fenster.",
    "Zwei junge Mädchen spielen im Schnee — „Schneeballschlacht“!",
    "A man in a blue shirt is standing on a ladder cleaning a window.",
    "Two young girls play in the snow: 3.5 cm, 100% fun.",
    "Ein Mann    mit\tTabs und  doppelten   Leerzeichen ",
};

Test(bpe, raw_text_comes_back) {
    Bpe b;
    learn(&b, (char **)SAMPLE, 5, 200, 0);
    for (int k = 0; k < 5; k++) {
        char *t = round_trip(&b, SAMPLE[k]);
        /* whitespace runs become one space, none at the ends */
        char want[256];
        size_t w = 0;
        for (const char *s = SAMPLE[k]; *s; s++) {
            bool sp = *s == ' ' || *s == '\t';
            if (sp && (w == 0 || want[w - 1] == ' ')) continue;
            want[w++] = sp ? ' ' : *s;
        }
        while (w && want[w - 1] == ' ') w--;
        want[w] = '\0';
        cr_expect_str_eq(t, want);
        free(t);
    }
    bpe_free(&b);
}

Test(bpe, unseen_characters_become_bytes_and_come_back) {
    Bpe b;
    learn(&b, (char **)SAMPLE, 5, 50, 0);
    const char *line = "Ωmega 日本語 😀 ok";
    char *p = pieces(&b, line);
    cr_expect(strstr(p, "<0xCE> <0xA9>") != NULL, "Ω as its two bytes: %s", p);
    cr_expect(strstr(p, "<0xF0> <0x9F> <0x98> <0x80>") != NULL, "the emoji as its four bytes: %s", p);
    char *t = round_trip(&b, line);
    cr_expect_str_eq(t, line);
    free(t);
    free(p);
    /* bytes that are not UTF-8 decode to U+FFFD, one each */
    int32_t ids[] = {BPE_FIRST_BYTE + 0xCE, BPE_FIRST_BYTE + 0x41};
    t = bpe_decode(&b, ids, 2);
    cr_expect_str_eq(t, "\xef\xbf\xbd" "A");
    free(t);
    bpe_free(&b);
}

Test(bpe, same_text_same_file_and_the_file_reads_back) {
    char *d = tu_tmpdir();
    Bpe a, b, c;
    learn(&a, (char **)SAMPLE, 5, 120, 0);
    learn(&b, (char **)SAMPLE, 5, 120, 0);
    S2sError err;
    cr_assert_eq(bpe_save(&a, tu_path(d, "a"), &err), S2S_OK, "%s", err.msg);
    cr_assert_eq(bpe_save(&b, tu_path(d, "b"), &err), S2S_OK, "%s", err.msg);
    cr_expect(tu_same_file(tu_path(d, "a"), tu_path(d, "b")));
    bpe_init(&c);
    cr_assert_eq(bpe_load(&c, tu_path(d, "a"), &err), S2S_OK, "%s", err.msg);
    cr_expect_eq(bpe_size(&c), bpe_size(&a));
    for (int k = 0; k < 5; k++) {
        char *p = pieces(&a, SAMPLE[k]), *q = pieces(&c, SAMPLE[k]);
        cr_expect_str_eq(q, p);
        free(p);
        free(q);
    }
    bpe_free(&a);
    bpe_free(&b);
    bpe_free(&c);
    tu_rm_rf(d);
    free(d);
}

Test(bpe, vocabulary_size_and_too_many_merges) {
    Bpe b;
    learn(&b, (char **)SAMPLE, 5, 0, 0);
    int chars = b.n_chars;
    bpe_free(&b);
    learn(&b, (char **)SAMPLE, 5, 0, BPE_FIRST_CHAR + chars + 30);
    cr_expect_eq(b.n_merges, 30);
    cr_expect(bpe_size(&b) <= BPE_FIRST_CHAR + chars + 30, "%d pieces", bpe_size(&b)); /* two merges may spell one piece */
    bpe_free(&b);
    /* more merges than the text allows: as many as it does, no error */
    bpe_init(&b);
    BpeLearnOpts o = {.merges = 100000, .min_count = 2};
    S2sError err;
    int learned;
    cr_assert_eq(bpe_learn(&b, (char **)SAMPLE, 5, &o, &learned, &err), S2S_OK);
    cr_expect(learned > 30 && learned < 100000, "%d", learned);
    bpe_free(&b);
    /* a vocabulary smaller than its characters: a config error naming the sizes */
    bpe_init(&b);
    o = (BpeLearnOpts){.vocab_size = 100, .min_count = 2};
    cr_expect_eq(bpe_learn(&b, (char **)SAMPLE, 5, &o, &learned, &err), S2S_ERR_CONFIG);
    cr_expect(strstr(err.msg, "100") != NULL, "%s", err.msg);
    bpe_free(&b);
}

Test(bpe, a_long_word_costs_little, .timeout = 20) {
    Bpe b;
    learn(&b, (char **)SAMPLE, 5, 200, 0);
    size_t n = 1 << 20;
    char *line = malloc(n + 1);
    for (size_t i = 0; i < n; i++) line[i] = "Schneeballschlacht"[i % 18];
    line[n] = '\0';
    char *t = round_trip(&b, line);
    cr_expect_str_eq(t, line);
    free(t);
    free(line);
    bpe_free(&b);
}

Test(bpe, hostile_model_files_are_refused_with_their_line) {
    struct {
        const char *text, *says;
    } cases[] = {
        {"", ":1: expected"},
        {"s2s-bpe 2 chars=1 merges=0\na\n", ":1: expected"},
        {"s2s-bpe 1 chars=-1 merges=0\n", ":1: expected"},
        {"s2s-bpe 1 chars=4000000 merges=4000000\n", "more than"},
        {"s2s-bpe 1 chars=2 merges=0\na\n", ":3: the file ends"},
        {"s2s-bpe 1 chars=1 merges=0\nab\n", ":2: expected one character"},
        {"s2s-bpe 1 chars=1 merges=0\n \n", ":2: expected one character"},
        {"s2s-bpe 1 chars=2 merges=0\na\na\n", ":3: the character \"a\" twice"},
        {"s2s-bpe 1 chars=1 merges=1\na\na b\n", ":3: \"b\" is not"},
        {"s2s-bpe 1 chars=1 merges=1\na\naa\n", ":3: expected two pieces"},
        {"s2s-bpe 1 chars=1 merges=1\na\na a a\n", ":3: expected two pieces"},
        {"s2s-bpe 1 chars=1 merges=0\na\nextra\n", ":3: text after"},
        {"s2s-bpe 1 chars=1 merges=0\n\xff\n", "not UTF-8"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        Bpe b;
        bpe_init(&b);
        S2sError err;
        cr_expect_eq(bpe_parse(&b, cases[k].text, strlen(cases[k].text), "m.bpe", &err), S2S_ERR_CORRUPT, "case %zu", k);
        cr_expect(strstr(err.msg, cases[k].says) != NULL, "case %zu: %s", k, err.msg);
        bpe_free(&b);
    }
    Bpe b;
    bpe_init(&b);
    S2sError err;
    cr_expect_eq(bpe_parse(&b, "s2s-bpe 1 chars=1 merges=0\na\0\n", 30, "m.bpe", &err), S2S_ERR_CORRUPT);
    bpe_free(&b);
}

/* BPE-dropout's definition (subword-nmt's, Provilkov et al. 2020): at each step the applicable
 * merges (every position of every learned pair) are each kept with probability 1 − p, the
 * best kept one (lowest rank, then leftmost) is made, and the word ends when none is kept.
 * The exact probability of every segmentation of a word by recursion over that definition. */
typedef struct Outcome {
    int32_t ids[16];
    int n;
    double prob;
} Outcome;

static int rank_of_pair(const Bpe *b, int32_t l, int32_t r) {
    for (int k = 0; k < b->n_merges; k++)
        if (b->merges[k].left == l && b->merges[k].right == r) return k;
    return -1;
}

static void add_outcome(Outcome *out, int *n_out, const int32_t *ids, int n, double prob) {
    for (int k = 0; k < *n_out; k++)
        if (out[k].n == n && !memcmp(out[k].ids, ids, (size_t)n * sizeof *ids)) {
            out[k].prob += prob;
            return;
        }
    cr_assert(*n_out < 64);
    memcpy(out[*n_out].ids, ids, (size_t)n * sizeof *ids);
    out[*n_out].n = n;
    out[(*n_out)++].prob = prob;
}

static void dropout_outcomes(const Bpe *b, const int32_t *ids, int n, double p, double prob, Outcome *out, int *n_out) {
    int cand[16], m = 0;
    for (int i = 0; i + 1 < n; i++)
        if (rank_of_pair(b, ids[i], ids[i + 1]) >= 0) cand[m++] = i;
    for (int x = 1; x < m; x++) /* by (rank, position) */
        for (int y = x; y > 0; y--) {
            int ry = rank_of_pair(b, ids[cand[y]], ids[cand[y] + 1]), rz = rank_of_pair(b, ids[cand[y - 1]], ids[cand[y - 1] + 1]);
            if (ry > rz || (ry == rz && cand[y] > cand[y - 1])) break;
            int t = cand[y];
            cand[y] = cand[y - 1];
            cand[y - 1] = t;
        }
    double none = 1;
    for (int k = 0; k < m; k++) { /* the first k left out, the k-th kept */
        int32_t next[16];
        int i = cand[k], nn = 0;
        for (int j = 0; j < n; j++) {
            if (j == i) next[nn++] = b->merges[rank_of_pair(b, ids[i], ids[i + 1])].piece;
            else if (j != i + 1) next[nn++] = ids[j];
        }
        dropout_outcomes(b, next, nn, p, prob * none * (1 - p), out, n_out);
        none *= p;
    }
    add_outcome(out, n_out, ids, n, prob * none);
}

Test(bpe, dropout_samples_the_definitions_segmentations) {
    char *lines[] = {"low low low low low lower lower", "newest newest newest newest newest newest", "widest widest widest"};
    Bpe b;
    learn(&b, lines, 3, 8, 0);
    Rng rng;
    rng_init(&rng, 7, RNG_STREAM_SUBWORD);
    int32_t *ids = NULL, *ref = NULL;
    int cap = 0, rcap = 0;
    const char *words[] = {"newest", "lowest", "widest", "lower"};
    for (int w = 0; w < 4; w++) {
        /* 0 is plain BPE; 1 makes no merge: "▁" and the characters */
        int n = bpe_encode_sampled(&b, words[w], 0, &rng, &ids, &cap), nr = bpe_encode(&b, words[w], &ref, &rcap);
        cr_assert_eq(n, nr);
        cr_expect(!memcmp(ids, ref, (size_t)n * sizeof *ids));
        n = bpe_encode_sampled(&b, words[w], 1, &rng, &ids, &cap);
        cr_assert_eq(n, 1 + (int)strlen(words[w]), "%s", words[w]);
        Outcome out[64];
        int n_out = 0;
        dropout_outcomes(&b, ids, n, 0.3, 1, out, &n_out);
        double total = 0;
        for (int k = 0; k < n_out; k++) total += out[k].prob;
        cr_assert_float_eq(total, 1, 1e-12);
        cr_assert_geq(n_out, 3, "%s: several segmentations", words[w]);
        /* 40,000 samples against the exact probabilities: within 5 standard deviations */
        enum { N = 40000 };
        int seen[64] = {0};
        for (int s = 0; s < N; s++) {
            int m = bpe_encode_sampled(&b, words[w], 0.3f, &rng, &ids, &cap), hit = -1;
            for (int k = 0; k < n_out && hit < 0; k++)
                if (out[k].n == m && !memcmp(out[k].ids, ids, (size_t)m * sizeof *ids)) hit = k;
            cr_assert_geq(hit, 0, "%s: a segmentation the definition never makes", words[w]);
            seen[hit]++;
        }
        for (int k = 0; k < n_out; k++) {
            double f = (double)seen[k] / N, e = out[k].prob;
            cr_expect_leq(fabs(f - e), 5 * sqrt(e * (1 - e) / N) + 1e-4, "%s, outcome %d: %.4f sampled, %.4f exact", words[w], k, f, e);
        }
    }
    /* the same seed, the same pieces; the text always comes back */
    for (int k = 0; k < 5; k++) {
        Rng r1, r2;
        rng_init(&r1, 11, RNG_STREAM_SUBWORD);
        rng_init(&r2, 11, RNG_STREAM_SUBWORD);
        int n1 = bpe_encode_sampled(&b, SAMPLE[k], 0.5f, &r1, &ids, &cap), n2 = bpe_encode_sampled(&b, SAMPLE[k], 0.5f, &r2, &ref, &rcap);
        cr_expect(n1 == n2 && !memcmp(ids, ref, (size_t)n1 * sizeof *ids));
        char *t = bpe_decode(&b, ids, n1), *u = round_trip(&b, SAMPLE[k]);
        cr_expect_str_eq(t, u);
        free(t);
        free(u);
    }
    free(ids);
    free(ref);
    bpe_free(&b);
}

Test(bpe, program_learns_encodes_and_decodes, .timeout = 60) {
    char *d = tu_tmpdir();
    FILE *f = fopen(tu_path(d, "text"), "w");
    for (int k = 0; k < 5; k++) fprintf(f, "%s\n", SAMPLE[k]);
    fclose(f);
    cr_assert_eq(tu_sh("%s/subword learn --input %s/text --merges 100 --out %s/m 2> %s/err", tu_bin(), d, d, d), 0);
    cr_expect(tu_file_has(tu_path(d, "err"), "merges"));
    cr_assert_eq(tu_sh("%s/subword encode --model %s/m < %s/text > %s/pieces && %s/subword decode --model %s/m < %s/pieces > %s/back",
                       tu_bin(), d, d, d, tu_bin(), d, d, d),
                 0);
    char *back = tu_slurp(tu_path(d, "back"), NULL);
    cr_expect(strstr(back, "Zwei junge Mädchen spielen im Schnee — „Schneeballschlacht“!\n") != NULL, "%s", back);
    free(back);
    /* usage: exit 2; a model that is not one: exit 1 naming it */
    cr_expect_eq(tu_sh("%s/subword learn --input %s/text --out %s/m2 2> /dev/null", tu_bin(), d, d), 2);
    cr_expect_eq(tu_sh("%s/subword learn --input %s/text --merges 5 --vocab-size 300 --out %s/m2 2> /dev/null", tu_bin(), d, d), 2);
    cr_expect_eq(tu_sh("%s/subword frobnicate --model %s/m 2> /dev/null", tu_bin(), d), 2);
    cr_expect_eq(tu_sh("%s/subword encode 2> /dev/null", tu_bin()), 2);
    cr_expect_eq(tu_sh("%s/subword encode --model %s/text < /dev/null 2> %s/err", tu_bin(), d, d), 1);
    cr_expect(tu_file_has(tu_path(d, "err"), "text: not a subword model"), "%s", tu_slurp(tu_path(d, "err"), NULL));
    cr_expect_eq(tu_sh("printf 's2s-bpe 1 chars=2 merges=0\\na\\n' > %s/m4 && %s/subword encode --model %s/m4 < /dev/null 2> %s/err", d,
                       tu_bin(), d, d),
                 1);
    cr_expect(tu_file_has(tu_path(d, "err"), "m4:3: the file ends"), "%s", tu_slurp(tu_path(d, "err"), NULL));
    cr_expect_eq(tu_sh("%s/subword learn --input %s/nope --merges 5 --out %s/m3 2> /dev/null", tu_bin(), d, d), 1);
    /* BPE-dropout: seeded, finer, the same text back; encode's options only */
    cr_assert_eq(tu_sh("%s/subword encode --model %s/m --dropout 0.3 --seed 5 < %s/text > %s/p1 && "
                       "%s/subword encode --model %s/m --dropout 0.3 --seed 5 < %s/text > %s/p2 && "
                       "%s/subword encode --model %s/m --dropout 0.3 --seed 6 < %s/text > %s/p3 && "
                       "%s/subword decode --model %s/m < %s/p1 > %s/back1",
                       tu_bin(), d, d, d, tu_bin(), d, d, d, tu_bin(), d, d, d, tu_bin(), d, d, d),
                 0);
    cr_expect(tu_same_file(tu_path(d, "p1"), tu_path(d, "p2")), "one seed, one segmentation");
    cr_expect(!tu_same_file(tu_path(d, "p1"), tu_path(d, "p3")), "another seed, another segmentation");
    cr_expect(!tu_same_file(tu_path(d, "p1"), tu_path(d, "pieces")), "dropout splits some words");
    cr_expect(tu_same_file(tu_path(d, "back1"), tu_path(d, "back")), "the same text back");
    cr_expect_eq(tu_sh("%s/subword decode --model %s/m --dropout 0.1 < /dev/null 2> %s/err", tu_bin(), d, d), 2);
    cr_expect(tu_file_has(tu_path(d, "err"), "encode's"), "%s", tu_slurp(tu_path(d, "err"), NULL));
    cr_expect_eq(tu_sh("%s/subword encode --model %s/m --dropout 1.5 < /dev/null 2> /dev/null", tu_bin(), d), 2);
    /* not UTF-8 on stdin: that line is reported and left empty, the others go on */
    cr_expect_eq(tu_sh("printf 'ein Mann\\n\\377\\nzwei\\n' | %s/subword encode --model %s/m > %s/o 2> %s/err", tu_bin(), d, d, d), 1);
    char *o = tu_slurp(tu_path(d, "o"), NULL);
    int lines = 0;
    for (char *p = o; *p; p++) lines += *p == '\n';
    cr_expect_eq(lines, 3, "%s", o);
    free(o);
    tu_rm_rf(d);
    free(d);
}

/* Multi30k's raw training text (both languages, 8,000 merges) and every validation line back
 * as it was; few pieces per word. Skipped without the data ($MULTI30K_DIR). */
Test(bpe, multi30k_raw_text_round_trips, .timeout = 120) {
    const char *dir = tu_multi30k_dir("raw/train.de.gz");
    if (!dir) cr_skip_test("Multi30k not found (set MULTI30K_DIR)");
    char *d = tu_tmpdir();
    cr_assert_eq(tu_sh("zcat %s/raw/train.de.gz %s/raw/train.en.gz > %s/train && zcat %s/raw/val.de.gz %s/raw/val.en.gz > %s/val",
                       dir, dir, d, dir, dir, d),
                 0);
    cr_assert_eq(tu_sh("%s/subword learn --input %s/train --merges 8000 --out %s/m 2> /dev/null && "
                       "%s/subword encode --model %s/m < %s/val > %s/pieces && %s/subword decode --model %s/m < %s/pieces > %s/back",
                       tu_bin(), d, d, tu_bin(), d, d, d, tu_bin(), d, d, d),
                 0);
    /* the raw files have single spaces and no spaces at the ends: back exactly */
    cr_expect(tu_same_file(tu_path(d, "val"), tu_path(d, "back")), "decode(encode(val)) differs from val");
    size_t np = 0, nv = 0;
    char *pieces = tu_slurp(tu_path(d, "pieces"), &np), *val = tu_slurp(tu_path(d, "val"), &nv);
    long n_pieces = 0, n_words = 0;
    for (char *p = pieces; *p; p++) n_pieces += *p == ' ' || *p == '\n';
    for (char *p = val; *p; p++) n_words += *p == ' ' || *p == '\n';
    cr_expect(n_pieces < 1.5 * n_words, "%ld pieces for %ld words", n_pieces, n_words);
    cr_log_info("Multi30k val: %ld pieces for %ld words", n_pieces, n_words);
    free(pieces);
    free(val);
    tu_rm_rf(d);
    free(d);
}

/* A merge that would spell a special or a byte piece ("<unk>", "<0x41>") is never made: such
 * a piece, written as text, would read back as the other one. */
Test(bpe, no_piece_spells_a_special_or_a_byte) {
    char *lines[] = {"x<unk> x<unk> x<unk> y<0x41> y<0x41> y<0x41> <unk>z <unk>z"};
    Bpe b;
    learn(&b, lines, 1, 200, 0);
    cr_expect_gt(b.n_merges, 5);
    for (int id = BPE_FIRST_CHAR; id < bpe_size(&b); id++) {
        const char *t = bpe_piece(&b, id);
        cr_expect(strcmp(t, "<unk>") && strcmp(t, "<0x41>"), "piece %d spells %s", id, t);
    }
    char *back = round_trip(&b, lines[0]);
    cr_expect_str_eq(back, lines[0]);
    free(back);
    bpe_free(&b);
}
