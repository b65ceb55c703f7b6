/* test_multi30k.c — a short Multi30k run end to end on a subset (3,000 training pairs):
 * training with BLEU validation, the test line, ./translate on raw German with beam search
 * and --ref. Skipped when the data are not there ($MULTI30K_DIR or ../shared/data/multi30k). */
#include "test_util.h"
#include "s2s/viz.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


Test(multi30k, smoke_run_on_a_subset, .timeout = 300) {
    const char *m30k = tu_multi30k_dir("tok/train.lc.norm.tok.de");
    if (!m30k) cr_skip_test("Multi30k not found (set MULTI30K_DIR)");
    char src[600];
    snprintf(src, sizeof src, "%s/tok", m30k);
    const char *bin = tu_bin();
    char *d = tu_tmpdir();
    cr_assert_eq(tu_sh("set -e; for l in de en; do head -3000 %s/train.lc.norm.tok.$l > %s/train.$l;"
                    " head -150 %s/val.lc.norm.tok.$l > %s/val.$l; head -150 %s/test_2016_flickr.lc.norm.tok.$l > %s/test.$l; done",
                    src, d, src, d, src, d),
                 0);
    cr_assert_eq(tu_sh("%s/train --config multi30k --out %s/run --set data_dir=%s --set train_prefix=train --set valid_prefix=val"
                    " --set test_prefix=test --set embedding=32 --set encoder_hidden=48 --set decoder_hidden=64"
                    " --set kq=32 --set epochs=2 --set batch_size=64 --set lr=0.003 --set max_decode_len=30 > %s/out.txt",
                    bin, d, d, d),
                 0);
    char p[256];
    snprintf(p, sizeof p, "%s/out.txt", d);
    char *out = tu_slurp(p, NULL);
    cr_assert(out, "%s", p);
    cr_expect(strstr(out, "BLEU") && strstr(out, "test (best checkpoint)"), "%s", out);
    cr_expect(strstr(out, "data: 3000 training pairs"), "%s", out);
    free(out);
    snprintf(p, sizeof p, "%s/run/log.jsonl", d);
    char *log = tu_slurp(p, NULL);
    cr_assert(log, "%s", p);
    cr_expect(strstr(log, "\"valid_bleu\":") && strstr(log, "\"test_bleu\":"), "BLEU is logged");
    free(log);
    /* training-time pictures of a translation model read back as PNGs */
    const char *pics[] = {"attention/epoch01_ex1.png", "attention/epoch02_ex4.png", "curves.png"};
    for (int i = 0; i < 3; i++) {
        char pp[400];
        snprintf(pp, sizeof pp, "%s/run/%s", d, pics[i]);
        Image im;
        S2sError err;
        cr_expect_eq(png_read(pp, &im, &err), S2S_OK, "%s", err.msg);
        if (im.rgb) image_free(&im);
    }
    /* raw German in, one tokenised English line out; beam search and BLEU against references */
    cr_expect_eq(tu_sh("echo 'Ein Mann fährt Fahrrad.' | %s/translate %s/run/model.bin > %s/one.txt", bin, d, d), 0);
    snprintf(p, sizeof p, "%s/one.txt", d);
    char *one = tu_slurp(p, NULL);
    cr_assert(one, "%s", p);
    int lines = 0;
    for (char *c = one; *c; c++) lines += *c == '\n';
    cr_expect_eq(lines, 1, "%s", one);
    free(one);
    cr_expect_eq(tu_sh("%s/translate %s/run/model.bin --tokenized --beam 3 --input %s/test.de --ref %s/test.en"
                    " > %s/hyp.txt 2> %s/bleu.txt", bin, d, d, d, d, d), 0);
    snprintf(p, sizeof p, "%s/bleu.txt", d);
    char *bleu = tu_slurp(p, NULL);
    cr_assert(bleu, "%s", p);
    cr_expect(strncmp(bleu, "BLEU = ", 7) == 0, "--ref prints BLEU: %s", bleu);
    free(bleu);
    cr_expect_eq(tu_sh("%s/bleu %s/test.en < %s/hyp.txt > /dev/null", bin, d, d), 0);
    tu_rm_rf(d);
    free(d);
}

/* ./speed times training steps on a prepared corpus, whose training pairs stream from the
 * prepared file: it read them with batch_fill, which asserted (make bench aborted on every
 * translation config). */
Test(multi30k, speed_trains_on_a_streamed_corpus, .timeout = 300) {
    const char *m30k = tu_multi30k_dir("tok/train.lc.norm.tok.de");
    if (!m30k) cr_skip_test("Multi30k not found (set MULTI30K_DIR)");
    char *d = tu_tmpdir();
    cr_assert_eq(tu_sh("set -e; for l in de en; do head -2000 %s/tok/train.lc.norm.tok.$l > %s/train.$l;"
                       " head -50 %s/tok/val.lc.norm.tok.$l > %s/val.$l; head -50 %s/tok/test_2016_flickr.lc.norm.tok.$l > %s/test.$l;"
                       " done", m30k, d, m30k, d, m30k, d),
                 0);
    const char *sets = "--set data_dir=%s --set train_prefix=train --set valid_prefix=val --set test_prefix=test "
                       "--set cache_dir=%s/cache --set embedding=32 --set encoder_hidden=48 --set decoder_hidden=64 --set kq=32";
    char cmd[1200], set[700];
    snprintf(set, sizeof set, sets, d, d);
    snprintf(cmd, sizeof cmd, "%s/speed --config multi30k %s --warmup 1 --iters 2 --no-decode > %s/out.txt 2> %s/err.txt", tu_bin(),
             set, d, d);
    cr_assert_eq(tu_sh("%s", cmd), 0, "%s", tu_slurp(tu_path(d, "err.txt"), NULL));
    cr_expect(tu_file_has(tu_path(d, "out.txt"), "\"event\":\"train\""));
    tu_rm_rf(d);
    free(d);
}
