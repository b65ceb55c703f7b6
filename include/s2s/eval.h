/* eval.h — evaluation of a model on a dataset: loss and perplexity, teacher-forced token
 * accuracy, and greedy decoding with exact-match and per-token accuracy.
 *
 * Borrows the model, the dataset and a tape (reset between batches). Hypotheses, when asked
 * for, are returned in dataset order in an IdSeqs the caller frees. */
#ifndef S2S_EVAL_H
#define S2S_EVAL_H

#include "s2s/dist.h"
#include "s2s/model.h"

#include <stdatomic.h>

typedef struct EvalResult {
    int n;                 /* examples */
    long tokens;           /* non-pad target tokens (teacher-forced, incl. <eos>) */
    double loss;           /* mean cross-entropy per target token */
    double ppl;            /* exp(loss) */
    double tf_token_acc;   /* teacher-forced per-token accuracy */
    double exact_match;    /* greedy: output equals the reference */
    double token_acc;      /* greedy: positions equal to the reference / reference length */
    double bleu;           /* greedy, against the reference text (translation), else 0: multi-bleu on
                            * the words, or sacreBLEU (13a, cased) on the raw text of a subword task */
    bool has_bleu;
    bool sacre;            /* bleu is sacreBLEU's, and chrf is there (subword tasks) */
    double chrf;           /* chrF2 of the raw outputs (subword tasks) */
    double attn_entropy;   /* teacher-forced: mean entropy (nats) of the attention rows */
    double align_acc;      /* reversal: how often the arg-max source position is the mirrored one */
    bool has_attn, has_align;
    bool interrupted;      /* o->stop was set: the figures cover only part of the data */
} EvalResult;

typedef struct EvalOptions {
    int batch_size;
    int max_decode_len;    /* 0: 2 × source + 10 */
    bool greedy;           /* also decode, for exact match, token accuracy, BLEU */
    const Vocab *trg;      /* with refs: BLEU against refs[i] (tokenised text, or raw text where trg
                            * has a subword model), words from trg */
    char *const *refs;
    int align_offset;      /* reversal: the first character's source position (1 with
                              markers); −1: no alignment accuracy */
    const atomic_int *stop; /* when set (a signal), stop after the current batch, or NULL */
    const Dist *dist;      /* ranks that share the batches (batch k is rank k mod P's), each
                              calling with the same arguments; NULL or one rank: all here.
                              Not with stop (every rank must reach the gathering) */
} EvalOptions;

typedef struct IdSeqs {
    int n;
    int32_t **ids;
    int *len;
} IdSeqs;

void idseqs_free(IdSeqs *s);

/* Teacher-forced metrics (and attention diagnostics) always; greedy ones (and hyps, when
 * not NULL) when o->greedy. */
void eval_dataset(Tape *t, Seq2Seq *m, const Dataset *d, const EvalOptions *o, EvalResult *r, IdSeqs *hyps);

#endif
