/* trainer.c — the training loop: steps, epochs, validation within and at the end of an
 * epoch, the final test, and train_run, which holds them together. Setup, checkpoints, rank
 * joining and the run's outputs are in the run_*.c files beside it (run_internal.h). */
#include "run_internal.h"
#include "s2s/runlog.h"

#include <math.h>
#include <string.h>

double run_metric_value(Metric metric, const EvalResult *r) {
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

static EvalOptions eval_options(const Run *r, char *const *refs, bool interruptible) {
    const ConfigTrain *tc = &r->cfg->train;
    bool reverse = r->cfg->task.type == TASK_REVERSE;
    return (EvalOptions){tc->eval_batch_size, tc->max_decode_len, true, &r->data.trg_vocab, refs,
                         reverse ? (r->cfg->task.source_markers ? 1 : 0) : -1, interruptible ? r->opt->stop : NULL,
                         interruptible ? NULL : r->dist}; /* validation is shared among the ranks; the final test is rank 0's */
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
    uint64_t stream = run_mix((uint64_t)r->cfg->seed, (uint64_t)r->st.step);
    if (r->dist && r->dist->size > 1) stream = run_mix(stream, (uint64_t)r->dist->rank); /* each rank its own masks */
    rng_init(&drop, stream, RNG_STREAM_DROPOUT);
    params_freeze(&r->model.params, tape_bf16(t)); /* fixed until the update: GEMMs may pack them */
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
        loss = tensor_item(o.loss, 0);
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
    S2sStatus st = r->cfg->task.bpe_dropout > 0 ? run_check_memory(r, err) : S2S_OK;
    if (st) return st;
    BatchPlan plan;
    run_epoch_plan(r, r->st.epoch, &plan);
    RunAhead ahead; /* the next batch read while this one trains */
    ahead_start(&ahead, run_epoch_data(r, r->st.epoch), &plan, r->st.batch, r->dist);
    double tick = run_now(), last_draw = 0, window_tokens = 0, window_t = tick;
    r->epoch_t0 = tick;
    r->epoch_tokens = 0;
    long done_here = 0;
    if (r->st.batch < plan.n_batches) run_progress_start(r, r->st.epoch, r->st.batch, plan.n_batches); /* not silent */
    while (r->st.batch < plan.n_batches) {
        int k = r->st.batch;
        Batch *b; /* this rank's share of batch k (B 0: more ranks than it has sentences) */
        if ((st = ahead_get(&ahead, k, &b, err))) break;
        int ntok;
        const char *what = "loss";
        /* the schedule follows the configured epochs; st.lr is its base (lr_decay lowers it) */
        double done_share = (r->st.epoch + (double)k / plan.n_batches) / tc->epochs;
        float lr = (float)(r->st.lr * optim_lr_factor(tc->lr_schedule, done_share, r->st.step + 1, tc->warmup_steps));
        double loss, objective = train_step(r, b, lr, &ntok, &loss, &what);
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
        double now = run_now();
        if (r->st.step % tc->log_every == 0) {
            cJSON *j = cJSON_CreateObject();
            cJSON_AddStringToObject(j, LOG_TYPE, LOG_STEP);
            cJSON_AddNumberToObject(j, LOG_EPOCH, r->st.epoch + 1);
            cJSON_AddNumberToObject(j, LOG_STEP, (double)r->st.step);
            cJSON_AddNumberToObject(j, LOG_LOSS, loss);
            cJSON_AddNumberToObject(j, LOG_LR, lr);
            cJSON_AddNumberToObject(j, LOG_TOKENS_PER_S, window_tokens / fmax(now - window_t, 1e-9));
            if ((st = run_log_line(r, j, err))) break;
            window_tokens = 0;
            window_t = now;
        }
        if (r->opt->progress && now - last_draw > 0.1) {
            double left = (double)run_steps_left(plan.n_batches, r->st.batch, tc->max_steps, r->st.step);
            double tps = r->epoch_tokens / fmax(now - tick, 1e-9);
            run_progress(r, r->st.epoch, k, plan.n_batches, r->st.loss_sum / fmax(r->st.tok_sum, 1), tps,
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
            window_t = run_now(); /* the speed of training alone */
            window_tokens = 0;
        }
        bool stop = stop_any(r), pause = pause_reached(r);
        if (stop || pause || (tc->save_every > 0 && r->st.step % tc->save_every == 0)) {
            if ((st = run_save(r, r->dir.last, true, err))) break;
            if (stop || pause) {
                sum->interrupted = stop;
                sum->paused = !stop;
                break;
            }
        }
    }
    if (r->opt->progress) fprintf(r->opt->progress, "\r\033[K");
    ahead_stop(&ahead);
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
    params_freeze(&r->model.params, tape_bf16(&r->tape)); /* weights fixed until the next step */
    eval_dataset(&r->tape, &r->model, &r->data.valid, &eo, &sum->valid, NULL);
    if (test_now) {
        EvalOptions to = eval_options(r, r->data.test_refs, false);
        eval_dataset(&r->tape, &r->model, &r->data.test, &to, test_now, NULL);
    }
    params_thaw(&r->model.params);
    double m = run_metric_value(tc->metric, &sum->valid);
    *better = run_higher_is_better(tc->metric) ? m > r->st.best : m < r->st.best;
    S2sStatus st = S2S_OK;
    if (*better) {
        r->st.best = m;
        r->st.bad_epochs = 0;
        st = run_save(r, r->dir.model, false, err);
    } else {
        r->st.bad_epochs++;
        if (tc->lr_decay < 1.0f) r->st.lr *= tc->lr_decay;
    }
    if (!st && (tc->keep_last > 0 || tc->keep_best > 0)) {
        char path[PATH_MAX + 64];
        rundir_path(path, sizeof path, r->dir.dir, RUN_CHECKPOINTS);
        if (!(st = file_mkdirs(path, err))) {
            rundir_checkpoint_path(path, sizeof path, r->dir.dir, r->st.step);
            st = run_save(r, path, false, err);
        }
    }
    if (ema) params_swap_ema(&r->model.params); /* the training weights again */
    return st;
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
    run_eval_json(j, LOG_VALID_, &sum->valid, true);
    cJSON_AddNumberToObject(j, LOG_METRIC, run_metric_value(r->cfg->train.metric, &sum->valid));
    cJSON_AddBoolToObject(j, LOG_BEST, better);
    cJSON_AddNumberToObject(j, LOG_ELAPSED_S, r->st.seconds + run_now() - r->t0);
    if ((st = run_log_line(r, j, err))) return st;
    if (r->root) run_prune_checkpoints(r);
    FILE *out = r->opt->out;
    if (out)
        fprintf(out, "\r\033[Kstep %ld  valid loss %.4f  ppl %.3f  %s %.4g%s\n", r->st.step, sum->valid.loss, sum->valid.ppl,
                METRIC_NAMES[r->cfg->train.metric], run_metric_value(r->cfg->train.metric, &sum->valid), better ? "  *" : "");
    return run_save(r, r->dir.last, true, err);
}

/* The end of an epoch: validation, the best checkpoint, plateau decay, the log line, then
 * last.bin, then the pictures. */
static S2sStatus end_epoch(Run *r, TrainSummary *sum, S2sError *err) {
    const ConfigTrain *tc = &r->cfg->train;
    double train_loss = r->st.loss_sum / fmax(r->st.tok_sum, 1);
    double epoch_s = run_now() - r->epoch_t0; /* the batches of this session, without validation */
    bool ema = r->model.params.ema != NULL, better;
    EvalResult test_now = {0};
    bool test_now_too = tc->test_each_epoch && r->data.test.n > 0;
    S2sStatus st = validate(r, sum, test_now_too ? &test_now : NULL, &better, err);
    if (st) return st;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, LOG_TYPE, LOG_EPOCH);
    cJSON_AddNumberToObject(j, LOG_EPOCH, r->st.epoch + 1);
    cJSON_AddNumberToObject(j, LOG_STEP, (double)r->st.step);
    cJSON_AddNumberToObject(j, LOG_TRAIN_LOSS, train_loss);
    run_eval_json(j, LOG_VALID_, &sum->valid, true);
    if (tc->keep_last > 0 || tc->keep_best > 0 || tc->valid_every > 0)
        cJSON_AddNumberToObject(j, LOG_METRIC, run_metric_value(tc->metric, &sum->valid));
    cJSON_AddBoolToObject(j, LOG_BEST, better);
    /* the lr the next epoch starts with (schedule and plateau decay applied) */
    cJSON_AddNumberToObject(j, LOG_LR, r->st.lr * optim_lr_factor(tc->lr_schedule, (r->st.epoch + 1.0) / tc->epochs,
                                                                  r->st.step + 1, tc->warmup_steps));
    cJSON_AddNumberToObject(j, LOG_TOKENS_PER_S, r->epoch_tokens / fmax(epoch_s, 1e-9));
    cJSON_AddNumberToObject(j, LOG_EPOCH_S, epoch_s);
    /* wall time of the run so far, evaluations included (time-to-quality) */
    cJSON_AddNumberToObject(j, LOG_ELAPSED_S, r->st.seconds + run_now() - r->t0);
    if (test_now_too) run_eval_json(j, LOG_TEST_, &test_now, true);
    if ((st = run_log_line(r, j, err))) return st;
    if (r->root) run_prune_checkpoints(r);
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
    if ((st = run_save(r, r->dir.last, true, err))) return st;
    if (ema) params_swap_ema(&r->model.params); /* the pictures of the weights validated */
    if (r->root) run_draw_epoch(r);
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
    if (r->data.test.n == 0) { /* task.test_prefix "": model.bin is the result */
        if (r->opt->out) fprintf(r->opt->out, "test: none (task.test_prefix is \"\")\n");
        return S2S_OK;
    }
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
    params_freeze(&r->model.params, tape_bf16(&r->tape));
    eval_dataset(&r->tape, &r->model, &r->data.test, &eo, &sum->test, &hyps);
    params_thaw(&r->model.params);
    if (sum->test.interrupted) {
        idseqs_free(&hyps);
        sum->interrupted = true;
        return S2S_OK;
    }
    st = run_write_test_outputs(r, &hyps, err);
    idseqs_free(&hyps);
    if (st) return st;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, LOG_TYPE, LOG_TEST);
    cJSON_AddNumberToObject(j, LOG_EPOCHS, r->st.epoch);
    cJSON_AddNumberToObject(j, LOG_STEP, (double)r->st.step);
    run_eval_json(j, LOG_TEST_, &sum->test, true);
    if ((st = run_log_line(r, j, err))) return st;
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
    S2sStatus st = run_log_line(r, j, err);
    if (st) return st;
    if (r->opt->out) {
        bool stretched = tc->lr_schedule == LR_LINEAR || tc->lr_schedule == LR_COSINE;
        fprintf(r->opt->out, "train: %d epochs in all (the config said %d)%s\n", tc->epochs, r->extended_from,
                stretched ? "; the lr schedule spans the new length, so the lr is raised again" : "");
    }
    return run_save(r, r->dir.last, true, err);
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
    S2sStatus st = run_setup(r, err);
    if (st) {
        run_teardown(r);
        return st;
    }
    if (opt->out) run_print_data(opt->out, &r->data, &cfg->task);
    if (opt->out && r->data.valid.n < r->valid_lines)
        fprintf(opt->out, "data: validations score the first %d of the %d validation pairs (train.valid_max_lines)\n",
                r->data.valid.n, r->valid_lines);
    size_t milli;
    int quota = cfg->train.threads > 0 ? 0 : gemm_quota_threads(&milli);
    if (opt->out && quota)
        fprintf(opt->out, "threads: %d, the CPU quota of this process's cgroup (%.2f CPUs); train.threads or "
                "OMP_NUM_THREADS chooses another\n", quota, (double)milli / 1000);
    if (opt->out && cfg->train.threads > gemm_cpus()) /* the numbers depend on the count: kept, and said */
        fprintf(opt->out, "threads: %d, more than the %d CPUs this process may run on: slower than %d would be\n",
                cfg->train.threads, gemm_cpus(), gemm_cpus());
    if (opt->out)
        fprintf(opt->out, "parameters: %zu (%s)\n", params_numel(&r->model.params),
                model_label(&cfg->model));
    r->t0 = run_now();
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
    run_teardown(r);
    return st;
}
