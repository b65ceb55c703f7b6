/* parallel.c — tokenised parallel text: reading, vocabularies, datasets. */
#include "s2s/file.h"
#include "s2s/subword.h"
#include "s2s/data.h"

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

void parallel_split_paths(const ConfigTask *t, const char *prefix, char *ps, char *pt, size_t n) {
    snprintf(ps, n, "%s/%s.%s", t->data_dir, prefix, t->src_lang);
    snprintf(pt, n, "%s/%s.%s", t->data_dir, prefix, t->trg_lang);
    /* prefix.lang, or prefix.lang.gz where only that is there (Multi30k's raw files) */
    FILE *probe = fopen(ps, "rb");
    if (probe) fclose(probe);
    else if (strlen(ps) + 3 < n && strlen(pt) + 3 < n) {
        char gs[CONFIG_STR + 96];
        snprintf(gs, sizeof gs, "%s.gz", ps);
        if ((probe = fopen(gs, "rb"))) {
            fclose(probe);
            strcat(ps, ".gz");
            strcat(pt, ".gz");
        }
    }
}

static S2sStatus read_split(Split *s, const ConfigTask *t, const char *prefix, S2sError *err) {
    char ps[CONFIG_STR + 80], pt[CONFIG_STR + 80];
    memset(s, 0, sizeof *s);
    int ns = 0, nt = 0;
    parallel_split_paths(t, prefix, ps, pt, sizeof ps);
    S2sStatus st = text_read_lines(ps, &s->src, &ns, err);
    if (st == S2S_ERR_IO) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        return s2s_fail(err, st, "%s (for Multi30k, run scripts/get-multi30k.sh; or set task.data_dir)", msg);
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

/* Counts tokens; then keeps those seen ≥ min_freq, most frequent first, ties by byte order. */
typedef struct Count {
    const char *tok;
    long n;
} Count;

static int cmp_count(const void *a, const void *b) {
    const Count *x = a, *y = b;
    if (x->n != y->n) return x->n < y->n ? 1 : -1;
    return strcmp(x->tok, y->tok);
}

static void build_vocab(Vocab *out, char **lines, int n, const uint8_t *keep, int min_freq, int max_vocab) {
    Vocab seen;
    vocab_init(&seen);
    long *count = NULL;
    int cap = 0;
    char **toks = NULL;
    int tcap = 0;
    for (int i = 0; i < n; i++) {
        if (!keep[i]) continue;
        char *copy = strdup(lines[i]);
        int k = text_split(copy, &toks, &tcap);
        for (int j = 0; j < k; j++) vocab_count(&seen, toks[j], &count, &cap);
        free(copy);
    }
    int m = seen.size - TOK_SPECIALS;
    Count *c = s2s_xmalloc((size_t)(m > 0 ? m : 1) * sizeof *c);
    for (int i = 0; i < m; i++) c[i] = (Count){seen.tokens[TOK_SPECIALS + i], count[TOK_SPECIALS + i]};
    qsort(c, (size_t)m, sizeof *c, cmp_count);
    vocab_init(out);
    for (int i = 0; i < m; i++) {
        if (c[i].n < min_freq) break;
        if (max_vocab > 0 && out->size - TOK_SPECIALS >= max_vocab) break;
        vocab_add(out, c[i].tok);
    }
    free(c);
    free(count);
    free(toks);
    vocab_free(&seen);
}

/* ids of a line's tokens (unknown → <unk>), or of its subword pieces, with <sos>/<eos> when
 * marked. */
static int encode_line(const Vocab *v, const char *line, bool marked, float dropout, Rng *rng, int32_t **ids, int *cap) {
    if (v->sub) {
        int n = 0;
        if (marked) {
            if (*cap < 1) *ids = s2s_xrealloc(*ids, (size_t)(*cap = 64) * sizeof **ids);
            (*ids)[n++] = TOK_SOS;
        }
        int32_t *p = NULL;
        int pc = 0, k = subword_encode_sampled(v->sub, line, dropout, rng, &p, &pc);
        if (n + k + 1 > *cap) *ids = s2s_xrealloc(*ids, (size_t)(*cap = n + k + 1) * sizeof **ids);
        memcpy(*ids + n, p, (size_t)k * sizeof *p);
        n += k;
        free(p);
        if (marked) (*ids)[n++] = TOK_EOS;
        return n;
    }
    char *copy = strdup(line);
    char **toks = NULL;
    int tcap = 0;
    int k = text_split(copy, &toks, &tcap), n = 0;
    if (k + 2 > *cap) *ids = s2s_xrealloc(*ids, (size_t)(*cap = k + 2) * sizeof **ids);
    if (marked) (*ids)[n++] = TOK_SOS;
    for (int j = 0; j < k; j++) (*ids)[n++] = vocab_id(v, toks[j]);
    if (marked) (*ids)[n++] = TOK_EOS;
    free(toks);
    free(copy);
    return n;
}

static int count_tokens(const char *line) {
    int n = 0;
    for (const char *p = line; *p;) {
        while (text_is_space(*p)) p++;
        if (!*p) break;
        n++;
        while (*p && !text_is_space(*p)) p++;
    }
    return n;
}

static S2sStatus fill(Dataset *d, const Split *s, const TaskData *td, const char *what, const ConfigTask *t,
                      S2sError *err) {
    int32_t *src = NULL, *trg = NULL;
    int cs = 0, ct = 0;
    for (int i = 0; i < s->n; i++) {
        int ns = encode_line(&td->src_vocab, s->src[i], false, 0, NULL, &src, &cs);
        int nt = encode_line(&td->trg_vocab, s->trg[i], true, 0, NULL, &trg, &ct);
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
    char **r = s->trg;
    s->trg = NULL;
    return r;
}

/* Subword models to the vocabularies, which are their pieces: one for both sides (trg NULL:
 * each side owns a copy) or each its own. Takes ownership. */
static void attach_model(TaskData *td, SubwordModel *m, SubwordModel *trg) {
    SubwordModel *m2 = trg ? trg : subword_copy(m);
    subword_vocab(m, &td->src_vocab); /* vocab_init first: the model is attached after */
    subword_vocab(m2, &td->trg_vocab);
    subword_attach(&td->src_vocab, m);
    subword_attach(&td->trg_vocab, m2);
}

/* A BPE model learned from lines[0..n) (task.bpe_merges or task.bpe_vocab_size); `what` names
 * the text in a message. */
static S2sStatus learn_bpe(SubwordModel **out, char *const *lines, size_t n, const ConfigTask *t, const char *what,
                           S2sError *err) {
    Bpe *b = s2s_xmalloc(sizeof *b);
    bpe_init(b);
    BpeLearnOpts o = {.merges = t->bpe_vocab_size ? 0 : t->bpe_merges, .vocab_size = t->bpe_vocab_size, .min_count = 2};
    int learned;
    S2sStatus st = bpe_learn(b, lines, n, &o, &learned, err);
    if (st) { /* a vocabulary size below the characters the text has */
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        bpe_free(b);
        free(b);
        return s2s_fail(err, S2S_ERR_CONFIG, "task.bpe_vocab_size: %s%s", what, msg);
    }
    *out = subword_of_bpe(b);
    return S2S_OK;
}

/* A subword model the user gives (a file of ./subword learn's or spm_train's). */
static S2sStatus read_model(const char *path, Subword kind, SubwordModel **m, S2sError *err) {
    char *bytes;
    size_t len;
    S2sStatus st = file_read_all(path, (size_t)1 << 30, &bytes, &len, err);
    if (st) return st;
    st = subword_from_bytes(m, kind, bytes, len, path, err);
    free(bytes);
    return st;
}

void task_sample_train(const TaskData *td, float p_src, float p_trg, Rng *rng, Dataset *out) {
    S2S_ASSERT_MSG(td->train_src_text && td->train_trg_text, "the training text was not kept (task.bpe_dropout is 0)");
    dataset_init(out);
    int32_t *src = NULL, *trg = NULL;
    int cs = 0, ct = 0;
    for (int i = 0; i < td->train.n; i++) {
        int ns = encode_line(&td->src_vocab, td->train_src_text[i], false, p_src, p_src > 0 ? rng : NULL, &src, &cs);
        int nt = encode_line(&td->trg_vocab, td->train_trg_text[i], true, p_trg, p_trg > 0 ? rng : NULL, &trg, &ct);
        dataset_add(out, src, ns, trg, nt);
    }
    free(src);
    free(trg);
}

S2sStatus parallel_load(TaskData *td, const ConfigTask *t, S2sError *err) {
    memset(td, 0, sizeof *td);
    Split tr = {0}, va = {0}, te = {0};
    S2sStatus st;
    if ((st = read_split(&tr, t, t->train_prefix, err))) return st;
    if ((st = read_split(&va, t, t->valid_prefix, err))) goto out;
    if ((st = read_split(&te, t, t->test_prefix, err))) goto out;
    /* training pairs with an empty side, or longer than max_train_len, are left out */
    uint8_t *keep = s2s_xmalloc((size_t)tr.n);
    for (int i = 0; i < tr.n; i++) {
        int ls = count_tokens(tr.src[i]), lt = count_tokens(tr.trg[i]);
        keep[i] = ls > 0 && lt > 0 && (t->max_train_len <= 0 || (ls <= t->max_train_len && lt <= t->max_train_len));
        td->train_skipped += !keep[i];
    }
    if (t->subword == SUBWORD_BPE && t->bpe_model[0]) { /* the user's, from ./subword learn, for both */
        SubwordModel *m;
        if ((st = read_model(t->bpe_model, SUBWORD_BPE, &m, err))) {
            free(keep);
            goto out;
        }
        attach_model(td, m, NULL);
    } else if (t->subword == SUBWORD_BPE) { /* from the kept pairs: one model for both languages, or one each */
        char **both = s2s_xmalloc((size_t)(2 * tr.n + 1) * sizeof *both);
        size_t nb = 0;
        SubwordModel *m = NULL, *mt = NULL;
        if (t->bpe_joint) {
            for (int i = 0; i < tr.n; i++)
                if (keep[i]) {
                    both[nb++] = tr.src[i];
                    both[nb++] = tr.trg[i];
                }
            st = learn_bpe(&m, both, nb, t, "", err);
        } else {
            char what[64];
            for (int side = 0; side < 2 && !st; side++) {
                nb = 0;
                for (int i = 0; i < tr.n; i++)
                    if (keep[i]) both[nb++] = side ? tr.trg[i] : tr.src[i];
                snprintf(what, sizeof what, "the %s side (%s): ", side ? "target" : "source", side ? t->trg_lang : t->src_lang);
                st = learn_bpe(side ? &mt : &m, both, nb, t, what, err);
            }
        }
        free(both);
        if (st) {
            subword_free(m);
            free(keep);
            goto out;
        }
        attach_model(td, m, mt);
    } else if (t->subword == SUBWORD_SENTENCEPIECE) { /* the user's model, for both languages */
        SubwordModel *m;
        if ((st = read_model(t->spm_model, SUBWORD_SENTENCEPIECE, &m, err))) {
            free(keep);
            goto out;
        }
        attach_model(td, m, NULL);
    } else {
        build_vocab(&td->src_vocab, tr.src, tr.n, keep, t->min_freq, t->max_vocab);
        build_vocab(&td->trg_vocab, tr.trg, tr.n, keep, t->min_freq, t->max_vocab);
    }
    Split kept = tr;
    int m = 0;
    for (int i = 0; i < tr.n; i++) {
        if (keep[i]) {
            kept.src[m] = tr.src[i];
            kept.trg[m] = tr.trg[i];
            m++;
        } else {
            free(tr.src[i]);
            free(tr.trg[i]);
        }
    }
    kept.n = tr.n = m;
    free(keep);
    if (m == 0) {
        st = s2s_fail(err, S2S_ERR_DATA, "%s/%s.%s: no usable training pair", t->data_dir, t->train_prefix, t->src_lang);
        goto out;
    }
    if ((st = fill(&td->train, &kept, td, t->train_prefix, t, err))) goto out;
    if (t->bpe_dropout > 0) { /* kept as text: each epoch segments it anew */
        td->train_src_text = tr.src;
        td->train_trg_text = tr.trg;
        tr.src = tr.trg = NULL;
    }
    if ((st = fill(&td->valid, &va, td, t->valid_prefix, t, err))) goto out;
    if ((st = fill(&td->test, &te, td, t->test_prefix, t, err))) goto out;
    td->valid_refs = take_lines(&va);
    td->test_refs = take_lines(&te);
out:
    split_free(&tr);
    split_free(&va);
    split_free(&te);
    return st; /* on failure task_load frees what td holds */
}
