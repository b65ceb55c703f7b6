/* test_config.c — the config schema: defaults, errors with positions and suggestions,
 * --set, the resolved output, and that docs/reference/config.md documents every key. */
#include "test_util.h"
#include "s2s/attn.h"
#include "s2s/config.h"
#include "s2s/model.h"

#include <criterion/criterion.h>
#include <glob.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static S2sStatus parse(Config *c, const char *json, S2sError *err) {
    config_defaults(c);
    return config_parse(c, json, "x.json", err);
}

Test(config, defaults_pass_their_own_checks) {
    Config c;
    config_defaults(&c);
    S2sError err;
    cr_expect_eq(config_check(&c, &err), S2S_OK, "%s", err.msg);
}

Test(config, reads_sections) {
    Config c;
    S2sError err;
    cr_assert_eq(parse(&c, "{\"name\": \"r\", \"model\": {\"cell\": \"gru\", \"dropout\": 0.25, \"bidirectional\": true},"
                           " \"train\": {\"lr\": 0.5, \"max_steps\": 7}}", &err), S2S_OK, "%s", err.msg);
    cr_expect_str_eq(c.name, "r");
    cr_expect_eq(c.model.cell, MODEL_CELL_GRU, "a choice is its enum from the start");
    cr_expect_float_eq(c.model.dropout, 0.25f, 1e-7);
    cr_expect(c.model.bidirectional);
    cr_expect_float_eq(c.train.lr, 0.5f, 1e-7);
    cr_expect_eq(c.train.max_steps, 7);
    cr_expect_eq(c.model.encoder_hidden, 128, "untouched keys keep their defaults");
}

Test(config, unknown_key_names_place_and_suggests) {
    Config c;
    S2sError err;
    cr_assert_eq(parse(&c, "{\n  \"model\": {\n    \"attenton\": \"dot\"\n  }\n}", &err), S2S_ERR_CONFIG);
    cr_expect_str_eq(err.msg, "x.json:3:5: unknown key \"model.attenton\" (did you mean \"model.attention\"?)");
    cr_assert_eq(parse(&c, "{\"zzzzzz\": 1}", &err), S2S_ERR_CONFIG);
    cr_expect(strstr(err.msg, "unknown key \"zzzzzz\"") && !strstr(err.msg, "did you mean"), "%s", err.msg);
}

/* Issue 76's bad input: a config with comments says JSON has none and where one starts; a
 * config name typed wrong gets the nearest name of configs/ (or the installed ones). */
Test(config, comments_and_names_typed_wrong_are_told_apart) {
    Config c;
    S2sError err;
    cr_assert_eq(parse(&c, "{\n  // the attention\n  \"name\": \"x\"\n}", &err), S2S_ERR_CONFIG);
    cr_expect_str_eq(err.msg, "x.json:2:3: not valid JSON: JSON has no comments (a // comment starts here)");
    cr_assert_eq(parse(&c, "{\"name\": \"x\", /* c */ \"seed\": 1}", &err), S2S_ERR_CONFIG);
    cr_expect(strstr(err.msg, "JSON has no comments (a /* comment starts here)"), "%s", err.msg);
    cr_assert_eq(parse(&c, "{\"name\": \"x\" \"seed\": 1}", &err), S2S_ERR_CONFIG);
    cr_expect(!strstr(err.msg, "comment"), "an error that is no comment: %s", err.msg);
    char path[256];
    config_find_file("revers", path, sizeof path);
    config_defaults(&c);
    cr_assert_neq(config_load(&c, path, &err), S2S_OK);
    cr_expect(strstr(err.msg, "revers: cannot open") && strstr(err.msg, "; did you mean reverse?"), "%s", err.msg);
    config_find_file("multi30k-trasformer.json", path, sizeof path);
    cr_assert_neq(config_load(&c, path, &err), S2S_OK);
    cr_expect(strstr(err.msg, "did you mean multi30k-transformer?"), "%s", err.msg);
    config_find_file("zzzzzzzz", path, sizeof path);
    cr_assert_neq(config_load(&c, path, &err), S2S_OK);
    cr_expect(!strstr(err.msg, "did you mean") && strstr(err.msg, "; no config of that name in configs/"),
              "nothing near: where it looked: %s", err.msg);
}

Test(config, wrong_types_and_ranges) {
    Config c;
    S2sError err;
    cr_assert_eq(parse(&c, "{\"model\": {\"encoder_hidden\": -3}}", &err), S2S_ERR_CONFIG);
    cr_expect_str_eq(err.msg, "x.json:1:12: model.encoder_hidden: expected a positive integer, got -3");
    cr_assert_eq(parse(&c, "{\"model\": {\"encoder_hidden\": 2.5}}", &err), S2S_ERR_CONFIG);
    cr_expect(strstr(err.msg, "expected a positive integer, got 2.5"), "%s", err.msg);
    cr_assert_eq(parse(&c, "{\"model\": {\"bidirectional\": \"yes\"}}", &err), S2S_ERR_CONFIG);
    cr_expect(strstr(err.msg, "model.bidirectional: expected true or false, got \"yes\""), "%s", err.msg);
    cr_assert_eq(parse(&c, "{\"model\": {\"cell\": \"rnn\"}}", &err), S2S_ERR_CONFIG);
    cr_expect(strstr(err.msg, "model.cell: expected one of gru,lstm, got \"rnn\""), "%s", err.msg);
    cr_assert_eq(parse(&c, "{\"model\": {\"dropout\": 1.5}}", &err), S2S_ERR_CONFIG);
    cr_expect(strstr(err.msg, "model.dropout: expected a number in [0, 0.99], got 1.5"), "%s", err.msg);
    cr_assert_eq(parse(&c, "{\"model\": 3}", &err), S2S_ERR_CONFIG);
    cr_expect(strstr(err.msg, "model: expected an object, got a number"), "%s", err.msg);
    cr_assert_eq(parse(&c, "[1, 2]", &err), S2S_ERR_CONFIG);
    cr_assert_eq(parse(&c, "{\"seed\": 1,\n \"x\": }", &err), S2S_ERR_CONFIG);
    cr_expect(strstr(err.msg, "x.json:2:") && strstr(err.msg, "not valid JSON"), "%s", err.msg);
}

Test(config, cross_field_checks) {
    Config c;
    S2sError err;
    cr_assert_eq(parse(&c, "{\"task\": {\"min_len\": 9, \"max_len\": 4}}", &err), S2S_OK);
    cr_expect_eq(config_check(&c, &err), S2S_ERR_CONFIG);
    cr_expect(strstr(err.msg, "task.min_len (9) must not exceed task.max_len (4)"), "%s", err.msg);
    cr_assert_eq(parse(&c, "{\"task\": {\"alphabet\": \"aba\"}}", &err), S2S_OK);
    cr_expect_eq(config_check(&c, &err), S2S_ERR_CONFIG);
    cr_assert_eq(parse(&c, "{\"task\": {\"type\": \"reverse\", \"subword\": \"bpe\"}}", &err), S2S_OK);
    cr_expect_eq(config_check(&c, &err), S2S_ERR_CONFIG);
    cr_expect(strstr(err.msg, "task.subword: bpe is for translation"), "%s", err.msg);
    /* a name becomes a folder under runs/: refused when read, before any folder is made */
    const char *bad_names[] = {"{\"name\": \"../x\"}", "{\"name\": \"a/b\"}", "{\"name\": \"..\"}", "{\"name\": \"\"}"};
    for (int i = 0; i < 4; i++) {
        cr_expect_eq(parse(&c, bad_names[i], &err), S2S_ERR_CONFIG, "%s", bad_names[i]);
        cr_expect(strstr(err.msg, "name: expected a plain name"), "%s", err.msg);
    }
    config_defaults(&c);
    cr_expect_eq(config_set(&c, "name=../up", &err), S2S_ERR_CONFIG);
    cr_expect_str_eq(c.name, "run");
}

/* cJSON keeps both members of a key given twice and its lookups take the first: a config
 * with a duplicate is refused, naming the key and where its second copy is. */
Test(config, duplicate_keys_are_refused) {
    Config c;
    S2sError err;
    cr_expect_eq(parse(&c, "{\"seed\": 1,\n \"seed\": 2}", &err), S2S_ERR_CONFIG);
    cr_expect(strstr(err.msg, "x.json:2:2: \"seed\" is given twice"), "%s", err.msg);
    cr_expect_eq(parse(&c, "{\"model\": {\"cell\": \"gru\",\n \"cell\": \"lstm\"}}", &err), S2S_ERR_CONFIG);
    cr_expect(strstr(err.msg, "\"model.cell\" is given twice"), "%s", err.msg);
    cr_expect_eq(parse(&c, "{\"train\": {\"lr\": 0.1}, \"train\": {\"epochs\": 2}}", &err), S2S_ERR_CONFIG);
    cr_expect(strstr(err.msg, "\"train\" is given twice"), "%s", err.msg);
}

Test(config, set_by_path_or_unique_leaf) {
    Config c;
    config_defaults(&c);
    S2sError err;
    cr_assert_eq(config_set(&c, "model.attention=dummy", &err), S2S_OK, "%s", err.msg);
    cr_expect_eq(c.model.attention, ATTN_DUMMY);
    cr_assert_eq(config_set(&c, "attention=\"meanpool\"", &err), S2S_OK, "%s", err.msg);
    cr_expect_eq(c.model.attention, ATTN_MEANPOOL);
    cr_assert_eq(config_set(&c, "lr=0.25", &err), S2S_OK);
    cr_expect_float_eq(c.train.lr, 0.25f, 1e-7);
    cr_assert_eq(config_set(&c, "bidirectional=true", &err), S2S_OK);
    cr_expect(c.model.bidirectional);
    cr_expect_eq(config_set(&c, "attenton=dot", &err), S2S_ERR_CONFIG);
    cr_expect(strstr(err.msg, "did you mean \"model.attention\""), "%s", err.msg);
    cr_expect_eq(config_set(&c, "lr", &err), S2S_ERR_CONFIG);
    cr_expect_eq(config_set(&c, "layers=0", &err), S2S_ERR_CONFIG);
}

/* Every attention the config names has its entry in the variant table, and nothing else is
 * accepted; every choice reads back from its name. */
Test(config, attention_choices_match_the_variant_table) {
    Config c;
    config_defaults(&c);
    S2sError err;
    for (int i = 0; i < ATTN_KIND_COUNT; i++) {
        cr_expect(ATTN_VARIANTS[i].forward != NULL, "variant %s has an entry in the table", ATTN_KIND_NAMES[i]);
        char a[64];
        snprintf(a, sizeof a, "attention=%s", ATTN_KIND_NAMES[i]);
        cr_expect_eq(config_set(&c, a, &err), S2S_OK, "%s: %s", a, err.msg);
        cr_expect_eq((int)c.model.attention, i);
    }
    cr_expect_null(ATTN_KIND_NAMES[ATTN_KIND_COUNT]);
    cr_expect_eq(config_set(&c, "attention=nonsense", &err), S2S_ERR_CONFIG);
    cr_expect(strstr(err.msg, "expected one of dummy,meanpool,dot,scaled_dot,general,additive,multihead, got \"nonsense\""), "%s", err.msg);
    for (int k = 0; k < config_key_count(); k++) { /* every name of every choice */
        ConfigKeyInfo ki = config_key_info(k);
        for (int i = 0; i < ki.n_names; i++) {
            char a[128], v[160];
            snprintf(a, sizeof a, "%s=%s", ki.path, ki.names[i]);
            cr_expect_eq(config_set(&c, a, &err), S2S_OK, "%s: %s", a, err.msg);
            config_key_value(&c, k, v, sizeof v);
            snprintf(a, sizeof a, "\"%s\"", ki.names[i]);
            cr_expect_str_eq(v, a);
        }
    }
}

Test(config, resolved_json_reads_back_identically) {
    Config a, b;
    S2sError err;
    cr_assert_eq(parse(&a, "{\"name\": \"q\", \"seed\": 42, \"model\": {\"dropout\": 0.3, \"kq\": 17}, \"train\": {\"lr\": 0.1}}",
                       &err), S2S_OK);
    char *j1 = config_to_json(&a);
    cr_assert_eq(parse(&b, j1, &err), S2S_OK, "%s", err.msg);
    char *j2 = config_to_json(&b);
    cr_expect_str_eq(j1, j2);
    cr_expect_float_eq(b.model.dropout, 0.3f, 0.0);
    cr_expect_float_eq(b.train.lr, 0.1f, 0.0);
    free(j1);
    free(j2);
}

Test(config, every_key_is_documented) {
    FILE *f = fopen("docs/reference/config.md", "rb");
    cr_assert(f != NULL, "docs/reference/config.md is missing");
    static char doc[1 << 16];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    doc[n] = '\0';
    fclose(f);
    for (int i = 0; i < config_key_count(); i++) {
        char needle[96];
        snprintf(needle, sizeof needle, "`%s`", config_key_info(i).path);
        cr_expect(strstr(doc, needle) != NULL, "docs/reference/config.md does not document %s", config_key_info(i).path);
    }
}

/* Every config in configs/ (found by globbing: a new one is checked without being listed). */
Test(config, shipped_configs_are_valid) {
    glob_t g;
    cr_assert_eq(glob("configs/*.json", 0, NULL, &g), 0, "no configs/*.json");
    cr_expect_geq(g.gl_pathc, 7);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        Config c;
        config_defaults(&c);
        S2sError err;
        cr_expect_eq(config_load(&c, g.gl_pathv[i], &err), S2S_OK, "%s", err.msg);
        cr_expect_eq(config_check(&c, &err), S2S_OK, "%s", err.msg);
        cr_expect_eq(model_check_config(&c.model, g.gl_pathv[i], &err), S2S_OK, "%s", err.msg);
    }
    globfree(&g);
}

static int key_index(const char *path) {
    for (int k = 0; k < config_key_count(); k++)
        if (!strcmp(config_key_info(k).path, path)) return k;
    cr_assert_fail("no key %s", path);
    return -1;
}

/* A key applies where it changes something: BPE keys under BPE, a transformer's under a
 * transformer, kq under the attentions that project keys, heads under multihead or a
 * transformer; the rest everywhere. */
Test(config, keys_apply_where_they_change_something) {
    Config c;
    config_defaults(&c);
    cr_expect(config_key_applies(&c, key_index("train.lr")) && config_key_applies(&c, key_index("task.alphabet")));
    cr_expect(!config_key_applies(&c, key_index("task.bpe_merges")) && !config_key_applies(&c, key_index("model.d_model")));
    c.task.type = TASK_TRANSLATE;
    cr_expect(!config_key_applies(&c, key_index("task.alphabet")) && !config_key_applies(&c, key_index("task.bpe_merges")));
    c.task.subword = SUBWORD_BPE;
    cr_expect(config_key_applies(&c, key_index("task.bpe_merges")) && !config_key_applies(&c, key_index("task.bpe_dropout_sides")));
    c.task.bpe_dropout = 0.1f;
    cr_expect(config_key_applies(&c, key_index("task.bpe_dropout_sides")));
    c.model.attention = ATTN_DOT;
    cr_expect(!config_key_applies(&c, key_index("model.kq")) && !config_key_applies(&c, key_index("model.heads")));
    c.model.attention = ATTN_ADDITIVE;
    cr_expect(config_key_applies(&c, key_index("model.kq")));
    c.model.attention = ATTN_MULTIHEAD;
    cr_expect(config_key_applies(&c, key_index("model.heads")) && config_key_applies(&c, key_index("model.cell")));
    c.model.type = MODEL_TRANSFORMER;
    cr_expect(!config_key_applies(&c, key_index("model.cell")) && !config_key_applies(&c, key_index("model.attention")));
    cr_expect(config_key_applies(&c, key_index("model.d_model")) && config_key_applies(&c, key_index("model.heads")));
    cr_expect(!config_key_applies(&c, key_index("model.max_positions")));
    c.model.positions = POSITIONS_LEARNED;
    cr_expect(config_key_applies(&c, key_index("model.max_positions")));
    c.train.optimizer = OPTIMIZER_SGD;
    cr_expect(!config_key_applies(&c, key_index("train.adam_beta2")));
}

/* Keys that change no number (how a run is carried out, logged and kept) are few and named;
 * copying a key's value makes that key agree and nothing else. */
Test(config, keys_that_change_no_number_and_key_copy) {
    const char *same[] = {"train.threads", "train.log_every", "train.save_every", "train.keep_last", "train.keep_best",
                          "train.overlap_sum", "train.sum_bucket_kb"};
    int n_same = 0;
    for (int i = 0; i < config_key_count(); i++) n_same += !config_key_changes_numbers(i);
    cr_expect_eq(n_same, (int)(sizeof same / sizeof *same));
    for (size_t i = 0; i < sizeof same / sizeof *same; i++) cr_expect(!config_key_changes_numbers(key_index(same[i])), "%s", same[i]);
    cr_expect(config_key_changes_numbers(key_index("train.lr")) && config_key_changes_numbers(key_index("seed")));
    Config a, b;
    config_defaults(&a);
    config_defaults(&b);
    a.task.type = b.task.type = TASK_TRANSLATE; /* data_dir applies */
    b.task.alphabet[0] = 'x';                    /* and the alphabet does not: no difference */
    b.train.log_every = 7;
    snprintf(b.task.data_dir, sizeof b.task.data_dir, "elsewhere");
    int k = config_first_difference(&a, &b);
    cr_assert_geq(k, 0);
    config_key_copy(&a, &b, k);
    int k2 = config_first_difference(&a, &b);
    cr_assert_geq(k2, 0);
    cr_expect_neq(k2, k);
    config_key_copy(&a, &b, k2);
    cr_expect_eq(config_first_difference(&a, &b), -1);
    cr_expect_str_eq(a.task.data_dir, "elsewhere");
}

/* A key given that changes nothing under the config is said (source_markers in a translation,
 * cell in a Transformer), by file and by --set; the shipped configs give none. */
Test(config, keys_that_do_nothing_are_named, .timeout = 30) {
    char *d = tu_tmpdir();
    const char *path = tu_path(d, "c.json");
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs("{\"task\": {\"type\": \"translate\", \"source_markers\": true, \"min_freq\": 1},\n"
          " \"model\": {\"type\": \"transformer\", \"cell\": \"lstm\", \"layers\": 2}}\n", f);
    fclose(f);
    Config c;
    config_defaults(&c);
    S2sError err;
    cr_assert_eq(config_load(&c, path, &err), S2S_OK, "%s", err.msg);
    const char *sets[] = {"alphabet=xyz", "train.lr=0.1", "heads=2"};
    char out[2048];
    cr_expect_eq(config_idle_keys(&c, path, sets, 3, out, sizeof out), 3, "%s", out);
    cr_expect(strstr(out, "c.json: task.source_markers does nothing in this config: it is the reversal task's (task.type reverse) key") &&
                  strstr(out, "c.json: model.cell does nothing in this config: it is the RNN's (model.type rnn) key") &&
                  strstr(out, "--set: task.alphabet does nothing") && !strstr(out, "min_freq") && !strstr(out, "layers") &&
                  !strstr(out, "heads") && !strstr(out, "train.lr"),
              "%s", out);
    /* a FIFO (its text read once, by config_load) is not opened again: no writer, no wait */
    cr_assert_eq(mkfifo(tu_path(d, "fifo.json"), 0600), 0);
    cr_expect_eq(config_idle_keys(&c, tu_path(d, "fifo.json"), NULL, 0, out, sizeof out), 0, "%s", out);
    tu_rm_rf(d);
    free(d);
    glob_t g;
    cr_assert_eq(glob("configs/*.json", 0, NULL, &g), 0);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        config_defaults(&c);
        cr_assert_eq(config_load(&c, g.gl_pathv[i], &err), S2S_OK, "%s", err.msg);
        cr_expect_eq(config_idle_keys(&c, g.gl_pathv[i], NULL, 0, out, sizeof out), 0, "%s", out);
    }
    globfree(&g);
}
