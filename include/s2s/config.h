/* config.h — the run configuration: task, model and training settings, read from JSON
 * (cJSON) with every key checked against one schema table.
 *
 * A Config is a plain value (fixed-size strings, no pointers), so it can be copied, and
 * written back as the resolved config (defaults included) beside a run and inside model
 * files. A key with a fixed set of values (a choice) is read into an enum once, at load, and
 * written back as its name: code switches on the enum (-Wswitch-enum names a case it
 * forgets) and never compares strings. Errors name the file, the key (and its line and
 * column where the file has it), and what was expected; unknown keys are errors with a
 * suggestion. */
#ifndef S2S_CONFIG_H
#define S2S_CONFIG_H

#include "s2s/common.h"
#include "s2s/engine.h" /* Precision, GemmLib */

#include <stdint.h>

#define CONFIG_STR 256

/* The choices; each has its names in a table below, in the order of its values. */
typedef enum TaskType { TASK_REVERSE, TASK_TRANSLATE } TaskType;
typedef enum Subword { SUBWORD_NONE, SUBWORD_BPE, SUBWORD_SENTENCEPIECE } Subword;
typedef enum Sides { SIDES_BOTH, SIDES_SOURCE, SIDES_TARGET } Sides;
typedef enum ModelType { MODEL_RNN, MODEL_TRANSFORMER } ModelType;
typedef enum ModelCell { MODEL_CELL_GRU, MODEL_CELL_LSTM } ModelCell;
typedef enum NormPlace { NORM_POST, NORM_PRE } NormPlace;
typedef enum Positions { POSITIONS_SINUSOIDAL, POSITIONS_LEARNED } Positions;
typedef enum Activation { ACTIVATION_RELU, ACTIVATION_GELU } Activation;
typedef enum EmbeddingType { EMBEDDING_LEARNED, EMBEDDING_ONEHOT } EmbeddingType;
typedef enum AttnKind { ATTN_DUMMY, ATTN_MEANPOOL, ATTN_DOT, ATTN_SCALED_DOT, ATTN_GENERAL, ATTN_ADDITIVE, ATTN_MULTIHEAD } AttnKind;
#define ATTN_KIND_COUNT 7
typedef enum Combine { COMBINE_CONCAT, COMBINE_LUONG } Combine;
typedef enum Tie { TIE_NONE, TIE_DECODER, TIE_ALL } Tie;
typedef enum Optimizer { OPTIMIZER_ADAM, OPTIMIZER_SGD, OPTIMIZER_ADAMW } Optimizer;
typedef enum Metric { METRIC_EXACT_MATCH, METRIC_TOKEN_ACCURACY, METRIC_TF_TOKEN_ACCURACY, METRIC_VALID_LOSS, METRIC_BLEU } Metric;
typedef enum LrSchedule { LR_CONSTANT, LR_LINEAR, LR_COSINE, LR_INVERSE_SQRT } LrSchedule;
typedef enum OverlapSum { OVERLAP_AUTO, OVERLAP_ON, OVERLAP_OFF } OverlapSum;
typedef enum TeacherMix { TEACHER_REPLACE, TEACHER_ADD } TeacherMix;

/* The names of the choices, as configs, model files and messages spell them. */
extern const char *const TASK_TYPE_NAMES[];
extern const char *const SUBWORD_NAMES[];
extern const char *const SIDES_NAMES[];
extern const char *const MODEL_TYPE_NAMES[];
extern const char *const MODEL_CELL_NAMES[];
extern const char *const NORM_PLACE_NAMES[];
extern const char *const POSITIONS_NAMES[];
extern const char *const ACTIVATION_NAMES[];
extern const char *const EMBEDDING_TYPE_NAMES[];
extern const char *const ATTN_KIND_NAMES[];
extern const char *const COMBINE_NAMES[];
extern const char *const TIE_NAMES[];
extern const char *const OPTIMIZER_NAMES[];
extern const char *const PRECISION_NAMES[];
extern const char *const GEMM_LIB_NAMES[];
extern const char *const METRIC_NAMES[];
extern const char *const LR_SCHEDULE_NAMES[];
extern const char *const OVERLAP_SUM_NAMES[];
extern const char *const TEACHER_MIX_NAMES[];

typedef struct ConfigTask {
    TaskType type;
    /* reverse */
    char alphabet[128];     /* the characters to reverse (ASCII) */
    int min_len, max_len;   /* source lengths, inclusive */
    int train_size, valid_size, test_size;
    int data_seed;          /* the dataset's own seed, independent of the training seed */
    bool source_markers;    /* wrap sources in <sos> ... <eos> too */
    /* translate */
    char data_dir[CONFIG_STR];
    char src_lang[8], trg_lang[8];
    char train_prefix[64], valid_prefix[64], test_prefix[64];
    int min_freq, max_vocab, max_train_len;
    int train_max_lines;    /* each training corpus read up to its first this many lines (0: all) */
    float max_length_ratio; /* training pairs whose longer side is longer than this × the shorter are dropped (0: none) */
    bool dedup;             /* training pairs seen before are dropped */
    int subword_sample;     /* bpe: pairs BPE is learned from (a sample of the training pairs when they are more) */
    Subword subword;        /* none: the files' words; bpe: raw text in byte-pair pieces */
    int bpe_merges;         /* merges learned from the training text (per model) */
    bool bpe_joint;         /* one model for both languages (a shared vocabulary), or one each */
    int bpe_vocab_size;     /* instead: the pieces in all, specials and bytes included (0: bpe_merges) */
    float bpe_dropout;      /* BPE-dropout in training: merges left out with this probability (0: off) */
    Sides bpe_dropout_sides; /* on both sides' text, or on one */
    char spm_model[CONFIG_STR]; /* sentencepiece: the .model file (spm_train's) */
    char bpe_model[CONFIG_STR]; /* bpe: a model from ./subword learn for both sides, or "": learn one */
    char cache_dir[CONFIG_STR]; /* prepared data (prepared.h), reused while files and settings stay; "": none */
    /* sequence-level distillation (distill.h): the training sources' targets are a teacher's translations */
    char teacher[CONFIG_STR];   /* model files, comma-separated (an ensemble), that translate the training sources; "": none */
    int teacher_beam;           /* their beam */
    float teacher_alpha;        /* their length normalisation */
    Precision teacher_precision; /* their products' operands (bf16, int8: faster, outputs may differ slightly) */
    int teacher_nbest;          /* translations a source (the beam's n best), each a training pair */
    char teacher_output[CONFIG_STR]; /* a file of translations of the training sources, one a source line (instead of teacher) */
    TeacherMix teacher_mix;     /* replace: the teacher's targets only; add: the original pairs too */
} ConfigTask;

/* task.train_prefix as a list of training corpora: "train", or "big:1,indomain:4" (prefixes, each
 * with an optional sampling weight, 1 when not given). */
#define TASK_MAX_CORPORA 8
typedef struct TrainCorpora {
    int n;
    char prefix[TASK_MAX_CORPORA][64];
    float weight[TASK_MAX_CORPORA]; /* an epoch takes weight × the corpus's pairs (≥ 0) */
} TrainCorpora;

/* The corpora of t->train_prefix into *c; false for a malformed list, with err naming the key.
 * Distilling with teacher_mix add, a last corpus "teacher" follows: the first corpus's sources
 * with the teacher's translations (weight 1). */
bool config_train_corpora(const ConfigTask *t, TrainCorpora *c, S2sError *err);
/* The same without the teacher's corpus: the corpora of the files themselves. */
bool config_original_corpora(const ConfigTask *t, TrainCorpora *c, S2sError *err);
/* Whether any corpus is weighted other than 1 (an epoch then samples; else it takes each pair once). */
bool config_corpora_weighted(const TrainCorpora *c);
/* Whether the task distils: a teacher to translate its training sources, or their translations given. */
bool config_distills(const ConfigTask *t);
#define TEACHER_CORPUS "teacher" /* the name of the teacher's corpus (teacher_mix add) */

typedef struct ConfigModel {
    ModelType type;         /* rnn (the encoder-decoder of the course) or transformer */
    ModelCell cell;
    bool bidirectional;
    int layers;
    EmbeddingType embedding_type; /* learned, or onehot (frozen identity, size = vocabulary) */
    int embedding, encoder_hidden, decoder_hidden;
    float dropout;          /* on the embeddings */
    AttnKind attention;
    int kq;                 /* key/query size of scaled_dot */
    int heads;              /* multihead: heads (each decoder_hidden / heads wide) */
    Combine combine;        /* concat: W[a;h]+b; luong: W_o tanh(W_c[a;h]) */
    float init_range;       /* parameters uniform in [-init_range, init_range] */
    Tie tie_embeddings;     /* decoder: its input embedding is the output layer's weight; all: the source's too */
    /* transformer (layers, heads and dropout are the keys above) */
    int d_model, ff;        /* model width; feed-forward width */
    int encoder_layers, decoder_layers; /* each stack's layers (0: `layers`): a deep encoder, a shallow decoder */
    NormPlace norm;         /* post (the original) or pre */
    Positions positions;    /* sinusoidal, or learned (up to max_positions) */
    int max_positions;
    Activation activation;  /* of the feed-forward block */
} ConfigModel;

typedef struct ConfigTrain {
    Optimizer optimizer;
    float lr;
    float adam_beta1, adam_beta2, adam_eps; /* Adam's and AdamW's */
    float weight_decay;     /* adam and sgd: + wd·p in the gradient (L2); adamw: p −= lr·wd·p (decoupled) */
    int batch_size;         /* sentences per batch (at most) */
    int batch_tokens;       /* padded positions per batch, at most (0: sentences only) */
    int loss_chunk;         /* output layer + loss this many rows at a time in training (0: all) */
    float label_smoothing;  /* the training loss's ε (0: plain cross-entropy) */
    float ema_decay;        /* the weights' moving average, validated and saved as model.bin (0: none) */
    bool recompute;         /* recompute in backward what a small product gives, instead of keeping it */
    OverlapSum overlap_sum; /* under mpirun: sum gradients over the ranks while backward runs */
    int sum_bucket_kb;      /* ... in buckets of about this size */
    int epochs;
    long max_steps;         /* the run ends after this many optimizer steps (0: no limit) */
    int save_every;         /* steps between resumable checkpoints within an epoch (0: per epoch only) */
    float clip;             /* global gradient norm limit (0: none) */
    int log_every;          /* steps between log lines */
    int threads;            /* GEMM threads (0: leave the libraries' choice) */
    bool test_each_epoch;   /* log test metrics every epoch too (never used to select) */
    Precision precision;    /* the GEMMs' operand type (gemm.h) */
    GemmLib gemm;           /* who multiplies float32 (gemm.h) */
    Metric metric;          /* what picks the best checkpoint */
    int patience;           /* validations without improvement before stopping (0: never) */
    int valid_every;        /* steps between validations within an epoch (0: at epochs' ends only) */
    int valid_max_lines;    /* validations score the split's first this many pairs (0: all) */
    int keep_last, keep_best; /* validated checkpoints kept in checkpoints/ (0: none) */
    float lr_decay;         /* multiply lr on a plateau (1: never) */
    LrSchedule lr_schedule; /* lr over the run (optim.h) */
    int warmup_steps;       /* lr rises linearly over the first steps (0: none) */
    int max_decode_len;     /* greedy decoding limit (0: 2 × source length + 10) */
    int eval_batch_size;
} ConfigTrain;

typedef struct Config {
    char name[64];          /* the run's name: runs/<name>/ */
    long seed;              /* initialisation, dropout and batch order */
    ConfigTask task;
    ConfigModel model;
    ConfigTrain train;
    char path[CONFIG_STR];  /* the file it came from, for messages ("" when built) */
} Config;

/* The defaults of every key. */
void config_defaults(Config *c);
/* A config argument as users type it: an existing path, else configs/NAME, else
 * configs/NAME.json, else (a bare name) the installed configs beside the program
 * (PREFIX/share/s2s/configs/NAME or NAME.json, for PREFIX/bin/s2s-train). Writes the path to
 * use into out. */
void config_find_file(const char *name, char *out, size_t n);
/* Levenshtein distance of two short strings (99 past 63 bytes): the did-you-mean of keys and
 * config names. */
int config_edit_distance(const char *a, const char *b);
/* Reads a JSON file over the defaults. */
S2sStatus config_load(Config *c, const char *path, S2sError *err);
/* The keys the config file at path (when not NULL) or a --set assignment (sets) gives but that
 * change nothing under c (config_key_applies: source_markers in a translation, cell in a
 * Transformer), as one "warning: …" line each into out; returns how many. */
int config_idle_keys(const Config *c, const char *path, const char *const *sets, int n_sets, char *out, size_t n);
/* The same for a run's config.json (a folder s2s manages): a regular file required, and a FIFO
 * planted there never blocks (file_read_regular). */
S2sStatus config_load_run(Config *c, const char *path, S2sError *err);
/* Parses JSON text over the current values; `origin` names it in messages. */
S2sStatus config_parse(Config *c, const char *json, const char *origin, S2sError *err);
/* `key=value` by dotted path ("model.attention") or by a unique leaf name ("attention").
 * The value is JSON, or a bare string. */
S2sStatus config_set(Config *c, const char *assignment, S2sError *err);
/* Cross-field checks (min_len ≤ max_len, ...). Model-specific checks live in the model. */
S2sStatus config_check(const Config *c, S2sError *err);
/* The resolved config as JSON text (malloc'd, caller frees): the keys that apply to it
 * (config_key_applies) and no others, so a translation's config holds no alphabet; read
 * back over the defaults, it is the same config in every key that changes anything. */
char *config_to_json(const Config *c);
/* Every key of the schema, for docs and tests: path, type, meaning. */
typedef struct ConfigKeyInfo {
    const char *path;
    const char *type;
    const char *help;
    const char *const *names; /* a choice's names (n_names of them), or NULL */
    int n_names;
} ConfigKeyInfo;
/* The key's value in c as JSON text, into buf. */
void config_key_value(const Config *c, int i, char *buf, size_t n);
/* The index of the first key whose value differs between a and b (among the keys that apply to
 * either), or −1 when all agree. */
int config_first_difference(const Config *a, const Config *b);
/* Key i's value from src into dst. */
void config_key_copy(Config *dst, const Config *src, int i);
int config_key_count(void);
/* The index of the key at a dotted path ("model.attention"), or −1. */
int config_key_index(const char *path);
/* The index of the key a --set names: a dotted path, or a unique leaf name ("attention"); −1
 * for none or an ambiguous leaf. */
int config_key_named(const char *name);
/* Whether key i changes anything under c: a transformer has no recurrent cell, a word
 * vocabulary no BPE merges, SGD no Adam moments. */
bool config_key_applies(const Config *c, int i);
ConfigKeyInfo config_key_info(int i);
/* Whether key i can change a number a run computes: false for how a run is carried out
 * (threads, how its ranks sum gradients), logged and kept (log_every, save_every, keep_last,
 * keep_best), which give the same weights and scores bit for bit. */
bool config_key_changes_numbers(int i);

#endif
