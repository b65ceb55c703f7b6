/* linear.c — linear and embedding layers. */
#include "s2s/nn.h"

#include <stdio.h>

static void pname(char *buf, const char *prefix, const char *leaf) {
    snprintf(buf, PARAM_NAME_MAX, "%s.%s", prefix, leaf);
}

void linear_init(Linear *l, ParamStore *ps, const char *prefix, int in, int out, bool bias) {
    char name[PARAM_NAME_MAX];
    pname(name, prefix, "weight");
    l->w = params_add(ps, name, 2, (int[]){out, in});
    l->b = NULL;
    if (bias) {
        pname(name, prefix, "bias");
        l->b = params_add(ps, name, 1, (int[]){out});
    }
}

Tensor *linear_forward(Tape *t, const Linear *l, Tensor *x) { return op_linear(t, x, l->w, l->b); }

void embedding_init(Embedding *e, ParamStore *ps, const char *prefix, int vocab, int dim) {
    char name[PARAM_NAME_MAX];
    pname(name, prefix, "weight");
    e->w = params_add(ps, name, 2, (int[]){vocab, dim});
}

Tensor *embedding_forward(Tape *t, const Embedding *e, const int32_t *ids, int n) {
    return op_gather_rows(t, e->w, ids, n);
}
