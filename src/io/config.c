/* config.c — the schema table, JSON parsing with positions, --set, resolved output. */
#include "s2s/config.h"
#include "s2s/file.h"
#include "s2s/json.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <limits.h>

/* K_NAME: a string that becomes a file name (runs/<name>): no '/', no "." or "..".
 * K_ENUM: one of a table of names, kept as the enum value of its index. */
typedef enum KeyType { K_STR, K_INT, K_LONG, K_FLOAT, K_BOOL, K_NAME, K_ENUM } KeyType;

/* When a key means something: a transformer has no recurrent cell, a word vocabulary no BPE
 * merges. Names variants by the keys that matter (./compare). */
typedef enum When {
    W_ALWAYS,
    W_REVERSE,     /* task.type reverse */
    W_DATA_SEED,   /* reverse (the strings), or translate with bpe (the sample learned from) */
    W_TRANSLATE,   /* task.type translate */
    W_BPE,         /* translate, subword bpe */
    W_BPE_DROPOUT, /* ... with bpe_dropout > 0 */
    W_SPM,         /* translate, subword sentencepiece */
    W_RNN,         /* model.type rnn */
    W_RNN_LEARNED, /* rnn with learned embeddings */
    W_KQ,          /* rnn with scaled_dot or additive attention */
    W_HEADS,       /* a transformer, or an rnn with multihead attention */
    W_TF,          /* model.type transformer */
    W_TF_LEARNED,  /* transformer with learned positions */
    W_ADAM,        /* optimizer adam or adamw */
    W_TEACHER,     /* translate with task.teacher */
    W_DISTILL,     /* translate with task.teacher or task.teacher_output */
} When;

typedef struct Key {
    const char *path;
    KeyType type;
    size_t off, size;
    double min, max;
    const char *const *names; /* K_ENUM: the names, in the order of the enum's values */
    const char *help;
    When when; /* under which configs the key changes anything (config_key_applies) */
} Key;

const char *const TEACHER_MIX_NAMES[] = {"replace", "add", NULL};
const char *const TASK_TYPE_NAMES[] = {"reverse", "translate", NULL};
const char *const SUBWORD_NAMES[] = {"none", "bpe", "sentencepiece", NULL};
const char *const SIDES_NAMES[] = {"both", "source", "target", NULL};
const char *const MODEL_TYPE_NAMES[] = {"rnn", "transformer", NULL};
const char *const MODEL_CELL_NAMES[] = {"gru", "lstm", NULL};
const char *const NORM_PLACE_NAMES[] = {"post", "pre", NULL};
const char *const POSITIONS_NAMES[] = {"sinusoidal", "learned", NULL};
const char *const ACTIVATION_NAMES[] = {"relu", "gelu", NULL};
const char *const EMBEDDING_TYPE_NAMES[] = {"learned", "onehot", NULL};
const char *const ATTN_KIND_NAMES[] = {"dummy", "meanpool", "dot", "scaled_dot", "general", "additive", "multihead", NULL};
const char *const COMBINE_NAMES[] = {"concat", "luong", NULL};
const char *const TIE_NAMES[] = {"none", "decoder", "all", NULL};
const char *const OPTIMIZER_NAMES[] = {"adam", "sgd", "adamw", NULL};
const char *const PRECISION_NAMES[] = {"fp32", "bf16", "int8", NULL};
const char *const GEMM_LIB_NAMES[] = {"onednn", "openblas", NULL};
const char *const METRIC_NAMES[] = {"exact_match", "token_accuracy", "tf_token_accuracy", "valid_loss", "bleu", NULL};
const char *const LR_SCHEDULE_NAMES[] = {"constant", "linear", "cosine", "inverse_sqrt", NULL};
const char *const OVERLAP_SUM_NAMES[] = {"auto", "on", "off", NULL};

/* An enum field is written and read as an int. */
_Static_assert(sizeof(TaskType) == sizeof(int) && sizeof(AttnKind) == sizeof(int) && sizeof(Metric) == sizeof(int),
               "enum fields are ints");
_Static_assert(sizeof ATTN_KIND_NAMES / sizeof *ATTN_KIND_NAMES == ATTN_KIND_COUNT + 1, "a name for every attention");

#define OFF(f) offsetof(Config, f), sizeof(((Config *)0)->f)
#define BIG 1e15

static const Key KEYS[] = {
    {"name", K_NAME, OFF(name), 0, 0, NULL, "run name: outputs go to runs/<name>/", W_ALWAYS},
    {"seed", K_LONG, OFF(seed), 0, BIG, NULL, "seed of initialisation, dropout and batch order", W_ALWAYS},
    {"task.type", K_ENUM, OFF(task.type), 0, 0, TASK_TYPE_NAMES, "the task", W_ALWAYS},
    {"task.alphabet", K_STR, OFF(task.alphabet), 0, 0, NULL, "reverse: the characters of the strings", W_REVERSE},
    {"task.min_len", K_INT, OFF(task.min_len), 1, 10000, NULL, "reverse: shortest string", W_REVERSE},
    {"task.max_len", K_INT, OFF(task.max_len), 1, 10000, NULL, "reverse: longest string", W_REVERSE},
    {"task.train_size", K_INT, OFF(task.train_size), 1, 1e8, NULL, "reverse: training strings", W_REVERSE},
    {"task.valid_size", K_INT, OFF(task.valid_size), 1, 1e8, NULL, "reverse: validation strings", W_REVERSE},
    {"task.test_size", K_INT, OFF(task.test_size), 1, 1e8, NULL, "reverse: test strings", W_REVERSE},
    {"task.data_seed", K_INT, OFF(task.data_seed), 0, 2147483647, NULL,
     "reverse: seed of the generated data; translate, bpe: of the sample BPE is learned from", W_DATA_SEED},
    {"task.source_markers", K_BOOL, OFF(task.source_markers), 0, 0, NULL, "wrap sources in <sos> ... <eos>", W_ALWAYS},
    {"task.data_dir", K_STR, OFF(task.data_dir), 0, 0, NULL, "translate: folder of the tokenised files", W_TRANSLATE},
    {"task.src_lang", K_STR, OFF(task.src_lang), 0, 0, NULL, "translate: source language suffix", W_TRANSLATE},
    {"task.trg_lang", K_STR, OFF(task.trg_lang), 0, 0, NULL, "translate: target language suffix", W_TRANSLATE},
    {"task.train_prefix", K_STR, OFF(task.train_prefix), 0, 0, NULL,
     "translate: training file prefix; several corpora as prefix:weight,prefix:weight (an epoch takes weight times "
     "each corpus's pairs: 3 each pair thrice, 0.5 a random half; 1 when not given)", W_TRANSLATE},
    {"task.valid_prefix", K_STR, OFF(task.valid_prefix), 0, 0, NULL, "translate: validation file prefix", W_TRANSLATE},
    {"task.test_prefix", K_STR, OFF(task.test_prefix), 0, 0, NULL,
     "translate: test file prefix (\"\": no test split; the run ends with model.bin, untested)", W_TRANSLATE},
    {"task.min_freq", K_INT, OFF(task.min_freq), 1, 1e9, NULL, "translate: vocabulary minimum count", W_TRANSLATE},
    {"task.max_vocab", K_INT, OFF(task.max_vocab), 0, 1e8, NULL, "translate: vocabulary size limit (0: none)", W_TRANSLATE},
    {"task.max_train_len", K_INT, OFF(task.max_train_len), 0, 65000, NULL,
     "translate: drop training pairs with more tokens on a side (subword pieces with a subword model, else words; 0: "
     "keep all, up to 65000)", W_TRANSLATE},
    {"task.max_length_ratio", K_FLOAT, OFF(task.max_length_ratio), 0, 1e6, NULL,
     "translate: drop training pairs whose longer side has more than this many times the tokens of the shorter (0: "
     "keep all)", W_TRANSLATE},
    {"task.dedup", K_BOOL, OFF(task.dedup), 0, 0, NULL,
     "translate: drop training pairs seen before in the training files (the same source and target text)", W_TRANSLATE},
    {"task.subword_sample", K_INT, OFF(task.subword_sample), 1, 2e9, NULL,
     "translate, bpe: BPE is learned from this many training pairs (all of them when there are no more; else a sample "
     "drawn with task.data_seed)", W_BPE},
    {"task.subword", K_ENUM, OFF(task.subword), 0, 0, SUBWORD_NAMES,
     "translate: none (the files' words, tokenised), bpe (raw text in byte-pair pieces learned from the training text) or "
     "sentencepiece (raw text in the pieces of task.spm_model)", W_TRANSLATE},
    {"task.spm_model", K_STR, OFF(task.spm_model), 0, 0, NULL, "translate, sentencepiece: the .model file (spm_train's)", W_SPM},
    {"task.cache_dir", K_STR, OFF(task.cache_dir), 0, 0, NULL,
     "translate: the folder of prepared data: the files read, the subwords learned and both sides encoded once, then "
     "reused by every run of the same files and settings (\"\": prepare every run)", W_TRANSLATE},
    {"task.bpe_model", K_STR, OFF(task.bpe_model), 0, 0, NULL,
     "translate, bpe: a model file from ./subword learn that segments both sides, instead of one learned from the "
     "training text (\"\": learn; bpe_merges and bpe_vocab_size then do not apply)", W_BPE},
    {"task.bpe_merges", K_INT, OFF(task.bpe_merges), 1, 4e6, NULL, "translate, bpe: merges learned (for each model)", W_BPE},
    {"task.bpe_joint", K_BOOL, OFF(task.bpe_joint), 0, 0, NULL,
     "translate, bpe: one model learned from both languages, one vocabulary (true), or a model and vocabulary for each "
     "language (false)", W_BPE},
    {"task.bpe_vocab_size", K_INT, OFF(task.bpe_vocab_size), 0, 4e6, NULL,
     "translate, bpe: instead of bpe_merges, the pieces in all (the 4 specials, 256 bytes and the characters included; 0: "
     "bpe_merges decides)", W_BPE},
    {"task.bpe_dropout", K_FLOAT, OFF(task.bpe_dropout), 0, 0.9, NULL,
     "translate, bpe: BPE-dropout in training, each merge left out with this probability, the training text segmented "
     "anew every epoch (0: off; validation, test and translation never drop)", W_BPE},
    {"task.bpe_dropout_sides", K_ENUM, OFF(task.bpe_dropout_sides), 0, 0, SIDES_NAMES,
     "translate, bpe: which training text BPE-dropout segments anew (both, source, target)", W_BPE_DROPOUT},
    {"task.teacher", K_STR, OFF(task.teacher), 0, 0, NULL,
     "translate: sequence-level distillation: model files (comma-separated: an ensemble) that translate the training "
     "sources into task.cache_dir, once; the student trains on their translations (\"\": none)", W_TRANSLATE},
    {"task.teacher_beam", K_INT, OFF(task.teacher_beam), 1, 64, NULL, "translate, teacher: the teacher's beam (1: greedy)",
     W_TEACHER},
    {"task.teacher_alpha", K_FLOAT, OFF(task.teacher_alpha), 0, 10, NULL,
     "translate, teacher: the teacher's length normalisation (beam search's alpha)", W_TEACHER},
    {"task.teacher_precision", K_ENUM, OFF(task.teacher_precision), 0, 0, PRECISION_NAMES,
     "translate, teacher: the teacher's products in float32, bf16 (CPUs with avx512_bf16 or AMX) or int8 weights, as "
     "./translate --bf16 / --int8: faster, its translations may differ slightly", W_TEACHER},
    {"task.teacher_nbest", K_INT, OFF(task.teacher_nbest), 1, 32, NULL,
     "translate, distilling: translations a source line, the beam's n best (at most teacher_beam), each a training pair "
     "(the translations file holds that many lines a source line, best first)", W_DISTILL},
    {"task.teacher_output", K_STR, OFF(task.teacher_output), 0, 0, NULL,
     "translate: instead of task.teacher, a file of translations of the training sources made beforehand (one line a "
     "source line, in order)", W_TRANSLATE},
    {"task.teacher_mix", K_ENUM, OFF(task.teacher_mix), 0, 0, TEACHER_MIX_NAMES,
     "translate, distilling: train on the sources with the teacher's translations (replace), or on those and the "
     "original pairs (add)", W_DISTILL},
    {"model.type", K_ENUM, OFF(model.type), 0, 0, MODEL_TYPE_NAMES,
     "rnn (recurrent encoder and decoder with attention) or transformer (PyTorch's nn.Transformer)", W_ALWAYS},
    {"model.cell", K_ENUM, OFF(model.cell), 0, 0, MODEL_CELL_NAMES, "recurrent cell", W_RNN},
    {"model.bidirectional", K_BOOL, OFF(model.bidirectional), 0, 0, NULL, "bidirectional encoder", W_RNN},
    {"model.layers", K_INT, OFF(model.layers), 1, 8, NULL,
     "layers of the encoder and of the decoder (a transformer's: unless encoder_layers, decoder_layers say)", W_ALWAYS},
    {"model.embedding_type", K_ENUM, OFF(model.embedding_type), 0, 0, EMBEDDING_TYPE_NAMES, "learned, or frozen one-hot", W_RNN},
    {"model.embedding", K_INT, OFF(model.embedding), 1, 1e5, NULL, "embedding size (learned)", W_RNN_LEARNED},
    {"model.encoder_hidden", K_INT, OFF(model.encoder_hidden), 1, 1e5, NULL, "encoder hidden size per direction", W_RNN},
    {"model.decoder_hidden", K_INT, OFF(model.decoder_hidden), 1, 1e5, NULL, "decoder hidden size", W_RNN},
    {"model.dropout", K_FLOAT, OFF(model.dropout), 0, 0.99, NULL, "dropout on the embeddings", W_ALWAYS},
    {"model.attention", K_ENUM, OFF(model.attention), 0, 0, ATTN_KIND_NAMES, "attention variant", W_RNN},
    {"model.kq", K_INT, OFF(model.kq), 1, 1e5, NULL, "key/query size of scaled_dot, attention size of additive", W_KQ},
    {"model.heads", K_INT, OFF(model.heads), 1, 1024, NULL,
     "multihead: attention heads, each decoder_hidden / heads wide (PyTorch's nn.MultiheadAttention)", W_HEADS},
    {"model.combine", K_ENUM, OFF(model.combine), 0, 0, COMBINE_NAMES, "output: W[a;h]+b, or W_o tanh(W_c[a;h])", W_RNN},
    {"model.tie_embeddings", K_ENUM, OFF(model.tie_embeddings), 0, 0, TIE_NAMES,
     "one matrix for the decoder's input embedding and the output layer (decoder), and the source embedding too (all: "
     "one vocabulary for both sides)", W_ALWAYS},
    {"model.init_range", K_FLOAT, OFF(model.init_range), 0, 10, NULL, "uniform initialisation range", W_ALWAYS},
    {"model.d_model", K_INT, OFF(model.d_model), 1, 65536, NULL, "transformer: model width (embeddings, every layer)", W_TF},
    {"model.ff", K_INT, OFF(model.ff), 1, 1 << 20, NULL, "transformer: feed-forward width", W_TF},
    {"model.encoder_layers", K_INT, OFF(model.encoder_layers), 0, 16, NULL,
     "transformer: encoder layers (0: layers)", W_TF},
    {"model.decoder_layers", K_INT, OFF(model.decoder_layers), 0, 16, NULL,
     "transformer: decoder layers (0: layers); a deep encoder with a shallow decoder decodes faster", W_TF},
    {"model.norm", K_ENUM, OFF(model.norm), 0, 0, NORM_PLACE_NAMES,
     "transformer: layer norm after each block's residual sum (post, the original) or before each block (pre)", W_TF},
    {"model.positions", K_ENUM, OFF(model.positions), 0, 0, POSITIONS_NAMES,
     "transformer: sinusoidal positions, or learned ones (up to max_positions)", W_TF},
    {"model.max_positions", K_INT, OFF(model.max_positions), 1, 1 << 20, NULL,
     "transformer, learned positions: the longest sequence (source, or target with <sos>)", W_TF_LEARNED},
    {"model.activation", K_ENUM, OFF(model.activation), 0, 0, ACTIVATION_NAMES, "transformer: the feed-forward activation", W_TF},
    {"train.optimizer", K_ENUM, OFF(train.optimizer), 0, 0, OPTIMIZER_NAMES, "optimizer", W_ALWAYS},
    {"train.lr", K_FLOAT, OFF(train.lr), 1e-12, 1e3, NULL, "learning rate", W_ALWAYS},
    {"train.adam_beta1", K_FLOAT, OFF(train.adam_beta1), 0, 0.999999, NULL, "adam, adamw: the first moment's decay", W_ADAM},
    {"train.adam_beta2", K_FLOAT, OFF(train.adam_beta2), 0, 0.999999, NULL, "adam, adamw: the second moment's decay", W_ADAM},
    {"train.adam_eps", K_FLOAT, OFF(train.adam_eps), 1e-30, 1, NULL, "adam, adamw: added to the root of the second moment", W_ADAM},
    {"train.weight_decay", K_FLOAT, OFF(train.weight_decay), 0, 1e3, NULL,
     "adam and sgd: wd x weight added to the gradient (L2, as PyTorch's weight_decay); adamw: every weight shrunk by "
     "lr x wd before the step (decoupled)", W_ALWAYS},
    {"train.batch_size", K_INT, OFF(train.batch_size), 1, 1e6, NULL, "sentences per batch (at most)", W_ALWAYS},
    {"train.loss_chunk", K_INT, OFF(train.loss_chunk), 0, 1e6, NULL,
     "output layer and loss this many target rows at a time in training, each chunk's gradients written while its "
     "logits exist: less memory (no whole logits), the same products (0: all rows at once)", W_ALWAYS},
    {"train.label_smoothing", K_FLOAT, OFF(train.label_smoothing), 0, 0.999, NULL,
     "training loss: (1 - e) cross-entropy + e mean over classes of -log p (PyTorch's label_smoothing); "
     "validation and test report the plain cross-entropy", W_ALWAYS},
    {"train.ema_decay", K_FLOAT, OFF(train.ema_decay), 0, 0.999999, NULL,
     "keep an exponential moving average of the weights (decay per update; 0: none); validation, the pictures and "
     "model.bin use the average", W_ALWAYS},
    {"train.recompute", K_BOOL, OFF(train.recompute), 0, 0, NULL,
     "recompute in backward what a small product gives instead of keeping it (a GRU's W_hn h: one B x H x H "
     "product per step): less memory, a little more time", W_ALWAYS},
    {"train.overlap_sum", K_ENUM, OFF(train.overlap_sum), 0, 0, OVERLAP_SUM_NAMES,
     "under mpirun: sum each part of the gradients over the ranks as soon as backward has finished it, while "
     "backward goes on (on), or all after backward (off); auto: on when the ranks run on several machines (on one, "
     "moving the data takes the cores backward needs). The same numbers either way", W_ALWAYS},
    {"train.sum_bucket_kb", K_INT, OFF(train.sum_bucket_kb), 1, 1 << 22, NULL,
     "under mpirun: the gradient block is summed in parts of about this many KB (cut at parameters' starts)", W_ALWAYS},
    {"train.batch_tokens", K_INT, OFF(train.batch_tokens), 0, 1e9, NULL,
     "padded token positions per batch, at most (0: batch_size alone)", W_ALWAYS},
    {"train.epochs", K_INT, OFF(train.epochs), 1, 1e6, NULL, "epochs", W_ALWAYS},
    {"train.max_steps", K_LONG, OFF(train.max_steps), 0, BIG, NULL,
     "the run ends after this many steps: the epoch in progress is validated, then the test (0: no limit)", W_ALWAYS},
    {"train.save_every", K_INT, OFF(train.save_every), 0, 1e9, NULL,
     "steps between resumable checkpoints (last.bin) within an epoch, besides the one after each epoch (0: none)", W_ALWAYS},
    {"train.clip", K_FLOAT, OFF(train.clip), 0, 1e9, NULL, "global gradient-norm limit (0: none)", W_ALWAYS},
    {"train.log_every", K_INT, OFF(train.log_every), 1, 1e9, NULL, "steps between log lines", W_ALWAYS},
    {"train.threads", K_INT, OFF(train.threads), 0, 256, NULL, "GEMM threads (0: library default)", W_ALWAYS},
    {"train.test_each_epoch", K_BOOL, OFF(train.test_each_epoch), 0, 0, NULL,
     "also score the test split after every epoch (time-to-quality; never picks the model)", W_ALWAYS},
    {"train.precision", K_ENUM, OFF(train.precision), 0, 0, PRECISION_NAMES,
     "GEMM operands: float32, or bfloat16 with float32 accumulation and weights; int8 decodes only (./speed --no-train)", W_ALWAYS},
    {"train.gemm", K_ENUM, OFF(train.gemm), 0, 0, GEMM_LIB_NAMES,
     "float32 GEMM library (bf16 always runs on oneDNN)", W_ALWAYS},
    {"train.metric", K_ENUM, OFF(train.metric), 0, 0, METRIC_NAMES,
     "validation metric that picks model.bin", W_ALWAYS},
    {"train.valid_every", K_INT, OFF(train.valid_every), 0, 1e9, NULL,
     "steps between validations within an epoch, besides each epoch's end (0: at epochs' ends only)", W_ALWAYS},
    {"train.keep_last", K_INT, OFF(train.keep_last), 0, 1000, NULL,
     "keep the weights of the last this many validations in checkpoints/ (for ./average --last; 0: none)", W_ALWAYS},
    {"train.keep_best", K_INT, OFF(train.keep_best), 0, 1000, NULL,
     "keep the weights of the best this many validations in checkpoints/ (0: none)", W_ALWAYS},
    {"train.patience", K_INT, OFF(train.patience), 0, 1e6, NULL, "validations without improvement before stopping: epochs, or with valid_every validations (0: never)", W_ALWAYS},
    {"train.lr_decay", K_FLOAT, OFF(train.lr_decay), 1e-6, 1, NULL, "lr factor on a plateau (1: never)", W_ALWAYS},
    {"train.lr_schedule", K_ENUM, OFF(train.lr_schedule), 0, 0, LR_SCHEDULE_NAMES,
     "lr over the run: constant, decayed to 0 at the last step (linearly or as a half cosine), or as 1/sqrt(step) "
     "(inverse_sqrt, the Transformer's: sqrt(warmup_steps / step) after the warmup)", W_ALWAYS},
    {"train.warmup_steps", K_INT, OFF(train.warmup_steps), 0, 1e9, NULL,
     "lr rises linearly from lr/warmup_steps to lr over the first warmup_steps steps, in front of any schedule (0: none)", W_ALWAYS},
    {"train.max_decode_len", K_INT, OFF(train.max_decode_len), 0, 1e5, NULL, "longest output (0: 2 x each sentence's source + 10)", W_ALWAYS},
    {"train.eval_batch_size", K_INT, OFF(train.eval_batch_size), 1, 1e6, NULL, "sentences per evaluation batch", W_ALWAYS},
};
#define N_KEYS ((int)(sizeof KEYS / sizeof KEYS[0]))

void config_defaults(Config *c) {
    memset(c, 0, sizeof *c);
    strcpy(c->name, "run");
    c->seed = 1;
    ConfigTask *t = &c->task;
    t->type = TASK_REVERSE;
    strcpy(t->alphabet, "abcd");
    t->min_len = 3;
    t->max_len = 30;
    t->train_size = 20000;
    t->valid_size = 1000;
    t->test_size = 1000;
    t->data_seed = 1;
    strcpy(t->data_dir, "data/multi30k/tok");
    strcpy(t->src_lang, "de");
    strcpy(t->trg_lang, "en");
    strcpy(t->train_prefix, "train.lc.norm.tok");
    strcpy(t->valid_prefix, "val.lc.norm.tok");
    strcpy(t->test_prefix, "test_2016_flickr.lc.norm.tok");
    strcpy(t->cache_dir, "runs/.cache");
    t->min_freq = 2;
    t->bpe_merges = 8000;
    t->bpe_joint = true;
    t->subword_sample = 1000000;
    t->teacher_beam = 5;
    t->teacher_alpha = 1.0f;
    t->teacher_precision = PRECISION_FP32;
    t->teacher_nbest = 1;
    ConfigModel *m = &c->model;
    m->cell = MODEL_CELL_LSTM;
    m->layers = 1;
    m->embedding_type = EMBEDDING_LEARNED;
    m->embedding = 32;
    m->encoder_hidden = 128;
    m->decoder_hidden = 128;
    m->attention = ATTN_DOT;
    m->kq = 128;
    m->heads = 8;
    m->combine = COMBINE_LUONG;
    m->init_range = 0.1f;
    m->type = MODEL_RNN;
    m->d_model = 256;
    m->ff = 512;
    m->norm = NORM_POST;
    m->positions = POSITIONS_SINUSOIDAL;
    m->max_positions = 512;
    m->activation = ACTIVATION_RELU;
    ConfigTrain *r = &c->train;
    r->optimizer = OPTIMIZER_ADAM;
    r->lr = 1e-3f;
    r->adam_beta1 = 0.9f;
    r->adam_beta2 = 0.999f;
    r->adam_eps = 1e-8f;
    r->batch_size = 64;
    r->epochs = 10;
    r->clip = 1.0f;
    r->log_every = 100;
    r->save_every = 1000;
    r->metric = METRIC_EXACT_MATCH;
    r->precision = PRECISION_FP32;
    r->gemm = GEMM_LIB_ONEDNN;
    r->lr_decay = 1.0f;
    r->lr_schedule = LR_CONSTANT;
    r->eval_batch_size = 256;
    r->overlap_sum = OVERLAP_AUTO;
    r->sum_bucket_kb = 4096;
}

static const Key *key_by_path(const char *path) {
    for (int i = 0; i < N_KEYS; i++)
        if (strcmp(KEYS[i].path, path) == 0) return &KEYS[i];
    return NULL;
}

int config_key_index(const char *path) {
    const Key *k = key_by_path(path);
    return k ? (int)(k - KEYS) : -1;
}

static const char *leaf(const char *path) {
    const char *d = strrchr(path, '.');
    return d ? d + 1 : path;
}

int config_edit_distance(const char *a, const char *b) {
    int la = (int)strlen(a), lb = (int)strlen(b);
    if (la > 63 || lb > 63) return 99;
    int d[64][64];
    for (int i = 0; i <= la; i++) d[i][0] = i;
    for (int j = 0; j <= lb; j++) d[0][j] = j;
    for (int i = 1; i <= la; i++)
        for (int j = 1; j <= lb; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

/* The closest key under the same section (or anywhere for a bare leaf), if close enough. */
static const char *suggest(const char *path) {
    const char *best = NULL;
    int bd = 99;
    const char *lf = leaf(path);
    for (int i = 0; i < N_KEYS; i++) {
        int d = config_edit_distance(lf, leaf(KEYS[i].path));
        if (d < bd) {
            bd = d;
            best = KEYS[i].path;
        }
    }
    int limit = (int)strlen(lf) / 3 + 1;
    return bd <= limit ? best : NULL;
}

/* "file:line:col" of the key's first occurrence after its section's, or "file". */
static void where(char *buf, size_t n, const char *origin, const char *text, const char *path) {
    if (!text) {
        snprintf(buf, n, "%s", origin);
        return;
    }
    const char *from = text;
    char quoted[96];
    const char *dot = strchr(path, '.');
    if (dot) {
        snprintf(quoted, sizeof quoted, "\"%.*s\"", (int)(dot - path), path);
        const char *s = strstr(text, quoted);
        if (s) from = s;
    }
    snprintf(quoted, sizeof quoted, "\"%s\"", leaf(path));
    const char *k = strstr(from, quoted);
    if (!k) {
        snprintf(buf, n, "%s", origin);
        return;
    }
    int line, col;
    json_line_col(text, k, &line, &col);
    snprintf(buf, n, "%s:%d:%d", origin, line, col);
}

static const char *json_kind(const cJSON *v) {
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsArray(v)) return "a list";
    if (cJSON_IsObject(v)) return "an object";
    if (cJSON_IsNull(v)) return "null";
    return "something else";
}

static void got_str(char *buf, size_t n, const cJSON *v) {
    if (cJSON_IsNumber(v)) snprintf(buf, n, "%.17g", v->valuedouble);
    else if (cJSON_IsString(v)) snprintf(buf, n, "\"%.60s\"", v->valuestring);
    else snprintf(buf, n, "%s", json_kind(v));
}

/* "a,b,c": a choice's names for messages. */
static void join_names(char *buf, size_t n, const char *const *names) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; names[i] && used < n; i++) used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? "," : "", names[i]);
}

/* Sets one key from a JSON value, checking its type and range. */
static S2sStatus set_value(Config *c, const Key *k, const cJSON *v, const char *loc, S2sError *err) {
    char got[96];
    got_str(got, sizeof got, v);
    unsigned char *dst = (unsigned char *)c + k->off;
    switch (k->type) {
    case K_NAME:
        if (cJSON_IsString(v)) {
            const char *s = v->valuestring;
            bool plain = s[0] && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
            for (const char *p = s; plain && *p; p++) plain = *p != '/' && (unsigned char)*p >= 0x20 && *p != 0x7f;
            if (!plain)
                return s2s_fail(err, S2S_ERR_CONFIG,
                                "%s: %s: expected a plain name (a folder under runs/: no '/', not \".\" or \"..\"), got %s",
                                loc, k->path, got);
        }
        __attribute__((fallthrough)); /* the rest as for any string */
    case K_STR:
        if (!cJSON_IsString(v)) return s2s_fail(err, S2S_ERR_CONFIG, "%s: %s: expected a string, got %s", loc, k->path, got);
        if (strlen(v->valuestring) >= k->size)
            return s2s_fail(err, S2S_ERR_CONFIG, "%s: %s: expected at most %zu characters", loc, k->path, k->size - 1);
        strcpy((char *)dst, v->valuestring);
        return S2S_OK;
    case K_ENUM: {
        for (int i = 0; cJSON_IsString(v) && k->names[i]; i++)
            if (strcmp(k->names[i], v->valuestring) == 0) {
                *(int *)dst = i;
                return S2S_OK;
            }
        char choices[160];
        join_names(choices, sizeof choices, k->names);
        return s2s_fail(err, S2S_ERR_CONFIG, "%s: %s: expected one of %s, got %s", loc, k->path, choices, got);
    }
    case K_BOOL:
        if (!cJSON_IsBool(v)) return s2s_fail(err, S2S_ERR_CONFIG, "%s: %s: expected true or false, got %s", loc, k->path, got);
        *(bool *)dst = cJSON_IsTrue(v);
        return S2S_OK;
    case K_INT:
    case K_LONG: {
        double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
        const char *what = k->min >= 1 ? "a positive integer" : "a non-negative integer";
        if (!cJSON_IsNumber(v) || d != floor(d) || d < k->min || d > k->max) {
            if (cJSON_IsNumber(v) && d == floor(d) && d >= k->min)
                return s2s_fail(err, S2S_ERR_CONFIG, "%s: %s: expected an integer at most %.0f, got %s", loc, k->path, k->max, got);
            return s2s_fail(err, S2S_ERR_CONFIG, "%s: %s: expected %s, got %s", loc, k->path, what, got);
        }
        if (k->type == K_INT) *(int *)dst = (int)d;
        else *(long *)dst = (long)d;
        return S2S_OK;
    }
    case K_FLOAT: {
        double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
        if (!cJSON_IsNumber(v) || !isfinite(d) || d < k->min || d > k->max)
            return s2s_fail(err, S2S_ERR_CONFIG, "%s: %s: expected a number in [%g, %g], got %s", loc, k->path, k->min,
                            k->max, got);
        *(float *)dst = (float)d;
        return S2S_OK;
    }
    }
    return S2S_OK;
}

static S2sStatus unknown_key(const char *origin, const char *text, const char *path, S2sError *err) {
    char loc[CONFIG_STR + 32];
    where(loc, sizeof loc, origin, text, path);
    const char *s = suggest(path);
    if (s) return s2s_fail(err, S2S_ERR_CONFIG, "%s: unknown key \"%s\" (did you mean \"%s\"?)", loc, path, s);
    return s2s_fail(err, S2S_ERR_CONFIG, "%s: unknown key \"%s\"", loc, path);
}

static bool is_section(const char *name) {
    return strcmp(name, "task") == 0 || strcmp(name, "model") == 0 || strcmp(name, "train") == 0;
}

/* One "path": value pair from the text json: a known key, of the right type and range. */
static S2sStatus apply_key(Config *c, const char *path, const cJSON *v, const char *origin, const char *json,
                           S2sError *err) {
    const Key *k = key_by_path(path);
    if (!k) return unknown_key(origin, json, path, err);
    char loc[CONFIG_STR + 32];
    where(loc, sizeof loc, origin, json, path);
    return set_value(c, k, v, loc, err);
}

S2sStatus config_parse(Config *c, const char *json, const char *origin, S2sError *err) {
    S2sStatus nul = json_refuse_nul(json, origin, err);
    if (nul) return nul;
    cJSON *root = cJSON_Parse(json);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        int line = 1, col = 1;
        if (at) json_line_col(json, at, &line, &col);
        const char *kind = json_comment_at(json, at, &col);
        if (kind)
            return s2s_fail(err, S2S_ERR_CONFIG, "%s:%d:%d: not valid JSON: JSON has no comments (a %s comment starts here)",
                            origin, line, col, kind);
        return s2s_fail(err, S2S_ERR_CONFIG, "%s:%d:%d: not valid JSON", origin, line, col);
    }
    S2sStatus st = S2S_OK;
    if (!cJSON_IsObject(root)) {
        st = s2s_fail(err, S2S_ERR_CONFIG, "%s: expected a JSON object at the top", origin);
        goto done;
    }
    char dup[128];
    const cJSON *d = json_find_duplicate(root, dup, sizeof dup);
    if (d) { /* cJSON keeps both; one of them would win silently */
        char pos[32];
        json_key_position(json, d->string, 1, pos, sizeof pos);
        st = s2s_fail(err, S2S_ERR_CONFIG, "%s%s%s: \"%s\" is given twice; keep one", origin, pos[0] ? ":" : "", pos, dup);
        goto done;
    }
    const cJSON *item;
    cJSON_ArrayForEach(item, root) {
        char path[128];
        if (is_section(item->string)) {
            if (!cJSON_IsObject(item)) {
                char loc[CONFIG_STR + 32];
                where(loc, sizeof loc, origin, json, item->string);
                st = s2s_fail(err, S2S_ERR_CONFIG, "%s: %s: expected an object, got %s", loc, item->string, json_kind(item));
                goto done;
            }
            const cJSON *sub;
            cJSON_ArrayForEach(sub, item) {
                snprintf(path, sizeof path, "%s.%s", item->string, sub->string);
                if ((st = apply_key(c, path, sub, origin, json, err))) goto done;
            }
        } else {
            snprintf(path, sizeof path, "%s", item->string);
            if ((st = apply_key(c, path, item, origin, json, err))) goto done;
        }
    }
done:
    cJSON_Delete(root);
    return st;
}

S2sStatus config_set(Config *c, const char *assignment, S2sError *err) {
    const char *eq = strchr(assignment, '=');
    if (!eq || eq == assignment)
        return s2s_fail(err, S2S_ERR_CONFIG, "--set %s: expected key=value", assignment);
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)(eq - assignment), assignment);
    const Key *k = key_by_path(name);
    if (!k && !strchr(name, '.')) { /* a unique leaf name */
        for (int i = 0; i < N_KEYS; i++) {
            if (strcmp(leaf(KEYS[i].path), name) != 0) continue;
            if (k) return s2s_fail(err, S2S_ERR_CONFIG, "--set %s: ambiguous; name the section (%s or %s)", name, k->path, KEYS[i].path);
            k = &KEYS[i];
        }
    }
    if (!k) {
        const char *s = suggest(name);
        if (s) return s2s_fail(err, S2S_ERR_CONFIG, "--set: unknown key \"%s\" (did you mean \"%s\"?)", name, s);
        return s2s_fail(err, S2S_ERR_CONFIG, "--set: unknown key \"%s\"", name);
    }
    const char *val = eq + 1;
    char where_set[160];
    snprintf(where_set, sizeof where_set, "--set %s", k->path);
    if (json_refuse_nul(val, where_set, err)) return S2S_ERR_CONFIG;
    cJSON *v = cJSON_Parse(val);
    if ((k->type == K_STR || k->type == K_NAME || k->type == K_ENUM) && (!v || !cJSON_IsString(v))) { /* bare strings need no quotes */
        cJSON_Delete(v);
        v = cJSON_CreateString(val);
    }
    if (!v) return s2s_fail(err, S2S_ERR_CONFIG, "--set %s: \"%s\" is not a value", k->path, val);
    S2sStatus st = set_value(c, k, v, "--set", err);
    cJSON_Delete(v);
    return st;
}

char *config_to_json(const Config *c) {
    cJSON *root = cJSON_CreateObject();
    for (int i = 0; i < N_KEYS; i++) {
        const Key *k = &KEYS[i];
        if (!config_key_applies(c, i)) continue; /* a translation's config holds no alphabet */
        cJSON *parent = root;
        const char *dot = strchr(k->path, '.');
        if (dot) {
            char sec[16];
            snprintf(sec, sizeof sec, "%.*s", (int)(dot - k->path), k->path);
            parent = cJSON_GetObjectItemCaseSensitive(root, sec);
            if (!parent) parent = cJSON_AddObjectToObject(root, sec);
        }
        const unsigned char *src = (const unsigned char *)c + k->off;
        const char *name = leaf(k->path);
        switch (k->type) {
        case K_NAME:
        case K_STR: cJSON_AddStringToObject(parent, name, (const char *)src); break;
        case K_ENUM: cJSON_AddStringToObject(parent, name, k->names[*(const int *)src]); break;
        case K_BOOL: cJSON_AddBoolToObject(parent, name, *(const bool *)src); break;
        case K_INT: cJSON_AddNumberToObject(parent, name, *(const int *)src); break;
        case K_LONG: cJSON_AddNumberToObject(parent, name, (double)*(const long *)src); break;
        case K_FLOAT: {
            /* the shortest decimal that reads back as the same float */
            float f = *(const float *)src;
            char buf[32];
            for (int prec = 6; prec <= 9; prec++) {
                snprintf(buf, sizeof buf, "%.*g", prec, f);
                if (strtof(buf, NULL) == f) break;
            }
            cJSON_AddItemToObject(parent, name, cJSON_CreateRaw(buf));
            break;
        }
        }
    }
    char *s = cJSON_Print(root);
    cJSON_Delete(root);
    return s;
}

int config_key_count(void) { return N_KEYS; }

int config_first_difference(const Config *a, const Config *b) {
    for (int i = 0; i < N_KEYS; i++) {
        const Key *k = &KEYS[i];
        if (!config_key_applies(a, i) && !config_key_applies(b, i)) continue; /* means nothing to either */
        const void *x = (const unsigned char *)a + k->off, *y = (const unsigned char *)b + k->off;
        bool same = k->type == K_STR || k->type == K_NAME ? strcmp(x, y) == 0 : memcmp(x, y, k->size) == 0;
        if (!same) return i;
    }
    return -1;
}

void config_key_copy(Config *dst, const Config *src, int i) {
    S2S_ASSERT(i >= 0 && i < N_KEYS);
    memcpy((unsigned char *)dst + KEYS[i].off, (const unsigned char *)src + KEYS[i].off, KEYS[i].size);
}

bool config_key_changes_numbers(int i) {
    S2S_ASSERT(i >= 0 && i < N_KEYS);
    static const char *const SAME[] = {"train.threads",   "train.log_every",   "train.save_every", "train.keep_last",
                                       "train.keep_best", "train.overlap_sum", "train.sum_bucket_kb"};
    for (size_t k = 0; k < sizeof SAME / sizeof *SAME; k++)
        if (!strcmp(KEYS[i].path, SAME[k])) return false;
    return true;
}

ConfigKeyInfo config_key_info(int i) {
    static const char *const TYPE[] = {"string", "integer", "integer", "number", "boolean", "string", "string"};
    S2S_ASSERT(i >= 0 && i < N_KEYS);
    int n = 0;
    while (KEYS[i].names && KEYS[i].names[n]) n++;
    return (ConfigKeyInfo){KEYS[i].path, TYPE[KEYS[i].type], KEYS[i].help, KEYS[i].names, n};
}

bool config_key_applies(const Config *c, int i) {
    S2S_ASSERT(i >= 0 && i < N_KEYS);
    const ConfigTask *t = &c->task;
    const ConfigModel *m = &c->model;
    bool translate = t->type == TASK_TRANSLATE, rnn = m->type == MODEL_RNN, tf = m->type == MODEL_TRANSFORMER;
    switch (KEYS[i].when) {
    case W_ALWAYS: return true;
    case W_REVERSE: return !translate;
    case W_DATA_SEED: return !translate || t->subword == SUBWORD_BPE;
    case W_TRANSLATE: return translate;
    case W_BPE: return translate && t->subword == SUBWORD_BPE;
    case W_BPE_DROPOUT: return translate && t->subword == SUBWORD_BPE && t->bpe_dropout > 0;
    case W_SPM: return translate && t->subword == SUBWORD_SENTENCEPIECE;
    case W_RNN: return rnn;
    case W_RNN_LEARNED: return rnn && m->embedding_type == EMBEDDING_LEARNED;
    case W_KQ: return rnn && (m->attention == ATTN_SCALED_DOT || m->attention == ATTN_ADDITIVE);
    case W_HEADS: return tf || (rnn && m->attention == ATTN_MULTIHEAD);
    case W_TF: return tf;
    case W_TF_LEARNED: return tf && m->positions == POSITIONS_LEARNED;
    case W_ADAM: return c->train.optimizer != OPTIMIZER_SGD;
    case W_TEACHER: return translate && t->teacher[0];
    case W_DISTILL: return translate && config_distills(t);
    }
    S2S_ASSERT_MSG(false, "key %s: applicability %d is none of the table's", KEYS[i].path, (int)KEYS[i].when);
    return true;
}

void config_key_value(const Config *c, int i, char *buf, size_t n) {
    S2S_ASSERT(i >= 0 && i < N_KEYS);
    const Key *k = &KEYS[i];
    const unsigned char *src = (const unsigned char *)c + k->off;
    switch (k->type) {
    case K_NAME:
    case K_STR: snprintf(buf, n, "\"%s\"", (const char *)src); break;
    case K_ENUM: snprintf(buf, n, "\"%s\"", k->names[*(const int *)src]); break;
    case K_BOOL: snprintf(buf, n, "%s", *(const bool *)src ? "true" : "false"); break;
    case K_INT: snprintf(buf, n, "%d", *(const int *)src); break;
    case K_LONG: snprintf(buf, n, "%ld", *(const long *)src); break;
    case K_FLOAT: snprintf(buf, n, "%g", (double)*(const float *)src); break;
    }
}
