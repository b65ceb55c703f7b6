/* model_import.c — a model file from weights in a safetensors file (trained here and exported, or
 * trained elsewhere under the same parameter names): every name, shape and value checked
 * against the model the config and vocabularies make. */
#include "model_internal.h"
#include "s2s/checkpoint.h"
#include "s2s/file.h"
#include "s2s/safetensors.h"
#include "s2s/subword.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VOCAB_FILE_MAX ((size_t)256 << 20)

/* Tokens from a JSON array of strings (the metadata) or a file of one token a line. */
static S2sStatus tokens_from_json(const char *txt, char ***tokens, int *n, const char *o, const char *key, S2sError *err) {
    cJSON *a = cJSON_Parse(txt);
    int k = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : -1;
    const cJSON *x;
    bool strings = k >= 0;
    cJSON_ArrayForEach(x, a) strings &= cJSON_IsString(x);
    if (!strings) {
        cJSON_Delete(a);
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: metadata \"%s\" is not a JSON array of strings", o, key);
    }
    *tokens = s2s_xcalloc((size_t)(k ? k : 1), sizeof **tokens);
    *n = 0;
    cJSON_ArrayForEach(x, a) {
        size_t len = strlen(x->valuestring);
        (*tokens)[*n] = s2s_xmalloc(len + 1);
        memcpy((*tokens)[(*n)++], x->valuestring, len + 1);
    }
    cJSON_Delete(a);
    return S2S_OK;
}

static S2sStatus tokens_from_file(const char *path, char ***tokens, int *n, S2sError *err) {
    char *buf;
    size_t len;
    S2sStatus st = file_read_all(path, VOCAB_FILE_MAX, &buf, &len, err);
    if (st) return st;
    int lines = 0;
    for (size_t i = 0; i < len; i++) lines += buf[i] == '\n';
    if (len && buf[len - 1] != '\n') lines++;
    *tokens = s2s_xcalloc((size_t)(lines ? lines : 1), sizeof **tokens);
    *n = 0;
    for (char *p = buf; p < buf + len;) {
        char *nl = memchr(p, '\n', (size_t)(buf + len - p));
        size_t l = nl ? (size_t)(nl - p) : (size_t)(buf + len - p);
        if (l && p[l - 1] == '\r') l--;
        (*tokens)[*n] = s2s_xmalloc(l + 1);
        memcpy((*tokens)[*n], p, l);
        (*tokens)[(*n)++][l] = 0;
        p += (nl ? (size_t)(nl - p) + 1 : l);
    }
    free(buf);
    return S2S_OK;
}

static void tokens_free(char **t, int n) {
    for (int i = 0; t && i < n; i++) free(t[i]);
    free(t);
}

static void shape_text(const int64_t *s64, const int *s32, int nd, char *buf, size_t n) {
    size_t used = 0;
    buf[0] = 0;
    for (int d = 0; d < nd && used < n; d++)
        used += (size_t)snprintf(buf + used, n - used, "%s%lld", d ? " x " : "", s64 ? (long long)s64[d] : (long long)s32[d]);
    if (!nd) snprintf(buf, n, "a scalar");
}

static bool same_shape(const SafeTensor *t, const Tensor *p) {
    if (t->ndim != p->ndim) return false;
    for (int d = 0; d < p->ndim; d++)
        if (t->shape[d] != p->shape[d]) return false;
    return true;
}

/* Each parameter from its tensor (converted to float32, every value finite); every tensor of
 * the file a parameter, or a tied embedding equal to the weight it is tied to. */
static S2sStatus fill_params(Seq2Seq *m, const SafeTensors *sf, const char *o, S2sError *err) {
    ParamStore *ps = &m->params;
    char a[96], b[96];
    for (int i = 0; i < ps->count; i++) {
        const Param *p = &ps->items[i];
        const SafeTensor *t = safetensors_find(sf, p->name);
        shape_text(NULL, p->t->shape, p->t->ndim, b, sizeof b);
        if (!t)
            return s2s_fail(err, S2S_ERR_DATA, "%s: no tensor \"%s\" (the config's model has it, %s)", o, p->name, b);
        shape_text(t->shape, NULL, t->ndim, a, sizeof a);
        if (!same_shape(t, p->t))
            return s2s_fail(err, S2S_ERR_DATA, "%s: tensor \"%s\" is %s; the config and vocabularies make it %s", o, p->name,
                            a, b);
        for (size_t k = 0; k < t->numel; k++) {
            float v = safetensors_value(t, k);
            if (!isfinite(v))
                return s2s_fail(err, S2S_ERR_DATA, "%s: tensor \"%s\" holds %s at element %zu", o, p->name,
                                isnan(v) ? "NaN" : "an infinity", k);
            tensor_write(p->t)[k] = v;
        }
    }
    const char *tied[2];
    int n_tied = model_tied_names(&m->cfg, tied);
    for (int i = 0; i < sf->n; i++) {
        const SafeTensor *t = &sf->tensors[i];
        if (params_find(ps, t->name)) continue;
        bool alias = false;
        for (int k = 0; k < n_tied; k++) alias |= !strcmp(t->name, tied[k]);
        if (!alias)
            return s2s_fail(err, S2S_ERR_DATA, "%s: tensor \"%.80s\" is no parameter of the config's model", o, t->name);
        /* PyTorch's state_dict lists a tied weight under each name: the same values */
        const Tensor *w = m->out.w;
        bool same = same_shape(t, w);
        for (size_t k = 0; same && k < t->numel; k++) same = safetensors_value(t, k) == tensor_item(w, k);
        if (!same)
            return s2s_fail(err, S2S_ERR_DATA,
                            "%s: tensor \"%s\" differs from the output layer's weight, to which model.tie_embeddings "
                            "ties it",
                            o, t->name);
    }
    return S2S_OK;
}

S2sStatus model_import(const ModelImport *im, S2sError *err) {
    const char *o = im->path;
    FileRole ins[] = {{"the safetensors file", im->path},
                      {"the config", im->cfg && im->cfg->path[0] ? im->cfg->path : NULL},
                      {"the source vocabulary", im->src_vocab},
                      {"the target vocabulary", im->trg_vocab},
                      {"the subword model", im->subword}};
    S2sStatus st = file_distinct(ins, 5, &(FileRole){"the output", im->out}, 1, err);
    if (st) return st;
    SafeTensors sf;
    if ((st = safetensors_load(&sf, o, err))) return st;
    Config cfg;
    Seq2Seq m;
    memset(&m, 0, sizeof m);
    Vocab src = {0}, trg = {0};
    char **ts = NULL, **tt = NULL;
    int ns = 0, nt = 0;
    unsigned char *sub = NULL, *sub_t = NULL;
    size_t sub_len = 0, sub_t_len = 0;
    char *conf = NULL;
    const char *meta_conf = safetensors_meta(&sf, CKPT_META_CONFIG);
    if (im->cfg) {
        cfg = *im->cfg;
    } else if (meta_conf) {
        config_defaults(&cfg);
        if (config_parse(&cfg, meta_conf, o, err)) {
            st = S2S_ERR_CORRUPT; /* a config this build cannot read: the file's fault */
            goto out;
        }
    } else {
        st = s2s_fail(err, S2S_ERR_CONFIG, "%s: no \"%s\" in its metadata: give --config", o, CKPT_META_CONFIG);
        goto out;
    }
    if ((st = model_check_config(&cfg.model, im->cfg ? cfg.path : o, err))) goto out;
    /* vocabularies: files given, else the metadata */
    const char *vf[2] = {im->src_vocab, im->trg_vocab}, *vk[2] = {CKPT_META_SRC_VOCAB, CKPT_META_TRG_VOCAB},
               *side[2] = {"source", "target"};
    char ***tok[2] = {&ts, &tt};
    int *cnt[2] = {&ns, &nt};
    Vocab *voc[2] = {&src, &trg};
    for (int s = 0; s < 2; s++) {
        const char *meta = safetensors_meta(&sf, vk[s]);
        if (vf[s]) st = tokens_from_file(vf[s], tok[s], cnt[s], err);
        else if (meta) st = tokens_from_json(meta, tok[s], cnt[s], o, vk[s], err);
        else st = s2s_fail(err, S2S_ERR_CONFIG, "%s: no \"%s\" in its metadata: give --%s-vocab FILE", o, vk[s], s ? "trg" : "src");
        if (!st) st = model_vocab_from(voc[s], *tok[s], *cnt[s], vf[s] ? vf[s] : o, side[s], err);
        if (st) goto out;
    }
    /* the subword model: a file given (both sides), else the metadata's */
    if (im->subword) {
        char *buf;
        if ((st = file_read_all(im->subword, (size_t)64 << 20, &buf, &sub_len, err))) goto out;
        sub = (unsigned char *)buf;
    } else {
        const char *k[2] = {CKPT_META_SUBWORD, CKPT_META_SUBWORD_TRG};
        unsigned char **dst[2] = {&sub, &sub_t};
        size_t *len[2] = {&sub_len, &sub_t_len};
        for (int s = 0; s < 2; s++) {
            const char *b64 = safetensors_meta(&sf, k[s]);
            if (b64 && !(*dst[s] = safetensors_b64_decode(b64, len[s]))) {
                st = s2s_fail(err, S2S_ERR_CORRUPT, "%s: metadata \"%s\" is not base64", o, k[s]);
                goto out;
            }
        }
    }
    if ((cfg.task.subword != SUBWORD_NONE) != (sub != NULL)) {
        st = s2s_fail(err, S2S_ERR_CONFIG, "%s: task.subword is %s, and %s", im->cfg ? cfg.path : o,
                      SUBWORD_NAMES[cfg.task.subword],
                      sub ? "a subword model was given: task.subword must say its kind"
                          : "no subword model came (--subword FILE, or the metadata's)");
        goto out;
    }
    if (sub && ((st = model_attach_subword(&src, cfg.task.subword, (const char *)sub, sub_len, o, "source", err)) ||
                (st = model_attach_subword(&trg, cfg.task.subword, (const char *)(sub_t ? sub_t : sub),
                                           sub_t ? sub_t_len : sub_len, o, "target", err))))
        goto out;
    /* no allocation out of proportion to the file (a config of a far larger model is refused
     * here; one that differs by some tensors gets them named below) */
    size_t held = 0;
    for (int i = 0; i < sf.n; i++) held += sf.tensors[i].numel;
    if ((st = model_init_limited(&m, &cfg.model, src.size, trg.size, 2 * held + ((size_t)1 << 20), err))) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        st = s2s_fail(err, S2S_ERR_DATA, "%s: %s", o, msg);
        goto out;
    }
    if ((st = fill_params(&m, &sf, o, err))) goto out;
    conf = config_to_json(&cfg);
    CkptSave save = {conf,
                     (const char *const *)src.tokens, src.size,
                     (const char *const *)trg.tokens, trg.size,
                     &m.params, false, NULL, (const char *)sub, sub_len, (const char *)sub_t, sub_t_len, false};
    st = ckpt_save(im->out, &save, err);
out:
    free(conf);
    free(sub);
    free(sub_t);
    tokens_free(ts, ns);
    tokens_free(tt, nt);
    vocab_free(&src);
    vocab_free(&trg);
    model_free(&m);
    safetensors_free(&sf);
    return st;
}
