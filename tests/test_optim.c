/* test_optim.c — Adam against two steps derived by hand, SGD, global-norm clipping, and the lr
 * schedules with warmup against PyTorch. */
#include "../src/train/run_internal.h" /* run_steps_left */
#include "test_util.h"
#include "s2s/optim.h"
#include "s2s/trainer.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>

static ParamStore one_param(Tensor **p, int n) {
    ParamStore ps;
    params_init(&ps);
    *p = params_add(&ps, "p", 1, (int[]){n});
    cr_assert_eq(params_alloc(&ps, NULL), S2S_OK);
    return ps;
}

/* By hand, lr 1e-3, β 0.9/0.999, ε 1e-8, p0 = 1:
 * step 1, g = 0.5:  m = 0.05, v = 0.00025; m̂ = 0.5, v̂ = 0.25;
 *                   p1 = 1 − 1e-3 · 0.5 / (0.5 + 1e-8)
 * step 2, g = −1:   m = 0.045 − 0.1 = −0.055, v = 0.00024975 + 0.001 = 0.00124975;
 *                   p2 = p1 − 1e-3 · (m / 0.19) / (sqrt(v / 0.001999) + 1e-8) */
Test(optim, adam_two_steps_by_hand) {
    Tensor *p;
    ParamStore ps = one_param(&p, 1);
    p->data[0] = 1.0f;
    Adam a = adam_default();
    p->grad[0] = 0.5f;
    adam_step(&a, &ps);
    double p1 = 1.0 - 1e-3 * 0.5 / (0.5 + 1e-8);
    cr_expect(fabs(p->data[0] - p1) < 1e-7, "step 1: %.9f vs %.9f", p->data[0], p1);
    p->grad[0] = -1.0f;
    adam_step(&a, &ps);
    double m = -0.055, v = 0.00124975;
    double p2 = p1 - 1e-3 * (m / 0.19) / (sqrt(v / 0.001999) + 1e-8);
    cr_expect(fabs(p->data[0] - p2) < 1e-7, "step 2: %.9f vs %.9f", p->data[0], p2);
    cr_expect_eq(a.step, 2);
    params_free(&ps);
}

Test(optim, sgd) {
    Tensor *p;
    ParamStore ps = one_param(&p, 2);
    p->data[0] = 1.0f;
    p->data[1] = -2.0f;
    p->grad[0] = 0.5f;
    p->grad[1] = 1.0f;
    sgd_step(&ps, 0.1f, 0.0f);
    cr_expect_float_eq(p->data[0], 0.95f, 1e-7);
    cr_expect_float_eq(p->data[1], -2.1f, 1e-7);
    params_free(&ps);
}

Test(optim, clip_global_norm) {
    Tensor *p;
    ParamStore ps = one_param(&p, 2);
    p->grad[0] = 3.0f;
    p->grad[1] = 4.0f;
    double n = grad_clip_global_norm(&ps, 10.0);
    cr_expect_float_eq(n, 5.0, 1e-9);
    cr_expect_eq(p->grad[0], 3.0f, "below the limit nothing changes");
    n = grad_clip_global_norm(&ps, 1.0);
    cr_expect_float_eq(n, 5.0, 1e-9);
    cr_expect_float_eq(p->grad[0], 0.6f, 1e-6);
    cr_expect_float_eq(p->grad[1], 0.8f, 1e-6);
    cr_expect_float_eq(grad_global_norm(&ps), 1.0, 1e-6);
    params_free(&ps);
}

Test(optim, lr_schedules) {
    cr_expect_eq(optim_lr_factor(LR_CONSTANT, 0.0, 1, 0), 1.0);
    cr_expect_eq(optim_lr_factor(LR_CONSTANT, 0.7, 1, 0), 1.0);
    cr_expect_float_eq(optim_lr_factor(LR_LINEAR, 0.25, 1, 0), 0.75, 1e-15);
    cr_expect_float_eq(optim_lr_factor(LR_COSINE, 0.5, 1, 0), 0.5, 1e-15);
    cr_expect_float_eq(optim_lr_factor(LR_COSINE, 0.25, 1, 0), 0.5 * (1.0 + sqrt(0.5)), 1e-15);
    for (int k = 0; k < 2; k++) {
        LrSchedule s = k ? LR_COSINE : LR_LINEAR;
        const char *name = LR_SCHEDULE_NAMES[s];
        cr_expect_eq(optim_lr_factor(s, 0.0, 1, 0), 1.0, "%s starts at the configured lr", name);
        cr_expect_float_eq(optim_lr_factor(s, 1.0, 1, 0), 0.0, 1e-15, "%s ends at 0", name);
        cr_expect_eq(optim_lr_factor(s, 1.5, 1, 0), optim_lr_factor(s, 1.0, 1, 0), "progress is clamped");
        for (int i = 1; i <= 100; i++)
            cr_expect_leq(optim_lr_factor(s, i / 100.0, 1, 0), optim_lr_factor(s, (i - 1) / 100.0, 1, 0), "%s never rises", name);
    }
}

/* One golden case of tests/golden-extra/make_optim.py replayed: a weight of 6 from "p0", each
 * of `steps` gradients from "grads" handed to step(ps, k, ctx), the weights against PyTorch's
 * "params_every_10" after every 10th step. */
typedef void (*GoldenStep)(ParamStore *ps, int k, void *ctx);

static void replay_golden(const cJSON *c, int steps, const char *what, GoldenStep step, void *ctx) {
    ParamStore ps;
    params_init(&ps);
    Tensor *p = params_add(&ps, "p", 1, (int[]){6});
    S2sError err;
    cr_assert_eq(params_alloc(&ps, &err), S2S_OK);
    double v[6];
    cr_assert_eq(tu_json_flatten(tu_get(c, "p0"), v, 6), 6);
    for (int i = 0; i < 6; i++) p->data[i] = (float)v[i];
    for (int k = 0; k < steps; k++) {
        cr_assert_eq(tu_json_flatten(cJSON_GetArrayItem(tu_get(c, "grads"), k), v, 6), 6);
        for (int i = 0; i < 6; i++) p->grad[i] = (float)v[i];
        step(&ps, k, ctx);
        if ((k + 1) % 10 == 0) {
            cr_assert_eq(tu_json_flatten(cJSON_GetArrayItem(tu_get(c, "params_every_10"), (k + 1) / 10 - 1), v, 6), 6);
            for (int i = 0; i < 6; i++)
                cr_expect(fabs(p->data[i] - v[i]) <= 2e-6, "%s, after %d steps: weight %d %.8f, PyTorch %.8f", what, k + 1, i,
                          p->data[i], v[i]);
        }
    }
    params_free(&ps);
}

typedef struct SchedCase {
    const cJSON *c;
    Config cfg;
    Adam opt;
    double base;
    int steps, warmup;
    const char *what;
} SchedCase;

static void schedule_step(ParamStore *ps, int k, void *ctx) {
    SchedCase *s = ctx;
    double lr = s->base * optim_lr_factor(s->cfg.train.lr_schedule, (double)k / s->steps, k + 1, s->warmup);
    double want = cJSON_GetArrayItem(tu_get(s->c, "lrs"), k)->valuedouble;
    cr_expect(fabs(lr - want) <= 1e-12 * fabs(want), "%s, step %d: lr %.15g, PyTorch %.15g", s->what, k + 1, lr, want);
    s->opt.lr = (float)lr;
    adam_step(&s->opt, ps);
}

/* The schedules with and without warmup through Adam, against PyTorch's Adam and LambdaLR
 * over 100 steps (tests/golden-extra/make_optim.py): every step's lr, and the weights every
 * 10 steps. */
Test(optim, schedules_and_warmup_equal_pytorch) {
    cJSON *j = tu_json_load("tests/golden-extra/optim/schedules.json");
    cr_assert(j != NULL);
    int steps = tu_get(j, "steps")->valueint, n_cases = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, tu_get(j, "cases")) {
        SchedCase s = {.c = c, .opt = adam_default(), .base = tu_get(c, "base_lr")->valuedouble, .steps = steps,
                       .warmup = tu_get(c, "warmup")->valueint};
        config_defaults(&s.cfg);
        char set[64], what[96];
        snprintf(set, sizeof set, "lr_schedule=%s", tu_get(c, "schedule")->valuestring);
        tu_config_set(&s.cfg, set);
        snprintf(what, sizeof what, "%s, warmup %d", tu_get(c, "schedule")->valuestring, s.warmup);
        s.what = what;
        replay_golden(c, steps, what, schedule_step, &s);
        n_cases++;
    }
    cr_expect_eq(n_cases, 8);
    cJSON_Delete(j);
}

typedef struct KeysCase {
    Config cfg;
    Adam opt;
    int steps, warmup;
} KeysCase;

static void keys_step(ParamStore *ps, int k, void *ctx) {
    KeysCase *s = ctx;
    float lr = (float)(s->cfg.train.lr * optim_lr_factor(s->cfg.train.lr_schedule, (double)k / s->steps, k + 1, s->warmup));
    if (optim_is_adam(s->cfg.train.optimizer)) {
        s->opt.lr = lr;
        adam_step(&s->opt, ps);
    } else {
        sgd_step(ps, lr, s->cfg.train.weight_decay);
    }
}

/* Adam's keys, AdamW and SGD's weight decay against torch.optim (tests/golden-extra/
 * make_optim.py, optim/adam_keys.json): other betas and eps, L2 and decoupled decay, 100
 * steps under a warmup and inverse square root schedule; the optimiser built from config keys
 * as the trainer builds it. */
Test(optim, adam_keys_equal_pytorch) {
    cJSON *j = tu_json_load("tests/golden-extra/optim/adam_keys.json");
    cr_assert(j != NULL);
    int steps = tu_get(j, "steps")->valueint, n_cases = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, tu_get(j, "cases")) {
        const char *name = tu_get(c, "optimizer")->valuestring;
        KeysCase s = {.steps = steps, .warmup = tu_get(c, "warmup")->valueint};
        config_defaults(&s.cfg);
        char set[96];
        snprintf(set, sizeof set, "optimizer=%s", name);
        tu_config_set(&s.cfg, set);
        const char *keys[] = {"beta1", "beta2", "eps", "weight_decay"};
        for (int k = 0; k < 4; k++) {
            if (strcmp(name, "sgd") == 0 && k < 3) continue;
            snprintf(set, sizeof set, "train.%s%s=%.17g", k < 3 ? "adam_" : "", keys[k], tu_get(c, keys[k])->valuedouble);
            tu_config_set(&s.cfg, set);
        }
        tu_config_set(&s.cfg, "lr_schedule=inverse_sqrt");
        s.cfg.train.lr = (float)tu_get(c, "base_lr")->valuedouble;
        s.opt = adam_from_config(&s.cfg.train);
        cr_expect_eq(s.opt.decoupled, strcmp(name, "adamw") == 0);
        char what[64];
        snprintf(what, sizeof what, "%s (case %d)", name, n_cases);
        replay_golden(c, steps, what, keys_step, &s);
        n_cases++;
    }
    cr_expect_eq(n_cases, 4);
    cJSON_Delete(j);
}

/* The progress line's ETA counts the steps the epoch will run: its batches left, or fewer
 * where train.max_steps ends the run first (it counted the epoch's batches alone). */
Test(optim, the_eta_counts_the_steps_max_steps_leaves) {
    cr_expect_eq(run_steps_left(211, 10, 0, 10), 201, "no limit: the epoch's batches left");
    cr_expect_eq(run_steps_left(211, 10, 30, 10), 20, "train.max_steps 30 at step 10: 20 left");
    cr_expect_eq(run_steps_left(211, 5, 1000, 216), 206, "a limit past the epoch: the epoch's batches");
    cr_expect_eq(run_steps_left(211, 0, 30, 30), 0, "the limit reached: none");
    cr_expect_eq(run_steps_left(211, 100, 20, 250), 0, "resumed past the limit: none, never negative");
}

/* The progress line is drawn before an epoch's first step, which can take seconds on a large
 * model or a busy machine: a terminal never waits on a silent line after "parameters:". */
Test(optim_cli, the_first_step_is_announced, .timeout = 60) {
    char *d = tu_tmpdir();
    Config cfg;
    config_defaults(&cfg);
    S2sError err;
    cr_assert_eq(config_load(&cfg, "configs/reverse.json", &err), S2S_OK, "%s", err.msg);
    const char *sets[] = {"task.train_size=64", "task.valid_size=8", "task.test_size=8", "train.max_steps=2",
                          "train.batch_size=32"};
    for (size_t i = 0; i < sizeof sets / sizeof *sets; i++) cr_assert_eq(config_set(&cfg, sets[i], &err), S2S_OK, "%s", err.msg);
    FILE *progress = tmpfile();
    cr_assert(progress);
    TrainOptions opt = {.out_dir = tu_path(d, "run"), .progress = progress};
    TrainSummary sum;
    cr_assert_eq(train_run(&cfg, &opt, &sum, &err), S2S_OK, "%s", err.msg);
    rewind(progress);
    char line[512] = "";
    size_t n = fread(line, 1, sizeof line - 1, progress);
    line[n] = '\0';
    cr_expect(strncmp(line, "\r\033[Kepoch 1/", 12) == 0 && strstr(line, "step 1/2  (the first step of the epoch") &&
                  strstr(line, "\r\033[Kepoch 1/") < strstr(line, "loss"),
              "the first thing drawn: %s", line);
    fclose(progress);
    tu_rm_rf(d);
    free(d);
}
