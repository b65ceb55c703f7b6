/* test_spm.c — SentencePiece .model files segment text exactly as spm_encode does (and decode
 * as spm_decode): committed
 * small models (unigram with byte fallback, BPE; identity normalisation) with spm_encode's
 * output, and, where Debian's sentencepiece is installed (make deps installs it), models
 * trained in the test (unigram and BPE, nmt_nfkc and identity, byte fallback) compared line by
 * line on made-up text, Unicode stress lines and Multi30k's test set when it is here. Damaged
 * files are refused with a message. */
#include "test_util.h"
#include "s2s/spm.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPM_DIR "tests/golden-extra/spm"

Test(spm_cli, committed_models_segment_as_spm_encode) {
    const char *models[] = {"uni_id_bytes", "bpe_id"};
    for (int m = 0; m < 2; m++) {
        char *d = tu_tmpdir();
        cr_assert_eq(tu_sh("cat %s/text.txt %s/stress.txt | %s/subword encode --model %s/%s.model > %s/out", SPM_DIR, SPM_DIR,
                           tu_bin(), SPM_DIR, models[m], d),
                     0);
        char want[256];
        snprintf(want, sizeof want, "%s/%s.expected", SPM_DIR, models[m]);
        cr_expect(tu_same_file(tu_path(d, "out"), want), "%s: pieces differ from spm_encode's", models[m]);
        /* and back, as spm_decode: its pieces, and hand-made ones (control and unknown pieces,
         * bytes that are not UTF-8, double marks, text the model does not have) */
        cr_assert_eq(tu_sh("%s/subword decode --model %s/%s.model < %s > %s/back && "
                           "%s/subword decode --model %s/%s.model < %s/pieces.txt > %s/hand",
                           tu_bin(), SPM_DIR, models[m], want, d, tu_bin(), SPM_DIR, models[m], SPM_DIR, d),
                     0);
        snprintf(want, sizeof want, "%s/%s.decoded", SPM_DIR, models[m]);
        cr_expect(tu_same_file(tu_path(d, "back"), want), "%s: text differs from spm_decode's", models[m]);
        snprintf(want, sizeof want, "%s/%s.pieces_decoded", SPM_DIR, models[m]);
        cr_expect(tu_same_file(tu_path(d, "hand"), want), "%s: hand-made pieces decode differently", models[m]);
        tu_rm_rf(d);
        free(d);
    }
}

static bool have_spm(void) { return tu_sh("command -v spm_train > /dev/null && command -v spm_encode > /dev/null") == 0; }

Test(spm_cli, trained_models_segment_as_spm_encode, .timeout = 240) {
    if (!have_spm()) cr_skip_test("Debian's sentencepiece is not installed (make deps installs it)");
    char *d = tu_tmpdir();
    const char *m30k = tu_multi30k_dir("raw/test_2016_flickr.de.gz");
    cr_assert_eq(tu_sh("cat %s/text.txt %s/stress.txt > %s/in.txt && cp %s/text.txt %s/text.txt", SPM_DIR, SPM_DIR, d, SPM_DIR, d), 0);
    if (m30k) cr_assert_eq(tu_sh("zcat %s/raw/test_2016_flickr.de.gz >> %s/in.txt", m30k, d), 0);
    struct {
        const char *name, *opts;
    } models[] = {
        {"uni_nfkc", "--model_type=unigram --vocab_size=150"},
        {"uni_id_bytes", "--model_type=unigram --vocab_size=420 --normalization_rule_name=identity --byte_fallback=true "
                         "--character_coverage=0.99"},
        {"bpe_nfkc", "--model_type=bpe --vocab_size=400"},
        {"bpe_bytes", "--model_type=bpe --vocab_size=500 --byte_fallback=true --character_coverage=0.99"},
    };
    for (size_t k = 0; k < sizeof models / sizeof models[0]; k++) {
        cr_assert_eq(tu_sh("cd %s && spm_train --input=text.txt --model_prefix=%s %s > /dev/null 2>&1", d, models[k].name,
                           models[k].opts),
                     0, "spm_train %s", models[k].name);
        cr_assert_eq(tu_sh("cd %s && spm_encode --model=%s.model < in.txt > want.txt && %s/subword encode --model %s.model < in.txt > "
                           "got.txt",
                           d, models[k].name, tu_bin(), models[k].name),
                     0);
        cr_expect(tu_same_file(tu_path(d, "want.txt"), tu_path(d, "got.txt")), "%s: pieces differ from spm_encode's", models[k].name);
        cr_assert_eq(tu_sh("cd %s && spm_decode --model=%s.model < want.txt > want_text.txt && %s/subword decode --model %s.model < "
                           "want.txt > got_text.txt",
                           d, models[k].name, tu_bin(), models[k].name),
                     0);
        cr_expect(tu_same_file(tu_path(d, "want_text.txt"), tu_path(d, "got_text.txt")), "%s: text differs from spm_decode's",
                  models[k].name);
    }
    tu_rm_rf(d);
    free(d);
}

Test(spm, damaged_files_are_refused) {
    size_t len = 0;
    char *good = tu_slurp(SPM_DIR "/bpe_id.model", &len);
    cr_assert(good && len > 100);
    Spm s;
    S2sError err;
    cr_assert_eq(spm_parse(&s, good, len, "m", &err), S2S_OK, "%s", err.msg);
    cr_expect_gt(s.n, 100);
    char *piece = spm_encode_text(&s, "Ein Mann läuft.");
    cr_expect(strlen(piece) > 0);
    free(piece);
    spm_free(&s);
    /* every truncation: refused or read, never a crash (the sanitizer build watches) */
    for (size_t cut = 0; cut < len; cut += 1 + cut / 8) {
        if (spm_parse(&s, good, cut, "m", &err) == S2S_OK) spm_free(&s);
        else cr_expect(strstr(err.msg, "m: ") == err.msg, "%s", err.msg);
    }
    cr_expect_eq(spm_parse(&s, "", 0, "m", &err), S2S_ERR_CORRUPT);
    cr_expect(strstr(err.msg, "no pieces"), "%s", err.msg);
    cr_expect_eq(spm_parse(&s, "\xff\xff\xff", 3, "m", &err), S2S_ERR_CORRUPT);
    cr_expect(strstr(err.msg, "bad protobuf"), "%s", err.msg);
    /* a flipped byte anywhere: refused or read */
    char *bad = malloc(len);
    for (size_t i = 0; i < len; i += 7) {
        memcpy(bad, good, len);
        bad[i] ^= 0x5A;
        if (spm_parse(&s, bad, len, "m", &err) == S2S_OK) {
            char *p = spm_encode_text(&s, "Ein Mann läuft über die Straße.");
            free(p);
            spm_free(&s);
        }
    }
    free(bad);
    free(good);
}
