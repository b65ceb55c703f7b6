/* test_cli.h — what the program suites (test_cli.c, test_cli_input.c, test_cli_tools.c) share:
 * a small reversal config, a model trained from it, and a run's last test metric. */
#ifndef S2S_TEST_CLI_H
#define S2S_TEST_CLI_H

#include "test_util.h"
#include "s2s/checkpoint.h"
#include "s2s/data.h"
#include "s2s/viz.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* dir/small.json: a small reversal run of the given epochs. */
static inline void write_config(const char *dir, int epochs) {
    static const char *small =
        "{\"name\": \"small\", \"seed\": 3,"
        " \"task\": {\"type\": \"reverse\", \"alphabet\": \"abcd\", \"min_len\": 3, \"max_len\": 8, \"train_size\": 6000,"
        "          \"valid_size\": 100, \"test_size\": 100, \"data_seed\": 5},"
        " \"model\": {\"cell\": \"gru\", \"embedding\": 16, \"encoder_hidden\": 48, \"decoder_hidden\": 48, \"attention\": \"dot\","
        "           \"dropout\": 0.1},"
        " \"train\": {\"lr\": 0.005, \"batch_size\": 32, \"epochs\": %d, \"log_every\": 20}}";
    char path[256];
    snprintf(path, sizeof path, "%s/small.json", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f, "%s", path);
    fprintf(f, small, epochs);
    fclose(f);
}

/* A temporary folder holding a small reversal model trained for one epoch (run/model.bin),
 * for the tests of ./translate. */
static inline char *dir_with_small_model(void) {
    char *d = tu_tmpdir();
    write_config(d, 1);
    cr_assert_eq(tu_sh("%s/train --config %s/small.json --set train_size=400 --out %s/run > /dev/null", tu_bin(), d, d), 0);
    return d;
}

static inline double last_test_metric(const char *dir, const char *key) {
    char path[512];
    snprintf(path, sizeof path, "%s/log.jsonl", dir);
    char *txt = tu_slurp(path, NULL);
    cr_assert(txt != NULL);
    char *test = strstr(txt, "{\"type\":\"test\"");
    cr_assert(test != NULL, "no test line in %s", path);
    cJSON *j = cJSON_Parse(strtok(test, "\n"));
    double v = cJSON_GetObjectItemCaseSensitive(j, key)->valuedouble;
    cJSON_Delete(j);
    free(txt);
    return v;
}

#endif
