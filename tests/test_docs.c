/* test_docs.c — the documentation holds: every relative link of README.md and docs/ names a
 * file that exists, a link to a heading (#anchor) names a heading that the target page has
 * (GitHub's anchors: lower case, punctuation dropped, spaces as hyphens), every command the
 * README, the tutorials and the how-to guides show runs (scripts/doctest.py), and every
 * generated page is what its generator makes now. */
#include "test_util.h"
#include "s2s/file.h"

#include <criterion/criterion.h>
#include <ctype.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* GitHub's anchor of a heading's text: letters, digits, '-' and '_' kept (lower case), spaces
 * become '-', everything else goes (bytes past ASCII are kept: GitHub keeps letters). */
static void anchor_of(const char *heading, char *out, size_t n) {
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)heading; *p && k + 1 < n; p++) {
        if (isalnum(*p) || *p == '-' || *p == '_' || *p >= 0x80) out[k++] = (char)tolower(*p);
        else if (*p == ' ') out[k++] = '-';
    }
    out[k] = '\0';
}

/* Whether the Markdown file at path has a heading whose anchor is `anchor`. */
static bool has_anchor(const char *path, const char *anchor) {
    char *text = tu_slurp(path, NULL);
    if (!text) return false;
    bool found = false, fenced = false;
    for (char *line = strtok(text, "\n"); line && !found; line = strtok(NULL, "\n")) {
        if (!strncmp(line, "```", 3)) fenced = !fenced;
        if (fenced || line[0] != '#') continue;
        const char *h = line;
        while (*h == '#') h++;
        while (*h == ' ') h++;
        char a[512];
        anchor_of(h, a, sizeof a);
        found = !strcmp(a, anchor);
    }
    free(text);
    return found;
}

/* Checks every ](target) of the file; returns how many links it checked. */
static int check_links(const char *path) {
    char *text = tu_slurp(path, NULL);
    cr_assert(text != NULL, "%s", path);
    char dir[512];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) slash[1] = '\0';
    else dir[0] = '\0';
    int n = 0;
    bool fenced = false;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        if (!strncmp(line, "```", 3)) fenced = !fenced;
        if (fenced || !strncmp(line, "    ", 4)) continue; /* code */
        for (char *p = strstr(line, "]("); p; p = strstr(p + 2, "](")) {
            char *end = strchr(p + 2, ')');
            if (!end) break;
            char target[512];
            snprintf(target, sizeof target, "%.*s", (int)(end - p - 2), p + 2);
            if (!target[0] || strstr(target, "://") || !strncmp(target, "mailto:", 7)) continue;
            char *hash = strchr(target, '#');
            char anchor[256] = "";
            if (hash) {
                snprintf(anchor, sizeof anchor, "%s", hash + 1);
                *hash = '\0';
            }
            char file[1100];
            if (target[0]) snprintf(file, sizeof file, "%s%s", dir, target);
            else snprintf(file, sizeof file, "%s", path); /* #anchor: this page */
            n++;
            cr_expect(file_exists(file), "%s: the link %s names no file (%s)", path, target, file);
            if (anchor[0] && strlen(file) > 3 && !strcmp(file + strlen(file) - 3, ".md"))
                cr_expect(has_anchor(file, anchor), "%s: the link %s#%s names no heading of %s", path, target, anchor, file);
        }
    }
    free(text);
    return n;
}

Test(docs, every_relative_link_resolves) {
    int n = check_links("README.md");
    glob_t g;
    const char *patterns[2] = {"docs/*.md", "docs/*/*.md"};
    for (int k = 0; k < 2; k++) {
        if (glob(patterns[k], 0, NULL, &g) != 0) continue;
        for (size_t i = 0; i < g.gl_pathc; i++) n += check_links(g.gl_pathv[i]);
        globfree(&g);
    }
    cr_expect_gt(n, 20, "only %d links found: the scan missed them", n);
}

/* Every command of a page runs as printed (scripts/doctest.py: a sandbox; a long training through
 * the short form its page prints), and prints what the page shows where it shows it. */
static void page_runs(const char *page) {
    char *d = tu_tmpdir();
    int rc = tu_sh("python3 scripts/doctest.py %s %s > %s/out.txt 2>&1", tu_bin(), page, d);
    char *out = tu_slurp(tu_path(d, "out.txt"), NULL);
    if (rc == 77) {
        free(out);
        tu_rm_rf(d);
        free(d);
        TU_SKIP("no Multi30k data: the commands of %s not run", page);
    }
    char said[200];
    snprintf(said, sizeof said, "commands of %s ran", page);
    cr_expect_eq(rc, 0, "%s", out ? out : "(no output)");
    cr_expect(out && strstr(out, said), "%s", out ? out : "(no output)");
    free(out);
    tu_rm_rf(d);
    free(d);
}

/* page (its text) through scripts/doctest.py; returns its exit status, *log what it printed. */
static int doctest_text(const char *d, const char *name, const char *text, char **log) {
    char page[512];
    snprintf(page, sizeof page, "%s/%s", d, name);
    FILE *f = fopen(page, "w");
    cr_assert(f, "%s", page);
    fputs(text, f);
    fclose(f);
    int rc = tu_sh("python3 scripts/doctest.py %s %s > %s/%s.out 2>&1", tu_bin(), page, d, name);
    char out[600];
    snprintf(out, sizeof out, "%s/%s.out", d, name);
    *log = tu_slurp(out, NULL);
    return rc;
}

/* The doctest runs a command exactly as the page prints it: a short run's resolved config holds
 * the page's settings and no other (the doctest once added train.max_steps=2,
 * train.warmup_steps=1 and train.max_decode_len=4 to every training, which hid a tutorial's
 * refused command); and a long command the page does not run must come again as its short form,
 * the same text with options after it, or the page fails. */
Test(doctest, commands_run_as_printed, .timeout = 300) {
    char *d = tu_tmpdir(), *log = NULL;
    const char *verbatim =
        "# a page\n\n"
        "    ./train --config reverse --set train.max_steps=3 --set train.warmup_steps=100 --out runs/x > /dev/null\n"
        "    python3 -c \"import json; t = json.load(open('runs/x/config.json'))['train']; "
        "print(t['max_steps'], t['warmup_steps'], t['max_decode_len'])\"\n"
        "    3 1 0\n";
    int rc = doctest_text(d, "verbatim.md", verbatim, &log);
    if (rc == 77) {
        free(log);
        tu_rm_rf(d);
        free(d);
        TU_SKIP("no Multi30k data: scripts/doctest.py does not start");
    }
    cr_expect_eq(rc, 0, "%s", log);
    cr_expect(log && strstr(log, "1 outputs compared"), "the resolved config was compared: %s", log);
    free(log);
    const struct {
        const char *name, *page;
    } bad[] = {
        {"missing.md", "<!-- doctest: long -->\n\n    ./train --config reverse\n\nShortened:\n\n"
                       "    ./train --config reverse-noattn --set train.max_steps=3\n"},
        {"changed.md", "<!-- doctest: long -->\n\n    ./train --config reverse --out runs/a\n\nShortened:\n\n"
                       "    ./train --config reverse --out runs/b --set train.max_steps=3\n"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_expect_eq(doctest_text(d, bad[i].name, bad[i].page, &log), 1, "%s: %s", bad[i].name, log);
        cr_expect(log && strstr(log, "a long command without its short form") && strstr(log, "./train --config reverse"),
                  "%s: %s", bad[i].name, log);
        cr_expect(log && !strstr(log, "doctest: ./train --config reverse\n") && strstr(log, "long, not run"),
                  "%s: the long command is not run: %s", bad[i].name, log);
        free(log);
    }
    tu_rm_rf(d);
    free(d);
}

/* The pages whose commands run: the README, every tutorial and every how-to guide. */
static const char *const PAGES[] = {
    "README.md",
    "docs/tutorials/reversal.md",
    "docs/tutorials/multi30k.md",
    "docs/tutorials/corpus.md",
    "docs/tutorials/transformer.md",
    "docs/how-to/subwords.md",
    "docs/how-to/scoring.md",
    "docs/how-to/translating.md",
    "docs/how-to/training.md",
    "docs/how-to/serving.md",
    "docs/how-to/export.md",
    "docs/how-to/mpi.md",
    "docs/how-to/install.md",
    "docs/how-to/compare.md",
    "docs/how-to/python.md",
    "docs/how-to/distill.md",
    "docs/tutorials/debian.md",
    "docs/how-to/onnx.md",
};

Test(doctest, readme, .timeout = 900) { page_runs(PAGES[0]); }
Test(doctest, tutorial_reversal, .timeout = 900) { page_runs(PAGES[1]); }
Test(doctest, tutorial_multi30k, .timeout = 900) { page_runs(PAGES[2]); }
Test(doctest, tutorial_corpus, .timeout = 900) { page_runs(PAGES[3]); }
Test(doctest, tutorial_transformer, .timeout = 900) { page_runs(PAGES[4]); }
Test(doctest, howto_subwords, .timeout = 900) { page_runs(PAGES[5]); }
Test(doctest, howto_scoring, .timeout = 900) { page_runs(PAGES[6]); }
Test(doctest, howto_translating, .timeout = 900) { page_runs(PAGES[7]); }
Test(doctest, howto_training, .timeout = 900) { page_runs(PAGES[8]); }
Test(doctest, howto_serving, .timeout = 900) { page_runs(PAGES[9]); }
Test(doctest, howto_export, .timeout = 900) { page_runs(PAGES[10]); }
Test(doctest, howto_mpi, .timeout = 900) { page_runs(PAGES[11]); }
Test(doctest, howto_install, .timeout = 900) { page_runs(PAGES[12]); }
Test(doctest, howto_compare, .timeout = 900) { page_runs(PAGES[13]); }
Test(doctest, howto_python, .timeout = 900) { page_runs(PAGES[14]); }
Test(doctest, howto_distill, .timeout = 900) { page_runs(PAGES[15]); }
Test(doctest, tutorial_debian, .timeout = 900) { page_runs(PAGES[16]); }
Test(doctest, howto_onnx, .timeout = 900) {
    if (tu_sh("test -d scripts/onnx/node_modules/onnxruntime-node && command -v node > /dev/null && "
              "/usr/bin/python3 -c 'import onnx' 2> /dev/null") != 0)
        TU_SKIP("docs/how-to/onnx.md: node, npm's onnxruntime-node or python3-onnx is not installed (scripts/deps.sh)");
    page_runs(PAGES[17]);
}

/* A new tutorial or guide cannot be left out of the list above. */
Test(docs, every_tutorial_and_guide_is_run) {
    const char *patterns[2] = {"docs/tutorials/*.md", "docs/how-to/*.md"};
    int n = 0;
    for (int k = 0; k < 2; k++) {
        glob_t g;
        if (glob(patterns[k], 0, NULL, &g) != 0) continue;
        for (size_t i = 0; i < g.gl_pathc; i++, n++) {
            bool listed = false;
            for (size_t p = 0; p < sizeof PAGES / sizeof *PAGES; p++) listed |= !strcmp(PAGES[p], g.gl_pathv[i]);
            cr_expect(listed, "%s: its commands are run by no doctest (tests/test_docs.c, PAGES)", g.gl_pathv[i]);
        }
        globfree(&g);
    }
    cr_expect_gt(n, 8, "only %d pages found", n);
}

/* The corpus page's table is the one bench/results.jsonl makes (bench/bench-data.py --table). */
Test(docs, the_corpus_table_is_the_benchmarks) {
    char *d = tu_tmpdir();
    cr_assert_eq(tu_sh("python3 bench/bench-data.py --table > %s/table.md", d), 0);
    char *table = tu_slurp(tu_path(d, "table.md"), NULL), *page = tu_slurp("docs/tutorials/corpus.md", NULL);
    cr_assert(table && page && strlen(table) > 100, "no table made");
    cr_expect(strstr(page, table) != NULL, "docs/tutorials/corpus.md does not show the table of bench/results.jsonl:\n%s", table);
    free(table);
    free(page);
    tu_rm_rf(d);
    free(d);
}

/* A generated page is what its generator makes now: the results and benchmarks (and the
 * README's table) from bench/results.jsonl, the programs' reference from their --help, the
 * tensor tables from the exported models. */
static void generated(const char *cmd) {
    char *d = tu_tmpdir();
    int rc = tu_sh("%s > %s/out.txt 2>&1", cmd, d);
    char *out = tu_slurp(tu_path(d, "out.txt"), NULL);
    cr_expect_eq(rc, 0, "%s: %s", cmd, out ? out : "(no output)");
    free(out);
    tu_rm_rf(d);
    free(d);
}
Test(docs, the_results_pages_are_the_results_file) { generated("python3 bench/results.py page --check"); }
Test(docs_cli, the_programs_page_is_their_help) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "python3 scripts/programs-doc.py %s --check", tu_bin());
    generated(cmd);
}
Test(docs_cli, the_tensor_tables_are_what_export_writes, .timeout = 300) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "python3 scripts/model-files.py %s --check", tu_bin());
    generated(cmd);
}

/* results.py record: a finished run becomes a line of the results file (its config, seed,
 * machine, build, test metrics), and the results page then shows it; a run without its test
 * line is refused. */
Test(docs_cli, a_recorded_run_reaches_the_results_page, .timeout = 120) {
    char *d = tu_tmpdir(), cwd[PATH_MAX], cfg[PATH_MAX + 32];
    cr_assert(getcwd(cwd, sizeof cwd) != NULL);
    snprintf(cfg, sizeof cfg, "%s/configs/reverse.json", cwd);
    cr_assert_eq(tu_sh("cp -r docs README.md bench scripts %s/ && cd %s && %s/train --config %s --set train_size=200 "
                       "--set epochs=1 --out run > /dev/null 2>&1", d, d, tu_bin(), cfg), 0);
    cr_assert_eq(tu_sh("cd %s && python3 bench/results.py record run --system reverse-probe --bin %s > rec.txt", d, tu_bin()), 0);
    char *rec = tu_slurp(tu_path(d, "rec.txt"), NULL);
    cr_assert(rec != NULL);
    cr_expect(strstr(rec, "\"system\": \"reverse-probe\"") && strstr(rec, "\"exact_match\"") && strstr(rec, "\"cpu\""), "%s", rec);
    cr_expect_eq(tu_sh("cd %s && python3 bench/results.py page && grep -q 'reverse-probe' docs/results.md", d), 0);
    cr_expect_eq(tu_sh("cd %s && %s/train --config %s --set train_size=200 --out paused --pause-at 2 > /dev/null 2>&1 && "
                       "! python3 bench/results.py record paused --system p --bin %s 2> err.txt && grep -q 'no test line' err.txt",
                       d, tu_bin(), cfg, tu_bin()),
                 0, "a paused run was recorded");
    free(rec);
    tu_rm_rf(d);
    free(d);
}

/* results.py record --model: a translation run's averaged checkpoints are the model recorded,
 * greedy and beam decoded from that file (the log's test line is the best checkpoint's); a
 * path outside the run is refused. */
Test(docs_cli, a_recorded_run_names_its_averaged_model, .timeout = 240) {
    char *d = tu_word_corpus_dir(1500, 60, false); /* enough to learn: scores that tell two models apart */
    cr_assert_eq(tu_sh("cp -r docs README.md bench scripts %s/", d), 0);
    FILE *f = fopen(tu_path(d, "c.json"), "w");
    cr_assert(f);
    fprintf(f, "{\"name\": \"t\", \"seed\": 1, \"task\": {\"type\": \"translate\", \"data_dir\": \"%s\", \"train_prefix\": \"train\", "
               "\"valid_prefix\": \"val\", \"test_prefix\": \"test\", \"subword\": \"bpe\", \"bpe_merges\": 60, \"cache_dir\": "
               "\"%s/cache\"}, \"model\": {\"cell\": \"gru\", \"embedding\": 32, \"encoder_hidden\": 64, \"decoder_hidden\": 64, "
               "\"attention\": \"dot\", \"combine\": \"concat\"}, \"train\": {\"epochs\": 6, \"batch_size\": 32, \"lr\": 0.005, "
               "\"log_every\": 1000, \"metric\": \"bleu\", \"keep_last\": 2}}",
            d, d);
    fclose(f);
    const char *b = tu_bin();
    cr_assert_eq(tu_sh("cd %s && %s/train --config c.json --out run > train.txt 2>&1 && %s/average --last 2 run --out run/avg.bin "
                       "> /dev/null && python3 bench/results.py record run --system avg-probe --model avg.bin --beam 2 "
                       "--alpha 1 --bin %s > rec.txt",
                       d, b, b, b),
                 0, "%s", tu_slurp(tu_path(d, "train.txt"), NULL));
    /* what the line should say: the averaged model's own greedy and beam sacreBLEU; model.bin's
     * greedy score differs from it, so a line of model.bin's figures would not pass */
    cr_assert_eq(tu_sh("cd %s && %s/translate run/avg.bin < test.de > g.txt 2>/dev/null && %s/translate run/avg.bin --beam 2 "
                       "--alpha 1 < test.de > k.txt 2>/dev/null && %s/translate run/model.bin < test.de > m.txt 2>/dev/null && "
                       "for x in g k m; do %s/bleu --sacrebleu --width 2 test.en $x.txt > $x.bleu || exit 1; done",
                       d, b, b, b, b),
                 0);
    char *rec = tu_slurp(tu_path(d, "rec.txt"), NULL), *g = tu_slurp(tu_path(d, "g.bleu"), NULL),
         *k = tu_slurp(tu_path(d, "k.bleu"), NULL), *m = tu_slurp(tu_path(d, "m.bleu"), NULL);
    cr_assert(rec && g && k && m);
    double gs = strtod(strstr(g, "= ") + 2, NULL), ks = strtod(strstr(k, "= ") + 2, NULL);
    cr_assert_neq(strtod(strstr(m, "= ") + 2, NULL), gs, "the probe cannot tell the averaged model from model.bin: %s", m);
    const char *pg = "\"greedy\": {\"sacrebleu\": ", *pk = "\"beam\": {\"k\": 2, \"alpha\": 1.0, \"sacrebleu\": ";
    const char *rg = strstr(rec, pg), *rk = strstr(rec, pk);
    cr_assert(rg && rk, "%s", rec);
    cr_expect(strstr(rec, "\"model\": \"avg.bin\""), "%s", rec);
    cr_expect_float_eq(strtod(rg + strlen(pg), NULL), gs, 1e-9, "greedy: the line says %s, ./bleu %g", rg, gs);
    cr_expect_float_eq(strtod(rk + strlen(pk), NULL), ks, 1e-9, "beam: the line says %s, ./bleu %g", rk, ks);
    cr_expect(!strstr(rec, "tf_token_accuracy"), "the best checkpoint's figure was recorded for the average: %s", rec);
    cr_expect_eq(tu_sh("cd %s && ! python3 bench/results.py record run --system p --model ../run/avg.bin --bin %s 2> err.txt && "
                       "grep -q 'not a path' err.txt",
                       d, b),
                 0, "a model outside the run was recorded");
    free(rec);
    free(g);
    free(k);
    free(m);
    tu_rm_rf(d);
    free(d);
}

/* The generators' checks can fail: a page changed by hand is caught. */
Test(docs_cli, a_stale_generated_page_is_caught) {
    char *d = tu_tmpdir();
    cr_assert_eq(tu_sh("cp -r docs README.md bench scripts %s/ && mkdir -p %s/docs && "
                       "echo '| stale |' >> %s/docs/results.md", d, d, d), 0);
    cr_expect_neq(tu_sh("cd %s && python3 bench/results.py page --check > /dev/null 2>&1", d), 0,
                  "results.py --check passed a page changed by hand");
    cr_assert_eq(tu_sh("echo stale >> %s/docs/reference/programs.md", d), 0);
    cr_expect_neq(tu_sh("cd %s && python3 scripts/programs-doc.py %s --check > /dev/null 2>&1", d, tu_bin()), 0,
                  "programs-doc.py --check passed a page changed by hand");
    tu_rm_rf(d);
    free(d);
}

/* The anchor rule itself, on headings the pages use. */
Test(docs, anchors_as_github_makes_them) {
    char a[256];
    anchor_of("The training recipe: smoothing, tying, averaging, ensembles", a, sizeof a);
    cr_expect_str_eq(a, "the-training-recipe-smoothing-tying-averaging-ensembles");
    anchor_of("Set-up: two commands", a, sizeof a);
    cr_expect_str_eq(a, "set-up-two-commands");
    anchor_of("A `make` target (fast)", a, sizeof a);
    cr_expect_str_eq(a, "a-make-target-fast");
}
