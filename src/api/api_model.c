/* api_model.c — s2s.h's models: a model file loaded as ./translate loads it, its lines
 * translated and its pairs scored by the translator (the one decoding path of the programs),
 * the results kept in objects read by index. */
#include "s2s/checkpoint.h"
#include "s2s/model.h"
#include "s2s/onnx.h"
#include "s2s/s2s.h"
#include "s2s/text.h"
#include "s2s/translator.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct S2sModel {
    Seq2Seq m;
    Config cfg;
    Vocab src, trg;
    Tape tape;
    Precision precision;
};

struct S2sTranslations {
    TranslatedLine *out;
    int n;
};

struct S2sScores {
    ScoredLine *out;
    int n;
};

int s2s_abi_version(void) { return S2S_ABI_VERSION; }
const char *s2s_version(void) { return S2S_VERSION; }
void s2s_free_string(char *s) { free(s); }

S2sModel *s2s_open_precision(const char *path, const char *precision, int threads, S2sError *err) {
    if (!path) return s2s_fail(err, S2S_ERR_CONFIG, "s2s_open: no model file given"), NULL;
    int p = 0;
    while (precision && PRECISION_NAMES[p] && strcmp(PRECISION_NAMES[p], precision)) p++;
    if (precision && !PRECISION_NAMES[p])
        return s2s_fail(err, S2S_ERR_CONFIG, "precision \"%.40s\": expected fp32, bf16 or int8", precision), NULL;
    if (threads < 0 || threads > 4096)
        return s2s_fail(err, S2S_ERR_CONFIG, "threads %d: expected 0 (the default) to 4096", threads), NULL;
    S2sModel *s = s2s_xcalloc(1, sizeof *s);
    s->precision = (Precision)p;
    if (model_load_file(&s->m, &s->cfg, &s->src, &s->trg, path, err)) {
        free(s);
        return NULL;
    }
    if (tape_init_engine(&s->tape, s->precision, s->cfg.train.gemm, threads, path, err)) {
        model_free(&s->m);
        vocab_free(&s->src);
        vocab_free(&s->trg);
        free(s);
        return NULL;
    }
    params_freeze(&s->m.params, s->precision == PRECISION_BF16); /* the weights never change here */
    return s;
}

S2sModel *s2s_open(const char *path, int threads, S2sError *err) { return s2s_open_precision(path, NULL, threads, err); }

void s2s_close(S2sModel *s) {
    if (!s) return;
    tape_free(&s->tape);
    model_free(&s->m);
    vocab_free(&s->src);
    vocab_free(&s->trg);
    free(s);
}

char *s2s_model_config(const S2sModel *s) { return config_to_json(&s->cfg); }
long s2s_model_params(const S2sModel *s) { return (long)params_numel(&s->m.params); }
const char *s2s_model_precision(const S2sModel *s) { return PRECISION_NAMES[s->precision]; }
bool s2s_model_has_attention(const S2sModel *s) { return model_has_attention(&s->m); }

S2sStatus s2s_export(const char *model_path, const char *out_path, bool bf16, S2sError *err) {
    if (!model_path || !out_path) return s2s_fail(err, S2S_ERR_CONFIG, "export: a model file and an output file, both");
    return ckpt_export(model_path, out_path, bf16, err);
}

S2sStatus s2s_export_onnx(const char *model_path, const char *out_dir, bool int8, S2sError *err) {
    if (!model_path || !out_dir) return s2s_fail(err, S2S_ERR_CONFIG, "export: a model file and an output folder, both");
    return onnx_export(model_path, out_dir, int8, err);
}

static Translator translator_of(S2sModel *s, const DecodeSettings *ds) {
    return translator_make(&s->m, &s->cfg, &s->src, &s->trg, &s->tape, ds);
}

/* lines[0..n) with those past ./translate's bound (1 MiB) as NULL, which the translator takes
 * for a line the caller could not read; the caller then says why. */
static const char **bounded(const char *const *lines, int n) {
    const char **b = s2s_xmalloc((size_t)(n ? n : 1) * sizeof *b);
    for (int i = 0; i < n; i++) b[i] = lines[i] && strlen(lines[i]) <= TEXT_MAX_LINE ? lines[i] : NULL;
    return b;
}

/* Arguments a caller (a binding) may get wrong: an error, never an assert. */
static S2sStatus check_lines(const char *who, const void *lines, int n, S2sError *err) {
    if (n < 0 || n > 100000000) return s2s_fail(err, S2S_ERR_CONFIG, "%s: %d lines", who, n);
    if (n > 0 && !lines) return s2s_fail(err, S2S_ERR_CONFIG, "%s: no lines given", who);
    return S2S_OK;
}

S2sTranslations *s2s_translate_lines(S2sModel *s, const char *const *lines, int n, int beam, int n_best, float alpha,
                                     int max_len, int flags, S2sError *err) {
    if (check_lines("s2s_translate_lines", lines, n, err)) return NULL;
    if (beam < 1 || beam > TRANSLATE_MAX_NBEST)
        return s2s_fail(err, S2S_ERR_CONFIG, "beam %d: expected 1 to %d", beam, TRANSLATE_MAX_NBEST), NULL;
    if (n_best < 1 || n_best > beam)
        return s2s_fail(err, S2S_ERR_CONFIG, "n_best %d: expected 1 to the beam (%d)", n_best, beam), NULL;
    if (max_len < 0 || max_len > 100000)
        return s2s_fail(err, S2S_ERR_CONFIG, "max_len %d: expected 0 (the config's) to 100000", max_len), NULL;
    if (!(alpha >= 0.0f && alpha <= 100.0f))
        return s2s_fail(err, S2S_ERR_CONFIG, "alpha %g: expected 0 to 100", (double)alpha), NULL;
    bool attention = flags & S2S_TRANSLATE_ATTENTION, tokenized = flags & S2S_TRANSLATE_TOKENIZED;
    if (flags & ~(S2S_TRANSLATE_ATTENTION | S2S_TRANSLATE_TOKENIZED))
        return s2s_fail(err, S2S_ERR_CONFIG, "flags %#x: unknown bits", (unsigned)flags), NULL;
    if (tokenized && s->src.sub)
        return s2s_fail(err, S2S_ERR_CONFIG, "tokenized: this model reads raw text (a subword model)"), NULL;
    Translator t = translator_of(s, &(DecodeSettings){beam, n_best, alpha, max_len, tokenized, attention});
    S2sTranslations *r = s2s_xcalloc(1, sizeof *r);
    r->n = n;
    r->out = s2s_xcalloc((size_t)(n ? n : 1), sizeof *r->out);
    const char **b = bounded(lines, n);
    translator_run(&t, b, n, 0, r->out);
    for (int i = 0; i < n; i++)
        if (!b[i])
            snprintf(r->out[i].error, sizeof r->out[i].error, "%s", lines[i] ? "longer than 1 MiB: not a sentence" : "no line (NULL)");
    free(b);
    return r;
}

char *s2s_translate(S2sModel *s, const char *line, int beam, float alpha, S2sError *err) {
    S2sTranslations *r = s2s_translate_lines(s, &line, 1, beam, 1, alpha, 0, 0, err);
    if (!r) return NULL;
    char *text = NULL;
    const char *why;
    if (s2s_translations_status(r, 0, &why)) s2s_fail(err, r->out[0].status, "%s", why[0] ? why : "the line cannot be read");
    else text = strdup(r->out[0].text[0]);
    s2s_translations_free(r);
    return text;
}

/* Line i of a result, or NULL for an index out of range (the accessors then answer "none"). */
static const TranslatedLine *line_at(const S2sTranslations *r, int i) { return r && i >= 0 && i < r->n ? &r->out[i] : NULL; }

int s2s_translations_count(const S2sTranslations *r) { return r ? r->n : 0; }

S2sStatus s2s_translations_status(const S2sTranslations *r, int i, const char **reason) {
    const TranslatedLine *l = line_at(r, i);
    if (reason) *reason = l ? l->error : "no such line";
    return l ? l->status : S2S_ERR_CONFIG;
}

int s2s_translations_hyps(const S2sTranslations *r, int i) {
    const TranslatedLine *l = line_at(r, i);
    return l ? l->n_hyps : 0;
}

const char *s2s_translations_text(const S2sTranslations *r, int i, int h) {
    const TranslatedLine *l = line_at(r, i);
    return l && h >= 0 && h < TRANSLATE_MAX_NBEST && l->text[h] ? l->text[h] : "";
}

float s2s_translations_score(const S2sTranslations *r, int i, int h) {
    const TranslatedLine *l = line_at(r, i);
    return l && h >= 0 && h < l->n_hyps ? l->score[h] : 0.0f;
}

float s2s_translations_logprob(const S2sTranslations *r, int i, int h) {
    const TranslatedLine *l = line_at(r, i);
    return l && h >= 0 && h < l->n_hyps ? l->logprob[h] : 0.0f;
}

const float *s2s_translations_attention(const S2sTranslations *r, int i, int *n_out, int *n_src) {
    const TranslatedLine *l = line_at(r, i);
    const LineAttention *a = l ? l->attention : NULL;
    if (n_out) *n_out = a ? a->n_out : 0;
    if (n_src) *n_src = a ? a->n_src : 0;
    return a ? a->w : NULL;
}

const char *s2s_translations_src_token(const S2sTranslations *r, int i, int k) {
    const TranslatedLine *l = line_at(r, i);
    const LineAttention *a = l ? l->attention : NULL;
    return a && k >= 0 && k < a->n_src ? a->src[k] : NULL;
}

const char *s2s_translations_out_token(const S2sTranslations *r, int i, int k) {
    const TranslatedLine *l = line_at(r, i);
    const LineAttention *a = l ? l->attention : NULL;
    return a && k >= 0 && k < a->n_out ? a->out[k] : NULL;
}

const float *s2s_translations_heads(const S2sTranslations *r, int i, int *n_layers, int *n_heads) {
    const TranslatedLine *l = line_at(r, i);
    const LineAttention *a = l ? l->attention : NULL;
    bool has = a && a->heads;
    if (n_layers) *n_layers = has ? a->n_layers : 0;
    if (n_heads) *n_heads = has ? a->n_heads : 0;
    return has ? a->heads : NULL;
}

void s2s_translations_free(S2sTranslations *r) {
    if (!r) return;
    translator_free_results(r->out, r->n);
    free(r->out);
    free(r);
}

S2sScores *s2s_score_pairs(S2sModel *s, const char *const *sources, const char *const *targets, int n, bool logits,
                           S2sError *err) {
    if (check_lines("s2s_score_pairs", sources, n, err) || check_lines("s2s_score_pairs", targets, n, err)) return NULL;
    Translator t = translator_of(s, &(DecodeSettings){.beam = 1, .n_best = 1, .alpha = 1.0f});
    t.score_logits = logits;
    S2sScores *r = s2s_xcalloc(1, sizeof *r);
    r->n = n;
    r->out = s2s_xcalloc((size_t)(n ? n : 1), sizeof *r->out);
    const char **bs = bounded(sources, n), **bt = bounded(targets, n);
    for (int i = 0; i < n; i++)
        if (!bs[i] || !bt[i]) bs[i] = bt[i] = NULL;
    translator_score(&t, bs, bt, n, r->out);
    for (int i = 0; i < n; i++)
        if (!bs[i]) snprintf(r->out[i].error, sizeof r->out[i].error, "%s", "a source or target longer than 1 MiB (or NULL)");
    free(bs);
    free(bt);
    return r;
}

static const ScoredLine *pair_at(const S2sScores *r, int i) { return r && i >= 0 && i < r->n ? &r->out[i] : NULL; }

int s2s_scores_count(const S2sScores *r) { return r ? r->n : 0; }

S2sStatus s2s_scores_status(const S2sScores *r, int i, const char **reason) {
    const ScoredLine *l = pair_at(r, i);
    if (reason) *reason = l ? l->error : "no such pair";
    return l ? l->status : S2S_ERR_CONFIG;
}

double s2s_scores_total(const S2sScores *r, int i) {
    const ScoredLine *l = pair_at(r, i);
    return l ? l->total : 0.0;
}

int s2s_scores_tokens(const S2sScores *r, int i, const float **logprob) {
    const ScoredLine *l = pair_at(r, i);
    if (logprob) *logprob = l ? l->token : NULL;
    return l ? l->n : 0;
}

const char *s2s_scores_piece(const S2sScores *r, int i, int k) {
    const ScoredLine *l = pair_at(r, i);
    return l && k >= 0 && k < l->n ? l->piece[k] : NULL;
}

const float *s2s_scores_logits(const S2sScores *r, int i, int *V) {
    const ScoredLine *l = pair_at(r, i);
    if (V) *V = l && l->logits ? l->V : 0;
    return l ? l->logits : NULL;
}

const int32_t *s2s_scores_ids(const S2sScores *r, int i, bool source, int *n) {
    const ScoredLine *l = pair_at(r, i);
    const int32_t *ids = l ? (source ? l->src_ids : l->ids) : NULL;
    if (n) *n = ids ? (source ? l->n_src : l->n) : 0;
    return ids;
}

void s2s_scores_free(S2sScores *r) {
    if (!r) return;
    translator_free_scores(r->out, r->n);
    free(r->out);
    free(r);
}
