/* load.c — a model, its config and vocabularies from a model file. */
#include "s2s/subword.h"
#include "s2s/checkpoint.h"
#include "s2s/model.h"
#include "model_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

S2sStatus model_vocab_from(Vocab *v, char *const *tokens, int n, const char *path, const char *which, S2sError *err) {
    vocab_init(v);
    const char *sp[TOK_SPECIALS] = {"<pad>", "<unk>", "<sos>", "<eos>"};
    if (n < TOK_SPECIALS) return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: %s vocabulary has %d entries", path, which, n);
    for (int i = 0; i < n; i++) {
        /* a token is one word of one line: a space or a line break inside one would shift
         * every output that contains it (and a NUL byte would cut it short) */
        size_t len = strlen(tokens[i]);
        bool plain = len > 0 && utf8_valid(tokens[i], len);
        for (size_t k = 0; plain && k < len; k++) plain = !text_is_space(tokens[i][k]);
        if (!plain)
            return s2s_fail(err, S2S_ERR_CORRUPT,
                            "%s: corrupt: %s vocabulary entry %d is not one word (empty, a space or line break, or "
                            "not UTF-8)",
                            path, which, i);
        if (i < TOK_SPECIALS && strcmp(tokens[i], sp[i]) != 0)
            return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: %s vocabulary entry %d is \"%s\", expected \"%s\"", path,
                            which, i, tokens[i], sp[i]);
        if (vocab_add(v, tokens[i]) != i)
            return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: %s vocabulary repeats \"%s\"", path, which, tokens[i]);
    }
    return S2S_OK;
}

/* A subword model from the file's bytes to a vocabulary, whose pieces it must be, in order. */
S2sStatus model_attach_subword(Vocab *w, Subword kind, const char *bytes, size_t len, const char *path, const char *which,
                                S2sError *err) {
    char origin[600];
    snprintf(origin, sizeof origin, "%s (its %s subword model)", path, which);
    SubwordModel *m;
    S2sStatus st = subword_from_bytes(&m, task_subword_kind(kind), bytes, len, origin, err);
    if (st) return S2S_ERR_CORRUPT;
    Vocab v;
    subword_vocab(m, &v);
    bool same = w->size == v.size;
    for (int i = 0; same && i < w->size; i++) same = !strcmp(w->tokens[i], v.tokens[i]);
    vocab_free(&v);
    if (!same) {
        subword_free(m);
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: the %s vocabulary is not the subword model's pieces", path, which);
    }
    subword_attach(w, m);
    return S2S_OK;
}

static S2sStatus load(Seq2Seq *m, Config *cfg, Vocab *src, Vocab *trg, Checkpoint ck, const char *path, S2sError *err);

S2sStatus model_load_file(Seq2Seq *m, Config *cfg, Vocab *src, Vocab *trg, const char *path, S2sError *err) {
    Checkpoint ck;
    S2sStatus st = ckpt_load(&ck, path, err);
    if (st) return st;
    return load(m, cfg, src, trg, ck, path, err);
}

S2sStatus model_load_fd(Seq2Seq *m, Config *cfg, Vocab *src, Vocab *trg, int fd, const char *path, S2sError *err) {
    Checkpoint ck;
    S2sStatus st = ckpt_load_fd(&ck, fd, path, err);
    if (st) return st;
    return load(m, cfg, src, trg, ck, path, err);
}

S2sStatus model_load_memory(Seq2Seq *m, Config *cfg, Vocab *src, Vocab *trg, const void *buf, size_t len,
                            const char *origin, S2sError *err) {
    Checkpoint ck;
    S2sStatus st = ckpt_from_memory(&ck, buf, len, origin, err);
    if (st) return st;
    return load(m, cfg, src, trg, ck, origin, err);
}

/* Takes ownership of ck. */
static S2sStatus load(Seq2Seq *m, Config *cfg, Vocab *src, Vocab *trg, Checkpoint ck, const char *path, S2sError *err) {
    S2sStatus st;
    memset(m, 0, sizeof *m);
    memset(src, 0, sizeof *src);
    memset(trg, 0, sizeof *trg);
    config_defaults(cfg);
    if ((st = config_parse(cfg, ck.config_json, path, err))) {
        /* a config this build cannot read is a corrupt (or newer) file here, not a usage error */
        st = S2S_ERR_CORRUPT;
        goto fail;
    }
    if ((st = model_check_config(&cfg->model, path, err))) {
        st = S2S_ERR_CORRUPT;
        goto fail;
    }
    if ((st = model_vocab_from(src, ck.src_tokens, ck.n_src, path, "source", err))) goto fail;
    if ((st = model_vocab_from(trg, ck.trg_tokens, ck.n_trg, path, "target", err))) goto fail;
    if ((cfg->task.subword != SUBWORD_NONE) != (ck.subword != NULL)) {
        st = s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: task.subword is %s but the file %s a subword model", path,
                      SUBWORD_NAMES[cfg->task.subword], ck.subword ? "holds" : "lacks");
        goto fail;
    }
    if (ck.subword_trg && !ck.subword) {
        st = s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: a target subword model (SUBT) without a source one (SUBW)", path);
        goto fail;
    }
    if (ck.subword) { /* one model for both sides, or each its own */
        const char *tb = ck.subword_trg ? ck.subword_trg : ck.subword;
        size_t tl = ck.subword_trg ? ck.subword_trg_len : ck.subword_len;
        if ((st = model_attach_subword(src, cfg->task.subword, ck.subword, ck.subword_len, path, "source", err)) ||
            (st = model_attach_subword(trg, cfg->task.subword, tb, tl, path, "target", err)))
            goto fail;
    }
    /* the config must not imply more weights than the file holds: no allocation beyond it */
    size_t held = 0;
    for (int i = 0; i < ck.n_tensors; i++) held += ck.tensors[i].size;
    if ((st = model_init_limited(m, &cfg->model, src->size, trg->size, held, err))) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        st = s2s_fail(err, S2S_ERR_CORRUPT, "%s: %s", path, msg);
        goto fail;
    }
    if ((st = ckpt_restore(&ck, &m->params, false, path, err))) goto fail;
    ckpt_free(&ck);
    return S2S_OK;
fail:
    ckpt_free(&ck);
    model_free(m);
    vocab_free(src);
    vocab_free(trg);
    return st;
}
