/* test_trust.c — the programs' promises about files and arguments: no output is ever the file
 * an input is read from (every program, every output option, through links too), nothing in
 * a run folder is written through a symbolic link, an output named /dev/stdout stays the
 * stream it is (a pipe, a file opened for appending), and every program takes each of its
 * documented options in its simplest form without crashing. */
#include "serve_client.h"
#include "test_util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Runs a command in d; expects exit 2, `want` in its stderr, and the file `kept` unchanged. */
static void expect_refused(const char *d, const char *cmd, const char *want, const char *kept) {
    cr_assert_eq(tu_sh("cd %s && cp %s kept.copy", d, kept), 0);
    int rc = tu_sh("cd %s && %s > out.txt 2> err.txt", d, cmd);
    char *err = tu_slurp(tu_path(d, "err.txt"), NULL);
    cr_expect_eq(rc, 2, "%s: exit %d: %s", cmd, rc, err ? err : "");
    cr_expect(err && strstr(err, want), "%s: %s (wanted \"%s\")", cmd, err ? err : "", want);
    free(err);
    char kept_path[512];
    snprintf(kept_path, sizeof kept_path, "%s/%s", d, kept);
    cr_expect(tu_same_file(kept_path, tu_path(d, "kept.copy")), "%s: %s was changed", cmd, kept);
}

Test(trust, no_output_is_an_input, .timeout = 240) {
    char *d = trained_model_dir();
    const char *b = tu_bin();
    cr_assert_eq(tu_sh("cd %s && printf 'abcd\\nabc\\n' > in.txt && printf 'dcba\\ncba\\n' > ref.txt && ln -s in.txt in.link && "
                       "ln in.txt in.hard && cp model.bin m2.bin && %s/export model.bin --out m.safetensors > /dev/null && "
                       "echo '{\"Q\": [[1,0]], \"K\": [[1,0],[0,1]], \"V\": [[1,2],[3,4]]}' > att.json",
                       d, b),
                 0);
    char cmd[1024];
    const struct {
        const char *args, *kept;
    } tr[] = {
        {"--input in.txt --output in.txt", "in.txt"},
        {"--input in.txt --output in.link", "in.txt"},
        {"--input in.link --output in.hard", "in.txt"},
        {"--input in.txt --output model.bin", "model.bin"},
        {"--input in.txt --ref ref.txt --output ref.txt", "ref.txt"},
        {"--input in.txt --score ref.txt --logits ref.txt", "ref.txt"},
        {"--input in.txt --score ref.txt --logits in.txt", "in.txt"},
        {"--input in.txt --score ref.txt --logits out.json --output out.json", "in.txt"},
    };
    for (size_t i = 0; i < sizeof tr / sizeof *tr; i++) {
        snprintf(cmd, sizeof cmd, "%s/translate model.bin %s", b, tr[i].args);
        expect_refused(d, cmd, i == 7 ? "are one file" : "is the file", tr[i].kept);
    }
    snprintf(cmd, sizeof cmd, "%s/average model.bin m2.bin --out m2.bin", b);
    expect_refused(d, cmd, "is the file", "m2.bin");
    snprintf(cmd, sizeof cmd, "%s/export model.bin --out model.bin", b);
    expect_refused(d, cmd, "is the file", "model.bin");
    snprintf(cmd, sizeof cmd, "%s/import m.safetensors --out m.safetensors", b);
    expect_refused(d, cmd, "is the file", "m.safetensors");
    snprintf(cmd, sizeof cmd, "%s/subword learn --input in.txt --merges 5 --out in.link", b);
    expect_refused(d, cmd, "is the file", "in.txt");
    snprintf(cmd, sizeof cmd, "%s/attend att.json --heatmap att.json", b);
    expect_refused(d, cmd, "is the file", "att.json");
    /* /dev/null is never "the same file" */
    cr_expect_eq(tu_sh("cd %s && %s/translate model.bin --input /dev/null --output /dev/null 2>/dev/null", d, b), 0);
    tu_rm_rf(d);
    free(d);
}

Test(trust, an_output_named_stdout_stays_the_stream_it_is, .timeout = 240) {
    char *d = trained_model_dir();
    const char *b = tu_bin();
    cr_assert_eq(tu_sh("cd %s && printf 'abcd\\nabc\\n' > in.txt && %s/translate model.bin --input in.txt > want.txt && "
                       "echo kept > app.txt && cat want.txt >> app.want && ln -s /proc/self/fd/1 out.link",
                       d, b),
                 0);
    /* >> file: appended to, what it held kept */
    cr_expect_eq(tu_sh("cd %s && %s/translate model.bin --input in.txt --output /dev/stdout >> app.txt", d, b), 0);
    char *app = tu_slurp(tu_path(d, "app.txt"), NULL), *want = tu_slurp(tu_path(d, "want.txt"), NULL);
    char expected[256];
    snprintf(expected, sizeof expected, "kept\n%s", want);
    cr_expect_str_eq(app, expected, "--output /dev/stdout >> app.txt");
    free(app);
    /* a pipe, through /dev/stdout and through a link to /proc/self/fd/1 */
    const char *targets[] = {"/dev/stdout", "out.link"};
    for (int i = 0; i < 2; i++) {
        cr_expect_eq(tu_sh("cd %s && %s/translate model.bin --input in.txt --output %s | cat > piped.txt", d, b, targets[i]), 0);
        char *piped = tu_slurp(tu_path(d, "piped.txt"), NULL);
        cr_expect_str_eq(piped, want, "--output %s | cat", targets[i]);
        free(piped);
    }
    free(want);
    tu_rm_rf(d);
    free(d);
}

Test(trust, nothing_in_a_run_folder_is_written_through_a_link, .timeout = 240) {
    char *d = trained_model_dir();
    const char *b = tu_bin();
    cr_assert_eq(tu_sh("cd %s && echo outside > outside.txt && mkdir outdir && echo png > outdir/epoch01_ex1.png && "
                       "cp -r run r1 && ln -sf ../outside.txt r1/.lock && "
                       "cp -r run r2 && rm r2/log.jsonl && ln -s ../outside.txt r2/log.jsonl && "
                       "cp -r run r3 && rm r3/model.bin && ln -s ../outside.txt r3/model.bin && "
                       "cp -r run r4 && rm -r r4/attention && ln -s ../outdir r4/attention && "
                       "mkdir r5 && ln -s ../outside.txt r5/.lock && cp outside.txt outside.want",
                       d),
                 0);
    const struct {
        const char *args, *want;
        int rc;
    } cases[] = {
        {"--resume r1", ".lock: a symbolic link", 1},
        {"--resume r2", "log.jsonl is a symbolic link", 1},
        {"--resume r3", "model.bin is a symbolic link", 1},
        {"--resume r4", "attention is a symbolic link", 1},
        {"--config m.json --out r5", ".lock: a symbolic link", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int rc = tu_sh("cd %s && %s/train %s > out.txt 2> err.txt", d, b, cases[i].args);
        char *err = tu_slurp(tu_path(d, "err.txt"), NULL);
        cr_expect_eq(rc, cases[i].rc, "train %s: exit %d: %s", cases[i].args, rc, err);
        cr_expect(err && strstr(err, cases[i].want), "train %s: %s (wanted \"%s\")", cases[i].args, err, cases[i].want);
        free(err);
        cr_expect(tu_same_file(tu_path(d, "outside.txt"), tu_path(d, "outside.want")), "train %s wrote outside.txt", cases[i].args);
    }
    /* --overwrite removes the links themselves, never what they name */
    cr_expect_eq(tu_sh("cd %s && %s/train --config m.json --out r4 --overwrite --set train.epochs=1 > /dev/null 2>&1", d, b), 0);
    cr_expect(tu_file_has(tu_path(d, "outdir/epoch01_ex1.png"), "png"), "--overwrite deleted a file outside the run");
    cr_expect_eq(tu_sh("test -d %s/r4/attention && ! test -L %s/r4/attention", d, d), 0);
    cr_expect(tu_same_file(tu_path(d, "outside.txt"), tu_path(d, "outside.want")));
    tu_rm_rf(d);
    free(d);
}

/* The long options a program's --help lists. */
static int help_options(const char *prog, char opts[][32], int cap) {
    char *d = tu_tmpdir();
    cr_assert_eq(tu_sh("%s/%s --help > %s/h.txt", tu_bin(), prog, d), 0, "%s --help", prog);
    char *h = tu_slurp(tu_path(d, "h.txt"), NULL);
    int n = 0;
    for (char *p = h; (p = strstr(p, "--")) && n < cap; p += 2) {
        size_t k = 2;
        while ((p[k] >= 'a' && p[k] <= 'z') || (p[k] >= '0' && p[k] <= '9') || (p[k] == '-' && p[k + 1] != '-')) k++;
        if (k == 2 || k >= 32 || !(p[2] >= 'a' && p[2] <= 'z')) continue;
        bool seen = false;
        for (int i = 0; i < n; i++) seen |= strlen(opts[i]) == k && !strncmp(opts[i], p, k);
        if (!seen) snprintf(opts[n++], 32, "%.*s", (int)k, p);
    }
    free(h);
    tu_rm_rf(d);
    free(d);
    return n;
}

/* Old D16: serve's own first option shared --version's number, and `serve --version` crashed. */
Test(trust, every_program_takes_each_documented_option, .timeout = 600) {
    const char *progs[] = {"train", "translate", "compare", "attend", "bleu", "subword", "speed", "average", "export", "import", "serve"};
    char *d = tu_tmpdir();
    for (size_t p = 0; p < sizeof progs / sizeof *progs; p++) {
        const char *prog = progs[p];
        int rc = tu_sh("cd %s && %s/%s --version > v.txt 2>&1", d, tu_bin(), prog);
        cr_expect_eq(rc, 0, "%s --version: exit %d", prog, rc);
        cr_expect(tu_file_has(tu_path(d, "v.txt"), "s2s"), "%s --version does not say which s2s", prog);
        char opts[64][32];
        int n = help_options(prog, opts, 64);
        cr_expect_geq(n, 1, "%s --help lists no option", prog);
        for (int i = 0; i < n; i++)
            for (int form = 0; form < 2; form++) { /* as a flag, and with the simplest value */
                rc = tu_sh("cd %s && timeout 60 %s/%s %s%s < /dev/null > /dev/null 2>&1", d, tu_bin(), prog, opts[i], form ? " 1" : "");
                cr_expect(rc == 0 || rc == 1 || rc == 2, "%s %s%s: exit %d (a crash or a hang)", prog, opts[i], form ? " 1" : "", rc);
            }
    }
    tu_rm_rf(d);
    free(d);
}

/* A folder left by a kill before the first checkpoint: train and train --resume give the same
 * advice (--overwrite), and --max-steps, which paused where train.max_steps ends, is gone for
 * --pause-at. */
Test(trust, one_advice_for_a_run_without_last_bin_and_one_name_per_meaning, .timeout = 240) {
    char *d = tu_tmpdir();
    tu_write(tu_path(d, "m.json"), "%s", MODEL_CONFIG);
    cr_assert_eq(tu_sh("cd %s && mkdir r && echo '{}' > r/config.json && echo '{\"type\":\"step\"}' > r/log.jsonl", d), 0);
    const char *cmds[2] = {"--config m.json --out r", "--resume r"};
    for (int i = 0; i < 2; i++) {
        int rc = tu_sh("cd %s && %s/train %s > /dev/null 2> err.txt", d, tu_bin(), cmds[i]);
        char *err = tu_slurp(tu_path(d, "err.txt"), NULL);
        cr_expect(rc == 1 || rc == 2, "train %s: exit %d", cmds[i], rc);
        cr_expect(err && strstr(err, "--overwrite") && !strstr(err, "with --resume"), "train %s: %s", cmds[i], err);
        free(err);
    }
    int rc = tu_sh("cd %s && %s/train --config m.json --out s --max-steps 5 > /dev/null 2> err.txt", d, tu_bin());
    cr_expect_eq(rc, 2);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "--pause-at") && tu_file_has(tu_path(d, "err.txt"), "train.max_steps"));
    cr_expect_eq(tu_sh("cd %s && ! test -e s/config.json", d), 0, "a refused start wrote a config");
    tu_rm_rf(d);
    free(d);
}

/* Old D15: the greedy cap was 2 × the longest source of the batch + 10, so a line that never
 * ends decoded differently alone and beside a long line; and a bf16 or int8 tape picked its
 * products' precision by their rows, so the batch size changed the bits. Each line now has its
 * own cap, and decoding picks by the weight alone: every line decodes the same, byte for byte
 * with its n-best scores, alone (--batch 1) and in blocks of many sizes, greedy, beam and
 * n-best (and forced decoding's logits), for an RNN and a Transformer barely trained (most
 * outputs run to their cap), in float32, bf16 (where the CPU has it) and int8. */
Test(decode, a_line_decodes_the_same_alone_and_in_any_batch, .timeout = 600) {
    char *d = tu_tmpdir();
    const char *models[2] = {"\"model\": {\"cell\": \"gru\", \"embedding\": 16, \"encoder_hidden\": 24, \"decoder_hidden\": 24, "
                             "\"attention\": \"additive\", \"dropout\": 0.0}",
                             "\"model\": {\"type\": \"transformer\", \"layers\": 2, \"d_model\": 16, \"heads\": 2, \"ff\": 32, "
                             "\"dropout\": 0.0}"};
    FILE *in = fopen(tu_path(d, "in.txt"), "w");
    const char *alpha = "abcd";
    for (int i = 0; i < 37; i++) { /* lengths 1 … 30, mixed */
        int n = 1 + (i * 7) % 30;
        for (int k = 0; k < n; k++) fputc(alpha[(i * 3 + k * k) % 4], in);
        fputc('\n', in);
    }
    fclose(in);
    const char *modes[3] = {"", "--beam 3", "--beam 3 --n-best 2"};
    const char *precs[3] = {"", "--bf16", "--int8"};
    const int sizes[] = {2, 3, 5, 8, 13, 37};
    for (int mi = 0; mi < 2; mi++) {
        tu_write(tu_path(d, "m.json"),
                 "{\"name\": \"alone\", \"seed\": 3, \"task\": {\"type\": \"reverse\", \"alphabet\": \"abcd\", \"min_len\": 1, "
                 "\"max_len\": 30, \"train_size\": 200, \"valid_size\": 20, \"test_size\": 20}, %s, \"train\": {\"epochs\": 1, "
                 "\"batch_size\": 32, \"lr\": 0.001, \"max_steps\": 2, \"threads\": 1}}",
                 models[mi]);
        cr_assert_eq(tu_sh("cd %s && %s/train --config m.json --out r%d > /dev/null 2>&1", d, tu_bin(), mi), 0);
        for (int p = 0; p < 3; p++) {
            if (tu_sh("cd %s && echo ab | %s/translate r%d/model.bin %s > /dev/null 2>&1", d, tu_bin(), mi, precs[p]) != 0) continue;
            for (int mo = 0; mo < 3; mo++) {
                cr_assert_eq(tu_sh("cd %s && %s/translate r%d/model.bin %s %s --batch 1 --input in.txt > alone.txt", d, tu_bin(), mi,
                                   precs[p], modes[mo]),
                             0);
                for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
                    cr_assert_eq(tu_sh("cd %s && %s/translate r%d/model.bin %s %s --batch %d --input in.txt > batched.txt", d, tu_bin(),
                                       mi, precs[p], modes[mo], sizes[k]),
                                 0);
                    cr_expect(tu_same_file(tu_path(d, "alone.txt"), tu_path(d, "batched.txt")),
                              "model %d %s %s: --batch %d differs from each line alone", mi, precs[p], modes[mo], sizes[k]);
                }
            }
        }
        /* forced decoding too: every logit of every pair, alone and among 37 */
        for (int p = 0; p < 3; p++) {
            if (tu_sh("cd %s && echo ab | %s/translate r%d/model.bin %s > /dev/null 2>&1", d, tu_bin(), mi, precs[p]) != 0) continue;
            cr_assert_eq(tu_sh("cd %s && %s/translate r%d/model.bin --input in.txt > hyp.txt && for k in 1 37; do "
                               "%s/translate r%d/model.bin %s --input in.txt --score hyp.txt --logits lg$k.json --batch $k > sc$k.txt || exit 1; "
                               "done",
                               d, tu_bin(), mi, tu_bin(), mi, precs[p]),
                         0);
            cr_expect(tu_same_file(tu_path(d, "lg1.json"), tu_path(d, "lg37.json")) && tu_same_file(tu_path(d, "sc1.txt"), tu_path(d, "sc37.txt")),
                      "model %d %s: forced decoding's logits differ alone and among 37", mi, precs[p]);
        }
        /* most lines ran to their cap: the test is about them */
        cr_assert_eq(tu_sh("cd %s && %s/translate r%d/model.bin --batch 1 --input in.txt > alone.txt", d, tu_bin(), mi), 0);
        cr_expect_eq(tu_sh("cd %s && awk 'NR==FNR { n[FNR] = length($0); next } length($0) == 2 * n[FNR] + 10 { c++ } "
                           "END { exit !(c >= 5) }' in.txt alone.txt",
                           d),
                     0, "model %d: fewer than 5 lines reached their cap", mi);
    }
    tu_rm_rf(d);
    free(d);
}

/* Old D9: an empty line's n-best list held one hypothesis with logprob 0.0000, never computed.
 * One rule everywhere: an empty line gives an empty output and no score (CLI and serve). */
Test(decode, an_empty_line_has_an_empty_output_and_no_score, .timeout = 240) {
    char *d = trained_model_dir();
    cr_assert_eq(tu_sh("cd %s && printf 'abcd\\n\\nabc\\n' > in.txt && %s/translate model.bin --beam 3 --n-best 2 --input in.txt > nb.txt && "
                       "%s/translate model.bin --input in.txt > g.txt",
                       d, tu_bin(), tu_bin()),
                 0);
    cr_expect_eq(tu_sh("cd %s && grep -c '^0 |||' nb.txt | grep -qx 2 && grep -c '^2 |||' nb.txt | grep -qx 2 && ! grep -q '^1 |||' nb.txt", d),
                 0, "n-best of an empty line: %s", tu_slurp(tu_path(d, "nb.txt"), NULL));
    cr_expect_eq(tu_sh("cd %s && sed -n 2p g.txt | grep -qx ''", d), 0, "greedy: an empty line gives an empty line");
    int rc = tu_sh("cd %s && printf 'abcd\\n\\n' > s.txt && printf 'dcba\\nab\\n' > t.txt && "
                   "%s/translate model.bin --input s.txt --score t.txt > sc.txt 2> err.txt",
                   d, tu_bin());
    cr_expect(rc == 0 || rc == 1, "exit %d", rc);
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "line 2") && tu_file_has(tu_path(d, "err.txt"), "no score"), "%s",
              tu_slurp(tu_path(d, "err.txt"), NULL));
    cr_expect_eq(tu_sh("cd %s && sed -n 2p sc.txt | grep -qx ''", d), 0, "--score: an empty source gives an empty line");
    int port = start_server(d, "");
    cr_assert(port > 0);
    cJSON *j = translate_ok(port, "{\"text\": [\"abcd\", \"\"], \"beam\": 3, \"n_best\": 2}");
    const cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "translations"), 1);
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "text")), "");
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(e, "n_best")), 0, "serve: an empty line's n-best list");
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "translations"), 0),
                                                                     "n_best")),
                 2);
    cJSON_Delete(j);
    stop_server(d);
    tu_rm_rf(d);
    free(d);
}

/* Old D6: only the cgroup hierarchy's root files were read, so a nested group's limit (a
 * service, systemd-run -p MemoryMax, Slurm, a container) was missed. The process's own group
 * and its ancestors, v1 and v2, from a /proc/self/cgroup text, under a made-up tree. */
Test(trust, the_memory_limit_is_the_process_own_cgroup_and_its_ancestors) {
    char *d = tu_tmpdir();
    cr_assert_eq(tu_sh("cd %s && mkdir -p memory/svc/job/step unified/u/v x/y/z && "
                       "echo 9223372036854771712 > memory/memory.limit_in_bytes && "
                       "echo 5368709120 > memory/svc/memory.limit_in_bytes && echo 3221225472 > memory/svc/job/memory.limit_in_bytes && "
                       "echo max > x/memory.max && echo 2147483648 > x/y/memory.max && echo max > x/y/z/memory.max && "
                       "echo 1073741824 > unified/u/memory.max",
                       d),
                 0);
    const size_t G = (size_t)1 << 30;
    cr_expect_eq(s2s_cgroup_limit("12:pids:/svc\n4:memory:/svc/job/step\n0::/\n", d), 3 * G, "v1: the group's parent's limit");
    cr_expect_eq(s2s_cgroup_limit("5:cpu,memory:/svc\n", d), 5 * G, "v1 with two controllers on one line");
    cr_expect_eq(s2s_cgroup_limit("0::/x/y/z\n", d), 2 * G, "v2: an ancestor's memory.max (the group's own is max)");
    cr_expect_eq(s2s_cgroup_limit("0::/u/v\n", d), G, "a hybrid's unified tree");
    cr_expect_eq(s2s_cgroup_limit("0::/\n", d), 0, "no limit anywhere");
    cr_expect_eq(s2s_cgroup_limit("garbage\n::\n4:memory\n", d), 0, "lines that are not cgroups");
    tu_rm_rf(d);
    free(d);
}

/* The same on this machine where a nested memory group can be made (cgroup v1 or v2, as
 * root): a model too large for a 3 GiB group is refused up front instead of OOM-killed. */
Test(trust, a_nested_cgroup_limit_refuses_a_run_that_cannot_fit, .timeout = 120) {
    char *d = tu_tmpdir();
    tu_write(tu_path(d, "m.json"), "%s", MODEL_CONFIG);
    /* our own group's folder, v1 (memory controller) or v2 */
    int rc = tu_sh("cd %s && g1=$(sed -n 's/^[0-9]*:[a-z,]*memory[a-z,]*://p' /proc/self/cgroup | head -1) && "
                   "g2=$(sed -n 's/^0:://p' /proc/self/cgroup | head -1) && "
                   "if [ -n \"$g1\" ] && [ -d /sys/fs/cgroup/memory$g1 ]; then b=/sys/fs/cgroup/memory$g1/s2s-test-$$ f=memory.limit_in_bytes; "
                   "elif [ -f /sys/fs/cgroup$g2/memory.max ] || [ -f /sys/fs/cgroup$g2/cgroup.subtree_control ]; then b=/sys/fs/cgroup$g2/s2s-test-$$ f=memory.max; "
                   "else exit 77; fi && mkdir $b 2>/dev/null || exit 77; echo 3221225472 > $b/$f 2>/dev/null || { rmdir $b; exit 77; }; "
                   "echo $b > group.txt",
                   d);
    if (rc == 77) {
        tu_rm_rf(d);
        free(d);
        TU_SKIP("no nested memory cgroup can be made here: the cgroup reading is tested on a made-up tree");
    }
    cr_assert_eq(rc, 0);
    char *g = tu_slurp(tu_path(d, "group.txt"), NULL);
    g[strcspn(g, "\n")] = '\0';
    rc = tu_sh("cd %s && sh -c 'echo $$ > %s/cgroup.procs && exec %s/train --config m.json --out big --set encoder_hidden=5000 "
               "--set decoder_hidden=5000' > out.txt 2> err.txt",
               d, g, tu_bin());
    cr_expect_eq(rc, 2, "exit %d: %s", rc, tu_slurp(tu_path(d, "err.txt"), NULL));
    cr_expect(tu_file_has(tu_path(d, "err.txt"), "3.2 GB"), "the group's 3 GiB not named: %s", tu_slurp(tu_path(d, "err.txt"), NULL));
    tu_sh("rmdir %s 2>/dev/null", g);
    free(g);
    tu_rm_rf(d);
    free(d);
}

/* docs/reliability.md names a test for each promise: each named test exists (a promise never
 * points at a test that was renamed or removed). */
Test(trust, every_test_the_reliability_page_names_exists) {
    char *doc = tu_slurp("docs/reliability.md", NULL);
    cr_assert(doc != NULL);
    int named = 0;
    for (const char *p = doc; (p = strchr(p, '`'));) {
        const char *e = strchr(p + 1, '`');
        if (!e) break;
        char tok[160];
        int n = (int)(e - p - 1);
        snprintf(tok, sizeof tok, "%.*s", n < 159 ? n : 159, p + 1);
        p = e + 1;
        char *slash = strchr(tok, '/');
        bool ok = slash && slash > tok && slash[1] && strspn(tok, "abcdefghijklmnopqrstuvwxyz0123456789_/*") == strlen(tok);
        if (!ok) continue;
        *slash = '\0';
        const char *name = slash + 1;
        named++;
        char want[200];
        if (!strcmp(name, "*")) snprintf(want, sizeof want, "Test(%s, ", tok);
        else snprintf(want, sizeof want, "Test(%s, %s,", tok, name);
        char want2[200];
        snprintf(want2, sizeof want2, "Test(%s, %s)", tok, name);
        int rc = tu_sh("grep -qF '%s' tests/*.c || grep -qF '%s' tests/*.c", want, want2);
        cr_expect_eq(rc, 0, "docs/reliability.md names %s/%s, which no test is", tok, name);
    }
    cr_expect_geq(named, 20, "only %d tests named", named);
    free(doc);
}

/* The CPU quota, read as the memory limit is: v1's cpu.cfs_quota_us over cpu.cfs_period_us
 * (mounted as cpu or cpu,cpuacct; −1 is none), v2's cpu.max ("max": none), the least of the
 * group and its ancestors, rounded up to a thousandth of a CPU. */
Test(trust, the_cpu_quota_is_the_process_own_cgroup_and_its_ancestors) {
    char *d = tu_tmpdir();
    cr_assert_eq(tu_sh("cd %s && mkdir -p cpu/svc/job cpu,cpuacct/k x/y/z unified/u && "
                       "echo -1 > cpu/cpu.cfs_quota_us && echo 100000 > cpu/cpu.cfs_period_us && "
                       "echo 150000 > cpu/svc/cpu.cfs_quota_us && echo 100000 > cpu/svc/cpu.cfs_period_us && "
                       "echo -1 > cpu/svc/job/cpu.cfs_quota_us && echo 100000 > cpu/svc/job/cpu.cfs_period_us && "
                       "echo 50000 > cpu,cpuacct/k/cpu.cfs_quota_us && echo 100000 > cpu,cpuacct/k/cpu.cfs_period_us && "
                       "echo 'max 100000' > x/cpu.max && echo '200000 100000' > x/y/cpu.max && echo '100001 100000' > x/y/z/cpu.max && "
                       "echo '300000 100000' > unified/u/cpu.max",
                       d),
                 0);
    cr_expect_eq(s2s_cgroup_cpu_milli("4:cpu,cpuacct:/svc/job\n0::/\n", d), 1500, "v1: the parent's quota");
    cr_expect_eq(s2s_cgroup_cpu_milli("4:cpuacct,cpu:/k\n", d), 500, "v1 mounted as cpu,cpuacct only");
    cr_expect_eq(s2s_cgroup_cpu_milli("0::/x/y/z\n", d), 1001, "v2: the group's own, rounded up");
    cr_expect_eq(s2s_cgroup_cpu_milli("0::/x/y\n", d), 2000, "v2: an ancestor's max is none");
    cr_expect_eq(s2s_cgroup_cpu_milli("0::/u\n", d), 3000, "a hybrid's unified tree");
    cr_expect_eq(s2s_cgroup_cpu_milli("2:cpuacct:/svc\n3:cpuset:/svc\n0::/\n", d), 0, "controllers that are not cpu");
    cr_expect_eq(s2s_cgroup_cpu_milli("garbage\n::\n4:cpu\n", d), 0, "lines that are not cgroups");
    tu_rm_rf(d);
    free(d);
}
