/* translate — reads one source per line, writes one output per line (greedy or beam search).
 *   exit 0 · 1 runtime/IO/corrupt model, a line that could not be read, or references that do
 *   not match the input · 2 usage */
#include "s2s/args.h"
#include "s2s/multibleu.h"
#include "s2s/sacrebleu.h"
#include "s2s/checkpoint.h"
#include "s2s/eval.h"
#include "s2s/file.h"
#include "s2s/gemm.h"
#include "s2s/translator.h"
#include "progress.h"
#include "wait_policy.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: translate MODEL [MODEL...] [--input FILE] [--output FILE] [--beam K] [--alpha A] [--n-best N]\n"
            "                 [--max-len N] [--batch N] [--tokenized] [--ref FILE] [--heatmap DIR] [--score FILE]\n"
            "                 [--bf16 | --int8] [--threads N] [--progress]\n"
            "\n"
            "Reads one source per line (stdin by default) and writes one output per line.\n"
            "Several models decode as one ensemble (the mean of their log-probabilities at each step); they must\n"
            "share the task, the vocabularies and the subword model (their architectures may differ).\n"
            "The model file knows its task: reversal reads characters (abcd gives dcba); translation reads raw\n"
            "text, lowercased and tokenised as the training data (Ein Mann fährt Fahrrad.), or, with --tokenized,\n"
            "text that already is. A line the model cannot read (or of more than 1 MiB) is reported on stderr and\n"
            "gives an empty line. An empty line gives an empty line and no score: no hypothesis with --n-best, and\n"
            "with --score an error on stderr (none was computed).\n"
            "Greedy decoding and beam search never write <pad> or <sos>; they may write <unk> (a word model's\n"
            "unknown word). --score refuses a target holding a word outside the vocabulary: its score would be\n"
            "<unk>'s.\n"
            "\n"
            "  --beam K       beam search with K hypotheses (default 1: greedy)\n"
            "  --alpha A      length normalisation: score / length^A (default 1)\n"
            "  --n-best N     print the N best of the beam in Moses' format: 'i ||| output ||| F0= logprob ||| score'\n"
            "                 (i: the line, from 0; logprob: the sum of the tokens' log-probabilities, <eos> too;\n"
            "                 score: logprob / length^alpha, what ranks them)\n"
            "  --score FILE   forced decoding: FILE holds a target for each input line; print its log-probability\n"
            "                 and each token's: 'logprob ||| token=logprob ... </s>=logprob'\n"
            "  --logits FILE  with --score: also write each pair's ids and logits as JSON lines to FILE\n"
            "                 ({\"line\" (from 0), \"src\", \"trg\" (<eos> last), \"logits\": a row per target\n"
            "                 token}), to compare with another implementation (scripts/torch-check.py)\n"
            "  --attention FILE  one model: write each line's attention (greedy decoding's, or with --beam the best\n"
            "                 hypothesis's) as JSON lines to FILE ({\"line\" (from 0), \"source\", \"target\" (<eos> last\n"
            "                 when it ended), \"weights\": a row per target token, and a Transformer's or multihead\n"
            "                 model's \"layers\": [layer][head][row][source]})\n"
            "  --max-len N    longest output (default: the model's, else 2 x the line's source + 10, each line its\n"
            "                 own: a line decodes the same alone and in any batch)\n"
            "  --ref FILE     references, one a line for each input line: print BLEU on stderr (multi-bleu.perl's on\n"
            "                 the words; a subword model's: sacreBLEU's and chrF on the raw text)\n"
            "  --heatmap DIR  write the attention of each line as DIR/NNNN.png (greedy decoding; NNNN: the line,\n"
            "                 from 0; a folder with an earlier translation's pictures is refused)\n"
            "  --bf16         multiply in bfloat16 (float32 sums): faster, outputs may differ slightly\n"
            "  --int8         multiply by the weights in int8 (per-channel scales; exact int32 sums): faster\n"
            "                 still, outputs may differ more (docs/how-to/translating.md)\n"
            "  --threads N    GEMM threads (default: the libraries')\n"
            "  --progress     lines done, lines/s and the time left on stderr after each --batch of lines (shown\n"
            "                 anyway when stderr is a terminal that the outputs do not go to)\n"
            "  --version      print the version\n");
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

/* One input line as read: its text, or why it cannot be read. */
typedef struct Line {
    char *text;          /* NULL when bad */
    const char *bad;     /* "contains a NUL byte", "longer than ..." */
} Line;

/* An ensemble's other members. */
typedef struct Member {
    Seq2Seq m;
    Config cfg;
    Vocab src, trg;
    Tape tape;
} Member;

typedef struct Ctx {
    Seq2Seq m;
    Config cfg;
    Vocab src, trg;
    Tape tape;
    Member *more;        /* (n_more) */
    int n_more;
    Seq2Seq *more_m[MODEL_MAX_ENSEMBLE];
    Tape *more_t[MODEL_MAX_ENSEMBLE];
    LineReader score;    /* --score: the targets, read along */
    FILE *logits;        /* --logits: the pairs' ids and logits, or NULL */
    FILE *attn;          /* --attention: the lines' attention, or NULL */
    bool scoring;
    Translator tr;
    FileRole ins[MODEL_MAX_ENSEMBLE + 3]; /* the files read, which no output may be */
    int n_ins;
    long failed, line_no;
    LineReader ref;      /* --ref, read along */
    bool has_ref;
    long ref_lines, ref_bad;
    bool ref_broken;     /* a read error, or no line break for TEXT_MAX_SKIP bytes */
    Bleu bleu;
    /* a subword model: raw outputs and references, kept for sacreBLEU and chrF at the end */
    char **sb_hyp, **sb_ref;
    int sb_n, sb_cap;
} Ctx;

/* The reference of the next output line, into the BLEU statistics. */
static void score_against_ref(Ctx *c, const char *best) {
    const char *ref;
    size_t len;
    LineStatus ls = line_read(&c->ref, &ref, &len);
    if (ls == LINE_EOF || ls == LINE_ERROR || ls == LINE_ENDLESS) { /* counted short: reported at the end */
        c->ref_broken |= ls != LINE_EOF;
        return;
    }
    c->ref_lines++;
    if (ls == LINE_TOO_LONG || !utf8_valid(ref, len)) {
        c->ref_bad++;
        return;
    }
    if (c->src.sub) { /* raw text on both sides */
        if (c->sb_n == c->sb_cap) {
            c->sb_cap = c->sb_cap ? 2 * c->sb_cap : 1024;
            c->sb_hyp = s2s_xrealloc(c->sb_hyp, (size_t)c->sb_cap * sizeof *c->sb_hyp);
            c->sb_ref = s2s_xrealloc(c->sb_ref, (size_t)c->sb_cap * sizeof *c->sb_ref);
        }
        c->sb_hyp[c->sb_n] = s2s_xstrdup(best);
        c->sb_ref[c->sb_n++] = s2s_xstrdup(ref);
        return;
    }
    bool raw_text = c->cfg.task.type == TASK_TRANSLATE && !c->tr.tokenized; /* references as the outputs are */
    char *r = raw_text ? tok_normalize(ref, c->cfg.task.trg_lang) : s2s_xstrdup(ref);
    bleu_add_text(&c->bleu, best, r);
    free(r);
}

/* Translates lines[0..n) and writes them in order; a line that gives no translation is
 * reported on stderr and gives an empty line. */
static void translate_block(Ctx *c, Line *lines, int n, FILE *out) {
    const char **text = s2s_xmalloc((size_t)n * sizeof *text);
    for (int i = 0; i < n; i++) text[i] = lines[i].text;
    TranslatedLine *res = s2s_xmalloc((size_t)n * sizeof *res);
    translator_run(&c->tr, text, n, c->line_no, res);
    for (int i = 0; i < n; i++) {
        const TranslatedLine *r = &res[i];
        long no = c->line_no + i + 1;
        if (r->status) {
            fprintf(stderr, "translate: line %ld: %s\n", no, lines[i].text ? r->error : lines[i].bad);
            c->failed++;
        }
        if (r->warning[0]) fprintf(stderr, "translate: warning: %s\n", r->warning);
        if (c->tr.n_best > 1) { /* Moses: sentence from 0 ||| text ||| features ||| total */
            for (int j = 0; j < r->n_hyps && !r->status; j++) /* none for an empty line: no score was computed */
                fprintf(out, "%ld ||| %s ||| F0= %.4f ||| %.4f\n", c->line_no + i, r->text[j], r->logprob[j], r->score[j]);
        } else {
            fprintf(out, "%s\n", r->text[0]);
        }
        if (c->has_ref) score_against_ref(c, r->text[0]);
        if (c->attn) {
            cJSON *j = r->attention ? translator_attention_json(r->attention) : cJSON_CreateObject();
            /* last, so each line reads the same; from 0 as every line number of an output */
            cJSON_AddItemToObjectCS(j, "line", cJSON_CreateNumber((double)(c->line_no + i)));
            char *txt = cJSON_PrintUnformatted(j);
            fprintf(c->attn, "%s\n", txt ? txt : "{}");
            free(txt);
            cJSON_Delete(j);
        }
    }
    fflush(out);
    c->line_no += n;
    translator_free_results(res, n);
    free(res);
    free(text);
}

/* --score: each line's target read along; the pairs' scores written in order. A line with no
 * score (unreadable, or a target outside the vocabulary) is reported and gives an empty line.
 * Returns 1 when the targets ran out or could not be read. */
static int score_block(Ctx *c, Line *lines, int n, FILE *out) {
    const char **src = s2s_xmalloc((size_t)n * sizeof *src);
    char **trg = s2s_xcalloc((size_t)n, sizeof *trg);
    const char **bad_trg = s2s_xcalloc((size_t)n, sizeof *bad_trg);
    int rc = 0;
    for (int i = 0; i < n; i++) {
        src[i] = lines[i].text;
        const char *t;
        size_t len;
        LineStatus ls = line_read(&c->score, &t, &len);
        if (ls == LINE_EOF || ls == LINE_ERROR || ls == LINE_ENDLESS) {
            fprintf(stderr, "translate: --score: %s at input line %ld\n",
                    ls == LINE_EOF ? "the targets end before the sources" : "the targets cannot be read as text",
                    c->line_no + i + 1);
            rc = 1;
            for (int k = i; k < n; k++) src[k] = NULL;
            break;
        }
        if (ls == LINE_TOO_LONG) bad_trg[i] = "its target is too long";
        else if (strlen(t) != len || !utf8_valid(t, len)) bad_trg[i] = "its target is not UTF-8 text";
        else trg[i] = s2s_xstrdup(t);
    }
    ScoredLine *res = s2s_xmalloc((size_t)n * sizeof *res);
    translator_score(&c->tr, src, (const char *const *)trg, n, res);
    for (int i = 0; i < n && !rc; i++) {
        const ScoredLine *r = &res[i];
        long no = c->line_no + i + 1;
        if (r->status) {
            fprintf(stderr, "translate: line %ld: %s\n", no,
                    !lines[i].text ? lines[i].bad : bad_trg[i] ? bad_trg[i] : r->error);
            c->failed++;
            fputc('\n', out);
            continue;
        }
        if (c->logits) {
            fprintf(c->logits, "{\"line\":%ld,\"src\":[", c->line_no + i); /* from 0, as the n-best lists */
            for (int k = 0; k < r->n_src; k++) fprintf(c->logits, "%s%d", k ? "," : "", r->src_ids[k]);
            fprintf(c->logits, "],\"trg\":[");
            for (int k = 0; k < r->n; k++) fprintf(c->logits, "%s%d", k ? "," : "", r->ids[k]);
            fprintf(c->logits, "],\"logits\":[");
            for (int k = 0; k < r->n; k++) {
                fprintf(c->logits, "%s[", k ? "," : "");
                for (int v = 0; v < r->V; v++) fprintf(c->logits, "%s%.9g", v ? "," : "", r->logits[(size_t)k * r->V + v]);
                fputc(']', c->logits);
            }
            fprintf(c->logits, "]}\n");
        }
        fprintf(out, "%.4f |||", r->total);
        for (int k = 0; k < r->n; k++) fprintf(out, " %s=%.4f", r->piece[k], r->token[k]);
        fputc('\n', out);
    }
    fflush(out);
    c->line_no += n;
    translator_free_scores(res, n);
    free(res);
    for (int i = 0; i < n; i++) free(trg[i]);
    free(trg);
    free(bad_trg);
    free(src);
    return rc;
}

/* BLEU on stderr when every input line had its reference, else why not; returns 0 or 1. */
static int report_bleu(Ctx *c, const char *ref_path) {
    const char *extra;
    size_t len;
    long more = 0;
    while (!c->ref_broken) { /* the references left over: counted, never kept */
        LineStatus ls = line_read(&c->ref, &extra, &len);
        if (ls == LINE_OK || ls == LINE_TOO_LONG) more++;
        else c->ref_broken = ls != LINE_EOF;
        if (ls != LINE_OK && ls != LINE_TOO_LONG) break;
    }
    int rc = 0;
    if (c->ref_broken) {
        fprintf(stderr, "translate: %s: a read error, or not text (no line break in %zu MiB): no BLEU\n", ref_path,
                TEXT_MAX_SKIP >> 20);
        rc = 1;
    } else if (c->ref_lines < c->line_no || more) {
        fprintf(stderr, "translate: %s has %ld lines, the input %ld: no BLEU (references and outputs must pair up)\n",
                ref_path, c->ref_lines + more, c->line_no);
        rc = 1;
    } else if (c->line_no == 0) {
        fprintf(stderr, "translate: no input lines: no BLEU\n");
        rc = 1;
    } else if (c->ref_bad) {
        fprintf(stderr, "translate: %s: %ld lines are not UTF-8 text or longer than %zu bytes: no BLEU\n", ref_path,
                c->ref_bad, TEXT_MAX_LINE);
        rc = 1;
    } else if (c->src.sub) {
        SbBleuOpts bo = sb_bleu_defaults();
        SbChrfOpts co = sb_chrf_defaults();
        SbBleu s;
        char *const *const refs[1] = {c->sb_ref};
        sb_bleu(&bo, c->sb_hyp, refs, 1, c->sb_n, &s);
        char buf[512];
        sb_bleu_format(&bo, &s, 1, 2, buf, sizeof buf);
        fprintf(stderr, "%s\n", buf);
        sb_chrf_format(&co, sb_chrf(&co, c->sb_hyp, refs, 1, c->sb_n), 1, 2, buf, sizeof buf);
        fprintf(stderr, "%s\n", buf);
        if (c->failed) fprintf(stderr, "translate: (%ld lines could not be read and count as empty outputs)\n", c->failed);
    } else {
        BleuScore s = bleu_score(&c->bleu);
        char buf[256];
        bleu_format(&s, buf, sizeof buf);
        fprintf(stderr, "%s\n", buf);
        if (c->failed) fprintf(stderr, "translate: (%ld lines could not be read and count as empty outputs)\n", c->failed);
    }
    return rc;
}

static int usage_error(const S2sError *err) {
    fprintf(stderr, "translate: %s\n", err->msg);
    return 2;
}

/* The command line. */
typedef struct Opts {
    const char *model, *in_path, *out_path, *ref_path, *score_path, *logits_path, *attention_path;
    const char *more_paths[MODEL_MAX_ENSEMBLE];
    int block, threads;
    bool bf16, int8, progress;
} Opts;

/* The options that exclude or need each other; the files distinct. */
static int check_options(const Opts *o, Ctx *c) {
    const char *why = NULL;
    if (o->bf16 && o->int8) {
        why = "--bf16 and --int8 exclude each other";
    } else if (!o->model) {
        usage(stderr);
        return 2;
    } else if (o->score_path && (o->ref_path || c->tr.heatmap_dir || c->tr.beam > 1 || c->tr.n_best > 1)) {
        why = "--score scores given targets: it takes no --beam, --n-best, --ref or --heatmap";
    } else if (o->logits_path && (!o->score_path || c->n_more)) {
        why = "--logits writes the logits of --score's pairs under one model: give --score and one model";
    } else if (o->attention_path && (o->score_path || c->n_more)) {
        why = "--attention writes one model's attention as it decodes: no --score or second model";
    } else if (c->n_more && c->tr.heatmap_dir) {
        why = "--heatmap draws one model's attention; give one model";
    } else if (c->tr.n_best > c->tr.beam) {
        fprintf(stderr, "translate: --n-best %d needs --beam of at least %d\n", c->tr.n_best, c->tr.n_best);
        return 2;
    } else if (c->tr.heatmap_dir && c->tr.beam > 1) {
        why = "--heatmap draws greedy decoding; use it without --beam";
    }
    if (why) {
        fprintf(stderr, "translate: %s\n", why);
        return 2;
    }
    /* standard input is an input too: `--output f < f` would replace what it reads */
    bool std_in = !o->in_path || !strcmp(o->in_path, "-");
    FileRole *ins = c->ins;
    ins[0] = (FileRole){std_in ? "standard input" : "--input", std_in ? "-" : o->in_path};
    ins[1] = (FileRole){"--ref", o->ref_path};
    ins[2] = (FileRole){"--score", o->score_path};
    ins[3] = (FileRole){"MODEL", o->model};
    for (int k = 0; k < c->n_more; k++) ins[4 + k] = (FileRole){"MODEL", o->more_paths[k]};
    c->n_ins = 4 + c->n_more;
    FileRole outs[3] = {{"--output", o->out_path}, {"--logits", o->logits_path}, {"--attention", o->attention_path}};
    S2sError err;
    if (file_distinct(ins, c->n_ins, outs, 3, &err)) {
        fprintf(stderr, "translate: %s\n", err.msg);
        return 2;
    }
    return -1;
}

/* The options into o and c->tr's decoding settings, with the checks between them; returns -1
 * to go on, else the exit code. */
static int parse_options(int argc, char **argv, Opts *o, Ctx *c) {
    memset(o, 0, sizeof *o);
    o->block = 256;
    c->tr.beam = 1;
    c->tr.n_best = 1;
    c->tr.alpha = 1.0f;
    S2sError err;
    enum { O_TOKENIZED = ARGS_OWN, O_BF16, O_INT8, O_THREADS, O_MAX_LEN, O_BATCH, O_BEAM, O_NBEST, O_ALPHA, O_SCORE, O_LOGITS,
           O_ATTENTION, O_PROGRESS };
    static const struct option LONG[] = {
        {"help", no_argument, NULL, 'h'},          {"input", required_argument, NULL, 'i'},
        {"output", required_argument, NULL, 'o'},  {"ref", required_argument, NULL, 'r'},
        {"heatmap", required_argument, NULL, 'H'}, {"tokenized", no_argument, NULL, O_TOKENIZED},
        {"bf16", no_argument, NULL, O_BF16},       {"int8", no_argument, NULL, O_INT8},
        {"threads", required_argument, NULL, O_THREADS},
        {"max-len", required_argument, NULL, O_MAX_LEN}, {"batch", required_argument, NULL, O_BATCH},
        {"beam", required_argument, NULL, O_BEAM}, {"n-best", required_argument, NULL, O_NBEST},
        {"alpha", required_argument, NULL, O_ALPHA}, {"score", required_argument, NULL, O_SCORE},
        {"logits", required_argument, NULL, O_LOGITS}, {"attention", required_argument, NULL, O_ATTENTION},
        {"progress", no_argument, NULL, O_PROGRESS}, {"version", no_argument, NULL, ARGS_VERSION}, {NULL, 0, NULL, 0}};
    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, ":h", LONG, NULL)) != -1) {
        switch (opt) {
        case 'i': o->in_path = optarg; break;
        case 'o': o->out_path = optarg; break;
        case 'r': o->ref_path = optarg; break;
        case 'H': c->tr.heatmap_dir = optarg; break;
        case O_TOKENIZED: c->tr.tokenized = true; break;
        case O_BF16: o->bf16 = true; break;
        case O_INT8: o->int8 = true; break;
        case O_THREADS: if (args_int("--threads", optarg, 1, 256, &o->threads, &err)) return usage_error(&err); break;
        case O_MAX_LEN: if (args_int("--max-len", optarg, 1, 100000, &c->tr.max_len, &err)) return usage_error(&err); break;
        case O_BATCH: if (args_int("--batch", optarg, 1, 1000000, &o->block, &err)) return usage_error(&err); break;
        case O_BEAM: if (args_int("--beam", optarg, 1, 32, &c->tr.beam, &err)) return usage_error(&err); break;
        case O_NBEST: if (args_int("--n-best", optarg, 1, 32, &c->tr.n_best, &err)) return usage_error(&err); break;
        case O_ALPHA: if (args_float("--alpha", optarg, 0, 10, &c->tr.alpha, &err)) return usage_error(&err); break;
        case O_SCORE: o->score_path = optarg; break;
        case O_LOGITS: o->logits_path = optarg; break;
        case O_ATTENTION: o->attention_path = optarg; break;
        case O_PROGRESS: o->progress = true; break;
        default: return args_common(opt, "translate", usage, argv, optind, optopt);
        }
    }
    if (optind < argc) o->model = argv[optind++];
    while (optind < argc && c->n_more < MODEL_MAX_ENSEMBLE - 1) o->more_paths[c->n_more++] = argv[optind++];
    if (optind < argc) {
        fprintf(stderr, "translate: %s: an ensemble has at most %d models\n", argv[optind], MODEL_MAX_ENSEMBLE);
        return 2;
    }
    return check_options(o, c);
}

/* The model (and an ensemble's others) loaded, each with its tape, weights frozen; the
 * translator set up. Returns -1 to go on, else the exit code. */
static int load_models(const Opts *o, Ctx *c) {
    S2sError err;
    if (model_load_file(&c->m, &c->cfg, &c->src, &c->trg, o->model, &err)) {
        fprintf(stderr, "translate: %s\n", err.msg);
        return 1;
    }
    if (c->src.sub && c->tr.tokenized) {
        fprintf(stderr, "translate: %s reads raw text (a subword model): --tokenized is for word models\n", o->model);
        return 2;
    }
    Precision prec = o->bf16 ? PRECISION_BF16 : o->int8 ? PRECISION_INT8 : PRECISION_FP32;
    c->more = s2s_xcalloc((size_t)(c->n_more ? c->n_more : 1), sizeof *c->more);
    for (int k = 0; k < c->n_more; k++) {
        Member *mb = &c->more[k];
        if (model_load_file(&mb->m, &mb->cfg, &mb->src, &mb->trg, o->more_paths[k], &err) ||
            translator_check_ensemble(&c->cfg, &c->src, &c->trg, &mb->cfg, &mb->src, &mb->trg, o->more_paths[k], &err)) {
            fprintf(stderr, "translate: %s\n", err.msg);
            return 1;
        }
        if (tape_init_engine(&mb->tape, prec, mb->cfg.train.gemm, o->threads, "translate: --bf16", &err)) {
            fprintf(stderr, "%s\n", err.msg);
            return 2;
        }
        params_freeze(&mb->m.params, o->bf16);
        c->more_m[k] = &mb->m;
        c->more_t[k] = &mb->tape;
    }
    const char *heatmaps = c->tr.heatmap_dir;
    DecodeSettings ds = {c->tr.beam, c->tr.n_best, c->tr.alpha, c->tr.max_len, c->tr.tokenized, false};
    c->tr = translator_make(&c->m, &c->cfg, &c->src, &c->trg, &c->tape, &ds);
    c->tr.heatmap_name = o->model;
    c->tr.more = c->more_m;
    c->tr.more_tapes = c->more_t;
    c->tr.n_more = c->n_more;
    if (heatmaps) {
        S2sStatus st = translator_heatmaps(&c->tr, heatmaps, c->ins, c->n_ins, &err);
        if (st) {
            fprintf(stderr, "translate: %s\n", err.msg);
            return st == S2S_ERR_CONFIG ? 2 : 1;
        }
        if (!model_has_attention(&c->m))
            fprintf(stderr, "translate: %s attention has no weights to draw; no heatmaps\n", model_attention_name(&c->m));
        c->tr.font = font_open(NULL);
        if (!c->tr.font) fprintf(stderr, "translate: warning: DejaVu Sans not found (fonts-dejavu-core); heatmaps without labels\n");
    }
    if (tape_init_engine(&c->tape, prec, c->cfg.train.gemm, o->threads, "translate: --bf16", &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 2;
    }
    params_freeze(&c->m.params, o->bf16); /* the weights never change here */
    return -1;
}

/* The open files of a run: the input, the outputs (written whole or not at all: --output may
 * even name the input file), the references and targets read along. */
typedef struct Files {
    FILE *in, *out, *ref, *targets;
    FileTmp out_tmp, json_tmp; /* --logits or --attention */
} Files;

static int open_files(const Opts *o, Ctx *c, Files *f) {
    S2sError err;
    f->in = stdin;
    f->out = stdout;
    if (o->score_path) {
        if (!(f->targets = fopen(o->score_path, "rb"))) {
            fprintf(stderr, "translate: %s: cannot open: %s\n", o->score_path, strerror(errno));
            return 1;
        }
        line_reader_init(&c->score, f->targets, TEXT_MAX_LINE);
        c->scoring = true;
    }
    if (o->in_path && !(f->in = fopen(o->in_path, "rb"))) {
        fprintf(stderr, "translate: %s: cannot open: %s\n", o->in_path, strerror(errno));
        return 1;
    }
    if (o->ref_path) {
        if (!(f->ref = fopen(o->ref_path, "rb"))) {
            fprintf(stderr, "translate: %s: cannot open: %s\n", o->ref_path, strerror(errno));
            return 1;
        }
        line_reader_init(&c->ref, f->ref, TEXT_MAX_LINE);
        c->has_ref = true;
        bleu_init(&c->bleu);
    }
    if (o->out_path) {
        /* a signal between the temporary file's creation and the handler's installation would
         * leave the file behind, or be lost where the shell ignores SIGINT for a background
         * job: it waits, blocked, until the handler is there */
        sigset_t stops, was;
        sigemptyset(&stops);
        sigaddset(&stops, SIGINT);
        sigaddset(&stops, SIGTERM);
        sigaddset(&stops, SIGHUP);
        sigprocmask(SIG_BLOCK, &stops, &was);
        S2sStatus st = file_tmp_open(&f->out_tmp, o->out_path, &err);
        if (!st && !f->out_tmp.direct) remove_on_signal(f->out_tmp.tmp);
        sigprocmask(SIG_SETMASK, &was, NULL);
        if (st) {
            fprintf(stderr, "translate: %s\n", err.msg);
            return 1;
        }
        f->out = f->out_tmp.f;
    }
    const char *json_path = o->logits_path ? o->logits_path : o->attention_path;
    if (json_path) { /* whole or not at all too */
        if (file_tmp_open(&f->json_tmp, json_path, &err)) {
            fprintf(stderr, "translate: %s\n", err.msg);
            if (o->out_path) file_tmp_abort(&f->out_tmp);
            return 1;
        }
        *(o->logits_path ? &c->logits : &c->attn) = f->json_tmp.f;
        c->tr.score_logits = o->logits_path != NULL;
        c->tr.want_attention = o->attention_path != NULL;
    }
    return -1;
}

static int decode_block(Ctx *c, Line *lines, int n, FILE *out) {
    int rc = 0;
    if (c->scoring) rc = score_block(c, lines, n, out);
    else translate_block(c, lines, n, out);
    for (int i = 0; i < n; i++) free(lines[i].text);
    return rc;
}

/* Reads the input to its end and decodes it block by block: on a terminal each line as it is
 * typed, else up to a block of lines or of bytes, whichever comes first. Returns 1 when the
 * input could not be read to its end or a target was missing or left over. */
static int read_and_decode(const Opts *o, Ctx *c, Files *f) {
    int block = isatty(fileno(f->in)) ? 1 : o->block;
    /* progress where it shows apart from the outputs, or where asked */
    bool shows = isatty(STDERR_FILENO) && block > 1 && (f->out != stdout || !isatty(STDOUT_FILENO));
    Progress pr;
    progress_init(&pr, o->progress || shows ? stderr : NULL, isatty(STDERR_FILENO), f->in);
    double read = 0;
    long done = 0;
    const size_t block_bytes = (size_t)64 << 20;
    char too_long[64];
    snprintf(too_long, sizeof too_long, "longer than %zu bytes; skipped", TEXT_MAX_LINE);
    Line *lines = s2s_xmalloc((size_t)block * sizeof *lines);
    int n = 0, rc = 0;
    size_t bytes = 0;
    LineReader reader;
    line_reader_init(&reader, f->in, TEXT_MAX_LINE);
    for (;;) {
        const char *text;
        size_t len;
        LineStatus ls = line_read(&reader, &text, &len);
        if (ls == LINE_EOF) break;
        if (ls == LINE_ERROR || ls == LINE_ENDLESS) {
            if (ls == LINE_ERROR) fprintf(stderr, "translate: read error: %s\n", text_strerror(errno));
            else fprintf(stderr, "translate: line %ld: no line break in %zu MiB: not text; stopped\n", reader.line_no,
                         TEXT_MAX_SKIP >> 20);
            rc = 1;
            break;
        }
        Line *l = &lines[n++];
        l->text = NULL;
        if (ls == LINE_TOO_LONG) l->bad = too_long;
        else if (strlen(text) != len) l->bad = "contains a NUL byte";
        else l->text = s2s_xstrdup(text), bytes += len;
        read += (double)len + 1;
        if (n == block || bytes >= block_bytes) {
            rc |= decode_block(c, lines, n, f->out);
            progress_show(&pr, done += n, read);
            n = 0;
            bytes = 0;
        }
    }
    if (n) rc |= decode_block(c, lines, n, f->out);
    progress_end(&pr, done + n);
    if (c->scoring && !rc) { /* targets left over: they pair with no source */
        const char *t;
        size_t len;
        if (line_read(&c->score, &t, &len) != LINE_EOF) {
            fprintf(stderr, "translate: --score: %s has more lines than the input (%ld)\n", o->score_path, c->line_no);
            rc = 1;
        }
    }
    free(lines);
    line_reader_free(&reader);
    return rc;
}

/* The outputs kept (the input was read to its end: lines that failed are empty) or dropped
 * (a read error cut them short), BLEU against --ref; the files closed. Returns rc or 1. */
static int close_files(const Opts *o, Ctx *c, Files *f, int rc) {
    S2sError err;
    if (o->out_path) {
        if (rc) {
            file_tmp_abort(&f->out_tmp);
        } else if (file_tmp_commit(&f->out_tmp, ferror(f->out) != 0, &err)) {
            fprintf(stderr, "translate: %s\n", err.msg);
            rc = 1;
        }
    } else if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "translate: standard output: write error\n");
        rc = 1;
    }
    if (o->logits_path || o->attention_path) {
        if (rc) {
            file_tmp_abort(&f->json_tmp);
        } else if (file_tmp_commit(&f->json_tmp, ferror(f->json_tmp.f) != 0, &err)) {
            fprintf(stderr, "translate: %s\n", err.msg);
            rc = 1;
        }
    }
    if (c->has_ref) {
        if (!rc && report_bleu(c, o->ref_path)) rc = 1;
        line_reader_free(&c->ref);
        bleu_free(&c->bleu);
        text_free_lines(c->sb_hyp, c->sb_n);
        text_free_lines(c->sb_ref, c->sb_n);
        fclose(f->ref);
    }
    if (f->in != stdin) fclose(f->in);
    if (f->targets) {
        line_reader_free(&c->score);
        fclose(f->targets);
    }
    return rc;
}

static void ctx_free(Ctx *c) {
    for (int k = 0; k < c->n_more && c->more; k++) {
        tape_free(&c->more[k].tape);
        model_free(&c->more[k].m);
        vocab_free(&c->more[k].src);
        vocab_free(&c->more[k].trg);
    }
    free(c->more);
    font_close(c->tr.font);
    tape_free(&c->tape);
    model_free(&c->m);
    vocab_free(&c->src);
    vocab_free(&c->trg);
}

int main(int argc, char **argv) {
    Opts o;
    Ctx c;
    memset(&c, 0, sizeof c);
    int rc = parse_options(argc, argv, &o, &c);
    if (rc >= 0) return rc;
    rc = load_models(&o, &c);
    Files f = {0};
    if (rc < 0) rc = open_files(&o, &c, &f);
    if (rc < 0) {
        rc = close_files(&o, &c, &f, read_and_decode(&o, &c, &f));
        if (c.failed) rc = 1;
    }
    ctx_free(&c);
    return rc;
}
