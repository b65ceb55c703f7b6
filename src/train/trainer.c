/* trainer.c — the training loop, its log and checkpoints. */
#include "s2s/train.h"
#include "s2s/gemm.h"
#include "s2s/checkpoint.h"
#include "s2s/file.h"
#include "s2s/optim.h"
#include "s2s/visuals.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
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

typedef struct State {
    int epoch, batch;       /* next batch to run */
    long step;
    long adam_step;
    double lr;
    double best;
    int bad_epochs;
    double loss_sum;        /* this epoch so far: Σ loss·tokens, tokens */
    double tok_sum;
    long log_bytes;         /* log.jsonl length at this state */
    double seconds;         /* training time before this session */
} State;

static char *state_to_json(const State *s) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "epoch", s->epoch);
    cJSON_AddNumberToObject(j, "batch", s->batch);
    cJSON_AddNumberToObject(j, "step", (double)s->step);
    cJSON_AddNumberToObject(j, "adam_step", (double)s->adam_step);
    cJSON_AddNumberToObject(j, "lr", s->lr);
    if (isfinite(s->best)) cJSON_AddNumberToObject(j, "best", s->best);
    else cJSON_AddNullToObject(j, "best"); /* no validation yet */
    cJSON_AddNumberToObject(j, "bad_epochs", s->bad_epochs);
    cJSON_AddNumberToObject(j, "loss_sum", s->loss_sum);
    cJSON_AddNumberToObject(j, "tok_sum", s->tok_sum);
    cJSON_AddNumberToObject(j, "log_bytes", (double)s->log_bytes);
    cJSON_AddNumberToObject(j, "seconds", s->seconds);
    char *txt = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return txt;
}

static S2sStatus state_from_json(State *s, const char *txt, const char *origin, S2sError *err) {
    cJSON *j = cJSON_Parse(txt);
    if (!j) return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: training state is not JSON", origin);
    const char *keys[] = {"epoch", "batch", "step", "adam_step", "lr", "best", "bad_epochs", "loss_sum", "tok_sum", "log_bytes", "seconds"};
    double v[11];
    for (int i = 0; i < 11; i++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, keys[i]);
        if (i == 5 && cJSON_IsNull(x)) { /* best: none yet; the caller sets the sign */
            v[i] = NAN;
            continue;
        }
        if (!cJSON_IsNumber(x)) {
            cJSON_Delete(j);
            return s2s_fail(err, S2S_ERR_CORRUPT, "%s: corrupt: training state lacks \"%s\"", origin, keys[i]);
        }
        v[i] = x->valuedouble;
    }
    cJSON_Delete(j);
    *s = (State){(int)v[0], (int)v[1], (long)v[2], (long)v[3], v[4], v[5], (int)v[6], v[7], v[8], (long)v[9], v[10]};
    return S2S_OK;
}

typedef struct Run {
    Config *cfg;
    const TrainOptions *opt;
    TaskData data;
    Seq2Seq model;
    Tape tape;
    Adam adam;
    State st;
    FILE *log;
    Font *font; /* NULL: pictures without labels */
    char path_model[PATH_MAX], path_last[PATH_MAX], path_log[PATH_MAX], path_config[PATH_MAX];
} Run;

static bool metric_higher_is_better(const char *metric) { return strcmp(metric, "valid_loss") != 0; }

static double metric_value(const char *metric, const EvalResult *r) {
    if (!strcmp(metric, "valid_loss")) return r->loss;
    if (!strcmp(metric, "token_accuracy")) return r->token_acc;
    if (!strcmp(metric, "tf_token_accuracy")) return r->tf_token_acc;
    if (!strcmp(metric, "bleu")) return r->bleu;
    return r->exact_match; /* exact_match (bleu comes with the translation task) */
}

static S2sStatus save(Run *r, const char *path, bool last, S2sError *err) {
    char *conf = config_to_json(r->cfg);
    char *state = NULL;
    if (last) {
        r->st.adam_step = r->adam.step;
        fflush(r->log);
        r->st.log_bytes = ftell(r->log);
        state = state_to_json(&r->st);
    }
    CkptSave s = {conf,
                  (const char *const *)r->data.src_vocab.tokens, r->data.src_vocab.size,
                  (const char *const *)r->data.trg_vocab.tokens, r->data.trg_vocab.size,
                  &r->model.params, last && r->model.params.m != NULL, state};
    S2sStatus rc = ckpt_save(path, &s, err);
    free(conf);
    free(state);
    return rc;
}

static void log_line(Run *r, cJSON *j) {
    char *txt = cJSON_PrintUnformatted(j);
    fprintf(r->log, "%s\n", txt);
    fflush(r->log);
    free(txt);
    cJSON_Delete(j);
}

static cJSON *eval_json(cJSON *j, const char *prefix, const EvalResult *e, bool greedy) {
    char k[64];
#define ADD(name, val) (snprintf(k, sizeof k, "%s_%s", prefix, name), cJSON_AddNumberToObject(j, k, val))
    ADD("loss", e->loss);
    ADD("ppl", e->ppl);
    ADD("tf_token_accuracy", e->tf_token_acc);
    if (greedy) {
        ADD("exact_match", e->exact_match);
        ADD("token_accuracy", e->token_acc);
    }
    if (e->has_bleu) ADD("bleu", e->bleu);
    if (e->has_attn) ADD("attention_entropy", e->attn_entropy);
    if (e->has_align) ADD("alignment_accuracy", e->align_acc);
#undef ADD
    return j;
}

static EvalOptions eval_options(const Run *r, char *const *refs) {
    const ConfigTrain *tc = &r->cfg->train;
    bool reverse = strcmp(r->cfg->task.type, "reverse") == 0;
    return (EvalOptions){tc->eval_batch_size, tc->max_decode_len, true, &r->data.trg_vocab, refs,
                         reverse ? (r->cfg->task.source_markers ? 1 : 0) : -1};
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
    snprintf(path, sizeof path, "%s/test.hyp", r->opt->out_dir);
    st = file_write_atomic(path, buf[0], n[0], err);
    snprintf(path, sizeof path, "%s/test.ref", r->opt->out_dir);
    if (!st) st = file_write_atomic(path, buf[1], n[1], err);
    free(buf[0]);
    free(buf[1]);
    return st;
}

/* After an epoch: heatmaps of the first validation examples (greedy decoding) into
 * dir/attention/, and dir/curves.png. Pictures are secondary: a failure is a warning. */
static void draw_epoch(Run *r) {
    S2sError err;
    char path[PATH_MAX], title[256];
    const char *dir = r->opt->out_dir;
    if (r->model.attn.v->has_weights && r->data.valid.n > 0) {
        snprintf(path, sizeof path, "%s/attention", dir);
        if (file_mkdirs(path, &err)) goto warn;
        int n = r->data.valid.n < 4 ? r->data.valid.n : 4, idx[4] = {0, 1, 2, 3};
        Batch b;
        batch_init(&b);
        batch_fill(&b, &r->data.valid, idx, n);
        int L = eval_max_len(r->cfg->train.max_decode_len, b.S);
        int32_t *out = s2s_xmalloc((size_t)n * L * sizeof *out);
        int *len = s2s_xmalloc((size_t)n * sizeof *len);
        float *attn = s2s_xmalloc((size_t)n * L * b.S * sizeof *attn);
        tape_reset(&r->tape);
        model_greedy(&r->tape, &r->model, &b, L, out, len, attn);
        S2sStatus st = S2S_OK;
        for (int i = 0; i < n && !st; i++) {
            int e = b.index[i];
            DecodedAttention a = {r->data.valid.ids + r->data.valid.src_off[e], r->data.valid.src_len[e], out + (size_t)i * L,
                                  len[i], len[i] < L, attn + (size_t)i * L * b.S, b.S};
            snprintf(path, sizeof path, "%s/attention/epoch%02d_ex%d.png", dir, r->st.epoch + 1, i + 1);
            snprintf(title, sizeof title, "%s - %s attention - epoch %d - validation example %d", r->cfg->name,
                     r->cfg->model.attention, r->st.epoch + 1, i + 1);
            st = visuals_heatmap(path, title, &r->data.src_vocab, &r->data.trg_vocab, &a, r->font, &err);
        }
        free(out);
        free(len);
        free(attn);
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

static S2sStatus setup(Run *r, S2sError *err) {
    Config *cfg = r->cfg;
    const char *dir = r->opt->out_dir;
    snprintf(r->path_model, sizeof r->path_model, "%s/model.bin", dir);
    snprintf(r->path_last, sizeof r->path_last, "%s/last.bin", dir);
    snprintf(r->path_log, sizeof r->path_log, "%s/log.jsonl", dir);
    snprintf(r->path_config, sizeof r->path_config, "%s/config.json", dir);
    S2sStatus st;
    Checkpoint ck = {0};
    if (r->opt->resume) {
        if ((st = ckpt_load(&ck, r->path_last, err))) return st;
        Config saved;
        config_defaults(&saved);
        if ((st = config_parse(&saved, ck.config_json, r->path_last, err))) goto out;
        *cfg = saved;
        if (!ck.state_json) {
            st = s2s_fail(err, S2S_ERR_CORRUPT, "%s: has no training state to resume from", r->path_last);
            goto out;
        }
        if ((st = state_from_json(&r->st, ck.state_json, r->path_last, err))) goto out;
        if (isnan(r->st.best)) r->st.best = metric_higher_is_better(cfg->train.metric) ? -INFINITY : INFINITY;
    } else {
        if ((st = file_mkdirs(dir, err))) return st;
    }
    if ((st = config_check(cfg, err))) goto out;
    if ((st = model_check_config(&cfg->model, cfg->path[0] ? cfg->path : "config", err))) goto out;
    /* the resolved config beside the run; also proves the folder is writable before training */
    char *conf = config_to_json(cfg);
    st = file_write_atomic(r->path_config, conf, strlen(conf), err);
    free(conf);
    if (st) goto out;
    gemm_set_threads(cfg->train.threads);
    bool bf16 = strcmp(cfg->train.precision, "bf16") == 0;
    if (bf16 && (st = gemm_bf16_check("\"precision\": \"bf16\"", err))) goto out;
    if ((st = task_load(&r->data, &cfg->task, err))) goto out;
    if ((st = model_init(&r->model, &cfg->model, r->data.src_vocab.size, r->data.trg_vocab.size, err))) goto out;
    r->font = font_open(NULL);
    if (!r->font && r->opt->out)
        fprintf(r->opt->out, "warning: DejaVu Sans not found (Debian: fonts-dejavu-core); pictures have no labels\n");
    r->adam = adam_default();
    r->adam.lr = cfg->train.lr;
    tape_init(&r->tape, 1 << 20);
    r->tape.bf16 = bf16;
    r->tape.openblas = strcmp(cfg->train.gemm, "openblas") == 0;
    if (r->opt->resume) {
        bool moments = strcmp(cfg->train.optimizer, "adam") == 0;
        if ((st = ckpt_restore(&ck, &r->model.params, moments && ck.has_moments, r->path_last, err))) goto out;
        r->adam.step = r->st.adam_step;
        r->adam.lr = (float)r->st.lr;
        r->log = fopen(r->path_log, "r+");
        if (!r->log || ftruncate(fileno(r->log), r->st.log_bytes) != 0 || fseek(r->log, 0, SEEK_END) != 0) {
            st = s2s_fail(err, S2S_ERR_IO, "%s: cannot reopen the log: %s", r->path_log, strerror(errno));
            goto out;
        }
    } else {
        Rng init;
        rng_init(&init, (uint64_t)cfg->seed, RNG_STREAM_INIT);
        model_init_weights(&r->model, &init);
        r->st = (State){0};
        r->st.lr = cfg->train.lr;
        r->st.best = metric_higher_is_better(cfg->train.metric) ? -INFINITY : INFINITY;
        r->log = fopen(r->path_log, "w");
        if (!r->log) {
            st = s2s_fail(err, S2S_ERR_IO, "%s: cannot create: %s", r->path_log, strerror(errno));
            goto out;
        }
    }
out:
    ckpt_free(&ck);
    return st;
}

static void teardown(Run *r) {
    if (r->log) fclose(r->log);
    font_close(r->font);
    tape_free(&r->tape);
    model_free(&r->model);
    task_free(&r->data);
}

/* One optimizer step on a batch; returns the loss. A non-finite loss or gradient returns
 * before any weight changes (*what says which), for the caller to report. */
static double train_step(Run *r, const Batch *b, float lr, int *n_tokens, const char **what) {
    Tape *t = &r->tape;
    tape_reset(t);
    t->training = true;
    t->grad_enabled = true;
    Rng drop;
    rng_init(&drop, mix((uint64_t)r->cfg->seed, (uint64_t)r->st.step), RNG_STREAM_DROPOUT);
    ModelOutput o = model_forward(t, &r->model, b, &drop);
    double loss = o.loss->data[0];
    *n_tokens = o.n_tokens;
    *what = "loss";
    if (!isfinite(loss)) return loss;
    params_zero_grad(&r->model.params);
    tape_backward(t, o.loss);
    double norm = r->cfg->train.clip > 0 ? grad_clip_global_norm(&r->model.params, r->cfg->train.clip)
                                         : grad_global_norm(&r->model.params);
    if (!isfinite(norm)) { /* never apply a NaN update */
        *what = "gradient norm";
        return norm;
    }
    if (strcmp(r->cfg->train.optimizer, "sgd") == 0) sgd_step(&r->model.params, lr);
    else {
        r->adam.lr = lr;
        adam_step(&r->adam, &r->model.params);
    }
    r->st.step++;
    return loss;
}

S2sStatus train_run(Config *cfg, const TrainOptions *opt, TrainSummary *sum, S2sError *err) {
    memset(sum, 0, sizeof *sum);
    Run run;
    memset(&run, 0, sizeof run);
    Run *r = &run;
    r->cfg = cfg;
    r->opt = opt;
    S2sStatus st = setup(r, err);
    if (st) {
        teardown(r);
        return st;
    }
    const ConfigTrain *tc = &cfg->train;
    if (opt->out)
        fprintf(opt->out, "data: %d training pairs%s, vocabulary %d source / %d target (with 4 specials)\n",
                r->data.train.n, r->data.train_skipped ? " (some left out: empty or too long)" : "",
                r->data.src_vocab.size, r->data.trg_vocab.size);
    long max_steps = opt->max_steps > 0 ? opt->max_steps : tc->max_steps;
    bool higher = metric_higher_is_better(tc->metric);
    double t0 = now_s();
    Batch b;
    batch_init(&b);
    bool stop = false;
    while (!stop && r->st.epoch < tc->epochs) {
        Rng shuf;
        rng_init(&shuf, mix((uint64_t)cfg->seed, (uint64_t)r->st.epoch), RNG_STREAM_SHUFFLE);
        BatchPlan plan;
        batchplan_make(&plan, &r->data.train, tc->batch_size, tc->batch_tokens, 100, &shuf);
        double tick = now_s(), last_draw = 0, window_tokens = 0, window_t = now_s();
        for (; r->st.batch < plan.n_batches; r->st.batch++) {
            int k = r->st.batch;
            batch_fill(&b, &r->data.train, plan.order + plan.start[k], plan.start[k + 1] - plan.start[k]);
            int ntok;
            const char *what = "loss";
            /* the schedule follows the configured epochs; st.lr is its base (lr_decay lowers it) */
            double done_share = (r->st.epoch + (double)k / plan.n_batches) / tc->epochs;
            float lr = (float)(r->st.lr * optim_lr_factor(tc->lr_schedule, done_share));
            double loss = train_step(r, &b, lr, &ntok, &what);
            if (!isfinite(loss)) {
                st = s2s_fail(err, S2S_ERR_NUMERIC,
                              "step %ld (epoch %d, batch %d): the %s is %s; stopped, %s keeps the last good state",
                              r->st.step + 1, r->st.epoch + 1, k + 1, what, isnan(loss) ? "NaN" : "infinite", r->path_last);
                batchplan_free(&plan);
                goto done;
            }
            r->st.loss_sum += loss * ntok;
            r->st.tok_sum += ntok;
            window_tokens += ntok;
            double now = now_s();
            if (r->st.step % tc->log_every == 0) {
                cJSON *j = cJSON_CreateObject();
                cJSON_AddStringToObject(j, "type", "step");
                cJSON_AddNumberToObject(j, "epoch", r->st.epoch + 1);
                cJSON_AddNumberToObject(j, "step", (double)r->st.step);
                cJSON_AddNumberToObject(j, "loss", loss);
                cJSON_AddNumberToObject(j, "lr", lr);
                cJSON_AddNumberToObject(j, "tokens_per_s", window_tokens / fmax(now - window_t, 1e-9));
                log_line(r, j);
                window_tokens = 0;
                window_t = now;
            }
            if (opt->progress && now - last_draw > 0.1) {
                double done = k + 1, left = plan.n_batches - done;
                double tps = r->st.tok_sum / fmax(now - tick, 1e-9);
                progress(r, r->st.epoch, k, plan.n_batches, r->st.loss_sum / fmax(r->st.tok_sum, 1), tps,
                         (now - tick) / done * left);
                last_draw = now;
            }
            if ((max_steps > 0 && r->st.step >= max_steps) || (opt->stop && *opt->stop)) {
                r->st.batch++;
                sum->interrupted = opt->stop && *opt->stop;
                stop = true;
                break;
            }
        }
        int n_batches = plan.n_batches;
        batchplan_free(&plan);
        if (opt->progress) fprintf(opt->progress, "\r\033[K");
        if (stop && r->st.batch < n_batches) { /* mid-epoch: resumable state only */
            r->st.seconds += now_s() - t0;
            t0 = now_s();
            if ((st = save(r, r->path_last, true, err))) goto done;
            break;
        }
        /* end of epoch: validate, keep the best, decay, maybe stop early */
        double train_loss = r->st.loss_sum / fmax(r->st.tok_sum, 1);
        double epoch_s = now_s() - tick;
        EvalOptions eo = eval_options(r, r->data.valid_refs);
        if (r->tape.bf16) params_bf16_snapshot(&r->model.params); /* weights fixed until the next step */
        eval_dataset(&r->tape, &r->model, &r->data.valid, &eo, &sum->valid, NULL);
        EvalResult test_now = {0};
        if (tc->test_each_epoch) {
            EvalOptions to = eval_options(r, r->data.test_refs);
            eval_dataset(&r->tape, &r->model, &r->data.test, &to, &test_now, NULL);
        }
        double m = metric_value(tc->metric, &sum->valid);
        bool better = higher ? m > r->st.best : m < r->st.best;
        if (better) {
            r->st.best = m;
            r->st.bad_epochs = 0;
            if ((st = save(r, r->path_model, false, err))) goto done;
        } else {
            r->st.bad_epochs++;
            if (tc->lr_decay < 1.0f) r->st.lr *= tc->lr_decay;
        }
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "type", "epoch");
        cJSON_AddNumberToObject(j, "epoch", r->st.epoch + 1);
        cJSON_AddNumberToObject(j, "step", (double)r->st.step);
        cJSON_AddNumberToObject(j, "train_loss", train_loss);
        eval_json(j, "valid", &sum->valid, true);
        cJSON_AddBoolToObject(j, "best", better);
        /* the lr the next epoch starts with (schedule and plateau decay applied) */
        cJSON_AddNumberToObject(j, "lr", r->st.lr * optim_lr_factor(tc->lr_schedule, (r->st.epoch + 1.0) / tc->epochs));
        cJSON_AddNumberToObject(j, "tokens_per_s", r->st.tok_sum / fmax(epoch_s, 1e-9));
        cJSON_AddNumberToObject(j, "epoch_s", epoch_s);
        /* wall time of the run so far, evaluations included (time-to-quality) */
        cJSON_AddNumberToObject(j, "elapsed_s", r->st.seconds + now_s() - t0);
        if (tc->test_each_epoch) eval_json(j, "test", &test_now, true);
        log_line(r, j);
        draw_epoch(r);
        params_bf16_drop(&r->model.params);
        if (opt->out && sum->valid.has_bleu)
            fprintf(opt->out, "epoch %2d  train loss %.4f  valid loss %.4f  ppl %.3f  BLEU %.2f  tf token acc %.2f%%  %.1fs%s\n",
                    r->st.epoch + 1, train_loss, sum->valid.loss, sum->valid.ppl, sum->valid.bleu,
                    100 * sum->valid.tf_token_acc, epoch_s, better ? "  *" : "");
        else if (opt->out)
            fprintf(opt->out,
                    "epoch %2d  train loss %.4f  valid loss %.4f  ppl %.3f  exact %.2f%%  token acc %.2f%%  tf token acc "
                    "%.2f%%  %.1fs%s\n",
                    r->st.epoch + 1, train_loss, sum->valid.loss, sum->valid.ppl, 100 * sum->valid.exact_match,
                    100 * sum->valid.token_acc, 100 * sum->valid.tf_token_acc, epoch_s, better ? "  *" : "");
        r->st.epoch++;
        r->st.batch = 0;
        r->st.loss_sum = r->st.tok_sum = 0;
        sum->epochs = r->st.epoch;
        if (tc->patience > 0 && r->st.bad_epochs >= tc->patience) {
            sum->early_stopped = true;
            stop = true;
        }
        r->st.seconds += now_s() - t0;
        t0 = now_s();
        if ((st = save(r, r->path_last, true, err))) goto done;
        if (opt->stop && *opt->stop) {
            sum->interrupted = true;
            stop = true;
        }
        if (max_steps > 0 && r->st.step >= max_steps) stop = true;
    }
    sum->steps = r->st.step;
    sum->best_metric = r->st.best;
    sum->seconds = r->st.seconds;
    if (!sum->interrupted && access(r->path_model, R_OK) == 0) {
        /* the test split, on the best checkpoint */
        Checkpoint ck;
        if ((st = ckpt_load(&ck, r->path_model, err))) goto done;
        st = ckpt_restore(&ck, &r->model.params, false, r->path_model, err);
        ckpt_free(&ck);
        if (st) goto done;
        EvalOptions eo = eval_options(r, r->data.test_refs);
        IdSeqs hyps;
        if (r->tape.bf16) params_bf16_snapshot(&r->model.params);
        eval_dataset(&r->tape, &r->model, &r->data.test, &eo, &sum->test, &hyps);
        params_bf16_drop(&r->model.params);
        st = write_test_outputs(r, &hyps, err);
        idseqs_free(&hyps);
        if (st) goto done;
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "type", "test");
        cJSON_AddNumberToObject(j, "epochs", r->st.epoch);
        cJSON_AddNumberToObject(j, "step", (double)r->st.step);
        eval_json(j, "test", &sum->test, true);
        log_line(r, j);
        if (opt->out && sum->test.has_bleu)
            fprintf(opt->out, "test (best checkpoint): loss %.4f  ppl %.3f  BLEU %.2f (greedy)  tf token acc %.2f%%\n",
                    sum->test.loss, sum->test.ppl, sum->test.bleu, 100 * sum->test.tf_token_acc);
        else if (opt->out)
            fprintf(opt->out, "test (best checkpoint): loss %.4f  ppl %.3f  exact %.2f%%  token acc %.2f%%  tf token acc %.2f%%\n",
                    sum->test.loss, sum->test.ppl, 100 * sum->test.exact_match, 100 * sum->test.token_acc,
                    100 * sum->test.tf_token_acc);
    }
done:
    batch_free(&b);
    teardown(r);
    return st;
}
