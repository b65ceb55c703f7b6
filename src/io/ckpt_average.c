/* ckpt_average.c — the element-wise mean of model files of one architecture (checkpoint
 * averaging): each file read and checked against the first, summed in double, rounded once. */
#include "s2s/checkpoint.h"
#include "s2s/file.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void shape_text(const CkptTensor *t, char *buf, size_t n) {
    size_t used = 0;
    buf[0] = '\0';
    for (int d = 0; d < t->ndim && used < n; d++)
        used += (size_t)snprintf(buf + used, n - used, "%s%d", d ? " x " : "", t->shape[d]);
}

/* One line naming the first way b differs from a (the model section of the config, the
 * vocabularies, the subword model, the tensor table), or S2S_OK. */
static S2sStatus same_model(const Checkpoint *a, const char *pa, const Checkpoint *b, const char *pb, S2sError *err) {
    cJSON *ca = cJSON_Parse(a->config_json), *cb = cJSON_Parse(b->config_json);
    const cJSON *ma = cJSON_GetObjectItemCaseSensitive(ca, "model"), *mb = cJSON_GetObjectItemCaseSensitive(cb, "model");
    const char *key = NULL;
    const cJSON *x, *type_a = cJSON_GetObjectItemCaseSensitive(ma, "type"), *type_b = cJSON_GetObjectItemCaseSensitive(mb, "type");
    const char *kind_a = cJSON_IsString(type_a) ? type_a->valuestring : "rnn",
               *kind_b = cJSON_IsString(type_b) ? type_b->valuestring : "rnn";
    if (strcmp(kind_a, kind_b) != 0) key = "type"; /* before the keys one type lacks; files older than the key are rnn */
    if (!key) cJSON_ArrayForEach(x, ma) {
        const cJSON *y = cJSON_GetObjectItemCaseSensitive(mb, x->string);
        if (!y || !cJSON_Compare(x, y, true)) {
            key = x->string;
            break;
        }
    }
    char what[160] = "";
    if (key) snprintf(what, sizeof what, "model.%s", key);
    else if (!ma || !mb || cJSON_GetArraySize(ma) != cJSON_GetArraySize(mb)) snprintf(what, sizeof what, "the model section");
    cJSON_Delete(ca);
    cJSON_Delete(cb);
    if (what[0])
        return s2s_fail(err, S2S_ERR_DATA, "%s: another architecture than %s (%s differs in their configs)", pb, pa, what);
    const char *side[2] = {"source", "target"};
    char *const *ta[2] = {a->src_tokens, a->trg_tokens}, *const *tb[2] = {b->src_tokens, b->trg_tokens};
    int na[2] = {a->n_src, a->n_trg}, nb[2] = {b->n_src, b->n_trg};
    for (int s = 0; s < 2; s++) {
        for (int i = 0; i < na[s] && i < nb[s]; i++)
            if (strcmp(ta[s][i], tb[s][i]) != 0)
                return s2s_fail(err, S2S_ERR_DATA, "%s: another %s vocabulary than %s (entry %d is \"%.40s\", there \"%.40s\")",
                                pb, side[s], pa, i, tb[s][i], ta[s][i]);
        if (na[s] != nb[s])
            return s2s_fail(err, S2S_ERR_DATA, "%s: a %s vocabulary of %d entries, %s has %d", pb, side[s], nb[s], pa, na[s]);
    }
    if ((a->subword_len != b->subword_len || (a->subword && memcmp(a->subword, b->subword, a->subword_len))) ||
        (a->subword_trg_len != b->subword_trg_len ||
         (a->subword_trg && memcmp(a->subword_trg, b->subword_trg, a->subword_trg_len))))
        return s2s_fail(err, S2S_ERR_DATA, "%s: another subword model than %s", pb, pa);
    for (int i = 0; i < a->n_tensors || i < b->n_tensors; i++) {
        if (i >= a->n_tensors || i >= b->n_tensors)
            return s2s_fail(err, S2S_ERR_DATA, "%s: %d tensors, %s has %d", pb, b->n_tensors, pa, a->n_tensors);
        const CkptTensor *x1 = &a->tensors[i], *y1 = &b->tensors[i];
        bool same = !strcmp(x1->name, y1->name) && x1->ndim == y1->ndim;
        for (int d = 0; same && d < x1->ndim; d++) same = x1->shape[d] == y1->shape[d];
        if (!same) {
            char sa[64], sb[64];
            shape_text(x1, sa, sizeof sa);
            shape_text(y1, sb, sizeof sb);
            return s2s_fail(err, S2S_ERR_DATA, "%s: tensor %d is \"%s\" (%s), in %s \"%s\" (%s)", pb, i, y1->name, sb, pa,
                            x1->name, sa);
        }
    }
    return S2S_OK;
}

S2sStatus ckpt_average(const char *const *paths, int n, const char *out, S2sError *err) {
    S2S_ASSERT(n >= 1);
    FileRole *ins = s2s_xcalloc((size_t)n, sizeof *ins);
    for (int i = 0; i < n; i++) ins[i] = (FileRole){"a model", paths[i]};
    S2sStatus st = file_distinct(ins, n, &(FileRole){"the output", out}, 1, err);
    free(ins);
    if (st) return st;
    Checkpoint first;
    if ((st = ckpt_load(&first, paths[0], err))) return st;
    ParamStore ps;
    params_init(&ps);
    for (int i = 0; i < first.n_tensors; i++) params_add(&ps, first.tensors[i].name, first.tensors[i].ndim, first.tensors[i].shape);
    double *sum = NULL;
    if ((st = params_alloc(&ps, err)) || (st = ckpt_restore(&first, &ps, false, paths[0], err))) goto out;
    sum = calloc(ps.total ? ps.total : 1, sizeof *sum);
    if (!sum) {
        st = s2s_fail(err, S2S_ERR_NOMEM, "%s: no memory for the sum of %zu weights", out, ps.total);
        goto out;
    }
    for (int k = 0; k < n && !st; k++) {
        Checkpoint c;
        if (k == 0) {
            for (size_t i = 0; i < ps.total; i++) sum[i] = ps.data[i];
            continue;
        }
        if ((st = ckpt_load(&c, paths[k], err))) break;
        if (!(st = same_model(&first, paths[0], &c, paths[k], err)) && !(st = ckpt_restore(&c, &ps, false, paths[k], err)))
            for (size_t i = 0; i < ps.total; i++) sum[i] += ps.data[i];
        ckpt_free(&c);
    }
    if (st) goto out;
    for (size_t i = 0; i < ps.total; i++) ps.data[i] = (float)(sum[i] / n);
    CkptSave s = {first.config_json, (const char *const *)first.src_tokens, first.n_src,
                  (const char *const *)first.trg_tokens, first.n_trg, &ps, false, NULL, first.subword, first.subword_len,
                  first.subword_trg, first.subword_trg_len, false};
    st = ckpt_save(out, &s, err);
out:
    free(sum);
    params_free(&ps);
    ckpt_free(&first);
    return st;
}
