/* parallel.c — tokenised parallel text: reading, vocabularies, datasets. */
#include "s2s/file.h"
#include "s2s/subword.h"
#include "s2s/data.h"
#include "s2s/corpus.h"
#include "data_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Split {
    char **src, **trg;
    int n;
} Split;

static void split_free(Split *s) {
    text_free_lines(s->src, s->n);
    text_free_lines(s->trg, s->n);
    memset(s, 0, sizeof *s);
}

static S2sStatus read_split(Split *s, const ConfigTask *t, const char *key, const char *prefix, S2sError *err) {
    char ps[CONFIG_STR + 80], pt[CONFIG_STR + 80];
    memset(s, 0, sizeof *s);
    int ns = 0, nt = 0;
    task_split_paths(t, prefix, ps, pt, sizeof ps);
    S2sStatus st = text_read_lines(ps, &s->src, &ns, err);
    if (st == S2S_ERR_IO) {
        char msg[sizeof err->msg], hint[400];
        snprintf(msg, sizeof msg, "%s", err->msg);
        task_files_hint(t, key, hint, sizeof hint);
        return s2s_fail(err, st, "%s (%s)", msg, hint);
    }
    if (st) return st;
    if ((st = text_read_lines(pt, &s->trg, &nt, err))) {
        text_free_lines(s->src, ns);
        s->src = NULL;
        return st;
    }
    s->n = ns;
    if (ns != nt) {
        st = s2s_fail(err, S2S_ERR_DATA, "%s has %d lines but %s has %d; parallel files must match line by line", ps, ns,
                      pt, nt);
        text_free_lines(s->trg, nt);
        s->trg = NULL;
        split_free(s);
        return st;
    }
    if (ns == 0) {
        split_free(s);
        return s2s_fail(err, S2S_ERR_DATA, "%s: empty file", ps);
    }
    return S2S_OK;
}

static S2sStatus fill(Dataset *d, const Split *s, const TaskData *td, const char *what, const ConfigTask *t,
                      S2sError *err) {
    int32_t *src = NULL, *trg = NULL;
    int cs = 0, ct = 0;
    for (int i = 0; i < s->n; i++) {
        int ns = data_encode_line(&td->src_vocab, s->src[i], false, 0, NULL, &src, &cs);
        int nt = data_encode_line(&td->trg_vocab, s->trg[i], true, 0, NULL, &trg, &ct);
        if (ns == 0) {
            free(src);
            free(trg);
            return s2s_fail(err, S2S_ERR_DATA, "%s/%s.%s:%d: empty source sentence", t->data_dir, what, t->src_lang, i + 1);
        }
        dataset_add(d, src, ns, trg, nt);
    }
    free(src);
    free(trg);
    return S2S_OK;
}

static char **take_lines(Split *s) {
    if (!s->n) return NULL;
    char **r = s->trg;
    s->trg = NULL;
    return r;
}

void task_sample_train(const TaskData *td, float p_src, float p_trg, Rng *rng, Dataset *out) {
    S2S_ASSERT_MSG(td->train_src_text && td->train_trg_text, "the training text was not kept (task.bpe_dropout is 0)");
    dataset_init(out);
    int32_t *src = NULL, *trg = NULL;
    int cs = 0, ct = 0;
    for (int i = 0; i < td->train.n; i++) {
        int ns = data_encode_line(&td->src_vocab, td->train_src_text[i], false, p_src, p_src > 0 ? rng : NULL, &src, &cs);
        int nt = data_encode_line(&td->trg_vocab, td->train_trg_text[i], true, p_trg, p_trg > 0 ? rng : NULL, &trg, &ct);
        dataset_add(out, src, ns, trg, nt);
    }
    free(src);
    free(trg);
}

/* The in-memory sink: pairs into td->train, and their text when BPE-dropout needs it. */
typedef struct MemSink {
    TaskData *td;
    bool keep_text;
    int cap_text;
} MemSink;

static S2sStatus mem_pair(void *ctx, const int32_t *src, int ns, const int32_t *trg, int nt, const char *st, const char *tt,
                          S2sError *err) {
    MemSink *m = ctx;
    TaskData *td = m->td;
    (void)err;
    if (m->keep_text) data_keep_text(td, td->train.n, &m->cap_text, st, tt);
    dataset_add(&td->train, src, ns, trg, nt);
    return S2S_OK;
}

S2sStatus parallel_load(TaskData *td, const ConfigTask *t, const TaskLoadHooks *hooks, S2sError *err) {
    memset(td, 0, sizeof *td);
    S2sStatus st = corpus_vocab(td, t, hooks, err);
    if (st) return st;
    MemSink m = {td, t->bpe_dropout > 0, 0};
    CorpusSink sink = {&m, mem_pair};
    if ((st = corpus_encode(td, t, &sink, hooks, &td->train_counts, err))) return st;
    return parallel_load_eval(td, t, err);
}

S2sStatus parallel_load_eval(TaskData *td, const ConfigTask *t, S2sError *err) {
    Split va = {0}, te = {0};
    S2sStatus st;
    if ((st = read_split(&va, t, "valid_prefix", t->valid_prefix, err))) goto out;
    if (t->test_prefix[0] && (st = read_split(&te, t, "test_prefix", t->test_prefix, err))) goto out; /* "": no test split */
    if ((st = fill(&td->valid, &va, td, t->valid_prefix, t, err))) goto out;
    if ((st = fill(&td->test, &te, td, t->test_prefix, t, err))) goto out;
    td->valid_refs = take_lines(&va);
    td->test_refs = take_lines(&te);
out:
    split_free(&va);
    split_free(&te);
    return st; /* on failure task_load frees what td holds */
}
