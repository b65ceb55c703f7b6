/* rnn.c — GRU/LSTM layers over a padded time-major batch. The input projection of all
 * steps is one GEMM before the loop; each step then runs one fused cell op whose output is
 * a view into the layer's (S, B, H) output, so the sequence is built without copies. */
#include "s2s/nn.h"
#include "s2s/common.h"

#include <stdio.h>
#include <string.h>

void rnn_init(Rnn *r, ParamStore *ps, const char *prefix, RnnCell cell, int input, int hidden,
              int layers, bool bidirectional, bool cell_names) {
    S2S_ASSERT(layers >= 1 && layers <= RNN_MAX_LAYERS);
    S2S_ASSERT(!cell_names || (layers == 1 && !bidirectional));
    memset(r, 0, sizeof *r);
    r->cell = cell;
    r->input = input;
    r->hidden = hidden;
    r->layers = layers;
    r->dirs = bidirectional ? 2 : 1;
    int G = (cell == RNN_GRU ? 3 : 4) * hidden;
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

typedef struct DirResult {
    Tensor *out;   /* (S, B, H) */
    Tensor *cells; /* (S, B, H), LSTM only */
} DirResult;

/* One direction of one layer. active (S, B) row masks or NULL. */
static DirResult run_direction(Tape *t, const Rnn *r, const RnnWeights *w, Tensor *x, int S, int B,
                               const uint8_t *active, bool reverse, Tensor *h0, Tensor *c0) {
    int H = r->hidden, G = (r->cell == RNN_GRU ? 3 : 4) * H;
    Tensor *xg = op_linear(t, x, w->w_ih, w->b_ih); /* (S·B, G), one GEMM for all steps */
    DirResult res = {tape_zeros(t, 3, (int[]){S, B, H}), NULL};
    if (r->cell == RNN_LSTM) res.cells = tape_zeros(t, 3, (int[]){S, B, H});
    Tensor *h = h0 ? h0 : tape_zeros(t, 2, (int[]){B, H});
    Tensor *c = NULL;
    if (r->cell == RNN_LSTM) c = c0 ? c0 : tape_zeros(t, 2, (int[]){B, H});
    for (int k = 0; k < S; k++) {
        int s = reverse ? S - 1 - k : k;
        Tensor *xs = tape_view(t, xg, (size_t)s * B * G, 2, (int[]){B, G});
        Tensor *hs = tape_view(t, res.out, (size_t)s * B * H, 2, (int[]){B, H});
        const uint8_t *act = active ? active + (size_t)s * B : NULL;
        if (r->cell == RNN_GRU) {
            h = op_gru_cell(t, xs, h, w->w_hh, w->b_hh, act, hs);
        } else {
            Tensor *cs = tape_view(t, res.cells, (size_t)s * B * H, 2, (int[]){B, H});
            h = op_lstm_cell(t, xs, h, c, w->w_hh, w->b_hh, act, hs, cs, &c);
        }
    }
    return res;
}

RnnOutput rnn_forward(Tape *t, const Rnn *r, Tensor *x, const int *lens, Tensor *const *h0,
                      Tensor *const *c0) {
    S2S_ASSERT(x->ndim == 3 && x->shape[2] == r->input);
    int S = x->shape[0], B = x->shape[1], H = r->hidden;
    RnnOutput o;
    memset(&o, 0, sizeof o);
    uint8_t *active = NULL;
    int32_t *last = arena_alloc(&t->arena, (size_t)B * sizeof *last); /* row of each last step */
    for (int b = 0; b < B; b++) {
        int len = lens ? lens[b] : S;
        S2S_ASSERT(len >= 1 && len <= S);
        last[b] = (len - 1) * B + b;
    }
    if (lens) {
        active = arena_alloc(&t->arena, (size_t)S * B);
        for (int s = 0; s < S; s++)
            for (int b = 0; b < B; b++) active[(size_t)s * B + b] = s < lens[b];
    }
    Tensor *in = x;
    for (int l = 0; l < r->layers; l++) {
        DirResult d[2];
        for (int dir = 0; dir < r->dirs; dir++) {
            int k = l * r->dirs + dir;
            d[dir] = run_direction(t, r, &r->w[l][dir], in, S, B, active, dir == 1,
                                   h0 ? h0[k] : NULL, c0 ? c0[k] : NULL);
            Tensor *flat = tape_reshape2(t, d[dir].out, S * B, H);
            if (dir == 0) {
                o.h_last[l][0] = op_gather_rows(t, flat, last, B);
            } else { /* the backward direction ends at step 0 */
                o.h_last[l][1] = tape_view(t, d[dir].out, 0, 2, (int[]){B, H});
            }
            if (r->cell == RNN_LSTM) {
                Tensor *cflat = tape_reshape2(t, d[dir].cells, S * B, H);
                o.c_last[l][dir] = dir == 0 ? op_gather_rows(t, cflat, last, B)
                                            : tape_view(t, d[dir].cells, 0, 2, (int[]){B, H});
            }
        }
        in = r->dirs == 2 ? op_concat(t, d[0].out, d[1].out) : d[0].out;
    }
    o.out = in;
    return o;
}
