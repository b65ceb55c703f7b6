/* test_compare.c — a reversal comparison (dummy vs dot, 3 seeds) end to end: its table
 * equals the runs' own logs, a second call trains nothing, and --runs tabulates the same;
 * the statistics by hand; grids, names of runs and variants, outputs scored against a fixed
 * system. The job runner (arguments, threads, signals, crashes): test_compare_jobs.c. */
#include "test_compare.h"

Test(compare, stat_by_hand) {
    double x[4] = {2, 4, 4, 6};
    Stat s = compare_stat(x, 4);
    cr_expect_float_eq(s.mean, 4.0, 1e-12);
    cr_expect_float_eq(s.var, 8.0 / 3.0, 1e-12, "sample variance (n − 1)");
    cr_expect_float_eq(s.sd, sqrt(8.0 / 3.0), 1e-12);
    cr_expect(s.min == 2 && s.max == 6);
    Stat one = compare_stat(x, 1);
    cr_expect(one.var == 0.0 && one.mean == 2.0);
}

/* A run's validation exact match (%) by epoch, from its log; returns the epochs read. */
static int curve_from_log(const char *dir, double *out, int cap) {
    char p[1024];
    snprintf(p, sizeof p, "%s/log.jsonl", dir);
    FILE *f = fopen(p, "r");
    cr_assert(f != NULL, "%s", p);
    char line[1 << 14];
    int n = 0;
    while (fgets(line, sizeof line, f) && n < cap) {
        if (!strstr(line, "\"type\":\"epoch\"")) continue;
        cJSON *j = cJSON_Parse(line);
        out[n++] = 100.0 * cJSON_GetObjectItem(j, "valid_exact_match")->valuedouble;
        cJSON_Delete(j);
    }
    fclose(f);
    return n;
}

Test(compare, reversal_table_equals_the_runs_logs, .timeout = 300) {
    const char *bin = tu_bin();
    char *d = tu_tmpdir();
    char cfg[256], cmd[2048];
    snprintf(cfg, sizeof cfg, "%s/r.json", d);
    FILE *f = fopen(cfg, "w");
    fputs("{\"name\": \"r\", \"task\": {\"type\": \"reverse\", \"min_len\": 3, \"max_len\": 8, \"train_size\": 4000,"
          " \"valid_size\": 100, \"test_size\": 100, \"data_seed\": 5},"
          " \"model\": {\"cell\": \"gru\", \"embedding\": 16, \"encoder_hidden\": 48, \"decoder_hidden\": 48},"
          " \"train\": {\"lr\": 0.005, \"batch_size\": 32, \"epochs\": 4}}", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s/compare --config %s --attention dummy,dot --seeds 1,2,3 --jobs 2 --out %s/cmp > %s/out.txt 2>&1",
             bin, cfg, d, d);
    cr_assert_eq(system(cmd), 0);
    char p[512];
    snprintf(p, sizeof p, "%s/cmp/summary.json", d);
    cJSON *s = tu_json_load(p);
    cr_assert(s != NULL);
    snprintf(p, sizeof p, "%s/cmp/summary.md", d);
    char *md = tu_slurp(p, NULL);
    cr_assert(md != NULL);
    const cJSON *vs = cJSON_GetObjectItem(s, "variants");
    cr_assert_eq(cJSON_GetArraySize(vs), 2);
    const char *names[2] = {"dummy", "dot"};
    double means[2];
    for (int v = 0; v < 2; v++) {
        const cJSON *x = cJSON_GetArrayItem(vs, v);
        cr_expect_str_eq(cJSON_GetObjectItem(x, "attention")->valuestring, names[v]);
        double m[3], l[3];
        for (int k = 0; k < 3; k++) {
            char run[600];
            snprintf(run, sizeof run, "%s/cmp/%s-seed%d", d, names[v], k + 1);
            m[k] = from_log(run, false);
            l[k] = from_log(run, true);
        }
        Stat st = compare_stat(m, 3), sl = compare_stat(l, 3);
        /* the Markdown row shows the same numbers, rounded */
        char row[512];
        snprintf(row, sizeof row, "| %s | 3 | %.2f ± %.2f | %.3f | %.2f | %.2f |", names[v], st.mean, st.sd, st.var, st.min, st.max);
        cr_expect(strstr(md, row), "row %s not in\n%s", row, md);
        snprintf(row, sizeof row, "| %.3f ± %.3f | %.4f |", sl.mean, sl.sd, sl.var);
        cr_expect(strstr(md, row), "valid loss %s not in\n%s", row, md);
        snprintf(row, sizeof row, "- %s: 1: %.2f, 2: %.2f, 3: %.2f\n", names[v], m[0], m[1], m[2]);
        cr_expect(strstr(md, row), "runs by seed %s not in\n%s", row, md);
        const cJSON *bs = cJSON_GetObjectItem(x, "by_seed");
        cr_assert_eq(cJSON_GetArraySize(bs), 3);
        for (int k = 0; k < 3; k++) {
            cr_expect_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(bs, k), "seed")->valuedouble, k + 1);
            cr_expect_float_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(bs, k), "test_metric")->valuedouble, m[k], 1e-9);
        }
        /* the validation curve (curves.png) is the mean of the runs' logged curves */
        double cv[3][8];
        for (int k = 0; k < 3; k++) {
            char run[600];
            snprintf(run, sizeof run, "%s/cmp/%s-seed%d", d, names[v], k + 1);
            cr_expect_eq(curve_from_log(run, cv[k], 8), 4, "4 epochs logged");
        }
        const cJSON *jc = cJSON_GetObjectItem(x, "valid_curve");
        cr_assert_eq(cJSON_GetArraySize(jc), 4);
        for (int e = 0; e < 4; e++)
            cr_expect_float_eq(cJSON_GetArrayItem(jc, e)->valuedouble, (cv[0][e] + cv[1][e] + cv[2][e]) / 3.0, 1e-9,
                               "%s epoch %d", names[v], e + 1);
        const cJSON *bl = cJSON_GetObjectItem(x, "best_valid_loss");
        cr_expect_float_eq(cJSON_GetObjectItem(bl, "mean")->valuedouble, sl.mean, 1e-9, "%s valid loss mean", names[v]);
        cr_expect_float_eq(cJSON_GetObjectItem(bl, "variance")->valuedouble, sl.var, 1e-9, "%s valid loss variance", names[v]);
        const cJSON *tm = cJSON_GetObjectItem(x, "test_metric");
        cr_expect_float_eq(cJSON_GetObjectItem(tm, "mean")->valuedouble, st.mean, 1e-9, "%s mean", names[v]);
        cr_expect_float_eq(cJSON_GetObjectItem(tm, "variance")->valuedouble, st.var, 1e-9, "%s variance", names[v]);
        cr_expect_float_eq(cJSON_GetObjectItem(tm, "min")->valuedouble, st.min, 1e-9);
        cr_expect_float_eq(cJSON_GetObjectItem(tm, "max")->valuedouble, st.max, 1e-9);
        means[v] = st.mean;
    }
    cr_expect_gt(means[1], means[0] + 20.0, "dot attention (%.1f) beats none (%.1f) on reversal", means[1], means[0]);
    const cJSON *pt = cJSON_GetArrayItem(cJSON_GetObjectItem(s, "paired_bootstrap"), 0);
    cr_expect_float_eq(cJSON_GetObjectItem(pt, "difference")->valuedouble, means[0] - means[1], 1e-9);
    cr_expect_lt(cJSON_GetObjectItem(pt, "p")->valuedouble, 0.05);
    cJSON_Delete(s);
    free(md);
    /* the picture: every run is a dot (orange outline) */
    snprintf(p, sizeof p, "%s/cmp/summary.png", d);
    Image im;
    S2sError err;
    cr_assert_eq(png_read(p, &im, &err), S2S_OK, "%s", err.msg);
    int orange = 0;
    for (int y = 0; y < im.h; y++)
        for (int x = 0; x < im.w; x++) {
            Rgb c = image_get(&im, x, y);
            orange += c.r == 255 && c.g == 127 && c.b == 14;
        }
    image_free(&im);
    /* a dot's ring is 24 pixels; dots at equal values may overlap */
    cr_expect(orange >= 24 * 2 && orange <= 24 * 6, "%d orange pixels for 6 runs", orange);
    const char *files[] = {"summary.md", "summary.csv", "summary.png", "curves.png"};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/cmp/%s", d, files[i]);
        cr_expect(access(p, R_OK) == 0, "%s is written", files[i]);
    }
    /* again: nothing to train */
    snprintf(cmd, sizeof cmd, "%s/compare --config %s --attention dummy,dot --seeds 1,2,3 --out %s/cmp > %s/again.txt 2>&1", bin,
             cfg, d, d);
    cr_assert_eq(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "test $(grep -c 'finished earlier' %s/again.txt) -eq 6", d);
    cr_expect_eq(system(cmd), 0, "a second call skips the finished runs");
    /* existing runs only */
    snprintf(cmd, sizeof cmd, "%s/compare --runs %s/cmp/dot-seed1 %s/cmp/dot-seed2 --out %s/only > /dev/null 2>&1", bin, d, d, d);
    cr_expect_eq(system(cmd), 0);
    tu_rm_rf(d);
    free(d);
}

/* The config a comparison's run folder dir/cmp/<run> holds. */
static void load_run_config(Config *c, const char *dir, const char *run) {
    char p[800];
    snprintf(p, sizeof p, "%s/cmp/%s/config.json", dir, run);
    config_defaults(c);
    S2sError err;
    cr_assert_eq(config_load(c, p, &err), S2S_OK, "%s", err.msg);
}

/* --vary: any key, several for a grid. Folders key=value,...-seedN, each run trained with its
 * values (its config says so), the table's variants named by the keys that differ and headed
 * by what varies; --runs on the same folders names them the same way. */
Test(compare, vary_makes_a_grid_of_any_keys, .timeout = 240) {
    char *d = tu_tmpdir();
    char cfg[600];
    write_tinycmp(cfg, sizeof cfg, d, 1);
    cr_assert_eq(tu_sh("%s/compare --config %s --set attention=multihead --vary model.heads=1,4 --vary cell=gru,lstm --seeds 1 "
                       "--out %s/cmp > %s/out.txt 2>&1",
                       tu_bin(), cfg, d, d),
                 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    const char *dirs[] = {"heads=1,cell=gru-seed1", "heads=1,cell=lstm-seed1", "heads=4,cell=gru-seed1", "heads=4,cell=lstm-seed1"};
    for (int i = 0; i < 4; i++) {
        Config c;
        load_run_config(&c, d, dirs[i]);
        cr_expect_eq(c.model.heads, i < 2 ? 1 : 4, "%s", dirs[i]);
        cr_expect_eq((int)c.model.cell, i % 2 ? (int)MODEL_CELL_LSTM : (int)MODEL_CELL_GRU, "%s", dirs[i]);
        cr_expect_eq((int)c.model.attention, (int)ATTN_MULTIHEAD);
    }
    char *md = tu_slurp(tu_path(d, "cmp/summary.md"), NULL);
    cr_expect(strstr(md, "| variant | runs |") && strstr(md, "| cell=gru,heads=1 | 1 |") && strstr(md, "| cell=lstm,heads=4 | 1 |"),
              "%s", md);
    free(md);
    cr_expect(file_has(d, "cmp/summary.json", "\"varies\":\t\"variant\""));
    /* one key: the table is headed by it and names variants by their values */
    cr_assert_eq(tu_sh("%s/compare --runs %s/cmp/heads=1,cell=gru-seed1 %s/cmp/heads=4,cell=gru-seed1 --out %s/two > /dev/null 2>&1",
                       tu_bin(), d, d, d),
                 0);
    md = tu_slurp(tu_path(d, "two/summary.md"), NULL);
    cr_expect(strstr(md, "| model.heads | runs |") && strstr(md, "| 1 | 1 |") && strstr(md, "| 4 | 1 |"), "%s", md);
    free(md);
    tu_rm_rf(d);
    free(d);
}

/* Runs of one config (seeds apart) are named by their model: an RNN by its attention, a
 * Transformer as "transformer" (its attention key means nothing); runs that differ in one
 * key, by that key's values; keys that change no number are not variants. */
Test(compare, runs_of_one_config_are_named_by_their_model) {
    RunResult r[2];
    memset(r, 0, sizeof r);
    for (int i = 0; i < 2; i++) {
        config_defaults(&r[i].cfg);
        r[i].cfg.seed = i + 1;
    }
    char header[COMPARE_NAME];
    compare_label_runs(r, 2, header);
    cr_expect_str_eq(header, "attention");
    cr_expect_str_eq(r[0].variant, ATTN_KIND_NAMES[r[0].cfg.model.attention]);
    for (int i = 0; i < 2; i++) r[i].cfg.model.type = MODEL_TRANSFORMER;
    compare_label_runs(r, 2, header);
    cr_expect_str_eq(header, "model");
    cr_expect_str_eq(r[1].variant, "transformer");
    r[1].cfg.train.label_smoothing = 0.1f;
    compare_label_runs(r, 2, header);
    cr_expect_str_eq(header, "train.label_smoothing");
    cr_expect_str_eq(r[1].variant, "0.1");
    /* keys that change no number (the checkpoints kept, the log's rhythm) name no variant */
    r[1].cfg.train.label_smoothing = 0.0f;
    r[0].cfg.train.keep_last = 5;
    r[1].cfg.train.keep_best = 2;
    r[0].cfg.train.log_every = 7;
    r[1].cfg.train.save_every = 9;
    compare_label_runs(r, 2, header);
    cr_expect_str_eq(header, "model", "runs apart only in kept checkpoints and logging: %s", header);
    cr_expect_str_eq(r[0].variant, r[1].variant);
}

/* Names follow the keys that mean something under each run: an RNN and a Transformer of one
 * config name differ in their type and shared keys, not in each other's private keys; runs
 * of configs of their own names are named by those names, and by the keys varied within a
 * config; a name too long ends with "…" at a key's end, never inside a value. */
Test(compare, variants_are_named_by_the_keys_that_apply) {
    RunResult r[4];
    memset(r, 0, sizeof r);
    for (int i = 0; i < 4; i++) {
        config_defaults(&r[i].cfg);
        r[i].cfg.seed = 1 + i / 2;
    }
    for (int i = 1; i < 4; i += 2) {
        r[i].cfg.model.type = MODEL_TRANSFORMER;
        r[i].cfg.model.d_model = 256; /* the RNN has none */
        r[i].cfg.model.layers = 3;
        r[i].cfg.model.cell = MODEL_CELL_GRU; /* the Transformer has none */
    }
    char header[COMPARE_NAME];
    compare_label_runs(r, 4, header);
    cr_expect_str_eq(header, "variant");
    cr_expect_str_eq(r[0].variant, "type=rnn,layers=1");
    cr_expect_str_eq(r[1].variant, "type=transformer,layers=3");
    /* config names: the RNN's recipe against the Transformer's */
    for (int i = 0; i < 4; i++) snprintf(r[i].cfg.name, sizeof r[i].cfg.name, "%s", i % 2 ? "tf-recipe" : "rnn-recipe");
    compare_label_runs(r, 4, header);
    cr_expect_str_eq(header, "config");
    cr_expect_str_eq(r[0].variant, "rnn-recipe");
    cr_expect_str_eq(r[3].variant, "tf-recipe");
    r[2].cfg.train.lr = 0.5f; /* varied within the RNN's config */
    compare_label_runs(r, 4, header);
    cr_expect_str_eq(header, "variant");
    cr_expect_str_eq(r[0].variant, "rnn-recipe,lr=0.001", "%s", r[0].variant);
    cr_expect_str_eq(r[2].variant, "rnn-recipe,lr=0.5");
    cr_expect_str_eq(r[1].variant, "tf-recipe", "lr does not vary within tf-recipe: %s", r[1].variant);
    /* same names, many keys apart: the name stops at a key's end */
    for (int i = 0; i < 4; i++) {
        config_defaults(&r[i].cfg);
        r[i].cfg.seed = i + 1;
    }
    ConfigTrain *t = &r[1].cfg.train;
    t->lr = 0.123456f, t->batch_size = 77, t->epochs = 99, t->clip = 3.5f, t->warmup_steps = 1234, t->label_smoothing = 0.25f;
    t->ema_decay = 0.5f, t->valid_every = 555, t->patience = 4444, t->eval_batch_size = 321, t->max_decode_len = 999;
    r[1].cfg.model.dropout = 0.375f;
    compare_label_runs(r, 2, header);
    size_t len = strlen(r[1].variant);
    cr_expect(len < COMPARE_NAME && len > 60, "%zu bytes: %s", len, r[1].variant);
    cr_expect(!strcmp(r[1].variant + len - 3, "\xe2\x80\xa6"), "ends with …: %s", r[1].variant);
    char *last = strrchr(r[1].variant, ',');
    cr_assert(last);
    cr_expect(strchr(last, '=') && strchr(last, '=') < r[1].variant + len - 3, "a whole key=value before the …: %s", r[1].variant);
    cr_expect(!strstr(r[1].variant, "cell") && !strstr(r[1].variant, "d_model"), "%s", r[1].variant);
}

/* Several --config: each config a variant (by its name), --vary and --set applied to each,
 * the folders <name>[,key=value]-seedN, each run trained from its own config; configs of one
 * name are refused. */
Test(compare, several_configs_are_variants, .timeout = 240) {
    char *d = tu_tmpdir();
    char rnn[600], tf[700];
    write_tinycmp(rnn, sizeof rnn, d, 1);
    snprintf(tf, sizeof tf, "%s/t.json", d);
    tu_write(tf,
             "{\"name\": \"t\", \"task\": {\"type\": \"reverse\", \"train_size\": 200, \"valid_size\": 30, \"test_size\": 30, "
             "\"max_len\": 8}, \"model\": {\"type\": \"transformer\", \"d_model\": 16, \"heads\": 2, \"ff\": 32, \"layers\": 1},"
             " \"train\": {\"batch_size\": 16, \"epochs\": 1}}");
    cr_assert_eq(tu_sh("%s/compare --config %s --config %s --vary lr=0.01,0.002 --set threads=1 --seeds 1 --out %s/cmp > %s/out.txt "
                       "2>&1",
                       tu_bin(), rnn, tf, d, d),
                 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    const char *dirs[] = {"c,lr=0.01-seed1", "c,lr=0.002-seed1", "t,lr=0.01-seed1", "t,lr=0.002-seed1"};
    for (int i = 0; i < 4; i++) {
        Config c;
        load_run_config(&c, d, dirs[i]);
        cr_expect_eq((int)c.model.type, i < 2 ? (int)MODEL_RNN : (int)MODEL_TRANSFORMER, "%s", dirs[i]);
        cr_expect_float_eq(c.train.lr, i % 2 ? 0.002f : 0.01f, 1e-9, "%s", dirs[i]);
        cr_expect_eq(c.train.threads, 1);
    }
    char *md = tu_slurp(tu_path(d, "cmp/summary.md"), NULL);
    cr_expect(strstr(md, "| variant | runs |") && strstr(md, "| c,lr=0.01 | 1 |") && strstr(md, "| t,lr=0.002 | 1 |"), "%s", md);
    free(md);
    /* two configs alone: named by their names; the default folder names both */
    cr_assert_eq(tu_sh("cd %s && %s/compare --config %s --config %s --set threads=1 --seeds 2 > out2.txt 2>&1", d, tu_bin(), rnn, tf),
                 0, "%s", tu_slurp(tu_path(d, "out2.txt"), NULL));
    md = tu_slurp(tu_path(d, "runs/compare-c-vs-t/summary.md"), NULL);
    cr_expect(strstr(md, "| config | runs |") && strstr(md, "| c | 1 |") && strstr(md, "| t | 1 |"), "%s", md);
    free(md);
    /* one name twice */
    cr_expect_eq(tu_sh("%s/compare --config %s --config %s --seeds 1 --out %s/cmp2 > /dev/null 2> %s/err.txt", tu_bin(), rnn, rnn, d, d),
                 2);
    cr_expect(file_has(d, "err.txt", "are both named \"c\""), "%s", tu_slurp(tu_path(d, "err.txt"), NULL));
    cr_expect_eq(tu_sh("%s/compare --config %s --seeds 1 --out %s/cmp2 > /dev/null 2>&1", tu_bin(), rnn, d), 2,
                 "one config and nothing varied");
    cr_expect_eq(tu_sh("test ! -e %s/cmp2", d), 0, "nothing was made");
    tu_rm_rf(d);
    free(d);
}

/* A translation run in memory: seed, its user's name, hyp and ref lines (copied). */
static void mem_run(RunResult *r, long seed, const char *label, const char *const *hyp, const char *const *ref, int n) {
    memset(r, 0, sizeof *r);
    config_defaults(&r->cfg);
    r->cfg.seed = r->seed = seed;
    r->translation = r->sacre = true;
    snprintf(r->label, sizeof r->label, "%s", label);
    snprintf(r->outputs, sizeof r->outputs, "out.en");
    snprintf(r->dir, sizeof r->dir, "run-%s-%ld", label, seed);
    r->hyp = calloc((size_t)n, sizeof *r->hyp);
    r->ref = calloc((size_t)n, sizeof *r->ref);
    for (int i = 0; i < n; i++) r->hyp[i] = strdup(hyp[i]), r->ref[i] = strdup(ref[i]);
    r->n = n;
    r->seconds = 60;
    r->best_valid_loss = 2;
}

static double corpus_sacrebleu(char *const *hyp, char *const *ref, int n) {
    SbBleuOpts o = sb_bleu_defaults();
    SbBleu b;
    char *const *const refs[1] = {ref};
    sb_bleu(&o, hyp, refs, 1, n, &b);
    return b.score;
}

/* --outputs, --name, --against in the library: each run's outputs are scored (not its log's
 * figure), runs pair by seed, a fixed system with every run of a variant, and the differences
 * are those of the corpus scores. */
Test(compare, outputs_are_scored_and_a_fixed_system_pairs_with_every_run) {
    static const char *ref[6] = {"a man rides a red bike down the hill .", "two dogs play in the snow .",
                                 "a woman sings on a stage .", "children run across a green field .",
                                 "a cat sleeps on the old sofa .", "the boy throws a ball to his father ."};
    static const char *h1[6] = {"a man rides a bike down the hill .", "two dogs play in snow .", "a woman sings on stage .",
                                "children run over a green field .", "a cat sleeps on the sofa .",
                                "the boy throws the ball to his dad ."};
    static const char *h2[6] = {"a man rides a red bike down a hill .", "two dogs are playing in the snow .",
                                "a woman sings on a stage .", "kids run across a field .", "a cat is sleeping on the old sofa .",
                                "the boy throws a ball to his father ."};
    static const char *h3[6] = {"a man on a bike .", "dogs in the snow .", "a woman sings .", "children run .",
                                "a cat sleeps .", "a boy throws a ball ."};
    RunResult r[5];
    mem_run(&r[0], 1, "student", h1, ref, 6);
    mem_run(&r[1], 2, "student", h2, ref, 6);
    mem_run(&r[2], 1, "baseline", h3, ref, 6);
    mem_run(&r[3], 3, "", h3, ref, 6); /* unnamed: named by its config, not by the others */
    r[3].test_bleu = 99;               /* a log's figure, which the outputs replace */
    S2sError err;
    RunResult like = r[0];
    cr_assert_neq(compare_read_system(&r[4], "ensemble", "/nonexistent/x.en", &like, &err), S2S_OK);
    char p[] = "/tmp/s2s-cmp-fixed-XXXXXX";
    int fd = mkstemp(p);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    for (int i = 0; i < 5; i++) fprintf(f, "%s\n", h2[i]);
    fclose(f);
    cr_expect_eq(compare_read_system(&r[4], "ensemble", p, &like, &err), S2S_ERR_DATA, "5 lines against 6");
    cr_expect(strstr(err.msg, "5 lines, but the runs' test.ref (run-student-1) has 6"), "%s", err.msg);
    f = fopen(p, "w");
    for (int i = 0; i < 6; i++) fprintf(f, "%s\n", i == 3 ? ref[3] : h2[i]);
    fclose(f);
    cr_assert_eq(compare_read_system(&r[4], "ensemble", p, &like, &err), S2S_OK, "%s", err.msg);
    cr_expect(r[4].fixed && !strcmp(r[4].ref[5], ref[5]));
    Comparison *c = calloc(1, sizeof *c);
    cr_assert_eq(compare_summarize(r, 5, 200, c, &err), S2S_OK, "%s", err.msg);
    cr_expect_str_eq(c->header, "variant");
    cr_assert_eq(c->n_variants, 4);
    cr_expect_str_eq(c->v[0].name, "student");
    cr_expect_str_eq(c->v[1].name, "baseline");
    cr_expect_str_eq(c->v[3].name, "ensemble");
    cr_expect(c->v[3].fixed && !c->v[0].fixed && !strcmp(c->v[3].outputs, p));
    cr_expect_str_eq(c->outputs, "out.en");
    double s1 = corpus_sacrebleu(r[0].hyp, r[0].ref, 6), s2 = corpus_sacrebleu(r[1].hyp, r[1].ref, 6);
    double s3 = corpus_sacrebleu(r[2].hyp, r[2].ref, 6), se = corpus_sacrebleu(r[4].hyp, r[4].ref, 6);
    cr_expect(s1 != s2 && s3 < s1 && se > s2, "distinct scores: %f %f %f %f", s1, s2, s3, se);
    cr_expect_float_eq(c->v[0].metric.mean, (s1 + s2) / 2, 1e-9);
    cr_expect_float_eq(c->v[1].metric.mean, s3, 1e-9);
    cr_expect_float_eq(c->v[2].metric.mean, s3, 1e-9, "the outputs' score, not the log's 99");
    cr_expect_float_eq(c->v[3].metric.mean, se, 1e-9);
    /* pairs: (student, baseline) by seed 1 only; every variant against the fixed system with all its runs */
    cr_assert_eq(c->n_pairs, 6);
    const PairTest *sb = &c->pairs[0], *sf = &c->pairs[2], *bf = &c->pairs[4];
    cr_expect(sb->a == 0 && sb->b == 1 && sb->seeds == 1);
    cr_expect_float_eq(sb->diff, s1 - s3, 1e-9);
    cr_expect(sf->a == 0 && sf->b == 3 && sf->seeds == 2);
    cr_expect_float_eq(sf->diff, (s1 - se + s2 - se) / 2, 1e-9);
    cr_expect(bf->a == 1 && bf->b == 3 && bf->seeds == 1);
    cr_expect(sf->lo <= sf->diff && sf->diff <= sf->hi);
    /* a fixed system named as a variant of runs is refused, never pooled with them */
    snprintf(r[4].variant, sizeof r[4].variant, "student");
    snprintf(r[4].label, sizeof r[4].label, "student");
    cr_expect_eq(compare_summarize(r, 5, 200, c, &err), S2S_ERR_DATA);
    cr_expect(strstr(err.msg, "its name, student, is taken by another variant"), "%s", err.msg);
    snprintf(r[4].label, sizeof r[4].label, "ensemble");
    /* runs tested on other references than the fixed system's are refused */
    free(r[2].ref[0]);
    r[2].ref[0] = strdup("another reference .");
    cr_expect_eq(compare_summarize(r, 5, 200, c, &err), S2S_ERR_DATA);
    cr_expect(strstr(err.msg, "run-baseline-1: its test.ref is not the one"), "%s", err.msg);
    for (int i = 0; i < 5; i++) compare_free_run(&r[i]);
    free(c);
    unlink(p);
}

/* The same options on the command line over trained runs: --name groups runs of two configs
 * into one variant, --outputs reads a file of each run's, --against adds a system; bad uses
 * are refused with exit 2 (usage) or 1 (files). */
Test(compare, runs_named_with_their_outputs_against_a_system, .timeout = 120) {
    char *d = tu_tmpdir();
    char cfg[600];
    write_tinycmp(cfg, sizeof cfg, d, 2);
    for (int s = 1; s <= 2; s++)
        cr_assert_eq(tu_sh("%s/train --config %s --set attention=%s --seed %d --set threads=1 --out %s/r%d > /dev/null",
                           tu_bin(), cfg, s == 1 ? "dot" : "dummy", s, d, s),
                     0);
    /* each run's outputs: its references with the first k lines wrong (exact match known) */
    for (int s = 1; s <= 2; s++)
        cr_assert_eq(tu_sh("awk 'NR<=%d{print \"x\"; next}{print}' %s/r%d/test.ref > %s/r%d/final.txt", 2 * s, d, s, d, s), 0);
    cr_assert_eq(tu_sh("cp %s/r1/test.ref %s/perfect.txt && head -n 3 %s/r1/test.ref > %s/short.txt", d, d, d, d), 0);
    int n = 0;
    char **lines;
    S2sError err;
    cr_assert_eq(text_read_lines(tu_path(d, "r1/test.ref"), &lines, &n, &err), S2S_OK);
    text_free_lines(lines, n);
    cr_assert(n > 4);
    int rc = tu_sh("%s/compare --runs --name recipe=%s/r1,%s/r2 --outputs final.txt --against oracle=%s/perfect.txt --out %s/o"
                   " > %s/out.txt 2>&1",
                   tu_bin(), d, d, d, d, d);
    cr_assert_eq(rc, 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    char *md = tu_slurp(tu_path(d, "o/summary.md"), NULL);
    char row[200];
    double e1 = 100.0 * (n - 2) / n, e2 = 100.0 * (n - 4) / n;
    snprintf(row, sizeof row, "- recipe: 1: %.2f, 2: %.2f", e1, e2);
    cr_expect(strstr(md, row), "%s not in\n%s", row, md);
    cr_expect(strstr(md, "Test outputs: each run's final.txt, scored here"), "%s", md);
    snprintf(row, sizeof row, "| oracle | 1 | 100.00 | — | 100.00 | 100.00 | — | — | — | — | — |");
    cr_expect(strstr(md, row), "%s not in\n%s", row, md);
    snprintf(row, sizeof row, "| recipe − oracle | 2 | %+.2f |", (e1 + e2) / 2 - 100.0);
    cr_expect(strstr(md, row), "%s not in\n%s", row, md);
    free(md);
    /* bad uses */
    struct {
        const char *args, *says;
        int rc;
    } cases[] = {
        {"--runs %s/r1 --outputs /abs.txt", "--outputs: the name of a file inside each run folder", 2},
        {"--runs --name =%s/r1", "--name =", 2},
        {"--runs --name 'a|b=%s/r1'", "without \"|\"", 2},
        {"--runs %s/r1 --against oracle", "--against oracle: expected NAME=FILE", 2},
        {"--config %s/c.json --attention dot --seeds 1 --outputs f", "--name, --outputs and --against go with --runs", 2},
        {"--runs %s/r1 --outputs missing.txt", "missing.txt", 1},
        {"--runs %s/r1 --against short=%s/short.txt", "3 lines, but the runs' test.ref", 1},
        {"--runs --name r=%s/r1,%s/r2,%s/r1", "is given twice", 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char args[1024];
        snprintf(args, sizeof args, cases[i].args, d, d, d);
        rc = tu_sh("%s/compare %s --out %s/bad > /dev/null 2> %s/err.txt", tu_bin(), args, d, d);
        cr_expect_eq(rc, cases[i].rc, "%s: exit %d", args, rc);
        cr_expect(file_has(d, "err.txt", cases[i].says), "%s: %s", args, tu_slurp(tu_path(d, "err.txt"), NULL));
    }
    cr_expect_eq(tu_sh("test ! -e %s/bad", d), 0, "no table from a refused call");
    tu_rm_rf(d);
    free(d);
}
