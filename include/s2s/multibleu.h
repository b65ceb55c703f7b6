/* bleu.h — corpus BLEU-4 exactly as Moses' multi-bleu.perl computes it: clipped n-gram
 * matches summed over the corpus, the reference length (one reference per sentence), the
 * brevity penalty exp(1 − r/c) when c < r, and BLEU 0 when some n-gram order has no match.
 *
 * A Bleu accumulates statistics sentence by sentence; it owns a token index (interning
 * words so n-grams compare as integers) and borrows nothing. */
#ifndef S2S_BLEU_H
#define S2S_BLEU_H

#include "s2s/data.h"

typedef struct BleuGram {
    int32_t w[4];            /* an n-gram's word ids, −1 past its order */
} BleuGram;

typedef struct Bleu {
    long correct[4], total[4];
    long hyp_len, ref_len;
    Vocab words;             /* interned tokens */
    int32_t *buf;            /* scratch: the pair's word ids */
    BleuGram *grams;         /* scratch: the pair's n-grams, sorted */
    int cap;
} Bleu;

typedef struct BleuScore {
    double bleu;             /* 0..100 */
    double precision[4];     /* 0..100 */
    double bp, ratio;
    long hyp_len, ref_len;
} BleuScore;

void bleu_init(Bleu *b);
void bleu_free(Bleu *b);
/* One sentence pair as whitespace-separated text. */
void bleu_add_text(Bleu *b, const char *hyp, const char *ref);
/* One pair as token arrays. */
void bleu_add_tokens(Bleu *b, const char *const *hyp, int nh, const char *const *ref, int nr);
BleuScore bleu_score(const Bleu *b);
/* multi-bleu.perl's line: "BLEU = 35.12, 70.1/45.0/31.2/21.9 (BP=1.000, ratio=1.004, hyp_len=…, ref_len=…)" */
void bleu_format(const BleuScore *s, char *buf, size_t n);

#endif
