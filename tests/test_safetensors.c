/* test_safetensors.c — safetensors files: the writer's layout, the reader's refusals of
 * hostile files (one line each, before reading the data), base64; ./export and ./import: a
 * round trip gives the model file back byte for byte (RNN words; Transformer with a subword
 * model and three-way tying), and a missing, extra, mis-shaped or non-finite tensor, an
 * unknown dtype or a tied copy that differs is one clear line, exit 1. */
#include "test_util.h"
#include "s2s/checkpoint.h"
#include "s2s/model.h"
#include "s2s/safetensors.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A file image: the u64 length, the header as given, then data bytes. */
static unsigned char *image(const char *header, const void *data, size_t n_data, size_t *len) {
    size_t h = strlen(header);
    *len = 8 + h + n_data;
    unsigned char *b = malloc(*len);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(b + 8, header, h);
    if (n_data) memcpy(b + 8 + h, data, n_data);
    return b;
}

static S2sStatus parse(const char *header, size_t n_data, S2sError *err) {
    unsigned char data[64] = {0};
    size_t len;
    cr_assert(n_data <= sizeof data);
    unsigned char *b = image(header, data, n_data, &len);
    SafeTensors s;
    S2sStatus st = safetensors_from_memory(&s, b, len, "x.safetensors", err);
    if (!st) safetensors_free(&s);
    free(b);
    return st;
}

Test(safetensors, writes_what_it_reads) {
    float a[6] = {1, -2.5f, 3, 0.1f, 1e-20f, -0.0f}, b[2] = {7, 8};
    SafeSaveTensor t[2] = {{"w", 2, (int[]){2, 3}, a}, {"layer.b", 1, (int[]){2}, b}};
    const char *keys[] = {"k"}, *vals[] = {"v \"quoted\""};
    char path[64];
    snprintf(path, sizeof path, "/tmp/s2s_st_%d.safetensors", (int)getpid());
    S2sError err;
    for (int bf = 0; bf < 2; bf++) {
        cr_assert_eq(safetensors_save(path, t, 2, keys, vals, 1, bf ? SAFETENSORS_BF16 : SAFETENSORS_F32, &err), S2S_OK, "%s", err.msg);
        size_t len;
        unsigned char *raw = (unsigned char *)tu_slurp(path, &len);
        uint64_t n = 0;
        for (int i = 7; i >= 0; i--) n = n << 8 | raw[i];
        cr_expect_eq(n % 8, 0, "the header is padded to 8 bytes");
        cr_expect_eq(len, 8 + n + (bf ? 2 : 4) * 8);
        free(raw);
        SafeTensors s;
        cr_assert_eq(safetensors_load(&s, path, &err), S2S_OK, "%s", err.msg);
        cr_assert_eq(s.n, 2);
        const SafeTensor *w = safetensors_find(&s, "w"), *lb = safetensors_find(&s, "layer.b");
        cr_assert(w && lb);
        cr_expect_eq(w->dtype, bf ? SAFETENSORS_BF16 : SAFETENSORS_F32);
        cr_expect(w->ndim == 2 && w->shape[0] == 2 && w->shape[1] == 3 && w->numel == 6 && lb->numel == 2);
        for (int i = 0; i < 6; i++) {
            float want = a[i];
            if (bf) { /* bfloat16: the nearest of the float's top 16 bits */
                uint32_t u;
                memcpy(&u, &want, 4);
                u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000u;
                memcpy(&want, &u, 4);
            }
            float got = safetensors_value(w, (size_t)i);
            cr_expect(memcmp(&got, &want, 4) == 0, "w[%d]: %g, want %g", i, got, want);
        }
        cr_expect_eq(safetensors_value(lb, 1), 8.0f);
        cr_expect_str_eq(safetensors_meta(&s, "k"), "v \"quoted\"");
        cr_expect_null(safetensors_meta(&s, "absent"));
        safetensors_free(&s);
    }
    unlink(path);
}

Test(safetensors, reads_f16_and_leading_spaces) {
    uint16_t h[4] = {0x3c00, 0xc000, 0x0001, 0x7bff}; /* 1, -2, the least subnormal, 65504 */
    size_t len;
    unsigned char *b = image("  {\"x\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,8]}}   ", h, 8, &len);
    SafeTensors s;
    S2sError err;
    cr_assert_eq(safetensors_from_memory(&s, b, len, "f16", &err), S2S_OK, "%s", err.msg);
    cr_expect_eq(safetensors_value(&s.tensors[0], 0), 1.0f);
    cr_expect_eq(safetensors_value(&s.tensors[0], 1), -2.0f);
    cr_expect_eq(safetensors_value(&s.tensors[0], 2), ldexpf(1, -24));
    cr_expect_eq(safetensors_value(&s.tensors[0], 3), 65504.0f);
    safetensors_free(&s);
    free(b);
}

/* Every refusal: its status and the words of its message. */
Test(safetensors, hostile_headers_are_refused_with_one_line) {
    static const struct {
        const char *header;
        size_t data;
        const char *words;
    } CASES[] = {
        {"[1, 2]", 0, "not a JSON object"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}", 4, "not valid JSON"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}} x", 4, "bytes after the header"},
        {"{\"a\": 1}", 0, "not an object with dtype"},
        {"{\"a\": {\"dtype\": \"I32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4, "\"I32\" is not a weight type"},
        {"{\"a\": {\"dtype\": \"Q4\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4, "not a safetensors dtype"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [-1], \"data_offsets\": [0, 4]}}", 4, "shape entry 0 is not a size"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1.5], \"data_offsets\": [0, 4]}}", 4, "shape entry 0"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1,1,1,1,1,1,1,1,1], \"data_offsets\": [0, 4]}}", 4, "9 dimensions"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1099511627776, 1099511627776], \"data_offsets\": [0, 4]}}", 4, "more than 2^50"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 4]}}", 4, "4 bytes for 2 F32 values"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}", 4, "outside the 4 bytes"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 0]}}", 4, "outside"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0]}}", 4, "is not [begin, end]"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, "
         "\"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4, "overlaps"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}", 8, "bytes 0..4 of the data belong to no tensor"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 8, "cover 4 of the 8 bytes"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, "
         "\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}", 8, "\"a\" appears twice"},
        {"{\"__metadata__\": {\"k\": 1}}", 0, "\"k\" is not a string"},
        {"{\"__metadata__\": [\"k\"]}", 0, "\"__metadata__\" is not an object"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        S2sError err = {0};
        cr_expect_eq(parse(CASES[i].header, CASES[i].data, &err), S2S_ERR_CORRUPT, "case %zu accepted", i);
        cr_expect(strstr(err.msg, CASES[i].words) && strstr(err.msg, "x.safetensors") && !strchr(err.msg, '\n'),
                  "case %zu: %s", i, err.msg);
    }
    /* lengths: short, beyond the file, beyond 100 MB */
    S2sError err;
    SafeTensors s;
    unsigned char tiny[5] = {0};
    cr_expect_eq(safetensors_from_memory(&s, tiny, 5, "x", &err), S2S_ERR_CORRUPT);
    cr_expect(strstr(err.msg, "too short"), "%s", err.msg);
    unsigned char big[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '{', '}'};
    cr_expect_eq(safetensors_from_memory(&s, big, 16, "x", &err), S2S_ERR_CORRUPT);
    cr_expect(strstr(err.msg, "at most 100000000"), "%s", err.msg);
    unsigned char past[16] = {100, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    cr_expect_eq(safetensors_from_memory(&s, past, 16, "x", &err), S2S_ERR_CORRUPT);
    cr_expect(strstr(err.msg, "a header of 100 bytes in a file of 16"), "%s", err.msg);
    /* and from a file: a 100 MB header claimed in a tiny file allocates nothing of that size */
    char path[64];
    snprintf(path, sizeof path, "/tmp/s2s_st_big_%d.safetensors", (int)getpid());
    unsigned char claim[16] = {0, 0xe1, 0xf5, 0x05, 0, 0, 0, 0, '{', '}'}; /* 100,000,000 */
    FILE *f = fopen(path, "wb");
    fwrite(claim, 1, 16, f);
    fclose(f);
    cr_expect_eq(safetensors_load(&s, path, &err), S2S_ERR_CORRUPT);
    cr_expect(strstr(err.msg, "in a file of 16"), "%s", err.msg);
    unlink(path);
    /* an empty file of tensors is a file */
    cr_expect_eq(parse("{}", 0, &err), S2S_OK, "%s", err.msg);
}

Test(safetensors, base64_round_trip_and_refusals) {
    const char *cases[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    const char *want[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"}; /* RFC 4648's vectors */
    for (int i = 0; i < 7; i++) {
        char *e = safetensors_b64_encode(cases[i], strlen(cases[i]));
        cr_expect_str_eq(e, want[i]);
        size_t n;
        unsigned char *d = safetensors_b64_decode(e, &n);
        cr_assert(d != NULL);
        cr_expect(n == strlen(cases[i]) && !memcmp(d, cases[i], n));
        free(d);
        free(e);
    }
    unsigned char bytes[256];
    for (int i = 0; i < 256; i++) bytes[i] = (unsigned char)i;
    char *e = safetensors_b64_encode(bytes, 256);
    size_t n;
    unsigned char *d = safetensors_b64_decode(e, &n);
    cr_expect(d && n == 256 && !memcmp(d, bytes, 256));
    free(d);
    free(e);
    const char *bad[] = {"Zg=", "Z===", "Zg==Zg==", "Zm9*", "=Zm9", "Zg=a"};
    for (int i = 0; i < 6; i++) cr_expect_null(safetensors_b64_decode(bad[i], &n), "%s decoded", bad[i]);
}

/* The tied embeddings' names are those of the untied model's embeddings. */
Test(safetensors, tied_names_are_the_untied_embeddings) {
    for (int tf = 0; tf < 2; tf++) {
        Config c;
        config_defaults(&c);
        S2sError err;
        if (tf) {
            cr_assert_eq(config_set(&c, "model.type=transformer", &err), S2S_OK, "%s", err.msg);
            cr_assert_eq(config_set(&c, "d_model=16", &err), S2S_OK);
            cr_assert_eq(config_set(&c, "heads=2", &err), S2S_OK);
        }
        cr_assert_eq(config_set(&c, "tie_embeddings=all", &err), S2S_OK, "%s", err.msg);
        const char *names[2];
        cr_assert_eq(model_tied_names(&c.model, names), 2);
        c.model.tie_embeddings = TIE_NONE;
        Seq2Seq m;
        cr_assert_eq(model_init(&m, &c.model, 12, 12, &err), S2S_OK, "%s", err.msg);
        for (int k = 0; k < 2; k++) cr_expect(params_find(&m.params, names[k]) != NULL, "%s is no parameter", names[k]);
        model_free(&m);
    }
}

/* ---- ./export and ./import ---- */

/* Rewrites a safetensors file through edit (which may change, drop or add tensors: n up to
 * cap; NULL: none), with its metadata or (keep_meta false) without. */
typedef int (*Edit)(SafeSaveTensor *t, float **bufs, int n, int cap);
static void rewrite_file(const char *in, const char *out, Edit edit, bool keep_meta) {
    SafeTensors s;
    S2sError err;
    cr_assert_eq(safetensors_load(&s, in, &err), S2S_OK, "%s", err.msg);
    int cap = s.n + 2, n = s.n;
    SafeSaveTensor *t = calloc((size_t)cap, sizeof *t);
    float **bufs = calloc((size_t)cap, sizeof *bufs);
    int (*shapes)[8] = calloc((size_t)cap, sizeof *shapes);
    for (int i = 0; i < n; i++) {
        bufs[i] = malloc(s.tensors[i].numel * 4 + 4);
        for (size_t k = 0; k < s.tensors[i].numel; k++) bufs[i][k] = safetensors_value(&s.tensors[i], k);
        for (int d = 0; d < s.tensors[i].ndim; d++) shapes[i][d] = (int)s.tensors[i].shape[d];
        t[i] = (SafeSaveTensor){s.tensors[i].name, s.tensors[i].ndim, shapes[i], bufs[i]};
    }
    if (edit) n = edit(t, bufs, n, cap);
    const char *keys[16], *vals[16];
    int nm = 0;
    for (const cJSON *m = s.metadata && keep_meta ? s.metadata->child : NULL; m && nm < 16; m = m->next) {
        keys[nm] = m->string;
        vals[nm++] = m->valuestring;
    }
    cr_assert_eq(safetensors_save(out, t, n, keys, vals, nm, SAFETENSORS_F32, &err), S2S_OK, "%s", err.msg);
    for (int i = 0; i < cap; i++) free(bufs[i]);
    free(bufs);
    free(shapes);
    free(t);
    safetensors_free(&s);
}

static void rewrite(const char *in, const char *out, Edit edit) { rewrite_file(in, out, edit, true); }

static int drop_last(SafeSaveTensor *t, float **b, int n, int cap) {
    (void)t, (void)b, (void)cap;
    return n - 1;
}
static float EXTRA[3] = {1, 2, 3};
static int EXTRA_SHAPE[1] = {3}; /* static: read after this function returns */
static int add_extra(SafeSaveTensor *t, float **b, int n, int cap) {
    (void)b, (void)cap;
    t[n] = (SafeSaveTensor){"decoder.surprise", 1, EXTRA_SHAPE, EXTRA};
    return n + 1;
}
static int nan_in_first(SafeSaveTensor *t, float **b, int n, int cap) {
    (void)t, (void)cap;
    b[0][1] = NAN;
    return n;
}
static int reshape_first(SafeSaveTensor *t, float **b, int n, int cap) {
    (void)b, (void)cap;
    static int shape[1];
    int numel = 1;
    for (int d = 0; d < t[0].ndim; d++) numel *= t[0].shape[d];
    shape[0] = numel;
    t[0].ndim = 1;
    t[0].shape = shape;
    return n;
}
/* the tied source embedding under its own name, as PyTorch's state_dict lists it */
static int add_tied_copy(SafeSaveTensor *t, float **b, int n, int cap) {
    (void)cap, (void)b;
    for (int i = 0; i < n; i++)
        if (!strcmp(t[i].name, "generator.weight")) {
            t[n] = t[i];
            t[n].name = "src_embed.weight";
            return n + 1;
        }
    cr_assert_fail("no generator.weight");
    return n;
}
static int add_tied_other(SafeSaveTensor *t, float **b, int n, int cap) {
    n = add_tied_copy(t, b, n, cap);
    int numel = t[n - 1].shape[0] * t[n - 1].shape[1];
    b[n - 1] = malloc((size_t)numel * 4);
    for (int k = 0; k < numel; k++) b[n - 1][k] = 0.5f;
    t[n - 1].data = b[n - 1];
    return n;
}

/* What ./import takes besides the weights, from model file `model` in d: d/<p>src.txt and
 * <p>trg.txt (one token a line), <p>conf.json, and <p>bpe.model when it has a (joint) subword
 * model. */
static void write_parts(const char *d, const char *model, const char *p) {
    Checkpoint ck;
    S2sError err;
    cr_assert_eq(ckpt_load(&ck, tu_path(d, model), &err), S2S_OK, "%s", err.msg);
    char name[64];
    char *const *tokens[2] = {ck.src_tokens, ck.trg_tokens};
    int n[2] = {ck.n_src, ck.n_trg};
    for (int side = 0; side < 2; side++) {
        snprintf(name, sizeof name, "%s%s.txt", p, side ? "trg" : "src");
        FILE *f = fopen(tu_path(d, name), "w");
        for (int i = 0; i < n[side]; i++) fprintf(f, "%s\n", tokens[side][i]);
        fclose(f);
    }
    snprintf(name, sizeof name, "%sconf.json", p);
    FILE *f = fopen(tu_path(d, name), "w");
    fputs(ck.config_json, f);
    fclose(f);
    if (ck.subword) {
        cr_assert(ck.subword_trg == NULL, "a joint subword model");
        snprintf(name, sizeof name, "%sbpe.model", p);
        f = fopen(tu_path(d, name), "wb");
        fwrite(ck.subword, 1, ck.subword_len, f);
        fclose(f);
    }
    ckpt_free(&ck);
}

static void expect_import_fails(const char *d, const char *file, const char *words) {
    cr_expect_eq(tu_sh("%s/import %s/%s --out %s/bad.bin 2> %s/err.txt", tu_bin(), d, file, d, d), 1, "%s imported", file);
    char *msg = tu_slurp(tu_path(d, "err.txt"), NULL);
    cr_expect(msg && strstr(msg, words) && strchr(msg, '\n') == msg + strlen(msg) - 1, "%s: %s", file, msg ? msg : "(none)");
    free(msg);
    cr_expect(access(tu_path(d, "bad.bin"), F_OK) != 0, "a model file was written");
}

Test(safetensors, export_import_round_trip_and_refusals, .timeout = 240) {
    char *d = tu_tmpdir();
    /* an RNN on words (the reversal task) */
    FILE *f = fopen(tu_path(d, "r.json"), "w");
    fprintf(f, "{\"name\": \"r\", \"seed\": 2, \"task\": {\"type\": \"reverse\", \"alphabet\": \"abcd\", \"train_size\": 200, "
               "\"valid_size\": 20, \"test_size\": 20}, \"model\": {\"cell\": \"lstm\", \"embedding\": 8, \"encoder_hidden\": 12, "
               "\"decoder_hidden\": 12, \"attention\": \"additive\", \"kq\": 6, \"bidirectional\": true}, "
               "\"train\": {\"epochs\": 1, \"batch_size\": 32}}");
    fclose(f);
    cr_assert_eq(tu_sh("%s/train --config %s/r.json --out %s/rnn > /dev/null", tu_bin(), d, d), 0);
    cr_assert_eq(tu_sh("%s/export %s/rnn/model.bin --out %s/rnn.safetensors", tu_bin(), d, d), 0);
    cr_assert_eq(tu_sh("%s/import %s/rnn.safetensors --out %s/rnn2.bin", tu_bin(), d, d), 0);
    cr_expect(tu_same_file(tu_path(d, "rnn/model.bin"), tu_path(d, "rnn2.bin")), "the RNN model file differs after the round trip");
    /* the same from the arguments instead of the metadata: the config file and vocabularies */
    S2sError err;
    write_parts(d, "rnn/model.bin", "");
    /* a file without metadata: the config and vocabularies must come from the arguments */
    rewrite_file(tu_path(d, "rnn.safetensors"), tu_path(d, "plain.safetensors"), NULL, false);
    cr_expect_eq(tu_sh("%s/import %s/plain.safetensors --out %s/x.bin 2> %s/err.txt", tu_bin(), d, d, d), 2);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "give --config"), "%s", tu_slurp(tu_path(d, "err.txt"), NULL));
    cr_expect_eq(tu_sh("%s/import %s/plain.safetensors --config %s/conf.json --out %s/x.bin 2> %s/err.txt", tu_bin(), d, d, d, d), 2);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "--src-vocab FILE"), "%s", tu_slurp(tu_path(d, "err.txt"), NULL));
    cr_assert_eq(tu_sh("%s/import %s/plain.safetensors --config %s/conf.json --src-vocab %s/src.txt --trg-vocab %s/trg.txt "
                       "--out %s/rnn3.bin",
                       tu_bin(), d, d, d, d, d),
                 0);
    cr_expect(tu_same_file(tu_path(d, "rnn/model.bin"), tu_path(d, "rnn3.bin")), "imported from the arguments: another file");
    /* a config whose sizes differ: the tensor and both shapes named */
    cr_expect_eq(tu_sh("%s/import %s/plain.safetensors --config %s/conf.json --set encoder_hidden=10 --src-vocab %s/src.txt "
                       "--trg-vocab %s/trg.txt --out %s/bad.bin 2> %s/err.txt",
                       tu_bin(), d, d, d, d, d, d),
                 1);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "the config and vocabularies make it"), "%s", tu_slurp(tu_path(d, "err.txt"), NULL));
    /* damaged files */
    rewrite(tu_path(d, "rnn.safetensors"), tu_path(d, "missing.safetensors"), drop_last);
    expect_import_fails(d, "missing.safetensors", "no tensor \"");
    rewrite(tu_path(d, "rnn.safetensors"), tu_path(d, "extra.safetensors"), add_extra);
    expect_import_fails(d, "extra.safetensors", "tensor \"decoder.surprise\" is no parameter of the config's model");
    rewrite(tu_path(d, "rnn.safetensors"), tu_path(d, "nan.safetensors"), nan_in_first);
    expect_import_fails(d, "nan.safetensors", "holds NaN at element 1");
    rewrite(tu_path(d, "rnn.safetensors"), tu_path(d, "shape.safetensors"), reshape_first);
    expect_import_fails(d, "shape.safetensors", "the config and vocabularies make it");
    f = fopen(tu_path(d, "junk.safetensors"), "w");
    fputs("not a safetensors file at all", f);
    fclose(f);
    expect_import_fails(d, "junk.safetensors", "junk.safetensors: a header of");

    /* a Transformer on a joint BPE model with three-way tying, exported in bf16 too */
    const char *words[2][6] = {{"Hund", "Katze", "läuft", "schläft", "rot", "groß"}, {"dog", "cat", "runs", "sleeps", "red", "big"}};
    const char *lang[2] = {"de", "en"}, *split[3] = {"train", "val", "test"};
    for (int sp = 0; sp < 3; sp++)
        for (int l = 0; l < 2; l++) {
            char name[32];
            snprintf(name, sizeof name, "%s.%s", split[sp], lang[l]);
            f = fopen(tu_path(d, name), "w");
            for (int i = 0; i < (sp ? 10 : 200); i++) fprintf(f, "%s %s.\n", words[l][(i + sp) % 6], words[l][(i / 6 + sp) % 6]);
            fclose(f);
        }
    f = fopen(tu_path(d, "t.json"), "w");
    fprintf(f, "{\"name\": \"t\", \"seed\": 2, \"task\": {\"type\": \"translate\", \"data_dir\": \"%s\", \"train_prefix\": \"train\", "
               "\"valid_prefix\": \"val\", \"test_prefix\": \"test\", \"subword\": \"bpe\", \"bpe_merges\": 20}, "
               "\"model\": {\"type\": \"transformer\", \"d_model\": 16, \"heads\": 2, "
               "\"ff\": 24, \"layers\": 1, \"tie_embeddings\": \"all\", \"positions\": \"learned\", \"max_positions\": 40}, "
               "\"train\": {\"epochs\": 1, \"batch_size\": 32}}", d);
    fclose(f);
    cr_assert_eq(tu_sh("%s/train --config %s/t.json --out %s/tf > /dev/null", tu_bin(), d, d), 0);
    cr_assert_eq(tu_sh("%s/export %s/tf/model.bin --out %s/tf.safetensors", tu_bin(), d, d), 0);
    cr_assert_eq(tu_sh("%s/import %s/tf.safetensors --out %s/tf2.bin", tu_bin(), d, d), 0);
    cr_expect(tu_same_file(tu_path(d, "tf/model.bin"), tu_path(d, "tf2.bin")), "the Transformer model file differs after the round trip");
    /* the same from files: config, vocabularies and the subword model given, no metadata */
    write_parts(d, "tf/model.bin", "t");
    rewrite_file(tu_path(d, "tf.safetensors"), tu_path(d, "tplain.safetensors"), NULL, false);
    cr_expect_eq(tu_sh("%s/import %s/tplain.safetensors --config %s/tconf.json --src-vocab %s/tsrc.txt --trg-vocab %s/ttrg.txt "
                       "--out %s/x.bin 2> %s/err.txt",
                       tu_bin(), d, d, d, d, d, d),
                 2, "task.subword is bpe: a subword model is needed");
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "no subword model came"), "%s", tu_slurp(tu_path(d, "err.txt"), NULL));
    cr_assert_eq(tu_sh("%s/import %s/tplain.safetensors --config %s/tconf.json --src-vocab %s/tsrc.txt --trg-vocab %s/ttrg.txt "
                       "--subword %s/tbpe.model --out %s/tf4.bin",
                       tu_bin(), d, d, d, d, d, d),
                 0);
    cr_expect(tu_same_file(tu_path(d, "tf/model.bin"), tu_path(d, "tf4.bin")), "imported from files with --subword: another file");
    rewrite(tu_path(d, "tf.safetensors"), tu_path(d, "alias.safetensors"), add_tied_copy);
    cr_assert_eq(tu_sh("%s/import %s/alias.safetensors --out %s/tf3.bin", tu_bin(), d, d), 0, "a tied copy is accepted");
    cr_expect(tu_same_file(tu_path(d, "tf/model.bin"), tu_path(d, "tf3.bin")));
    rewrite(tu_path(d, "tf.safetensors"), tu_path(d, "alias2.safetensors"), add_tied_other);
    expect_import_fails(d, "alias2.safetensors", "\"src_embed.weight\" differs from the output layer's weight");
    cr_assert_eq(tu_sh("%s/export %s/tf/model.bin --bf16 --out %s/tf16.safetensors", tu_bin(), d, d), 0);
    cr_assert_eq(tu_sh("%s/import %s/tf16.safetensors --out %s/tf16.bin", tu_bin(), d, d), 0);
    Checkpoint a, b;
    cr_assert_eq(ckpt_load(&a, tu_path(d, "tf/model.bin"), &err), S2S_OK);
    cr_assert_eq(ckpt_load(&b, tu_path(d, "tf16.bin"), &err), S2S_OK);
    size_t off = 0, changed = 0;
    for (int i = 0; i < a.n_tensors; i++)
        for (size_t k = 0; k < a.tensors[i].size; k++, off++) {
            float x, y;
            memcpy(&x, (const char *)a.tensors[i].data + 4 * k, 4);
            memcpy(&y, (const char *)b.tensors[i].data + 4 * k, 4);
            uint32_t u;
            memcpy(&u, &y, 4);
            cr_expect_eq(u & 0xffff, 0, "not a bfloat16 value");
            cr_expect_leq(fabsf(x - y), fabsf(x) / 256, "%s[%zu]: %g became %g", a.tensors[i].name, k, x, y);
            changed += x != y;
        }
    cr_expect_gt(changed, off / 2, "bf16 rounded most weights");
    ckpt_free(&a);
    ckpt_free(&b);
    cr_expect_eq(tu_sh("echo 'Hund rot.' | %s/translate %s/tf16.bin > /dev/null", tu_bin(), d), 0);
    tu_rm_rf(d);
    free(d);
}

/* Files that PyTorch wrote (scripts/torch-check.py --write-fixture: its reference models,
 * trained a little there, every state_dict key, tied copies too) decode here as in PyTorch:
 * the same greedy outputs, the same ids, logits within 1e-4 of PyTorch's (float64) ones. */
Test(safetensors, pytorch_written_files_decode_as_pytorch, .timeout = 120) {
    const char *kinds[] = {"transformer", "rnn"};
    char *d = tu_tmpdir();
    for (int k = 0; k < 2; k++) {
        char fx[256];
        snprintf(fx, sizeof fx, "tests/golden-extra/safetensors/%s", kinds[k]);
        cr_assert_eq(tu_sh("%s/import %s/torch.safetensors --out %s/m.bin", tu_bin(), fx, d), 0, "%s", kinds[k]);
        cr_assert_eq(tu_sh("%s/translate %s/m.bin --input %s/src.txt > %s/out.txt", tu_bin(), d, fx, d), 0);
        cr_assert_eq(tu_sh("%s/translate %s/m.bin --input %s/src.txt --score %s/out.txt --logits %s/l.jsonl > /dev/null", tu_bin(),
                           d, fx, d, d),
                     0);
        cJSON *e = cJSON_Parse(tu_slurp(tu_path(fx, "expected.json"), NULL));
        cr_assert(e != NULL);
        char *out = tu_slurp(tu_path(d, "out.txt"), NULL);
        const cJSON *g, *greedy = cJSON_GetObjectItem(e, "greedy");
        int line = 0;
        char *save = NULL;
        char *tok = strtok_r(out, "\n", &save);
        cJSON_ArrayForEach(g, greedy) {
            cr_expect(tok && !strcmp(tok, g->valuestring), "%s line %d: \"%s\", PyTorch \"%s\"", kinds[k], line, tok ? tok : "",
                      g->valuestring);
            tok = strtok_r(NULL, "\n", &save);
            line++;
        }
        cr_expect_gt(line, 4);
        free(out);
        char *lj = tu_slurp(tu_path(d, "l.jsonl"), NULL), *save2 = NULL;
        const cJSON *logits = cJSON_GetObjectItem(e, "logits"), *src_ids = cJSON_GetObjectItem(e, "src_ids"),
                    *trg_ids = cJSON_GetObjectItem(e, "trg_ids");
        double worst = 0;
        int rows = 0;
        char *l = strtok_r(lj, "\n", &save2);
        for (int i = 0; i < cJSON_GetArraySize(logits) && l; i++, l = strtok_r(NULL, "\n", &save2)) {
            cJSON *r = cJSON_Parse(l);
            cr_expect(cJSON_Compare(cJSON_GetObjectItem(r, "src"), cJSON_GetArrayItem(src_ids, i), true), "%s: source ids", kinds[k]);
            cr_expect(cJSON_Compare(cJSON_GetObjectItem(r, "trg"), cJSON_GetArrayItem(trg_ids, i), true), "%s: target ids", kinds[k]);
            const cJSON *ours = cJSON_GetObjectItem(r, "logits"), *theirs = cJSON_GetArrayItem(logits, i);
            cr_assert_eq(cJSON_GetArraySize(ours), cJSON_GetArraySize(theirs));
            for (int t = 0; t < cJSON_GetArraySize(ours); t++) {
                const cJSON *a = cJSON_GetArrayItem(ours, t), *b = cJSON_GetArrayItem(theirs, t);
                cr_assert_eq(cJSON_GetArraySize(a), cJSON_GetArraySize(b));
                for (int v = 0; v < cJSON_GetArraySize(a); v++)
                    worst = fmax(worst, fabs(cJSON_GetArrayItem(a, v)->valuedouble - cJSON_GetArrayItem(b, v)->valuedouble));
                rows++;
            }
            cJSON_Delete(r);
        }
        cr_expect_gt(rows, 5, "%s: logits compared", kinds[k]);
        cr_expect_lt(worst, 1e-4, "%s: logits differ from PyTorch's by %g", kinds[k], worst);
        free(lj);
        cJSON_Delete(e);
    }
    tu_rm_rf(d);
    free(d);
}

/* Where Debian's python3-torch is installed: scripts/torch-check.py on a small model trained
 * here, both ways (skipped, with a message, where it is not). */
Test(safetensors, torch_check_script_both_ways, .timeout = 300) {
    if (tu_sh("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1") != 0) {
        TU_SKIP("python3-torch is not installed: scripts/torch-check.py not run");
    }
    char *d = tu_tmpdir();
    FILE *f = fopen(tu_path(d, "t.json"), "w");
    fprintf(f, "{\"name\": \"t\", \"seed\": 4, \"task\": {\"type\": \"reverse\", \"alphabet\": \"abcde\", \"min_len\": 3, \"max_len\": 8, "
               "\"train_size\": 600, \"valid_size\": 20, \"test_size\": 20}, \"model\": {\"type\": \"transformer\", \"d_model\": 16, "
               "\"heads\": 2, \"ff\": 24, \"layers\": 2, \"norm\": \"pre\", \"tie_embeddings\": \"decoder\"}, "
               "\"train\": {\"epochs\": 2, \"batch_size\": 32}}");
    fclose(f);
    cr_assert_eq(tu_sh("%s/train --config %s/t.json --out %s/run > /dev/null", tu_bin(), d, d), 0);
    f = fopen(tu_path(d, "src.txt"), "w");
    fputs("abc\nedcba\nabcab\nead\n", f);
    fclose(f);
    int rc = tu_sh("/usr/bin/python3 scripts/torch-check.py %s/run/model.bin --src %s/src.txt --bin %s --train-steps 10 > %s/out.txt 2>&1",
                   d, d, tu_bin(), d);
    char *out = tu_slurp(tu_path(d, "out.txt"), NULL);
    cr_expect_eq(rc, 0, "%s", out);
    cr_expect(out && strstr(out, "here -> PyTorch: 4 sentences") && strstr(out, "PyTorch -> here: 4 sentences") &&
                  strstr(out, "torch-check: OK"),
              "%s", out ? out : "(none)");
    free(out);
    tu_rm_rf(d);
    free(d);
}
