/* test_fuzz_replay.c — every file of the fuzz corpora (tests/fuzz/corpus/<target>/: seeds
 * and every input a fuzzer found interesting, crashes included) replays through its target. */
#include "fuzz/targets.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int replay(const char *target, int (*fn)(const uint8_t *, size_t)) {
    char dir[256];
    snprintf(dir, sizeof dir, "tests/fuzz/corpus/%s", target);
    DIR *d = opendir(dir);
    cr_assert(d != NULL, "no corpus at %s", dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[600];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        FILE *f = fopen(p, "rb");
        if (!f) continue;
        fseek(f, 0, SEEK_END);
        long size = ftell(f);
        rewind(f);
        uint8_t *buf = malloc((size_t)size + 1);
        size_t got = fread(buf, 1, (size_t)size, f);
        fclose(f);
        fn(buf, got);
        free(buf);
        n++;
    }
    closedir(d);
    return n;
}

Test(fuzz, config_corpus) { cr_expect_gt(replay("config", fuzz_config), 0); }
Test(fuzz, model_corpus) { cr_expect_gt(replay("model", fuzz_model), 0); }
Test(fuzz, text_corpus) { cr_expect_gt(replay("text", fuzz_text), 0); }
Test(fuzz, state_corpus) { cr_expect_gt(replay("state", fuzz_state), 0); }
Test(fuzz, attend_corpus) { cr_expect_gt(replay("attend", fuzz_attend), 0); }
Test(fuzz, bpe_corpus) { cr_expect_gt(replay("bpe", fuzz_bpe), 0); }
Test(fuzz, safetensors_corpus) { cr_expect_gt(replay("safetensors", fuzz_safetensors), 0); }
Test(fuzz, serve_corpus) { cr_expect_gt(replay("serve", fuzz_serve), 0); }
Test(fuzz, prepared_corpus) { cr_expect_gt(replay("prepared", fuzz_prepared), 0); }
