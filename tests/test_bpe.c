/* test_bpe.c — byte-pair encoding: merges derived by hand on Sennrich's example, raw text
 * back from pieces (whitespace runs made one space), bytes for unseen characters, the same
 * file from the same text, vocabulary sizes, long words, hostile model files, ./subword. */
#include "test_util.h"
#include "s2s/bpe.h"

#include <criterion/criterion.h>
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
