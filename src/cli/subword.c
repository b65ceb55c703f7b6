/* subword — byte-pair-encoding subword models on their own, as spm_train / spm_encode /
 * spm_decode:
 *   subword learn --input FILE... (--merges N | --vocab-size N) --out MODEL
 *   subword encode --model MODEL [--dropout P --seed N]   raw text on stdin → pieces separated by spaces
 *   subword decode --model MODEL    pieces on stdin → raw text
 *   exit 0 · 1 IO or a bad model file · 2 usage */
#include "s2s/args.h"
#include "s2s/file.h"
#include "s2s/bpe.h"
#include "s2s/spm.h"
#include "s2s/text.h"
#include "wait_policy.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: subword learn --input FILE [--input FILE...] (--merges N | --vocab-size N) [--min-count N] --out MODEL\n"
               "       subword encode --model MODEL [--dropout P] [--seed N]\n"
               "                                      (raw text on stdin, pieces separated by spaces on stdout;\n"
               "                                      --dropout: BPE-dropout, each merge left out with probability P)\n"
               "       subword decode --model MODEL   (pieces on stdin, raw text on stdout)\n"
               "Byte-pair encoding with the whitespace kept as the symbol \"\xe2\x96\x81\": raw text in, raw text out.\n"
               "Characters never seen in learning become their bytes (<0xE2>...).\n");
}

enum { O_INPUT = ARGS_OWN, O_MERGES, O_VOCAB, O_MIN, O_OUT, O_MODEL, O_DROPOUT, O_SEED };
#define MAX_INPUTS 64

static int learn(const char **inputs, int n_inputs, const BpeLearnOpts *o, const char *out) {
    S2sError err;
    Bpe b;
    bpe_init(&b);
    int learned = 0, rc = 0;
    S2sStatus st = bpe_learn_files(&b, inputs, n_inputs, o, out, &learned, &err);
    if (st) {
        fprintf(stderr, "subword: %s\n", err.msg);
        rc = st == S2S_ERR_CONFIG ? 2 : 1;
    } else {
        int asked = o->vocab_size > 0 ? o->vocab_size - BPE_FIRST_CHAR - b.n_chars : o->merges;
        fprintf(stderr, "subword: %s: %d characters, %d merges, %d pieces in all%s\n", out, b.n_chars, learned,
                bpe_size(&b), learned < asked ? " (no pair is seen often enough for more)" : "");
    }
    bpe_free(&b);
    return rc;
}

/* One line through a model: ours (b) or a SentencePiece one (sp); printed with its newline. */
typedef struct Coder {
    const Bpe *b;
    const Spm *sp;
    bool encode;
    float dropout; /* BPE-dropout (ours only) */
    Rng rng;
    int32_t *ids;
    int cap;
    char **toks;
    int tcap;
} Coder;

static void code_line(Coder *c, const char *line, size_t len) {
    if (c->sp) {
        char *out = c->encode ? spm_encode_text(c->sp, line) : spm_decode_text(c->sp, line);
        printf("%s\n", out);
        free(out);
    } else if (c->encode) {
        int n = bpe_encode_sampled(c->b, line, c->dropout, &c->rng, &c->ids, &c->cap);
        for (int k = 0; k < n; k++) printf("%s%s", k ? " " : "", bpe_piece(c->b, c->ids[k]));
        printf("\n");
    } else {
        char *copy = s2s_xmalloc(len + 1);
        memcpy(copy, line, len + 1);
        int n = text_split(copy, &c->toks, &c->tcap);
        if (n > c->cap) c->ids = s2s_xrealloc(c->ids, (size_t)(c->cap = n) * sizeof *c->ids);
        for (int k = 0; k < n; k++) c->ids[k] = bpe_piece_id(c->b, c->toks[k]);
        char *text = bpe_decode(c->b, c->ids, n);
        printf("%s\n", text);
        free(text);
        free(copy);
    }
}

/* stdin line by line (bounded), each through the model; a bad line is reported and gives an
 * empty line, so the output keeps one line per input line */
static int each_line(Coder *c) {
    LineReader r;
    line_reader_init(&r, stdin, TEXT_MAX_LINE);
    const char *line;
    size_t len;
    LineStatus ls;
    int rc = 0;
    while ((ls = line_read(&r, &line, &len)) != LINE_EOF) {
        if (ls == LINE_TOO_LONG || ls == LINE_ENDLESS || ls == LINE_ERROR) {
            fprintf(stderr, "subword: stdin:%ld: %s\n", r.line_no,
                    ls == LINE_ERROR ? "cannot be read" : "longer than 1 MiB: not a sentence");
            rc = 1;
            if (ls != LINE_TOO_LONG) break;
            printf("\n");
            continue;
        }
        if (strlen(line) != len || !utf8_valid(line, len)) {
            fprintf(stderr, "subword: stdin:%ld: not UTF-8 text (or a NUL byte)\n", r.line_no);
            rc = 1;
            printf("\n");
            continue;
        }
        code_line(c, line, len);
    }
    free(c->ids);
    free(c->toks);
    line_reader_free(&r);
    if (fflush(stdout) || ferror(stdout)) {
        fprintf(stderr, "subword: stdout: cannot be written\n");
        rc = 1;
    }
    return rc;
}

int main(int argc, char **argv) {
    static const struct option LONG[] = {{"help", no_argument, NULL, 'h'},        {"version", no_argument, NULL, ARGS_VERSION},
                                         {"input", required_argument, NULL, O_INPUT}, {"merges", required_argument, NULL, O_MERGES},
                                         {"vocab-size", required_argument, NULL, O_VOCAB}, {"min-count", required_argument, NULL, O_MIN},
                                         {"out", required_argument, NULL, O_OUT},     {"model", required_argument, NULL, O_MODEL},
                                         {"dropout", required_argument, NULL, O_DROPOUT}, {"seed", required_argument, NULL, O_SEED},
                                         {NULL, 0, NULL, 0}};
    const char *inputs[MAX_INPUTS], *out = NULL, *model = NULL;
    int n_inputs = 0;
    BpeLearnOpts o = {.min_count = 2};
    float dropout = 0;
    long seed = 1;
    bool seeded = false;
    S2sError err;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", LONG, NULL)) != -1) {
        switch (c) {
        case O_INPUT:
            if (n_inputs == MAX_INPUTS) {
                fprintf(stderr, "subword: --input: at most %d files\n", MAX_INPUTS);
                return 2;
            }
            inputs[n_inputs++] = optarg;
            break;
        case O_MERGES:
            if (args_int("--merges", optarg, 1, BPE_MAX_PIECES, &o.merges, &err)) goto bad;
            break;
        case O_VOCAB:
            if (args_int("--vocab-size", optarg, 1, BPE_MAX_PIECES, &o.vocab_size, &err)) goto bad;
            break;
        case O_MIN:
            if (args_int("--min-count", optarg, 1, 1 << 30, &o.min_count, &err)) goto bad;
            break;
        case O_DROPOUT:
            if (args_float("--dropout", optarg, 0, 1, &dropout, &err)) goto bad;
            break;
        case O_SEED:
            if (args_long("--seed", optarg, 0, 1L << 62, &seed, &err)) goto bad;
            seeded = true;
            break;
        case O_OUT: out = optarg; break;
        case O_MODEL: model = optarg; break;
        default: return args_common(c, "subword", usage, argv, optind, optopt);
        }
    }
    if (optind != argc - 1) {
        if (optind < argc - 1) fprintf(stderr, "subword: %s: unexpected argument (see subword --help)\n", argv[optind + 1]);
        else usage(stderr);
        return 2;
    }
    const char *cmd = argv[optind];
    if (!strcmp(cmd, "learn")) {
        if (!n_inputs || !out || (o.merges > 0) == (o.vocab_size > 0) || model || dropout > 0 || seeded) {
            fprintf(stderr, "subword: learn needs --input, --out and one of --merges and --vocab-size (see subword --help)\n");
            return 2;
        }
        FileRole ins[MAX_INPUTS];
        for (int i = 0; i < n_inputs; i++) ins[i] = (FileRole){"--input", inputs[i]};
        if (file_distinct(ins, n_inputs, &(FileRole){"--out", out}, 1, &err)) goto bad; /* named as typed */
        return learn(inputs, n_inputs, &o, out);
    }
    if (strcmp(cmd, "encode") && strcmp(cmd, "decode")) {
        fprintf(stderr, "subword: %s: expected learn, encode or decode (see subword --help)\n", cmd);
        return 2;
    }
    if (!model || n_inputs || out || o.merges || o.vocab_size) {
        fprintf(stderr, "subword: %s needs --model and nothing of learn's (see subword --help)\n", cmd);
        return 2;
    }
    if ((dropout > 0 || seeded) && strcmp(cmd, "encode")) {
        fprintf(stderr, "subword: --dropout and --seed are encode's (see subword --help)\n");
        return 2;
    }
    /* a SentencePiece model (spm_train's .model) or one of ours (text starting "s2s-bpe") */
    FILE *probe = fopen(model, "rb");
    char head[8] = {0};
    if (probe) {
        size_t got = fread(head, 1, 7, probe);
        (void)got;
        fclose(probe);
    }
    if (probe && strncmp(head, "s2s-bpe", 7) != 0) {
        Spm sp;
        S2sStatus st = spm_load(&sp, model, &err);
        if (st == S2S_ERR_CORRUPT) { /* neither kind */
            fprintf(stderr, "subword: %s: not a subword model: neither ours (\"s2s-bpe 1 ...\" on line 1) nor a SentencePiece model (%s)\n",
                    model, err.msg);
            return 1;
        }
        if (st) {
            fprintf(stderr, "subword: %s\n", err.msg);
            return 1;
        }
        if (dropout > 0) {
            fprintf(stderr, "subword: --dropout: %s is a SentencePiece model; BPE-dropout is for the models learned here\n", model);
            spm_free(&sp);
            return 2;
        }
        Coder cd = {.sp = &sp, .encode = !strcmp(cmd, "encode")};
        int rc = each_line(&cd);
        spm_free(&sp);
        return rc;
    }
    Bpe b;
    bpe_init(&b);
    if (bpe_load(&b, model, &err)) {
        fprintf(stderr, "subword: %s\n", err.msg);
        bpe_free(&b);
        return 1;
    }
    Coder cd = {.b = &b, .encode = !strcmp(cmd, "encode"), .dropout = dropout};
    rng_init(&cd.rng, (uint64_t)seed, RNG_STREAM_SUBWORD);
    int rc = each_line(&cd);
    bpe_free(&b);
    return rc;
bad:
    fprintf(stderr, "subword: %s (see subword --help)\n", err.msg);
    return 2;
}
