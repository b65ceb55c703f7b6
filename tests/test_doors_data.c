/* test_doors_data.c — the doors of corpora, teachers and models (test_doors.c's promises):
 * weighted epochs in the memory check, prepared corpora keyed by their digests, teachers'
 * translations keyed by the bytes loaded, FIFOs that never block, damaged or cut files found,
 * Ctrl-C during subword learning, and a model described by what applies to it. */
#include "test_doors.h"

/* 74.4: a weighted epoch (train:1000 of 200,000 pairs: 2e8 pairs, 2.4 GB to plan) counts in the
 * memory check: refused up front with the epoch named, not killed half way (the old build ran
 * out of memory making the epoch's order). The limit is an address-space one (ulimit -v), which
 * the check reads; AddressSanitizer's shadow memory cannot live under it. */
Test(doors, a_weighted_epoch_is_counted_in_the_memory_check, .timeout = 120) {
#ifdef DOORS_ASAN
    TU_SKIP("AddressSanitizer cannot run under ulimit -v");
#else
    char *d = tu_tmpdir();
    tu_write_pairs(d, "train", 200000);
    tu_write_pairs(d, "val", 20);
    tu_write_pairs(d, "test", 20);
    const char *limited = "ulimit -v 2500000; exec %s/train --config %s/configs/multi30k.json --set data_dir=. "
                          "--set valid_prefix=val --set test_prefix=test --set min_freq=1 --set cache_dir= "
                          "--set train.max_steps=1 --set train.warmup_steps=1 --set train.max_decode_len=4 "
                          "--set model.embedding=8 --set model.encoder_hidden=8 --set model.decoder_hidden=8 --set model.kq=4";
    char cmd[1024];
    snprintf(cmd, sizeof cmd, limited, tu_bin(), getenv("PWD") ? getenv("PWD") : ".");
    int rc = tu_sh("cd %s && bash -c '%s --set train_prefix=train:1000 --out run' > out.txt 2> err.txt", d, cmd);
    char *msg = tu_slurp(tu_path(d, "err.txt"), NULL);
    cr_expect_eq(rc, 2, "exit %d: %s", rc, msg);
    cr_expect(msg && strstr(msg, "an epoch of 200000000 pairs") && strstr(msg, "task.train_prefix"), "%s", msg);
    cr_expect_neq(access(tu_path(d, "run/config.json"), F_OK), 0, "a refused run left a folder");
    free(msg);
    /* the same corpus and limit, an epoch that fits */
    rc = tu_sh("cd %s && bash -c '%s --set train_prefix=train:2 --out ok' > out.txt 2>&1", d, cmd);
    cr_expect_eq(rc, 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    tu_rm_rf(d);
    free(d);
#endif
}

/* A translation task over dir's train/val/test.{de,en}, its prepared data in dir/cache. */
static ConfigTask word_task(const char *dir) {
    Config c;
    config_defaults(&c);
    ConfigTask t = c.task;
    t.type = TASK_TRANSLATE;
    snprintf(t.data_dir, sizeof t.data_dir, "%.200s", dir);
    snprintf(t.train_prefix, sizeof t.train_prefix, "train");
    snprintf(t.valid_prefix, sizeof t.valid_prefix, "val");
    snprintf(t.test_prefix, sizeof t.test_prefix, "test");
    snprintf(t.cache_dir, sizeof t.cache_dir, "%.200s/cache", dir);
    t.min_freq = 1;
    t.subword = SUBWORD_NONE;
    return t;
}

/* Letter swaps that keep a text's size, CRC-32 and Adler-32: each swaps two letters 65,521
 * bytes apart (Adler-32's modulus: neither of its sums moves), and a set of them whose CRC-32
 * changes cancel (CRC-32 is affine: the changes of disjoint swaps add as XOR; 40 candidates
 * in 32 bits have a dependent subset, found by elimination). Returns the swaps made. */
static int collide(unsigned char *b, size_t n) {
    enum { GAP = 65521, CAND = 40 };
    size_t at[CAND];
    uint32_t delta[CAND], base = (uint32_t)crc32(0L, b, (uInt)n);
    int k = 0;
    for (size_t i = 0; i + GAP < n && k < CAND; i += 97) {
        unsigned char x = b[i], y = b[i + GAP];
        if (x == y || x < 'a' || x > 'z' || y < 'a' || y > 'z') continue;
        b[i] = y, b[i + GAP] = x;
        delta[k] = (uint32_t)crc32(0L, b, (uInt)n) ^ base;
        b[i] = x, b[i + GAP] = y;
        at[k++] = i;
    }
    cr_assert_eq(k, CAND, "too few letters to swap");
    uint64_t used[CAND]; /* which candidates each reduced row combines */
    for (int i = 0; i < CAND; i++) used[i] = 1ull << i;
    for (int bit = 31, row = 0; bit >= 0 && row < CAND; bit--) {
        int p = -1;
        for (int i = row; i < CAND && p < 0; i++)
            if (delta[i] >> bit & 1) p = i;
        if (p < 0) continue;
        uint32_t td = delta[p];
        uint64_t tu = used[p];
        delta[p] = delta[row], used[p] = used[row], delta[row] = td, used[row] = tu;
        for (int i = 0; i < CAND; i++)
            if (i != row && delta[i] >> bit & 1) delta[i] ^= delta[row], used[i] ^= used[row];
        row++;
    }
    for (int i = 0; i < CAND; i++)
        if (!delta[i] && used[i]) { /* these swaps' changes cancel */
            int swaps = 0;
            for (int c = 0; c < CAND; c++)
                if (used[i] >> c & 1) {
                    unsigned char x = b[at[c]];
                    b[at[c]] = b[at[c] + GAP], b[at[c] + GAP] = x;
                    swaps++;
                }
            return swaps;
        }
    cr_assert_fail("no dependent set of swaps");
    return 0;
}

/* 74.10: the prepared-data key is a digest made for the purpose: a corpus changed by letter
 * swaps that keep its size, CRC-32 and Adler-32 (the old key's parts) is another key and is
 * prepared anew, never read as the old one's data. */
Test(doors, a_corpus_with_the_old_checksums_is_another_key, .timeout = 60) {
    char *d = tu_tmpdir();
    tu_word_corpus(d, "train", 9000, 11);
    tu_word_corpus(d, "val", 5, 12);
    tu_word_corpus(d, "test", 5, 13);
    ConfigTask t = word_task(d);
    TaskData a, b;
    S2sError err;
    cr_assert_eq(task_load(&a, &t, &err), S2S_OK, "%s", err.msg);
    cr_assert_eq(a.prepared_state, PREPARED_WRITTEN);
    size_t n;
    unsigned char *text = (unsigned char *)tu_slurp(tu_path(d, "train.de"), &n);
    cr_assert(n > 70000, "the corpus is %zu bytes: too small to swap letters 65,521 apart", n);
    uLong crc0 = crc32(0L, text, (uInt)n), ad0 = adler32(1L, text, (uInt)n);
    int swaps = collide(text, n);
    cr_expect(crc32(0L, text, (uInt)n) == crc0 && adler32(1L, text, (uInt)n) == ad0, "the swaps changed the checksums");
    FILE *f = fopen(tu_path(d, "train.de"), "wb");
    cr_assert(f && fwrite(text, 1, n, f) == n);
    fclose(f);
    cr_assert_eq(task_load(&b, &t, &err), S2S_OK, "%s", err.msg);
    cr_expect_eq(b.prepared_state, PREPARED_WRITTEN, "%d letter swaps with the old CRC-32 and Adler-32 read the old data",
                 swaps);
    cr_expect(strcmp(a.prepared, b.prepared) != 0, "one key for two corpora");
    cr_expect(!tu_same_data(&a, &b));
    task_free(&a);
    task_free(&b);
    free(text);
    tu_rm_rf(d);
    free(d);
}

/* 74.8: a teacher's file replaced while a student starts (a teacher still training renames a
 * better model.bin over it at every validation): the translations are cached under the key of
 * the bytes that made them. Two teachers are swapped over one path, by rename, as fast as the
 * machine goes, while students prepare; every cached file must then hold the translations of
 * the teacher its name is the key of (the old build hashed the file again after loading it:
 * one teacher's translations under the other's key). */
Test(doors, teacher_translations_are_keyed_by_the_bytes_loaded, .timeout = 240) {
    char *d = tu_word_corpus_dir(400, 10, false);
    word_config(d);
    const char *b = tu_bin();
    cr_assert_eq(tu_sh("cd %s && %s/train --config c.json --out t1 > /dev/null 2>&1 && "
                       "%s/train --config c.json --seed 2 --set train.lr=0.02 --out t2 > /dev/null 2>&1",
                       d, b, b),
                 0);
    /* each teacher alone: its key's file and its translations */
    for (int k = 1; k <= 2; k++)
        cr_assert_eq(tu_sh("cd %s && rm -f cache/*.teacher.en && cp t%d/model.bin T.bin && "
                           "%s/train --config c.json --set task.teacher=T.bin --prepare > /dev/null 2>&1 && "
                           "f=$(ls cache/*.teacher.en) && cp $f want%d.en && basename $f > name%d.txt",
                           d, k, b, k, k),
                     0);
    cr_assert_neq(tu_sh("cd %s && cmp -s want1.en want2.en", d), 0, "the two teachers translate alike: no test");
    int mixed = 0;
    for (int i = 0; i < 60; i++) {
        int rc = tu_sh("cd %s || exit 9; rm -f cache/*.teacher.en; "
                       "(while :; do cp t1/model.bin a.tmp && mv -f a.tmp T.bin; cp t2/model.bin b.tmp && mv -f b.tmp T.bin; "
                       "done) 2>/dev/null & s=$!; "
                       "%s/train --config c.json --set task.teacher=T.bin --prepare > prep.txt 2>&1; rc=$?; { kill $s; wait $s; } 2>/dev/null; "
                       "[ $rc -eq 0 ] || exit 3; for f in cache/*.teacher.en; do n=$(basename $f); "
                       "if [ \"$n\" = \"$(cat name1.txt)\" ]; then cmp -s $f want1.en || exit 1; "
                       "elif [ \"$n\" = \"$(cat name2.txt)\" ]; then cmp -s $f want2.en || exit 1; else exit 2; fi; done",
                       d, b);
        cr_expect(rc == 0 || rc == 3, "round %d: exit %d (1: a teacher's translations under the other's key; 2: a key of "
                                      "neither teacher)", i, rc);
        if (rc == 3) /* a file written in place while read is refused; a rename never is */
            cr_expect(tu_file_has(tu_path(d, "prep.txt"), "changed while it was read"), "%s",
                      tu_slurp(tu_path(d, "prep.txt"), NULL));
        mixed += rc == 1;
    }
    cr_expect_eq(mixed, 0, "%d of 60 rounds cached one teacher's translations under the other's key", mixed);
    tu_rm_rf(d);
    free(d);
}

/* Runs cmd in d under a 30-second timeout; its exit status (124: it blocked). */
static int bounded(const char *d, const char *cmd) { return tu_sh("cd %s && timeout 30 sh -c '%s' > out.txt 2>&1", d, cmd); }

/* 74.5: a FIFO planted where s2s keeps its own files (the prepared data, its key memo, a
 * teacher's translations and their .part, a run's checkpoints, last.bin and log) never blocks:
 * every such file is opened without blocking and must be a regular file; the caches make
 * theirs again over it, the others refuse it with a message. */
Test(doors, a_fifo_in_a_folder_s2s_manages_never_blocks, .timeout = 240) {
    char *d = tu_word_corpus_dir(200, 10, false);
    word_config(d);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/train --config c.json --prepare", tu_bin());
    cr_assert_eq(bounded(d, cmd), 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    /* the prepared file and its memo: made again over the FIFO */
    const char *globs[] = {"cache/*.s2sdata", "cache/*.key"};
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(tu_sh("cd %s && for f in %s; do rm $f && mkfifo $f; done", d, globs[i]), 0);
        int rc = bounded(d, cmd);
        cr_expect_eq(rc, 0, "a FIFO at %s: exit %d: %s", globs[i], rc, tu_slurp(tu_path(d, "out.txt"), NULL));
        cr_expect_eq(tu_sh("cd %s && for f in %s; do [ -f $f ] || exit 1; done", d, globs[i]), 0, "%s was not made again", globs[i]);
    }
    /* a teacher's translations and their .part */
    snprintf(cmd, sizeof cmd, "%s/train --config c.json --out t1 && cp t1/model.bin T.bin && "
             "%s/train --config c.json --set task.teacher=T.bin --prepare", tu_bin(), tu_bin());
    cr_assert_eq(bounded(d, cmd), 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    cr_assert_eq(tu_sh("cd %s && f=$(ls cache/*.teacher.en) && rm $f && mkfifo $f && mkfifo $f.part", d), 0);
    snprintf(cmd, sizeof cmd, "%s/train --config c.json --set task.teacher=T.bin --prepare", tu_bin());
    int rc = bounded(d, cmd);
    cr_expect_eq(rc, 0, "a FIFO at the teacher's translations: exit %d: %s", rc, tu_slurp(tu_path(d, "out.txt"), NULL));
    cr_expect_eq(tu_sh("cd %s && [ -f \"$(ls cache/*.teacher.en)\" ]", d), 0);
    /* a run's checkpoints (average --last), last.bin and log (--resume) */
    snprintf(cmd, sizeof cmd, "%s/train --config c.json --set train.epochs=2 --set train.keep_last=2 --out r", tu_bin());
    cr_assert_eq(bounded(d, cmd), 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    cr_assert_eq(tu_sh("cd %s && f=$(ls r/checkpoints/step*.bin | tail -1) && rm $f && mkfifo $f", d), 0);
    snprintf(cmd, sizeof cmd, "%s/average --last 2 r --out avg.bin", tu_bin());
    rc = bounded(d, cmd);
    cr_expect(rc == 1 && tu_file_has(tu_path(d, "out.txt"), "not a regular file"), "average over a FIFO: exit %d: %s", rc,
              tu_slurp(tu_path(d, "out.txt"), NULL));
    const char *run_files[] = {"last.bin", "log.jsonl"};
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(tu_sh("cd %s && rm -rf r2 && cp -r r r2 && rm r2/%s && mkfifo r2/%s", d, run_files[i], run_files[i]), 0);
        snprintf(cmd, sizeof cmd, "%s/train --resume r2 --epochs 3", tu_bin());
        rc = bounded(d, cmd);
        cr_expect(rc == 1 || rc == 2, "--resume with a FIFO at %s: exit %d: %s", run_files[i], rc,
                  tu_slurp(tu_path(d, "out.txt"), NULL));
    }
    tu_rm_rf(d);
    free(d);
}

/* 74.16: a cached teacher's translations cut short (or extended) are made again, with a note,
 * rather than refused on every run. */
Test(doors, a_damaged_teacher_translations_file_is_made_again, .timeout = 120) {
    char *d = tu_word_corpus_dir(200, 10, false);
    word_config(d);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/train --config c.json --out t1 && cp t1/model.bin T.bin && "
             "%s/train --config c.json --set task.teacher=T.bin --prepare && cp cache/*.teacher.en want.en",
             tu_bin(), tu_bin());
    cr_assert_eq(bounded(d, cmd), 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    const char *damage[] = {"head -c 300 want.en > x", "cat want.en want.en > x", "head -c -3 want.en > x"};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(tu_sh("cd %s && f=$(ls cache/*.teacher.en) && %s && mv x $f", d, damage[i]), 0);
        snprintf(cmd, sizeof cmd, "%s/train --config c.json --set task.teacher=T.bin --prepare", tu_bin());
        int rc = bounded(d, cmd);
        cr_expect_eq(rc, 0, "%s: exit %d: %s", damage[i], rc, tu_slurp(tu_path(d, "out.txt"), NULL));
        cr_expect(tu_file_has(tu_path(d, "out.txt"), "was damaged"), "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
        cr_expect_eq(tu_sh("cd %s && cmp -s cache/*.teacher.en want.en", d), 0, "%s: not made again as it was", damage[i]);
    }
    tu_rm_rf(d);
    free(d);
}

/* path: text as gzip; with cut_after > 0, the stream is flushed whole after that many bytes of
 * text and never finished (every line before looks whole), else finished and then cut in the
 * middle of its compressed bytes when cut_middle. */
static void write_gz(const char *path, const char *text, size_t cut_after, bool cut_middle) {
    z_stream z = {0};
    cr_assert_eq(deflateInit2(&z, 9, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY), Z_OK);
    size_t n = strlen(text), cap = n + 1024;
    unsigned char *out = malloc(cap);
    z.next_in = (unsigned char *)text;
    z.avail_in = (uInt)(cut_after ? cut_after : n);
    z.next_out = out;
    z.avail_out = (uInt)cap;
    cr_assert_neq(deflate(&z, cut_after ? Z_FULL_FLUSH : Z_FINISH), Z_STREAM_ERROR);
    size_t len = cap - z.avail_out;
    deflateEnd(&z);
    FILE *f = fopen(path, "wb");
    cr_assert(f && fwrite(out, 1, cut_middle ? len / 2 : len, f) == (cut_middle ? len / 2 : len));
    fclose(f);
    free(out);
}

/* 74.9: a .gz corpus whose stream ends early is an error naming the file: cut cleanly after a
 * full flush (the old build read the 300 whole lines as the corpus) or in the middle of a block
 * (the old build blamed the line counts). */
Test(doors, a_gzip_corpus_cut_short_is_an_error_naming_it, .timeout = 60) {
    char *d = tu_word_corpus_dir(400, 5, false);
    for (int kind = 0; kind < 2; kind++) {
        for (int side = 0; side < 2; side++) {
            char *text = tu_slurp(tu_path(d, side ? "train.en" : "train.de"), NULL);
            size_t cut = 0;
            for (int line = 0, i = 0; text[i] && line < 300; i++)
                if (text[i] == '\n' && ++line == 300) cut = (size_t)i + 1;
            char name[32];
            snprintf(name, sizeof name, "cut%d.%s.gz", kind, side ? "en" : "de");
            write_gz(tu_path(d, name), text, kind == 0 ? cut : 0, kind == 1 && side == 0);
            free(text);
        }
        int rc = tu_sh("cd %s && %s/train --config %s/configs/multi30k.json --set data_dir=. --set train_prefix=cut%d "
                       "--set valid_prefix=val --set test_prefix=test --set min_freq=1 --set cache_dir= "
                       "--set train.max_steps=1 --set train.warmup_steps=1 --out r%d > out.txt 2>&1",
                       d, tu_bin(), getenv("PWD") ? getenv("PWD") : ".", kind, kind);
        char *out = tu_slurp(tu_path(d, "out.txt"), NULL);
        cr_expect_eq(rc, 1, "%s: exit %d: %s", kind ? "cut mid-block" : "cut after a full flush", rc, out);
        cr_expect(out && strstr(out, kind ? "cut1.de.gz: read error" : "cut0.de.gz: read error") && strstr(out, "gzip stream"),
                  "%s", out);
        free(out);
    }
    /* the same text gzipped whole: read */
    char *text = tu_slurp(tu_path(d, "train.de"), NULL);
    write_gz(tu_path(d, "whole.de.gz"), text, 0, false);
    free(text);
    text = tu_slurp(tu_path(d, "train.en"), NULL);
    write_gz(tu_path(d, "whole.en.gz"), text, 0, false);
    free(text);
    cr_expect_eq(tu_sh("cd %s && %s/train --config %s/configs/multi30k.json --set data_dir=. --set train_prefix=whole "
                       "--set valid_prefix=val --set test_prefix=test --set min_freq=1 --set cache_dir= "
                       "--set train.max_steps=1 --set train.warmup_steps=1 --out ok > out.txt 2>&1 && "
                       "grep -q 'data: 400 training pairs' out.txt",
                       d, tu_bin(), getenv("PWD") ? getenv("PWD") : "."),
                 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    tu_rm_rf(d);
    free(d);
}

/* 74.11: a prepared file written in place under a running training (ids that stay valid, the
 * same length) stops the run at its next batch: every batch read is checked against the file's
 * stamp as it was checked whole (the old build used the new ids). */
Test(doors, a_prepared_file_written_under_a_run_stops_it_at_the_next_batch, .timeout = 60) {
    char *d = tu_word_corpus_dir(300, 5, false);
    ConfigTask t = word_task(d);
    TaskData td;
    S2sError err;
    cr_assert_eq(task_load(&td, &t, &err), S2S_OK, "%s", err.msg);
    cr_assert(td.train.streamed);
    int rows[4] = {0, 1, 2, 3};
    Batch b;
    batch_init(&b);
    cr_assert_eq(batch_read(&b, &td.train, rows, 4, &err), S2S_OK, "%s", err.msg);
    nanosleep(&(struct timespec){0, 20000000}, NULL); /* past the clock tick of the file's own making: a change time can move */
    /* the first id made the second's (both valid), in place */
    cr_assert_eq(tu_sh("f=%s; dd if=$f of=$f bs=1 skip=98 seek=96 count=2 conv=notrunc status=none", td.prepared), 0);
    cr_expect_eq(batch_read(&b, &td.train, rows, 4, &err), S2S_ERR_CORRUPT, "a batch read from a changed file");
    cr_expect(strstr(err.msg, "written to under the run"), "%s", err.msg);
    batch_free(&b);
    task_free(&td);
    tu_rm_rf(d);
    free(d);
}

/* dir/PREFIX.{de,en}: n lines of 8 made-up words of 3 to 9 letters each, nearly all distinct
 * (subwords take long to learn from them). */
static void random_words(const char *dir, const char *prefix, int n, uint32_t seed) {
    for (int side = 0; side < 2; side++) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s.%s", dir, prefix, side ? "en" : "de");
        FILE *f = fopen(p, "w");
        cr_assert(f);
        for (int i = 0; i < n; i++)
            for (int w = 0; w < 8; w++) {
                seed = seed * 1664525u + 1013904223u;
                int len = 3 + (int)(seed >> 28) % 7;
                for (int k = 0; k < len; k++) {
                    seed = seed * 1664525u + 1013904223u;
                    fputc('a' + (int)((seed >> 24) % 26), f);
                }
                fputc(w == 7 ? '\n' : ' ', f);
            }
        fclose(f);
    }
}

/* 74.15: Ctrl-C while the subwords are learned stops the run at once (the old build went on
 * learning for seconds, then stopped at the next chunk of encoding), and --prepare heeds it too. */
Test(doors, ctrl_c_stops_subword_learning_at_once, .timeout = 120) {
    char *d = tu_tmpdir();
    random_words(d, "train", 30000, 7);
    random_words(d, "val", 3, 8);
    random_words(d, "test", 3, 9);
    const char *modes[] = {"--out run", "--prepare"};
    for (int m = 0; m < 2; m++) {
        int rc = tu_sh("cd %s && rm -rf cache && { %s/train --config %s/configs/multi30k.json %s --set data_dir=. "
                       "--set train_prefix=train --set valid_prefix=val --set test_prefix=test --set subword=bpe "
                       "--set bpe_merges=3000 --set cache_dir=cache > out.txt 2>&1 & pid=$!; sleep 2.5; "
                       "a=$(date +%%s%%N); kill -INT $pid; wait $pid; rc=$?; b=$(date +%%s%%N); "
                       "echo $(( (b - a) / 1000000 )) > ms.txt; exit $rc; }",
                       d, tu_bin(), getenv("PWD") ? getenv("PWD") : ".", modes[m]);
        char *out = tu_slurp(tu_path(d, "out.txt"), NULL), *ms = tu_slurp(tu_path(d, "ms.txt"), NULL);
        cr_expect_eq(rc, 130, "%s: exit %d: %s", modes[m], rc, out);
        cr_expect(out && strstr(out, "while learning the subwords"), "%s: %s", modes[m], out);
        cr_expect(ms && atoi(ms) < 1000, "%s: %s ms from Ctrl-C to the exit", modes[m], ms ? ms : "?");
        cr_expect_eq(tu_sh("ls %s/cache 2>/dev/null | grep -q s2sdata", d), 1, "%s: a prepared or temporary file was left", modes[m]);
        cr_expect_neq(access(tu_path(d, "run"), F_OK), 0, "%s: a run folder was left", modes[m]);
        free(out);
        free(ms);
    }
    tu_rm_rf(d);
    free(d);
}

/* 74.14: `train --prepare` that prepared nothing is a failure a script sees (`--prepare &&
 * mpirun …`): no cache folder, a generated task, a folder that cannot take the file. */
Test(doors, prepare_that_prepared_nothing_fails, .timeout = 60) {
    char *d = tu_word_corpus_dir(100, 5, false);
    word_config(d);
    const char *b = tu_bin();
    int rc = tu_sh("cd %s && %s/train --config c.json --set cache_dir= --prepare > out.txt 2>&1", d, b);
    cr_expect_eq(rc, 2, "no cache folder: exit %d: %s", rc, tu_slurp(tu_path(d, "out.txt"), NULL));
    cr_expect(tu_file_has(tu_path(d, "out.txt"), "task.cache_dir"));
    rc = tu_sh("cd %s && %s/train --config %s/configs/reverse.json --prepare > out.txt 2>&1", d, b,
               getenv("PWD") ? getenv("PWD") : ".");
    cr_expect_eq(rc, 2, "reversal: exit %d: %s", rc, tu_slurp(tu_path(d, "out.txt"), NULL));
    /* the file's name taken by a folder: the data load (into memory), nothing is prepared */
    cr_assert_eq(tu_sh("cd %s && %s/train --config c.json --prepare > out.txt 2>&1 && f=$(ls cache/*.s2sdata) && rm $f && "
                       "mkdir $f", d, b),
                 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    rc = tu_sh("cd %s && %s/train --config c.json --prepare > out.txt 2>&1", d, b);
    cr_expect_eq(rc, 1, "a folder at the file's name: exit %d: %s", rc, tu_slurp(tu_path(d, "out.txt"), NULL));
    cr_expect(tu_file_has(tu_path(d, "out.txt"), "nothing was prepared"), "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    /* and prepared: 0 */
    cr_expect_eq(tu_sh("cd %s && rmdir cache/*.s2sdata && %s/train --config c.json --prepare > out.txt 2>&1", d, b), 0);
    tu_rm_rf(d);
    free(d);
}

/* 74.20 and 74.21: ./serve counts a model's parameters as ./train and Python do (not its padded
 * storage), and a translation model's config (config.json, the model file's, /api/models), and
 * its log hold only what applies to it: no alphabet, no min_len, no exact_match. */
Test(doors, a_model_is_described_by_what_applies_to_it, .timeout = 120) {
    char *d = tu_word_corpus_dir(200, 10, false);
    word_config(d);
    cr_assert_eq(tu_sh("cd %s && %s/train --config c.json --out run > train.txt 2>&1 && cp run/model.bin model.bin", d, tu_bin()),
                 0);
    char *out = tu_slurp(tu_path(d, "train.txt"), NULL);
    const char *p = strstr(out, "parameters: ");
    cr_assert(p, "%s", out);
    long printed = atol(p + 12);
    free(out);
    S2sError err = {0};
    S2sModel *m = s2s_open(tu_path(d, "model.bin"), 1, &err);
    cr_assert(m, "%s", err.msg);
    cr_expect_eq(s2s_model_params(m), printed);
    char *api_conf = s2s_model_config(m);
    s2s_close(m);
    int port = start_server(d, "");
    cr_assert(port > 0, "serve did not start: %s", tu_slurp(tu_path(d, "serve.txt"), NULL));
    Reply r = http(port, "GET", "/api/models", NULL, 0);
    cr_assert_eq(r.status, 200);
    cJSON *j = cJSON_Parse(r.body), *first = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "models"), 0);
    if (!first) first = cJSON_GetArrayItem(j, 0);
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(first, "params");
    cr_expect(cJSON_IsNumber(params) && (long)params->valuedouble == printed, "/api/models: %s; ./train printed %ld", r.body,
              printed);
    char *served_conf = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(first, "config"));
    stop_server(d);
    char *run_conf = tu_slurp(tu_path(d, "run/config.json"), NULL), *log = tu_slurp(tu_path(d, "run/log.jsonl"), NULL);
    const char *texts[] = {run_conf, api_conf, served_conf};
    const char *names[] = {"run/config.json", "s2s_model_config", "/api/models"};
    for (int i = 0; i < 3; i++) {
        cr_expect(texts[i] && !strstr(texts[i], "alphabet") && !strstr(texts[i], "min_len") && !strstr(texts[i], "train_size"),
                  "%s holds the reversal task's keys: %s", names[i], texts[i]);
        cr_expect(texts[i] && strstr(texts[i], "data_dir"), "%s lost a key that applies: %s", names[i], texts[i]);
    }
    cr_expect(log && strstr(log, "test_bleu") && !strstr(log, "exact_match") && !strstr(log, "\"test_token_accuracy\""),
              "the log: %s", log);
    free(run_conf);
    free(log);
    free(served_conf);
    s2s_free_string(api_conf);
    cJSON_Delete(j);
    reply_free(&r);
    /* a reversal run's config: no translation keys, and the reversal's there */
    tu_write(tu_path(d, "tiny.json"), "%s", tiny_json());
    cr_assert_eq(tu_sh("cd %s && %s/train --config tiny.json --out rev > /dev/null 2>&1", d, tu_bin()), 0);
    char *rev = tu_slurp(tu_path(d, "rev/config.json"), NULL);
    cr_expect(rev && strstr(rev, "alphabet") && !strstr(rev, "data_dir") && !strstr(rev, "bpe_merges"), "%s", rev);
    free(rev);
    tu_rm_rf(d);
    free(d);
}
