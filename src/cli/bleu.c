/* bleu — corpus BLEU of a hypothesis file: multi-bleu.perl's on tokenised text (the default),
 * or sacreBLEU's BLEU and chrF on detokenised text.
 *   bleu [options] REF [HYP]      (one sentence a line; HYP defaults to stdin)
 *   exit 0 · 1 IO, files that are not text, or files that do not pair up · 2 usage */
#include "s2s/args.h"
#include "s2s/multibleu.h"
#include "s2s/sacrebleu.h"
#include "wait_policy.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REFS 16

static void usage(FILE *f) {
    fprintf(f,
            "usage: bleu [options] REF [HYP]   (HYP defaults to stdin)\n"
            "Without options: corpus BLEU-4 as multi-bleu.perl, on tokenised text.\n"
            "sacreBLEU %s's scores, on detokenised text (its lines and signatures):\n"
            "  --tokenize 13a|intl|none|char  BLEU with that tokeniser (sacreBLEU's default: 13a)\n"
            "  --sacrebleu                the same as --tokenize 13a\n"
            "  -lc, --lowercase           case-insensitive (Python's str.lower())\n"
            "  --smooth-method M          exp (default), none, floor, add-k\n"
            "  --smooth-value V           floor's (0.1) or add-k's (1) value\n"
            "  --chrf                     chrF2 (with --tokenize too: both lines)\n"
            "  --word-order N             chrF's word n-grams (2: chrF++; default 0)\n"
            "  --char-order N             chrF's character n-grams (default 6)\n"
            "  --beta N                   chrF's beta (default 2)\n"
            "  --chrf-whitespace          keep whitespace in chrF's character n-grams\n"
            "  --eps-smoothing            chrF averaged per order (chrF++.py, Moses)\n"
            "  --ref FILE                 another reference (repeatable, up to %d in all)\n"
            "  --width N                  decimals of the scores (default 1)\n"
            "  --normalize LANG           multi-bleu: first lowercase and tokenise the hypotheses as the Multi30k\n"
            "                             files are (the references must already be so)\n"
            "  --paired-bootstrap BASE    sacreBLEU: test HYP against another system's outputs BASE on the same\n"
            "                             lines (paired bootstrap, Koehn 2004): both scores, HYP - BASE, its 95%%\n"
            "                             interval and p (the share of resamples without the difference's sign)\n"
            "  --resamples N              the bootstrap's resamples of the lines (default 1000)\n",
            SACREBLEU_VERSION, MAX_REFS);
}

enum { O_TOK = ARGS_OWN, O_SACRE, O_SMOOTH, O_SMOOTH_V, O_CHRF, O_WORD, O_CHAR, O_BETA, O_WS, O_EPS, O_REF, O_WIDTH, O_NORM,
       O_PAIRED, O_RESAMPLES };

static int bad(const char *msg) {
    fprintf(stderr, "bleu: %s (see bleu --help)\n", msg);
    return 2;
}

/* What the command line asks for. */
typedef struct Opts {
    SbBleuOpts bo;
    SbChrfOpts co;
    bool sacre, chrf, lc, smooth_set, chrf_set;
    const char *ref_paths[MAX_REFS];
    int n_paths, width, resamples;
    const char *norm_lang, *hyp_path, *base_path;
} Opts;

/* A value's option into o: 0, or the exit code of a bad value (2). */
static int take_value(int c, const char *arg, Opts *o) {
    S2sError err;
    switch (c) {
    case O_TOK: {
        int k = 0;
        while (k < SB_TOK_COUNT && strcmp(arg, SB_TOKENIZE_NAMES[k])) k++;
        if (k == SB_TOK_COUNT) return bad("--tokenize: expected 13a, intl, none or char");
        o->bo.tokenize = (SbTokenize)k;
        o->sacre = true;
        return 0;
    }
    case O_SMOOTH: {
        int k = 0;
        while (k < SB_SMOOTH_COUNT && strcmp(arg, SB_SMOOTH_NAMES[k])) k++;
        if (k == SB_SMOOTH_COUNT) return bad("--smooth-method: expected exp, none, floor or add-k");
        o->bo.smooth = (SbSmooth)k;
        o->smooth_set = true;
        return 0;
    }
    case O_SMOOTH_V: {
        float v;
        if (args_float("--smooth-value", arg, 0, 1e9, &v, &err)) return bad(err.msg);
        o->bo.smooth_value = v;
        o->smooth_set = true;
        return 0;
    }
    case O_WORD: o->chrf_set = true; return args_int("--word-order", arg, 0, SB_MAX_ORDER, &o->co.word_order, &err) ? bad(err.msg) : 0;
    case O_CHAR: o->chrf_set = true; return args_int("--char-order", arg, 0, SB_MAX_ORDER, &o->co.char_order, &err) ? bad(err.msg) : 0;
    case O_BETA: o->chrf_set = true; return args_int("--beta", arg, 0, 1000, &o->co.beta, &err) ? bad(err.msg) : 0;
    case O_REF:
        if (o->n_paths == MAX_REFS) return bad("--ref: at most 16 references");
        o->ref_paths[o->n_paths++] = arg;
        return 0;
    case O_WIDTH: return args_int("--width", arg, 0, 17, &o->width, &err) ? bad(err.msg) : 0;
    case O_PAIRED: o->base_path = arg; return 0;
    case O_RESAMPLES: return args_int("--resamples", arg, 1, 1000000, &o->resamples, &err) ? bad(err.msg) : 0;
    case O_NORM:
        if (!*arg || strlen(arg) > 7) return bad("--normalize: expected a language code (en, de, ...)");
        o->norm_lang = arg;
        return 0;
    default: S2S_ASSERT(!"an option without a case"); return 2;
    }
}

/* The command line into o: −1 to go on, else the exit code. */
static int parse(int argc, char **argv, Opts *o) {
    static const struct option LONG[] = {{"help", no_argument, NULL, 'h'},
                                         {"version", no_argument, NULL, ARGS_VERSION},
                                         {"tokenize", required_argument, NULL, O_TOK},
                                         {"sacrebleu", no_argument, NULL, O_SACRE},
                                         {"lowercase", no_argument, NULL, 'l'},
                                         {"smooth-method", required_argument, NULL, O_SMOOTH},
                                         {"smooth-value", required_argument, NULL, O_SMOOTH_V},
                                         {"chrf", no_argument, NULL, O_CHRF},
                                         {"word-order", required_argument, NULL, O_WORD},
                                         {"char-order", required_argument, NULL, O_CHAR},
                                         {"beta", required_argument, NULL, O_BETA},
                                         {"chrf-whitespace", no_argument, NULL, O_WS},
                                         {"eps-smoothing", no_argument, NULL, O_EPS},
                                         {"ref", required_argument, NULL, O_REF},
                                         {"width", required_argument, NULL, O_WIDTH},
                                         {"normalize", required_argument, NULL, O_NORM},
                                         {"paired-bootstrap", required_argument, NULL, O_PAIRED},
                                         {"resamples", required_argument, NULL, O_RESAMPLES},
                                         {NULL, 0, NULL, 0}};
    *o = (Opts){.bo = sb_bleu_defaults(), .co = sb_chrf_defaults(), .n_paths = 1, .width = 1, .resamples = 1000};
    bool resamples_set = false;
    opterr = 0;
    /* -lc: sacreBLEU's spelling, as one option */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-lc")) argv[i] = "--lowercase";
    for (int c, rc; (c = getopt_long(argc, argv, ":h", LONG, NULL)) != -1;) {
        switch (c) {
        case O_SACRE: o->sacre = true; break;
        case 'l': o->lc = true; break;
        case O_CHRF: o->chrf = true; break;
        case O_WS: o->co.whitespace = o->chrf_set = true; break;
        case O_EPS: o->co.eps_smoothing = o->chrf_set = true; break;
        case O_TOK: case O_SMOOTH: case O_SMOOTH_V: case O_WORD: case O_CHAR: case O_BETA: case O_REF: case O_WIDTH: case O_NORM:
        case O_PAIRED: case O_RESAMPLES:
            resamples_set |= c == O_RESAMPLES;
            if ((rc = take_value(c, optarg, o))) return rc;
            break;
        default: return args_common(c, "bleu", usage, argv, optind, optopt);
        }
    }
    if (optind == argc || argc - optind > 2) {
        if (argc - optind > 2) fprintf(stderr, "bleu: %s: unexpected argument (see bleu --help)\n", argv[optind + 2]);
        else usage(stderr);
        return 2;
    }
    bool multi = !o->sacre && !o->chrf; /* multi-bleu.perl */
    if (multi && (o->lc || o->smooth_set || o->n_paths > 1))
        return bad("-lc, --smooth-* and --ref are sacreBLEU's: add --tokenize 13a (or --sacrebleu) or --chrf");
    if (!o->sacre && o->smooth_set) return bad("--smooth-method and --smooth-value are BLEU's: add --tokenize");
    if (!o->chrf && o->chrf_set) return bad("--word-order, --char-order, --beta, --chrf-whitespace and --eps-smoothing need --chrf");
    if (o->norm_lang && !multi) return bad("--normalize is for multi-bleu (sacreBLEU tokenises by itself)");
    if (o->base_path && !o->sacre) return bad("--paired-bootstrap tests sacreBLEU's BLEU: add --sacrebleu (or --tokenize)");
    if (resamples_set && !o->base_path) return bad("--resamples is the paired bootstrap's: add --paired-bootstrap BASE");
    if (o->chrf && o->co.char_order + o->co.word_order == 0) return bad("--char-order 0 and --word-order 0 leave chrF nothing to count");
    o->bo.lowercase = o->co.lowercase = o->lc;
    o->ref_paths[0] = argv[optind];
    o->hyp_path = optind + 1 < argc ? argv[optind + 1] : "/dev/stdin";
    return -1;
}

/* The scores of the hypotheses against the references, printed: multi-bleu's, or sacreBLEU's
 * BLEU and chrF. */
static void print_scores(const Opts *o, char **hyp, char **const *refs, int nh) {
    char line[512];
    if (!o->sacre && !o->chrf) {
        Bleu b;
        bleu_init(&b);
        for (int i = 0; i < nh; i++) {
            char *h = o->norm_lang ? tok_normalize(hyp[i], o->norm_lang) : NULL;
            bleu_add_text(&b, h ? h : hyp[i], refs[0][i]);
            free(h);
        }
        BleuScore s = bleu_score(&b);
        bleu_format(&s, line, sizeof line);
        printf("%s\n", line);
        bleu_free(&b);
        return;
    }
    if (o->sacre) {
        SbBleu s;
        sb_bleu(&o->bo, hyp, (char *const *const *)refs, o->n_paths, nh, &s);
        sb_bleu_format(&o->bo, &s, o->n_paths, o->width, line, sizeof line);
        printf("%s\n", line);
    }
    if (o->chrf) {
        double f = sb_chrf(&o->co, hyp, (char *const *const *)refs, o->n_paths, nh);
        sb_chrf_format(&o->co, f, o->n_paths, o->width, line, sizeof line);
        printf("%s\n", line);
    }
}

/* The paired bootstrap of the hypotheses against o->base_path's, printed; the exit code. */
static int paired_test(const Opts *o, char **hyp, char **const *refs, int nh) {
    S2sError err;
    char **base;
    int nb;
    if (text_read_lines(o->base_path, &base, &nb, &err)) {
        fprintf(stderr, "bleu: %s\n", err.msg);
        return 1;
    }
    if (nb != nh) {
        fprintf(stderr, "bleu: %s has %d lines, the hypotheses %d\n", o->base_path, nb, nh);
        text_free_lines(base, nb);
        return 1;
    }
    SbStats *sa = s2s_xmalloc((size_t)nh * sizeof *sa), *sb = s2s_xmalloc((size_t)nh * sizeof *sb);
    sb_bleu_stats(&o->bo, base, (char *const *const *)refs, o->n_paths, nh, sa, NULL);
    sb_bleu_stats(&o->bo, hyp, (char *const *const *)refs, o->n_paths, nh, sb, NULL);
    SbPaired t;
    sb_paired_bootstrap(&o->bo, sa, sb, nh, o->resamples, 12345, &t);
    int w = o->width + 1;
    printf("paired bootstrap (%d resamples of %d lines): BLEU %.*f against %.*f (%s): %+.*f [%+.*f, %+.*f], p = %.4f\n",
           o->resamples, nh, o->width, t.b, o->width, t.a, o->base_path, w, t.diff, w, t.lo, w, t.hi, t.p);
    free(sa);
    free(sb);
    text_free_lines(base, nb);
    return 0;
}

int main(int argc, char **argv) {
    Opts o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    rc = 0;
    S2sError err;
    char **refs[MAX_REFS], **hyp = NULL;
    int nr[MAX_REFS], nh = 0, loaded = 0;
    for (; loaded < o.n_paths; loaded++)
        if (text_read_lines(o.ref_paths[loaded], &refs[loaded], &nr[loaded], &err)) {
            fprintf(stderr, "bleu: %s\n", err.msg);
            rc = 1;
            goto out;
        }
    if (text_read_lines(o.hyp_path, &hyp, &nh, &err)) {
        fprintf(stderr, "bleu: %s\n", err.msg);
        hyp = NULL;
        rc = 1;
        goto out;
    }
    for (int r = 0; r < o.n_paths; r++)
        if (nr[r] != nh) {
            fprintf(stderr, "bleu: %s has %d lines, the hypotheses %d\n", o.ref_paths[r], nr[r], nh);
            rc = 1;
            goto out;
        }
    if (nh == 0) {
        fprintf(stderr, "bleu: %s: no sentences to score\n", o.ref_paths[0]);
        rc = 1;
        goto out;
    }
    print_scores(&o, hyp, (char **const *)refs, nh);
    if (o.base_path) rc = paired_test(&o, hyp, (char **const *)refs, nh);
out:
    for (int r = 0; r < loaded; r++) text_free_lines(refs[r], nr[r]);
    if (hyp) text_free_lines(hyp, nh);
    return rc;
}
