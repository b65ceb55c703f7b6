/* sacrebleu.h — corpus BLEU and chrF as sacreBLEU 2.x defines them, on detokenised text.
 *
 * BLEU: each line (right-stripped, optionally lowercased as Python's str.lower()) is
 * tokenised (13a: mteval-v13a's rules; intl: mteval-v14's on Unicode punctuation and symbols;
 * char: every character; none: as is), n-grams are
 * clipped by their largest count in any reference, the reference length is the closest to
 * the hypothesis (the shorter on a tie), and zero-match orders are smoothed (exp, floor,
 * add-k or none). chrF: character n-grams (whitespace removed) and, for chrF++, word n-grams
 * (one punctuation mark split off each word), precision and recall averaged over the orders
 * that occur, F-beta; with several references each line keeps its best one.
 * Whitespace and case follow Python's (str.split, str.lower) so that every input scores as
 * sacreBLEU scores it. Borrows the lines it is given; owns nothing between calls. */
#ifndef S2S_SACREBLEU_H
#define S2S_SACREBLEU_H

#include "s2s/common.h"

#include <stddef.h>
#include <stdint.h>

/* the sacreBLEU release whose definitions these are (its signature's version field) */
#define SACREBLEU_VERSION "2.6.0"
#define SB_MAX_ORDER 16 /* the largest n-gram order accepted (BLEU, chrF's characters or words) */

typedef enum SbTokenize { SB_TOK_13A, SB_TOK_INTL, SB_TOK_NONE, SB_TOK_CHAR, SB_TOK_COUNT } SbTokenize;
typedef enum SbSmooth { SB_SMOOTH_EXP, SB_SMOOTH_NONE, SB_SMOOTH_FLOOR, SB_SMOOTH_ADD_K, SB_SMOOTH_COUNT } SbSmooth;
extern const char *const SB_TOKENIZE_NAMES[SB_TOK_COUNT];
extern const char *const SB_SMOOTH_NAMES[SB_SMOOTH_COUNT];

typedef struct SbBleuOpts {
    SbTokenize tokenize;
    SbSmooth smooth;
    double smooth_value;  /* floor and add-k; negative: the method's default (0.1, 1) */
    bool lowercase;
    int max_order;        /* 4 */
} SbBleuOpts;

typedef struct SbBleu {
    double score, bp, ratio;
    double precision[SB_MAX_ORDER];
    double counts[SB_MAX_ORDER], totals[SB_MAX_ORDER]; /* add-k adds k to them, as sacreBLEU */
    long sys_len, ref_len;
} SbBleu;

typedef struct SbChrfOpts {
    int char_order;       /* 6 */
    int word_order;       /* 0: chrF, 2: chrF++ */
    int beta;             /* 2 */
    bool lowercase;
    bool whitespace;      /* keep whitespace in the character n-grams */
    bool eps_smoothing;   /* average the orders' F scores (chrF++.py, Moses) instead */
} SbChrfOpts;

SbBleuOpts sb_bleu_defaults(void);
SbChrfOpts sb_chrf_defaults(void);

/* BLEU's sufficient statistics: a line's, and a corpus's as their sums. */
typedef struct SbStats {
    double counts[SB_MAX_ORDER], totals[SB_MAX_ORDER];
    long sys_len, ref_len;
} SbStats;

/* n hypotheses against nrefs references each: refs[r][i] is reference r of line i. Lines
 * must be valid UTF-8 (text_read_lines checks it). */
void sb_bleu(const SbBleuOpts *o, char *const *hyp, char *const *const *refs, int nrefs, int n, SbBleu *out);
/* Each line's statistics (into lines[0..n) when not NULL) and their sum (when not NULL); the
 * score of summed statistics is the corpus score (sb_bleu), so resampled lines give a
 * resampled corpus's (the bootstrap). */
void sb_bleu_stats(const SbBleuOpts *o, char *const *hyp, char *const *const *refs, int nrefs, int n, SbStats *lines,
                   SbStats *sum);
void sb_stats_add(SbStats *sum, const SbStats *s);
void sb_bleu_score(const SbBleuOpts *o, const SbStats *sum, SbBleu *out);
/* The paired bootstrap test of system b against system a on the same n lines (Koehn, 2004;
 * the per-line statistics of each against the same references): both corpus scores and their
 * difference b − a; resamples sets of n lines drawn with replacement (from seed), the difference
 * on each; its 95 % interval, and p: the share of resamples whose difference has not the full
 * difference's sign (0 counted against). The test ./compare runs between runs. */
typedef struct SbPaired {
    double a, b, diff, lo, hi, p;
} SbPaired;
void sb_paired_bootstrap(const SbBleuOpts *o, const SbStats *a, const SbStats *b, int n, int resamples, uint64_t seed,
                         SbPaired *out);
double sb_chrf(const SbChrfOpts *o, char *const *hyp, char *const *const *refs, int nrefs, int n);

/* sacreBLEU's text lines, width decimals ("BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|
 * version:2.6.0 = 34.1 65.2/40.1/27.0/18.6 (BP = 1.000 ratio = 1.003 hyp_len = … ref_len = …)") */
void sb_bleu_format(const SbBleuOpts *o, const SbBleu *s, int nrefs, int width, char *buf, size_t cap);
void sb_chrf_format(const SbChrfOpts *o, double score, int nrefs, int width, char *buf, size_t cap);

/* Python's str.lower() of UTF-8 text, into a new string (for tests and tokenisers). */
char *sb_lower(const char *s);

#endif
