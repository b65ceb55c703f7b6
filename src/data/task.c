/* task.c — what every task's data shares: user text to source ids and target ids to text,
 * the data's size, fingerprint and release (loading is task_load.c's). */
#include "s2s/data.h"
#include "data_internal.h"

#include <stdlib.h>
#include <dirent.h>
#include <string.h>

/* Reversal: one id per character. */
static S2sStatus encode_chars(const ConfigTask *task, const Vocab *src, const char *line, bool markers, int32_t **ids,
                              int *n, S2sError *err) {
    size_t len = strlen(line);
    int cap = (int)len + 2;
    int32_t *out = s2s_xmalloc((size_t)cap * sizeof *out);
    char bad = 0;
    int k = reverse_encode(src, line, markers, out, cap, &bad);
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
static S2sStatus encode_words(const char *lang, const Vocab *src, const char *line, bool tokenized, int32_t **ids, int *n,
                              S2sError *err) {
    if (!utf8_valid(line, strlen(line))) return s2s_fail(err, S2S_ERR_DATA, "not valid UTF-8");
    if (src->sub) { /* raw text straight into pieces */
        int32_t *out = NULL;
        int cap = 0, k = subword_encode(src->sub, line, &out, &cap);
        if (k == 0) {
            free(out);
            return s2s_fail(err, S2S_ERR_DATA, "no words in the line");
        }
        *ids = out;
        *n = k;
        return S2S_OK;
    }
    char *text = tokenized ? strdup(line) : tok_normalize(line, lang);
    char **words = NULL;
    int wcap = 0, k = text_split(text, &words, &wcap); /* the training data's splitting */
    int32_t *out = s2s_xmalloc((size_t)(k ? k : 1) * sizeof *out);
    for (int i = 0; i < k; i++) out[i] = vocab_id(src, words[i]);
    free(words);
    free(text);
    if (k == 0) {
        free(out);
        return s2s_fail(err, S2S_ERR_DATA, "no words in the line");
    }
    *ids = out;
    *n = k;
    return S2S_OK;
}

/* A source (markers as configured, the source language) or a target (no markers, the target's). */
static S2sStatus encode_line(const ConfigTask *task, const Vocab *v, const char *line, bool tokenized, bool target,
                             int32_t **ids, int *n, S2sError *err) {
    size_t len = strlen(line);
    if (len > (1u << 24)) return s2s_fail(err, S2S_ERR_DATA, "line too long (%zu bytes)", len);
    S2sStatus st = S2S_ERR_CONFIG;
    switch (task->type) {
    case TASK_REVERSE: st = encode_chars(task, v, line, !target && task->source_markers, ids, n, err); break;
    case TASK_TRANSLATE: st = encode_words(target ? task->trg_lang : task->src_lang, v, line, tokenized, ids, n, err); break;
    }
    if (st == S2S_OK && *n > TASK_MAX_SOURCE) {
        free(*ids);
        return s2s_fail(err, S2S_ERR_DATA, "%s of %d tokens; the limit is %d", target ? "target" : "source", *n,
                        TASK_MAX_SOURCE);
    }
    return st;
}

S2sStatus task_encode_source(const ConfigTask *task, const Vocab *src, const char *line, bool tokenized, int32_t **ids,
                             int *n, S2sError *err) {
    return encode_line(task, src, line, tokenized, false, ids, n, err);
}

S2sStatus task_encode_target(const ConfigTask *task, const Vocab *trg, const char *line, bool tokenized, int32_t **ids,
                             int *n, S2sError *err) {
    return encode_line(task, trg, line, tokenized, true, ids, n, err);
}

char *task_decode_target(const ConfigTask *task, const Vocab *trg, const int32_t *ids, int n) {
    if (trg->sub) return subword_decode(trg->sub, ids, n); /* raw text */
    bool spaced = task->type == TASK_TRANSLATE; /* reversal joins characters */
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
    if (task->type != TASK_REVERSE) return 0; /* files: as large as they are on disk */
    double n = (double)task->train_size + task->valid_size + task->test_size;
    /* ids of both sides, per-example offsets and lengths, two string sets (hash.h: up to four
     * slots a string, a key and a value each) */
    return n * ((2.0 * task->max_len + 4) * sizeof(int32_t) + 2 * sizeof(size_t) + 2 * sizeof(int) +
                4 * (sizeof(uint64_t) + sizeof(int32_t)));
}

Digest task_fingerprint(const TaskData *td, bool *ok) {
    *ok = true;
    if (td->has_fingerprint) return td->fingerprint; /* a prepared file's, computed as it was written */
    DigestCtx c;
    digest_init(&c);
    const Vocab *v[2] = {&td->src_vocab, &td->trg_vocab};
    for (int k = 0; k < 2; k++) {
        digest_update(&c, &v[k]->size, sizeof v[k]->size);
        for (int i = 0; i < v[k]->size; i++) digest_update(&c, v[k]->tokens[i], strlen(v[k]->tokens[i]) + 1);
    }
    const Dataset *d[3] = {&td->train, &td->valid, &td->test};
    for (int k = 0; k < 3 && *ok; k++) {
        digest_update(&c, &d[k]->n, sizeof d[k]->n);
        digest_update(&c, d[k]->src_len, (size_t)d[k]->n * sizeof *d[k]->src_len);
        digest_update(&c, d[k]->trg_len, (size_t)d[k]->n * sizeof *d[k]->trg_len);
        *ok = dataset_hash_ids(d[k], &c);
    }
    char *const *refs[2] = {td->valid_refs, td->test_refs};
    int nrefs[2] = {td->valid.n, td->test.n};
    for (int k = 0; k < 2; k++)
        for (int i = 0; refs[k] && i < nrefs[k]; i++) digest_update(&c, refs[k][i], strlen(refs[k][i]) + 1);
    return digest_final(&c);
}

size_t dataset_bytes(const Dataset *d) {
    return d->streamed ? (size_t)d->n * (2 * sizeof(int)) + ((size_t)d->n / 64 + 1) * sizeof(uint64_t)
                       : d->cap_ids * sizeof(int32_t) + (size_t)d->cap * (2 * sizeof(size_t) + 2 * sizeof(int));
}

static size_t lines_bytes(char *const *lines, int n) {
    size_t b = 0;
    for (int i = 0; lines && i < n; i++) b += sizeof *lines + (lines[i] ? strlen(lines[i]) + 1 : 0);
    return b;
}

size_t task_data_bytes(const TaskData *td) {
    return dataset_bytes(&td->train) + dataset_bytes(&td->valid) + dataset_bytes(&td->test) +
           lines_bytes(td->valid_refs, td->valid.n) + lines_bytes(td->test_refs, td->test.n) +
           lines_bytes(td->train_src_text, td->train.n) + lines_bytes(td->train_trg_text, td->train.n);
}

void task_keep_valid(TaskData *td, int max_lines) {
    if (max_lines <= 0 || td->valid.n <= max_lines) return;
    for (int i = max_lines; td->valid_refs && i < td->valid.n; i++) free(td->valid_refs[i]);
    td->valid.n = max_lines; /* the offsets and ids past it stay allocated, unread */
}

void task_free(TaskData *td) {
    text_free_lines(td->valid_refs, td->valid_refs ? td->valid.n : 0); /* before the counts go */
    text_free_lines(td->test_refs, td->test_refs ? td->test.n : 0);
    text_free_lines(td->train_src_text, td->train_src_text ? td->train.n : 0);
    text_free_lines(td->train_trg_text, td->train_trg_text ? td->train.n : 0);
    td->train_src_text = td->train_trg_text = NULL;
    vocab_free(&td->src_vocab);
    vocab_free(&td->trg_vocab);
    dataset_free(&td->train);
    dataset_free(&td->valid);
    dataset_free(&td->test);
    td->valid_refs = td->test_refs = NULL;
}

/* The pairs an epoch takes of corpus i: its weight × its pairs, rounded. */
static long weighted_pairs(const CorpusCounts *counts, const TrainCorpora *c, int i) {
    return (long)(c->weight[i] * (double)counts->kept_by[i] + 0.5);
}

long task_weighted_pairs(const CorpusCounts *counts, const TrainCorpora *c) {
    long total = 0;
    for (int i = 0; i < c->n; i++) total += weighted_pairs(counts, c, i);
    return total;
}

int task_weighted_epoch(const CorpusCounts *counts, const TrainCorpora *c, Rng *rng, int **order) {
    long total = task_weighted_pairs(counts, c), at = 0;
    S2S_ASSERT(total < 2000000000L);
    int *o = s2s_xmalloc((size_t)(total ? total : 1) * sizeof *o), n = 0;
    for (int i = 0; i < c->n; i++) {
        long m = counts->kept_by[i], want = weighted_pairs(counts, c, i);
        if (m == 0) continue; /* every pair of it filtered out */
        for (long r = 0; r + m <= want; r += m) /* whole passes over the corpus */
            for (long k = 0; k < m; k++) o[n++] = (int)(at + k);
        long part = want % m;
        if (part) { /* a random part of it: the first `part` of a partial shuffle */
            int *pick = s2s_xmalloc((size_t)m * sizeof *pick);
            for (long k = 0; k < m; k++) pick[k] = (int)(at + k);
            for (long k = 0; k < part; k++) {
                long j = k + (long)rng_below(rng, (uint32_t)(m - k));
                int x = pick[k];
                pick[k] = pick[j];
                pick[j] = x;
                o[n++] = pick[k];
            }
            free(pick);
        }
        at += m;
    }
    *order = o;
    return n;
}

SubwordKind task_subword_kind(Subword s) {
    S2S_ASSERT(s == SUBWORD_BPE || s == SUBWORD_SENTENCEPIECE);
    return s == SUBWORD_BPE ? SUBWORD_KIND_BPE : SUBWORD_KIND_SENTENCEPIECE;
}

void task_split_paths(const ConfigTask *t, const char *prefix, char *ps, char *pt, size_t n) {
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

static int compare_names(const void *a, const void *b) { return strcmp(a, b); }

/* The hint after "cannot open" for split `key` (task.train_prefix, …): Multi30k's fetch script
 * where the folder is Multi30k's, else the prefixes the folder holds files of in the source
 * language, so that a corpus named train/dev/test is told which key to set. */
void task_files_hint(const ConfigTask *t, const char *key, char *out, size_t n) {
    const char *base = strrchr(t->data_dir, '/');
    base = base ? base + 1 : t->data_dir;
    if (!strcmp(base, "multi30k")) {
        snprintf(out, n, "for Multi30k, run scripts/get-multi30k.sh; or set task.data_dir");
        return;
    }
    DIR *d = opendir(t->data_dir);
    if (!d) {
        snprintf(out, n, "no folder %s: set task.data_dir to the corpus's folder", t->data_dir);
        return;
    }
    char names[8][64], found[8 * 66] = "";
    int k = 0;
    size_t ll = strlen(t->src_lang);
    for (struct dirent *e; (e = readdir(d)) && k < 8;) { /* PREFIX.lang or PREFIX.lang.gz */
        const char *name = e->d_name;
        size_t len = strlen(name);
        if (len > 3 && !strcmp(name + len - 3, ".gz")) len -= 3;
        if (len <= ll + 1 || name[len - ll - 1] != '.' || strncmp(name + len - ll, t->src_lang, ll)) continue;
        snprintf(names[k++], sizeof names[0], "%.*s", (int)(len - ll - 1), name);
    }
    closedir(d);
    qsort(names, (size_t)k, sizeof names[0], compare_names); /* readdir's order is the file system's */
    for (int i = 0; i < k; i++) {
        size_t used = strlen(found);
        snprintf(found + used, sizeof found - used, "%s%s", i ? ", " : "", names[i]);
    }
    if (k) snprintf(out, n, "%s holds the prefixes %s (files PREFIX.%s): set task.%s", t->data_dir, found, t->src_lang, key);
    else snprintf(out, n, "%s holds no file PREFIX.%s: set task.data_dir, or task.src_lang", t->data_dir, t->src_lang);
}
