/* rnn.c — GRU/LSTM layers over a padded time-major batch. The input projection of all steps is
 * one GEMM before the loop; each direction of a layer is then one fused op over the whole
 * sequence (op_rnn_seq_consume: its gates, kept for backward, take the projection's memory),
 * whose (S, B, H) output and last states are views, so the sequence is built without copies. */
#include "s2s/nn.h"
#include "s2s/common.h"

#include <stdio.h>
#include <string.h>

void rnn_init(Rnn *r, ParamStore *ps, const char *prefix, CellKind cell, int input, int hidden,
              int layers, bool bidirectional, bool cell_names) {
    S2S_ASSERT(layers >= 1 && layers <= RNN_MAX_LAYERS);
    S2S_ASSERT(!cell_names || (layers == 1 && !bidirectional));
    memset(r, 0, sizeof *r);
    r->cell = cell;
    r->input = input;
    r->hidden = hidden;
    r->layers = layers;
    r->dirs = bidirectional ? 2 : 1;
    int G = (cell == CELL_GRU ? 3 : 4) * hidden;
    for (int l = 0; l < layers; l++) {
        int in = l == 0 ? input : r->dirs * hidden;
        for (int d = 0; d < r->dirs; d++) {
            char sfx[24], name[PARAM_NAME_MAX];
            if (cell_names) sfx[0] = '\0';
            else snprintf(sfx, sizeof sfx, "_l%d%s", l, d ? "_reverse" : "");
            RnnWeights *w = &r->w[l][d];
            snprintf(name, sizeof name, "%s.weight_ih%s", prefix, sfx);
            w->w_ih = params_add(ps, name, 2, (int[]){G, in});
            snprintf(name, sizeof name, "%s.weight_hh%s", prefix, sfx);
            w->w_hh = params_add(ps, name, 2, (int[]){G, hidden});
            snprintf(name, sizeof name, "%s.bias_ih%s", prefix, sfx);
            w->b_ih = params_add(ps, name, 1, (int[]){G});
            snprintf(name, sizeof name, "%s.bias_hh%s", prefix, sfx);
            w->b_hh = params_add(ps, name, 1, (int[]){G});
        }
    }
}

RnnOutput rnn_forward(Tape *t, const Rnn *r, Tensor *x, const int *lens, Tensor *const *h0,
                      Tensor *const *c0) {
    S2S_ASSERT(x->ndim == 3 && x->shape[2] == r->input);
    int S = x->shape[0], B = x->shape[1], H = r->hidden;
    size_t BH = (size_t)B * H;
    RnnOutput o;
    memset(&o, 0, sizeof o);
    uint8_t *active = NULL;
    if (lens) {
        active = arena_alloc(&t->arena, (size_t)S * B);
        for (int b = 0; b < B; b++) S2S_ASSERT(lens[b] >= 1 && lens[b] <= S);
        for (int s = 0; s < S; s++)
            for (int b = 0; b < B; b++) active[(size_t)s * B + b] = s < lens[b];
    }
    Tensor *zeros = NULL;
    Tensor *in = x;
    for (int l = 0; l < r->layers; l++) {
        Tensor *outs[2] = {NULL, NULL};
        for (int dir = 0; dir < r->dirs; dir++) {
            int k = l * r->dirs + dir;
            const RnnWeights *w = &r->w[l][dir];
            Tensor *hi = h0 && h0[k] ? h0[k] : NULL, *ci = c0 && c0[k] ? c0[k] : NULL;
            if ((!hi || (r->cell == CELL_LSTM && !ci)) && !zeros) zeros = tape_zeros(t, 2, (int[]){B, H});
            Tensor *xg = op_linear(t, in, w->w_ih, w->b_ih); /* (S, B, G): one GEMM for all steps */
            Tensor *cells = NULL;
            /* nothing else reads xg: the gates kept for backward take its memory */
            Tensor *y = op_rnn_seq_consume(t, r->cell, xg, hi ? hi : zeros,
                                           r->cell == CELL_LSTM ? (ci ? ci : zeros) : NULL, w->w_hh, w->b_hh, active,
                                           dir == 1, &cells);
            outs[dir] = tape_view(t, y, 0, 3, (int[]){S, B, H});
            o.h_last[l][dir] = tape_view(t, y, (size_t)S * BH, 2, (int[]){B, H});
            if (cells) o.c_last[l][dir] = tape_view(t, cells, (size_t)S * BH, 2, (int[]){B, H});
        }
        in = r->dirs == 2 ? op_concat(t, outs[0], outs[1]) : outs[0];
    }
    o.out = in;
    return o;
}
