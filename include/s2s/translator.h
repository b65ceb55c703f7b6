/* translator.h — translating lines of user text with a loaded model: encoding each line as
 * the model's task reads it, decoding in length-sorted batches (greedy or beam search), and
 * the outputs in the lines' order, with per-line errors and, on request, attention heatmaps.
 * The one decoding path of ./translate (and of anything else that translates text).
 *
 * A Translator borrows the model, its config and vocabularies, and a tape; it owns nothing.
 * Results (TranslatedLine) own their texts until translator_free_results. */
#ifndef S2S_TRANSLATOR_H
#define S2S_TRANSLATOR_H

#include "s2s/model.h"
#include "s2s/viz.h"

#define TRANSLATE_MAX_NBEST 32

typedef struct Translator {
    Seq2Seq *model;
    const Config *cfg;          /* the model's config (its task reads the lines) */
    const Vocab *src, *trg;
    Tape *tape;
    int max_len;                /* 0: the config's, else 2 × source + 10 */
    int beam, n_best;           /* beam 1: greedy; n_best ≤ beam, ≤ TRANSLATE_MAX_NBEST */
    float alpha;                /* beam search's length normalisation */
    bool tokenized;             /* translation: the lines are tokenised already */
    const char *heatmap_dir;    /* greedy: DIR/NNNN.png per line (NNNN: the line's number), or NULL */
    const char *heatmap_name;   /* the pictures' titles start with it (the model file) */
    Font *font;                 /* for the heatmaps' labels, or NULL */
} Translator;

typedef struct TranslatedLine {
    char *text[TRANSLATE_MAX_NBEST]; /* the n_best outputs, best first (NULL past the found ones);
                                        text[0] is "" for an empty or unreadable line */
    float score[TRANSLATE_MAX_NBEST];
    S2sStatus status;                /* S2S_OK, or why the line gave no translation */
    char error[512];                 /* the reason, when status is not S2S_OK */
    char warning[512];               /* a heatmap that could not be drawn, or "" */
} TranslatedLine;

/* Translates lines[0..n): lines[i] NULL is a line the caller could not read (status
 * S2S_ERR_DATA, no error text: the caller knows why). first_line numbers the lines for the
 * heatmaps (line first_line + i + 1). out has n entries. */
void translator_run(const Translator *t, const char *const *lines, int n, long first_line, TranslatedLine *out);
void translator_free_results(TranslatedLine *out, int n);

#endif
