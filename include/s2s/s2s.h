/* s2s.h — the library's stable entry points, for programs that link libs2s (pkg-config s2s)
 * and for the Python package (python/s2s, over ctypes).
 *
 * A model file in, translations, scores and attention out; a config in, a trained run out;
 * the attention calculator, the metrics and the subword models of the programs. Everything
 * here keeps its signature within one S2S_ABI_VERSION: a change to a declaration below raises
 * it, and a binding checks s2s_abi_version() before its first call. The other headers under
 * s2s/ are the modules the programs are built from (docs/architecture.md): installed for
 * those who want the engine itself, and they may change between versions.
 *
 * Ownership: every S2s* object is made by one call and freed by its own *_free (or
 * s2s_close); a char * returned is malloc'd and the caller's (s2s_free_string); a const char *
 * belongs to the object it came from. Threads: one S2sModel serves one thread at a time (two
 * models, two threads: fine); results, subword models and trainings are independent objects;
 * s2s_training_stop alone may be called from any thread, and from a signal handler.
 * Errors: a call that fails returns NULL (or a status) and fills err with one sentence naming
 * the file, key or line. No call exits or aborts on input. */
#ifndef S2S_S2S_H
#define S2S_S2S_H

#include "s2s/common.h"

#define S2S_ABI_VERSION 2 /* 1: s2s_open, s2s_translate, s2s_close alone */

int s2s_abi_version(void);       /* S2S_ABI_VERSION of the library linked */
const char *s2s_version(void);   /* S2S_VERSION of the library linked */
void s2s_free_string(char *s);   /* a char * this API returned (free() of the library's libc) */

/* ---- models ---- */
typedef struct S2sModel S2sModel;

/* Loads a model file (model.bin, ./average's, ./import's). threads: GEMM threads (0: the
 * libraries' default). NULL with err set when the file cannot be read or is not a model. */
S2sModel *s2s_open(const char *path, int threads, S2sError *err);
/* The same with a precision as ./translate's: "fp32", "bf16" (--bf16) or "int8" (--int8). */
S2sModel *s2s_open_precision(const char *path, const char *precision, int threads, S2sError *err);
/* Translates one line of raw text as ./translate does (beam 1: greedy; alpha: beam search's
 * length normalisation); the output is malloc'd, NULL with err set when the line cannot be
 * read by the model's task. */
char *s2s_translate(S2sModel *m, const char *line, int beam, float alpha, S2sError *err);
void s2s_close(S2sModel *m);

char *s2s_model_config(const S2sModel *m); /* the model's resolved config as JSON */
long s2s_model_params(const S2sModel *m);  /* its parameter count */
const char *s2s_model_precision(const S2sModel *m); /* "fp32", "bf16" or "int8" */
bool s2s_model_has_attention(const S2sModel *m);
/* A model file as safetensors, as ./export writes it (bf16: bfloat16 weights). */
S2sStatus s2s_export(const char *model_path, const char *out_path, bool bf16, S2sError *err);
/* A model file as ONNX graphs, as ./export --format onnx [--int8] writes them: the folder
 * out_dir, made new (an existing one is refused, S2S_ERR_CONFIG) and whole, or not at all. */
S2sStatus s2s_export_onnx(const char *model_path, const char *out_dir, bool int8, S2sError *err);

/* ---- translating lines: one call, its results an object ---- */
typedef struct S2sTranslations S2sTranslations;
enum {
    S2S_TRANSLATE_ATTENTION = 1, /* each line's attention (s2s_translations_attention): greedy decoding's, or
                                  * under beam search the best hypothesis's, its tokens fed back */
    S2S_TRANSLATE_TOKENIZED = 2, /* a word model's lines are tokenised already (--tokenized) */
};
/* Translates lines[0..n) as ./translate (beam 1: greedy; n_best ≤ beam, ≤ 32; max_len 0: the
 * config's). A line the model cannot read is that line's error, not the call's; NULL (err
 * set) for bad arguments alone. */
S2sTranslations *s2s_translate_lines(S2sModel *m, const char *const *lines, int n, int beam, int n_best, float alpha,
                                     int max_len, int flags, S2sError *err);
int s2s_translations_count(const S2sTranslations *t);
/* line i's status (S2S_OK) and, when not, the reason ("" when it has none to give). */
S2sStatus s2s_translations_status(const S2sTranslations *t, int i, const char **reason);
int s2s_translations_hyps(const S2sTranslations *t, int i); /* hypotheses found: 0 for an empty line */
const char *s2s_translations_text(const S2sTranslations *t, int i, int hyp);   /* "" past the found */
float s2s_translations_score(const S2sTranslations *t, int i, int hyp);        /* beam: log p / len^alpha */
float s2s_translations_logprob(const S2sTranslations *t, int i, int hyp);      /* beam: log p, <eos> too */
/* Line i's attention (S2S_TRANSLATE_ATTENTION, a model with attention): n_out × n_src
 * weights, row k over the source when output token k was written; NULL when it has none. */
const float *s2s_translations_attention(const S2sTranslations *t, int i, int *n_out, int *n_src);
const char *s2s_translations_src_token(const S2sTranslations *t, int i, int k); /* k < n_src */
const char *s2s_translations_out_token(const S2sTranslations *t, int i, int k); /* k < n_out */
/* Every head of every layer (n_layers × n_heads × n_out × n_src), or NULL (one head). */
const float *s2s_translations_heads(const S2sTranslations *t, int i, int *n_layers, int *n_heads);
void s2s_translations_free(S2sTranslations *t);

/* ---- forced decoding: the log-probabilities of given targets ---- */
typedef struct S2sScores S2sScores;
/* Scores (sources[i], targets[i]) as ./translate --score; with logits, the model's logits
 * before each target token too (--logits). Per-pair errors as translations'. */
S2sScores *s2s_score_pairs(S2sModel *m, const char *const *sources, const char *const *targets, int n, bool logits,
                           S2sError *err);
int s2s_scores_count(const S2sScores *s);
S2sStatus s2s_scores_status(const S2sScores *s, int i, const char **reason);
double s2s_scores_total(const S2sScores *s, int i);
/* pair i's target tokens (n, "</s>" last), each one's log-probability */
int s2s_scores_tokens(const S2sScores *s, int i, const float **logprob);
const char *s2s_scores_piece(const S2sScores *s, int i, int k);
/* with logits: (n × V) row-major, and the ids of the source (n_src) and target (n) */
const float *s2s_scores_logits(const S2sScores *s, int i, int *V);
const int32_t *s2s_scores_ids(const S2sScores *s, int i, bool source, int *n);
void s2s_scores_free(S2sScores *s);

/* ---- training ---- */
typedef struct S2sTraining S2sTraining;
/* A log line as the run writes it to log.jsonl (JSON, one object), as it happens. */
typedef void (*S2sEventFn)(const char *json_line, void *user);
/* A new run of a config — a file (path) or a JSON text (config_json; exactly one of the two) —
 * with sets[0..n_sets) applied ("key=value" as ./train --set), into out_dir (NULL: runs/NAME);
 * overwrite as --overwrite. The config is read and checked here: its errors are this call's. */
S2sTraining *s2s_training_new(const char *path, const char *config_json, const char *const *sets, int n_sets,
                              const char *out_dir, bool overwrite, S2sError *err);
/* A run to resume from out_dir/last.bin; epochs > 0 extends it (--epochs). */
S2sTraining *s2s_training_resume(const char *out_dir, int epochs, S2sError *err);
/* Trains (blocking) and returns the status; events (or NULL) sees every log line. pause_at > 0
 * pauses once the run has made that many steps in all. Stopped by s2s_training_stop, the run
 * ends after its step with last.bin saved (s2s_training_summary: "interrupted"). Once. */
S2sStatus s2s_training_run(S2sTraining *t, long pause_at, S2sEventFn events, void *user, S2sError *err);
void s2s_training_stop(S2sTraining *t);              /* any thread, a signal handler too */
const char *s2s_training_dir(const S2sTraining *t);  /* the run's folder */
char *s2s_training_config(const S2sTraining *t);     /* the resolved config as JSON */
/* After run: {"epochs", "steps", "seconds", "interrupted", "paused", "early_stopped", "tested"}. */
char *s2s_training_summary(const S2sTraining *t);
void s2s_training_free(S2sTraining *t);

/* ---- the attention calculator, metrics, subwords ---- */
/* ./attend --json: the input JSON in, the result JSON out ({"heads": [{"Q", "K", "V", "scores",
 * "weights", "output"}...], "output"}); NULL with err for bad JSON or shapes. */
char *s2s_attend(const char *input_json, S2sError *err);
/* A corpus score as ./bleu prints it. options: a JSON object of ./bleu's options, all
 * optional: "metric" ("bleu": multi-bleu.perl on tokens, the default; "sacrebleu"; "chrf"),
 * "tokenize", "lowercase", "smooth_method", "smooth_value", "word_order", "char_order",
 * "beta", "whitespace", "eps_smoothing", "normalize", "width"; an unknown key or a value out
 * of range is an error naming it. refs: nrefs streams of n lines, refs[r * n + i]. Returns
 * JSON {"score", "line" (./bleu's line), and for sacreBLEU "signature"}. */
char *s2s_score_corpus(const char *options, const char *const *hyps, const char *const *refs, int n, int nrefs,
                       S2sError *err);

/* A heatmap as ./translate --heatmap draws one: w (rows × cols, row-major, values in 0..1),
 * the rows' and columns' labels (or NULL), a title (or NULL), as a PNG at path. */
S2sStatus s2s_draw_heatmap(const char *path, const float *w, int rows, int cols, const char *const *row_labels,
                           const char *const *col_labels, const char *title, S2sError *err);

typedef struct S2sSubword S2sSubword;
/* Learns a BPE model from lines[0..n) (merges, or vocab_size when > 0) into out_path, as
 * subword learn. Returns the merges learned, or -1 with err. */
int s2s_subword_learn(const char *const *lines, int n, int merges, int vocab_size, int min_count, const char *out_path,
                      S2sError *err);
S2sSubword *s2s_subword_open(const char *path, S2sError *err); /* a BPE or SentencePiece model file */
char *s2s_subword_encode(const S2sSubword *s, const char *line, S2sError *err); /* pieces, spaces between */
char *s2s_subword_decode(const S2sSubword *s, const char *pieces, S2sError *err);
void s2s_subword_free(S2sSubword *s);

#endif
