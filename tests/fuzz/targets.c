/* targets.c — see targets.h. */
#include "targets.h"
#include "s2s/safetensors.h"
#include "s2s/server.h"

#include "s2s/attn_calc.h"
#include "s2s/multibleu.h"
#include "s2s/bpe.h"
#include "s2s/spm.h"
#include "s2s/sacrebleu.h"
#include "s2s/model.h"
#include "s2s/train_state.h"
#include "s2s/prepared.h"

#include <math.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static char *as_text(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

int fuzz_config(const uint8_t *data, size_t size) {
    char *s = as_text(data, size);
    Config c;
    config_defaults(&c);
    S2sError err;
    if (config_parse(&c, s, "fuzz.json", &err) == S2S_OK && config_check(&c, &err) == S2S_OK) {
        model_check_config(&c.model, "fuzz.json", &err);
        char *j = config_to_json(&c);
        Config d;
        config_defaults(&d);
        if (config_parse(&d, j, "resolved", &err) != S2S_OK) abort(); /* the resolved form always reads back */
        free(j);
    }
    /* and as a --set value */
    if (size < 200) {
        char set[256];
        snprintf(set, sizeof set, "model.attention=%s", s);
        config_set(&c, set, &err);
        snprintf(set, sizeof set, "%s", s);
        config_set(&c, set, &err);
    }
    free(s);
    return 0;
}

static void load_model(const uint8_t *data, size_t size) {
    Seq2Seq m;
    Config cfg;
    Vocab src, trg;
    S2sError err;
    if (model_load_memory(&m, &cfg, &src, &trg, data, size, "fuzz.bin", &err) == S2S_OK) {
        model_free(&m);
        vocab_free(&src);
        vocab_free(&trg);
    }
}

/* The bytes as they are, and with their last 4 bytes replaced by a valid checksum, so that
 * mutations reach the section parser instead of stopping at the CRC. */
int fuzz_model(const uint8_t *data, size_t size) {
    load_model(data, size);
    if (size >= 4) {
        uint8_t *fixed = malloc(size);
        memcpy(fixed, data, size);
        uLong crc = crc32(crc32(0L, Z_NULL, 0), fixed, (uInt)(size - 4));
        for (int k = 0; k < 4; k++) fixed[size - 4 + k] = (uint8_t)(crc >> (8 * k));
        load_model(fixed, size);
        free(fixed);
    }
    return 0;
}

/* A safetensors file image: parsed, and every value of every tensor read; its base64
 * metadata decoded. */
int fuzz_safetensors(const uint8_t *data, size_t size) {
    SafeTensors s;
    S2sError err;
    if (safetensors_from_memory(&s, data, size, "fuzz", &err) != S2S_OK) return 0;
    volatile float sink = 0;
    for (int i = 0; i < s.n; i++)
        for (size_t k = 0; k < s.tensors[i].numel && k < 4096; k++) sink += safetensors_value(&s.tensors[i], k);
    for (const cJSON *m = s.metadata ? s.metadata->child : NULL; m; m = m->next) {
        size_t n;
        free(safetensors_b64_decode(m->valuestring, &n));
    }
    (void)sink;
    safetensors_free(&s);
    return 0;
}

/* The line reader over the bytes, with a small limit so long lines and skips happen. */
static void read_lines(const uint8_t *data, size_t size) {
    if (!size) return;
    FILE *f = fmemopen((void *)data, size, "rb");
    if (!f) return;
    LineReader r;
    line_reader_init(&r, f, 16);
    const char *line;
    size_t len;
    for (LineStatus ls; (ls = line_read(&r, &line, &len)) == LINE_OK || ls == LINE_TOO_LONG;)
        if (ls == LINE_OK && len > 16) abort(); /* never more than the limit */
    line_reader_free(&r);
    fclose(f);
}

int fuzz_state(const uint8_t *data, size_t size) {
    char *s = as_text(data, size);
    TrainState st;
    Digest hash = {{0}};
    bool has;
    S2sError err;
    if (train_state_from_json(&st, &hash, &has, s, "fuzz", &err) == S2S_OK) {
        /* what was read back is in range, and writes back the same */
        if (st.epoch < 0 || st.batch < 0 || st.step < 0 || !(st.lr >= 0) || !isfinite(st.loss_sum)) abort();
        char *j = train_state_to_json(&st, &hash);
        TrainState back;
        Digest h2;
        if (train_state_from_json(&back, &h2, &has, j, "again", &err) != S2S_OK || back.step != st.step || !has ||
            !digest_equal(&h2, &hash))
            abort();
        free(j);
    }
    free(s);
    return 0;
}

int fuzz_attend(const uint8_t *data, size_t size) {
    char *s = as_text(data, size);
    AttnCalcInput in;
    S2sError err;
    if (attn_calc_parse(s, &in, &err) == S2S_OK) {
        AttnCalcResult r;
        if (attn_calc(&in, &r, &err) == S2S_OK) attn_calc_free(&r);
        attn_calc_input_free(&in);
    }
    free(s);
    return 0;
}

int fuzz_text(const uint8_t *data, size_t size) {
    read_lines(data, size);
    char *s = as_text(data, size);
    size_t n = strlen(s);
    if (utf8_valid(s, n)) {
        char *de = tok_normalize(s, "de"), *en = tok_normalize(s, "en");
        Vocab v;
        vocab_init(&v);
        vocab_add(&v, "ein");
        vocab_add(&v, "a");
        Config c;
        config_defaults(&c);
        c.task.type = TASK_TRANSLATE;
        int32_t *ids;
        int k;
        S2sError err;
        if (task_encode_source(&c.task, &v, s, false, &ids, &k, &err) == S2S_OK) free(ids);
        Bleu b;
        bleu_init(&b);
        bleu_add_text(&b, de, en);
        bleu_add_text(&b, s, de);
        BleuScore sc = bleu_score(&b);
        char line[256];
        bleu_format(&sc, line, sizeof line);
        bleu_free(&b);
        /* sacreBLEU's scores: every tokeniser, case-folded or not, chrF++ */
        char *hyp[2] = {s, de}, *ref[2] = {en, s}, **refs[2] = {ref, hyp};
        for (int tok = 0; tok < SB_TOK_COUNT; tok++) {
            SbBleuOpts bo = sb_bleu_defaults();
            bo.tokenize = (SbTokenize)tok;
            bo.lowercase = tok == SB_TOK_13A;
            SbBleu sb;
            sb_bleu(&bo, hyp, (char *const *const *)refs, 2, 2, &sb);
            char sline[512];
            sb_bleu_format(&bo, &sb, 2, 1, sline, sizeof sline);
        }
        SbChrfOpts co = sb_chrf_defaults();
        co.word_order = 2;
        co.lowercase = true;
        (void)sb_chrf(&co, hyp, (char *const *const *)refs, 2, 2);
        free(sb_lower(s));
        vocab_free(&v);
        free(de);
        free(en);
    }
    /* the reversal alphabet path takes any bytes */
    Config c;
    config_defaults(&c);
    Vocab v;
    vocab_init(&v);
    for (const char *p = c.task.alphabet; *p; p++) vocab_add(&v, (char[]){*p, '\0'});
    int32_t *ids;
    int k;
    S2sError err;
    if (task_encode_source(&c.task, &v, s, false, &ids, &k, &err) == S2S_OK) free(ids);
    vocab_free(&v);
    free(s);
    return 0;
}

int fuzz_bpe(const uint8_t *data, size_t size) {
    /* as a SentencePiece model file */
    Spm sp;
    S2sError serr;
    if (spm_parse(&sp, data, size, "fuzz", &serr) == S2S_OK) {
        free(spm_encode_text(&sp, "Ein Mann \xe2\x96\x81 fährt  Fahrrad. 😀 \xef\xbd\x88"));
        spm_free(&sp);
    }
    Bpe b;
    bpe_init(&b);
    S2sError err;
    if (bpe_parse(&b, (const char *)data, size, "fuzz", &err) == S2S_OK) {
        /* what it holds, on its own pieces' text and on a fixed sentence */
        const char *lines[] = {"Ein Mann \xe2\x96\x81 fährt  Fahrrad. 😀", b.n_chars ? bpe_piece(&b, BPE_FIRST_CHAR) : "x"};
        for (int k = 0; k < 2; k++) {
            int32_t *ids = NULL;
            int cap = 0, n = bpe_encode(&b, lines[k], &ids, &cap);
            free(bpe_decode(&b, ids, n));
            free(ids);
        }
    }
    bpe_free(&b);
    /* and as text to learn from */
    char *s = as_text(data, size);
    if (utf8_valid(s, strlen(s))) {
        Bpe l;
        bpe_init(&l);
        BpeLearnOpts o = {.merges = 50, .min_count = 1};
        int learned;
        char *lines[] = {s};
        if (bpe_learn(&l, lines, 1, &o, &learned, &err) == S2S_OK) {
            int32_t *ids = NULL;
            int cap = 0, n = bpe_encode(&l, s, &ids, &cap);
            free(bpe_decode(&l, ids, n));
            free(ids);
        }
        bpe_free(&l);
    }
    free(s);
    return 0;
}

/* ./serve's translate request parser (the body of POST /api/translate). */
int fuzz_serve(const uint8_t *data, size_t size) {
    char msg[400];
    (void)serve_check_request((const char *)data, size, 64, msg, sizeof msg);
    return 0;
}

/* A prepared data file: the header's length and CRC made to fit the bytes, so the body's parser
 * is reached (a file's own key, whatever it is, is the one asked for). */
int fuzz_prepared(const uint8_t *data, size_t size) {
    uint8_t *b = malloc(size ? size : 1);
    if (size) memcpy(b, data, size);
    Digest key = {{0}};
    enum { HEAD = 96, AT_PAYLOAD = 40, AT_CRC = 48 }; /* prepared.c's layout */
    if (size >= HEAD) { /* past the header's length and CRC, to the parsing behind them */
        uint64_t payload = size - HEAD;
        uint32_t crc = (uint32_t)crc32(0L, b + HEAD, (uInt)(size - HEAD));
        memcpy(key.b, b + 8, DIGEST_BYTES);
        memcpy(b + AT_PAYLOAD, &payload, 8);
        memcpy(b + AT_CRC, &crc, 4);
    }
    TaskData td;
    S2sError err;
    if (prepared_parse(b, size, &key, "fuzz", &td, &err) == S2S_OK) task_free(&td);
    free(b);
    return 0;
}
