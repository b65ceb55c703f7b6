/* bleu — corpus BLEU of a hypothesis file: multi-bleu.perl's on tokenised text (the default),
 * or sacreBLEU's BLEU and chrF on detokenised text.
 *   bleu [options] REF [HYP]      (one sentence a line; HYP defaults to stdin)
 *   exit 0 · 1 IO, files that are not text, or files that do not pair up · 2 usage */
#include "s2s/args.h"
#include "s2s/bleu.h"
#include "s2s/sacrebleu.h"

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
            "                             files are (the references must already be so)\n",
            SACREBLEU_VERSION, MAX_REFS);
}

enum { O_TOK = ARGS_OWN, O_SACRE, O_SMOOTH, O_SMOOTH_V, O_CHRF, O_WORD, O_CHAR, O_BETA, O_WS, O_EPS, O_REF, O_WIDTH, O_NORM };

static int bad(const char *msg) {
    fprintf(stderr, "bleu: %s (see bleu --help)\n", msg);
    return 2;
}

int main(int argc, char **argv) {
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
                                         {NULL, 0, NULL, 0}};
    SbBleuOpts bo = sb_bleu_defaults();
    SbChrfOpts co = sb_chrf_defaults();
    bool sacre = false, chrf = false, lc = false, smooth_set = false, chrf_set = false;
    const char *ref_paths[MAX_REFS];
    int n_paths = 1, width = 1;
    const char *norm_lang = NULL;
    S2sError err;
    opterr = 0;
    int o;
    /* -lc: sacreBLEU's spelling, as one option */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-lc")) argv[i] = "--lowercase";
    while ((o = getopt_long(argc, argv, ":h", LONG, NULL)) != -1) {
        switch (o) {
        case O_TOK: {
            int k = 0;
            while (k < SB_TOK_COUNT && strcmp(optarg, SB_TOKENIZE_NAMES[k])) k++;
            if (k == SB_TOK_COUNT) return bad("--tokenize: expected 13a, intl, none or char");
            bo.tokenize = (SbTokenize)k;
            sacre = true;
            break;
        }
        case O_SACRE: sacre = true; break;
        case 'l': lc = true; break;
        case O_SMOOTH: {
            int k = 0;
            while (k < SB_SMOOTH_COUNT && strcmp(optarg, SB_SMOOTH_NAMES[k])) k++;
            if (k == SB_SMOOTH_COUNT) return bad("--smooth-method: expected exp, none, floor or add-k");
            bo.smooth = (SbSmooth)k;
            smooth_set = true;
            break;
        }
        case O_SMOOTH_V: {
            float v;
            if (args_float("--smooth-value", optarg, 0, 1e9, &v, &err)) return bad(err.msg);
            bo.smooth_value = v;
            smooth_set = true;
            break;
        }
        case O_CHRF: chrf = true; break;
        case O_WORD:
            if (args_int("--word-order", optarg, 0, SB_MAX_ORDER, &co.word_order, &err)) return bad(err.msg);
            chrf_set = true;
            break;
        case O_CHAR:
            if (args_int("--char-order", optarg, 0, SB_MAX_ORDER, &co.char_order, &err)) return bad(err.msg);
            chrf_set = true;
            break;
        case O_BETA:
            if (args_int("--beta", optarg, 0, 1000, &co.beta, &err)) return bad(err.msg);
            chrf_set = true;
            break;
        case O_WS: co.whitespace = chrf_set = true; break;
        case O_EPS: co.eps_smoothing = chrf_set = true; break;
        case O_REF:
            if (n_paths == MAX_REFS) return bad("--ref: at most 16 references");
            ref_paths[n_paths++] = optarg;
            break;
        case O_WIDTH:
            if (args_int("--width", optarg, 0, 17, &width, &err)) return bad(err.msg);
            break;
        case O_NORM:
            if (!*optarg || strlen(optarg) > 7) return bad("--normalize: expected a language code (en, de, ...)");
            norm_lang = optarg;
            break;
        default: return args_common(o, "bleu", usage, argv, optind, optopt);
        }
    }
    if (optind == argc || argc - optind > 2) {
        if (argc - optind > 2) fprintf(stderr, "bleu: %s: unexpected argument (see bleu --help)\n", argv[optind + 2]);
        else usage(stderr);
        return 2;
    }
    bool multi = !sacre && !chrf; /* multi-bleu.perl */
    if (multi && (lc || smooth_set || n_paths > 1))
        return bad("-lc, --smooth-* and --ref are sacreBLEU's: add --tokenize 13a (or --sacrebleu) or --chrf");
    if (!sacre && smooth_set) return bad("--smooth-method and --smooth-value are BLEU's: add --tokenize");
    if (!chrf && chrf_set) return bad("--word-order, --char-order, --beta, --chrf-whitespace and --eps-smoothing need --chrf");
    if (norm_lang && !multi) return bad("--normalize is for multi-bleu (sacreBLEU tokenises by itself)");
    if (chrf && co.char_order + co.word_order == 0) return bad("--char-order 0 and --word-order 0 leave chrF nothing to count");
    bo.lowercase = co.lowercase = lc;
    ref_paths[0] = argv[optind];
    const char *hyp_path = optind + 1 < argc ? argv[optind + 1] : "/dev/stdin";

    char **refs[MAX_REFS], **hyp = NULL;
    int nr[MAX_REFS], nh = 0, loaded = 0, rc = 0;
    for (; loaded < n_paths; loaded++)
        if (text_read_lines(ref_paths[loaded], &refs[loaded], &nr[loaded], &err)) {
            fprintf(stderr, "bleu: %s\n", err.msg);
            rc = 1;
            goto out;
        }
    if (text_read_lines(hyp_path, &hyp, &nh, &err)) {
        fprintf(stderr, "bleu: %s\n", err.msg);
        hyp = NULL;
        rc = 1;
        goto out;
    }
    for (int r = 0; r < n_paths; r++)
        if (nr[r] != nh) {
            fprintf(stderr, "bleu: %s has %d lines, the hypotheses %d\n", ref_paths[r], nr[r], nh);
            rc = 1;
            goto out;
        }
    if (nh == 0) {
        fprintf(stderr, "bleu: %s: no sentences to score\n", ref_paths[0]);
        rc = 1;
        goto out;
    }
    char line[512];
    if (multi) {
        Bleu b;
        bleu_init(&b);
        for (int i = 0; i < nh; i++) {
            char *h = norm_lang ? tok_normalize(hyp[i], norm_lang) : NULL;
            bleu_add_text(&b, h ? h : hyp[i], refs[0][i]);
            free(h);
        }
        BleuScore s = bleu_score(&b);
        bleu_format(&s, line, sizeof line);
        printf("%s\n", line);
        bleu_free(&b);
        goto out;
    }
    if (sacre) {
        SbBleu s;
        sb_bleu(&bo, hyp, (char *const *const *)refs, n_paths, nh, &s);
        sb_bleu_format(&bo, &s, n_paths, width, line, sizeof line);
        printf("%s\n", line);
    }
    if (chrf) {
        double f = sb_chrf(&co, hyp, (char *const *const *)refs, n_paths, nh);
        sb_chrf_format(&co, f, n_paths, width, line, sizeof line);
        printf("%s\n", line);
    }
out:
    for (int r = 0; r < loaded; r++) text_free_lines(refs[r], nr[r]);
    if (hyp) text_free_lines(hyp, nh);
    return rc;
}
