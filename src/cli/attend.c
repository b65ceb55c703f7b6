/* attend — an attention calculator for the worked exercises.
 *   attend FILE|-  [--json] [--heatmap FILE.png] [--scaled|--unscaled] [--causal]
 *   attend --q JSON --k JSON --v JSON [...]
 * Input keys: Q, K, V (or X for self-attention), optional W_q, W_k, W_v (X·W), heads (a
 * number to split into, or a list of heads, each with its own Q, K, V or X and W_q, W_k, W_v,
 * or taking the top level's), W_o, scaled (default true), causal.
 *   exit 0 · 1 IO · 2 usage, bad JSON or shapes */
#include "s2s/args.h"
#include "s2s/attn_calc.h"
#include "s2s/file.h"
#include "s2s/viz.h"
#include "wait_policy.h"

#include <getopt.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: attend FILE|- [--json] [--heatmap FILE.png] [--scaled|--unscaled] [--causal]\n"
               "       attend --q JSON --k JSON --v JSON [options]\n"
               "\n"
               "Prints the scores, the weights (row-wise softmax) and the output of attention, as tables.\n"
               "Input: a JSON object with Q, K, V (or X: Q = K = V = X), optional W_q, W_k, W_v (applied as X W),\n"
               "\"heads\": N (split the columns into N heads) or a list of heads, each an object with its own Q, K, V\n"
               "(or X) and W_q, W_k, W_v, any of which it may leave to the top level's; W_o,\n"
               "\"scaled\" (divide by sqrt(d_k), default true) and \"causal\" (mask the future).\n"
               "Example: attend --q '[[1,2,1]]' --k '[[1,2,3],[1,2,1],[0,1,-1]]' --v '[[1,2,3],[1,2,1],[0,1,-1]]' --unscaled\n");
}

static void print_table(const char *title, const Tensor *t) {
    printf("%s (%d x %d)\n", title, t->shape[0], t->shape[1]);
    for (int r = 0; r < t->shape[0]; r++) {
        printf("  ");
        for (int c = 0; c < t->shape[1]; c++) printf(" %12.8f", (double)tensor_item(t, (size_t)r * t->shape[1] + c));
        printf("\n");
    }
}

/* The result on stdout: each head's scores, weights and output as tables (or JSON). */
static void print_result(const AttnCalcInput *in, const AttnCalcResult *r, bool as_json) {
    if (as_json) {
        char *s = attn_calc_to_json(r);
        printf("%s\n", s);
        free(s);
    } else {
        for (int h = 0; h < r->n_heads; h++) {
            if (r->n_heads > 1) printf("== head %d\n", h + 1);
            print_table(in->scaled ? "scores = Q K^T / sqrt(d_k)" : "scores = Q K^T", r->scores[h]);
            print_table(in->causal ? "weights = softmax(scores + causal mask)" : "weights = softmax(scores)", r->weights[h]);
            print_table("output = weights V", r->outputs[h]);
        }
        if (r->n_heads > 1 || in->w_o) print_table(in->w_o ? "output = [heads] W_o" : "output = [heads]", r->output);
    }
}

/* The first head's weights as a heatmap PNG, rows q1.. and columns k1... */
static S2sStatus write_heatmap(const char *path, const Tensor *w, S2sError *err) {
    Font *font = font_open(NULL);
    char **rl = s2s_xmalloc((size_t)w->shape[0] * sizeof *rl), **cl = s2s_xmalloc((size_t)w->shape[1] * sizeof *cl);
    for (int i = 0; i < w->shape[0]; i++) {
        rl[i] = s2s_xmalloc(16);
        snprintf(rl[i], 16, "q%d", i + 1);
    }
    for (int i = 0; i < w->shape[1]; i++) {
        cl[i] = s2s_xmalloc(16);
        snprintf(cl[i], 16, "k%d", i + 1);
    }
    Heatmap hm = {tensor_read(w), w->shape[0], w->shape[1], (const char *const *)rl, (const char *const *)cl, "attention weights"};
    S2sStatus st = heatmap_write_png(path, &hm, font, err);
    for (int i = 0; i < w->shape[0]; i++) free(rl[i]);
    for (int i = 0; i < w->shape[1]; i++) free(cl[i]);
    free(rl);
    free(cl);
    font_close(font);
    return st;
}

int main(int argc, char **argv) {
    const char *file = NULL, *heatmap = NULL, *qkv[3] = {NULL, NULL, NULL};
    bool as_json = false;
    int scaled_flag = -1, causal_flag = 0;
    enum { O_JSON = ARGS_OWN, O_SCALED, O_UNSCALED, O_CAUSAL, O_HEATMAP, O_Q, O_K, O_V };
    static const struct option LONG[] = {
        {"help", no_argument, NULL, 'h'},        {"json", no_argument, NULL, O_JSON},
        {"scaled", no_argument, NULL, O_SCALED}, {"unscaled", no_argument, NULL, O_UNSCALED},
        {"causal", no_argument, NULL, O_CAUSAL}, {"heatmap", required_argument, NULL, O_HEATMAP},
        {"q", required_argument, NULL, O_Q},     {"k", required_argument, NULL, O_K},
        {"v", required_argument, NULL, O_V},     {"version", no_argument, NULL, ARGS_VERSION}, {NULL, 0, NULL, 0}};
    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, ":h", LONG, NULL)) != -1) {
        switch (opt) {
        case O_JSON: as_json = true; break;
        case O_SCALED: scaled_flag = 1; break;
        case O_UNSCALED: scaled_flag = 0; break;
        case O_CAUSAL: causal_flag = 1; break;
        case O_HEATMAP: heatmap = optarg; break;
        case O_Q: qkv[0] = optarg; break;
        case O_K: qkv[1] = optarg; break;
        case O_V: qkv[2] = optarg; break;
        default: return args_common(opt, "attend", usage, argv, optind, optopt);
        }
    }
    if (optind < argc) file = argv[optind++];
    if (optind < argc) {
        fprintf(stderr, "attend: %s: unexpected argument (see attend --help)\n", argv[optind]);
        return 2;
    }
    char *text = NULL;
    if (file && (qkv[0] || qkv[1] || qkv[2])) {
        fprintf(stderr, "attend: give a file or --q, --k and --v, not both\n");
        return 2;
    }
    S2sError err0;
    if (file_distinct(&(FileRole){"FILE", file}, 1, &(FileRole){"--heatmap", heatmap}, 1, &err0)) {
        fprintf(stderr, "attend: %s\n", err0.msg);
        return 2;
    }
    if (file) {
        S2sError err;
        if (file_read_all(file, (size_t)64 << 20, &text, NULL, &err)) { /* 64 MiB: far past 10000 x 10000 */
            fprintf(stderr, "attend: %s\n", err.msg);
            return 1;
        }
    } else if (qkv[0] && qkv[1] && qkv[2]) {
        size_t n = strlen(qkv[0]) + strlen(qkv[1]) + strlen(qkv[2]) + 32;
        text = s2s_xmalloc(n);
        snprintf(text, n, "{\"Q\":%s,\"K\":%s,\"V\":%s}", qkv[0], qkv[1], qkv[2]);
    } else {
        usage(stderr);
        return 2;
    }
    const char *where = file ? file : "arguments";
    AttnCalcInput in;
    S2sError err;
    int rc = 0;
    S2sStatus st = attn_calc_parse(text, &in, &err);
    free(text);
    if (st) {
        fprintf(stderr, "attend: %s: %s\n", where, err.msg);
        return 2;
    }
    if (scaled_flag >= 0) in.scaled = scaled_flag;
    if (causal_flag) in.causal = true;
    AttnCalcResult r;
    if (attn_calc(&in, &r, &err)) {
        fprintf(stderr, "attend: %s: %s\n", where, err.msg);
        rc = 2;
        goto out;
    }
    print_result(&in, &r, as_json);
    if (heatmap && write_heatmap(heatmap, r.weights[0], &err)) {
        fprintf(stderr, "attend: %s\n", err.msg);
        rc = 1;
    }
    attn_calc_free(&r);
out:
    attn_calc_input_free(&in);
    return rc;
}
