/* config_schema.c — every config key: its path, type, field, range, names, help and when it
 * applies; and the names of the enum values. The one table the parser, --set, --list-keys,
 * the docs and ./compare read. */
#include "config_schema.h"

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

const Key CONFIG_KEYS[] = {
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
    {"task.source_markers", K_BOOL, OFF(task.source_markers), 0, 0, NULL, "reverse: wrap sources in <sos> ... <eos>", W_REVERSE},
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
    {"task.train_max_lines", K_INT, OFF(task.train_max_lines), 0, 2e9, NULL,
     "translate: read only each training corpus's first this many lines (before any filter; the vocabularies, the "
     "subword model and a teacher's translations come from them): a quick run, a learning curve (0: all)", W_TRANSLATE},
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
    {"train.valid_max_lines", K_INT, OFF(train.valid_max_lines), 0, 1e9, NULL,
     "validations score the validation split's first this many pairs, for speed; model.bin is picked on them and the "
     "test split is still scored whole (0: all)", W_ALWAYS},
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
const int CONFIG_N_KEYS = (int)(sizeof CONFIG_KEYS / sizeof CONFIG_KEYS[0]);

const char *const CONFIG_WHEN_TEXT[] = {
    [W_ALWAYS] = "every config's",
    [W_REVERSE] = "the reversal task's (task.type reverse)",
    [W_DATA_SEED] = "the reversal task's or BPE's (task.type reverse, or task.subword bpe)",
    [W_TRANSLATE] = "translation's (task.type translate)",
    [W_BPE] = "BPE's (task.subword bpe)",
    [W_BPE_DROPOUT] = "BPE-dropout's (task.bpe_dropout above 0)",
    [W_SPM] = "SentencePiece's (task.subword sentencepiece)",
    [W_RNN] = "the RNN's (model.type rnn)",
    [W_RNN_LEARNED] = "learned RNN embeddings' (model.type rnn, model.embedding_type learned)",
    [W_KQ] = "scaled_dot and additive attention's (model.attention)",
    [W_HEADS] = "multihead attention's and the Transformer's",
    [W_TF] = "the Transformer's (model.type transformer)",
    [W_TF_LEARNED] = "learned positions' (model.positions learned)",
    [W_ADAM] = "Adam's (train.optimizer adam or adamw)",
    [W_TEACHER] = "a teacher's (task.teacher)",
    [W_DISTILL] = "distilling's (task.teacher or task.teacher_output)",
};
_Static_assert(sizeof CONFIG_WHEN_TEXT / sizeof *CONFIG_WHEN_TEXT == W_DISTILL + 1, "a text for every When");
