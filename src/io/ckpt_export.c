/* ckpt_export.c — a model file as safetensors: every weight under its PyTorch name, and in the
 * metadata what ./import and other readers need to use it (config, vocabularies, subword
 * models). */
#include "s2s/checkpoint.h"
#include "s2s/file.h"
#include "s2s/safetensors.h"

#include <cjson/cJSON.h>
#include <stdlib.h>

static char *tokens_json(char *const *tokens, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateString(tokens[i]));
    char *txt = cJSON_PrintUnformatted(a);
    cJSON_Delete(a);
    return txt;
}

S2sStatus ckpt_export(const char *in, const char *out, bool bf16, S2sError *err) {
    S2sStatus st = file_distinct(&(FileRole){"the model", in}, 1, &(FileRole){"the output", out}, 1, err);
    if (st) return st;
    Checkpoint c;
    if ((st = ckpt_load(&c, in, err))) return st;
    SafeSaveTensor *t = s2s_xcalloc((size_t)(c.n_tensors ? c.n_tensors : 1), sizeof *t);
    for (int i = 0; i < c.n_tensors; i++)
        t[i] = (SafeSaveTensor){c.tensors[i].name, c.tensors[i].ndim, c.tensors[i].shape, c.tensors[i].data};
    const char *keys[8], *values[8];
    char *owned[4] = {0};
    int n = 0;
    keys[n] = "format", values[n++] = "pt"; /* what Hugging Face's loaders look for */
    keys[n] = CKPT_META_VERSION, values[n++] = "1";
    keys[n] = CKPT_META_CONFIG, values[n++] = c.config_json;
    keys[n] = CKPT_META_SRC_VOCAB, values[n++] = owned[0] = tokens_json(c.src_tokens, c.n_src);
    keys[n] = CKPT_META_TRG_VOCAB, values[n++] = owned[1] = tokens_json(c.trg_tokens, c.n_trg);
    if (c.subword) keys[n] = CKPT_META_SUBWORD, values[n++] = owned[2] = safetensors_b64_encode(c.subword, c.subword_len);
    if (c.subword_trg)
        keys[n] = CKPT_META_SUBWORD_TRG, values[n++] = owned[3] = safetensors_b64_encode(c.subword_trg, c.subword_trg_len);
    st = safetensors_save(out, t, c.n_tensors, keys, values, n, bf16 ? SAFETENSORS_BF16 : SAFETENSORS_F32, err);
    for (int i = 0; i < 4; i++) free(owned[i]);
    free(t);
    ckpt_free(&c);
    return st;
}
