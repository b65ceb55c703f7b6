/* s2s.c — the stable entry points (s2s.h) over the model loader and the translator. */
#include "s2s/s2s.h"
#include "s2s/model.h"
#include "s2s/translator.h"

#include <stdlib.h>
#include <string.h>

struct S2sModel {
    Seq2Seq m;
    Config cfg;
    Vocab src, trg;
    Tape tape;
};

S2sModel *s2s_open(const char *path, int threads, S2sError *err) {
    S2sModel *s = s2s_xcalloc(1, sizeof *s);
    if (model_load_file(&s->m, &s->cfg, &s->src, &s->trg, path, err)) {
        free(s);
        return NULL;
    }
    if (tape_init_engine(&s->tape, PRECISION_FP32, s->cfg.train.gemm, threads, "s2s_open", err)) {
        model_free(&s->m);
        vocab_free(&s->src);
        vocab_free(&s->trg);
        free(s);
        return NULL;
    }
    params_freeze(&s->m.params, false); /* the weights never change here */
    return s;
}

char *s2s_translate(S2sModel *s, const char *line, int beam, float alpha, S2sError *err) {
    if (beam < 1 || beam > TRANSLATE_MAX_NBEST) {
        s2s_fail(err, S2S_ERR_CONFIG, "s2s_translate: beam %d; 1 to %d", beam, TRANSLATE_MAX_NBEST);
        return NULL;
    }
    Translator t = {.model = &s->m, .cfg = &s->cfg, .src = &s->src, .trg = &s->trg, .tape = &s->tape, .beam = beam,
                    .n_best = 1, .alpha = alpha};
    TranslatedLine out;
    translator_run(&t, &line, 1, 0, &out);
    char *text = NULL;
    if (out.status) s2s_fail(err, out.status, "%s", out.error[0] ? out.error : "the line cannot be read");
    else text = strdup(out.text[0] ? out.text[0] : "");
    translator_free_results(&out, 1);
    return text;
}

void s2s_close(S2sModel *s) {
    if (!s) return;
    tape_free(&s->tape);
    model_free(&s->m);
    vocab_free(&s->src);
    vocab_free(&s->trg);
    free(s);
}
