/* test_doors.h — what the doors' suites (test_doors.c, test_doors_data.c) share: a tiny
 * trained run, copies to check a file is left as it was, and a small word corpus's config. */
#ifndef S2S_TEST_DOORS_H
#define S2S_TEST_DOORS_H

#include "serve_client.h"
#include "test_util.h"
#include "s2s/bpe.h"
#include "s2s/checkpoint.h"
#include "s2s/data.h"
#include "s2s/file.h"
#include "s2s/model.h"
#include "s2s/s2s.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#if defined(__SANITIZE_ADDRESS__)
#define DOORS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DOORS_ASAN 1
#endif
#endif

static inline const char *tiny_json(void) {
    return "{\"name\": \"tiny\", \"seed\": 3,"
           " \"task\": {\"type\": \"reverse\", \"alphabet\": \"abcd\", \"min_len\": 3, \"max_len\": 8, \"train_size\": 200,"
           "          \"valid_size\": 20, \"test_size\": 20, \"data_seed\": 5},"
           " \"model\": {\"cell\": \"gru\", \"embedding\": 8, \"encoder_hidden\": 16, \"decoder_hidden\": 16, \"attention\": \"dot\"},"
           " \"train\": {\"lr\": 0.01, \"batch_size\": 32, \"epochs\": 1, \"log_every\": 5}}";
}

/* A folder with a tiny trained run in run/ (model.bin, last.bin) and its config as tiny.json. */
static inline char *tiny_dir(void) {
    char *d = tu_tmpdir();
    tu_write(tu_path(d, "tiny.json"), "%s", tiny_json());
    cr_assert_eq(tu_sh("cd %s && %s/train --config tiny.json --out run > train.txt 2>&1", d, tu_bin()), 0, "%s",
                 tu_slurp(tu_path(d, "train.txt"), NULL));
    return d;
}

/* Whether the file at path still has the bytes of the copy made before (path.before). */
static inline bool unchanged(const char *d, const char *name) {
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/%s", d, name);
    snprintf(b, sizeof b, "%s/%s.before", d, name);
    return tu_same_file(a, b);
}

static inline void keep_copy(const char *d, const char *name) {
    cr_assert_eq(tu_sh("cd %s && cp %s %s.before", d, name, name), 0);
}

/* d/c.json: a small GRU on d's word corpus (train, val, test), its cache in d/cache. */
static inline void word_config(const char *d) {
    tu_write(tu_path(d, "c.json"),
             "{\"name\": \"t\", \"seed\": 1, \"task\": {\"type\": \"translate\", \"data_dir\": \"%s\", \"train_prefix\": "
             "\"train\", \"valid_prefix\": \"val\", \"test_prefix\": \"test\", \"subword\": \"none\", \"min_freq\": 1, "
             "\"cache_dir\": \"%s/cache\", \"teacher_beam\": 1}, \"model\": {\"cell\": \"gru\", \"embedding\": 16, "
             "\"encoder_hidden\": 16, \"decoder_hidden\": 16, \"attention\": \"dot\"}, \"train\": {\"epochs\": 1, "
             "\"batch_size\": 32, \"lr\": 0.01, \"log_every\": 1000, \"max_decode_len\": 12}}",
             d, d);
}

#endif
