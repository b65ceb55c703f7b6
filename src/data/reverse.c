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

/* A set of strings by their FNV-1a hashes, to keep held-out strings out of training (a collision
 * only redraws a training string); hash.h's index with the hash as the whole key. */
typedef HashIndex StrSet;

static uint64_t string_key(const char *s, int len) {
    uint64_t h = hash_fnv(HASH_FNV_BASIS, s, (size_t)len);
    return h ? h : 1; /* as the sets always took it: the same strings drawn */
}

static bool set_has(const StrSet *s, uint64_t h) { return hash_index_find(s, h, NULL, NULL) >= 0; }

static void set_add(StrSet *s, uint64_t h) {
    if (!set_has(s, h)) hash_index_add(s, h, 0);
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
            if (!avoid || !set_has(avoid, string_key(s, len))) break;
        }
        set_add(seen, string_key(s, len));
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
    StrSet held, train_seen;
    hash_index_init(&held, (size_t)task->test_size + (size_t)task->valid_size);
    hash_index_init(&train_seen, (size_t)task->train_size);
    /* held-out strings first, so training can avoid them */
    draw(&rd->test, task->test_size, task, &rd->src_vocab, &rng, NULL, &held);
    draw(&rd->valid, task->valid_size, task, &rd->src_vocab, &rng, &held, &held);
    draw(&rd->train, task->train_size, task, &rd->src_vocab, &rng, &held, &train_seen);
    hash_index_free(&held);
    hash_index_free(&train_seen);
    return S2S_OK;
}
