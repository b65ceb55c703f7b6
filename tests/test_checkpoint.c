/* test_checkpoint.c — model files: a round trip, and every kind of damaged or foreign file
 * gives its status and one clear message (never a crash). */
#include "test_util.h"
#include "s2s/checkpoint.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *TOKS[] = {"<pad>", "<unk>", "<sos>", "<eos>", "a", "b"};

static void make_store(ParamStore *ps, float base) {
    params_init(ps);
    params_add(ps, "enc.w", 2, (int[]){3, 4});
    params_add(ps, "enc.b", 1, (int[]){3});
    cr_assert_eq(params_alloc(ps, NULL), S2S_OK);
    cr_assert_eq(params_alloc_moments(ps, NULL), S2S_OK);
    for (int i = 0; i < ps->count; i++) {
        Tensor *t = ps->items[i].t;
        for (size_t k = 0; k < t->size; k++) {
            t->data[k] = base + (float)k;
            ps->m[ps->items[i].offset + k] = 0.5f * (float)k;
            ps->v[ps->items[i].offset + k] = 0.25f * (float)k;
        }
    }
}

static char *save_tmp(bool moments, bool keep, size_t *len) {
    ParamStore ps;
    make_store(&ps, 1.0f);
    static char path[64];
    snprintf(path, sizeof path, "/tmp/s2s_ckpt_%d.bin", (int)getpid());
    CkptSave s = {"{\"name\": \"t\"}", TOKS, 6, TOKS, 5, &ps, moments, moments ? "{\"step\": 3}" : NULL, NULL, 0, NULL, 0, false};
    S2sError err;
    cr_assert_eq(ckpt_save(path, &s, &err), S2S_OK, "%s", err.msg);
    params_free(&ps);
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    rewind(f);
    char *buf = malloc(*len);
    cr_assert_eq(fread(buf, 1, *len, f), *len);
    fclose(f);
    if (!keep) unlink(path); /* only round_trip reads the file itself */
    return buf;
}

Test(checkpoint, round_trip) {
    size_t len;
    char *img = save_tmp(true, true, &len);
    free(img);
    char path[64];
    snprintf(path, sizeof path, "/tmp/s2s_ckpt_%d.bin", (int)getpid());
    Checkpoint c;
    S2sError err;
    cr_assert_eq(ckpt_load(&c, path, &err), S2S_OK, "%s", err.msg);
    cr_expect_str_eq(c.config_json, "{\"name\": \"t\"}");
    cr_expect_str_eq(c.state_json, "{\"step\": 3}");
    cr_expect_eq(c.n_src, 6);
    cr_expect_eq(c.n_trg, 5);
    cr_expect_str_eq(c.src_tokens[5], "b");
    cr_expect(c.has_moments);
    ParamStore ps;
    make_store(&ps, 100.0f);
    memset(ps.m, 0, ps.total * sizeof(float));
    cr_assert_eq(ckpt_restore(&c, &ps, true, path, &err), S2S_OK, "%s", err.msg);
    Tensor *w = params_find(&ps, "enc.w")->t;
    cr_expect_eq(w->data[5], 6.0f);
    cr_expect_eq(ps.m[params_find(&ps, "enc.b")->offset + 2], 1.0f);
    params_free(&ps);
    /* a model with another shape is refused by name */
    params_init(&ps);
    params_add(&ps, "enc.w", 2, (int[]){4, 3});
    params_add(&ps, "enc.b", 1, (int[]){3});
    cr_assert_eq(params_alloc(&ps, NULL), S2S_OK);
    cr_expect_eq(ckpt_restore(&c, &ps, false, path, &err), S2S_ERR_CORRUPT);
    cr_expect(strstr(err.msg, "\"enc.w\" has another shape"), "%s", err.msg);
    params_free(&ps);
    ckpt_free(&c);
    unlink(path);
}

static S2sStatus load_mem(const void *buf, size_t n, S2sError *err) {
    Checkpoint c;
    S2sStatus st = ckpt_from_memory(&c, buf, n, "m.bin", err);
    if (st == S2S_OK) ckpt_free(&c);
    return st;
}

Test(checkpoint, every_truncation_is_an_error) {
    size_t len;
    char *img = save_tmp(true, false, &len);
    S2sError err;
    cr_assert_eq(load_mem(img, len, &err), S2S_OK);
    for (size_t n = 0; n < len; n++) {
        S2sStatus st = load_mem(img, n, &err);
        cr_assert(st == S2S_ERR_CORRUPT, "a file cut to %zu of %zu bytes loaded (status %d)", n, len, st);
    }
    free(img);
}

Test(checkpoint, every_single_bit_flip_is_caught) {
    size_t len;
    char *img = save_tmp(false, false, &len);
    S2sError err;
    for (size_t i = 0; i < len; i++) {
        for (int bit = 0; bit < 8; bit += 3) {
            img[i] ^= (char)(1 << bit);
            S2sStatus st = load_mem(img, len, &err);
            cr_assert(st != S2S_OK, "flipping bit %d of byte %zu went unnoticed", bit, i);
            img[i] ^= (char)(1 << bit);
        }
    }
    free(img);
}

Test(checkpoint, foreign_and_newer_files) {
    S2sError err;
    const unsigned char png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
    cr_expect_eq(load_mem(png, sizeof png, &err), S2S_ERR_CORRUPT);
    cr_expect(strstr(err.msg, "not an s2s model file"), "%s", err.msg);
    const char *text = "hello, this is a text file\n";
    cr_expect_eq(load_mem(text, strlen(text), &err), S2S_ERR_CORRUPT);
    cr_expect_eq(load_mem("", 0, &err), S2S_ERR_CORRUPT);
    size_t len;
    char *img = save_tmp(false, false, &len);
    img[8] = 2; /* format version 2 */
    cr_expect_eq(load_mem(img, len, &err), S2S_ERR_VERSION);
    cr_expect(strstr(err.msg, "version 2"), "%s", err.msg);
    free(img);
    Checkpoint c;
    cr_expect_eq(ckpt_load(&c, "/nonexistent/model.bin", &err), S2S_ERR_IO);
    cr_expect(strstr(err.msg, "/nonexistent/model.bin: cannot open"), "%s", err.msg);
}

/* The file path checks the layout before reading (D16): every truncation is refused, and a
 * sparse file of 8 GiB whose header is valid is refused by its section table, without being
 * read (the message is the layout's, not the checksum's, which needs the whole file). */
Test(checkpoint, files_are_checked_before_they_are_read) {
    size_t len;
    char *img = save_tmp(true, false, &len);
    char path[64];
    snprintf(path, sizeof path, "/tmp/s2s_ckpt_cut_%d.bin", (int)getpid());
    S2sError err;
    Checkpoint c;
    for (size_t n = 0; n < len; n += 7) {
        FILE *f = fopen(path, "wb");
        fwrite(img, 1, n, f);
        fclose(f);
        S2sStatus st = ckpt_load(&c, path, &err);
        cr_assert(st == S2S_ERR_CORRUPT, "a file cut to %zu of %zu bytes loaded (status %d)", n, len, st);
    }
    /* a valid header and section table whose DATA section claims 8 GiB of a sparse file */
    FILE *f = fopen(path, "wb");
    fwrite(img, 1, 16, f); /* magic, version, section count (7 for a file with moments) */
    const char tens[4] = {'T', 'E', 'N', 'S'}, data[4] = {'D', 'A', 'T', 'A'};
    uint64_t tlen = 4, dlen = (uint64_t)8 << 30;
    uint32_t zero = 0, two = 2;
    fwrite(tens, 1, 4, f);
    fwrite(&tlen, 8, 1, f);
    fwrite(&zero, 4, 1, f); /* no tensors */
    fwrite(data, 1, 4, f);
    fwrite(&dlen, 8, 1, f);
    fclose(f);
    cr_assert_eq(truncate(path, (off_t)(16 + 12 + 4 + 12 + dlen + 4)), 0);
    /* seven sections are announced, two present: the table ends early */
    cr_expect_eq(ckpt_load(&c, path, &err), S2S_ERR_CORRUPT);
    cr_expect(strstr(err.msg, "header truncated") || strstr(err.msg, "needs"), "%s", err.msg);
    f = fopen(path, "r+b");
    fseek(f, 12, SEEK_SET);
    fwrite(&two, 4, 1, f); /* now two sections: the layout holds, DATA disagrees with the table */
    fclose(f);
    cr_expect_eq(ckpt_load(&c, path, &err), S2S_ERR_CORRUPT);
    cr_expect(strstr(err.msg, "section DATA has 8589934592 bytes; the tensor table needs 0"), "%s", err.msg);
    unlink(path);
    cr_expect_eq(ckpt_load(&c, "/dev/zero", &err), S2S_ERR_IO);
    cr_expect(strstr(err.msg, "not a regular file"), "%s", err.msg);
    free(img);
}
