/* run_setup.c — a run set up and torn down: the config's and the machine's checks before
 * the folder is touched, a new run's folder and weights, a resumed run's state checked against
 * its config, data and log. */
#include "run_internal.h"
#include "s2s/corpus.h"
#include "s2s/distill.h"
#include "s2s/prepared.h"
#include "s2s/runlog.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- setup ---- */

/* The training pairs of epoch e: the task's, or with BPE-dropout their segmentation for that
 * epoch (a function of the seed and the epoch, so a resumed run sees the same pieces). */
const Dataset *run_epoch_data(Run *r, int e) {
    float p = r->cfg->task.bpe_dropout;
    if (p <= 0) return &r->data.train;
    if (r->sampled_epoch != e) {
        dataset_free(&r->sampled);
        Rng g;
        rng_init(&g, run_mix((uint64_t)r->cfg->seed, (uint64_t)e), RNG_STREAM_SUBWORD);
        Sides s = r->cfg->task.bpe_dropout_sides;
        task_sample_train(&r->data, s == SIDES_TARGET ? 0.0f : p, s == SIDES_SOURCE ? 0.0f : p, &g, &r->sampled);
        r->sampled_epoch = e;
    }
    return &r->sampled;
}

/* The batches of epoch e (the plan is a function of the seed, the epoch and the data); of
 * weighted corpora, the pairs the epoch draws (run_check_weights made sure there are some). */
void run_epoch_plan(Run *r, int e, BatchPlan *plan) {
    Rng shuf;
    rng_init(&shuf, run_mix((uint64_t)r->cfg->seed, (uint64_t)e), RNG_STREAM_SHUFFLE);
    const ConfigTrain *tc = &r->cfg->train;
    TrainCorpora c;
    S2sError ignored;
    if (r->cfg->task.type == TASK_TRANSLATE && config_train_corpora(&r->cfg->task, &c, &ignored) && config_corpora_weighted(&c)) {
        Rng draw;
        rng_init(&draw, run_mix((uint64_t)r->cfg->seed, (uint64_t)e), RNG_STREAM_CORPORA);
        int *order, n = task_weighted_epoch(&r->data.train_counts, &c, &draw, &order);
        batchplan_make_from(plan, run_epoch_data(r, e), order, n, tc->batch_size, tc->batch_tokens, 100, &shuf);
        return;
    }
    batchplan_make(plan, run_epoch_data(r, e), tc->batch_size, tc->batch_tokens, 100, &shuf);
}

/* Weighted corpora whose epoch would take no pair are refused before a step. */
static S2sStatus run_check_weights(const Run *r, S2sError *err) {
    TrainCorpora c;
    if (r->cfg->task.type != TASK_TRANSLATE || !config_train_corpora(&r->cfg->task, &c, err)) return S2S_OK;
    long total = task_weighted_pairs(&r->data.train_counts, &c);
    if (total < 1) return s2s_fail(err, S2S_ERR_CONFIG, "task.train_prefix \"%s\": the weights take no training pair an epoch",
                                   r->cfg->task.train_prefix);
    if (total >= 2000000000L) return s2s_fail(err, S2S_ERR_CONFIG, "task.train_prefix \"%s\": the weights take 2e9 pairs or more an epoch",
                                     r->cfg->task.train_prefix);
    return S2S_OK;
}

static double gb(double bytes) { return bytes / 1e9; }

/* Refuses, before anything large is allocated, a run whose parameters, optimizer state, data
 * and largest step (training, evaluation or greedy decoding) do not fit this machine. */
S2sStatus run_check_memory(Run *r, S2sError *err) {
    size_t limit = s2s_memory_limit();
    if (!limit) return S2S_OK;
    const Config *c = r->cfg;
    const ConfigTrain *tc = &c->train;
    int Vs = r->data.src_vocab.size, Vt = r->data.trg_vocab.size;
    double params = (double)model_param_count(&c->model, Vs, Vt);
    bool bf16 = tc->precision == PRECISION_BF16;
    double param_bytes = params * (4.0 * ((run_is_adam(c) ? 4 : 2) + (tc->ema_decay > 0 ? 1 : 0)) + (bf16 ? 2.0 : 0.0));
    int S = 1, T = 2, Se = 1, Te = 2;
    /* with BPE-dropout, the pieces of the epoch about to run (its pairs come out longer than
     * the plain segmentation, and differently each epoch: run_epoch checks each one again);
     * the no-merge worst case would refuse a Transformer whose real steps fit easily */
    bool sampled = c->task.bpe_dropout > 0 && r->st.epoch < tc->epochs;
    const Dataset *d = sampled ? run_epoch_data(r, r->st.epoch) : &r->data.train;
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
    /* an epoch's plan: its pairs' order, their shuffled copy and the batches' starts, each pair
     * 4 bytes three times and a batch's 8, at its peak (batchplan_make_from); weighted corpora
     * take weight × pairs an epoch (train:400 is 400 times the corpus) */
    TrainCorpora tcs;
    S2sError ignored;
    double pairs = c->task.type == TASK_TRANSLATE && config_train_corpora(&c->task, &tcs, &ignored) && config_corpora_weighted(&tcs)
                       ? (double)task_weighted_pairs(&r->data.train_counts, &tcs)
                       : (double)d->n;
    double plan = pairs * (3 * sizeof(int)) + pairs / (B > 0 ? B : 1) * 2 * sizeof(int);
    double data = (double)task_data_bytes(&r->data) + (sampled ? (double)dataset_bytes(d) : 0) + plan,
           base = 256e6; /* code, libraries, buffers */
    double need = param_bytes + steps[w].bytes + data + base;
    if (need <= (double)limit) return S2S_OK;
    if (plan > (double)limit / 4)
        return s2s_fail(err, S2S_ERR_CONFIG,
                        "%s: this run needs about %.1f GB and this machine allows %.1f GB: an epoch of %.0f pairs takes "
                        "%.1f GB to plan%s; take fewer pairs an epoch%s",
                        c->path[0] ? c->path : "config", gb(need), gb((double)limit), pairs, gb(plan),
                        pairs > d->n ? " (the weights of task.train_prefix)" : "",
                        pairs > d->n ? " (lower the weights)" : "");
    char epoch_note[64];
    snprintf(epoch_note, sizeof epoch_note, " in epoch %d's BPE-dropout pieces", r->st.epoch + 1);
    return s2s_fail(err, S2S_ERR_CONFIG,
                    "%s: this run needs about %.1f GB and this machine allows %.1f GB: %.1f million weights take %.1f GB with "
                    "their gradients%s, %s %.1f GB (%d sentences, sources of %d and targets of %d tokens%s), the data "
                    "%.1f GB; make the model, the batches (batch_size, eval_batch_size)%s or the sequences smaller",
                    c->path[0] ? c->path : "config", gb(need), gb((double)limit), params / 1e6, gb(param_bytes),
                    run_is_adam(c) ? " and Adam moments" : "", steps[w].what, gb(steps[w].bytes), steps[w].B, steps[w].S,
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
    int fd;
    S2sError ignored;
    if (file_open_regular(path, O_RDONLY, &fd, &ignored)) return false; /* a FIFO planted there never blocks */
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return false;
    }
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
        run_epoch_plan(r, s->epoch, &plan);
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
            run_epoch_plan(r, e, &plan);
            steps += plan.n_batches;
            batchplan_free(&plan);
        }
        if (s->step != steps)
            return BAD("%s: corrupt training state: step %ld, but epoch %d batch %d is step %ld", o, s->step, s->epoch + 1,
                       s->batch, steps);
    } else if (s->step != tc->max_steps) {
        return BAD("%s: corrupt training state: step %ld past train.max_steps %ld", o, s->step, tc->max_steps);
    }
    if (s->adam_step != (run_is_adam(r->cfg) ? s->step : 0))
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

/* A warmup longer than the run would never reach train.lr: a corpus smaller than the config
 * was written for, or a run shortened by train.max_steps or train.epochs. The warmup then
 * spans the run's first tenth (at least a step), said on the run's output; config.json keeps
 * the value used, so a resumed run follows the same schedule. The run's steps are the first
 * epoch's batches times the epochs (or train.max_steps). */
static void fit_warmup(Run *r) {
    ConfigTrain *tc = &r->cfg->train;
    if (tc->warmup_steps <= 0) return;
    BatchPlan plan;
    run_epoch_plan(r, 0, &plan);
    int batches = plan.n_batches;
    long steps = (long)batches * tc->epochs;
    batchplan_free(&plan);
    bool by_max = tc->max_steps > 0 && tc->max_steps < steps;
    if (by_max) steps = tc->max_steps;
    if (tc->warmup_steps <= steps) return;
    int fit = steps / 10 > 1 ? (int)(steps / 10) : 1;
    char why[64];
    if (by_max) snprintf(why, sizeof why, "train.max_steps");
    else snprintf(why, sizeof why, "%d epochs of %d batches", tc->epochs, batches);
    if (r->opt->out)
        fprintf(r->opt->out,
                "warning: train.warmup_steps=%d is longer than the run (%ld steps: %s); the lr warms up over its first "
                "%d instead (set train.warmup_steps to choose)\n",
                tc->warmup_steps, steps, why, fit);
    tc->warmup_steps = fit;
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

/* No file of the run's folder is one the run reads: its config, the corpus, the subword model,
 * the teachers (rundir_check_inputs). A config that is the run's own config.json is read whole
 * before and written back as its resolution, so `--config RUN/config.json --out RUN
 * --overwrite` starts a run anew; a resumed run reads its own last.bin. */
static S2sStatus check_inputs(const Run *r, S2sError *err) {
    const ConfigTask *t = &r->cfg->task;
    enum { MAX_TEACHERS = 16 };
    char(*paths)[PREPARED_PATH] = s2s_xcalloc(PREPARED_MAX_INPUTS, sizeof *paths);
    FileRole in[PREPARED_MAX_INPUTS + MAX_TEACHERS + 1];
    int n = 0;
    char own[PATH_MAX];
    rundir_path(own, sizeof own, r->opt->out_dir, RUN_CONFIG);
    if (!r->opt->resume && r->cfg->path[0] && file_distinct(&(FileRole){"", r->cfg->path}, 1, &(FileRole){"", own}, 1, err) == S2S_OK)
        in[n++] = (FileRole){"the config", r->cfg->path};
    if (t->type == TASK_TRANSLATE) {
        int k = prepared_input_files(t, paths);
        for (int i = 0; i < k; i++) in[n++] = (FileRole){"an input of the task", paths[i]};
    }
    char teachers[CONFIG_STR];
    snprintf(teachers, sizeof teachers, "%s", t->teacher);
    for (char *p = teachers, *save = NULL, *tok; n < (int)(sizeof in / sizeof *in) && (tok = strtok_r(p, ",", &save)); p = NULL)
        in[n++] = (FileRole){"a teacher", tok};
    S2sStatus st = rundir_check_inputs(r->opt->out_dir, in, n, err);
    free(paths);
    return st;
}

/* Every check of the config before the folder is touched, the tape and the data: a run that
 * cannot fit is refused before its folder is made. */
static S2sStatus check_and_load(Run *r, S2sError *err) {
    Config *cfg = r->cfg;
    S2sStatus st;
    if ((st = config_check(cfg, err))) return st;
    if (r->root && (st = check_inputs(r, err))) return st;
    if ((st = model_check_config(&cfg->model, cfg->path[0] ? cfg->path : "config", err))) return st;
    double data_est = task_memory_estimate(&cfg->task), limit = (double)s2s_memory_limit();
    if (limit > 0 && data_est > limit)
        return s2s_fail(err, S2S_ERR_CONFIG, "%s: the generated data need about %.1f GB; this machine allows %.1f GB",
                        cfg->path[0] ? cfg->path : "config", gb(data_est), gb(limit));
    if ((st = tape_init_engine(&r->tape, cfg->train.precision, cfg->train.gemm, cfg->train.threads, "\"precision\": \"bf16\"",
                              err)))
        return st;
    /* ranks share one machine's prepared file: rank 0 prepares it, the others read it after */
    bool ranks = r->dist && r->dist->size > 1;
    if (ranks && r->dist->rank != 0) dist_barrier(r->dist);
    TaskLoadHooks hooks = {r->opt->progress, r->opt->stop};
    ConfigTask task; /* distilling: with the teacher's translations, made first where they are not */
    st = distill_prepare(cfg, &task, ranks && r->dist->rank != 0 ? NULL : r->opt->out, &hooks, err);
    if (!st) st = task_load_hooks(&r->data, &task, &hooks, err);
    if (ranks && r->dist->rank == 0) dist_barrier(r->dist); /* rank 0's failure aborts them all (cli/train.c) */
    if (st || (st = run_check_weights(r, err))) return st;
    bool readable;
    r->data_digest = task_fingerprint(&r->data, &readable);
    if (!readable) return s2s_fail(err, S2S_ERR_IO, "%s: the prepared training data cannot be read back", r->data.prepared);
    r->valid_lines = r->data.valid.n; /* the digest above is the files', whatever is validated */
    task_keep_valid(&r->data, cfg->train.valid_max_lines);
    if ((st = run_check_memory(r, err))) return st;
    if (!r->opt->resume) fit_warmup(r);
    return S2S_OK;
}

S2sStatus run_setup(Run *r, S2sError *err) {
    Config *cfg = r->cfg;
    const TrainOptions *opt = r->opt;
    S2sStatus st;
    Checkpoint ck = {0};
    bool hash_saved = false;
    Digest saved_hash;
    if (opt->resume) {
        if ((st = r->root ? rundir_open(&r->dir, opt->out_dir, RUN_RESUME, err) : rundir_names(&r->dir, opt->out_dir, err)))
            return st;
        if ((st = run_load_last(r, &ck, err))) return st;
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
        if (isnan(r->st.best)) r->st.best = run_higher_is_better(cfg->train.metric) ? -INFINITY : INFINITY;
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
        if (hash_saved && !digest_equal(&saved_hash, &r->data_digest)) {
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
    if (run_is_adam(cfg) && (st = params_alloc_moments(&r->model.params, err))) goto out;
    r->font = font_open(NULL);
    if (!r->font && opt->out)
        fprintf(opt->out, "warning: DejaVu Sans not found (Debian: fonts-dejavu-core); pictures have no labels\n");
    r->adam = adam_from_config(&cfg->train);
    if (opt->resume) {
        if ((st = state_check(r, err))) goto out;
        if (run_is_adam(cfg) && r->st.adam_step > 0 && !ck.has_moments) {
            st = s2s_fail(err, S2S_ERR_CORRUPT, "%s: has no Adam moments after %ld steps; it cannot resume exactly",
                          r->dir.last, r->st.adam_step);
            goto out;
        }
        if ((st = ckpt_restore(&ck, &r->model.params, run_is_adam(cfg) && ck.has_moments, r->dir.last, err))) goto out;
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
        r->st.best = run_higher_is_better(cfg->train.metric) ? -INFINITY : INFINITY;
        r->log = r->root ? run_log_open(r->dir.log, true) : NULL;
        if (r->root && !r->log) {
            st = s2s_fail(err, S2S_ERR_IO, "%s: cannot create: %s", r->dir.log, strerror(errno));
            goto out;
        }
    }
    st = run_join_ranks(r, err);
out:
    ckpt_free(&ck);
    if (st && !opt->resume) forget_start(r);
    return st;
}

void run_teardown(Run *r) {
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

void run_print_data(FILE *out, const TaskData *td, const ConfigTask *t) {
    const CorpusCounts *c = &td->train_counts;
    char left[600] = "";
    size_t k = 0;
    TrainCorpora names;
    S2sError ignored;
    if (t->type == TASK_TRANSLATE && config_train_corpora(t, &names, &ignored) && names.n > 1)
        for (int i = 0; i < names.n; i++)
            k += (size_t)snprintf(left + k, sizeof left - k, "%s%s %ld × %g", i ? ", " : " (", names.prefix[i], c->kept_by[i],
                                  (double)names.weight[i]);
    if (k) k += (size_t)snprintf(left + k, sizeof left - k, ")");
    if (t->type == TASK_TRANSLATE && config_distills(t) && t->teacher_mix == TEACHER_REPLACE)
        k += (size_t)snprintf(left + k, sizeof left - k, " (the teacher's targets)");
    if (c->read > c->kept && k + 40 < sizeof left) {
        memcpy(left + k, " (", 3);
        corpus_counts_text(c, t, left + k + 2, sizeof left - k - 3);
        strcat(left, ")");
    }
    fprintf(out, "data: %d training pairs%s, vocabulary %d source / %d target (with 4 specials)\n", td->train.n, left,
            td->src_vocab.size, td->trg_vocab.size);
    if (td->prepared_state != PREPARED_NONE)
        fprintf(out, "data: %s %s%s%s\n",
                td->prepared_state == PREPARED_READ      ? "prepared data read from"
                : td->prepared_state == PREPARED_WRITTEN ? "prepared into"
                                                         : "not prepared: cannot write",
                td->prepared, td->prepared_note[0] ? " — " : "", td->prepared_note);
}

S2sStatus train_prepare(const Config *cfg, FILE *out, FILE *progress, const atomic_int *stop, S2sError *err) {
    TaskData td;
    TaskLoadHooks hooks = {progress, stop};
    ConfigTask task;
    S2sStatus st = config_check(cfg, err);
    if (!st && cfg->task.type != TASK_TRANSLATE)
        return s2s_fail(err, S2S_ERR_CONFIG, "--prepare: task.type %s makes its data as it runs; there is nothing to prepare",
                        TASK_TYPE_NAMES[cfg->task.type]);
    if (!st && !cfg->task.cache_dir[0])
        return s2s_fail(err, S2S_ERR_CONFIG, "--prepare: task.cache_dir is \"\": the data are prepared into that folder; "
                        "name one");
    if (!st) st = distill_prepare(cfg, &task, out, &hooks, err);
    if (!st) st = task_load_hooks(&td, &task, &hooks, err);
    if (st) return st;
    if (out) run_print_data(out, &td, &cfg->task);
    /* a run that cannot write its prepared file trains from memory; --prepare made nothing */
    if (td.prepared_state != PREPARED_READ && td.prepared_state != PREPARED_WRITTEN)
        st = s2s_fail(err, S2S_ERR_IO, "--prepare: nothing was prepared: %s cannot be written%s%s", td.prepared,
                      td.prepared_note[0] ? ": " : "", td.prepared_note);
    task_free(&td);
    return st;
}
