/* test_corpus.c — a training corpus brought in (corpus.h): every filter drops what it should
 * and counts it with its first line, the counts survive the prepared file, files of different
 * lengths and a corpus with nothing left are refused with the files named, .gz inputs read as
 * plain ones, BPE learned on a sample is drawn alike each time, and a streamed training split
 * gives the batches the in-memory one gives, and a read error (not a crash) when its file is
 * cut under it. */
#include "test_util.h"
#include "s2s/corpus.h"
#include "s2s/data.h"
#include "s2s/file.h"
#include "s2s/subword.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void write_lines(const char *dir, const char *name, const char *text) {
    FILE *f = fopen(tu_path(dir, name), "w");
    cr_assert(f != NULL, "%s", name);
    fputs(text, f);
    fclose(f);
}

static ConfigTask task_in(const char *dir, const char *cache) {
    Config c;
    config_defaults(&c);
    ConfigTask t = c.task;
    t.type = TASK_TRANSLATE;
    snprintf(t.data_dir, sizeof t.data_dir, "%.200s", dir);
    snprintf(t.train_prefix, sizeof t.train_prefix, "train");
    snprintf(t.valid_prefix, sizeof t.valid_prefix, "val");
    snprintf(t.test_prefix, sizeof t.test_prefix, "test");
    snprintf(t.cache_dir, sizeof t.cache_dir, "%.200s", cache);
    t.min_freq = 1;
    return t;
}

static void eval_files(const char *dir) {
    write_lines(dir, "val.de", "ein hund .\n");
    write_lines(dir, "val.en", "a dog .\n");
    write_lines(dir, "test.de", "ein mann .\n");
    write_lines(dir, "test.en", "a man .\n");
}

/* Line 2 not UTF-8, 3 an empty target, 4 a duplicate of 1, 5 seven words, 6 a ratio of 4. */
static const char *const DE = "ein hund läuft .\nein \xff mann\nzwei hunde\nein hund läuft .\n"
                              "a b c d e f g\nja\nein mann läuft .\n";
static const char *const EN = "a dog runs .\na man\n\na dog runs .\na b c d e f g\nyes yes yes yes\na man runs .\n";

Test(corpus, every_filter_drops_what_it_should_and_says_where) {
    char *d = tu_tmpdir();
    write_lines(d, "train.de", DE);
    write_lines(d, "train.en", EN);
    eval_files(d);
    for (int cached = 0; cached < 2; cached++) {
        ConfigTask t = task_in(d, cached ? tu_path(d, "cache") : "");
        t.dedup = true;
        t.max_train_len = 6;
        t.max_length_ratio = 3.0f;
        TaskData td;
        S2sError err;
        cr_assert_eq(task_load(&td, &t, &err), S2S_OK, "%s", err.msg);
        const CorpusCounts *c = &td.train_counts;
        cr_expect_eq(c->read, 7);
        cr_expect_eq(c->kept, 2, "kept %ld", c->kept);
        cr_expect_eq(td.train.n, 2);
        long want[DROP_REASONS] = {[DROP_NOT_UTF8] = 1, [DROP_EMPTY] = 1, [DROP_DUPLICATE] = 1, [DROP_TOO_LONG] = 1, [DROP_RATIO] = 1};
        long line[DROP_REASONS] = {[DROP_NOT_UTF8] = 2, [DROP_EMPTY] = 3, [DROP_DUPLICATE] = 4, [DROP_TOO_LONG] = 5, [DROP_RATIO] = 6};
        for (int i = 0; i < DROP_REASONS; i++) {
            cr_expect_eq(c->dropped[i], want[i], "%s: %ld dropped", DROP_NAMES[i], c->dropped[i]);
            cr_expect_eq(c->first[i], line[i], "%s: first at %ld", DROP_NAMES[i], c->first[i]);
        }
        char text[400];
        corpus_counts_text(c, &t, text, sizeof text);
        cr_expect(strstr(text, "5 of 7 left out: ") && strstr(text, "1 duplicate (the first on line 4)"), "%s", text);
        task_free(&td);
        /* read back from the prepared file: the same counts */
        if (cached) {
            cr_assert_eq(task_load(&td, &t, &err), S2S_OK, "%s", err.msg);
            cr_expect_eq(td.prepared_state, PREPARED_READ);
            cr_expect_eq(td.train_counts.dropped[DROP_RATIO], 1);
            cr_expect_eq(td.train_counts.first[DROP_TOO_LONG], 5);
            task_free(&td);
        }
    }
    /* the defaults keep duplicates, long pairs and any ratio */
    ConfigTask t = task_in(d, "");
    TaskData td;
    S2sError err;
    cr_assert_eq(task_load(&td, &t, &err), S2S_OK, "%s", err.msg);
    cr_expect_eq(td.train_counts.kept, 5);
    task_free(&td);
    tu_rm_rf(d);
    free(d);
}

Test(corpus, files_of_other_lengths_and_nothing_left_are_refused) {
    char *d = tu_tmpdir();
    write_lines(d, "train.de", "ein hund\nein mann\nzwei hunde\n");
    write_lines(d, "train.en", "a dog\na man\n");
    eval_files(d);
    ConfigTask t = task_in(d, tu_path(d, "cache"));
    TaskData td;
    S2sError err;
    cr_expect_eq(task_load(&td, &t, &err), S2S_ERR_DATA);
    cr_expect(strstr(err.msg, "train.en has 2 lines") && strstr(err.msg, "train.de has more"), "%s", err.msg);
    write_lines(d, "train.de", "\n\xfe\n");
    write_lines(d, "train.en", "a dog\na man\n");
    cr_expect_eq(task_load(&td, &t, &err), S2S_ERR_DATA);
    cr_expect(strstr(err.msg, "no usable training pair") && strstr(err.msg, "1 empty") && strstr(err.msg, "1 not UTF-8"), "%s",
              err.msg);
    cr_expect_eq(tu_sh("ls %s/cache/*.s2sdata > /dev/null 2>&1", d), 2, "a file was left behind for a refused corpus");
    tu_rm_rf(d);
    free(d);
}

/* A corpus whose files are named otherwise is told the prefixes its folder holds and the key to
 * set, not Multi30k's fetch script; Multi30k's own folder still is. */
Test(corpus, missing_files_name_the_prefixes_found) {
    char *d = tu_tmpdir();
    write_lines(d, "train.de", DE);
    write_lines(d, "train.en", EN);
    write_lines(d, "dev.de", "ein hund .\n");
    write_lines(d, "dev.en", "a dog .\n");
    cr_assert_eq(tu_sh("printf 'ein mann .\\n' | gzip > %s/test.de.gz && printf 'a man .\\n' | gzip > %s/test.en.gz", d, d), 0);
    ConfigTask t = task_in(d, "");
    TaskData td;
    S2sError err;
    cr_expect_eq(task_load(&td, &t, &err), S2S_ERR_IO);
    cr_expect(strstr(err.msg, "val.de: cannot open") && strstr(err.msg, "holds the prefixes dev, test, train (files PREFIX.de): "
                                                                   "set task.valid_prefix") && !strstr(err.msg, "Multi30k"),
              "%s", err.msg);
    snprintf(t.train_prefix, sizeof t.train_prefix, "tr");
    cr_expect_eq(task_load(&td, &t, &err), S2S_ERR_IO);
    cr_expect(strstr(err.msg, "tr.de: cannot open") && strstr(err.msg, "set task.train_prefix"), "%s", err.msg);
    snprintf(t.data_dir, sizeof t.data_dir, "%s/multi30k", d);
    cr_expect_eq(task_load(&td, &t, &err), S2S_ERR_IO);
    cr_expect(strstr(err.msg, "for Multi30k, run scripts/get-multi30k.sh"), "%s", err.msg);
    tu_rm_rf(d);
    free(d);
}

Test(corpus, gzip_files_read_as_plain_ones) {
    char *d = tu_tmpdir();
    write_lines(d, "train.de", DE);
    write_lines(d, "train.en", EN);
    eval_files(d);
    ConfigTask t = task_in(d, "");
    TaskData a, b;
    S2sError err;
    cr_assert_eq(task_load(&a, &t, &err), S2S_OK, "%s", err.msg);
    cr_assert_eq(tu_sh("gzip %s/train.de %s/train.en", d, d), 0);
    cr_assert_eq(task_load(&b, &t, &err), S2S_OK, "%s", err.msg);
    cr_expect(tu_same_data(&a, &b));
    task_free(&a);
    task_free(&b);
    tu_rm_rf(d);
    free(d);
}

/* 300 pairs of made-up words: BPE from a sample of 50 is learned alike twice and differs from
 * the one learned from all of them. */
Test(corpus, bpe_from_a_sample_is_drawn_alike) {
    char *d = tu_tmpdir();
    FILE *fs = fopen(tu_path(d, "train.de"), "w"), *ft = fopen(tu_path(d, "train.en"), "w");
    for (int i = 0; i < 300; i++) {
        fprintf(fs, "wort%d haus%d baum\n", i % 37, i % 11);
        fprintf(ft, "word%d house%d tree\n", i % 41, i % 13);
    }
    fclose(fs);
    fclose(ft);
    eval_files(d);
    ConfigTask t = task_in(d, "");
    t.subword = SUBWORD_BPE;
    t.bpe_merges = 40;
    TaskData all, s1, s2;
    S2sError err;
    cr_assert_eq(task_load(&all, &t, &err), S2S_OK, "%s", err.msg);
    t.subword_sample = 50;
    cr_assert_eq(task_load(&s1, &t, &err), S2S_OK, "%s", err.msg);
    cr_assert_eq(task_load(&s2, &t, &err), S2S_OK, "%s", err.msg);
    cr_expect_eq(s1.train.n, 300, "the sample is for learning only: every pair is trained on");
    cr_expect(tu_same_data(&s1, &s2), "two draws of the sample differ");
    cr_expect(!tu_same_data(&all, &s1), "the sample made no difference");
    task_free(&all);
    task_free(&s1);
    task_free(&s2);
    tu_rm_rf(d);
    free(d);
}

/* The streamed split's batches equal the in-memory split's, row for row; a file cut under the
 * run is a read error. */
Test(corpus, streamed_batches_are_the_in_memory_ones) {
    char *d = tu_tmpdir();
    FILE *fs = fopen(tu_path(d, "train.de"), "w"), *ft = fopen(tu_path(d, "train.en"), "w");
    for (int i = 0; i < 500; i++) {
        fprintf(fs, "ein hund %d läuft%s\n", i % 53, i % 3 ? " schnell ." : "");
        fprintf(ft, "a dog %d runs%s\n", i % 47, i % 5 ? " fast ." : " .");
    }
    fclose(fs);
    fclose(ft);
    eval_files(d);
    ConfigTask t = task_in(d, tu_path(d, "cache"));
    TaskData mem, file;
    S2sError err;
    cr_assert_eq(task_load(&file, &t, &err), S2S_OK, "%s", err.msg);
    cr_expect(file.train.streamed);
    snprintf(t.cache_dir, sizeof t.cache_dir, "%s", "");
    cr_assert_eq(task_load(&mem, &t, &err), S2S_OK, "%s", err.msg);
    cr_expect(!mem.train.streamed);
    cr_expect(tu_same_data(&mem, &file));
    Rng g;
    rng_init(&g, 7, RNG_STREAM_SHUFFLE);
    BatchPlan p;
    batchplan_make(&p, &file.train, 16, 0, 4, &g);
    Batch a, b;
    batch_init(&a);
    batch_init(&b);
    for (int k = 0; k < p.n_batches; k++) {
        int n = p.start[k + 1] - p.start[k];
        batch_fill(&a, &mem.train, p.order + p.start[k], n);
        cr_assert_eq(batch_read(&b, &file.train, p.order + p.start[k], n, &err), S2S_OK, "%s", err.msg);
        cr_assert(a.B == b.B && a.S == b.S && a.T == b.T, "batch %d: other shapes", k);
        cr_assert(!memcmp(a.src, b.src, (size_t)a.S * a.B * sizeof *a.src) && !memcmp(a.trg, b.trg, (size_t)a.T * a.B * sizeof *a.trg) &&
                      !memcmp(a.src_mask, b.src_mask, (size_t)a.S * a.B),
                  "batch %d differs", k);
    }
    cr_assert_eq(tu_sh("truncate -s 200 %s", file.prepared), 0);
    int last = p.n_batches - 1;
    cr_expect_eq(batch_read(&b, &file.train, p.order + p.start[last], p.start[last + 1] - p.start[last], &err), S2S_ERR_IO);
    cr_expect(strstr(err.msg, "prepared training data"), "%s", err.msg);
    batch_free(&a);
    batch_free(&b);
    batchplan_free(&p);
    task_free(&mem);
    task_free(&file);
    tu_rm_rf(d);
    free(d);
}

/* task.test_prefix "": no test split, none read (the files need not exist); the run ends with
 * model.bin, saying it is untested. */
Test(corpus_cli, the_test_split_is_optional) {
    char *d = tu_tmpdir();
    write_lines(d, "train.de", "ein hund läuft .\nein mann läuft .\nzwei hunde .\n");
    write_lines(d, "train.en", "a dog runs .\na man runs .\ntwo dogs .\n");
    write_lines(d, "val.de", "ein hund .\n");
    write_lines(d, "val.en", "a dog .\n");
    for (int cached = 0; cached < 2; cached++) {
        ConfigTask t = task_in(d, cached ? tu_path(d, "cache") : "");
        t.test_prefix[0] = '\0';
        TaskData td;
        S2sError err;
        cr_assert_eq(task_load(&td, &t, &err), S2S_OK, "%s", err.msg);
        cr_expect_eq(td.test.n, 0);
        cr_expect(td.test_refs == NULL);
        cr_expect_eq(td.valid.n, 1);
        task_free(&td);
    }
    cr_assert_eq(tu_sh("%s/train --config configs/multi30k.json --out %s/run --set data_dir=%s --set train_prefix=train "
                       "--set valid_prefix=val --set test_prefix= --set min_freq=1 --set cache_dir=%s/cache "
                       "--set train.max_steps=2 --set model.embedding=8 --set model.encoder_hidden=8 "
                       "--set model.decoder_hidden=8 --set model.kq=4 > %s/out.txt 2>&1",
                       tu_bin(), d, d, d, d),
                 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    cr_expect(tu_file_has(tu_path(d, "out.txt"), "test: none"), "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    cr_expect(file_exists(tu_path(d, "run/model.bin")));
    tu_rm_rf(d);
    free(d);
}

/* Two corpora, "big:1,small:2.5": read one after the other (each pair counted to its own), an
 * epoch takes big's 40 pairs once and small's 10 two and a half times (each twice, and a half
 * drawn anew each epoch); the same seed and epoch, the same draw; prepared and read back, the
 * same counts. A malformed list is refused naming the key. */
Test(corpus, weighted_corpora_are_sampled_as_configured) {
    char *d = tu_tmpdir();
    FILE *a = fopen(tu_path(d, "big.de"), "w"), *b = fopen(tu_path(d, "big.en"), "w");
    for (int i = 0; i < 40; i++) fprintf(a, "gross %d\n", i), fprintf(b, "big %d\n", i);
    fclose(a);
    fclose(b);
    a = fopen(tu_path(d, "small.de"), "w"), b = fopen(tu_path(d, "small.en"), "w");
    for (int i = 0; i < 10; i++) fprintf(a, "klein %d\n", i), fprintf(b, "small %d\n", i);
    fclose(a);
    fclose(b);
    eval_files(d);
    ConfigTask t = task_in(d, tu_path(d, "cache"));
    snprintf(t.train_prefix, sizeof t.train_prefix, "big:1,small:2.5");
    TrainCorpora c;
    S2sError err;
    cr_assert(config_train_corpora(&t, &c, &err), "%s", err.msg);
    cr_expect(c.n == 2 && !strcmp(c.prefix[1], "small") && c.weight[1] == 2.5f && config_corpora_weighted(&c));
    TaskData td, back;
    cr_assert_eq(task_load(&td, &t, &err), S2S_OK, "%s", err.msg);
    cr_expect_eq(td.train.n, 50);
    cr_expect(td.train_counts.kept_by[0] == 40 && td.train_counts.kept_by[1] == 10, "%ld %ld", td.train_counts.kept_by[0],
              td.train_counts.kept_by[1]);
    cr_assert_eq(task_load(&back, &t, &err), S2S_OK, "%s", err.msg);
    cr_expect_eq(back.prepared_state, PREPARED_READ);
    cr_expect(!memcmp(&td.train_counts, &back.train_counts, sizeof td.train_counts), "other counts read back");
    int *first = NULL, n_first = 0;
    for (int epoch = 0; epoch < 3; epoch++) {
        Rng g, h;
        rng_init(&g, (uint64_t)epoch, RNG_STREAM_CORPORA);
        rng_init(&h, (uint64_t)epoch, RNG_STREAM_CORPORA);
        int *o, *o2, n = task_weighted_epoch(&td.train_counts, &c, &g, &o), n2 = task_weighted_epoch(&td.train_counts, &c, &h, &o2);
        cr_expect_eq(n, 65, "40 + 25 pairs an epoch, not %d", n);
        cr_expect(n == n2 && !memcmp(o, o2, (size_t)n * sizeof *o), "the same seed, another draw");
        int seen[50] = {0};
        for (int i = 0; i < n; i++) seen[o[i]]++;
        int halves = 0;
        for (int i = 0; i < 40; i++) cr_expect_eq(seen[i], 1, "big's pair %d taken %d times", i, seen[i]);
        for (int i = 40; i < 50; i++) {
            cr_expect(seen[i] == 2 || seen[i] == 3, "small's pair %d taken %d times", i, seen[i]);
            halves += seen[i] == 3;
        }
        cr_expect_eq(halves, 5);
        if (epoch == 0) first = o, n_first = n;
        else {
            cr_expect(memcmp(o, first, (size_t)n_first * sizeof *o) != 0, "epoch %d drew epoch 0's half again", epoch);
            free(o);
        }
        free(o2);
    }
    free(first);
    CorpusCounts none = td.train_counts; /* a corpus the filters emptied takes nothing */
    none.kept_by[1] = 0;
    Rng g;
    rng_init(&g, 1, RNG_STREAM_CORPORA);
    int *o, n = task_weighted_epoch(&none, &c, &g, &o);
    cr_expect_eq(n, 40);
    free(o);
    task_free(&td);
    task_free(&back);
    snprintf(t.train_prefix, sizeof t.train_prefix, "big:x,small");
    cr_expect(!config_train_corpora(&t, &c, &err));
    cr_expect(strstr(err.msg, "task.train_prefix") && strstr(err.msg, "weight of \"big\""), "%s", err.msg);
    snprintf(t.train_prefix, sizeof t.train_prefix, "big,,small");
    cr_expect(!config_train_corpora(&t, &c, &err));
    tu_rm_rf(d);
    free(d);
}

/* A long preparation draws its progress line (pairs, percent, pairs/s, time left) and ends it
 * with the pass's total; a short one draws nothing. */
Test(corpus, a_long_preparation_shows_its_progress, .timeout = 120) {
    char *d = tu_tmpdir();
    tu_write_pairs(d, "train", 300000);
    eval_files(d);
    ConfigTask t = task_in(d, "");
    t.subword = SUBWORD_BPE;
    t.bpe_merges = 50;
    FILE *line = tmpfile();
    cr_assert(line != NULL);
    TaskLoadHooks hooks = {line, NULL};
    TaskData td;
    S2sError err;
    cr_assert_eq(task_load_hooks(&td, &t, &hooks, &err), S2S_OK, "%s", err.msg);
    task_free(&td);
    long n = ftell(line);
    char *text = calloc(1, (size_t)n + 1);
    rewind(line);
    cr_assert_eq(fread(text, 1, (size_t)n, line), (size_t)n);
    fclose(line);
    cr_expect(strstr(text, "encoding ") && strstr(text, "pairs/s") && strstr(text, " left") &&
                  strstr(text, "300000 pairs in "),
              "%s", text);
    free(text);
    line = tmpfile();
    hooks.progress = line;
    write_lines(d, "train.de", "ein hund .\n");
    write_lines(d, "train.en", "a dog .\n");
    cr_assert_eq(task_load_hooks(&td, &t, &hooks, &err), S2S_OK, "%s", err.msg);
    task_free(&td);
    cr_expect_eq(ftell(line), 0, "a short preparation drew a progress line");
    fclose(line);
    tu_rm_rf(d);
    free(d);
}

/* With two corpora the progress line counts the pairs of both: 200,000 and 100,000, 300,000. */
Test(corpus, the_progress_counts_every_corpus, .timeout = 120) {
    char *d = tu_tmpdir();
    tu_write_pairs(d, "big", 200000);
    tu_write_pairs(d, "small", 100000);
    eval_files(d);
    ConfigTask t = task_in(d, "");
    snprintf(t.train_prefix, sizeof t.train_prefix, "big,small:2");
    t.subword = SUBWORD_BPE;
    t.bpe_merges = 50;
    FILE *line = tmpfile();
    cr_assert(line != NULL);
    TaskLoadHooks hooks = {line, NULL};
    TaskData td;
    S2sError err;
    cr_assert_eq(task_load_hooks(&td, &t, &hooks, &err), S2S_OK, "%s", err.msg);
    task_free(&td);
    long n = ftell(line);
    char *text = calloc(1, (size_t)n + 1);
    rewind(line);
    cr_assert_eq(fread(text, 1, (size_t)n, line), (size_t)n);
    fclose(line);
    cr_expect(strstr(text, "small.de: 300000 pairs in "), "%s", text);
    free(text);
    tu_rm_rf(d);
    free(d);
}

/* task.train_max_lines: a run on each training corpus's first lines is, metric for metric, a run
 * whose training files hold only those lines (vocabularies included); the rest of the files is not
 * read at all, so a longer target file is no error. */
Test(corpus_cli, training_on_the_first_lines_is_training_on_those_lines, .timeout = 120) {
    char *d = tu_word_corpus_dir(200, 20, false);
    cr_assert_eq(tu_sh("cd %s && mkdir short && cp val.* test.* short/ && head -n 120 train.de > short/train.de && "
                       "head -n 120 train.en > short/train.en && echo 'one more' >> train.en",
                       d),
                 0);
    const char *runs[3][2] = {{"--set data_dir=%s/short", "short"}, {"--set task.train_max_lines=120", "first"}, {"", "all"}};
    for (int i = 0; i < 3; i++) {
        char opt[PATH_MAX + 64];
        snprintf(opt, sizeof opt, runs[i][0], d);
        int st = tu_sh("%s/train --config configs/multi30k.json --out %s/%s --set data_dir=%s --set train_prefix=train "
                       "--set valid_prefix=val --set test_prefix=test --set min_freq=1 --set cache_dir= "
                       "--set train.max_steps=6 --set train.batch_size=16 --set model.embedding=8 "
                       "--set model.encoder_hidden=8 --set model.decoder_hidden=8 --set model.kq=4 %s > %s/%s.txt 2>&1 && "
                       "cd %s && grep -o '\"\\(valid\\|test\\)_[a-z_]*\":[-0-9.e]*' %s/log.jsonl > %s.metrics",
                       tu_bin(), d, runs[i][1], d, opt, d, runs[i][1], d, runs[i][1], runs[i][1]);
        if (i < 2) cr_assert_eq(st, 0, "%s", tu_slurp(tu_path(d, i ? "first.txt" : "short.txt"), NULL));
        else cr_expect_eq(st, 1, "the whole files differ in length: %s", tu_slurp(tu_path(d, "all.txt"), NULL));
    }
    cr_expect(tu_file_has(tu_path(d, "first.txt"), "data: 120 training pairs"), "%s", tu_slurp(tu_path(d, "first.txt"), NULL));
    cr_expect(tu_file_has(tu_path(d, "all.txt"), "parallel files must match"), "%s", tu_slurp(tu_path(d, "all.txt"), NULL));
    cr_expect_eq(tu_sh("cd %s && test -s first.metrics && cmp first.metrics short.metrics", d), 0,
                 "the first 120 lines train unlike a corpus of those 120");
    tu_rm_rf(d);
    free(d);
}

/* train.valid_max_lines: validations score the split's first lines, exactly as a run whose
 * validation files hold only those lines; the test split is still scored whole. */
Test(corpus_cli, validation_on_the_first_lines_is_validation_on_those_lines, .timeout = 120) {
    char *d = tu_word_corpus_dir(200, 40, false);
    cr_assert_eq(tu_sh("cd %s && mkdir short && cp train.* test.* short/ && head -n 12 val.de > short/val.de && "
                       "head -n 12 val.en > short/val.en",
                       d),
                 0);
    const char *runs[3][2] = {{"", "all"}, {"--set train.valid_max_lines=12", "first"}, {"--set data_dir=%s/short", "short"}};
    for (int i = 0; i < 3; i++) {
        char opt[PATH_MAX + 64];
        snprintf(opt, sizeof opt, runs[i][0], d);
        cr_assert_eq(tu_sh("%s/train --config configs/multi30k.json --out %s/%s --set data_dir=%s --set train_prefix=train "
                           "--set valid_prefix=val --set test_prefix=test --set min_freq=1 --set cache_dir= "
                           "--set train.max_steps=6 --set train.batch_size=16 --set model.embedding=8 "
                           "--set model.encoder_hidden=8 --set model.decoder_hidden=8 --set model.kq=4 %s > %s/%s.txt 2>&1 && "
                           "cd %s && grep '\"type\":\"epoch\"' %s/log.jsonl | grep -o '\"valid_[a-z_]*\":[-0-9.e]*' > %s.valid && "
                           "grep '\"type\":\"test\"' %s/log.jsonl | grep -o '\"test_[a-z_]*\":[-0-9.e]*' > %s.test",
                           tu_bin(), d, runs[i][1], d, opt, d, runs[i][1], d, runs[i][1], runs[i][1], runs[i][1], runs[i][1]),
                     0, "%s", tu_slurp(tu_path(d, "first.txt"), NULL));
    }
    cr_expect(tu_file_has(tu_path(d, "first.txt"), "validations score the first 12 of the 40 validation pairs"), "%s",
              tu_slurp(tu_path(d, "first.txt"), NULL));
    cr_expect_eq(tu_sh("cd %s && test -s first.valid && cmp first.valid short.valid", d), 0, "the first 12 lines validate "
                                                                                          "unlike a split of those 12");
    cr_expect_neq(tu_sh("cd %s && cmp -s first.valid all.valid", d), 0, "the key changed nothing: no test");
    cr_expect_eq(tu_sh("cd %s && test -s first.test && cmp first.test all.test", d), 0, "the test split was cut too");
    tu_rm_rf(d);
    free(d);
}
