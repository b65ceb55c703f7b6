/* test_distill.c — sequence-level distillation end to end on a small made-up corpus: the
 * teacher's translations are ./translate's beam output byte for byte, made once and read by
 * the next student, resumed after a stop where the last whole line ends; the student trains on
 * them (alone, or with the original pairs); a teacher in int8 or bf16; a file of translations
 * given instead; and the bad inputs: a teacher of other pieces, a short translations file, both
 * at once, several corpora, a missing teacher. */
#include "test_util.h"
#include "s2s/config.h"
#include "s2s/model.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* d/c.json: a small GRU on d's raw-text corpora (BPE of 60 merges), its cache in d/cache. */
static void write_config(const char *d) {
    FILE *f = fopen(tu_path(d, "c.json"), "w");
    cr_assert(f);
    fprintf(f, "{\"name\": \"t\", \"seed\": 1, \"task\": {\"type\": \"translate\", \"data_dir\": \"%s\", \"train_prefix\": \"train\", "
               "\"valid_prefix\": \"val\", \"test_prefix\": \"test\", \"subword\": \"bpe\", \"bpe_merges\": 60, \"cache_dir\": "
               "\"%s/cache\"}, \"model\": {\"cell\": \"gru\", \"embedding\": 32, \"encoder_hidden\": 64, \"decoder_hidden\": 64, "
               "\"attention\": \"dot\", \"combine\": \"concat\"}, \"train\": {\"epochs\": 8, \"batch_size\": 32, \"lr\": 0.005, "
               "\"log_every\": 1000, \"metric\": \"bleu\"}}",
            d, d);
    fclose(f);
}

/* The one file of the teacher's translations in d/cache (its path into out), or false. */
static bool teacher_file(const char *d, char *out, size_t n) {
    cr_assert_eq(tu_sh("ls %s/cache/*.teacher.en > %s/ls.txt 2>/dev/null; true", d, d), 0);
    char *ls = tu_slurp(tu_path(d, "ls.txt"), NULL);
    bool one = ls[0] && strchr(ls, '\n') == strrchr(ls, '\n');
    if (one) snprintf(out, n, "%.*s", (int)strcspn(ls, "\n"), ls);
    free(ls);
    return one;
}

static void expect_out_has(const char *d, const char *text) {
    cr_expect(tu_file_has(tu_path(d, "out.txt"), text), "no \"%s\" in:\n%s", text, tu_slurp(tu_path(d, "out.txt"), NULL));
}

/* ./train with the config and extra arguments; its output in d/out.txt; the exit status. */
static int train(const char *d, const char *args) {
    return tu_sh("%s/train --config %s/c.json %s > %s/out.txt 2>&1", tu_bin(), d, args, d);
}

Test(distill, teacher_translations_made_once_resumed_and_trained_on, .timeout = 240) {
    char *d = tu_word_corpus_dir(1500, 60, false);
    write_config(d);
    char args[2048], file[1024];
    snprintf(args, sizeof args, "--out %s/teacher", d);
    cr_assert_eq(train(d, args), 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    snprintf(args, sizeof args, "--out %s/s1 --set task.teacher=%s/teacher/model.bin --set teacher_beam=3 --set epochs=2", d, d);
    cr_assert_eq(train(d, args), 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    expect_out_has(d, "beam 3, alpha 1) translate 1500 training sources into");
    expect_out_has(d, "data: 1500 training pairs (the teacher's targets)");
    cr_assert(teacher_file(d, file, sizeof file));
    /* the translations are ./translate's with the same beam, line for line */
    cr_assert_eq(tu_sh("%s/translate %s/teacher/model.bin --beam 3 --alpha 1 < %s/train.de > %s/ref.en 2>/dev/null", tu_bin(), d, d, d), 0);
    cr_expect_eq(tu_sh("cmp -s %s %s/ref.en", file, d), 0, "the teacher's file differs from ./translate's output");
    /* the student learned them: they differ from the corpus's targets, and the student is no copy of the teacher */
    cr_expect_neq(tu_sh("cmp -s %s %s/train.en", file, d), 0, "a teacher of 8 epochs is not word-perfect on all 1500");
    /* a second student reads them, translating nothing */
    snprintf(args, sizeof args, "--out %s/s2 --seed 2 --set task.teacher=%s/teacher/model.bin --set teacher_beam=3 --set epochs=1", d, d);
    cr_assert_eq(train(d, args), 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    expect_out_has(d, "teacher: translations read from");
    cr_expect(!tu_file_has(tu_path(d, "out.txt"), "translate 1500"));
    /* a stop leaves KEY.part with whole blocks (and perhaps a line cut short): the next start
     * goes on from its last whole line, and the file comes out the same */
    cr_assert_eq(tu_sh("head -n 700 %s > %s.part && printf 'A dog ru' >> %s.part && rm %s", file, file, file, file), 0);
    snprintf(args, sizeof args, "--out %s/s3 --set task.teacher=%s/teacher/model.bin --set teacher_beam=3 --set epochs=2", d, d);
    cr_assert_eq(train(d, args), 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    expect_out_has(d, "translate 800 training sources into");
    expect_out_has(d, "(700 translated before)");
    cr_expect_eq(tu_sh("cmp -s %s %s/ref.en", file, d), 0, "the resumed file differs from ./translate's output");
    cr_expect_eq(tu_sh("test -e %s.part", file), 1, "the .part file is renamed when whole");
    /* the student is the same bit for bit, its teacher's file made in one go or resumed */
    char why[512], a[1024], b[1024];
    snprintf(a, sizeof a, "%s/s1/last.bin", d);
    snprintf(b, sizeof b, "%s/s3/last.bin", d);
    cr_expect(tu_same_checkpoint(a, b, why, sizeof why), "%s", why);
    /* the original pairs too: two corpora of 1500 */
    snprintf(args, sizeof args, "--out %s/s4 --set task.teacher=%s/teacher/model.bin --set teacher_beam=3 --set teacher_mix=add "
                                "--set epochs=1", d, d);
    cr_assert_eq(train(d, args), 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    expect_out_has(d, "data: 3000 training pairs (train 1500 × 1, teacher 1500 × 1)");
    /* a file of translations made beforehand gives the same prepared data as the teacher's */
    snprintf(args, sizeof args, "--prepare --set task.teacher_output=%s/ref.en", d);
    cr_assert_eq(train(d, args), 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    expect_out_has(d, "data: 1500 training pairs (the teacher's targets)");
    /* the beam's 2 best a source: ./translate --n-best's, two pairs a source line; a .part cut
     * inside a source's pair of lines goes on from that source's first */
    snprintf(args, sizeof args, "--prepare --set task.teacher=%s/teacher/model.bin --set teacher_beam=3 --set teacher_nbest=2", d);
    cr_assert_eq(train(d, args), 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    expect_out_has(d, "(beam 3, alpha 1, the 2 best) translate 1500 training sources");
    expect_out_has(d, "data: 3000 training pairs (the teacher's targets)");
    cr_assert_eq(tu_sh("%s/translate %s/teacher/model.bin --beam 3 --n-best 2 < %s/train.de 2>/dev/null | awk -F' [|][|][|] ' "
                       "'{ print $2 }' > %s/nbest.en && f=$(ls -t %s/cache/*.teacher.en | head -n 1) && cmp -s $f %s/nbest.en && "
                       "head -n 701 $f > $f.part && rm $f",
                       tu_bin(), d, d, d, d, d),
                 0, "the n-best file differs from ./translate --n-best 2's");
    cr_assert_eq(train(d, args), 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    expect_out_has(d, "translate 1150 training sources");
    expect_out_has(d, "(350 translated before)");
    cr_expect_eq(tu_sh("cmp -s $(ls -t %s/cache/*.teacher.en | head -n 1) %s/nbest.en", d, d), 0);
    snprintf(args, sizeof args, "--prepare --set task.teacher=%s/teacher/model.bin --set teacher_beam=3 --set teacher_nbest=4", d);
    cr_expect_eq(train(d, args), 2);
    expect_out_has(d, "task.teacher_nbest (4): the beam's n best are at most its 3");
    /* --prepare translates too, and says so */
    snprintf(args, sizeof args, "--prepare --set task.teacher=%s/teacher/model.bin --set teacher_beam=1", d);
    cr_assert_eq(train(d, args), 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    expect_out_has(d, "(beam 1, alpha 1) translate 1500 training sources");
    /* a faster teacher: ./translate --int8's (--bf16's) translations, under a key of their own;
     * bf16 on a CPU without it is refused, naming the key */
    const char *precs[2] = {"int8", "bf16"};
    for (int k = 0; k < 2; k++) {
        bool can = k == 0 || tu_sh("%s/translate %s/teacher/model.bin --bf16 < /dev/null > /dev/null 2>&1", tu_bin(), d) == 0;
        snprintf(args, sizeof args, "--prepare --set task.teacher=%s/teacher/model.bin --set teacher_beam=3 --set teacher_precision=%s",
                 d, precs[k]);
        if (!can) {
            cr_expect_eq(train(d, args), 2);
            expect_out_has(d, "task.teacher_precision bf16: oneDNN cannot run bfloat16 GEMMs on this CPU");
            continue;
        }
        cr_assert_eq(train(d, args), 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
        char want[96];
        snprintf(want, sizeof want, "(beam 3, alpha 1, %s) translate 1500 training sources", precs[k]);
        expect_out_has(d, want);
        cr_expect_eq(tu_sh("%s/translate %s/teacher/model.bin --beam 3 --%s < %s/train.de > %s/p.en 2>/dev/null && "
                           "cmp -s $(ls -t %s/cache/*.teacher.en | head -n 1) %s/p.en",
                           tu_bin(), d, precs[k], d, d, d, d),
                     0, "the %s teacher's file differs from ./translate --%s's", precs[k], precs[k]);
    }
    tu_rm_rf(d);
    free(d);
}

Test(distill, bad_teachers_and_translation_files, .timeout = 240) {
    char *d = tu_word_corpus_dir(400, 20, false);
    write_config(d);
    char args[2048];
    snprintf(args, sizeof args, "--out %s/teacher --set epochs=1", d);
    cr_assert_eq(train(d, args), 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    /* a teacher of other pieces: both vocabularies named, nothing translated, no run folder */
    snprintf(args, sizeof args, "--out %s/s --set task.teacher=%s/teacher/model.bin --set bpe_merges=40", d, d);
    cr_expect_eq(train(d, args), 2);
    expect_out_has(d, "has a source vocabulary of");
    expect_out_has(d, "bpe, 60 merges");
    expect_out_has(d, "the student's task makes one of");
    expect_out_has(d, "bpe, 40 merges");
    cr_expect_eq(tu_sh("test -e %s/s", d), 1, "a refused student leaves no folder");
    /* a word-model student of a subword teacher */
    snprintf(args, sizeof args, "--out %s/s --set task.teacher=%s/teacher/model.bin --set subword=none", d, d);
    cr_expect_eq(train(d, args), 2);
    expect_out_has(d, "reads task.subword bpe, the student's task.subword is none");
    /* a translations file shorter than the sources */
    cr_assert_eq(tu_sh("head -n 100 %s/train.en > %s/short.en", d, d), 0);
    snprintf(args, sizeof args, "--out %s/s --set task.teacher_output=%s/short.en", d, d);
    cr_expect_eq(train(d, args), 1);
    expect_out_has(d, "short.en has 100 lines but");
    expect_out_has(d, "the teacher's translations need 1 a source line");
    /* ... and one longer */
    cr_assert_eq(tu_sh("cat %s/train.en %s/train.en > %s/long.en", d, d, d), 0);
    snprintf(args, sizeof args, "--out %s/s --set task.teacher_output=%s/long.en", d, d);
    cr_expect_eq(train(d, args), 1);
    expect_out_has(d, "train.de has 400 lines but");
    /* both at once; several corpora; a missing teacher; no cache folder */
    snprintf(args, sizeof args, "--out %s/s --set task.teacher=%s/teacher/model.bin --set teacher_output=%s/train.en", d, d, d);
    cr_expect_eq(train(d, args), 2);
    expect_out_has(d, "task.teacher and task.teacher_output");
    snprintf(args, sizeof args, "--out %s/s --set task.teacher=%s/teacher/model.bin --set train_prefix=train,val", d, d);
    cr_expect_eq(train(d, args), 2);
    expect_out_has(d, "a teacher translates one training corpus");
    snprintf(args, sizeof args, "--out %s/s --set task.teacher=%s/nothing.bin", d, d);
    cr_expect_eq(train(d, args), 1);
    expect_out_has(d, "nothing.bin");
    snprintf(args, sizeof args, "--out %s/s --set task.teacher=%s/teacher/model.bin --set cache_dir=", d, d);
    cr_expect_eq(train(d, args), 2);
    expect_out_has(d, "task.teacher: the teacher's translations are kept in task.cache_dir");
    snprintf(args, sizeof args, "--out %s/s --set task.teacher=%s/teacher/model.bin,,", d, d);
    cr_expect_eq(train(d, args), 2);
    expect_out_has(d, "expected model files separated by commas");
    cr_expect_eq(tu_sh("test -e %s/s", d), 1);
    tu_rm_rf(d);
    free(d);
}

/* docs/how-to/distill.md: each student config's teachers are the runs of the shipped teacher
 * configs the page trains, with the task settings that make their pieces; the size table's
 * layers, widths and parameter counts are the configs' (Multi30k's 8,361 pieces). */
Test(distill, the_guide_s_configs_and_table) {
    enum { V = 8361 };
    char *page = tu_slurp("docs/how-to/distill.md", NULL);
    cr_assert(page);
    size_t teachers = 0;
    const char *names[2] = {"multi30k-best", "multi30k-best-rnn"};
    for (int k = 0; k < 2; k++) {
        Config t;
        config_defaults(&t);
        char path[128];
        snprintf(path, sizeof path, "configs/%s.json", names[k]);
        S2sError err;
        cr_assert_eq(config_load(&t, path, &err), S2S_OK, "%s", err.msg);
        teachers += model_param_count(&t.model, V, V);
    }
    char want[64];
    snprintf(want, sizeof want, "of the teacher ensemble's %.1f M", (double)teachers / 1e6);
    cr_expect(strstr(page, want), "the page should say \"%s\"", want);
    const char *students[] = {"multi30k-student", "multi30k-student-6x2", "multi30k-student-6x1", "multi30k-student-tiny",
                              "multi30k-student-6x2-ens4", "multi30k-student-6x1-ens4", "multi30k-student-tiny-ens4"};
    const char *two = "runs/multi30k-best/model.bin,runs/multi30k-best-rnn/model.bin";
    const char *four = "runs/multi30k-best/model.bin,runs/multi30k-best-rnn/model.bin,runs/multi30k-best-s2/model.bin,"
                       "runs/multi30k-best-rnn-s2/model.bin"; /* the page's second seeds */
    for (int k = 0; k < (int)(sizeof students / sizeof *students); k++) {
        bool ens4 = strstr(students[k], "-ens4") != NULL;
        Config c, t;
        config_defaults(&c);
        config_defaults(&t);
        char path[128], row[256];
        snprintf(path, sizeof path, "configs/%s.json", students[k]);
        S2sError err;
        cr_assert_eq(config_load(&c, path, &err), S2S_OK, "%s", err.msg);
        cr_expect_str_eq(c.task.teacher, ens4 ? four : two, "%s", path);
        cr_assert_eq(config_load(&t, "configs/multi30k-best.json", &err), S2S_OK, "%s", err.msg);
        for (int i = 0; i < config_key_count(); i++) { /* the task is the teachers', the teacher keys aside */
            ConfigKeyInfo ki = config_key_info(i);
            if (strncmp(ki.path, "task.", 5) || !strncmp(ki.path, "task.teacher", 12)) continue;
            char a[512], b[512];
            config_key_value(&c, i, a, sizeof a);
            config_key_value(&t, i, b, sizeof b);
            cr_expect_str_eq(a, b, "%s: %s is %s, the teacher's %s", path, ki.path, a, b);
        }
        size_t n = model_param_count(&c.model, V, V);
        int enc = c.model.encoder_layers ? c.model.encoder_layers : c.model.layers;
        int dec = c.model.decoder_layers ? c.model.decoder_layers : c.model.layers;
        if (ens4) /* a sentence under the table: its teachers are each shape twice */
            snprintf(row, sizeof row, "`%s` has %.2f M parameters: 1/%.1f of its four teachers' %.1f M", students[k],
                     (double)n / 1e6, 2.0 * (double)teachers / (double)n, 2.0 * (double)teachers / 1e6);
        else
            snprintf(row, sizeof row, "| `%s` | %d / %d | %d, %d | %.2f M | 1/%.*f", students[k], enc, dec, c.model.d_model,
                     c.model.ff, (double)n / 1e6, (double)teachers / (double)n < 10 ? 1 : 0, (double)teachers / (double)n);
        cr_expect(strstr(page, row), "the page's table should have the row \"%s\"", row);
    }
    free(page);
}

/* task.train_max_lines: a teacher and its student trained on the corpus's first 300 lines; the
 * teacher translates those 300 only (./translate's output of them, byte for byte), under a key
 * of their own, and the student trains on 300 pairs. */
Test(distill, the_first_lines_only_are_translated, .timeout = 240) {
    char *d = tu_word_corpus_dir(1000, 40, false);
    write_config(d);
    char args[2048], file[1024];
    snprintf(args, sizeof args, "--out %s/teacher --set task.train_max_lines=300 --set epochs=2", d);
    cr_assert_eq(train(d, args), 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    expect_out_has(d, "data: 300 training pairs");
    snprintf(args, sizeof args, "--out %s/s1 --set task.teacher=%s/teacher/model.bin --set teacher_beam=2 --set epochs=1 "
                                "--set task.train_max_lines=300", d, d);
    cr_assert_eq(train(d, args), 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    expect_out_has(d, "beam 2, alpha 1) translate 300 training sources into");
    expect_out_has(d, "data: 300 training pairs (the teacher's targets)");
    cr_assert(teacher_file(d, file, sizeof file));
    cr_assert_eq(tu_sh("head -n 300 %s/train.de | %s/translate %s/teacher/model.bin --beam 2 > %s/ref.en 2>/dev/null", d, tu_bin(), d, d), 0);
    cr_expect_eq(tu_sh("cmp -s %s %s/ref.en", file, d), 0, "the teacher's file is not ./translate's output of the first 300 lines");
    /* the student's vocabularies, learned from those 300 lines, are the teacher's; the whole
     * corpus's are not, and that student is refused before anything is translated */
    snprintf(args, sizeof args, "--out %s/s2 --set task.teacher=%s/teacher/model.bin --set teacher_beam=2 --set epochs=1", d, d);
    cr_expect_eq(train(d, args), 2, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    cr_expect(!tu_file_has(tu_path(d, "out.txt"), "translate 1000"));
    tu_rm_rf(d);
    free(d);
}
