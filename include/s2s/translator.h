/* translator.h — translating lines of user text with a loaded model: encoding each line as
 * the model's task reads it, decoding in length-sorted batches (greedy or beam search), and
 * the outputs in the lines' order, with per-line errors and, on request, attention heatmaps.
 * The one decoding path of ./translate (and of anything else that translates text).
 *
 * A Translator borrows the model, its config and vocabularies, and a tape; it owns nothing.
 * Results (TranslatedLine) own their texts until translator_free_results. */
#ifndef S2S_TRANSLATOR_H
#define S2S_TRANSLATOR_H

#include "s2s/file.h"
#include "s2s/model.h"
#include "s2s/viz.h"

#include <cjson/cJSON.h>

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
    /* an ensemble: more models decoded with `model` as one (the mean of their log-
     * probabilities; beam search, greedy as a beam of 1), each with its own tape; the first
     * model's config and vocabularies read and write the text (translator_check_ensemble) */
    Seq2Seq *const *more;
    Tape *const *more_tapes;
    int n_more;
    bool score_logits;          /* translator_score: each pair's ids and logits too (one model) */
    bool want_attention;        /* one model: each line's attention and tokens in its result (beam: the best's) */
    const FileRole *inputs;     /* the files the caller reads, which no heatmap may be (translator_heatmaps) */
    int n_inputs;
} Translator;

/* What a front door asks of decoding: ./translate's options, ./serve's request, the C API's and
 * Python's arguments, a teacher's settings. */
typedef struct DecodeSettings {
    int beam;          /* 1: greedy */
    int n_best;        /* ≤ beam */
    float alpha;       /* beam search's length normalisation, as given */
    int max_len;       /* 0: the model's train.max_decode_len (whose 0 is 2 × each source + 10) */
    bool tokenized;    /* the lines are tokenised already */
    bool attention;    /* one model: each line's attention in its result (beam: the best hypothesis's) */
} DecodeSettings;

/* The one way a translator is made for a model (an ensemble's others and heatmaps are added
 * after): the model's own settings where the caller gives none, so that ./translate, ./serve,
 * the C API and Python decode a line alike. */
Translator translator_make(Seq2Seq *m, const Config *cfg, const Vocab *src, const Vocab *trg, Tape *tape,
                           const DecodeSettings *s);

/* Sets t up to draw heatmaps into dir (t->heatmap_dir; made when missing): a folder that holds
 * an earlier translation's pictures (NNNN*.png) is refused, since the two would mix, and no
 * picture may be one of inputs[0..n), kept by t (file_distinct, for each picture as it is
 * drawn): S2S_ERR_CONFIG naming the folder or the file. */
S2sStatus translator_heatmaps(Translator *t, const char *dir, const FileRole *inputs, int n, S2sError *err);

/* A line's attention as data (want_attention): row i the weights over the source tokens when
 * output token i was written (the last row <eos>'s, when the output ended). */
typedef struct LineAttention {
    char **src;                 /* (n_src) the source's tokens as the model read them */
    char **out;                 /* (n_out) the output's tokens, "<eos>" last when it ended */
    int n_src, n_out;
    float *w;                   /* (n_out × n_src); a Transformer's: the last decoder layer's heads' mean */
    int n_layers, n_heads;      /* 0 when the model has one head */
    float *heads;               /* (n_layers × n_heads × n_out × n_src): each head of each layer (a
                                   Transformer's decoder layers' cross-attention, teacher-forced on
                                   the output; a multihead RNN decoder: one layer), or NULL */
} LineAttention;

typedef struct TranslatedLine {
    char *text[TRANSLATE_MAX_NBEST]; /* the n_best outputs, best first (NULL past the found ones);
                                        text[0] is "" for an empty or unreadable line */
    float score[TRANSLATE_MAX_NBEST];    /* beam search: log p / length^alpha, what ranks them */
    float logprob[TRANSLATE_MAX_NBEST];  /* beam search: log p (with <eos>) */
    int n_hyps;                      /* the outputs the model found: 0 for an empty or unreadable
                                        line (text[0] "" and no score: none was computed) */
    S2sStatus status;                /* S2S_OK, or why the line gave no translation */
    char error[512];                 /* the reason, when status is not S2S_OK */
    char warning[512];               /* a heatmap that could not be drawn, or "" */
    LineAttention *attention;        /* with want_attention and a model that has attention, else NULL */
} TranslatedLine;

/* Translates lines[0..n): lines[i] NULL is a line the caller could not read (status
 * S2S_ERR_DATA, no error text: the caller knows why). first_line numbers the lines for the
 * heatmaps from 0, as every output that numbers lines does (n-best lists, --logits): line
 * first_line + i is DIR/NNNN.png. out has n entries. */
void translator_run(const Translator *t, const char *const *lines, int n, long first_line, TranslatedLine *out);
void translator_free_results(TranslatedLine *out, int n);
void translator_free_attention(LineAttention *a);
/* A line's attention as JSON: {"source", "target", "weights": [row][source]} and, with heads,
 * "layers": [layer][head][row][source] (./translate --attention, ./serve's answers). */
cJSON *translator_attention_json(const LineAttention *a);

/* Whether a model may join an ensemble with the first: the same task (type, languages) and
 * vocabularies, and the same subword model; else one line naming `path` and the first
 * difference (S2S_ERR_DATA). Architectures may differ (an RNN with a Transformer). */
S2sStatus translator_check_ensemble(const Config *first, const Vocab *src, const Vocab *trg, const Config *cfg,
                                    const Vocab *src2, const Vocab *trg2, const char *path, S2sError *err);

/* Forced decoding of (source, target) pairs: each target's pieces as the model writes them,
 * with the log-probability of each (<eos> last) and their sum. */
typedef struct ScoredLine {
    double total;
    float *token;          /* (n) */
    char **piece;          /* (n) the target's tokens as text; the last "</s>" */
    int n;
    int32_t *src_ids, *ids; /* with score_logits: the source's ids (n_src) and the target's (n, <eos> last) */
    int n_src, V;
    float *logits;         /* with score_logits: (n × V) the model's logits before each target token */
    S2sStatus status;      /* S2S_OK, or why the pair has no score */
    char error[512];
} ScoredLine;

/* Scores pairs[0..n) (sources and targets NULL: lines the caller could not read). A target
 * with a token outside the vocabulary (a word model's <unk>) is an error naming it: its score
 * would be that of <unk>. out has n entries. */
void translator_score(const Translator *t, const char *const *sources, const char *const *targets, int n, ScoredLine *out);
void translator_free_scores(ScoredLine *out, int n);

#endif
