/* translate — reads one source per line, writes one output per line (greedy decoding).
 *   exit 0 · 1 runtime/IO/corrupt model or a line that could not be read · 2 usage */
#include "s2s/eval.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: translate MODEL [--input FILE] [--output FILE] [--max-len N] [--batch N]\n"
            "\n"
            "Reads one source per line (stdin by default) and writes one output per line, greedy decoding.\n"
            "The model file knows its task's tokenisation (reversal: characters, so `abcd` gives `dcba`).\n"
            "A line the model cannot read is reported on stderr and gives an empty output line.\n");
}

typedef struct Lines {
    char **s;
    int n, cap;
} Lines;

static char *read_line(FILE *f) {
    size_t cap = 256, n = 0;
    char *buf = malloc(cap);
    int c;
    while ((c = fgetc(f)) != EOF && c != '\n') {
        if (n + 1 >= cap) buf = realloc(buf, cap *= 2);
        buf[n++] = (char)c;
    }
    if (c == EOF && n == 0) {
        free(buf);
        return NULL;
    }
    if (n && buf[n - 1] == '\r') n--;
    buf[n] = '\0';
    return buf;
}

typedef struct Ctx {
    Seq2Seq m;
    Config cfg;
    Vocab src, trg;
    Tape tape;
    int max_len;
    long failed;
    long line_no;
} Ctx;

/* Translates lines[0..n) and writes them in order. */
static void translate_block(Ctx *c, char **lines, int n, FILE *out) {
    Dataset d;
    dataset_init(&d);
    int *row = malloc((size_t)n * sizeof *row); /* dataset row of each line, or −1 */
    char **result = calloc((size_t)n, sizeof *result);
    int32_t dummy[2] = {TOK_SOS, TOK_EOS};
    for (int i = 0; i < n; i++) {
        int32_t *ids;
        int k;
        S2sError err;
        if (lines[i][0] == '\0') { /* an empty source has an empty translation */
            row[i] = -1;
            result[i] = calloc(1, 1);
            continue;
        }
        if (task_encode_source(&c->cfg.task, &c->src, lines[i], &ids, &k, &err)) {
            fprintf(stderr, "translate: line %ld: %s\n", c->line_no + i + 1, err.msg);
            c->failed++;
            row[i] = -1;
            continue;
        }
        row[i] = d.n;
        dataset_add(&d, ids, k, dummy, 2);
        free(ids);
    }
    if (d.n) {
        BatchPlan plan;
        batchplan_make(&plan, &d, 64, 0, NULL);
        Batch b;
        batch_init(&b);
        for (int k = 0; k < plan.n_batches; k++) {
            int nb = plan.start[k + 1] - plan.start[k];
            batch_fill(&b, &d, plan.order + plan.start[k], nb);
            int L = eval_max_len(c->max_len, b.S);
            int32_t *o = malloc((size_t)nb * L * sizeof *o);
            int *ol = malloc((size_t)nb * sizeof *ol);
            tape_reset(&c->tape);
            model_greedy(&c->tape, &c->m, &b, L, o, ol, NULL);
            for (int i = 0; i < nb; i++)
                for (int j = 0; j < n; j++)
                    if (row[j] == b.index[i]) result[j] = task_decode_target(&c->cfg.task, &c->trg, o + (size_t)i * L, ol[i]);
            free(o);
            free(ol);
        }
        batch_free(&b);
        batchplan_free(&plan);
    }
    for (int i = 0; i < n; i++) {
        fprintf(out, "%s\n", result[i] ? result[i] : "");
        free(result[i]);
    }
    fflush(out);
    c->line_no += n;
    free(result);
    free(row);
    dataset_free(&d);
}

int main(int argc, char **argv) {
    const char *model = NULL, *in_path = NULL, *out_path = NULL;
    int max_len = 0, block = 256;
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
        } else if ((!strcmp(a, "--max-len") || !strcmp(a, "--batch")) && v) {
            char *end;
            long x = strtol(argv[++i], &end, 10);
            if (*end || x < 1 || x > 1000000) {
                fprintf(stderr, "translate: %s: expected a positive integer, got \"%s\"\n", a, argv[i]);
                return 2;
            }
            if (!strcmp(a, "--max-len")) max_len = (int)x;
            else block = (int)x;
        } else if (a[0] != '-' && !model) {
            model = a;
        } else {
            fprintf(stderr, "translate: %s: unknown argument (see translate --help)\n", a);
            return 2;
        }
    }
    if (!model) {
        usage(stderr);
        return 2;
    }
    Ctx c;
    memset(&c, 0, sizeof c);
    S2sError err;
    if (model_load_file(&c.m, &c.cfg, &c.src, &c.trg, model, &err)) {
        fprintf(stderr, "translate: %s\n", err.msg);
        return 1;
    }
    c.max_len = max_len ? max_len : c.cfg.train.max_decode_len;
    tape_init(&c.tape, 1 << 20);
    FILE *in = stdin, *out = stdout;
    if (in_path && !(in = fopen(in_path, "rb"))) {
        fprintf(stderr, "translate: %s: cannot open: %s\n", in_path, strerror(errno));
        return 1;
    }
    if (out_path && !(out = fopen(out_path, "wb"))) {
        fprintf(stderr, "translate: %s: cannot create: %s\n", out_path, strerror(errno));
        return 1;
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
    if (out != stdout && fclose(out) != 0) {
        fprintf(stderr, "translate: %s: write error\n", out_path);
        rc = 1;
    }
    if (in != stdin) fclose(in);
    if (c.failed) rc = 1;
    tape_free(&c.tape);
    model_free(&c.m);
    vocab_free(&c.src);
    vocab_free(&c.trg);
    return rc;
}
