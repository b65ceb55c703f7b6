/* test_util.h — shared test helpers: random tensors, closeness checks, golden JSON
 * reading, and the finite-difference gradient checker. */
#ifndef S2S_TEST_UTIL_H
#define S2S_TEST_UTIL_H

#include "s2s/common.h"
#include "s2s/config.h"
#include "s2s/data.h"
#include "s2s/nn.h"
#include "s2s/ops.h"

#include <cjson/cJSON.h>

/* Fills t->data uniform in [lo, hi]. */
void tu_fill(Tensor *t, Rng *rng, float lo, float hi);

/* Closeness: |a_i − e_i| ≤ rtol·(|e_i| + 0.1·max|e|) + TU_ATOL for every i. The absolute
 * floor (1e-8) only matters for values that are exactly 0 in exact arithmetic (float32
 * rounding leaves ~1e-10 there). On failure writes the index and values to why. */
#define TU_ATOL 1e-8
bool tu_close(const float *actual, const double *expected, size_t n, double rtol, char *why, size_t why_n);

/* Golden JSON: $S2S_GOLDEN_DIR (default tests/golden); a file of it (one of four rotating
 * buffers); a key that must be there. The tolerances of every golden comparison: values and
 * gradients against PyTorch's float64. */
#define TU_RTOL_VALUE 1e-5
#define TU_RTOL_GRAD 1e-4
const char *tu_golden_dir(void);
const char *tu_golden_path(const char *name);
/* Multi30k's folder ($MULTI30K_DIR or ../shared/data/multi30k) when the file `needs` is in it,
 * else NULL (the tests that need it skip). */
const char *tu_multi30k_dir(const char *needs);
const cJSON *tu_get(const cJSON *j, const char *key);
/* Skips the running test, with the reason, on a CPU without oneDNN's bf16 GEMMs. */
void tu_require_bf16(void);
/* Skips the test and says why on stderr (Criterion shows skips only with --verbose). Not
 * cr_log_warn: Criterion 2.4 exits 1 after any warning, so a missing optional tool failed
 * `make test` with every test passing. */
#define TU_SKIP(...) do { fprintf(stderr, "[SKIP] " __VA_ARGS__); fputc('\n', stderr); cr_skip_test(__VA_ARGS__); } while (0)
cJSON *tu_json_load(const char *path);
/* A whole file, NUL-terminated, in a malloc'd buffer (the caller frees); its length in *len
 * when len is not NULL. NULL when it cannot be opened. */
char *tu_slurp(const char *path, size_t *len);
/* The folder of this build's programs, absolute: $S2S_BIN_DIR (make test sets it), else ".". */
const char *tu_bin(void);
/* Runs a shell command (printf-style); returns its exit status (128 + signal if killed). */
int tu_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Sets config keys as --set does ("attention=dot"); asserts that each is accepted. */
void tu_config_set(Config *c, const char *assignment);
/* dir/PREFIX.de and dir/PREFIX.en: n made-up parallel lines of seven words, varied enough for
 * BPE (a corpus that takes seconds to prepare when n is in the hundreds of thousands). */
void tu_write_pairs(const char *dir, const char *prefix, int n);
/* Whether two loads hold the same data (task_fingerprint; both readable). */
bool tu_same_data(const TaskData *a, const TaskData *b);
/* A new empty folder under /tmp (malloc'd path); removed with tu_rm_rf. */
char *tu_tmpdir(void);
void tu_rm_rf(const char *dir);
/* Writes text (printf-style) to path; asserts on failure. */
void tu_write(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Whether two files have the same bytes (both must exist). */
bool tu_same_file(const char *a, const char *b);
/* A run's log.jsonl without its wall-clock fields (tokens_per_s, epoch_s, elapsed_s), which
 * differ between any two runs; malloc'd. Every line must be JSON. */
char *tu_log_without_timing(const char *path);
/* Two checkpoints with the same config, weights, moments and training state (its wall-clock
 * fields aside); on a difference returns false and names it in why. */
bool tu_same_checkpoint(const char *a, const char *b, char *why, size_t n);
/* Rewrites a model file: loads it, lets edit change the weights (ps) and what is saved (s:
 * vocabularies, training state, moments or not), and saves it with a valid checksum, so a
 * test can make a file that only the loader's own checks can refuse. */
typedef struct CkptSave CkptSave;
typedef void (*TuCkptEdit)(ParamStore *ps, CkptSave *s, void *ctx);
void tu_rewrite_checkpoint(const char *path, TuCkptEdit edit, void *ctx);
/* dir/prefix.de and dir/prefix.en: n pairs of 3-7 words, the target saying each source word
 * with its own word in order, starting with a capital and ending with a full stop as raw text
 * does; seed picks the words. */
void tu_word_corpus(const char *dir, const char *prefix, int n, unsigned seed);
/* A temporary folder with such train, val and test corpora of n_train and n_eval pairs (gzip
 * files when gz); malloc'd. */
char *tu_word_corpus_dir(int n_train, int n_eval, bool gz);
/* dir/name in one of four static buffers (so up to four can be used in one expression). */
const char *tu_path(const char *dir, const char *name);
/* Whether the file at path contains text. */
bool tu_file_has(const char *path, const char *text);
/* The source folders of docs/architecture.md's layers table ("src/core", …): the one list of
 * modules, which the Makefile, the budget test and the layer test read. Returns their count. */
int tu_module_dirs(char dirs[][64], int cap);
/* Flattens a nested numeric list into out (up to cap), returns the count (−1 on a
 * non-number). */
long tu_json_flatten(const cJSON *node, double *out, size_t cap);
/* Expects n floats to equal a golden list within rtol (tu_close); `what` names them. */
void tu_expect_json(const char *what, const float *actual, size_t n, const cJSON *node, double rtol);
/* Every entry of a golden "params" object (PyTorch names) into the store's parameter
 * prefix + name (prefix "" for none), each checked to exist with its size; returns how many. */
int tu_load_params(ParamStore *ps, const cJSON *params, const char *prefix);
/* Loads a nested list into a new heap tensor of the given shape (asserting the count). */
Tensor *tu_json_tensor(const cJSON *node, int ndim, const int *shape, bool with_grad);

/* ---- finite-difference gradient check ---- */
#define GC_MAX_LEAVES 24
#define GC_MAX_OUTS 4

typedef struct Gc {
    Tensor *leaf[GC_MAX_LEAVES];
    int n_leaves;
    Tensor *out[GC_MAX_OUTS]; /* set by the case's forward */
    int n_outs;
    Rng rng;
    /* case data: ids, targets, masks, lengths */
    int32_t ids[256];
    uint8_t mask[256];
    int lens[16];
    int flags;
} Gc;

typedef struct GradCase {
    const char *name;
    void (*setup)(Gc *g);               /* makes the leaves with gc_leaf */
    void (*forward)(Tape *t, Gc *g);    /* fills g->out from g->leaf */
} GradCase;

Tensor *gc_leaf(Gc *g, int ndim, const int *shape, float lo, float hi);
/* Runs the check; returns false and fills why on the first mismatch. Also reports the
 * ops recorded by the case's forward in seen[OP_COUNT] when not NULL. */
bool gc_run(const GradCase *c, char *why, size_t why_n, bool *seen);
void gc_free(Gc *g);

#endif
