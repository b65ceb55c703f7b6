/* test_subword_run.c — the subword path end to end on a small made-up parallel corpus in
 * gzip files: training learns a BPE model from the raw text, validation reports sacreBLEU and
 * chrF (never under BLEU's name), the model file carries the subword model, and ./translate
 * reads and writes raw text with it. */
#include "test_util.h"
#include "s2s/checkpoint.h"
#include "s2s/data.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* d/c.json: a small GRU with dot attention on d's corpora, Adam 0.005 in batches of 32;
 * task_keys and train_keys add keys to those objects (JSON text starting with a comma, or ""). */
static void write_config(const char *d, unsigned seed, const char *task_keys, int embedding, int hidden, int epochs,
                         const char *train_keys) {
    FILE *f = fopen(tu_path(d, "c.json"), "w");
    cr_assert(f);
    fprintf(f, "{\"name\": \"sw\", \"seed\": %u, \"task\": {\"type\": \"translate\", \"data_dir\": \"%s\", \"train_prefix\": \"train\", "
               "\"valid_prefix\": \"val\", \"test_prefix\": \"test\"%s}, "
               "\"model\": {\"cell\": \"gru\", \"embedding\": %d, \"encoder_hidden\": %d, \"decoder_hidden\": %d, "
               "\"attention\": \"dot\", \"combine\": \"concat\"}, \"train\": {\"epochs\": %d, \"batch_size\": 32, \"lr\": 0.005, "
               "\"log_every\": 1000%s}}",
            seed, d, task_keys, embedding, hidden, hidden, epochs, train_keys);
    fclose(f);
}

static void drop_subword(ParamStore *ps, CkptSave *s, void *ctx) {
    (void)ps;
    (void)ctx;
    s->subword = NULL;
    s->subword_len = 0;
}

Test(subword, raw_text_run_end_to_end, .timeout = 240) {
    char *d = tu_word_corpus_dir(1500, 60, true);
    write_config(d, 1, ", \"subword\": \"bpe\", \"bpe_merges\": 60", 32, 64, 25, ", \"metric\": \"bleu\"");
    cr_assert_eq(tu_sh("%s/train --config %s/c.json --out %s/run > %s/out.txt 2>&1", tu_bin(), d, d, d), 0, "%s",
                 tu_slurp(tu_path(d, "out.txt"), NULL));
    cr_expect(tu_file_has(tu_path(d, "out.txt"), "sacreBLEU"), "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    char log[600];
    snprintf(log, sizeof log, "%s/run/log.jsonl", d);
    cr_expect(tu_file_has(log, "\"valid_sacrebleu\"") && tu_file_has(log, "\"valid_chrf\"") && tu_file_has(log, "\"test_sacrebleu\""));
    cr_expect(!tu_file_has(log, "\"valid_bleu\""), "a subword run's BLEU is sacreBLEU's: never under multi-bleu's name");
    /* raw, cased text in and out: the model learned the word-for-word mapping */
    cr_assert_eq(tu_sh("echo 'Ein Hund läuft über Straße.' | %s/translate %s/run/model.bin > %s/t.txt 2> %s/err.txt", tu_bin(), d,
                       d, d),
                 0, "%s", tu_slurp(tu_path(d, "err.txt"), NULL));
    char *t = tu_slurp(tu_path(d, "t.txt"), NULL);
    cr_expect_str_eq(t, "A dog runs over street.\n");
    free(t);
    /* --ref scores sacreBLEU and chrF on the raw text; --tokenized is for word models */
    cr_expect_eq(tu_sh("zcat %s/test.de.gz | %s/translate %s/run/model.bin --ref %s/test.en.gz.txt > /dev/null 2> /dev/null; "
                       "zcat %s/test.en.gz > %s/ref.txt && zcat %s/test.de.gz | %s/translate %s/run/model.bin --ref %s/ref.txt "
                       "> %s/hyp.txt 2> %s/score.txt",
                       d, tu_bin(), d, d, d, d, d, tu_bin(), d, d, d, d),
                 0);
    cr_expect(tu_file_has(tu_path(d, "score.txt"), "BLEU|nrefs:1|case:mixed|eff:no|tok:13a") &&
                  tu_file_has(tu_path(d, "score.txt"), "chrF2|nrefs:1"),
              "%s", tu_slurp(tu_path(d, "score.txt"), NULL));
    cr_expect_eq(tu_sh("echo a | %s/translate %s/run/model.bin --tokenized > /dev/null 2>&1", tu_bin(), d), 2);
    /* ./compare tabulates sacreBLEU for subword runs: its mean of one run is the run's test line */
    cr_assert_eq(tu_sh("%s/compare --runs %s/run --out %s/cmp > /dev/null 2> %s/err.txt", tu_bin(), d, d, d), 0, "%s",
                 tu_slurp(tu_path(d, "err.txt"), NULL));
    char sj[600];
    snprintf(sj, sizeof sj, "%s/cmp/summary.json", d);
    cr_expect(tu_file_has(sj, "\"metric\":\t\"sacrebleu\""), "%s", tu_slurp(sj, NULL));
    char *logtext = tu_slurp(log, NULL), *sum = tu_slurp(sj, NULL);
    const char *tl = strstr(logtext, "\"test_sacrebleu\":"), *sm = strstr(sum, "\"mean\":");
    cr_assert(tl && sm);
    double a = strtod(tl + strlen("\"test_sacrebleu\":"), NULL), b = strtod(sm + strlen("\"mean\":"), NULL);
    cr_expect(fabs(a - b) < 1e-9, "compare's sacreBLEU %.12g, the run's test line %.12g", b, a);
    free(logtext);
    free(sum);
    /* the vocabulary by its size instead of merges; too small for the text's characters: exit 2 */
    cr_expect_eq(tu_sh("%s/train --config %s/c.json --set bpe_vocab_size=320 --pause-at 1 --out %s/vs > %s/out.txt 2>&1", tu_bin(), d,
                       d, d),
                 0);
    cr_expect(tu_file_has(tu_path(d, "out.txt"), "vocabulary 320 source / 320 target"), "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    cr_expect_eq(tu_sh("%s/train --config %s/c.json --set bpe_vocab_size=100 --out %s/vs2 > /dev/null 2> %s/err.txt", tu_bin(), d, d, d),
                 2);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "task.bpe_vocab_size: a vocabulary of 100 pieces"), "%s",
              tu_slurp(tu_path(d, "err.txt"), NULL));
    /* a word run beside it: two BLEUs, never one table */
    cr_assert_eq(tu_sh("%s/train --config %s/c.json --set subword=none --set min_freq=1 --set epochs=1 --out %s/word > /dev/null 2>&1",
                       tu_bin(), d, d),
                 0);
    cr_expect_neq(tu_sh("%s/compare --runs %s/run %s/word --out %s/cmp2 2> %s/err.txt", tu_bin(), d, d, d, d), 0);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "do not compare"), "%s", tu_slurp(tu_path(d, "err.txt"), NULL));
    /* a model file whose subword model is gone is refused */
    char model[600];
    snprintf(model, sizeof model, "%s/run/model.bin", d);
    tu_rewrite_checkpoint(model, drop_subword, NULL);
    cr_expect_eq(tu_sh("echo a | %s/translate %s > /dev/null 2> %s/err.txt", tu_bin(), model, d), 1);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "lacks a subword model"), "%s", tu_slurp(tu_path(d, "err.txt"), NULL));
    tu_rm_rf(d);
    free(d);
}

static void drop_target_subword(ParamStore *ps, CkptSave *s, void *ctx) {
    (void)ps;
    (void)ctx;
    s->subword_trg = NULL;
    s->subword_trg_len = 0;
}

/* A BPE model for each language (task.bpe_joint false): vocabularies of their own sizes, the
 * model file carries both models, raw text in and out; a file that lost the target's model is
 * refused, naming it. */
Test(subword, a_model_for_each_language, .timeout = 240) {
    char *d = tu_word_corpus_dir(1500, 60, false);
    write_config(d, 1, ", \"subword\": \"bpe\", \"bpe_merges\": 40, \"bpe_joint\": false", 32, 64, 25, ", \"metric\": \"bleu\"");
    cr_assert_eq(tu_sh("%s/train --config %s/c.json --out %s/run > %s/out.txt 2>&1", tu_bin(), d, d, d), 0, "%s",
                 tu_slurp(tu_path(d, "out.txt"), NULL));
    /* each side: 4 specials, 256 bytes, its own characters, 40 merges */
    Checkpoint ck;
    S2sError err;
    cr_assert_eq(ckpt_load(&ck, tu_path(d, "run/model.bin"), &err), S2S_OK, "%s", err.msg);
    cr_expect(ck.subword && ck.subword_trg, "both models in the file");
    cr_expect_neq(ck.n_src, ck.n_trg);
    int umlauts = 0;
    for (int i = 0; i < ck.n_trg; i++) umlauts += strstr(ck.trg_tokens[i], "\xc3\xa4") != NULL || strstr(ck.trg_tokens[i], "\xc3\xbc") != NULL;
    cr_expect_eq(umlauts, 0, "no German character among the English pieces");
    ckpt_free(&ck);
    cr_assert_eq(tu_sh("echo 'Ein Hund läuft über Straße.' | %s/translate %s/run/model.bin > %s/t.txt 2> %s/err.txt", tu_bin(), d,
                       d, d),
                 0, "%s", tu_slurp(tu_path(d, "err.txt"), NULL));
    char *t = tu_slurp(tu_path(d, "t.txt"), NULL);
    cr_expect_str_eq(t, "A dog runs over street.\n");
    free(t);
    /* the joint model of the same text: one model in the file */
    cr_assert_eq(tu_sh("%s/train --config %s/c.json --set bpe_joint=true --pause-at 1 --out %s/joint > /dev/null 2>&1", tu_bin(), d, d),
                 0);
    cr_assert_eq(ckpt_load(&ck, tu_path(d, "joint/last.bin"), &err), S2S_OK, "%s", err.msg);
    cr_expect(ck.subword && !ck.subword_trg && ck.n_src == ck.n_trg);
    ckpt_free(&ck);
    char model[600];
    snprintf(model, sizeof model, "%s/run/model.bin", d);
    tu_rewrite_checkpoint(model, drop_target_subword, NULL);
    cr_expect_eq(tu_sh("echo a | %s/translate %s > /dev/null 2> %s/err.txt", tu_bin(), model, d), 1);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "the target vocabulary is not the subword model's pieces"), "%s",
              tu_slurp(tu_path(d, "err.txt"), NULL));
    tu_rm_rf(d);
    free(d);
}

/* The weights and Adam moments of two checkpoints, bit for bit (their states hold timings). */
static bool same_weights(const char *a, const char *b) {
    Checkpoint x, y;
    S2sError err;
    cr_assert_eq(ckpt_load(&x, a, &err), S2S_OK, "%s", err.msg);
    cr_assert_eq(ckpt_load(&y, b, &err), S2S_OK, "%s", err.msg);
    bool same = x.n_tensors == y.n_tensors && x.has_moments == y.has_moments;
    for (int i = 0; same && i < x.n_tensors; i++) {
        size_t bytes = x.tensors[i].size * sizeof(float);
        same = x.tensors[i].size == y.tensors[i].size && !memcmp(x.tensors[i].data, y.tensors[i].data, bytes) &&
               (!x.has_moments || (!memcmp(x.tensors[i].m, y.tensors[i].m, bytes) && !memcmp(x.tensors[i].v, y.tensors[i].v, bytes)));
    }
    ckpt_free(&x);
    ckpt_free(&y);
    return same;
}

/* BPE-dropout: each epoch trains on a new segmentation drawn from the seed and the epoch, so a
 * run paused mid-epoch and resumed ends with the same weights as one run; the model differs
 * from the run without dropout; validation and the model file keep the plain segmentation. */
Test(subword, bpe_dropout_run_resumes_bit_for_bit, .timeout = 240) {
    char *d = tu_word_corpus_dir(400, 30, false);
    write_config(d, 3, ", \"subword\": \"bpe\", \"bpe_merges\": 60, \"bpe_dropout\": 0.2", 16, 24, 3, ", \"metric\": \"bleu\", \"threads\": 1");
    cr_assert_eq(tu_sh("%s/train --config %s/c.json --out %s/one > %s/out.txt 2>&1", tu_bin(), d, d, d), 0, "%s",
                 tu_slurp(tu_path(d, "out.txt"), NULL));
    /* 13 batches an epoch: paused inside the second epoch, then inside the third */
    cr_assert_eq(tu_sh("%s/train --config %s/c.json --out %s/two --pause-at 17 > /dev/null 2>&1 && "
                       "%s/train --resume %s/two --pause-at 30 > /dev/null 2>&1 && %s/train --resume %s/two > %s/out.txt 2>&1",
                       tu_bin(), d, d, tu_bin(), d, tu_bin(), d, d),
                 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    cr_expect(same_weights(tu_path(d, "one/last.bin"), tu_path(d, "two/last.bin")), "paused twice and resumed: the same weights");
    cr_expect(tu_same_file(tu_path(d, "one/model.bin"), tu_path(d, "two/model.bin")));
    cr_expect(tu_same_file(tu_path(d, "one/test.hyp"), tu_path(d, "two/test.hyp")));
    cr_assert_eq(tu_sh("%s/train --config %s/c.json --set bpe_dropout=0 --out %s/plain > /dev/null 2>&1", tu_bin(), d, d), 0);
    cr_expect(!same_weights(tu_path(d, "one/last.bin"), tu_path(d, "plain/last.bin")), "dropout trained on other pieces");
    /* the model file translates with the plain segmentation: the same text as the pieces it reads */
    cr_expect_eq(tu_sh("echo 'Ein Hund läuft.' | %s/translate %s/one/model.bin > /dev/null 2>&1", tu_bin(), d), 0);
    /* the memory check sizes a step by the epoch's own pieces, and names them */
    cr_expect_eq(tu_sh("%s/train --config %s/c.json --set batch_size=1000000 --set encoder_hidden=4000 --set decoder_hidden=4000 "
                       "--out %s/big > /dev/null 2> %s/err.txt",
                       tu_bin(), d, d, d),
                 2);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "in epoch 1's BPE-dropout pieces") &&
                  tu_file_has(tu_path(d, "err.txt"), "task.bpe_dropout or the sequences smaller"),
              "%s", tu_slurp(tu_path(d, "err.txt"), NULL));
    cr_expect(access(tu_path(d, "big"), F_OK) != 0, "refused before the folder is made");
    /* dropout is for the models learned here */
    cr_expect_eq(tu_sh("%s/train --config %s/c.json --set subword=none --out %s/bad > /dev/null 2> %s/err.txt", tu_bin(), d, d, d), 2);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "task.bpe_dropout: BPE-dropout needs task.subword bpe"), "%s",
              tu_slurp(tu_path(d, "err.txt"), NULL));
    tu_rm_rf(d);
    free(d);
}

/* The user's SentencePiece model (spm_train's, unigram) on the same made-up corpus: training
 * reads its pieces, the model file carries the .model (translation works with it deleted), raw
 * text in and out. Skipped without Debian's sentencepiece (make deps installs it). */
Test(subword, sentencepiece_model_run_end_to_end, .timeout = 240) {
    if (tu_sh("command -v spm_train > /dev/null") != 0) cr_skip_test("Debian's sentencepiece is not installed");
    char *d = tu_word_corpus_dir(1500, 60, false);
    cr_assert_eq(tu_sh("cd %s && cat train.de train.en > both.txt && spm_train --input=both.txt --model_prefix=m --vocab_size=60 "
                       "> /dev/null 2>&1",
                       d),
                 0);
    char spm_keys[700];
    snprintf(spm_keys, sizeof spm_keys, ", \"subword\": \"sentencepiece\", \"spm_model\": \"%s/m.model\"", d);
    write_config(d, 1, spm_keys, 32, 64, 25, ", \"metric\": \"bleu\"");
    cr_assert_eq(tu_sh("%s/train --config %s/c.json --out %s/run > %s/out.txt 2>&1", tu_bin(), d, d, d), 0, "%s",
                 tu_slurp(tu_path(d, "out.txt"), NULL));
    cr_expect(tu_file_has(tu_path(d, "out.txt"), "vocabulary 63 source / 63 target"), "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    cr_expect(tu_file_has(tu_path(d, "out.txt"), "sacreBLEU"));
    cr_assert_eq(tu_sh("rm %s/m.model && echo 'Ein Hund läuft über Straße.' | %s/translate %s/run/model.bin > %s/t.txt 2> %s/err.txt", d,
                       tu_bin(), d, d, d),
                 0, "%s", tu_slurp(tu_path(d, "err.txt"), NULL));
    char *t = tu_slurp(tu_path(d, "t.txt"), NULL);
    cr_expect_str_eq(t, "A dog runs over street.\n");
    free(t);
    /* a config without its .model is a usage error */
    cr_expect_eq(tu_sh("%s/train --config %s/c.json --set spm_model= --out %s/run2 > /dev/null 2> %s/err.txt", tu_bin(), d, d, d), 2);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "task.spm_model must name"), "%s", tu_slurp(tu_path(d, "err.txt"), NULL));
    tu_rm_rf(d);
    free(d);
}

/* BPE-dropout on one side: the other side's pieces stay those of the plain segmentation,
 * while the dropped side's differ somewhere (each of 400 pairs sampled at p = 0.3). */
Test(subword, bpe_dropout_on_one_side) {
    char *d = tu_word_corpus_dir(400, 10, false);
    Config c;
    config_defaults(&c);
    char set[600];
    snprintf(set, sizeof set, "task.data_dir=%s", d);
    tu_config_set(&c, "task.type=translate");
    tu_config_set(&c, set);
    tu_config_set(&c, "task.train_prefix=train");
    tu_config_set(&c, "task.valid_prefix=val");
    tu_config_set(&c, "task.test_prefix=test");
    tu_config_set(&c, "task.subword=bpe");
    tu_config_set(&c, "task.bpe_merges=60");
    tu_config_set(&c, "task.bpe_dropout=0.3");
    tu_config_set(&c, "task.cache_dir="); /* the training ids in memory, to compare in place */
    TaskData td;
    S2sError err;
    cr_assert_eq(task_load(&td, &c.task, &err), S2S_OK, "%s", err.msg);
    for (int side = 0; side < 2; side++) {
        Rng rng;
        rng_init(&rng, 5, RNG_STREAM_SUBWORD);
        Dataset out;
        task_sample_train(&td, side == 0 ? 0.3f : 0.0f, side == 1 ? 0.3f : 0.0f, &rng, &out);
        cr_assert_eq(out.n, td.train.n);
        int src_diff = 0, trg_diff = 0;
        for (int i = 0; i < out.n; i++) {
            src_diff += out.src_len[i] != td.train.src_len[i] ||
                        memcmp(out.ids + out.src_off[i], td.train.ids + td.train.src_off[i], (size_t)out.src_len[i] * 4) != 0;
            trg_diff += out.trg_len[i] != td.train.trg_len[i] ||
                        memcmp(out.ids + out.trg_off[i], td.train.ids + td.train.trg_off[i], (size_t)out.trg_len[i] * 4) != 0;
        }
        cr_expect(side == 0 ? src_diff > 0 && trg_diff == 0 : src_diff == 0 && trg_diff > 0, "%s side: %d sources and %d targets differ",
                  side ? "target" : "source", src_diff, trg_diff);
        dataset_free(&out);
    }
    task_free(&td);
    tu_rm_rf(d);
    free(d);
}

/* ./translate with several models (an ensemble), --n-best in Moses' format and --score
 * (forced decoding), on word models of the made-up corpus (its words as the files have them:
 * --tokenized): a model with itself decodes as
 * itself; the ensemble's best hypothesis scored by --score gets the log-probability the beam
 * gave it; a target word outside the vocabulary is refused on its line; models of another
 * vocabulary cannot join. */
Test(subword, ensembles_n_best_and_forced_scores, .timeout = 240) {
    char *d = tu_word_corpus_dir(800, 40, true);
    write_config(d, 1, "", 16, 32, 3, ", \"metric\": \"valid_loss\"");
    cr_assert_eq(tu_sh("%s/train --config %s/c.json --out %s/a > /dev/null 2>&1 && %s/train --config %s/c.json --seed 2 "
                       "--set model.type=transformer --set d_model=16 --set heads=2 --set ff=32 --set layers=1 --out %s/b > /dev/null 2>&1",
                       tu_bin(), d, d, tu_bin(), d, d),
                 0);
    cr_assert_eq(tu_sh("zcat %s/test.de.gz | head -12 > %s/src.txt", d, d), 0);
    /* Moses n-best: "i ||| text ||| F0= logprob ||| logprob / (tokens + 1)" with i from 0 */
    cr_assert_eq(tu_sh("%s/translate %s/a/model.bin --tokenized --input %s/src.txt --beam 3 --n-best 3 > %s/nb.txt", tu_bin(), d, d, d), 0);
    char *nb = tu_slurp(tu_path(d, "nb.txt"), NULL);
    int lines = 0, last_id = 0;
    for (char *line = strtok(nb, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        int id;
        char text[512];
        float lp, score;
        cr_assert_eq(sscanf(line, "%d ||| %511[^|]||| F0= %f ||| %f", &id, text, &lp, &score), 4, "%s", line);
        cr_expect(id == last_id || id == last_id + 1, "%s", line);
        last_id = id;
        cr_expect_leq(lp, 0.0f);
        cr_expect_leq(score, 0.0f);
    }
    cr_expect_eq(lines, 36, "3 hypotheses for each of 12 lines");
    cr_expect_eq(last_id, 11);
    free(nb);
    /* a model with itself is itself */
    cr_assert_eq(tu_sh("%s/translate %s/a/model.bin %s/a/model.bin --tokenized --input %s/src.txt --beam 3 --n-best 3 > %s/nb2.txt", tu_bin(), d,
                       d, d, d),
                 0);
    cr_expect(tu_same_file(tu_path(d, "nb.txt"), tu_path(d, "nb2.txt")), "an ensemble of one model twice is that model");
    /* the ensemble's best, scored by forced decoding with the same ensemble */
    cr_assert_eq(tu_sh("%s/translate %s/a/model.bin %s/b/model.bin --tokenized --input %s/src.txt --beam 2 --n-best 2 > %s/ens.txt", tu_bin(), d,
                       d, d, d),
                 0);
    cr_assert_eq(tu_sh("%s/translate %s/a/model.bin %s/b/model.bin --tokenized --input %s/src.txt --beam 2 > %s/best.txt", tu_bin(), d, d, d, d), 0);
    cr_assert_eq(tu_sh("%s/translate %s/a/model.bin %s/b/model.bin --tokenized --input %s/src.txt --score %s/best.txt > %s/sc.txt", tu_bin(), d, d, d,
                       d, d),
                 0);
    char *ens = tu_slurp(tu_path(d, "ens.txt"), NULL), *sc = tu_slurp(tu_path(d, "sc.txt"), NULL);
    float beam_lp[12];
    int n_beam = 0, prev = -1;
    for (char *line = strtok(ens, "\n"); line; line = strtok(NULL, "\n")) {
        int id;
        float lp;
        if (sscanf(line, "%d ||| %*[^|]||| F0= %f", &id, &lp) == 2 && id != prev) beam_lp[n_beam++] = lp, prev = id;
    }
    cr_assert_eq(n_beam, 12);
    int n_sc = 0;
    for (char *line = strtok(sc, "\n"); line; line = strtok(NULL, "\n"), n_sc++) {
        float total, sum = 0, v;
        cr_assert_eq(sscanf(line, "%f |||", &total), 1, "%s", line);
        for (char *eq = strchr(line, '='); eq; eq = strchr(eq + 1, '='))
            if (sscanf(eq + 1, "%f", &v) == 1) sum += v;
        cr_expect(fabsf(sum - total) < 2e-3f * (1 + fabsf(total)), "the tokens' scores add up: %s", line);
        cr_expect(strstr(line, "</s>=") != NULL, "<eos> is scored: %s", line);
        cr_expect(fabsf(total - beam_lp[n_sc]) < 2e-3f * (1 + fabsf(total)), "line %d: forced %.4f, beam %.4f", n_sc + 1, total,
                  beam_lp[n_sc]);
    }
    cr_expect_eq(n_sc, 12);
    free(ens);
    free(sc);
    /* a target word outside the vocabulary: its line refused (an empty line), the others scored, exit 1 */
    cr_assert_eq(tu_sh("printf 'Ein Hund läuft.\\nEin Mann sitzt.\\n' > %s/s2.txt && printf 'A zebra runs.\\nA man sits.\\n' > %s/t2.txt", d, d),
                 0);
    cr_expect_eq(tu_sh("%s/translate %s/a/model.bin --tokenized --input %s/s2.txt --score %s/t2.txt > %s/o.txt 2> %s/err.txt", tu_bin(), d, d, d, d, d),
                 1);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "line 1") && tu_file_has(tu_path(d, "err.txt"), "<unk>"), "%s",
              tu_slurp(tu_path(d, "err.txt"), NULL));
    char *o = tu_slurp(tu_path(d, "o.txt"), NULL);
    cr_expect(o && o[0] == '\n' && strstr(o, "</s>="), "%s", o ? o : "(none)");
    free(o);
    cr_expect_eq(tu_sh("printf 'A man sits.\\n' > %s/t1.txt && %s/translate %s/a/model.bin --tokenized --input %s/s2.txt --score %s/t1.txt > /dev/null "
                       "2> %s/err.txt", d, tu_bin(), d, d, d, d),
                 1, "fewer targets than sources");
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "targets end before"), "%s", tu_slurp(tu_path(d, "err.txt"), NULL));
    cr_expect_eq(tu_sh("%s/translate %s/a/model.bin --tokenized --input %s/s2.txt --score %s/t1.txt --beam 2 2> /dev/null", tu_bin(), d, d, d), 2);
    /* length normalisation chosen on validation data: a BLEU per alpha, then the best */
    cr_assert_eq(tu_sh("cd %s && zcat val.de.gz > vs.txt && zcat val.en.gz > vr.txt", d), 0);
    /* run from a copy outside the tree: it must use the build under test (S2S_BIN_DIR), not a
     * ./translate a previous build left at the root (absent after make clean) */
    cr_expect_eq(tu_sh("mkdir -p %s/x/scripts && cp scripts/tune-alpha.sh %s/x/scripts/ && "
                       "%s/x/scripts/tune-alpha.sh --src %s/vs.txt --ref %s/vr.txt --beam 2 --alphas '0 1' %s/a/model.bin %s/b/model.bin "
                       "> %s/tune.txt 2>&1",
                       d, d, d, d, d, d, d, d),
                 0, "%s", tu_slurp(tu_path(d, "tune.txt"), NULL));
    cr_expect(tu_file_has(tu_path(d, "tune.txt"), "alpha 0 ") && tu_file_has(tu_path(d, "tune.txt"), "alpha 1 ") &&
                  tu_file_has(tu_path(d, "tune.txt"), "best on"),
              "%s", tu_slurp(tu_path(d, "tune.txt"), NULL));
    /* --tokenized reaches ./translate (word models on already tokenised files): scored against its
     * own --tokenized output, alpha 1 must give 100 (tokenising the raw source first decodes other
     * words) */
    cr_expect_eq(tu_sh("%s/translate %s/a/model.bin --tokenized --input %s/vs.txt --beam 2 --alpha 1 > %s/hyp1.txt 2> /dev/null "
                       "&& scripts/tune-alpha.sh --tokenized --src %s/vs.txt --ref %s/hyp1.txt --beam 2 --alphas 1 %s/a/model.bin "
                       "> %s/tune2.txt 2>&1",
                       tu_bin(), d, d, d, d, d, d, d),
                 0, "%s", tu_slurp(tu_path(d, "tune2.txt"), NULL));
    cr_expect(tu_file_has(tu_path(d, "tune2.txt"), "alpha 1     BLEU 100.00"), "%s", tu_slurp(tu_path(d, "tune2.txt"), NULL));
    /* three-way tying needs one vocabulary: two of the same size but other words are refused */
    cr_expect_eq(tu_sh("%s/train --config %s/c.json --set task.max_vocab=10 --set model.type=transformer --set d_model=16 "
                       "--set heads=2 --set ff=32 --set layers=1 --set tie_embeddings=all --out %s/tied > /dev/null 2> %s/err.txt",
                       tu_bin(), d, d, d),
                 2);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "model.tie_embeddings") && tu_file_has(tu_path(d, "err.txt"), "entry 4 is"),
              "%s", tu_slurp(tu_path(d, "err.txt"), NULL));
    /* another vocabulary cannot join */
    cr_assert_eq(tu_sh("%s/train --config %s/c.json --set task.max_vocab=10 --set epochs=1 --out %s/c > /dev/null 2>&1", tu_bin(), d, d),
                 0);
    cr_expect_eq(tu_sh("%s/translate %s/a/model.bin %s/c/model.bin --tokenized --input %s/src.txt > /dev/null 2> %s/err.txt", tu_bin(), d, d, d, d), 1);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "c/model.bin") && tu_file_has(tu_path(d, "err.txt"), "vocabulary"), "%s",
              tu_slurp(tu_path(d, "err.txt"), NULL));
    tu_rm_rf(d);
    free(d);
}
