/* onnx_export.c — a model file as a folder of ONNX graphs and what a runtime needs besides
 * them (onnx.h): made in a temporary folder beside the destination and renamed into place
 * only when every file is written, so the destination is the whole export or nothing. */
#define _GNU_SOURCE /* renameat2, mkdtemp */
#include "s2s/file.h"
#include "onnx_internal.h"
#include "s2s/checkpoint.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static cJSON *tokens(char *const *t, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateString(t[i]));
    return a;
}

/* How the task reads a line of text and writes the output's tokens back. */
static const char *text_kind(const Config *c) {
    if (c->task.type == TASK_REVERSE) return "characters";
    switch (c->task.subword) {
    case SUBWORD_NONE: return "words";
    case SUBWORD_BPE: return "bpe";
    case SUBWORD_SENTENCEPIECE: return "sentencepiece";
    }
    return "words";
}

static const char *subword_file(const Config *c, bool trg) {
    if (c->task.subword == SUBWORD_SENTENCEPIECE) return trg ? "sentencepiece_trg.model" : "sentencepiece.model";
    return trg ? "bpe_trg.txt" : "bpe.txt";
}

static char *metadata(const OnnxSource *s, cJSON *tensors) {
    const Checkpoint *c = s->ckpt;
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "format", "s2s-onnx");
    cJSON_AddNumberToObject(m, "format_version", ONNX_EXPORT_VERSION);
    cJSON_AddStringToObject(m, "s2s_version", S2S_VERSION);
    cJSON_AddNumberToObject(m, "opset", ONNX_OPSET);
    cJSON_AddStringToObject(m, "model_type", MODEL_TYPE_NAMES[s->cfg.model.type]);
    cJSON_AddStringToObject(m, "precision", s->int8 ? "int8" : "fp32");
    cJSON *text = cJSON_AddObjectToObject(m, "text");
    cJSON_AddStringToObject(text, "kind", text_kind(&s->cfg));
    cJSON_AddBoolToObject(text, "source_markers", s->cfg.task.type == TASK_REVERSE && s->cfg.task.source_markers);
    if (c->subword) cJSON_AddStringToObject(text, "subword", subword_file(&s->cfg, false));
    if (c->subword_trg) cJSON_AddStringToObject(text, "subword_trg", subword_file(&s->cfg, true));
    cJSON *sp = cJSON_AddObjectToObject(m, "special");
    cJSON_AddNumberToObject(sp, "pad", 0), cJSON_AddNumberToObject(sp, "unk", 1);
    cJSON_AddNumberToObject(sp, "sos", 2), cJSON_AddNumberToObject(sp, "eos", 3);
    cJSON *dec = cJSON_AddObjectToObject(m, "decoding");
    cJSON_AddNumberToObject(dec, "max_decode_len", s->cfg.train.max_decode_len);
    cJSON_AddStringToObject(dec, "max_len_rule", "max_decode_len when above 0, else 2 * source tokens + 10");
    cJSON_AddNumberToObject(dec, "alpha", 1.0);
    cJSON_AddItemToObject(m, "encoder", cJSON_CreateString("encoder.onnx"));
    cJSON_AddItemToObject(m, "decoder", cJSON_CreateString("decoder.onnx"));
    cJSON_AddItemToObject(m, "tensors", tensors);
    cJSON_AddItemToObject(m, "config", cJSON_Parse(c->config_json));
    cJSON_AddItemToObject(m, "src_vocab", tokens(c->src_tokens, c->n_src));
    cJSON_AddItemToObject(m, "trg_vocab", tokens(c->trg_tokens, c->n_trg));
    char *txt = cJSON_Print(m);
    cJSON_Delete(m);
    return txt;
}

static S2sStatus write_in(const char *dir, const char *name, const void *d, size_t n, S2sError *err) {
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s/%s", dir, name) >= (int)sizeof p)
        return s2s_fail(err, S2S_ERR_IO, "%s: path too long", dir);
    return file_write_atomic(p, d, n, err);
}

static void remove_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char p[PATH_MAX];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
                snprintf(p, sizeof p, "%s/%s", dir, e->d_name) < (int)sizeof p)
                unlink(p);
        closedir(d);
    }
    rmdir(dir);
}

/* the graphs and s2s.json, into the folder dir */
static S2sStatus write_all(OnnxSource *s, const char *dir, S2sError *err) {
    OnnxGraph *enc = onnx_graph_new("encoder"), *dec = onnx_graph_new("decoder");
    cJSON *tensors = cJSON_CreateObject();
    S2sStatus st = s->cfg.model.type == MODEL_RNN ? onnx_rnn_graphs(s, enc, dec, tensors, err)
                                                  : onnx_tf_graphs(s, enc, dec, tensors, err);
    char doc[160];
    snprintf(doc, sizeof doc, "s2s %s model, exported by s2s %s: read s2s.json beside it", MODEL_TYPE_NAMES[s->cfg.model.type],
             S2S_VERSION);
    unsigned char *buf;
    size_t len;
    for (int k = 0; k < 2 && !st; k++)
        if (!(st = onnx_serialize(k ? dec : enc, doc, &buf, &len, err))) {
            st = write_in(dir, k ? "decoder.onnx" : "encoder.onnx", buf, len, err);
            free(buf);
        }
    onnx_graph_free(enc), onnx_graph_free(dec);
    if (st) {
        cJSON_Delete(tensors);
        return st;
    }
    char *meta = metadata(s, tensors);
    st = write_in(dir, "s2s.json", meta, strlen(meta), err);
    free(meta);
    if (!st && s->ckpt->subword)
        st = write_in(dir, subword_file(&s->cfg, false), s->ckpt->subword, s->ckpt->subword_len, err);
    if (!st && s->ckpt->subword_trg)
        st = write_in(dir, subword_file(&s->cfg, true), s->ckpt->subword_trg, s->ckpt->subword_trg_len, err);
    return st;
}

S2sStatus onnx_export(const char *in, const char *out, bool int8, S2sError *err) {
    S2sStatus st = file_distinct(&(FileRole){"the model", in}, 1, &(FileRole){"the output", out}, 1, err);
    if (st) return st;
    if (file_exists(out))
        return s2s_fail(err, S2S_ERR_CONFIG, "%s: exists; the ONNX export makes a new folder (remove it, or name another)",
                        out);
    Checkpoint c;
    if ((st = ckpt_load(&c, in, err))) return st;
    OnnxSource s = {.ckpt = &c, .n_src = c.n_src, .n_trg = c.n_trg, .origin = in, .int8 = int8};
    config_defaults(&s.cfg);
    char tmp[PATH_MAX];
    if (!(st = config_parse(&s.cfg, c.config_json, in, err))) {
        if (snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", out) >= (int)sizeof tmp)
            st = s2s_fail(err, S2S_ERR_CONFIG, "%s: path too long", out);
        else if (!mkdtemp(tmp))
            st = s2s_fail(err, S2S_ERR_IO, "%s: cannot make a folder beside it: %s", out, strerror(errno));
        else {
            chmod(tmp, 0755); /* mkdtemp's 0700 is for the making only */
            st = write_all(&s, tmp, err);
            if (!st && renameat2(AT_FDCWD, tmp, AT_FDCWD, out, RENAME_NOREPLACE))
                st = s2s_fail(err, errno == EEXIST ? S2S_ERR_CONFIG : S2S_ERR_IO, "%s: cannot put the export there: %s",
                              out, strerror(errno));
            if (st) remove_tree(tmp);
        }
    }
    ckpt_free(&c);
    return st;
}
