/* test_prepared.c — a translation task's data prepared once (prepared.h): the second load
 * reads what the first wrote and gets the same data (word vocabularies, a joint BPE model with
 * the training text kept for BPE-dropout, one BPE model a side); a changed file or setting is
 * another key; truncated, foreign, damaged and foreign-version files are refused with a message
 * and replaced; a folder that cannot be written is a note, not a failure; and training gives
 * the same model file with and without the prepared data. */
#include "test_util.h"
#include "s2s/data.h"
#include "s2s/file.h"
#include "s2s/prepared.h"
#include "s2s/subword.h"

#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

static const char *const DE[] = {"ein mann läuft auf der straße", "eine frau spielt mit einem ball", "ein kind spielt im park",
                                 "der hund läuft", "ein mann mit einem hund", "eine frau im park"};
static const char *const EN[] = {"a man runs on the street", "a woman plays with a ball", "a child plays in the park",
                                 "the dog runs", "a man with a dog", "a woman in the park"};

/* dir/{train,val,test}.{de,en}: train n lines, valid and test 3, from the sentences above. */
static void write_corpus(const char *dir, int n) {
    const char *splits[3] = {"train", "val", "test"};
    for (int k = 0; k < 3; k++)
        for (int side = 0; side < 2; side++) {
            char path[512];
            snprintf(path, sizeof path, "%s/%s.%s", dir, splits[k], side ? "en" : "de");
            FILE *f = fopen(path, "w");
            cr_assert(f != NULL, "%s", path);
            for (int i = 0; i < (k ? 3 : n); i++) fprintf(f, "%s\n", (side ? EN : DE)[(i * 7 + k) % 6]);
            fclose(f);
        }
}

static ConfigTask task_in(const char *dir, const char *cache, Subword subword, bool joint, float dropout) {
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
    t.subword = subword;
    t.bpe_merges = 25;
    t.bpe_joint = joint;
    t.bpe_dropout = dropout;
    return t;
}

/* Two loads of the same task: written, then read, the same data to the last id and line. */
static void same_twice(ConfigTask t) {
    TaskData a, b;
    S2sError err;
    cr_assert_eq(task_load(&a, &t, &err), S2S_OK, "%s", err.msg);
    cr_expect_eq(a.prepared_state, PREPARED_WRITTEN, "first load: %d (%s)", a.prepared_state, a.prepared_note);
    cr_assert_eq(task_load(&b, &t, &err), S2S_OK, "%s", err.msg);
    cr_expect_eq(b.prepared_state, PREPARED_READ, "second load: %d", b.prepared_state);
    cr_expect_str_eq(a.prepared, b.prepared);
    cr_expect(tu_same_data(&a, &b), "the data read back differ");
    cr_expect(!memcmp(&a.train_counts, &b.train_counts, sizeof a.train_counts), "other counts read back");
    cr_expect_eq(a.train.streamed && b.train.streamed, true, "the training pairs are not streamed from the file");
    cr_expect_eq(!a.src_vocab.sub, !b.src_vocab.sub);
    cr_expect_eq(!a.train_src_text, !b.train_src_text);
    for (int i = 0; a.train_src_text && b.train_src_text && i < a.train.n; i++) {
        cr_expect_str_eq(a.train_src_text[i], b.train_src_text[i]);
        cr_expect_str_eq(a.train_trg_text[i], b.train_trg_text[i]);
    }
    if (a.src_vocab.sub && b.src_vocab.sub) { /* the models encode alike */
        int32_t *x = NULL, *y = NULL;
        int cx = 0, cy = 0;
        int nx = subword_encode(a.trg_vocab.sub, "a woman plays", &x, &cx), ny = subword_encode(b.trg_vocab.sub, "a woman plays", &y, &cy);
        cr_expect_eq(nx, ny);
        cr_expect(nx == ny && !memcmp(x, y, (size_t)nx * sizeof *x));
        free(x);
        free(y);
    }
    task_free(&a);
    task_free(&b);
}

Test(prepared, a_second_load_reads_what_the_first_wrote) {
    char *d = tu_tmpdir();
    write_corpus(d, 24);
    char cache[512];
    snprintf(cache, sizeof cache, "%s/cache", d);
    same_twice(task_in(d, cache, SUBWORD_NONE, true, 0.0f));
    same_twice(task_in(d, cache, SUBWORD_BPE, true, 0.1f));  /* the training text kept */
    same_twice(task_in(d, cache, SUBWORD_BPE, false, 0.0f)); /* a model a side */
    tu_rm_rf(d);
    free(d);
}

static void set_dedup(ConfigTask *t) { t->dedup = true; }
static void set_ratio(ConfigTask *t) { t->max_length_ratio = 2.5f; }
static void set_sample(ConfigTask *t) { t->subword_sample = 10; }
static void set_data_seed(ConfigTask *t) { t->data_seed = 9; }

Test(prepared, a_changed_file_or_setting_is_another_key) {
    char *d = tu_tmpdir();
    write_corpus(d, 24);
    char cache[512];
    snprintf(cache, sizeof cache, "%s/cache", d);
    ConfigTask t = task_in(d, cache, SUBWORD_BPE, true, 0.0f);
    TaskData a, b, c;
    S2sError err;
    cr_assert_eq(task_load(&a, &t, &err), S2S_OK, "%s", err.msg);
    FILE *f = fopen(tu_path(d, "val.en"), "a"); /* one more word in the last validation line */
    fputs("x\n", f);
    fclose(f);
    write_corpus(d, 24);
    f = fopen(tu_path(d, "test.en"), "w");
    fputs("a man\na dog\nthe park now\n", f);
    fclose(f);
    cr_assert_eq(task_load(&b, &t, &err), S2S_OK, "%s", err.msg);
    cr_expect_eq(b.prepared_state, PREPARED_WRITTEN, "a changed test file was not noticed");
    cr_expect_str_neq(a.prepared, b.prepared);
    cr_expect(!tu_same_data(&a, &b));
    t.bpe_merges = 20;
    cr_assert_eq(task_load(&c, &t, &err), S2S_OK, "%s", err.msg);
    cr_expect_eq(c.prepared_state, PREPARED_WRITTEN, "another bpe_merges was not noticed");
    cr_expect_str_neq(b.prepared, c.prepared);
    /* the filters and the sample BPE learns from are settings too */
    void (*change[4])(ConfigTask *) = {set_dedup, set_ratio, set_sample, set_data_seed};
    for (int k = 0; k < 4; k++) {
        TaskData e;
        char before[sizeof e.prepared];
        snprintf(before, sizeof before, "%s", c.prepared);
        change[k](&t);
        cr_assert_eq(task_load(&e, &t, &err), S2S_OK, "%s", err.msg);
        cr_expect_eq(e.prepared_state, PREPARED_WRITTEN, "change %d was not noticed", k);
        task_free(&c);
        c = e;
    }
    /* the same file rewritten with the same size within the same second: its change time differs */
    char *bytes = tu_slurp(tu_path(d, "train.de"), NULL);
    bytes[0] = bytes[0] == 'e' ? 'E' : 'e';
    f = fopen(tu_path(d, "train.de"), "w");
    fputs(bytes, f);
    fclose(f);
    free(bytes);
    TaskData g;
    cr_assert_eq(task_load(&g, &t, &err), S2S_OK, "%s", err.msg);
    cr_expect_eq(g.prepared_state, PREPARED_WRITTEN, "a rewritten training file was not noticed");
    cr_expect_str_neq(g.prepared, c.prepared);
    task_free(&g);
    task_free(&a);
    task_free(&b);
    task_free(&c);
    tu_rm_rf(d);
    free(d);
}

/* Rewrites path with its bytes changed by edit; returns the refusal's message. */
static char *refusal(const char *path, const Digest *key, void (*edit)(char *buf, size_t *len)) {
    size_t len;
    char *buf = tu_slurp(path, &len);
    cr_assert(buf != NULL);
    char *copy = malloc(len + 64);
    memcpy(copy, buf, len);
    edit(copy, &len);
    char bad[600];
    snprintf(bad, sizeof bad, "%s.bad", path);
    FILE *f = fopen(bad, "wb");
    fwrite(copy, 1, len, f);
    fclose(f);
    TaskData td;
    S2sError err;
    S2sStatus st = prepared_read(bad, key, &td, &err);
    cr_expect_eq(st, S2S_ERR_CORRUPT, "an edited file was read");
    free(buf);
    free(copy);
    return strdup(err.msg);
}

static void truncate_it(char *b, size_t *len) { (void)b, *len -= 10; }
static void flip_a_byte(char *b, size_t *len) { b[*len / 2] ^= 0x40; }
static void foreign(char *b, size_t *len) { memcpy(b, "PK\x03\x04", 4), (void)len; }
static void version_9(char *b, size_t *len) { b[7] = '9', (void)len; }
/* The header (96 bytes): magic and version, the 32-byte key, then u64 payload, CRC and id
 * bytes, index, pairs, ids. */
enum { AT_CRC = 48, AT_PAIRS = 64, HEAD = 96 };
static void lie_about_pairs(char *b, size_t *len) { /* the header's count of training pairs, one too many */
    uint64_t n;
    memcpy(&n, b + AT_PAIRS, 8);
    n++;
    memcpy(b + AT_PAIRS, &n, 8);
    (void)len;
}
static void id_past_vocab(char *b, size_t *len) { /* the first training id 0xffff, the CRC made to fit */
    b[HEAD] = b[HEAD + 1] = (char)0xff;
    uint32_t crc = (uint32_t)crc32(0L, (const unsigned char *)b + HEAD, (unsigned)(*len - HEAD));
    memcpy(b + AT_CRC, &crc, 4);
}

Test(prepared, damaged_files_are_refused_then_replaced) {
    char *d = tu_tmpdir();
    write_corpus(d, 24);
    char cache[512];
    snprintf(cache, sizeof cache, "%s/cache", d);
    ConfigTask t = task_in(d, cache, SUBWORD_NONE, true, 0.0f);
    TaskData a;
    S2sError err;
    cr_assert_eq(task_load(&a, &t, &err), S2S_OK, "%s", err.msg);
    Digest key, other;
    size_t flen;
    char *head = tu_slurp(a.prepared, &flen);
    cr_assert(head && flen > HEAD);
    memcpy(key.b, head + 8, DIGEST_BYTES); /* the key the file was written under */
    free(head);
    other = key;
    other.b[31] ^= 1;
    struct {
        void (*edit)(char *, size_t *);
        const char *says;
    } cases[] = {{truncate_it, "truncated"},
                 {flip_a_byte, "damaged"},
                 {foreign, "not a prepared data file"},
                 {version_9, "version 9"},
                 {lie_about_pairs, "do not hold together (its index)"},
                 {id_past_vocab, "an id past its vocabulary"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *msg = refusal(a.prepared, &key, cases[i].edit);
        cr_expect(strstr(msg, cases[i].says) && strstr(msg, ".s2sdata.bad"), "case %zu: %s", i, msg);
        free(msg);
    }
    cr_expect_eq(prepared_read(a.prepared, &other, &(TaskData){0}, &err), S2S_ERR_CORRUPT, "another key was read");
    cr_expect(strstr(err.msg, "prepared for other data or settings"), "%s", err.msg);
    /* a damaged file under the key's own name: refused, the data made again and written over it */
    tu_sh("truncate -s 100 %s", a.prepared);
    TaskData b;
    cr_assert_eq(task_load(&b, &t, &err), S2S_OK, "%s", err.msg);
    cr_expect_eq(b.prepared_state, PREPARED_WRITTEN);
    cr_expect(strstr(b.prepared_note, "replaced") && strstr(b.prepared_note, "truncated"), "%s", b.prepared_note);
    cr_expect(tu_same_data(&a, &b));
    task_free(&a);
    task_free(&b);
    tu_rm_rf(d);
    free(d);
}

Test(prepared, a_folder_that_cannot_be_written_is_a_note) {
    char *d = tu_tmpdir();
    write_corpus(d, 24);
    FILE *f = fopen(tu_path(d, "plain"), "w"); /* a file where the folder would be */
    fclose(f);
    char cache[512];
    snprintf(cache, sizeof cache, "%s/plain/cache", d);
    ConfigTask t = task_in(d, cache, SUBWORD_NONE, true, 0.0f);
    TaskData a;
    S2sError err;
    cr_assert_eq(task_load(&a, &t, &err), S2S_OK, "%s", err.msg);
    cr_expect_eq(a.prepared_state, PREPARED_UNWRITTEN);
    cr_expect(strstr(a.prepared_note, "plain"), "%s", a.prepared_note);
    cr_expect_gt(a.train.n, 0);
    task_free(&a);
    snprintf(t.cache_dir, sizeof t.cache_dir, "%s", "");
    cr_assert_eq(task_load(&a, &t, &err), S2S_OK, "%s", err.msg);
    cr_expect_eq(a.prepared_state, PREPARED_NONE, "task.cache_dir \"\" prepared nothing");
    task_free(&a);
    tu_rm_rf(d);
    free(d);
}

/* ./train on the prepared data trains the model it trains on the text: the same model.bin. */
Test(prepared, the_same_model_file_with_and_without) {
    char *d = tu_tmpdir();
    write_corpus(d, 40);
    const char *runs[3] = {"first", "second", "none"};
    for (int k = 0; k < 3; k++) {
        int rc = tu_sh("%s/train --config configs/multi30k.json --out %s/%s --set data_dir=%s --set train_prefix=train "
                       "--set valid_prefix=val --set test_prefix=test --set min_freq=1 --set subword=bpe --set bpe_merges=30 "
                       "--set bpe_dropout=0.1 --set cache_dir=%s --set train.epochs=2 --set train.batch_size=8 "
                       "--set model.embedding=16 --set model.encoder_hidden=16 --set model.decoder_hidden=16 --set model.kq=8 "
                       "> %s/%s.out 2>&1",
                       tu_bin(), d, runs[k], d, k < 2 ? tu_path(d, "cache") : "", d, runs[k]);
        char out[600];
        snprintf(out, sizeof out, "%s/%s.out", d, runs[k]);
        char *text = tu_slurp(out, NULL);
        cr_assert_eq(rc, 0, "%s", text);
        const char *says[3] = {"data: prepared into ", "data: prepared data read from ", NULL};
        if (says[k]) cr_expect(strstr(text, says[k]), "%s", text);
        else cr_expect(!strstr(text, "prepared"), "%s", text);
        free(text);
    }
    cr_expect_eq(tu_sh("cmp -s %s/first/model.bin %s/second/model.bin", d, d), 0, "prepared data read back: another model");
    /* without: the model file's config says task.cache_dir "", so its bytes differ there; the
     * weights (the safetensors data after the header) and the test outputs may not */
    for (int k = 0; k < 3; k += 2)
        cr_assert_eq(tu_sh("%s/export %s/%s/model.bin --out %s/%s.st > /dev/null", tu_bin(), d, runs[k], d, runs[k]), 0);
    size_t la, lb;
    char *a = tu_slurp(tu_path(d, "first.st"), &la), *b = tu_slurp(tu_path(d, "none.st"), &lb);
    cr_assert(a && b && la > 8 && lb > 8);
    uint64_t ha = 0, hb = 0;
    memcpy(&ha, a, 8);
    memcpy(&hb, b, 8);
    cr_expect(la - 8 - ha == lb - 8 - hb && !memcmp(a + 8 + ha, b + 8 + hb, la - 8 - ha), "without prepared data: other weights");
    free(a);
    free(b);
    cr_expect_eq(tu_sh("cmp -s %s/first/test.hyp %s/none/test.hyp", d, d), 0, "without prepared data: other test outputs");
    tu_rm_rf(d);
    free(d);
}

static int count_prepared(const char *dir) {
    char cmd[700];
    snprintf(cmd, sizeof cmd, "ls %s/*.s2sdata 2>/dev/null | wc -l", dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p && fscanf(p, "%d", &n) != 1) n = -1;
    if (p) pclose(p);
    return n;
}

/* The folder keeps the 16 files used last: the first one, read again before the others are
 * made, stays; the second, never read again, goes. */
Test(prepared, the_folder_keeps_the_files_used_last) {
    char *d = tu_tmpdir();
    write_corpus(d, 24);
    char cache[512];
    snprintf(cache, sizeof cache, "%s/cache", d);
    char first[sizeof ((TaskData *)0)->prepared], second[sizeof first];
    for (int k = 1; k <= 20; k++) {
        ConfigTask t = task_in(d, cache, SUBWORD_NONE, true, 0.0f);
        t.max_vocab = 100 + k; /* another key each time */
        TaskData a;
        S2sError err;
        cr_assert_eq(task_load(&a, &t, &err), S2S_OK, "%s", err.msg);
        cr_expect_eq(a.prepared_state, PREPARED_WRITTEN);
        if (k == 1) snprintf(first, sizeof first, "%s", a.prepared);
        if (k == 2) snprintf(second, sizeof second, "%s", a.prepared);
        task_free(&a);
        if (k % 4 == 0) { /* the first used again */
            t.max_vocab = 101;
            cr_assert_eq(task_load(&a, &t, &err), S2S_OK, "%s", err.msg);
            cr_expect_eq(a.prepared_state, PREPARED_READ);
            task_free(&a);
        }
    }
    cr_expect_eq(count_prepared(cache), 16);
    /* a killed preparation's temporary file goes once stale (ten minutes unwritten), a fresh one stays */
    cr_assert_eq(tu_sh("cd %s && touch -d '-11 minutes' 0123456789abcdef0123456789abcdef.s2sdata.tmp.AbCdEf && touch "
                       "fedcba9876543210fedcba9876543210.s2sdata.tmp.XyZxYz", cache), 0);
    ConfigTask t = task_in(d, cache, SUBWORD_NONE, true, 0.0f);
    t.max_vocab = 99;
    TaskData a;
    S2sError err;
    cr_assert_eq(task_load(&a, &t, &err), S2S_OK, "%s", err.msg);
    task_free(&a);
    cr_expect(!file_exists(tu_path(cache, "0123456789abcdef0123456789abcdef.s2sdata.tmp.AbCdEf")), "a stale temporary file stayed");
    cr_expect(file_exists(tu_path(cache, "fedcba9876543210fedcba9876543210.s2sdata.tmp.XyZxYz")), "a live temporary file went");
    cr_expect(file_exists(first), "the file used last was removed");
    cr_expect(!file_exists(second), "a file unused since was kept");
    tu_rm_rf(d);
    free(d);
}

/* task.bpe_model: the model ./subword learn wrote segments both sides (no model is learned),
 * the prepared data's key follows its bytes, a missing file is named, and a model a side
 * (bpe_joint false) is refused with the two keys named. */
Test(prepared, a_bpe_model_from_subword_learn) {
    char *d = tu_tmpdir();
    write_corpus(d, 24);
    cr_assert_eq(tu_sh("%s/subword learn --input %s/train.de --input %s/train.en --merges 12 --out %s/m.bpe > /dev/null 2>&1",
                       tu_bin(), d, d, d), 0);
    char cache[512];
    snprintf(cache, sizeof cache, "%s/cache", d);
    ConfigTask t = task_in(d, cache, SUBWORD_BPE, true, 0.0f);
    snprintf(t.bpe_model, sizeof t.bpe_model, "%.200s/m.bpe", d);
    TaskData a;
    S2sError err;
    cr_assert_eq(task_load(&a, &t, &err), S2S_OK, "%s", err.msg);
    size_t len, mlen;
    char *file = tu_slurp(t.bpe_model, &len), *mine = subword_bytes(a.src_vocab.sub, &mlen);
    cr_expect(len == mlen && !memcmp(file, mine, len), "the data's model is not the file's");
    free(file);
    free(mine);
    cr_expect(a.trg_vocab.sub != NULL && a.trg_vocab.size == a.src_vocab.size, "the target side has its own pieces");
    char first[sizeof a.prepared];
    snprintf(first, sizeof first, "%s", a.prepared);
    task_free(&a);
    cr_assert_eq(tu_sh("%s/subword learn --input %s/train.en --merges 10 --out %s/m.bpe > /dev/null 2>&1", tu_bin(), d, d), 0);
    cr_assert_eq(task_load(&a, &t, &err), S2S_OK, "%s", err.msg);
    cr_expect_str_neq(a.prepared, first, "another model file, the same prepared data");
    task_free(&a);
    snprintf(t.bpe_model, sizeof t.bpe_model, "%.200s/none.bpe", d);
    cr_expect_neq(task_load(&a, &t, &err), S2S_OK);
    cr_expect(strstr(err.msg, "none.bpe"), "%s", err.msg);
    Config c;
    config_defaults(&c);
    c.task = task_in(d, cache, SUBWORD_BPE, false, 0.0f);
    snprintf(c.task.bpe_model, sizeof c.task.bpe_model, "%.200s/m.bpe", d);
    cr_expect_eq(config_check(&c, &err), S2S_ERR_CONFIG);
    cr_expect(strstr(err.msg, "task.bpe_model") && strstr(err.msg, "task.bpe_joint"), "%s", err.msg);
    tu_rm_rf(d);
    free(d);
}

/* ./train --prepare prepares and says what it kept; the run after reads what it wrote; --prepare with a run's options is a usage error. */
Test(prepared, train_prepare_only) {
    char *d = tu_tmpdir();
    write_corpus(d, 24); /* six sentences, each four times: dedup keeps six */
    char sets[1200];
    snprintf(sets, sizeof sets,
             "--set data_dir=%s --set train_prefix=train --set valid_prefix=val --set test_prefix=test --set min_freq=1 "
             "--set cache_dir=%s/cache --set dedup=true --set train.max_steps=2 --set model.embedding=16 "
             "--set model.encoder_hidden=16 --set model.decoder_hidden=16 --set model.kq=8",
             d, d);
    cr_assert_eq(tu_sh("%s/train --config configs/multi30k.json --prepare %s > %s/prep.out 2>&1", tu_bin(), sets, d), 0);
    char *out = tu_slurp(tu_path(d, "prep.out"), NULL);
    cr_expect(out && strstr(out, "data: 6 training pairs (18 of 24 left out: 18 duplicate (the first on line 7))") &&
                  strstr(out, "data: prepared into "),
              "%s", out);
    free(out);
    cr_assert_eq(tu_sh("%s/train --config configs/multi30k.json --out %s/run %s > %s/run.out 2>&1", tu_bin(), d, sets, d), 0);
    out = tu_slurp(tu_path(d, "run.out"), NULL);
    cr_expect(out && strstr(out, "data: prepared data read from "), "%s", out);
    free(out);
    cr_expect_eq(tu_sh("%s/train --config configs/multi30k.json --prepare --out %s/x > /dev/null 2>&1", tu_bin(), d), 2);
    tu_rm_rf(d);
    free(d);
}

/* A disk that fills while the data are prepared (a file size limit here): no prepared file and no
 * temporary one is left behind; a run goes on with the data in memory, saying why, and
 * --prepare, which prepared nothing, fails (issue 74.14). */
Test(prepared, a_full_disk_leaves_no_file) {
    char *d = tu_tmpdir();
    write_corpus(d, 3000);
    const char *modes[] = {"--prepare", "--out %s/run --set train.max_steps=1 --set train.warmup_steps=1 "
                                        "--set train.max_decode_len=4 --set model.embedding=4 --set model.encoder_hidden=4 "
                                        "--set model.decoder_hidden=4 --set model.kq=4"};
    for (int m = 0; m < 2; m++) {
        char mode[400];
        snprintf(mode, sizeof mode, modes[m], d);
        int rc = tu_sh("bash -c 'trap \"\" XFSZ; ulimit -f 40; exec %s/train --config configs/multi30k.json %s "
                       "--set data_dir=%s --set train_prefix=train --set valid_prefix=val --set test_prefix=test "
                       "--set min_freq=1 --set cache_dir=%s/cache' > %s/out.txt 2>&1",
                       tu_bin(), mode, d, d, d);
        char *out = tu_slurp(tu_path(d, "out.txt"), NULL);
        cr_expect_eq(rc, m == 0 ? 1 : 0, "%s: %s", modes[m], out);
        cr_expect(out && strstr(out, "data: 3000 training pairs") && strstr(out, "not prepared: cannot write"), "%s", out);
        if (m == 0) cr_expect(out && strstr(out, "nothing was prepared"), "%s", out);
        free(out);
        cr_expect_eq(tu_sh("ls %s/cache | grep -v '[.]key$' | grep -q .", d), 1, "a file was left in the cache folder");
    }
    tu_rm_rf(d);
    free(d);
}

/* Training on the streamed pairs (each batch read ahead of its step) paused in mid-epoch and
 * resumed gives the model file of the run that never stopped. */
Test(prepared, resumed_mid_epoch_on_streamed_data) {
    char *d = tu_tmpdir();
    write_corpus(d, 60);
    char sets[1200];
    snprintf(sets, sizeof sets,
             "--set data_dir=%s --set train_prefix=train --set valid_prefix=val --set test_prefix=test --set min_freq=1 "
             "--set subword=bpe --set bpe_merges=30 --set cache_dir=%s/cache --set train.epochs=2 --set train.batch_size=8 "
             "--set model.embedding=16 --set model.encoder_hidden=16 --set model.decoder_hidden=16 --set model.kq=8",
             d, d);
    cr_assert_eq(tu_sh("%s/train --config configs/multi30k.json --out %s/whole %s > %s/whole.out 2>&1", tu_bin(), d, sets, d), 0,
                 "%s", tu_slurp(tu_path(d, "whole.out"), NULL));
    cr_expect(tu_file_has(tu_path(d, "whole.out"), "prepared"), "%s", tu_slurp(tu_path(d, "whole.out"), NULL));
    cr_assert_eq(tu_sh("%s/train --config configs/multi30k.json --out %s/parts --pause-at 3 %s > %s/p1.out 2>&1", tu_bin(), d,
                       sets, d),
                 0, "%s", tu_slurp(tu_path(d, "p1.out"), NULL));
    cr_assert_eq(tu_sh("%s/train --resume %s/parts --pause-at 11 > %s/p2.out 2>&1", tu_bin(), d, d), 0, "%s",
                 tu_slurp(tu_path(d, "p2.out"), NULL));
    cr_assert_eq(tu_sh("%s/train --resume %s/parts > %s/p3.out 2>&1", tu_bin(), d, d), 0, "%s", tu_slurp(tu_path(d, "p3.out"), NULL));
    cr_expect_eq(tu_sh("cmp -s %s/whole/model.bin %s/parts/model.bin", d, d), 0, "paused and resumed: another model");
    char why[300] = "";
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/whole/last.bin", d);
    snprintf(b, sizeof b, "%s/parts/last.bin", d);
    cr_expect(tu_same_checkpoint(a, b, why, sizeof why), "paused and resumed: last.bin: %s", why);
    tu_rm_rf(d);
    free(d);
}

/* Ctrl-C while a corpus is prepared stops ./train at once (at the next chunk of pairs), exit
 * 130, with no prepared file, no temporary file and no run folder left. */
Test(prepared, a_signal_stops_the_preparation, .timeout = 120) {
    char *d = tu_tmpdir();
    tu_write_pairs(d, "train", 300000);
    cr_assert_eq(tu_sh("cd %s && head -3 train.de > val.de && head -3 train.en > val.en && cp val.de test.de && cp val.en test.en",
                       d), 0);
    char cwd[400];
    cr_assert(getcwd(cwd, sizeof cwd) != NULL);
    int rc = tu_sh("cd %s && { %s/train --config %s/configs/multi30k.json --out run --set data_dir=. --set train_prefix=train "
                   "--set valid_prefix=val --set test_prefix=test --set subword=bpe --set bpe_merges=50 --set cache_dir=cache "
                   "> out.txt 2>&1 & pid=$!; for i in $(seq 3000); do ls cache/*.s2sdata.tmp.* > /dev/null 2>&1 && break; "
                   "sleep 0.01; done; kill -INT $pid; wait $pid; }",
                   d, tu_bin(), cwd);
    char *out = tu_slurp(tu_path(d, "out.txt"), NULL);
    cr_expect_eq(rc, 130, "exit %d: %s", rc, out);
    cr_expect(out && strstr(out, "stopped by a signal while encoding"), "%s", out);
    free(out);
    cr_expect_eq(tu_sh("ls %s/cache | grep -q s2sdata", d), 1, "a prepared or temporary file was left");
    cr_expect(!file_exists(tu_path(d, "run")), "a run folder was left");
    tu_rm_rf(d);
    free(d);
}
