/* reverse.c — the string-reversal task: deterministic data from the config. */
#include "s2s/data.h"

#include <stdlib.h>
#include <string.h>

int reverse_encode(const Vocab *v, const char *text, bool markers, int32_t *out, int cap, char *bad) {
    int n = 0;
    if (markers) {
        if (n >= cap) return -2;
        out[n++] = TOK_SOS;
    }
    for (const char *p = text; *p; p++) {
        char tok[2] = {*p, '\0'};
        int id = vocab_find(v, tok);
        if (id < TOK_SPECIALS) {
            if (bad) *bad = *p;
            return -1;
        }
        if (n >= cap) return -2;
        out[n++] = id;
    }
    if (markers) {
        if (n >= cap) return -2;
        out[n++] = TOK_EOS;
    }
    return n;
}

/* A set of strings, to keep held-out strings out of training. */
typedef struct StrSet {
    uint64_t *h; /* 0 = empty */
    size_t n, cap;
} StrSet;

static uint64_t hash64(const char *s, int len) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h ? h : 1;
}

static bool set_has(const StrSet *s, uint64_t h) {
    if (!s->cap) return false;
    for (size_t i = h & (s->cap - 1); s->h[i]; i = (i + 1) & (s->cap - 1))
        if (s->h[i] == h) return true;
    return false;
}

static void set_add(StrSet *s, uint64_t h) {
    if (2 * (s->n + 1) > s->cap) {
        StrSet t = {NULL, 0, s->cap ? 2 * s->cap : 1024};
        t.h = s2s_xcalloc(t.cap, sizeof *t.h);
        for (size_t i = 0; i < s->cap; i++)
            if (s->h[i]) set_add(&t, s->h[i]);
        free(s->h);
        *s = t;
    }
    if (set_has(s, h)) return;
    size_t i = h & (s->cap - 1);
    while (s->h[i]) i = (i + 1) & (s->cap - 1);
    s->h[i] = h;
    s->n++;
}

/* Draws n strings into d; strings in `avoid` are redrawn (up to a bound, so a tiny string
 * space still terminates), and every string drawn is added to `seen`. */
static void draw(Dataset *d, int n, const ConfigTask *task, const Vocab *v, Rng *rng, const StrSet *avoid,
                 StrSet *seen) {
    int alpha = (int)strlen(task->alphabet), M = task->max_len + 2;
    char *s = s2s_xmalloc((size_t)M);
    int32_t *src = s2s_xmalloc((size_t)M * sizeof *src), *trg = s2s_xmalloc((size_t)M * sizeof *trg);
    for (int k = 0; k < n; k++) {
        int len = 0;
        for (int tries = 0; tries < 100; tries++) {
            len = task->min_len + (int)rng_below(rng, (uint32_t)(task->max_len - task->min_len + 1));
            for (int i = 0; i < len; i++) s[i] = task->alphabet[rng_below(rng, (uint32_t)alpha)];
            if (!avoid || !set_has(avoid, hash64(s, len))) break;
        }
        set_add(seen, hash64(s, len));
        int ns = 0, nt = 0;
        if (task->source_markers) src[ns++] = TOK_SOS;
        trg[nt++] = TOK_SOS;
        for (int i = 0; i < len; i++) {
            char tok[2] = {s[i], '\0'};
            src[ns++] = vocab_find(v, tok);
            tok[0] = s[len - 1 - i];
            trg[nt++] = vocab_find(v, tok);
        }
        if (task->source_markers) src[ns++] = TOK_EOS;
        trg[nt++] = TOK_EOS;
        dataset_add(d, src, ns, trg, nt);
    }
    free(s);
    free(src);
    free(trg);
}

S2sStatus reverse_make(TaskData *rd, const ConfigTask *task, S2sError *err) {
    if (task->min_len < 1 || task->min_len > task->max_len)
        return s2s_fail(err, S2S_ERR_CONFIG, "task: expected 1 <= min_len <= max_len, got %d and %d", task->min_len,
                        task->max_len);
    vocab_init(&rd->src_vocab);
    vocab_init(&rd->trg_vocab);
    for (const char *p = task->alphabet; *p; p++) {
        vocab_add(&rd->src_vocab, (char[]){*p, '\0'});
        vocab_add(&rd->trg_vocab, (char[]){*p, '\0'});
    }
    dataset_init(&rd->train);
    dataset_init(&rd->valid);
    dataset_init(&rd->test);
    Rng rng;
    rng_init(&rng, (uint64_t)task->data_seed, RNG_STREAM_DATA);
    StrSet held = {0}, train_seen = {0};
    /* held-out strings first, so training can avoid them */
    draw(&rd->test, task->test_size, task, &rd->src_vocab, &rng, NULL, &held);
    draw(&rd->valid, task->valid_size, task, &rd->src_vocab, &rng, &held, &held);
    draw(&rd->train, task->train_size, task, &rd->src_vocab, &rng, &held, &train_seen);
    free(held.h);
    free(train_seen.h);
    return S2S_OK;
}

S2sStatus task_load(TaskData *td, const ConfigTask *task, S2sError *err) {
    memset(td, 0, sizeof *td);
    if (strcmp(task->type, "reverse") == 0) return reverse_make(td, task, err);
    return parallel_load(td, task, err);
}

/* Reversal: one id per character. */
static S2sStatus encode_chars(const ConfigTask *task, const Vocab *src, const char *line, int32_t **ids, int *n,
                              S2sError *err) {
    size_t len = strlen(line);
    int cap = (int)len + 2;
    int32_t *out = s2s_xmalloc((size_t)cap * sizeof *out);
    char bad = 0;
    int k = reverse_encode(src, line, task->source_markers, out, cap, &bad);
    if (k < 0) {
        free(out);
        unsigned char c = (unsigned char)bad;
        if (c >= 33 && c < 127)
            return s2s_fail(err, S2S_ERR_DATA, "'%c' is not in the model's alphabet \"%s\"", c, task->alphabet);
        return s2s_fail(err, S2S_ERR_DATA, "byte 0x%02x is not in the model's alphabet \"%s\"", c, task->alphabet);
    }
    *ids = out;
    *n = k;
    return S2S_OK;
}

/* Translation: raw text is normalised and tokenised first, unless it is already tokenised. */
static S2sStatus encode_words(const ConfigTask *task, const Vocab *src, const char *line, bool tokenized, int32_t **ids,
                              int *n, S2sError *err) {
    if (!utf8_valid(line, strlen(line))) return s2s_fail(err, S2S_ERR_DATA, "not valid UTF-8");
    char *text = tokenized ? strdup(line) : tok_normalize(line, task->src_lang);
    int cap = 16, k = 0;
    int32_t *out = s2s_xmalloc((size_t)cap * sizeof *out);
    char *save = NULL;
    for (char *w = strtok_r(text, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
        if (k + 2 > cap) out = s2s_xrealloc(out, (size_t)(cap *= 2) * sizeof *out);
        out[k++] = vocab_id(src, w);
    }
    free(text);
    if (k == 0) {
        free(out);
        return s2s_fail(err, S2S_ERR_DATA, "no words in the line");
    }
    *ids = out;
    *n = k;
    return S2S_OK;
}

S2sStatus task_encode_source(const ConfigTask *task, const Vocab *src, const char *line, bool tokenized, int32_t **ids,
                             int *n, S2sError *err) {
    size_t len = strlen(line);
    if (len > (1u << 24)) return s2s_fail(err, S2S_ERR_DATA, "line too long (%zu bytes)", len);
    S2sStatus st = strcmp(task->type, "reverse") != 0 ? encode_words(task, src, line, tokenized, ids, n, err)
                                                      : encode_chars(task, src, line, ids, n, err);
    if (st == S2S_OK && *n > TASK_MAX_SOURCE) {
        free(*ids);
        return s2s_fail(err, S2S_ERR_DATA, "source of %d tokens; the limit is %d", *n, TASK_MAX_SOURCE);
    }
    return st;
}

char *task_decode_target(const ConfigTask *task, const Vocab *trg, const int32_t *ids, int n) {
    bool spaced = strcmp(task->type, "reverse") != 0;
    size_t len = 1;
    for (int i = 0; i < n; i++) len += strlen(trg->tokens[ids[i]]) + 1;
    char *s = s2s_xmalloc(len), *p = s;
    for (int i = 0; i < n; i++) {
        if (spaced && i) *p++ = ' ';
        size_t k = strlen(trg->tokens[ids[i]]);
        memcpy(p, trg->tokens[ids[i]], k);
        p += k;
    }
    *p = '\0';
    return s;
}

double task_memory_estimate(const ConfigTask *task) {
    if (strcmp(task->type, "reverse") != 0) return 0; /* files: as large as they are on disk */
    double n = (double)task->train_size + task->valid_size + task->test_size;
    /* ids of both sides, per-example offsets and lengths, two hash sets of 8-byte slots */
    return n * ((2.0 * task->max_len + 4) * sizeof(int32_t) + 2 * sizeof(size_t) + 2 * sizeof(int) + 4 * sizeof(uint64_t));
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

uint64_t task_fingerprint(const TaskData *td) {
    uint64_t h = 1469598103934665603ull;
    const Vocab *v[2] = {&td->src_vocab, &td->trg_vocab};
    for (int k = 0; k < 2; k++) {
        h = fnv(h, &v[k]->size, sizeof v[k]->size);
        for (int i = 0; i < v[k]->size; i++) h = fnv(h, v[k]->tokens[i], strlen(v[k]->tokens[i]) + 1);
    }
    const Dataset *d[3] = {&td->train, &td->valid, &td->test};
    for (int k = 0; k < 3; k++) {
        h = fnv(h, &d[k]->n, sizeof d[k]->n);
        for (int i = 0; i < d[k]->n; i++) {
            h = fnv(h, &d[k]->src_len[i], sizeof(int));
            h = fnv(h, &d[k]->trg_len[i], sizeof(int));
        }
        h = fnv(h, d[k]->ids, d[k]->n_ids * sizeof *d[k]->ids);
    }
    char *const *refs[2] = {td->valid_refs, td->test_refs};
    int nrefs[2] = {td->valid.n, td->test.n};
    for (int k = 0; k < 2; k++)
        for (int i = 0; refs[k] && i < nrefs[k]; i++) h = fnv(h, refs[k][i], strlen(refs[k][i]) + 1);
    return h;
}

size_t task_data_bytes(const TaskData *td) {
    const Dataset *d[3] = {&td->train, &td->valid, &td->test};
    size_t b = 0;
    for (int k = 0; k < 3; k++) b += d[k]->cap_ids * sizeof(int32_t) + (size_t)d[k]->cap * (2 * sizeof(size_t) + 2 * sizeof(int));
    return b;
}

void task_free(TaskData *td) {
    text_free_lines(td->valid_refs, td->valid_refs ? td->valid.n : 0); /* before the counts go */
    text_free_lines(td->test_refs, td->test_refs ? td->test.n : 0);
    vocab_free(&td->src_vocab);
    vocab_free(&td->trg_vocab);
    dataset_free(&td->train);
    dataset_free(&td->valid);
    dataset_free(&td->test);
    td->valid_refs = td->test_refs = NULL;
}
