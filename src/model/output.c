/* output.c — the output layer and loss every family ends in: the rows of real targets, the
 * label smoothing of a training tape, the loss in chunks (train.loss_chunk), and the argmax
 * of decoding's logits (model_argmax_rows, and a step's pick through op_linear_argmax). */
#include "model_internal.h"
#include "s2s/par.h"

#include <math.h>
#include <string.h>

int32_t *model_target_rows(Tape *t, const Batch *b, int *n_tokens) {
    int T1 = b->T - 1, B = b->B;
    const int32_t *targets = b->trg + B; /* time-major: row i+1 */
    int32_t *rows = arena_alloc(&t->arena, (size_t)T1 * B * sizeof *rows);
    *n_tokens = 0;
    for (int k = 0; k < T1 * B; k++)
        if (targets[k] != TOK_PAD) rows[(*n_tokens)++] = k;
    return rows;
}

float model_smoothing(const Tape *t, const ModelLoss *loss) { return t->grad_enabled && loss ? loss->label_smoothing : 0.0f; }

void model_loss(Tape *t, Seq2Seq *m, const Batch *b, Tensor *x, ModelOutput *o, const ModelLoss *loss) {
    const int32_t *targets = b->trg + b->B;
    int32_t *tg = arena_alloc(&t->arena, (size_t)(o->n_tokens ? o->n_tokens : 1) * sizeof *tg);
    for (int k = 0; k < o->n_tokens; k++) tg[k] = targets[o->rows[k]];
    o->targets = tg;
    float eps = model_smoothing(t, loss);
    if (loss && loss->chunk > 0 && t->grad_enabled) { /* training: never the whole logits (o.logits NULL) */
        o->loss = op_linear_xent(t, x, m->out.w, m->out.b, tg, TOK_PAD, loss->chunk, eps, &o->nll);
        return;
    }
    o->logits = linear_forward(t, &m->out, x);
    o->loss = op_cross_entropy_consume(t, o->logits, o->targets, TOK_PAD, eps, &o->nll); /* nothing reads logits after backward */
}

/* A decoding step's pick from the output layer over x (N, D): the highest-scoring token of
 * each row by model_argmax_rows's rule. */
void model_pick(Tape *t, Seq2Seq *m, Tensor *x, int N, int32_t *best) {
    int V = m->trg_vocab;
    uint8_t *allowed = arena_alloc(&t->arena, (size_t)V);
    memset(allowed, 1, (size_t)V);
    allowed[TOK_PAD] = allowed[TOK_SOS] = 0; /* not outputs (model_argmax_rows) */
    if (tape_int8(t)) { /* its own logits are the ones to pick from */
        if (!op_linear_int8_argmax(t, x, m->out.w, m->out.b, allowed, best))
            model_argmax_rows(linear_forward(t, &m->out, x), N, best);
        return;
    }
    op_linear_argmax(t, x, m->out.w, m->out.b, allowed, best);
}

typedef struct ArgmaxJob {
    const float *logits;
    int V;
    int32_t *best;
} ArgmaxJob;

/* Candidates <unk>, then <eos> onwards (never <pad> or <sos>: they are not outputs, as in
 * beam search). The maximum first, in 16 lanes of selects that vectorise (a NaN never wins),
 * then the first candidate holding it: the same pick as one scan keeping the first of equals. */
static void argmax_range(void *ctx, size_t r0, size_t r1) {
    const ArgmaxJob *j = ctx;
    int V = j->V;
    for (size_t r = r0; r < r1; r++) {
        const float *row = j->logits + r * (size_t)V;
        float lane[16], mx = row[TOK_UNK];
        for (int q = 0; q < 16; q++) lane[q] = -INFINITY;
        int v = TOK_EOS;
        for (; v + 16 <= V; v += 16)
            for (int q = 0; q < 16; q++) lane[q] = row[v + q] > lane[q] ? row[v + q] : lane[q];
        for (; v < V; v++) mx = row[v] > mx ? row[v] : mx;
        for (int q = 0; q < 16; q++) mx = lane[q] > mx ? lane[q] : mx;
        int best = TOK_UNK;
        if (!(row[TOK_UNK] >= mx)) /* <unk> holds it unless something beat it (or it is NaN) */
            for (v = TOK_EOS; v < V; v++)
                if (row[v] == mx) {
                    best = v;
                    break;
                }
        j->best[r] = best;
    }
}

void model_argmax_rows(const Tensor *logits, int rows, int32_t *best) {
    ArgmaxJob j = {tensor_read(logits), tensor_cols(logits), best};
    par_for((size_t)rows, (size_t)j.V, argmax_range, &j);
}
