/* api_tools.c — s2s.h's tools: the attention calculator (./attend --json), corpus scores
 * (./bleu: multi-bleu.perl, sacreBLEU's BLEU and chrF, options as a JSON object) and subword
 * models (./subword learn, encode, decode). */
#include "s2s/attn_calc.h"
#include "s2s/bpe.h"
#include "s2s/json.h"
#include "s2s/multibleu.h"
#include "s2s/s2s.h"
#include "s2s/sacrebleu.h"
#include "s2s/spm.h"
#include "s2s/text.h"
#include "s2s/viz.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *s2s_attend(const char *input_json, S2sError *err) {
    if (!input_json) return s2s_fail(err, S2S_ERR_CONFIG, "attend: no input given"), NULL;
    AttnCalcInput in;
    if (attn_calc_parse(input_json, &in, err)) return NULL;
    AttnCalcResult r;
    char *out = NULL;
    if (!attn_calc(&in, &r, err)) {
        out = attn_calc_to_json(&r);
        attn_calc_free(&r);
    }
    attn_calc_input_free(&in);
    return out;
}

/* Labels as the other calls check their text: every entry given, UTF-8, under 1 MiB. */
static S2sStatus check_labels(const char *const *labels, int n, const char *what, S2sError *err) {
    for (int i = 0; labels && i < n; i++) {
        if (!labels[i]) return s2s_fail(err, S2S_ERR_CONFIG, "heatmap: %s[%d] is NULL: give every label, or none (NULL)", what, i);
        size_t len = strlen(labels[i]);
        if (len > TEXT_MAX_LINE || !utf8_valid(labels[i], len))
            return s2s_fail(err, S2S_ERR_DATA, "heatmap: %s[%d] is not UTF-8 text under 1 MiB", what, i);
    }
    return S2S_OK;
}

S2sStatus s2s_draw_heatmap(const char *path, const float *w, int rows, int cols, const char *const *row_labels,
                           const char *const *col_labels, const char *title, S2sError *err) {
    if (!path || !w) return s2s_fail(err, S2S_ERR_CONFIG, "heatmap: a file and the weights, both");
    if (rows < 1 || cols < 1 || rows > 4096 || cols > 4096)
        return s2s_fail(err, S2S_ERR_CONFIG, "heatmap: %d x %d cells: expected 1 to 4096 each way", rows, cols);
    const char *t[1] = {title};
    S2sStatus bad = check_labels(row_labels, rows, "row_labels", err);
    if (!bad) bad = check_labels(col_labels, cols, "col_labels", err);
    if (!bad) bad = check_labels(title ? t : NULL, 1, "title", err);
    if (bad) return bad;
    for (size_t i = 0; i < (size_t)rows * cols; i++)
        if (!isfinite(w[i])) return s2s_fail(err, S2S_ERR_NUMERIC, "heatmap: cell %zu is not a finite number", i);
    Heatmap hm = {w, rows, cols, row_labels, col_labels, title};
    Font *font = font_open(NULL); /* NULL: no labels, still a picture */
    S2sStatus st = heatmap_write_png(path, &hm, font, err);
    font_close(font);
    return st;
}

/* ---- corpus scores ---- */
typedef enum { SCORE_BLEU, SCORE_SACREBLEU, SCORE_CHRF } ScoreMetric;

typedef struct ScoreOpts {
    ScoreMetric metric;
    SbBleuOpts bo;
    SbChrfOpts co;
    int width;
    char norm[8]; /* multi-bleu: tok_normalize's language, or "" */
} ScoreOpts;

static S2sStatus opt_int(const cJSON *v, const char *key, int lo, int hi, int *out, S2sError *err) {
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi)
        return s2s_fail(err, S2S_ERR_CONFIG, "score options: \"%s\": expected a whole number from %d to %d", key, lo, hi);
    *out = (int)v->valuedouble;
    return S2S_OK;
}

static S2sStatus opt_bool(const cJSON *v, const char *key, bool *out, S2sError *err) {
    if (!cJSON_IsBool(v)) return s2s_fail(err, S2S_ERR_CONFIG, "score options: \"%s\": expected true or false", key);
    *out = cJSON_IsTrue(v);
    return S2S_OK;
}

/* v a string among names[0..n): its index into *out. */
static S2sStatus opt_name(const cJSON *v, const char *key, const char *const *names, int n, const char *expected, int *out,
                          S2sError *err) {
    for (int k = 0; cJSON_IsString(v) && k < n; k++)
        if (!strcmp(v->valuestring, names[k])) return *out = k, S2S_OK;
    return s2s_fail(err, S2S_ERR_CONFIG, "score options: \"%s\": expected %s", key, expected);
}

static S2sStatus score_option(ScoreOpts *o, const cJSON *v, S2sError *err) {
    static const char *const METRICS[] = {"bleu", "sacrebleu", "chrf"};
    const char *k = v->string;
    int i = 0;
    S2sStatus st = S2S_OK;
    if (!strcmp(k, "metric")) st = opt_name(v, k, METRICS, 3, "bleu, sacrebleu or chrf", &i, err), o->metric = (ScoreMetric)i;
    else if (!strcmp(k, "tokenize"))
        st = opt_name(v, k, SB_TOKENIZE_NAMES, SB_TOK_COUNT, "13a, intl, none or char", &i, err), o->bo.tokenize = (SbTokenize)i;
    else if (!strcmp(k, "smooth_method"))
        st = opt_name(v, k, SB_SMOOTH_NAMES, SB_SMOOTH_COUNT, "exp, none, floor or add-k", &i, err), o->bo.smooth = (SbSmooth)i;
    else if (!strcmp(k, "smooth_value")) {
        if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= 1e9))
            st = s2s_fail(err, S2S_ERR_CONFIG, "score options: \"smooth_value\": expected a number from 0 to 1e9");
        else o->bo.smooth_value = (float)v->valuedouble; /* a float, as ./bleu reads it */
    } else if (!strcmp(k, "lowercase")) st = opt_bool(v, k, &o->bo.lowercase, err), o->co.lowercase = o->bo.lowercase;
    else if (!strcmp(k, "word_order")) st = opt_int(v, k, 0, SB_MAX_ORDER, &o->co.word_order, err);
    else if (!strcmp(k, "char_order")) st = opt_int(v, k, 0, SB_MAX_ORDER, &o->co.char_order, err);
    else if (!strcmp(k, "beta")) st = opt_int(v, k, 0, 1000, &o->co.beta, err);
    else if (!strcmp(k, "whitespace")) st = opt_bool(v, k, &o->co.whitespace, err);
    else if (!strcmp(k, "eps_smoothing")) st = opt_bool(v, k, &o->co.eps_smoothing, err);
    else if (!strcmp(k, "width")) st = opt_int(v, k, 0, 17, &o->width, err);
    else if (!strcmp(k, "normalize")) {
        if (!cJSON_IsString(v) || !v->valuestring[0] || strlen(v->valuestring) >= sizeof o->norm)
            st = s2s_fail(err, S2S_ERR_CONFIG, "score options: \"normalize\": expected a language code (en, de, ...)");
        else snprintf(o->norm, sizeof o->norm, "%s", v->valuestring);
    } else
        st = s2s_fail(err, S2S_ERR_CONFIG,
                      "score options: unknown key \"%.60s\" (metric, tokenize, lowercase, smooth_method, smooth_value, "
                      "word_order, char_order, beta, whitespace, eps_smoothing, normalize, width)", k);
    return st;
}

/* The options object over ./bleu's defaults, with ./bleu's cross-checks. */
static S2sStatus score_options(const char *json, ScoreOpts *o, S2sError *err) {
    *o = (ScoreOpts){.metric = SCORE_BLEU, .bo = sb_bleu_defaults(), .co = sb_chrf_defaults(), .width = 1};
    if (!json || !json[0]) return S2S_OK;
    cJSON *root = cJSON_Parse(json);
    char dup[128];
    S2sStatus st = !root ? s2s_fail(err, S2S_ERR_CONFIG, "score options: not valid JSON")
                   : json_find_nul(json) ? s2s_fail(err, S2S_ERR_CONFIG, "score options: a string holds \\u0000 (a NUL)")
                   : !cJSON_IsObject(root) ? s2s_fail(err, S2S_ERR_CONFIG, "score options: expected a JSON object")
                   : json_find_duplicate(root, dup, sizeof dup)
                       ? s2s_fail(err, S2S_ERR_CONFIG, "score options: \"%s\" is given twice; keep one", dup)
                       : S2S_OK;
    bool bleu_only = false, chrf_only = false;
    for (const cJSON *v = root ? root->child : NULL; v && !st; v = v->next) {
        st = score_option(o, v, err);
        bleu_only |= !strncmp(v->string, "smooth_", 7) || !strcmp(v->string, "tokenize");
        chrf_only |= !strcmp(v->string, "word_order") || !strcmp(v->string, "char_order") || !strcmp(v->string, "beta") ||
                     !strcmp(v->string, "whitespace") || !strcmp(v->string, "eps_smoothing");
    }
    cJSON_Delete(root);
    if (st) return st;
    if (o->metric == SCORE_BLEU && (bleu_only || o->bo.lowercase))
        return s2s_fail(err, S2S_ERR_CONFIG, "score options: tokenize, lowercase and smooth_* are sacreBLEU's: "
                                             "\"metric\": \"sacrebleu\" (or \"chrf\" for lowercase)");
    if (o->metric != SCORE_SACREBLEU && o->bo.smooth != SB_SMOOTH_EXP)
        return s2s_fail(err, S2S_ERR_CONFIG, "score options: smooth_method is BLEU's: \"metric\": \"sacrebleu\"");
    if (o->metric != SCORE_CHRF && chrf_only)
        return s2s_fail(err, S2S_ERR_CONFIG, "score options: word_order, char_order, beta, whitespace and eps_smoothing "
                                             "are chrF's: \"metric\": \"chrf\"");
    if (o->norm[0] && o->metric != SCORE_BLEU)
        return s2s_fail(err, S2S_ERR_CONFIG, "score options: normalize is multi-bleu's (sacreBLEU tokenises by itself)");
    if (o->metric == SCORE_CHRF && o->co.char_order + o->co.word_order == 0)
        return s2s_fail(err, S2S_ERR_CONFIG, "score options: char_order 0 and word_order 0 leave chrF nothing to count");
    return S2S_OK;
}

/* The lines of one stream, each valid UTF-8 (the metrics' contract: text_read_lines checks it for ./bleu). */
static S2sStatus check_stream(const char *const *s, int n, const char *what, int r, S2sError *err) {
    for (int i = 0; i < n; i++) {
        if (!s[i]) return s2s_fail(err, S2S_ERR_DATA, "%s %d, line %d: none given", what, r, i + 1);
        size_t len = strlen(s[i]);
        if (len > TEXT_MAX_LINE) return s2s_fail(err, S2S_ERR_DATA, "%s %d, line %d: longer than 1 MiB", what, r, i + 1);
        if (!utf8_valid(s[i], len)) return s2s_fail(err, S2S_ERR_DATA, "%s %d, line %d: not UTF-8 text", what, r, i + 1);
    }
    return S2S_OK;
}

static char *score_json(double score, const char *line, bool signature) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "score", score);
    cJSON_AddStringToObject(o, "line", line);
    const char *eq = strstr(line, " = ");
    if (signature && eq) {
        char sig[256];
        snprintf(sig, sizeof sig, "%.*s", (int)(eq - line), line);
        cJSON_AddStringToObject(o, "signature", sig);
    }
    char *txt = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    S2S_ASSERT_MSG(txt, "cJSON_PrintUnformatted: out of memory");
    return txt;
}

char *s2s_score_corpus(const char *options, const char *const *hyps, const char *const *refs, int n, int nrefs,
                       S2sError *err) {
    ScoreOpts o;
    if (score_options(options, &o, err)) return NULL;
    if (n < 1 || n > 100000000 || !hyps || !refs)
        return s2s_fail(err, S2S_ERR_DATA, "score: no sentences to score"), NULL;
    if (nrefs < 1 || nrefs > 16 || (o.metric == SCORE_BLEU && nrefs != 1))
        return s2s_fail(err, S2S_ERR_CONFIG, "score: %d reference streams: expected 1%s", nrefs,
                        o.metric == SCORE_BLEU ? " (multi-bleu)" : " to 16"), NULL;
    if (check_stream(hyps, n, "hypotheses", 1, err)) return NULL;
    for (int r = 0; r < nrefs; r++)
        if (check_stream(refs + (size_t)r * n, n, "reference", r + 1, err)) return NULL;
    char line[512];
    if (o.metric == SCORE_BLEU) {
        Bleu b;
        bleu_init(&b);
        for (int i = 0; i < n; i++) {
            char *h = o.norm[0] ? tok_normalize(hyps[i], o.norm) : NULL;
            bleu_add_text(&b, h ? h : hyps[i], refs[i]);
            free(h);
        }
        BleuScore s = bleu_score(&b);
        bleu_free(&b);
        bleu_format(&s, line, sizeof line);
        return score_json(s.bleu, line, false);
    }
    char *const *rs[16];
    for (int r = 0; r < nrefs; r++) rs[r] = (char *const *)(refs + (size_t)r * n);
    if (o.metric == SCORE_SACREBLEU) {
        SbBleu s;
        sb_bleu(&o.bo, (char *const *)hyps, rs, nrefs, n, &s);
        sb_bleu_format(&o.bo, &s, nrefs, o.width, line, sizeof line);
        return score_json(s.score, line, true);
    }
    double f = sb_chrf(&o.co, (char *const *)hyps, rs, nrefs, n);
    sb_chrf_format(&o.co, f, nrefs, o.width, line, sizeof line);
    return score_json(f, line, true);
}

/* ---- subword models ---- */
struct S2sSubword {
    bool spm;
    Bpe b;
    Spm sp;
};

int s2s_subword_learn(const char *const *lines, int n, int merges, int vocab_size, int min_count, const char *out_path,
                      S2sError *err) {
    if (n < 1 || !lines) return s2s_fail(err, S2S_ERR_DATA, "subword learn: no lines to learn from"), -1;
    if (!out_path) return s2s_fail(err, S2S_ERR_CONFIG, "subword learn: no output file given"), -1;
    if ((merges > 0) == (vocab_size > 0) || merges < 0 || vocab_size < 0 || min_count < 0)
        return s2s_fail(err, S2S_ERR_CONFIG, "subword learn: merges or vocab_size, one of the two (> 0)"), -1;
    if (check_stream(lines, n, "input", 1, err)) return -1;
    BpeLearnOpts o = {.merges = merges, .vocab_size = vocab_size, .min_count = min_count ? min_count : 2};
    Bpe b;
    bpe_init(&b);
    int learned = 0;
    S2sStatus st = bpe_learn(&b, (char *const *)lines, (size_t)n, &o, &learned, err);
    if (!st) st = bpe_save(&b, out_path, err);
    bpe_free(&b);
    return st ? -1 : learned;
}

S2sSubword *s2s_subword_open(const char *path, S2sError *err) {
    if (!path) return s2s_fail(err, S2S_ERR_CONFIG, "subword: no model file given"), NULL;
    /* ours starts "s2s-bpe"; anything else is read as a SentencePiece model (whose reader
     * names a missing or unreadable file) */
    char head[8] = {0};
    FILE *f = fopen(path, "rb");
    bool ours = f && fread(head, 1, 7, f) == 7 && !memcmp(head, "s2s-bpe", 7);
    if (f) fclose(f);
    S2sSubword *s = s2s_xcalloc(1, sizeof *s);
    s->spm = !ours;
    S2sStatus st;
    if (ours) {
        bpe_init(&s->b);
        if ((st = bpe_load(&s->b, path, err))) bpe_free(&s->b);
    } else if ((st = spm_load(&s->sp, path, err)) == S2S_ERR_CORRUPT) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        s2s_fail(err, st, "%s: not a subword model: neither ours (\"s2s-bpe 1 ...\" on line 1) nor a SentencePiece model (%.300s)",
                 path, why);
    }
    if (st) {
        free(s);
        return NULL;
    }
    return s;
}

static S2sStatus check_text(const char *line, S2sError *err) {
    if (!line) return s2s_fail(err, S2S_ERR_DATA, "subword: no text given");
    size_t len = strlen(line);
    if (len > TEXT_MAX_LINE) return s2s_fail(err, S2S_ERR_DATA, "subword: a line longer than 1 MiB: not a sentence");
    if (!utf8_valid(line, len)) return s2s_fail(err, S2S_ERR_DATA, "subword: not UTF-8 text");
    if (memchr(line, '\n', len)) return s2s_fail(err, S2S_ERR_DATA, "subword: one line at a time (a newline inside)");
    return S2S_OK;
}

char *s2s_subword_encode(const S2sSubword *s, const char *line, S2sError *err) {
    if (check_text(line, err)) return NULL;
    if (s->spm) return spm_encode_text(&s->sp, line);
    int32_t *ids = NULL;
    int cap = 0, n = bpe_encode(&s->b, line, &ids, &cap);
    size_t len = 1;
    for (int k = 0; k < n; k++) len += strlen(bpe_piece(&s->b, ids[k])) + 1;
    char *out = s2s_xmalloc(len), *p = out;
    *p = '\0';
    for (int k = 0; k < n; k++) p += sprintf(p, "%s%s", k ? " " : "", bpe_piece(&s->b, ids[k]));
    free(ids);
    return out;
}

char *s2s_subword_decode(const S2sSubword *s, const char *pieces, S2sError *err) {
    if (check_text(pieces, err)) return NULL;
    if (s->spm) return spm_decode_text(&s->sp, pieces);
    char *copy = strdup(pieces), **toks = NULL;
    int cap = 0, n = text_split(copy, &toks, &cap);
    int32_t *ids = s2s_xmalloc((size_t)(n ? n : 1) * sizeof *ids);
    for (int k = 0; k < n; k++) ids[k] = bpe_piece_id(&s->b, toks[k]);
    char *text = bpe_decode(&s->b, ids, n);
    free(ids);
    free(toks);
    free(copy);
    return text;
}

void s2s_subword_free(S2sSubword *s) {
    if (!s) return;
    if (s->spm) spm_free(&s->sp);
    else bpe_free(&s->b);
    free(s);
}
