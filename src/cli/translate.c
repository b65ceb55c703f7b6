/* translate — reads one source per line, writes one output per line (greedy or beam search).
 *   exit 0 · 1 runtime/IO/corrupt model or a line that could not be read · 2 usage */
#include "s2s/checkpoint.h"
#include "s2s/file.h"
#include "s2s/bleu.h"
#include "s2s/eval.h"
#include "s2s/gemm.h"
#include "s2s/train.h"
#include "s2s/visuals.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: translate MODEL [--input FILE] [--output FILE] [--beam K] [--alpha A] [--n-best N]\n"
            "                 [--max-len N] [--batch N] [--tokenized] [--ref FILE] [--heatmap DIR]\n"
            "                 [--bf16] [--threads N]\n"
            "\n"
            "Reads one source per line (stdin by default) and writes one output per line.\n"
            "The model file knows its task: reversal reads characters (abcd gives dcba); translation reads raw\n"
            "text, lowercased and tokenised as the training data (Ein Mann fährt Fahrrad.), or, with --tokenized,\n"
            "text that already is. A line the model cannot read is reported on stderr and gives an empty line.\n"
            "\n"
            "  --beam K       beam search with K hypotheses (default 1: greedy)\n"
            "  --alpha A      length normalisation: score / length^A (default 1)\n"
            "  --n-best N     print the N best of the beam as 'line ||| output ||| score'\n"
            "  --max-len N    longest output (default: the model's, else 2 x source + 10)\n"
            "  --ref FILE     references, one a line: print BLEU (multi-bleu.perl's) on stderr\n"
            "  --heatmap DIR  write the attention of each line as DIR/NNNN.png (greedy decoding)\n"
            "  --bf16         multiply in bfloat16 (float32 sums): faster, outputs may differ slightly\n"
            "  --threads N    GEMM threads (default: the libraries')\n");
}

/* A line without its newline; a NUL byte inside it is kept as the marker "\x01\0" at the
 * front, so the line is reported instead of silently cut short. */
static char *read_line(FILE *f) {
    size_t cap = 256, n = 0;
    char *buf = malloc(cap);
    int c;
    bool nul = false;
    while ((c = fgetc(f)) != EOF && c != '\n') {
        if (n + 2 >= cap) buf = realloc(buf, cap *= 2);
        if (c == 0) nul = true;
        buf[n++] = (char)c;
    }
    if (c == EOF && n == 0) {
        free(buf);
        return NULL;
    }
    if (n && buf[n - 1] == '\r') n--;
    buf[n] = '\0';
    if (nul) {
        buf[0] = '\x01';
        buf[1] = '\0';
    }
    return buf;
}

/* The temporary --output file, set once before the handler is installed: Ctrl-C or a kill
 * removes it (unlink and _exit are async-signal-safe), so no partial file is left behind. */
static char g_out_tmp[PATH_MAX];

static void on_stop_signal(int sig) {
    unlink(g_out_tmp);
    _exit(128 + sig);
}

static void remove_on_signal(const char *tmp) {
    snprintf(g_out_tmp, sizeof g_out_tmp, "%s", tmp);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

static bool had_nul(const char *line) { return line[0] == '\x01' && line[1] == '\0'; }

typedef struct Ctx {
    Seq2Seq m;
    Config cfg;
    Vocab src, trg;
    Tape tape;
    int max_len, beam, n_best;
    float alpha;
    bool tokenized;
    long failed, line_no;
    FILE *ref;       /* --ref, read along */
    Bleu bleu;
    const char *heatmap_dir, *model_path;
    Font *font;
} Ctx;

/* Output text per line: results[i][j] for the j-th best (n_best of them). */
static void decode_batch(Ctx *c, const Batch *b, char ***results, float **scores, const int *row_line) {
    int nb = b->B, L = eval_max_len(c->max_len, b->S);
    tape_reset(&c->tape);
    if (c->beam == 1) {
        int32_t *o = malloc((size_t)nb * L * sizeof *o);
        int *ol = malloc((size_t)nb * sizeof *ol);
        float *attn = c->heatmap_dir ? malloc((size_t)nb * L * b->S * sizeof *attn) : NULL;
        model_greedy(&c->tape, &c->m, b, L, o, ol, attn);
        for (int i = 0; i < nb; i++) {
            int line = row_line[b->index[i]];
            results[line][0] = task_decode_target(&c->cfg.task, &c->trg, o + (size_t)i * L, ol[i]);
            if (attn && c->m.attn.v->has_weights) {
                char path[1024], title[256];
                snprintf(path, sizeof path, "%s/%04ld.png", c->heatmap_dir, c->line_no + line + 1);
                snprintf(title, sizeof title, "%s - %s attention - line %ld", c->model_path, c->cfg.model.attention,
                         c->line_no + line + 1);
                int32_t *src = malloc((size_t)b->S * sizeof *src);
                for (int k = 0; k < b->src_len[i]; k++) src[k] = b->src[(size_t)k * nb + i];
                DecodedAttention a = {src, b->src_len[i], o + (size_t)i * L, ol[i], ol[i] < L, attn + (size_t)i * L * b->S, b->S};
                S2sError err;
                if (visuals_heatmap(path, title, &c->src, &c->trg, &a, c->font, &err)) fprintf(stderr, "translate: %s\n", err.msg);
                free(src);
            }
        }
        free(attn);
        free(o);
        free(ol);
        return;
    }
    BeamHyp *h = calloc((size_t)nb * c->n_best, sizeof *h);
    model_beam(&c->tape, &c->m, b, c->beam, L, c->alpha, c->n_best, h);
    for (int i = 0; i < nb; i++) {
        int line = row_line[b->index[i]];
        for (int j = 0; j < c->n_best; j++) {
            BeamHyp *x = &h[(size_t)i * c->n_best + j];
            results[line][j] = x->ids || j == 0 ? task_decode_target(&c->cfg.task, &c->trg, x->ids, x->len) : NULL;
            scores[line][j] = x->norm;
        }
    }
    beam_hyps_free(h, nb * c->n_best);
    free(h);
}

/* Translates lines[0..n) and writes them in order. */
static void translate_block(Ctx *c, char **lines, int n, FILE *out) {
    Dataset d;
    dataset_init(&d);
    int *row_line = malloc((size_t)n * sizeof *row_line); /* dataset row → line */
    char ***results = malloc((size_t)n * sizeof *results);
    float **scores = malloc((size_t)n * sizeof *scores);
    int32_t dummy[2] = {TOK_SOS, TOK_EOS};
    for (int i = 0; i < n; i++) {
        results[i] = calloc((size_t)c->n_best, sizeof **results);
        scores[i] = calloc((size_t)c->n_best, sizeof **scores);
        int32_t *ids;
        int k;
        S2sError err;
        if (had_nul(lines[i])) {
            fprintf(stderr, "translate: line %ld: contains a NUL byte\n", c->line_no + i + 1);
            c->failed++;
            continue;
        }
        if (lines[i][0] == '\0') { /* an empty source has an empty translation */
            results[i][0] = calloc(1, 1);
            continue;
        }
        if (task_encode_source(&c->cfg.task, &c->src, lines[i], c->tokenized, &ids, &k, &err)) {
            fprintf(stderr, "translate: line %ld: %s\n", c->line_no + i + 1, err.msg);
            c->failed++;
            continue;
        }
        row_line[d.n] = i;
        dataset_add(&d, ids, k, dummy, 2);
        free(ids);
    }
    if (d.n) {
        BatchPlan plan;
        batchplan_make(&plan, &d, c->beam > 1 ? 32 : 64, 0, 0, NULL);
        Batch b;
        batch_init(&b);
        for (int k = 0; k < plan.n_batches; k++) {
            batch_fill(&b, &d, plan.order + plan.start[k], plan.start[k + 1] - plan.start[k]);
            decode_batch(c, &b, results, scores, row_line);
        }
        batch_free(&b);
        batchplan_free(&plan);
    }
    for (int i = 0; i < n; i++) {
        const char *best = results[i][0] ? results[i][0] : "";
        if (c->n_best > 1) {
            for (int j = 0; j < c->n_best && results[i][j]; j++)
                fprintf(out, "%ld ||| %s ||| %.4f\n", c->line_no + i, results[i][j], scores[i][j]);
        } else {
            fprintf(out, "%s\n", best);
        }
        if (c->ref) {
            char *ref = read_line(c->ref);
            if (ref) {
                bool is_translation = strcmp(c->cfg.task.type, "reverse") != 0;
                char *r = c->tokenized || !is_translation ? strdup(ref) : tok_normalize(ref, c->cfg.task.trg_lang);
                bleu_add_text(&c->bleu, best, r);
                free(r);
                free(ref);
            }
        }
        for (int j = 0; j < c->n_best; j++) free(results[i][j]);
        free(results[i]);
        free(scores[i]);
    }
    fflush(out);
    c->line_no += n;
    free(results);
    free(scores);
    free(row_line);
    dataset_free(&d);
}

static bool int_arg(const char *name, const char *v, int lo, int hi, int *out) {
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || end == v || x < lo || x > hi) {
        fprintf(stderr, "translate: %s: expected an integer in [%d, %d], got \"%s\"\n", name, lo, hi, v);
        return false;
    }
    *out = (int)x;
    return true;
}

int main(int argc, char **argv) {
    const char *model = NULL, *in_path = NULL, *out_path = NULL, *ref_path = NULL;
    Ctx c;
    memset(&c, 0, sizeof c);
    c.beam = 1;
    c.n_best = 1;
    c.alpha = 1.0f;
    int block = 256, threads = 0;
    bool bf16 = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool v = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--input") && v) {
            in_path = argv[++i];
        } else if (!strcmp(a, "--output") && v) {
            out_path = argv[++i];
        } else if (!strcmp(a, "--ref") && v) {
            ref_path = argv[++i];
        } else if (!strcmp(a, "--heatmap") && v) {
            c.heatmap_dir = argv[++i];
        } else if (!strcmp(a, "--tokenized")) {
            c.tokenized = true;
        } else if (!strcmp(a, "--bf16")) {
            bf16 = true;
        } else if (!strcmp(a, "--threads") && v) {
            if (!int_arg(a, argv[++i], 1, 256, &threads)) return 2;
        } else if (!strcmp(a, "--max-len") && v) {
            if (!int_arg(a, argv[++i], 1, 100000, &c.max_len)) return 2;
        } else if (!strcmp(a, "--batch") && v) {
            if (!int_arg(a, argv[++i], 1, 1000000, &block)) return 2;
        } else if (!strcmp(a, "--beam") && v) {
            if (!int_arg(a, argv[++i], 1, 32, &c.beam)) return 2;
        } else if (!strcmp(a, "--n-best") && v) {
            if (!int_arg(a, argv[++i], 1, 32, &c.n_best)) return 2;
        } else if (!strcmp(a, "--alpha") && v) {
            char *end;
            c.alpha = strtof(argv[++i], &end);
            if (*end || end == argv[i] || !(c.alpha >= 0.0f && c.alpha <= 10.0f)) {
                fprintf(stderr, "translate: --alpha: expected a number in [0, 10], got \"%s\"\n", argv[i]);
                return 2;
            }
        } else if (a[0] != '-' && !model) {
            model = a;
        } else {
            fprintf(stderr, "translate: %s: %s (see translate --help)\n", a, v || a[0] != '-' ? "unknown argument" : "needs a value");
            return 2;
        }
    }
    if (!model) {
        usage(stderr);
        return 2;
    }
    if (c.n_best > c.beam) {
        fprintf(stderr, "translate: --n-best %d needs --beam of at least %d\n", c.n_best, c.n_best);
        return 2;
    }
    if (c.heatmap_dir && c.beam > 1) {
        fprintf(stderr, "translate: --heatmap draws greedy decoding; use it without --beam\n");
        return 2;
    }
    S2sError err;
    if (model_load_file(&c.m, &c.cfg, &c.src, &c.trg, model, &err)) {
        fprintf(stderr, "translate: %s\n", err.msg);
        return 1;
    }
    c.model_path = model;
    if (c.heatmap_dir) {
        if (file_mkdirs(c.heatmap_dir, &err)) {
            fprintf(stderr, "translate: %s\n", err.msg);
            return 1;
        }
        if (!c.m.attn.v->has_weights)
            fprintf(stderr, "translate: %s attention has no weights to draw; no heatmaps\n", c.cfg.model.attention);
        c.font = font_open(NULL);
        if (!c.font) fprintf(stderr, "translate: warning: DejaVu Sans not found (fonts-dejavu-core); heatmaps without labels\n");
    }
    if (!c.max_len) c.max_len = c.cfg.train.max_decode_len;
    tape_init(&c.tape, 1 << 20);
    c.tape.openblas = strcmp(c.cfg.train.gemm, "openblas") == 0;
    gemm_set_threads(threads);
    if (bf16) {
        if (gemm_bf16_check("translate: --bf16", &err)) {
            fprintf(stderr, "%s\n", err.msg);
            return 2;
        }
        c.tape.bf16 = true;
        params_bf16_snapshot(&c.m.params); /* the weights never change here */
    }
    FILE *in = stdin, *out = stdout;
    if (in_path && !(in = fopen(in_path, "rb"))) {
        fprintf(stderr, "translate: %s: cannot open: %s\n", in_path, strerror(errno));
        return 1;
    }
    if (ref_path) {
        if (!(c.ref = fopen(ref_path, "rb"))) {
            fprintf(stderr, "translate: %s: cannot open: %s\n", ref_path, strerror(errno));
            return 1;
        }
        bleu_init(&c.bleu);
    }
    /* --output appears whole or not at all (it may even name the input file) */
    FileTmp out_tmp = {0};
    if (out_path) {
        if (file_tmp_open(&out_tmp, out_path, &err)) {
            fprintf(stderr, "translate: %s\n", err.msg);
            return 1;
        }
        remove_on_signal(out_tmp.tmp);
        out = out_tmp.f;
    }
    /* on a terminal, answer each line as it is typed; otherwise batch for speed */
    if (isatty(fileno(in))) block = 1;
    char **lines = malloc((size_t)block * sizeof *lines);
    int n = 0;
    char *line;
    while ((line = read_line(in))) {
        lines[n++] = line;
        if (n == block) {
            translate_block(&c, lines, n, out);
            for (int i = 0; i < n; i++) free(lines[i]);
            n = 0;
        }
    }
    if (n) translate_block(&c, lines, n, out);
    for (int i = 0; i < n; i++) free(lines[i]);
    free(lines);
    int rc = 0;
    if (ferror(in)) {
        fprintf(stderr, "translate: read error\n");
        rc = 1;
    }
    if (out_path) {
        /* the input was read to its end (lines that failed are empty): keep the output */
        if (rc) {
            file_tmp_abort(&out_tmp); /* a read error cut it short */
        } else if (file_tmp_commit(&out_tmp, ferror(out) != 0, &err)) {
            fprintf(stderr, "translate: %s\n", err.msg);
            rc = 1;
        }
    } else if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "translate: standard output: write error\n");
        rc = 1;
    }
    if (c.ref) {
        char *extra = read_line(c.ref);
        if (extra) {
            fprintf(stderr, "translate: %s has more lines than the input\n", ref_path);
            free(extra);
            rc = 1;
        }
        BleuScore s = bleu_score(&c.bleu);
        char buf[256];
        bleu_format(&s, buf, sizeof buf);
        fprintf(stderr, "%s\n", buf);
        bleu_free(&c.bleu);
        fclose(c.ref);
    }
    if (in != stdin) fclose(in);
    if (c.failed) rc = 1;
    font_close(c.font);
    tape_free(&c.tape);
    model_free(&c.m);
    vocab_free(&c.src);
    vocab_free(&c.trg);
    return rc;
}
