/* test_compare.h — what the comparison suites (test_compare.c, test_compare_jobs.c) share: the
 * tiny comparison config, a file's text, and a run's own figures from its log. */
#ifndef S2S_TEST_COMPARE_H
#define S2S_TEST_COMPARE_H

#include "test_util.h"
#include "s2s/report.h"
#include "s2s/sacrebleu.h"
#include "s2s/text.h"
#include "s2s/viz.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

/* dir/c.json: the tiny comparison config with this many epochs, its path in cfg. */
static inline void write_tinycmp(char *cfg, size_t n, const char *dir, int epochs) {
    static const char *tinycmp =
        "{\"name\": \"c\", \"task\": {\"type\": \"reverse\", \"train_size\": 200, \"valid_size\": 30, \"test_size\": 30, \"max_len\": 8},"
        " \"model\": {\"embedding\": 8, \"encoder_hidden\": 16, \"decoder_hidden\": 16},"
        " \"train\": {\"batch_size\": 16, \"epochs\": %d}}";
    snprintf(cfg, n, "%s/c.json", dir);
    tu_write(cfg, tinycmp, epochs);
}

static inline bool file_has(const char *dir, const char *name, const char *text) {
    return tu_file_has(tu_path(dir, name), text);
}

/* From a run's own log: the test exact match (%) and the lowest validation loss of its epochs. */
static inline double from_log(const char *dir, bool valid_loss) {
    char p[1024];
    snprintf(p, sizeof p, "%s/log.jsonl", dir);
    FILE *f = fopen(p, "r");
    cr_assert(f != NULL, "%s", p);
    char line[1 << 14];
    double v = valid_loss ? INFINITY : NAN;
    while (fgets(line, sizeof line, f)) {
        const char *type = valid_loss ? "\"type\":\"epoch\"" : "\"type\":\"test\"";
        if (!strstr(line, type)) continue;
        cJSON *j = cJSON_Parse(line);
        if (valid_loss) v = fmin(v, cJSON_GetObjectItem(j, "valid_loss")->valuedouble);
        else v = 100.0 * cJSON_GetObjectItem(j, "test_exact_match")->valuedouble;
        cJSON_Delete(j);
    }
    fclose(f);
    return v;
}

#endif
