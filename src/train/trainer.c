/* trainer.c — the training loop (setup, epochs, end of epoch, final test), its log and
 * checkpoints, and the resumable state with its checks. */
#include "s2s/train.h"
#include "s2s/train_state.h"
#include "s2s/gemm.h"
#include "s2s/subword.h"
#include "s2s/text.h"
#include "s2s/checkpoint.h"
#include "s2s/dist.h"
#include "s2s/json.h"
#include "s2s/optim.h"
#include "s2s/rundir.h"
#include "s2s/runlog.h"
#include "s2s/visuals.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* splitmix64: derives independent seeds for (seed, epoch) and (seed, step) */
static uint64_t mix(uint64_t a, uint64_t b) {
    uint64_t z = a * 0x9E3779B97F4A7C15ull + b + 0x632BE59BD9B4E019ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* ---- a run ---- */

typedef struct Run {
    Config *cfg;
    const TrainOptions *opt;
    RunDir dir;
    TaskData data;
    Seq2Seq model;
    ModelLoss loss;        /* the run's loss settings (train.label_smoothing, train.loss_chunk) */
    Tape tape;
    Adam adam;
    TrainState st;
    uint64_t data_hash;
    FILE *log;
    Font *font; /* NULL: pictures without labels */
    double t0;  /* when this session's training time was last added to st.seconds */
    double epoch_t0; /* when this session started the current epoch's batches */
    double epoch_tokens; /* target tokens trained since epoch_t0 (st.tok_sum also counts a resumed epoch's earlier ones) */
    Dataset sampled;  /* with BPE-dropout: the training pairs as epoch sampled_epoch segments them */
    int sampled_epoch; /* −1: none yet */
    int extended_from; /* > 0: resumed with --epochs; the epochs its config said before */
    const Dist *dist;  /* NULL: one process */
    bool root;         /* rank 0 (or one process): the only writer of the run folder */
    GradSum grad_sum;    /* the gradient block's sum over the ranks (more than one) */
    int stop_signal;     /* the signal that stopped the run (on some rank), or 0 */
    cJSON *test_before; /* the extended run's earlier test line, kept in its "extend" line */
} Run;

static bool metric_higher_is_better(Metric metric) { return metric != METRIC_VALID_LOSS; }
static bool is_adam(const Config *c) { return optim_is_adam(c->train.optimizer); }

static double metric_value(Metric metric, const EvalResult *r) {
    switch (metric) {
    case METRIC_VALID_LOSS: return r->loss;
    case METRIC_TOKEN_ACCURACY: return r->token_acc;
    case METRIC_TF_TOKEN_ACCURACY: return r->tf_token_acc;
    case METRIC_BLEU: return r->bleu; /* 0 without references: the reversal task has none */
    case METRIC_EXACT_MATCH: return r->exact_match;
    }
    S2S_ASSERT_MSG(false, "train.metric %d is none of the config's", (int)metric);
    return 0;
}

/* The run has ended: its epochs, early stopping, or the configured step limit. */
static bool finished(const Run *r) {
    const ConfigTrain *tc = &r->cfg->train;
    return r->st.epoch >= tc->epochs || (tc->patience > 0 && r->st.bad_epochs >= tc->patience) ||
           (tc->max_steps > 0 && r->st.step >= tc->max_steps);
}

/* The training pairs of epoch e: the task's, or with BPE-dropout their segmentation for that
 * epoch (a function of the seed and the epoch, so a resumed run sees the same pieces). */
static const Dataset *epoch_data(Run *r, int e) {
    float p = r->cfg->task.bpe_dropout;
    if (p <= 0) return &r->data.train;
    if (r->sampled_epoch != e) {
        dataset_free(&r->sampled);
        Rng g;
        rng_init(&g, mix((uint64_t)r->cfg->seed, (uint64_t)e), RNG_STREAM_SUBWORD);
        Sides s = r->cfg->task.bpe_dropout_sides;
        task_sample_train(&r->data, s == SIDES_TARGET ? 0.0f : p, s == SIDES_SOURCE ? 0.0f : p, &g, &r->sampled);
        r->sampled_epoch = e;
    }
    return &r->sampled;
}

/* The batches of epoch e (the plan is a function of the seed, the epoch and the data). */
static void epoch_plan(Run *r, int e, BatchPlan *plan) {
    Rng shuf;
    rng_init(&shuf, mix((uint64_t)r->cfg->seed, (uint64_t)e), RNG_STREAM_SHUFFLE);
    batchplan_make(plan, epoch_data(r, e), r->cfg->train.batch_size, r->cfg->train.batch_tokens, 100, &shuf);
}

static S2sStatus save(Run *r, const char *path, bool last, S2sError *err) {
    if (!r->root) return S2S_OK; /* rank 0 writes the run's files */
    char *conf = config_to_json(r->cfg);
    char *state = NULL;
    if (last) {
        r->st.adam_step = r->adam.step;
        double now = now_s();
        r->st.seconds += now - r->t0;
        r->t0 = now;
        if (fflush(r->log) != 0) {
            free(conf);
            return s2s_fail(err, S2S_ERR_IO, "%s: cannot write: %s", r->dir.log, strerror(errno));
        }
        r->st.log_bytes = ftell(r->log);
        state = train_state_to_json(&r->st, r->data_hash);
    }
    size_t sub_len = 0, trg_len = 0;
    char *sub = r->data.src_vocab.sub ? subword_bytes(r->data.src_vocab.sub, &sub_len) : NULL;
    char *trg = r->data.trg_vocab.sub ? subword_bytes(r->data.trg_vocab.sub, &trg_len) : NULL;
    if (trg && trg_len == sub_len && !memcmp(trg, sub, sub_len)) { /* one model, both sides */
        free(trg);
        trg = NULL;
        trg_len = 0;
    }
    CkptSave s = {conf,
                  (const char *const *)r->data.src_vocab.tokens, r->data.src_vocab.size,
                  (const char *const *)r->data.trg_vocab.tokens, r->data.trg_vocab.size,
                  &r->model.params, last && r->model.params.m != NULL, state, sub, sub_len, trg, trg_len,
                  last && r->model.params.ema != NULL};
    S2sStatus rc = ckpt_save(path, &s, err);
    free(sub);
    free(trg);
    free(conf);
    free(state);
    return rc;
}

/* One line of the log; a line that cannot be written stops the run (a full disk). */
static S2sStatus log_line(Run *r, cJSON *j, S2sError *err) {
    if (!r->log) { /* a rank other than 0: rank 0 writes the log */
        cJSON_Delete(j);
        return S2S_OK;
    }
    char *txt = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    bool bad = fprintf(r->log, "%s\n", txt) < 0 || fflush(r->log) != 0;
    free(txt);
    if (bad) return s2s_fail(err, S2S_ERR_IO, "%s: cannot write: %s", r->dir.log, strerror(errno));
    return S2S_OK;
}

static cJSON *eval_json(cJSON *j, const char *prefix, const EvalResult *e, bool greedy) {
    char k[64];
#define ADD(name, val) (snprintf(k, sizeof k, "%s%s", prefix, name), cJSON_AddNumberToObject(j, k, val))
    ADD(LOG_LOSS, e->loss);
    ADD(LOG_PPL, e->ppl);
    ADD(LOG_TF_TOKEN_ACCURACY, e->tf_token_acc);
    if (greedy) {
        ADD(LOG_EXACT_MATCH, e->exact_match);
        ADD(LOG_TOKEN_ACCURACY, e->token_acc);
    }
    if (e->has_bleu) ADD(e->sacre ? LOG_SACREBLEU : LOG_BLEU, e->bleu); /* two metrics: never under one name */
    if (e->sacre) ADD(LOG_CHRF, e->chrf);
    if (e->has_attn) ADD(LOG_ATTENTION_ENTROPY, e->attn_entropy);
    if (e->has_align) ADD(LOG_ALIGNMENT_ACCURACY, e->align_acc);
#undef ADD
    return j;
}

static EvalOptions eval_options(const Run *r, char *const *refs, bool interruptible) {
    const ConfigTrain *tc = &r->cfg->train;
    bool reverse = r->cfg->task.type == TASK_REVERSE;
    return (EvalOptions){tc->eval_batch_size, tc->max_decode_len, true, &r->data.trg_vocab, refs,
                         reverse ? (r->cfg->task.source_markers ? 1 : 0) : -1, interruptible ? r->opt->stop : NULL,
                         interruptible ? NULL : r->dist}; /* validation is shared among the ranks; the final test is rank 0's */
}

/* test.hyp and test.ref: the greedy outputs and references of the test split, one a line,
 * for significance tests between runs (./compare) and for the user. */
static S2sStatus write_test_outputs(Run *r, const IdSeqs *hyps, S2sError *err) {
    const Dataset *d = &r->data.test;
    size_t cap = 1 << 16, n[2] = {0, 0};
    char *buf[2] = {s2s_xmalloc(cap), s2s_xmalloc(cap)};
    size_t caps[2] = {cap, cap};
    for (int i = 0; i < d->n; i++) {
        char *line[2];
        line[0] = task_decode_target(&r->cfg->task, &r->data.trg_vocab, hyps->ids[i], hyps->len[i]);
        line[1] = r->data.test_refs ? strdup(r->data.test_refs[i])
                                    : task_decode_target(&r->cfg->task, &r->data.trg_vocab, d->ids + d->trg_off[i] + 1,
                                                         d->trg_len[i] - 2);
        for (int k = 0; k < 2; k++) {
            size_t len = strlen(line[k]);
            while (n[k] + len + 2 > caps[k]) buf[k] = s2s_xrealloc(buf[k], caps[k] *= 2);
            memcpy(buf[k] + n[k], line[k], len);
            n[k] += len;
            buf[k][n[k]++] = '\n';
            free(line[k]);
        }
    }
    char path[PATH_MAX];
    S2sStatus st;
    rundir_path(path, sizeof path, r->dir.dir, RUN_TEST_HYP);
    st = file_write_atomic(path, buf[0], n[0], err);
    rundir_path(path, sizeof path, r->dir.dir, RUN_TEST_REF);
    if (!st) st = file_write_atomic(path, buf[1], n[1], err);
    free(buf[0]);
    free(buf[1]);
    return st;
}

/* After an epoch: heatmaps of the first validation examples (greedy decoding) into
 * dir/attention/, and dir/curves.png. Pictures are secondary: a failure is a warning, and
 * they are drawn after last.bin is safe. */
static void draw_epoch(Run *r) {
    S2sError err;
    char path[PATH_MAX + 64], title[256];
    const char *dir = r->dir.dir;
    if (model_has_attention(&r->model) && r->data.valid.n > 0) {
        rundir_path(path, sizeof path, dir, RUN_ATTENTION);
        if (file_mkdirs(path, &err)) goto warn;
        int n = r->data.valid.n < 4 ? r->data.valid.n : 4, idx[4] = {0, 1, 2, 3};
        Batch b;
        batch_init(&b);
        batch_fill(&b, &r->data.valid, idx, n);
        int L = model_max_output(r->cfg->train.max_decode_len, b.S);
        int32_t *out = s2s_xmalloc((size_t)n * L * sizeof *out);
        int *len = s2s_xmalloc((size_t)n * sizeof *len);
        float *attn = s2s_xmalloc((size_t)n * L * b.S * sizeof *attn);
        int H = model_heads(&r->model); /* multihead: each head's weights too, in a second picture */
        float *heads = H > 1 ? s2s_xmalloc((size_t)n * L * H * b.S * sizeof *heads) : NULL;
        tape_reset(&r->tape);
        model_greedy_heads(&r->tape, &r->model, &b, r->cfg->train.max_decode_len, out, len, attn, heads);
        S2sStatus st = S2S_OK;
        for (int i = 0; i < n && !st; i++) {
            int e = b.index[i];
            DecodedAttention a = {r->data.valid.ids + r->data.valid.src_off[e], r->data.valid.src_len[e], out + (size_t)i * L,
                                  len[i], len[i] < L, attn + (size_t)i * L * b.S, b.S};
            snprintf(path, sizeof path, "%s/%s/epoch%02d_ex%d.png", dir, RUN_ATTENTION, r->st.epoch, i + 1);
            snprintf(title, sizeof title, "%s - %s attention - epoch %d - validation example %d", r->cfg->name,
                     model_attention_name(&r->model), r->st.epoch, i + 1);
            st = visuals_heatmap(path, title, &r->data.src_vocab, &r->data.trg_vocab, &a, r->font, &err);
            if (!st && heads) {
                snprintf(path, sizeof path, "%s/%s/epoch%02d_ex%d_heads.png", dir, RUN_ATTENTION, r->st.epoch, i + 1);
                snprintf(title, sizeof title, "%s - epoch %d - example %d - mean of %d heads", r->cfg->name, r->st.epoch, i + 1, H);
                st = visuals_heatmap_heads(path, title, &r->data.src_vocab, &r->data.trg_vocab, &a, H,
                                           heads + (size_t)i * L * H * b.S, r->font, &err);
            }
        }
        free(out);
        free(len);
        free(attn);
        free(heads);
        batch_free(&b);
        if (st) goto warn;
    }
    snprintf(title, sizeof title, "%s - learning curves", r->cfg->name);
    if (visuals_curves(dir, title, r->font, &err)) goto warn;
    return;
warn:
    if (r->opt->out) fprintf(r->opt->out, "warning: pictures not drawn: %s\n", err.msg);
}

static void progress(Run *r, int epoch, int k, int nb, double loss, double tps, double eta) {
    if (!r->opt->progress) return;
    int em = (int)(eta / 60), es = (int)eta % 60;
    fprintf(r->opt->progress, "\r\033[Kepoch %d/%d  step %d/%d  loss %.4f  %.0f tok/s  ETA %d:%02d", epoch + 1,
            r->cfg->train.epochs, k + 1, nb, loss, tps, em, es);
    fflush(r->opt->progress);
}

/* ---- setup ---- */

static double gb(double bytes) { return bytes / 1e9; }

/* Refuses, before anything large is allocated, a run whose parameters, optimizer state, data
 * and largest step (training, evaluation or greedy decoding) do not fit this machine. */
static S2sStatus check_memory(Run *r, S2sError *err) {
    size_t limit = s2s_memory_limit();
    if (!limit) return S2S_OK;
    const Config *c = r->cfg;
    const ConfigTrain *tc = &c->train;
    int Vs = r->data.src_vocab.size, Vt = r->data.trg_vocab.size;
    double params = (double)model_param_count(&c->model, Vs, Vt);
    bool bf16 = tc->precision == PRECISION_BF16;
    double param_bytes = params * (4.0 * ((is_adam(c) ? 4 : 2) + (tc->ema_decay > 0 ? 1 : 0)) + (bf16 ? 2.0 : 0.0));
    int S = 1, T = 2, Se = 1, Te = 2;
    /* with BPE-dropout, the pieces of the epoch about to run (its pairs come out longer than
     * the plain segmentation, and differently each epoch: run_epoch checks each one again);
     * the no-merge worst case would refuse a Transformer whose real steps fit easily */
    bool sampled = c->task.bpe_dropout > 0 && r->st.epoch < tc->epochs;
    const Dataset *d = sampled ? epoch_data(r, r->st.epoch) : &r->data.train;
    for (int i = 0; i < d->n; i++) {
        if (d->src_len[i] > S) S = d->src_len[i];
        if (d->trg_len[i] > T) T = d->trg_len[i];
    }
    const Dataset *ev[2] = {&r->data.valid, &r->data.test};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < ev[k]->n; i++) {
            if (ev[k]->src_len[i] > Se) Se = ev[k]->src_len[i];
            if (ev[k]->trg_len[i] > Te) Te = ev[k]->trg_len[i];
        }
    int B = tc->batch_size;
    if (tc->batch_tokens > 0) {
        int cap = tc->batch_tokens / (S > T ? S : T);
        if (cap < B) B = cap > 0 ? cap : 1;
    }
    int Be = tc->eval_batch_size, L = model_max_output(tc->max_decode_len, Se);
    struct {
        const char *what;
        double bytes;
        int B, S, T;
    } steps[3] = {{"a training step", model_step_bytes(&c->model, Vs, Vt, MODEL_STEP_TRAIN, B, S, T), B, S, T - 2},
                  {"an evaluation batch", model_step_bytes(&c->model, Vs, Vt, MODEL_STEP_EVAL, Be, Se, Te), Be, Se, Te - 2},
                  {"greedy decoding", model_step_bytes(&c->model, Vs, Vt, MODEL_STEP_GREEDY, Be, Se, L + 1), Be, Se, L}};
    int w = 0;
    for (int i = 1; i < 3; i++)
        if (steps[i].bytes > steps[w].bytes) w = i;
    double data = (double)task_data_bytes(&r->data), base = 256e6; /* code, libraries, buffers */
    double need = param_bytes + steps[w].bytes + data + base;
    if (need <= (double)limit) return S2S_OK;
    char epoch_note[64];
    snprintf(epoch_note, sizeof epoch_note, " in epoch %d's BPE-dropout pieces", r->st.epoch + 1);
    return s2s_fail(err, S2S_ERR_CONFIG,
                    "%s: this run needs about %.1f GB and this machine allows %.1f GB: %.1f million weights take %.1f GB with "
                    "their gradients%s, %s %.1f GB (%d sentences, sources of %d and targets of %d tokens%s), the data "
                    "%.1f GB; make the model, the batches (batch_size, eval_batch_size)%s or the sequences smaller",
                    c->path[0] ? c->path : "config", gb(need), gb((double)limit), params / 1e6, gb(param_bytes),
                    is_adam(c) ? " and Adam moments" : "", steps[w].what, gb(steps[w].bytes), steps[w].B, steps[w].S,
                    steps[w].T, sampled && w == 0 ? epoch_note : "", gb(data), sampled && w == 0 ? ", task.bpe_dropout" : "");
}

/* Equal vocabularies (a resumed run's data against its checkpoint), or a message naming
 * the first difference. */
static S2sStatus same_vocab(const Vocab *v, char *const *tokens, int n, const char *which, const char *origin,
                            S2sError *err) {
    int i = vocab_first_difference(v, tokens, n);
    if (i >= 0 && i < n && i < v->size)
        return s2s_fail(err, S2S_ERR_DATA,
                        "%s: the data give another %s vocabulary than the run started with (entry %d is \"%.40s\" "
                        "in the checkpoint, \"%.40s\" now): the data files or the task changed; resuming would train "
                        "the embeddings of other words",
                        origin, which, i, tokens[i], v->tokens[i]);
    if (n != v->size)
        return s2s_fail(err, S2S_ERR_DATA,
                        "%s: the data give a %s vocabulary of %d entries, the run started with %d: the data files "
                        "changed",
                        origin, which, v->size, n);
    return S2S_OK;
}

/* What the first `bytes` of a log hold: its epoch lines and the last step logged; false when
 * the bytes end inside a line (the state then names another log than this one). */
typedef struct LogPrefix {
    int epochs;
    long last_step;
} LogPrefix;

static bool log_prefix(const char *path, long bytes, LogPrefix *lp) {
    *lp = (LogPrefix){0, 0};
    if (bytes == 0) return true;
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    LineReader lr;
    line_reader_init(&lr, f, TEXT_MAX_LINE);
    const char *line;
    size_t len;
    long at = 0;
    bool ok = false;
    while (at < bytes && line_read(&lr, &line, &len) == LINE_OK) {
        at += (long)len + 1;
        if (at > bytes) break; /* the state's end falls inside this line */
        cJSON *j = cJSON_ParseWithLength(line, len);
        const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, LOG_TYPE));
        if (type && !strcmp(type, LOG_EPOCH)) lp->epochs++;
        long step = (long)runlog_num(j, LOG_STEP, -1);
        if (type && strcmp(type, LOG_EXTEND) && step > lp->last_step) lp->last_step = step;
        cJSON_Delete(j);
        ok = at == bytes;
    }
    line_reader_free(&lr);
    fclose(f);
    return ok;
}

/* The saved state against the config, the data and the log: every field in range, and the
 * step count the one that the epoch and batch imply. */
static S2sStatus state_check(Run *r, S2sError *err) {
    const TrainState *s = &r->st;
    const ConfigTrain *tc = &r->cfg->train;
    const char *o = r->dir.last;
#define BAD(...) s2s_fail(err, S2S_ERR_CORRUPT, __VA_ARGS__)
    if (s->epoch > tc->epochs)
        return BAD("%s: corrupt training state: epoch %d of a run of %d epochs", o, s->epoch, tc->epochs);
    int nb = 0;
    if (s->epoch < tc->epochs) {
        BatchPlan plan;
        epoch_plan(r, s->epoch, &plan);
        nb = plan.n_batches;
        batchplan_free(&plan);
    }
    if (s->epoch < tc->epochs ? s->batch >= nb : s->batch != 0)
        return BAD("%s: corrupt training state: batch %d; epoch %d has %d batches", o, s->batch, s->epoch + 1, nb);
    bool ended_by_steps = tc->max_steps > 0 && s->step >= tc->max_steps;
    if (!ended_by_steps) { /* every epoch before this one ran all its batches */
        long steps = s->batch;
        for (int e = 0; e < s->epoch; e++) {
            BatchPlan plan;
            epoch_plan(r, e, &plan);
            steps += plan.n_batches;
            batchplan_free(&plan);
        }
        if (s->step != steps)
            return BAD("%s: corrupt training state: step %ld, but epoch %d batch %d is step %ld", o, s->step, s->epoch + 1,
                       s->batch, steps);
    } else if (s->step != tc->max_steps) {
        return BAD("%s: corrupt training state: step %ld past train.max_steps %ld", o, s->step, tc->max_steps);
    }
    if (s->adam_step != (is_adam(r->cfg) ? s->step : 0))
        return BAD("%s: corrupt training state: %ld optimizer steps in %ld steps", o, s->adam_step, s->step);
    if (!(s->lr > 0 && s->lr <= (double)tc->lr))
        return BAD("%s: corrupt training state: lr %g; expected (0, %g] (it only decays)", o, s->lr, (double)tc->lr);
    long validations = s->epoch + (tc->valid_every > 0 ? s->step / tc->valid_every : 0);
    if (s->bad_epochs > validations)
        return BAD("%s: corrupt training state: %d validations without improvement in %ld", o, s->bad_epochs, validations);
    if (s->tok_sum != floor(s->tok_sum) || (s->batch == 0 && (s->loss_sum != 0 || s->tok_sum != 0)))
        return BAD("%s: corrupt training state: loss sums %g over %g tokens at batch %d", o, s->loss_sum, s->tok_sum,
                   s->batch);
    struct stat sb;
    if (!r->root) return S2S_OK; /* the log is rank 0's */
    if (stat(r->dir.log, &sb) != 0) return s2s_fail(err, S2S_ERR_IO, "%s: missing: %s", r->dir.log, strerror(errno));
    if (s->log_bytes > sb.st_size)
        return BAD("%s: corrupt training state: the log was %ld bytes long, %s is %lld", o, s->log_bytes, r->dir.log,
                   (long long)sb.st_size);
    LogPrefix lp;
    if (!log_prefix(r->dir.log, s->log_bytes, &lp))
        return BAD("%s: corrupt training state: the log was %ld bytes long, which ends inside a line of %s", o, s->log_bytes,
                   r->dir.log);
    long logged = s->step / tc->log_every * tc->log_every; /* the last step line written by now */
    if ((!ended_by_steps && lp.epochs != s->epoch) || lp.last_step > s->step || lp.last_step < logged)
        return BAD("%s: corrupt training state: at epoch %d step %ld, but the first %ld bytes of %s hold %d epoch lines up to "
                   "step %ld",
                   o, s->epoch, s->step, s->log_bytes, r->dir.log, lp.epochs, lp.last_step);
#undef BAD
    return S2S_OK;
}

/* A warmup longer than the run never reaches the configured lr: a config mistake. The run's
 * steps are the first epoch's batches times the epochs (or train.max_steps). */
static S2sStatus check_warmup(Run *r, S2sError *err) {
    const ConfigTrain *tc = &r->cfg->train;
    if (tc->warmup_steps <= 0) return S2S_OK;
    BatchPlan plan;
    epoch_plan(r, 0, &plan);
    int batches = plan.n_batches;
    long steps = (long)batches * tc->epochs;
    batchplan_free(&plan);
    if (tc->max_steps > 0 && tc->max_steps < steps) steps = tc->max_steps;
    if (tc->warmup_steps <= steps) return S2S_OK;
    return s2s_fail(err, S2S_ERR_CONFIG,
                    "%s: train.warmup_steps: %d steps of warmup in a run of %ld steps (%d epochs of %d batches%s): the lr "
                    "would never reach train.lr",
                    r->cfg->path[0] ? r->cfg->path : "config", tc->warmup_steps, steps, tc->epochs, batches,
                    tc->max_steps > 0 ? ", or train.max_steps" : "");
}

/* train --resume --epochs N: the run trains to N epochs in all. Fewer than it has begun are
 * refused, and so is a run that stopped early or at train.max_steps (it would stop again at
 * once). Run.extended_from keeps the old count for the log. */
static S2sStatus extend_epochs(Run *r, int epochs, S2sError *err) {
    ConfigTrain *tc = &r->cfg->train;
    const TrainState *s = &r->st;
    const char *o = r->dir.last;
    int begun = s->epoch + (s->batch > 0);
    if (epochs < begun)
        return s2s_fail(err, S2S_ERR_CONFIG, "--epochs %d: %s has begun %d epochs already", epochs, o, begun);
    if (tc->patience > 0 && s->bad_epochs >= tc->patience)
        return s2s_fail(err, S2S_ERR_CONFIG,
                        "--epochs %d: %s stopped early (train.patience: %d validations without a better %s); more "
                        "epochs would stop again at once",
                        epochs, o, tc->patience, METRIC_NAMES[tc->metric]);
    if (tc->max_steps > 0 && s->step >= tc->max_steps)
        return s2s_fail(err, S2S_ERR_CONFIG, "--epochs %d: %s ended at train.max_steps (%ld steps); more epochs would "
                        "stop again at once", epochs, o, tc->max_steps);
    if (epochs != tc->epochs) r->extended_from = tc->epochs;
    tc->epochs = epochs;
    return S2S_OK;
}

/* The test line past the saved state's end of the log (a finished run's), or NULL; read with
 * a bound, as the lines are short. */
static cJSON *tail_test_line(FILE *log, long from) {
    char buf[1 << 16];
    if (fseek(log, from, SEEK_SET) != 0) return NULL;
    size_t n = fread(buf, 1, sizeof buf - 1, log);
    buf[n] = 0;
    cJSON *found = NULL;
    for (char *line = buf, *nl; line < buf + n && !found; line = nl + 1) {
        if (!(nl = strchr(line, '\n'))) break;
        *nl = 0;
        cJSON *j = cJSON_Parse(line);
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(j, LOG_TYPE);
        if (cJSON_IsString(type) && !strcmp(type->valuestring, LOG_TEST)) found = j;
        else cJSON_Delete(j);
    }
    return found;
}

static uint64_t fnv1a(const char *s, uint64_t h) {
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* A data-parallel run's ranks agree before the first step: the same config, data, build and
 * parameter count as rank 0 (else every rank stops, rank 0 naming the first that differs),
 * at least one sentence of each global batch per rank, and rank 0's weights, moments, moving
 * average and state everywhere. */
static S2sStatus join_ranks(Run *r, S2sError *err) {
    const Dist *d = r->dist;
    if (!d || d->size == 1) return S2S_OK;
    const ConfigTrain *tc = &r->cfg->train;
    if (tc->batch_size > 0 && tc->batch_size < d->size)
        return s2s_fail(err, S2S_ERR_CONFIG,
                        "train.batch_size %d is smaller than the %d ranks: each rank takes a share of every batch",
                        tc->batch_size, d->size);
    char *conf = config_to_json(r->cfg);
    uint64_t mine[3] = {fnv1a(conf, fnv1a(S2S_VERSION " " __DATE__ " " __TIME__, 0xcbf29ce484222325ull)), r->data_hash,
                        (uint64_t)r->model.params.total},
             root[3];
    free(conf);
    memcpy(root, mine, sizeof root);
    dist_bcast(d, root, sizeof root, 0);
    int first_bad = dist_max_int(d, memcmp(root, mine, sizeof mine) ? d->rank : 0);
    if (first_bad)
        return s2s_fail(err, S2S_ERR_CONFIG,
                        "rank %d of %d started with another %s than rank 0: every rank must run the same build with the "
                        "same --config, --set and data",
                        first_bad, d->size,
                        first_bad == d->rank ? (root[0] != mine[0] ? "config or build" : root[1] != mine[1] ? "data" : "model")
                                             : "config, build or data");
    ParamStore *ps = &r->model.params;
    dist_bcast(d, ps->data, ps->total * sizeof *ps->data, 0);
    if (ps->m) dist_bcast(d, ps->m, ps->total * sizeof *ps->m, 0);
    if (ps->v) dist_bcast(d, ps->v, ps->total * sizeof *ps->v, 0);
    if (ps->ema) dist_bcast(d, ps->ema, ps->total * sizeof *ps->ema, 0);
    dist_bcast(d, &r->st, sizeof r->st, 0);
    optim_grad_sum_init(&r->grad_sum, d, ps, (size_t)r->cfg->train.sum_bucket_kb * 256);
    return S2S_OK;
}

/* last.bin for --resume: rank 0 reads it and sends it to the other ranks, which need neither
 * the run folder nor a shared file system (machines of a hostfile). A file rank 0 cannot read
 * stops every rank: rank 0 with the reason, the others saying where it is. */
static S2sStatus load_last(Run *r, Checkpoint *ck, S2sError *err) {
    const Dist *d = r->dist;
    if (!d || d->size == 1) return ckpt_load(ck, r->dir.last, err);
    S2sStatus st = r->root ? ckpt_load(ck, r->dir.last, err) : S2S_OK;
    uint64_t len = r->root && !st ? (uint64_t)ck->len : 0;
    dist_bcast(d, &len, sizeof len, 0);
    if (r->root) {
        if (!st) dist_bcast(d, ck->buf, ck->len, 0);
        return st;
    }
    if (!len) return s2s_fail(err, S2S_ERR_IO, "%s: rank 0 could not read it", r->dir.last);
    unsigned char *buf = malloc((size_t)len);
    if (!buf) return s2s_fail(err, S2S_ERR_NOMEM, "%s: out of memory for %llu bytes from rank 0", r->dir.last,
                              (unsigned long long)len);
    dist_bcast(d, buf, (size_t)len, 0);
    st = ckpt_from_memory(ck, buf, (size_t)len, r->dir.last, err);
    free(buf);
    return st;
}

/* The run's log, created (create) or opened to continue; never through a symbolic link. */
static FILE *run_log_open(const char *path, bool create) {
    int fd = open(path, (create ? O_WRONLY | O_CREAT | O_TRUNC : O_RDWR) | O_CLOEXEC | O_NOFOLLOW, 0644);
    FILE *f = fd >= 0 ? fdopen(fd, create ? "w" : "r+") : NULL;
    if (!f && fd >= 0) close(fd);
    return f;
}

/* A start refused after the folder was taken (the ranks' check, the log) leaves no run there:
 * the config and log it wrote go, so the folder's next start gets no advice to resume it. */
static void forget_start(Run *r) {
    if (!r->root || r->dir.lock.fd < 0) return;
    if (r->log) fclose(r->log);
    r->log = NULL;
    unlink(r->dir.log);
    unlink(r->dir.config);
}

/* Every check of the config before the folder is touched, the tape and the data: a run that
 * cannot fit is refused before its folder is made. */
static S2sStatus check_and_load(Run *r, S2sError *err) {
    Config *cfg = r->cfg;
    S2sStatus st;
    if ((st = config_check(cfg, err))) return st;
    if ((st = model_check_config(&cfg->model, cfg->path[0] ? cfg->path : "config", err))) return st;
    double data_est = task_memory_estimate(&cfg->task), limit = (double)s2s_memory_limit();
    if (limit > 0 && data_est > limit)
        return s2s_fail(err, S2S_ERR_CONFIG, "%s: the generated data need about %.1f GB; this machine allows %.1f GB",
                        cfg->path[0] ? cfg->path : "config", gb(data_est), gb(limit));
    if ((st = model_tape_init(&r->tape, cfg->train.precision, cfg->train.gemm, cfg->train.threads, "\"precision\": \"bf16\"",
                              err)))
        return st;
    if ((st = task_load(&r->data, &cfg->task, err))) return st;
    r->data_hash = task_fingerprint(&r->data);
    if ((st = check_memory(r, err))) return st;
    return r->opt->resume ? S2S_OK : check_warmup(r, err);
}

static S2sStatus setup(Run *r, S2sError *err) {
    Config *cfg = r->cfg;
    const TrainOptions *opt = r->opt;
    S2sStatus st;
    Checkpoint ck = {0};
    bool hash_saved = false;
    uint64_t saved_hash = 0;
    if (opt->resume) {
        if ((st = r->root ? rundir_open(&r->dir, opt->out_dir, RUN_RESUME, err) : rundir_names(&r->dir, opt->out_dir, err)))
            return st;
        if ((st = load_last(r, &ck, err))) return st;
        Config saved;
        config_defaults(&saved);
        if ((st = config_parse(&saved, ck.config_json, r->dir.last, err))) goto out;
        snprintf(saved.path, sizeof saved.path, "%.*s", (int)sizeof saved.path - 1, r->dir.last);
        *cfg = saved;
        if (!ck.state_json) {
            st = s2s_fail(err, S2S_ERR_CORRUPT, "%s: has no training state to resume from", r->dir.last);
            goto out;
        }
        if ((st = train_state_from_json(&r->st, &saved_hash, &hash_saved, ck.state_json, r->dir.last, err))) goto out;
        if (isnan(r->st.best)) r->st.best = metric_higher_is_better(cfg->train.metric) ? -INFINITY : INFINITY;
        if (opt->epochs > 0 && (st = extend_epochs(r, opt->epochs, err))) goto out;
    }
    if ((st = check_and_load(r, err))) goto out;
    if (!opt->resume && !r->root) {
        if ((st = rundir_names(&r->dir, opt->out_dir, err))) goto out;
    } else if (!opt->resume) {
        if ((st = rundir_open(&r->dir, opt->out_dir, opt->overwrite ? RUN_OVERWRITE : RUN_NEW, err))) goto out;
        /* the resolved config beside the run; also proves the folder is writable */
        char *conf = config_to_json(cfg);
        st = file_write_atomic(r->dir.config, conf, strlen(conf), err);
        free(conf);
        if (st) goto out;
    }
    if (r->dir.stale_tmps && opt->out)
        fprintf(opt->out, "removed %d temporary file(s) that a killed process left in %s\n", r->dir.stale_tmps,
                r->dir.dir);
    if (opt->resume) {
        if (r->extended_from && r->root) { /* config.json says what the run now is */
            char *conf = config_to_json(cfg);
            st = file_write_atomic(r->dir.config, conf, strlen(conf), err);
            free(conf);
            if (st) goto out;
        }
        if ((st = same_vocab(&r->data.src_vocab, ck.src_tokens, ck.n_src, "source", r->dir.last, err)) ||
            (st = same_vocab(&r->data.trg_vocab, ck.trg_tokens, ck.n_trg, "target", r->dir.last, err)))
            goto out;
        if (hash_saved && saved_hash != r->data_hash) {
            st = s2s_fail(err, S2S_ERR_DATA,
                          "%s: the data are not those the run started with (same vocabularies, other sentences): the "
                          "data files or the task changed; resuming would mix two datasets",
                          r->dir.last);
            goto out;
        }
    }
    const Vocab *vs = &r->data.src_vocab, *vt = &r->data.trg_vocab;
    int diff = -1; /* unequal sizes: model_init says so */
    if (cfg->model.tie_embeddings == TIE_ALL && vs->size == vt->size && (diff = vocab_first_difference(vs, vt->tokens, vt->size)) >= 0) {
        st = s2s_fail(err, S2S_ERR_CONFIG,
                      "model.tie_embeddings: \"all\" makes one matrix of the source and target embeddings, so the "
                      "vocabularies must be one; entry %d is \"%.40s\" in the source's, \"%.40s\" in the target's; "
                      "use a joint subword model or \"decoder\"",
                      diff, vs->tokens[diff], vt->tokens[diff]);
        goto out;
    }
    if ((st = model_init(&r->model, &cfg->model, r->data.src_vocab.size, r->data.trg_vocab.size, err))) goto out;
    r->loss = (ModelLoss){cfg->train.label_smoothing, cfg->train.loss_chunk};
    if (is_adam(cfg) && (st = params_alloc_moments(&r->model.params, err))) goto out;
    r->font = font_open(NULL);
    if (!r->font && opt->out)
        fprintf(opt->out, "warning: DejaVu Sans not found (Debian: fonts-dejavu-core); pictures have no labels\n");
    r->adam = adam_from_config(&cfg->train);
    if (opt->resume) {
        if ((st = state_check(r, err))) goto out;
        if (is_adam(cfg) && r->st.adam_step > 0 && !ck.has_moments) {
            st = s2s_fail(err, S2S_ERR_CORRUPT, "%s: has no Adam moments after %ld steps; it cannot resume exactly",
                          r->dir.last, r->st.adam_step);
            goto out;
        }
        if ((st = ckpt_restore(&ck, &r->model.params, is_adam(cfg) && ck.has_moments, r->dir.last, err))) goto out;
        if (cfg->train.ema_decay > 0 && (st = ckpt_restore_ema(&ck, &r->model.params, r->dir.last, err))) goto out;
        r->adam.step = r->st.adam_step;
        r->adam.lr = (float)r->st.lr;
        r->log = r->root ? run_log_open(r->dir.log, false) : NULL;
        if (r->log && r->extended_from) r->test_before = tail_test_line(r->log, r->st.log_bytes);
        if (r->root && (!r->log || ftruncate(fileno(r->log), r->st.log_bytes) != 0 || fseek(r->log, 0, SEEK_END) != 0)) {
            st = s2s_fail(err, S2S_ERR_IO, "%s: cannot reopen the log: %s", r->dir.log, strerror(errno));
            goto out;
        }
    } else {
        Rng init;
        rng_init(&init, (uint64_t)cfg->seed, RNG_STREAM_INIT);
        model_init_weights(&r->model, &init);
        if (cfg->train.ema_decay > 0 && (st = params_alloc_ema(&r->model.params, err))) goto out; /* from the initial weights */
        r->st = (TrainState){0};
        r->st.lr = cfg->train.lr;
        r->st.best = metric_higher_is_better(cfg->train.metric) ? -INFINITY : INFINITY;
        r->log = r->root ? run_log_open(r->dir.log, true) : NULL;
        if (r->root && !r->log) {
            st = s2s_fail(err, S2S_ERR_IO, "%s: cannot create: %s", r->dir.log, strerror(errno));
            goto out;
        }
    }
    st = join_ranks(r, err);
out:
    ckpt_free(&ck);
    if (st && !opt->resume) forget_start(r);
    return st;
}

static void teardown(Run *r) {
    if (r->grad_sum.sum) optim_grad_sum_free(&r->grad_sum);
    cJSON_Delete(r->test_before);
    if (r->log) fclose(r->log);
    font_close(r->font);
    tape_free(&r->tape);
    model_free(&r->model);
    task_free(&r->data);
    dataset_free(&r->sampled);
    rundir_close(&r->dir);
}

/* ---- the loop ---- */

/* One optimizer step on a batch; returns the loss. A non-finite loss or gradient returns
 * before any weight changes (*what says which), for the caller to report. */
static double train_step(Run *r, const Batch *b, float lr, int *n_tokens, double *nll, const char **what) {
    Tape *t = &r->tape;
    tape_reset(t);
    t->training = true;
    t->grad_enabled = true;
    t->free_values = true; /* the loss is read before backward; nothing else after */
    t->recompute = r->cfg->train.recompute;
    t->loss_grads_early = true; /* the loss is the objective (seed 1); gradients zeroed first */
    Rng drop;
    uint64_t stream = mix((uint64_t)r->cfg->seed, (uint64_t)r->st.step);
    if (r->dist && r->dist->size > 1) stream = mix(stream, (uint64_t)r->dist->rank); /* each rank its own masks */
    rng_init(&drop, stream, RNG_STREAM_DROPOUT);
    params_freeze(&r->model.params, t->bf16); /* fixed until the update: GEMMs may pack them */
    double loss = 0;
    *n_tokens = 0;
    *nll = 0;
    *what = "loss";
    bool ranks = r->dist && r->dist->size > 1;
    Tensor *objective = NULL;
    params_zero_grad(&r->model.params);
    if (b->B > 0) { /* a rank's share of a batch may be empty */
        ModelOutput o = model_forward(t, &r->model, b, &drop, &r->loss);
        objective = o.loss;
        loss = o.loss->data[0];
        *n_tokens = o.n_tokens;
        *nll = o.nll;
    }
    float share = 1.0f;
    if (ranks) loss = optim_objective_over_ranks(r->dist, loss, n_tokens, nll, &share); /* NaN on one rank: on all */
    if (isfinite(loss)) {
        if (ranks) optim_grad_sum_begin(&r->grad_sum, t, share, optim_overlap_sum(r->dist, r->cfg->train.overlap_sum));
        if (objective) tape_backward(t, objective);
        if (ranks) optim_grad_sum_end(&r->grad_sum, t);
    }
    params_thaw(&r->model.params);
    if (!isfinite(loss)) return loss;
    double norm = r->cfg->train.clip > 0 ? grad_clip_global_norm(&r->model.params, r->cfg->train.clip)
                                         : grad_global_norm(&r->model.params);
    if (!isfinite(norm)) { /* never apply a NaN update */
        *what = "gradient norm";
        return norm;
    }
    switch (r->cfg->train.optimizer) {
    case OPTIMIZER_SGD: sgd_step(&r->model.params, lr, r->cfg->train.weight_decay); break;
    case OPTIMIZER_ADAM:
    case OPTIMIZER_ADAMW:
        r->adam.lr = lr;
        adam_step(&r->adam, &r->model.params);
        break;
    }
    r->st.step++;
    if (r->cfg->train.ema_decay > 0) optim_ema_update(&r->model.params, r->cfg->train.ema_decay, r->st.step);
    return loss;
}

static S2sStatus validate_within_epoch(Run *r, TrainSummary *sum, int n_batches, S2sError *err);
static bool pause_reached(const Run *r) { return r->opt->pause_at > 0 && r->st.step >= r->opt->pause_at; }
/* A stop requested on any rank stops every rank after the same step; the signal is kept for
 * the exit code of every rank. */
static bool stop_any(Run *r) {
    int mine = r->opt->stop ? atomic_load(r->opt->stop) : 0;
    int sig = r->dist && r->dist->size > 1 ? dist_max_int(r->dist, mine) : mine;
    if (sig) r->stop_signal = sig;
    return sig != 0;
}

/* Trains the batches of the current epoch from st.batch on. Returns with *complete when the
 * epoch's batches are done (or train.max_steps ended it), else after saving the state to
 * resume from (a signal, --pause-at). */
static S2sStatus run_epoch(Run *r, TrainSummary *sum, bool *complete, S2sError *err) {
    const ConfigTrain *tc = &r->cfg->train;
    *complete = false;
    /* each epoch's BPE-dropout pieces are new: the step they need is checked before it runs */
    S2sStatus st = r->cfg->task.bpe_dropout > 0 ? check_memory(r, err) : S2S_OK;
    if (st) return st;
    BatchPlan plan;
    epoch_plan(r, r->st.epoch, &plan);
    Batch b;
    batch_init(&b);
    double tick = now_s(), last_draw = 0, window_tokens = 0, window_t = tick;
    r->epoch_t0 = tick;
    r->epoch_tokens = 0;
    long done_here = 0;
    while (r->st.batch < plan.n_batches) {
        int k = r->st.batch;
        int lo = plan.start[k], n = plan.start[k + 1] - plan.start[k];
        if (r->dist && r->dist->size > 1) { /* this rank's share: a contiguous part of the batch's sentences */
            int P = r->dist->size, me = r->dist->rank, a = (int)((long)n * me / P), z = (int)((long)n * (me + 1) / P);
            lo += a;
            n = z - a;
        }
        if (n > 0) batch_fill(&b, epoch_data(r, r->st.epoch), plan.order + lo, n);
        else b.B = 0; /* more ranks than this batch has sentences: this one sits it out */
        int ntok;
        const char *what = "loss";
        /* the schedule follows the configured epochs; st.lr is its base (lr_decay lowers it) */
        double done_share = (r->st.epoch + (double)k / plan.n_batches) / tc->epochs;
        float lr = (float)(r->st.lr * optim_lr_factor(tc->lr_schedule, done_share, r->st.step + 1, tc->warmup_steps));
        double loss, objective = train_step(r, &b, lr, &ntok, &loss, &what);
        if (!isfinite(objective)) loss = objective;
        if (!isfinite(loss)) {
            st = s2s_fail(err, S2S_ERR_NUMERIC,
                          "step %ld (epoch %d, batch %d): the %s is %s; stopped, %s keeps the last good state",
                          r->st.step + 1, r->st.epoch + 1, k + 1, what, isnan(loss) ? "NaN" : "infinite", r->dir.last);
            break;
        }
        r->st.batch++;
        r->st.loss_sum += loss * ntok;
        r->st.tok_sum += ntok;
        window_tokens += ntok;
        r->epoch_tokens += ntok;
        done_here++;
        double now = now_s();
        if (r->st.step % tc->log_every == 0) {
            cJSON *j = cJSON_CreateObject();
            cJSON_AddStringToObject(j, LOG_TYPE, LOG_STEP);
            cJSON_AddNumberToObject(j, LOG_EPOCH, r->st.epoch + 1);
            cJSON_AddNumberToObject(j, LOG_STEP, (double)r->st.step);
            cJSON_AddNumberToObject(j, LOG_LOSS, loss);
            cJSON_AddNumberToObject(j, LOG_LR, lr);
            cJSON_AddNumberToObject(j, LOG_TOKENS_PER_S, window_tokens / fmax(now - window_t, 1e-9));
            if ((st = log_line(r, j, err))) break;
            window_tokens = 0;
            window_t = now;
        }
        if (r->opt->progress && now - last_draw > 0.1) {
            double left = plan.n_batches - r->st.batch;
            double tps = r->epoch_tokens / fmax(now - tick, 1e-9);
            progress(r, r->st.epoch, k, plan.n_batches, r->st.loss_sum / fmax(r->st.tok_sum, 1), tps,
                     (now - tick) / (double)done_here * left);
            last_draw = now;
        }
        bool last_batch = r->st.batch == plan.n_batches;
        if (last_batch || (tc->max_steps > 0 && r->st.step >= tc->max_steps)) {
            *complete = true; /* the end of the epoch, or of the run: validation follows */
            break;
        }
        if (tc->valid_every > 0 && r->st.step % tc->valid_every == 0) {
            if ((st = validate_within_epoch(r, sum, plan.n_batches, err))) break;
            if (tc->patience > 0 && r->st.bad_epochs >= tc->patience) break; /* early stop: the run ends here */
            window_t = now_s(); /* the speed of training alone */
            window_tokens = 0;
        }
        bool stop = stop_any(r), pause = pause_reached(r);
        if (stop || pause || (tc->save_every > 0 && r->st.step % tc->save_every == 0)) {
            if ((st = save(r, r->dir.last, true, err))) break;
            if (stop || pause) {
                sum->interrupted = stop;
                sum->paused = !stop;
                break;
            }
        }
    }
    if (r->opt->progress) fprintf(r->opt->progress, "\r\033[K");
    batch_free(&b);
    batchplan_free(&plan);
    return st;
}

/* Validation of the weights now (their moving average with ema_decay): the metric, the best
 * checkpoint (model.bin), patience and the plateau decay, and the checkpoint kept for
 * averaging (keep_last, keep_best). The test split too when test_now is not NULL. */
static S2sStatus validate(Run *r, TrainSummary *sum, EvalResult *test_now, bool *better, S2sError *err) {
    const ConfigTrain *tc = &r->cfg->train;
    EvalOptions eo = eval_options(r, r->data.valid_refs, false);
    bool ema = r->model.params.ema != NULL;
    if (ema) params_swap_ema(&r->model.params); /* the average is validated and becomes model.bin */
    params_freeze(&r->model.params, r->tape.bf16); /* weights fixed until the next step */
    eval_dataset(&r->tape, &r->model, &r->data.valid, &eo, &sum->valid, NULL);
    if (test_now) {
        EvalOptions to = eval_options(r, r->data.test_refs, false);
        eval_dataset(&r->tape, &r->model, &r->data.test, &to, test_now, NULL);
    }
    params_thaw(&r->model.params);
    double m = metric_value(tc->metric, &sum->valid);
    *better = metric_higher_is_better(tc->metric) ? m > r->st.best : m < r->st.best;
    S2sStatus st = S2S_OK;
    if (*better) {
        r->st.best = m;
        r->st.bad_epochs = 0;
        st = save(r, r->dir.model, false, err);
    } else {
        r->st.bad_epochs++;
        if (tc->lr_decay < 1.0f) r->st.lr *= tc->lr_decay;
    }
    if (!st && (tc->keep_last > 0 || tc->keep_best > 0)) {
        char path[PATH_MAX + 64];
        rundir_path(path, sizeof path, r->dir.dir, RUN_CHECKPOINTS);
        if (!(st = file_mkdirs(path, err))) {
            rundir_checkpoint_path(path, sizeof path, r->dir.dir, r->st.step);
            st = save(r, path, false, err);
        }
    }
    if (ema) params_swap_ema(&r->model.params); /* the training weights again */
    return st;
}

typedef struct Kept {
    long step;
    double metric;
    bool known;
} Kept;

typedef struct KeptLog {
    Kept *k;
    int n;
} KeptLog;

static void kept_metric(void *ctx, const char *type, const cJSON *j) {
    KeptLog *kl = ctx;
    if (strcmp(type, LOG_EPOCH) != 0 && strcmp(type, LOG_VALID) != 0) return;
    long step = (long)runlog_num(j, LOG_STEP, -1);
    double m = runlog_num(j, LOG_METRIC, NAN);
    for (int i = 0; i < kl->n; i++)
        if (kl->k[i].step == step && isfinite(m)) {
            kl->k[i].metric = m;
            kl->k[i].known = true;
        }
}

/* After a validation's log line: of checkpoints/, the last keep_last by step and the best
 * keep_best by the metric (read back from the log, so a resumed run decides as an
 * uninterrupted one) stay; the others are deleted. A file whose metric the log lacks counts
 * among the last only. */
static void prune_checkpoints(Run *r) {
    const ConfigTrain *tc = &r->cfg->train;
    if (tc->keep_last <= 0 && tc->keep_best <= 0) return;
    char path[PATH_MAX + 64];
    long *steps;
    int n = rundir_checkpoint_steps(r->dir.dir, &steps);
    if (n <= 0) return;
    KeptLog kl = {s2s_xmalloc((size_t)n * sizeof *kl.k), n};
    for (int i = 0; i < n; i++) kl.k[i] = (Kept){steps[i], NAN, false};
    free(steps);
    S2sError err;
    if (tc->keep_best > 0 && runlog_each(r->dir.dir, kept_metric, &kl, &err) != S2S_OK) {
        free(kl.k);
        return; /* keep everything rather than delete on a guess */
    }
    bool higher = metric_higher_is_better(tc->metric);
    for (int i = 0; i < kl.n; i++) {
        bool keep = i >= kl.n - tc->keep_last;
        if (!keep && kl.k[i].known) { /* among the best keep_best: fewer than that many are better */
            int better = 0; /* strictly better, or as good and later */
            for (int j = 0; j < kl.n; j++) {
                if (j == i || !kl.k[j].known) continue;
                double a = kl.k[j].metric, b = kl.k[i].metric;
                better += (higher ? a > b : a < b) || (a == b && j > i);
            }
            keep = better < tc->keep_best;
        }
        if (!keep) {
            rundir_checkpoint_path(path, sizeof path, r->dir.dir, kl.k[i].step);
            unlink(path);
        }
    }
    free(kl.k);
}

/* A validation within an epoch (train.valid_every): its log line, then last.bin, so that a
 * resumed run does not repeat it. */
static S2sStatus validate_within_epoch(Run *r, TrainSummary *sum, int n_batches, S2sError *err) {
    bool better;
    S2sStatus st = validate(r, sum, NULL, &better, err);
    if (st) return st;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, LOG_TYPE, LOG_VALID);
    cJSON_AddNumberToObject(j, LOG_EPOCH, r->st.epoch + 1);
    cJSON_AddNumberToObject(j, LOG_STEP, (double)r->st.step);
    cJSON_AddNumberToObject(j, LOG_EPOCHS_DONE, r->st.epoch + (double)r->st.batch / n_batches); /* the curves' x */
    eval_json(j, LOG_VALID_, &sum->valid, true);
    cJSON_AddNumberToObject(j, LOG_METRIC, metric_value(r->cfg->train.metric, &sum->valid));
    cJSON_AddBoolToObject(j, LOG_BEST, better);
    cJSON_AddNumberToObject(j, LOG_ELAPSED_S, r->st.seconds + now_s() - r->t0);
    if ((st = log_line(r, j, err))) return st;
    if (r->root) prune_checkpoints(r);
    FILE *out = r->opt->out;
    if (out)
        fprintf(out, "\r\033[Kstep %ld  valid loss %.4f  ppl %.3f  %s %.4g%s\n", r->st.step, sum->valid.loss, sum->valid.ppl,
                METRIC_NAMES[r->cfg->train.metric], metric_value(r->cfg->train.metric, &sum->valid), better ? "  *" : "");
    return save(r, r->dir.last, true, err);
}

/* The end of an epoch: validation, the best checkpoint, plateau decay, the log line, then
 * last.bin, then the pictures. */
static S2sStatus end_epoch(Run *r, TrainSummary *sum, S2sError *err) {
    const ConfigTrain *tc = &r->cfg->train;
    double train_loss = r->st.loss_sum / fmax(r->st.tok_sum, 1);
    double epoch_s = now_s() - r->epoch_t0; /* the batches of this session, without validation */
    bool ema = r->model.params.ema != NULL, better;
    EvalResult test_now = {0};
    S2sStatus st = validate(r, sum, tc->test_each_epoch ? &test_now : NULL, &better, err);
    if (st) return st;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, LOG_TYPE, LOG_EPOCH);
    cJSON_AddNumberToObject(j, LOG_EPOCH, r->st.epoch + 1);
    cJSON_AddNumberToObject(j, LOG_STEP, (double)r->st.step);
    cJSON_AddNumberToObject(j, LOG_TRAIN_LOSS, train_loss);
    eval_json(j, LOG_VALID_, &sum->valid, true);
    if (tc->keep_last > 0 || tc->keep_best > 0 || tc->valid_every > 0)
        cJSON_AddNumberToObject(j, LOG_METRIC, metric_value(tc->metric, &sum->valid));
    cJSON_AddBoolToObject(j, LOG_BEST, better);
    /* the lr the next epoch starts with (schedule and plateau decay applied) */
    cJSON_AddNumberToObject(j, LOG_LR, r->st.lr * optim_lr_factor(tc->lr_schedule, (r->st.epoch + 1.0) / tc->epochs,
                                                                  r->st.step + 1, tc->warmup_steps));
    cJSON_AddNumberToObject(j, LOG_TOKENS_PER_S, r->epoch_tokens / fmax(epoch_s, 1e-9));
    cJSON_AddNumberToObject(j, LOG_EPOCH_S, epoch_s);
    /* wall time of the run so far, evaluations included (time-to-quality) */
    cJSON_AddNumberToObject(j, LOG_ELAPSED_S, r->st.seconds + now_s() - r->t0);
    if (tc->test_each_epoch) eval_json(j, LOG_TEST_, &test_now, true);
    if ((st = log_line(r, j, err))) return st;
    if (r->root) prune_checkpoints(r);
    FILE *out = r->opt->out;
    if (out && sum->valid.sacre)
        fprintf(out, "epoch %2d  train loss %.4f  valid loss %.4f  ppl %.3f  sacreBLEU %.2f  chrF %.2f  tf token acc %.2f%%  %.1fs%s\n",
                r->st.epoch + 1, train_loss, sum->valid.loss, sum->valid.ppl, sum->valid.bleu, sum->valid.chrf,
                100 * sum->valid.tf_token_acc, epoch_s, better ? "  *" : "");
    else if (out && sum->valid.has_bleu)
        fprintf(out, "epoch %2d  train loss %.4f  valid loss %.4f  ppl %.3f  BLEU %.2f  tf token acc %.2f%%  %.1fs%s\n",
                r->st.epoch + 1, train_loss, sum->valid.loss, sum->valid.ppl, sum->valid.bleu, 100 * sum->valid.tf_token_acc,
                epoch_s, better ? "  *" : "");
    else if (out)
        fprintf(out,
                "epoch %2d  train loss %.4f  valid loss %.4f  ppl %.3f  exact %.2f%%  token acc %.2f%%  tf token acc "
                "%.2f%%  %.1fs%s\n",
                r->st.epoch + 1, train_loss, sum->valid.loss, sum->valid.ppl, 100 * sum->valid.exact_match,
                100 * sum->valid.token_acc, 100 * sum->valid.tf_token_acc, epoch_s, better ? "  *" : "");
    r->st.epoch++;
    r->st.batch = 0;
    r->st.loss_sum = r->st.tok_sum = 0;
    if ((st = save(r, r->dir.last, true, err))) return st;
    if (ema) params_swap_ema(&r->model.params); /* the pictures of the weights validated */
    if (r->root) draw_epoch(r);
    if (ema) params_swap_ema(&r->model.params);
    sum->epochs = r->st.epoch;
    sum->early_stopped = tc->patience > 0 && r->st.bad_epochs >= tc->patience;
    if (stop_any(r)) sum->interrupted = true;
    else if (pause_reached(r)) sum->paused = true;
    return S2S_OK;
}

/* The test split, on this run's best checkpoint; a signal stops it (resumable: the run is
 * tested when resumed). */
static S2sStatus final_test(Run *r, TrainSummary *sum, S2sError *err) {
    if (!isfinite(r->st.best))
        return s2s_fail(err, S2S_ERR_NUMERIC,
                        "the run ended without a best checkpoint: no validation gave a %s that is a number",
                        METRIC_NAMES[r->cfg->train.metric]);
    Checkpoint ck;
    S2sStatus st = ckpt_load(&ck, r->dir.model, err); /* the folder is this run's: so is model.bin */
    if (st) return st;
    st = ckpt_restore(&ck, &r->model.params, false, r->dir.model, err);
    ckpt_free(&ck);
    if (st) return st;
    EvalOptions eo = eval_options(r, r->data.test_refs, true);
    IdSeqs hyps;
    params_freeze(&r->model.params, r->tape.bf16);
    eval_dataset(&r->tape, &r->model, &r->data.test, &eo, &sum->test, &hyps);
    params_thaw(&r->model.params);
    if (sum->test.interrupted) {
        idseqs_free(&hyps);
        sum->interrupted = true;
        return S2S_OK;
    }
    st = write_test_outputs(r, &hyps, err);
    idseqs_free(&hyps);
    if (st) return st;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, LOG_TYPE, LOG_TEST);
    cJSON_AddNumberToObject(j, LOG_EPOCHS, r->st.epoch);
    cJSON_AddNumberToObject(j, LOG_STEP, (double)r->st.step);
    eval_json(j, LOG_TEST_, &sum->test, true);
    if ((st = log_line(r, j, err))) return st;
    sum->tested = true;
    FILE *out = r->opt->out;
    if (out && sum->test.sacre)
        fprintf(out, "test (best checkpoint): loss %.4f  ppl %.3f  sacreBLEU %.2f  chrF %.2f (greedy)  tf token acc %.2f%%\n",
                sum->test.loss, sum->test.ppl, sum->test.bleu, sum->test.chrf, 100 * sum->test.tf_token_acc);
    else if (out && sum->test.has_bleu)
        fprintf(out, "test (best checkpoint): loss %.4f  ppl %.3f  BLEU %.2f (greedy)  tf token acc %.2f%%\n",
                sum->test.loss, sum->test.ppl, sum->test.bleu, 100 * sum->test.tf_token_acc);
    else if (out)
        fprintf(out, "test (best checkpoint): loss %.4f  ppl %.3f  exact %.2f%%  token acc %.2f%%  tf token acc %.2f%%\n",
                sum->test.loss, sum->test.ppl, 100 * sum->test.exact_match, 100 * sum->test.token_acc,
                100 * sum->test.tf_token_acc);
    return S2S_OK;
}

/* A resumed run given more (or fewer) epochs: a log line, and last.bin with the new count at
 * once, so that a plain --resume after an interruption keeps it. */
static S2sStatus log_extension(Run *r, S2sError *err) {
    const ConfigTrain *tc = &r->cfg->train;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, LOG_TYPE, LOG_EXTEND);
    cJSON_AddNumberToObject(j, LOG_EPOCHS_BEFORE, r->extended_from);
    cJSON_AddNumberToObject(j, LOG_EPOCHS, tc->epochs);
    cJSON_AddNumberToObject(j, LOG_STEP, (double)r->st.step);
    if (r->test_before) cJSON_AddItemToObject(j, LOG_TEST_BEFORE, r->test_before); /* the finished run's result */
    r->test_before = NULL;
    S2sStatus st = log_line(r, j, err);
    if (st) return st;
    if (r->opt->out) {
        bool stretched = tc->lr_schedule == LR_LINEAR || tc->lr_schedule == LR_COSINE;
        fprintf(r->opt->out, "train: %d epochs in all (the config said %d)%s\n", tc->epochs, r->extended_from,
                stretched ? "; the lr schedule spans the new length, so the lr is raised again" : "");
    }
    return save(r, r->dir.last, true, err);
}

S2sStatus train_check_config(const Config *cfg, S2sError *err) {
    if (cfg->train.precision == PRECISION_INT8)
        return s2s_fail(err, S2S_ERR_CONFIG, "train.precision: \"int8\" is for decoding (./translate --int8, ./speed "
                        "--no-train); training takes \"fp32\" or \"bf16\"");
    return S2S_OK;
}

S2sStatus train_run(Config *cfg, const TrainOptions *opt, TrainSummary *sum, S2sError *err) {
    memset(sum, 0, sizeof *sum);
    S2sStatus bad = train_check_config(cfg, err);
    if (bad) return bad;
    Run run;
    memset(&run, 0, sizeof run);
    Run *r = &run;
    r->cfg = cfg;
    r->opt = opt;
    r->dist = opt->dist;
    r->root = !opt->dist || opt->dist->rank == 0;
    r->dir.lock.fd = -1;
    dataset_init(&r->sampled);
    r->sampled_epoch = -1;
    S2sStatus st = setup(r, err);
    if (st) {
        teardown(r);
        return st;
    }
    if (opt->out)
        fprintf(opt->out, "data: %d training pairs%s, vocabulary %d source / %d target (with 4 specials)\n",
                r->data.train.n, r->data.train_skipped ? " (some left out: empty or too long)" : "",
                r->data.src_vocab.size, r->data.trg_vocab.size);
    if (opt->out)
        fprintf(opt->out, "parameters: %zu (%s)\n", params_numel(&r->model.params),
                cfg->model.type == MODEL_TRANSFORMER ? "transformer" : ATTN_KIND_NAMES[cfg->model.attention]);
    r->t0 = now_s();
    if (r->extended_from) st = log_extension(r, err);
    sum->epochs = r->st.epoch;
    if (!st && !finished(r) && pause_reached(r)) sum->paused = true; /* resumed at --pause-at: no step */
    while (!st && !finished(r) && !sum->interrupted && !sum->paused) {
        bool complete;
        st = run_epoch(r, sum, &complete, err);
        if (!st && complete) st = end_epoch(r, sum, err);
    }
    sum->early_stopped = cfg->train.patience > 0 && r->st.bad_epochs >= cfg->train.patience;
    if (!st && finished(r)) {
        sum->paused = false; /* the run ended: nothing to resume */
        if (!sum->interrupted && r->root) st = final_test(r, sum, err); /* rank 0 tests model.bin */
    }
    sum->steps = r->st.step;
    sum->stop_signal = r->stop_signal;
    sum->best_metric = r->st.best;
    sum->seconds = r->st.seconds; /* training and validation, as of the last save */
    teardown(r);
    return st;
}
