/* ONNX export (onnx.h): the writer's bytes; every model family and attention variant exported,
 * checked by onnx.checker and decoded by ONNX Runtime through the reference decoder
 * (scripts/onnx-check.py: logits within 1e-4 of ./translate --logits, the same greedy and beam
 * outputs); bad input to ./export and to the decoder. The ONNX Runtime checks need Debian's
 * python3-onnx and npm's onnxruntime-node (scripts/deps.sh installs both) and say SKIP with the
 * reason where either is missing. */
#define _GNU_SOURCE /* memmem */
#include "s2s/checkpoint.h"
#include "s2s/onnx.h"
#include "s2s/params.h"
#include "test_util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPM_MODELS "tests/golden-extra/spm"

/* a protobuf field: its number and wire type at *p (advanced past the key) */
static uint64_t varint(const unsigned char **p, const unsigned char *end) {
    uint64_t v = 0;
    for (int s = 0; *p < end && s < 64; s += 7) {
        unsigned char b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80)) return v;
    }
    cr_assert_fail("a varint runs past the end");
    return 0;
}

/* Walks a message's fields, each length inside the message: counts per field number (< 16). */
static void walk(const unsigned char *p, const unsigned char *end, int counts[16], const unsigned char **graph, size_t *glen) {
    while (p < end) {
        uint64_t key = varint(&p, end);
        int field = (int)(key >> 3), wire = (int)(key & 7);
        if (field < 16) counts[field]++;
        if (wire == 0) varint(&p, end);
        else if (wire == 5) p += 4;
        else {
            cr_assert_eq(wire, 2, "wire type %d", wire);
            uint64_t n = varint(&p, end);
            cr_assert_leq(n, (uint64_t)(end - p), "field %d's length runs past its message", field);
            if (field == 7 && graph) *graph = p, *glen = n;
            p += n;
        }
    }
    cr_assert_eq(p, end, "the last field runs past the message");
}

Test(onnx, writer_makes_a_model_proto) {
    OnnxGraph *g = onnx_graph_new("g");
    onnx_input(g, "x", ONNX_FLOAT, "batch,3");
    float w[6] = {1, 2, 3, 4, 5, 6};
    const char *wt = onnx_init_f32(g, "w", 2, (int64_t[]){2, 3}, w);
    cr_expect_str_eq(onnx_find_init(g, "w"), wt);
    cr_expect_null(onnx_find_init(g, "v"));
    const char *y = onnx_gemm(g, "x", wt, NULL);
    onnx_output(g, onnx_op1(g, "Relu", y), "y", ONNX_FLOAT, "batch,2");
    unsigned char *buf;
    size_t len;
    S2sError err;
    cr_assert_eq(onnx_serialize(g, "doc", &buf, &len, &err), S2S_OK);
    int top[16] = {0}, gf[16] = {0};
    const unsigned char *graph = NULL;
    size_t glen = 0;
    walk(buf, buf + len, top, &graph, &glen);
    cr_expect_eq(buf[0], 0x08, "ir_version first");
    cr_expect_eq(buf[1], ONNX_IR_VERSION);
    cr_expect(top[1] == 1 && top[2] == 1 && top[3] == 1 && top[6] == 1 && top[7] == 1 && top[8] == 1,
              "ir_version, producer, its version, doc, graph, opset: once each");
    cr_assert_not_null(graph);
    walk(graph, graph + glen, gf, NULL, NULL);
    cr_expect_eq(gf[1], 3, "nodes: Gemm, Relu and the output's Identity (%d)", gf[1]);
    cr_expect_eq(gf[5], 1, "one initializer");
    cr_expect(gf[11] == 1 && gf[12] == 1, "an input and an output");
    cr_expect(memmem(buf, len, "Gemm", 4) && memmem(buf, len, "transB", 6) && memmem(buf, len, "batch", 5));
    cr_expect(memmem(buf, len, w, sizeof w), "the weights as raw little-endian floats");
    free(buf);
    onnx_graph_free(g);
}

/* onnx-check.py on a model: true when it checked and found no difference; skips (the reason
 * printed) when python3-onnx or onnxruntime-node is missing */
static void check_model(const char *d, const char *model, const char *src, const char *extra, const char *what) {
    int rc = tu_sh("/usr/bin/python3 scripts/onnx-check.py %s --src %s --n 40 --bin %s %s > %s/check.txt 2>&1", model, src,
                   tu_bin(), extra, d);
    char *out = tu_slurp(tu_path(d, "check.txt"), NULL);
    if (out && strstr(out, "nothing checked")) {
        char why[256];
        snprintf(why, sizeof why, "%.200s", out);
        free(out);
        TU_SKIP("%s", why);
    }
    cr_expect_eq(rc, 0, "%s: %s", what, out ? out : "(no output)");
    bool int8 = strstr(extra, "--int8") != NULL; /* two int8 schemes: agreement printed, not required */
    cr_expect(out && strstr(out, "onnx-check: OK") && (int8 || strstr(out, "greedy: 40/40 lines identical")), "%s: %s", what,
              out ? out : "(none)");
    free(out);
}

/* d/src.txt: 40 strings over abcdefg, and d/trg.txt their reversals (the logits are compared on
 * those: a tiny model may end every output at once) */
static void reverse_sources(const char *d) {
    FILE *f = fopen(tu_path(d, "src.txt"), "w"), *r = fopen(tu_path(d, "trg.txt"), "w");
    cr_assert(f && r);
    unsigned s = 7;
    for (int i = 0; i < 40; i++) {
        char w[16];
        int n = 3 + (int)((s = s * 1103515245u + 12345u) >> 16) % 8;
        for (int k = 0; k < n; k++) w[k] = "abcdefg"[((s = s * 1103515245u + 12345u) >> 16) % 7];
        for (int k = 0; k < n; k++) fputc(w[k], f), fputc(w[n - 1 - k], r);
        fputc('\n', f), fputc('\n', r);
    }
    fclose(f), fclose(r);
}

/* d/run: d/c.json trained with the variant's settings ("key=value ..." as --set each) */
static void train_variant(const char *d, const char *variant) {
    char sets[512] = "", *save, copy[256];
    snprintf(copy, sizeof copy, "%s", variant);
    for (char *kv = strtok_r(copy, " ", &save); kv; kv = strtok_r(NULL, " ", &save))
        snprintf(sets + strlen(sets), sizeof sets - strlen(sets), " --set %s", kv);
    cr_assert_eq(tu_sh("rm -rf %s/run && %s/train --config %s/c.json --out %s/run %s > %s/train.txt 2>&1", d, tu_bin(), d, d,
                       sets, d),
                 0, "%s: %s", variant, tu_slurp(tu_path(d, "train.txt"), NULL));
}

/* Every RNN cell, direction, depth, attention and output, one-hot and tied embeddings. */
Test(onnx, every_rnn_variant_decodes_the_same_in_onnx_runtime, .timeout = 600) {
    static const char *const VARIANTS[] = {
        "cell=gru bidirectional=false layers=1 attention=dot combine=concat",
        "cell=lstm bidirectional=true layers=2 attention=additive combine=luong",
        "cell=gru bidirectional=true layers=1 attention=scaled_dot combine=concat",
        "cell=lstm bidirectional=false layers=2 attention=general combine=concat",
        "cell=gru bidirectional=true layers=2 attention=multihead combine=luong",   /* D ≠ H: q/k/v_proj_weight */
        "cell=gru bidirectional=false layers=1 attention=multihead combine=concat", /* D = H: in_proj_weight */
        "cell=lstm bidirectional=true layers=1 attention=meanpool combine=concat",
        "cell=gru bidirectional=false layers=1 attention=dummy combine=concat",
        "cell=gru bidirectional=true layers=1 attention=general embedding_type=onehot",
        "cell=gru bidirectional=true layers=1 attention=additive combine=luong tie_embeddings=decoder",
        ("cell=lstm bidirectional=true attention=dot combine=luong tie_embeddings=all decoder_hidden=32 embedding=32 "
         "source_markers=true"),
    };
    char *d = tu_tmpdir();
    tu_write(tu_path(d, "c.json"),
             "{\"name\": \"t\", \"seed\": 3, \"task\": {\"type\": \"reverse\", \"alphabet\": \"abcdefg\", \"min_len\": 3, "
             "\"max_len\": 10, \"train_size\": 400, \"valid_size\": 10, \"test_size\": 10}, \"model\": {\"type\": \"rnn\", "
             "\"embedding\": 16, \"encoder_hidden\": 16, \"decoder_hidden\": 16, \"kq\": 8, \"heads\": 2}, \"train\": "
             "{\"epochs\": 3, \"batch_size\": 32, \"lr\": 0.01}}");
    reverse_sources(d);
    char targets[1100];
    snprintf(targets, sizeof targets, "--targets %s/trg.txt", d);
    for (size_t i = 0; i < sizeof VARIANTS / sizeof *VARIANTS; i++) {
        train_variant(d, VARIANTS[i]);
        check_model(d, tu_path(d, "run/model.bin"), tu_path(d, "src.txt"), targets, VARIANTS[i]);
        if (i >= 1 && i <= 5) { /* int8: the products outside the cells (bridge, attention, output), near ./translate --int8's */
            char what[200], extra[1200];
            snprintf(what, sizeof what, "int8 %s", VARIANTS[i]);
            snprintf(extra, sizeof extra, "--int8 --tol 0.25 %s", targets);
            check_model(d, tu_path(d, "run/model.bin"), tu_path(d, "src.txt"), extra, what);
        }
    }
    tu_rm_rf(d);
    free(d);
}

/* The Transformer: pre- and post-norm, sinusoidal and learned positions (past the table too),
 * ReLU and GELU, tied embeddings, stacks of different depths; and a translation model with a
 * BPE model, read and written by the decoder's own BPE. */
Test(onnx, every_transformer_variant_decodes_the_same_in_onnx_runtime, .timeout = 600) {
    static const char *const VARIANTS[] = {
        "norm=pre tie_embeddings=decoder",
        "norm=post positions=learned activation=gelu tie_embeddings=all encoder_layers=3 decoder_layers=1",
        "norm=pre positions=learned max_positions=8 heads=4",
    };
    char *d = tu_tmpdir();
    tu_write(tu_path(d, "c.json"),
             "{\"name\": \"t\", \"seed\": 4, \"task\": {\"type\": \"reverse\", \"alphabet\": \"abcdefg\", \"min_len\": 3, "
             "\"max_len\": 10, \"train_size\": 600, \"valid_size\": 10, \"test_size\": 10}, \"model\": {\"type\": "
             "\"transformer\", \"d_model\": 16, \"heads\": 2, \"ff\": 24, \"layers\": 2}, \"train\": {\"epochs\": 2, "
             "\"batch_size\": 32}}");
    reverse_sources(d);
    char targets[1100];
    snprintf(targets, sizeof targets, "--targets %s/trg.txt", d);
    for (size_t i = 0; i < sizeof VARIANTS / sizeof *VARIANTS; i++) {
        train_variant(d, VARIANTS[i]);
        check_model(d, tu_path(d, "run/model.bin"), tu_path(d, "src.txt"), targets, VARIANTS[i]);
        if (i == 0) /* int8: ONNX's quantised operators, their logits near ./translate --int8's */
            check_model(d, tu_path(d, "run/model.bin"), tu_path(d, "src.txt"), "--int8 --tol 0.25", "int8");
    }
    char *w = tu_word_corpus_dir(400, 40, false);
    tu_write(tu_path(d, "bpe.json"),
             "{\"name\": \"t\", \"seed\": 1, \"task\": {\"type\": \"translate\", \"data_dir\": \"%s\", \"train_prefix\": "
             "\"train\", \"valid_prefix\": \"val\", \"test_prefix\": \"test\", \"subword\": \"bpe\", \"bpe_merges\": 60}, "
             "\"model\": {\"type\": \"transformer\", \"d_model\": 16, \"heads\": 2, \"ff\": 24, \"layers\": 1}, \"train\": "
             "{\"epochs\": 2, \"batch_size\": 32}}",
             w);
    cr_assert_eq(tu_sh("%s/train --config %s/bpe.json --out %s/bpe > %s/train.txt 2>&1", tu_bin(), d, d, d), 0, "%s",
                 tu_slurp(tu_path(d, "train.txt"), NULL));
    check_model(d, tu_path(d, "bpe/model.bin"), tu_path(w, "test.de"), "", "a BPE translation model");
    /* a word model reads tokenised text */
    tu_write(tu_path(d, "words.json"),
             "{\"name\": \"t\", \"seed\": 1, \"task\": {\"type\": \"translate\", \"data_dir\": \"%s\", \"train_prefix\": "
             "\"train\", \"valid_prefix\": \"val\", \"test_prefix\": \"test\"}, \"model\": {\"type\": \"rnn\", \"bidirectional\": true, \"embedding\": "
             "16, \"encoder_hidden\": 16, \"decoder_hidden\": 32, \"attention\": \"additive\"}, \"train\": {\"epochs\": 6, "
             "\"batch_size\": 32, \"lr\": 0.01}}",
             w);
    cr_assert_eq(tu_sh("%s/train --config %s/words.json --out %s/words > %s/train.txt 2>&1", tu_bin(), d, d, d), 0, "%s",
                 tu_slurp(tu_path(d, "train.txt"), NULL));
    check_model(d, tu_path(d, "words/model.bin"), tu_path(w, "test.de"), "--tokenized", "a word model");
    tu_rm_rf(w);
    free(w);
    tu_rm_rf(d);
    free(d);
}

/* The reference decoder's SentencePiece (scripts/onnx/spm.js): the pieces and text of
 * ./subword encode|decode, byte for byte, on made-up text, Unicode stress lines and hand-made
 * pieces, for the committed models (unigram with byte fallback, BPE; identity rules) and, where
 * Debian's sentencepiece is installed, models trained here with nmt_nfkc and nfkc_cf rules; then a
 * translation model over such a model decodes raw text as ./translate does. */
Test(onnx, sentencepiece_text_is_read_and_written_as_translate_does, .timeout = 300) {
    if (tu_sh("command -v node > /dev/null") != 0) TU_SKIP("node is not installed (Debian: nodejs)");
    char *d = tu_tmpdir(), *w = tu_word_corpus_dir(600, 40, false);
    bool trained = tu_sh("command -v spm_train > /dev/null") == 0;
    if (trained)
        cr_assert_eq(tu_sh("cd %s && cat %s/train.de %s/train.en > both.txt && spm_train --input=both.txt "
                           "--model_prefix=nfkc --vocab_size=80 --hard_vocab_limit=false > /dev/null 2>&1 && spm_train "
                           "--input=both.txt --model_prefix=cf --model_type=bpe --vocab_size=400 --hard_vocab_limit=false "
                           "--byte_fallback=true --normalization_rule_name=nfkc_cf > /dev/null 2>&1",
                           d, w, w),
                     0);
    tu_write(tu_path(d, "extra.txt"), "  \xef\xbc\xa1\xef\xbd\x82\xef\xbd\x83  \xe2\x91\xa0 \xef\xac\x81 Hund\t\tKatze  \n"
                                      "\xc3\x85ngstr\xc3\xb6m \xc2\xbd \xef\xbd\xb6\xef\xbe\x80\xef\xbd\xb6\xef\xbe\x85\n");
    const char *models[] = {SPM_MODELS "/uni_id_bytes.model", SPM_MODELS "/bpe_id.model", "$D/nfkc.model", "$D/cf.model"};
    for (int m = 0; m < (trained ? 4 : 2); m++) {
        cr_assert_eq(tu_sh("D=%s; M=%s; G=%s; cat $G/text.txt $G/stress.txt %s/train.de $D/extra.txt > $D/in.txt && "
                           "%s/subword encode --model $M < $D/in.txt > $D/want.txt && "
                           "node scripts/onnx/spm.js encode $M < $D/in.txt > $D/got.txt && "
                           "cat $D/want.txt $G/pieces.txt > $D/p.txt && "
                           "%s/subword decode --model $M < $D/p.txt > $D/want_text.txt && "
                           "node scripts/onnx/spm.js decode $M < $D/p.txt > $D/got_text.txt",
                           d, models[m], SPM_MODELS, w, tu_bin(), tu_bin()),
                     0, "%s", models[m]);
        cr_expect(tu_same_file(tu_path(d, "want.txt"), tu_path(d, "got.txt")), "%s: pieces differ from ./subword's", models[m]);
        cr_expect(tu_same_file(tu_path(d, "want_text.txt"), tu_path(d, "got_text.txt")), "%s: text differs from ./subword's",
                  models[m]);
    }
    /* a Transformer over the nfkc model (or the committed unigram one): raw text in and out, 40 lines */
    tu_write(tu_path(d, "c.json"),
             "{\"name\": \"t\", \"seed\": 2, \"task\": {\"type\": \"translate\", \"data_dir\": \"%s\", \"train_prefix\": "
             "\"train\", \"valid_prefix\": \"val\", \"test_prefix\": \"test\", \"subword\": \"sentencepiece\", \"spm_model\": "
             "\"%s\"}, \"model\": {\"type\": \"transformer\", \"d_model\": 16, \"heads\": 2, \"ff\": 24, \"layers\": 1}, "
             "\"train\": {\"epochs\": 2, \"batch_size\": 32}}",
             w, trained ? tu_path(d, "nfkc.model") : SPM_MODELS "/uni_id_bytes.model");
    /* the logits are compared on references (a model over the committed unigram may end every
     * output at once); the extra lines' are two more of the corpus's */
    cr_assert_eq(tu_sh("D=%s; W=%s; %s/train --config $D/c.json --out $D/run > $D/train.txt 2>&1 && "
                       "head -n 38 $W/test.de | cat - $D/extra.txt > $D/src.txt && head -n 40 $W/test.en > $D/trg.txt",
                       d, w, tu_bin()),
                 0, "%s", tu_slurp(tu_path(d, "train.txt"), NULL));
    char targets[600];
    snprintf(targets, sizeof targets, "--targets %s", tu_path(d, "trg.txt"));
    check_model(d, tu_path(d, "run/model.bin"), tu_path(d, "src.txt"), targets, "a SentencePiece translation model");
    /* a line that is not UTF-8: refused by both, the others translated, exit 1 */
    tu_write(tu_path(d, "bad.txt"), "Ein Hund.\n\xff Hund\nZwei Katzen.\r\n");
    int rc_s2s = tu_sh("D=%s; %s/translate $D/run/model.bin --input $D/bad.txt > $D/s2s.txt 2> $D/s2s_err.txt", d, tu_bin());
    int rc_ort = tu_sh("D=%s; %s/export $D/run/model.bin --format onnx --out $D/x > /dev/null && "
                       "node scripts/onnx/translate.js $D/x --input $D/bad.txt > $D/ort.txt 2> $D/ort_err.txt",
                       d, tu_bin());
    cr_expect(rc_s2s == 1 && rc_ort == 1, "exit %d and %d", rc_s2s, rc_ort);
    cr_expect(tu_same_file(tu_path(d, "s2s.txt"), tu_path(d, "ort.txt")), "the other lines differ");
    cr_expect(tu_file_has(tu_path(d, "ort_err.txt"), "line 2: not valid UTF-8"), "%s", tu_slurp(tu_path(d, "ort_err.txt"), NULL));
    tu_rm_rf(w);
    free(w);
    tu_rm_rf(d);
    free(d);
}

static char *run_out(const char *d) { return tu_slurp(tu_path(d, "out.txt"), NULL); }

/* ./export --format onnx refuses what it cannot do, with a message, and writes nothing. */
Test(onnx, export_refuses_bad_input_and_overwrites_nothing, .timeout = 120) {
    char *d = tu_tmpdir();
    tu_write(tu_path(d, "c.json"),
             "{\"name\": \"t\", \"seed\": 3, \"task\": {\"type\": \"reverse\", \"train_size\": 64, \"valid_size\": 8, "
             "\"test_size\": 8}, \"model\": {\"embedding\": 8, \"encoder_hidden\": 8, \"decoder_hidden\": 8}, \"train\": "
             "{\"epochs\": 1}}");
    cr_assert_eq(tu_sh("%s/train --config %s/c.json --out %s/run > /dev/null 2>&1", tu_bin(), d, d), 0);
    char m[1024];
    snprintf(m, sizeof m, "%s/run/model.bin", d);
    /* not a model file */
    tu_write(tu_path(d, "not.bin"), "hello");
    cr_expect_eq(tu_sh("%s/export %s/not.bin --format onnx --out %s/x > %s/out.txt 2>&1", tu_bin(), d, d, d), 1);
    cr_expect(tu_file_has(tu_path(d, "out.txt"), "not.bin"), "%s", run_out(d));
    cr_expect_eq(tu_sh("test -e %s/x", d), 1, "nothing made");
    /* an existing folder, and the model itself */
    cr_assert_eq(tu_sh("mkdir %s/old && echo keep > %s/old/f", d, d), 0);
    cr_expect_eq(tu_sh("%s/export %s --format onnx --out %s/old > %s/out.txt 2>&1", tu_bin(), m, d, d), 2);
    cr_expect(tu_file_has(tu_path(d, "out.txt"), "exists"), "%s", run_out(d));
    cr_expect(tu_file_has(tu_path(d, "old/f"), "keep") && tu_sh("test $(ls %s/old | wc -l) = 1", d) == 0);
    cr_expect_eq(tu_sh("%s/export %s --format onnx --out %s > %s/out.txt 2>&1", tu_bin(), m, m, d), 2);
    cr_expect(tu_file_has(tu_path(d, "run/model.bin"), "S2SMODEL"), "the model untouched");
    /* usage */
    cr_expect_eq(tu_sh("%s/export %s --format tflite --out %s/y > %s/out.txt 2>&1", tu_bin(), m, d, d), 2);
    cr_expect(tu_file_has(tu_path(d, "out.txt"), "expected safetensors or onnx"), "%s", run_out(d));
    cr_expect_eq(tu_sh("%s/export %s --format onnx --bf16 --out %s/y > %s/out.txt 2>&1", tu_bin(), m, d, d), 2);
    cr_expect(tu_file_has(tu_path(d, "out.txt"), "float32"), "%s", run_out(d));
    cr_expect_eq(tu_sh("%s/export %s --int8 --out %s/y > %s/out.txt 2>&1", tu_bin(), m, d, d), 2);
    cr_expect(tu_file_has(tu_path(d, "out.txt"), "--int8 is for --format onnx"), "%s", run_out(d));
    cr_expect_eq(tu_sh("test -e %s/y", d), 1);
    /* a good one: the folder whole, no temporary left beside it */
    cr_assert_eq(tu_sh("%s/export %s --format onnx --out %s/ok > %s/out.txt 2>&1", tu_bin(), m, d, d), 0, "%s", run_out(d));
    cr_expect_eq(tu_sh("test -s %s/ok/encoder.onnx && test -s %s/ok/decoder.onnx && test -s %s/ok/s2s.json", d, d, d), 0);
    cr_expect_eq(tu_sh("ls %s | grep -q tmp", d), 1, "no temporary folder left");
    cJSON *j = tu_json_load(tu_path(d, "ok/s2s.json"));
    cr_expect_str_eq(cJSON_GetObjectItem(j, "format")->valuestring, "s2s-onnx");
    cr_expect_eq(cJSON_GetObjectItem(j, "format_version")->valueint, ONNX_EXPORT_VERSION);
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "trg_vocab")), cJSON_GetArraySize(cJSON_GetObjectItem(j, "src_vocab")));
    cJSON_Delete(j);
    /* the reference decoder and an export of another format version, or none */
    if (tu_sh("test -d scripts/onnx/node_modules/onnxruntime-node && command -v node > /dev/null") == 0) {
        cr_assert_eq(tu_sh("sed -i 's/\"format_version\":[^,]*,/\"format_version\": 99,/' %s/ok/s2s.json", d), 0);
        cr_expect_eq(tu_sh("echo abc | node scripts/onnx/translate.js %s/ok > %s/out.txt 2>&1", d, d), 1);
        char want[64];
        snprintf(want, sizeof want, "export format 99; this decoder reads format %d", ONNX_EXPORT_VERSION);
        cr_expect(tu_file_has(tu_path(d, "out.txt"), want), "%s", run_out(d));
        cr_expect_eq(tu_sh("echo abc | node scripts/onnx/translate.js %s/run > %s/out.txt 2>&1", d, d), 1);
        cr_expect(tu_file_has(tu_path(d, "out.txt"), "s2s.json"), "%s", run_out(d));
    }
    tu_rm_rf(d);
    free(d);
}

/* Whole files (their checksums right) whose configs make tensors of 10^10 floats and more while
 * the files hold one 2 x 2 tensor: refused by name, in little memory (the sizes a config asks
 * for are not allocated before the file shows them). */
Test(onnx, export_refuses_a_config_its_tensors_do_not_match, .timeout = 60) {
    char *d = tu_tmpdir();
    ParamStore ps;
    params_init(&ps);
    params_add(&ps, "encoder.embedding.weight", 2, (int[]){2, 2});
    cr_assert_eq(params_alloc(&ps, NULL), S2S_OK);
    const char *toks[4] = {"<pad>", "<sos>", "<eos>", "a"};
    const char *models[2][2] = {
        {"\"type\": \"rnn\", \"cell\": \"gru\", \"embedding\": 100000, \"encoder_hidden\": 100000, \"decoder_hidden\": 100000",
         "tensor \"encoder.embedding.weight\" is 2 x 2; its config's model makes it 4 x 100000"},
        {"\"type\": \"transformer\", \"d_model\": 65536, \"ff\": 1048576",
         "no tensor \"src_embed.weight\" (its config's model has one of 4 x 65536)"}};
#ifndef __SANITIZE_ADDRESS__ /* ASan reserves more address space than this */
    const char *limit = "ulimit -v 2000000; ";
#else
    const char *limit = "";
#endif
    for (int k = 0; k < 2; k++) {
        char cfg[512];
        snprintf(cfg, sizeof cfg, "{\"name\": \"big\", \"task\": {\"type\": \"reverse\"}, \"model\": {%s}}", models[k][0]);
        CkptSave save = {.config_json = cfg, .src_tokens = toks, .n_src = 4, .trg_tokens = toks, .n_trg = 4, .params = &ps};
        S2sError err;
        cr_assert_eq(ckpt_save(tu_path(d, "big.bin"), &save, &err), S2S_OK, "%s", err.msg);
        cr_expect_eq(tu_sh("%s%s/export %s/big.bin --format onnx --out %s/x > %s/out.txt 2>&1", limit, tu_bin(), d, d, d), 1,
                     "%s", run_out(d));
        cr_expect(tu_file_has(tu_path(d, "out.txt"), models[k][1]), "%s", run_out(d));
        cr_expect_eq(tu_sh("test -e %s/x", d), 1, "nothing made");
    }
    params_free(&ps);
    tu_rm_rf(d);
    free(d);
}
