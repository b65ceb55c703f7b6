/* test_parallel.c — the translation data: parallel files and their errors, vocabularies,
 * the tokenizer on Multi30k's own raw and tokenised files, UTF-8 checks. */
#include "test_util.h"
#include "s2s/data.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_dir[64];

static void write_file(const char *name, const char *text) {
    char p[128];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    FILE *f = fopen(p, "w");
    fputs(text, f);
    fclose(f);
}

static ConfigTask task_in_dir(void) {
    Config c;
    config_defaults(&c);
    c.task.type = TASK_TRANSLATE;
    snprintf(c.task.data_dir, sizeof c.task.data_dir, "%s", g_dir);
    strcpy(c.task.train_prefix, "train");
    strcpy(c.task.valid_prefix, "val");
    strcpy(c.task.test_prefix, "test");
    c.task.min_freq = 2;
    return c.task;
}

static void setup(void) {
    strcpy(g_dir, "/tmp/s2s_par_XXXXXX");
    cr_assert(mkdtemp(g_dir) != NULL);
    write_file("train.de", "ein hund läuft .\nein mann läuft .\nzwei hunde\n\nein hund .\n");
    write_file("train.en", "a dog runs .\na man runs .\ntwo dogs\nempty source\na dog .\n");
    write_file("val.de", "ein hund .\n");
    write_file("val.en", "a dog .\n");
    write_file("test.de", "ein katze läuft .\n");
    write_file("test.en", "a cat runs .\n");
}

static void teardown(void) {
    tu_rm_rf(g_dir);
}

TestSuite(parallel, .init = setup, .fini = teardown);

Test(parallel, loads_and_builds_vocabularies_by_frequency) {
    ConfigTask t = task_in_dir();
    TaskData d;
    S2sError err;
    cr_assert_eq(task_load(&d, &t, &err), S2S_OK, "%s", err.msg);
    cr_expect_eq(d.train.n, 4, "the pair with an empty side is left out");
    cr_expect_eq(d.train_counts.read, 5);
    cr_expect_eq(d.train_counts.kept, 4);
    cr_expect_eq(d.train_counts.dropped[DROP_EMPTY], 1);
    cr_expect_eq(d.train_counts.first[DROP_EMPTY], 4, "the empty source is on line 4");
    /* de counts: ein 3, . 3, hund 2, läuft 2 (≥ 2); the rest once */
    cr_expect_eq(d.src_vocab.size, TOK_SPECIALS + 4);
    cr_expect_str_eq(d.src_vocab.tokens[4], ".", "ties in frequency go by byte order");
    cr_expect_str_eq(d.src_vocab.tokens[5], "ein");
    cr_expect_eq(vocab_find(&d.src_vocab, "mann"), -1, "below min_freq");
    /* the test source "ein katze läuft ." has an unknown word */
    const int32_t *s = d.test.ids + d.test.src_off[0];
    cr_expect_eq(s[1], TOK_UNK);
    cr_expect_str_eq(d.test_refs[0], "a cat runs .", "references are kept as text for BLEU");
    const int32_t *tr = d.test.ids + d.test.trg_off[0];
    cr_expect_eq(tr[0], TOK_SOS);
    cr_expect_eq(tr[d.test.trg_len[0] - 1], TOK_EOS);
    task_free(&d);
}

Test(parallel, bad_path_names_the_file) {
    ConfigTask t = task_in_dir();
    strcpy(t.train_prefix, "nope");
    TaskData d;
    S2sError err;
    cr_assert_eq(task_load(&d, &t, &err), S2S_ERR_IO);
    cr_expect(strstr(err.msg, "/nope.de: cannot open") && strstr(err.msg, "holds the prefixes test, train, val") &&
                  strstr(err.msg, "set task.train_prefix"),
              "%s", err.msg);
}

Test(parallel, mismatched_line_counts) {
    write_file("val.en", "a dog .\nextra line\n");
    ConfigTask t = task_in_dir();
    TaskData d;
    S2sError err;
    cr_assert_eq(task_load(&d, &t, &err), S2S_ERR_DATA);
    cr_expect(strstr(err.msg, "val.de has 1 lines but") && strstr(err.msg, "val.en has 2"), "%s", err.msg);
}

Test(parallel, empty_source_in_test_and_invalid_utf8) {
    write_file("test.de", "\n");
    ConfigTask t = task_in_dir();
    TaskData d;
    S2sError err;
    cr_assert_eq(task_load(&d, &t, &err), S2S_ERR_DATA);
    cr_expect(strstr(err.msg, "test.de:1: empty source sentence"), "%s", err.msg);
    write_file("test.de", "ein hund .\n");
    write_file("val.de", "ein \xff hund .\n");
    cr_assert_eq(task_load(&d, &t, &err), S2S_ERR_DATA);
    cr_expect(strstr(err.msg, "val.de:1: not valid UTF-8"), "%s", err.msg);
}

Test(utf8, validity) {
    cr_expect(utf8_valid("abc", 3));
    cr_expect(utf8_valid("f\xc3\xa4hrt", 6));
    cr_expect(utf8_valid("\xf0\x9f\x98\x80", 4));
    cr_expect(!utf8_valid("\xff", 1));
    cr_expect(!utf8_valid("\xc3", 1), "truncated");
    cr_expect(!utf8_valid("\xc0\xaf", 2), "overlong");
    cr_expect(!utf8_valid("\xed\xa0\x80", 3), "surrogate");
    cr_expect(!utf8_valid("a\0b", 3), "NUL");
}

Test(tokenize, user_text) {
    char *t = tok_normalize("Ein Mann fährt Fahrrad.", "de");
    cr_expect_str_eq(t, "ein mann fährt fahrrad .");
    free(t);
    t = tok_normalize("ÄÖÜ STRASSE, „Zitat“ & mehr!", "de");
    cr_expect_str_eq(t, "äöü strasse , &quot; zitat &quot; &amp; mehr !");
    free(t);
    t = tok_normalize("A man's hat (red) costs 1,000 dollars.", "en");
    cr_expect_str_eq(t, "a man &apos;s hat ( red ) costs 1,000 dollars .");
    free(t);
}

/* The tokenizer against the official files: raw val/test → exactly the tok files. */
Test(tokenize, reproduces_multi30k_tokenised_files) {
    const char *dir = getenv("MULTI30K_DIR");
    char base[512];
    snprintf(base, sizeof base, "%s", dir && *dir ? dir : "../shared/data/multi30k");
    const char *splits[] = {"val", "test_2016_flickr"}, *langs[] = {"de", "en"};
    for (int s = 0; s < 2; s++)
        for (int l = 0; l < 2; l++) {
            char cmd[1200], raw[64], tokp[1024];
            snprintf(raw, sizeof raw, "/tmp/s2s_raw_%d_%d_%d", (int)getpid(), s, l);
            snprintf(cmd, sizeof cmd, "zcat %s/raw/%s.%s.gz > %s", base, splits[s], langs[l], raw);
            if (system(cmd) != 0) cr_skip_test("Multi30k not found at %s (set MULTI30K_DIR)", base);
            snprintf(tokp, sizeof tokp, "%s/tok/%s.lc.norm.tok.%s", base, splits[s], langs[l]);
            char **r, **k;
            int nr, nk;
            S2sError err;
            cr_assert_eq(text_read_lines(raw, &r, &nr, &err), S2S_OK, "%s", err.msg);
            cr_assert_eq(text_read_lines(tokp, &k, &nk, &err), S2S_OK, "%s", err.msg);
            cr_assert_eq(nr, nk);
            int same = 0;
            for (int i = 0; i < nr; i++) {
                char *t = tok_normalize(r[i], langs[l]);
                same += !strcmp(t, k[i]);
                free(t);
            }
            cr_expect_eq(same, nr, "%s.%s: %d of %d lines as the official tokenisation", splits[s], langs[l], same, nr);
            text_free_lines(r, nr);
            text_free_lines(k, nk);
            unlink(raw);
        }
}
