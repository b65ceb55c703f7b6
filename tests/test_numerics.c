/* test_numerics.c — docs/numerics.md is the models written down: scripts/numerics-check.py
 * rebuilds each architecture in PyTorch from the page's formulas alone (no code shared with
 * the goldens' references) and its logits must equal ./translate --logits on models of every
 * kind trained here; decoding by the page's rules (greedy, beam search's candidates, finishing,
 * stopping, length limit and normalisation) must give ./translate's n-best lists. Where
 * Debian's python3-torch is missing the test says so and skips. */
#include "test_util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Small reversal models covering what the page states: both cells, one to three layers, both
 * directions (the shared bridge, an LSTM's cells at 0), every attention variant (multihead with
 * the encoder as wide as the decoder and not), both combines, tying (decoder and all), one-hot embeddings, and
 * Transformers post- and pre-norm with learned and sinusoidal positions, GELU and ReLU. */
static const char *const MODELS[][2] = {
    {"gru-bi2-general", "model.cell=gru model.bidirectional=true model.layers=2 attention=general model.combine=concat "
                        "model.dropout=0.1"},
    {"lstm-bi2-additive", "model.cell=lstm model.bidirectional=true model.layers=2 attention=additive model.combine=luong"},
    {"lstm-uni2-scaled-tied", "model.cell=lstm model.bidirectional=false model.encoder_hidden=20 model.layers=2 "
                              "attention=scaled_dot model.combine=luong model.embedding=20 model.tie_embeddings=decoder"},
    {"gru-uni-luong-tied-all", "model.cell=gru model.bidirectional=false model.encoder_hidden=20 attention=general "
                               "model.combine=luong model.embedding=20 model.tie_embeddings=all"},
    {"gru-uni-dot-onehot", "model.cell=gru model.bidirectional=false model.encoder_hidden=20 attention=dot "
                           "model.combine=concat model.embedding_type=onehot"},
    {"lstm-bi-multihead", "model.cell=lstm model.bidirectional=true attention=multihead model.heads=2"},
    {"gru-uni-multihead-luong", "model.cell=gru model.bidirectional=false model.encoder_hidden=20 attention=multihead "
                                "model.heads=4 model.combine=luong"},
    {"gru-bi-meanpool", "model.cell=gru model.bidirectional=true attention=meanpool"},
    {"lstm-uni3-dummy", "model.cell=lstm model.bidirectional=false model.encoder_hidden=20 attention=dummy model.layers=3"},
    {"tf-post-learned-gelu", "model.type=transformer model.d_model=16 model.heads=2 model.ff=24 model.layers=2 "
                             "model.norm=post model.positions=learned model.max_positions=8 model.activation=gelu"},
    {"tf-pre-sinusoidal-tied", "model.type=transformer model.d_model=16 model.heads=4 model.ff=24 model.layers=1 "
                               "model.norm=pre model.tie_embeddings=all"},
};
#define N_MODELS (sizeof MODELS / sizeof *MODELS)

Test(numerics, every_architecture_rebuilt_from_the_page, .timeout = 300) {
    if (tu_sh("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1") != 0) {
        TU_SKIP("python3-torch is not installed: docs/numerics.md not checked against PyTorch");
    }
    char *d = tu_tmpdir();
    char models[4096] = "";
    for (size_t i = 0; i < N_MODELS; i++) {
        char sets[1024] = "";
        char *copy = strdup(MODELS[i][1]);
        for (char *tok = strtok(copy, " "); tok; tok = strtok(NULL, " "))
            snprintf(sets + strlen(sets), sizeof sets - strlen(sets), " --set %s", tok);
        free(copy);
        int rc = tu_sh("%s/train --config configs/reverse.json --out %s/%s --set task.train_size=300 --set task.valid_size=20 "
                       "--set task.test_size=20 --set train.epochs=1 --set train.batch_size=16 --set model.embedding=12 "
                       "--set model.encoder_hidden=10 --set model.decoder_hidden=20 --set model.kq=6%s > %s/%s.log 2>&1",
                       tu_bin(), d, MODELS[i][0], sets, d, MODELS[i][0]);
        cr_assert_eq(rc, 0, "%s: train failed (%s/%s.log)", MODELS[i][0], d, MODELS[i][0]);
        snprintf(models + strlen(models), sizeof models - strlen(models), " %s/%s/model.bin", d, MODELS[i][0]);
    }
    FILE *f = fopen(tu_path(d, "src.txt"), "w");
    cr_assert(f != NULL);
    fputs("abcd\ndcbaabcdab\nabcab\nacd\nddddddddddddd\n", f);
    fclose(f);
    int rc = tu_sh("S2S_BIN_DIR=%s /usr/bin/python3 scripts/numerics-check.py%s --src %s/src.txt --n 5 > %s/out.txt 2>&1",
                   tu_bin(), models, d, d);
    char *out = tu_slurp(tu_path(d, "out.txt"), NULL);
    cr_expect_eq(rc, 0, "%s", out ? out : "(no output)");
    int ok = 0;
    for (const char *p = out; p && (p = strstr(p, " ok\n")); p++) ok++;
    cr_expect_eq(ok, (int)N_MODELS, "every model checked: %s", out ? out : "(no output)");
    free(out);
    tu_rm_rf(d);
    free(d);
}
