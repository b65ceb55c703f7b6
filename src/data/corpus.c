/* corpus.c — a training corpus read pair by pair: filters, vocabularies, encoding (corpus.h). */
#include "s2s/corpus.h"
#include "s2s/file.h"
#include "s2s/par.h"
#include "s2s/subword.h"
#include "data_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *const DROP_NAMES[DROP_REASONS] = {"not UTF-8", "empty", "duplicate", "too long", "length ratio"};

/* ---- one line ---- */

int data_encode_line(const Vocab *v, const char *line, bool marked, float dropout, Rng *rng, int32_t **ids, int *cap) {
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

void data_keep_text(TaskData *td, int i, int *cap, const char *src, const char *trg) {
    if (i == *cap) {
        *cap = *cap ? 2 * *cap : 1024;
        td->train_src_text = s2s_xrealloc(td->train_src_text, (size_t)*cap * sizeof(char *));
        td->train_trg_text = s2s_xrealloc(td->train_trg_text, (size_t)*cap * sizeof(char *));
    }
    td->train_src_text[i] = strdup(src);
    td->train_trg_text[i] = strdup(trg);
}

int data_count_tokens(const char *line) {
    int n = 0;
    for (const char *p = line; *p;) {
        while (text_is_space(*p)) p++;
        if (!*p) break;
        n++;
        while (*p && !text_is_space(*p)) p++;
    }
    return n;
}

/* ---- reading pairs ---- */

typedef struct PairReader {
    const ConfigTask *t;
    TrainCorpora corpora;
    int corpus;       /* the one being read */
    char ps[CONFIG_STR + 96], pt[CONFIG_STR + 96];
    FILE *fs, *ft;
    LineReader rs, rt;
    int pos_fd;       /* the source file's offset, for the progress line */
    double size;      /* the source file's bytes */
    bool originals;   /* the original pairs only, distilling or not (the vocabularies are learned from them) */
    bool teacher;     /* the open corpus's targets are the teacher's translations */
    int nbest;        /* target lines a source line has: the teacher's n best, else 1 */
    int rep;          /* the current source line's target last read (0 .. nbest − 1) */
    bool src_long, src_bad; /* the current source line's flags, for each of its targets */
    long line;        /* of the pair last read, in its corpus */
    long pairs;       /* read so far, of every corpus */
    const char *s, *t_line;
    bool long_side;   /* a side over TEXT_MAX_LINE bytes */
    bool bad_utf8;
} PairReader;

static void reader_close(PairReader *r) {
    if (r->fs) fclose(r->fs);
    if (r->ft) fclose(r->ft);
    if (r->pos_fd >= 0) close(r->pos_fd);
    line_reader_free(&r->rs);
    line_reader_free(&r->rt);
    r->fs = r->ft = NULL;
    r->pos_fd = -1;
}

/* The files of corpus r->corpus, opened. Distilling, the teacher's translations are the targets
 * of the first corpus's sources: in its place (teacher_mix replace), or as a corpus of their own
 * after it (add). */
static S2sStatus files_open(PairReader *r, S2sError *err) {
    r->line = 0;
    r->teacher = !r->originals && r->t->teacher_output[0] &&
                 (r->t->teacher_mix == TEACHER_REPLACE || r->corpus == r->corpora.n - 1);
    task_split_paths(r->t, r->corpora.prefix[r->teacher ? 0 : r->corpus], r->ps, r->pt, sizeof r->ps);
    if (r->teacher) snprintf(r->pt, sizeof r->pt, "%s", r->t->teacher_output);
    r->nbest = r->teacher && r->t->teacher_nbest > 1 ? r->t->teacher_nbest : 1;
    r->rep = r->nbest - 1; /* the first call reads a source line */
    if (!(r->fs = text_open(r->ps, &r->pos_fd))) {
        int e = errno;
        char hint[400];
        task_files_hint(r->t, "train_prefix", hint, sizeof hint);
        return s2s_fail(err, S2S_ERR_IO, "%s: cannot open: %s (%s)", r->ps, strerror(e), hint);
    }
    if (!(r->ft = text_open(r->pt, NULL))) return s2s_fail(err, S2S_ERR_IO, "%s: cannot open: %s", r->pt, strerror(errno));
    struct stat sb;
    r->size = fstat(r->pos_fd, &sb) == 0 ? (double)sb.st_size : 0;
    line_reader_init(&r->rs, r->fs, TEXT_MAX_LINE);
    line_reader_init(&r->rt, r->ft, TEXT_MAX_LINE);
    return S2S_OK;
}

static S2sStatus reader_open(PairReader *r, const ConfigTask *t, bool originals, S2sError *err) {
    memset(r, 0, sizeof *r);
    r->pos_fd = -1;
    r->t = t;
    r->originals = originals;
    if (t->teacher[0] && !t->teacher_output[0]) /* distill_prepare translates first and names the file */
        return s2s_fail(err, S2S_ERR_CONFIG, "task.teacher: the teacher's translations are not made yet (distill_prepare)");
    if (!(originals ? config_original_corpora(t, &r->corpora, err) : config_train_corpora(t, &r->corpora, err)))
        return S2S_ERR_CONFIG;
    S2sStatus st = files_open(r, err);
    if (st) reader_close(r);
    return st;
}

/* One side's next line into *s: false at its end (*st set on a read error). */
static bool side_next(LineReader *lr, const char *path, const char **s, bool *too_long, bool *bad, S2sStatus *st,
                      S2sError *err) {
    size_t len;
    LineStatus ls = line_read(lr, s, &len);
    if (ls == LINE_EOF) return false;
    if (ls == LINE_ERROR || ls == LINE_ENDLESS) {
        *st = ls == LINE_ERROR ? s2s_fail(err, S2S_ERR_IO, "%s: read error: %s", path, text_strerror(errno))
                               : s2s_fail(err, S2S_ERR_DATA, "%s:%ld: %zu MiB without a line break; not a text file?", path,
                                          lr->line_no, TEXT_MAX_SKIP >> 20);
        return false;
    }
    *too_long |= ls == LINE_TOO_LONG;
    if (ls == LINE_TOO_LONG) *s = "";
    else *bad |= !utf8_valid(*s, len);
    return true;
}

/* The next pair: S2S_OK with *more, or at the end of the last corpus's files; an error for
 * files of different lengths (both named, with the line) or a read error. */
static S2sStatus reader_next(PairReader *r, bool *more, S2sError *err) {
    for (;;) {
        S2sStatus st = S2S_OK;
        bool a = true, fresh = r->rep + 1 >= r->nbest; /* a new source line, or its next teacher's translation */
        r->long_side = r->bad_utf8 = false;
        bool cut = fresh && r->t->train_max_lines > 0 && r->line >= r->t->train_max_lines; /* task.train_max_lines */
        if (cut) {
            a = false;
        } else if (fresh) {
            a = side_next(&r->rs, r->ps, &r->s, &r->long_side, &r->bad_utf8, &st, err);
            if (st) return st;
            r->src_long = r->long_side, r->src_bad = r->bad_utf8, r->rep = 0;
        } else {
            r->long_side = r->src_long, r->bad_utf8 = r->src_bad, r->rep++;
        }
        bool b = !cut && side_next(&r->rt, r->pt, &r->t_line, &r->long_side, &r->bad_utf8, &st, err);
        if (st) return st;
        if (a != b && r->teacher)
            return s2s_fail(err, S2S_ERR_DATA, "%s has %ld lines but %s has more; the teacher's translations need %d a source "
                            "line", a ? r->pt : r->ps, a ? r->rt.line_no : r->rs.line_no, a ? r->ps : r->pt, r->nbest);
        if (a != b)
            return s2s_fail(err, S2S_ERR_DATA, "%s has %ld lines but %s has more; parallel files must match line by line",
                            a ? r->pt : r->ps, r->line, a ? r->ps : r->pt);
        *more = a;
        if (a) {
            r->line += fresh;
            r->pairs++;
            return S2S_OK;
        }
        if (r->corpus + 1 == r->corpora.n) return S2S_OK; /* the last corpus's end */
        reader_close(r);
        r->corpus++;
        if ((st = files_open(r, err))) return st;
    }
}

/* ---- progress on a terminal ---- */

typedef struct Progress {
    FILE *f;
    const atomic_int *stop; /* a signal's request to stop, or NULL */
    const char *what;
    double t0, last;
} Progress;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Drawn every half second once the pass has run for one; the last line only after a first. */
static void progress_draw(Progress *p, const PairReader *r, bool done) {
    if (!p->f) return;
    double now = now_s();
    if (done ? p->last == p->t0 : now - p->last < 0.5) return;
    p->last = now;
    double el = now - p->t0, rate = el > 0 ? (double)r->pairs / el : 0;
    if (done) {
        fprintf(p->f, "\r%s %s: %ld pairs in %.1f s (%.0f pairs/s)\033[K\n", p->what, r->ps, r->pairs, el, rate);
        return;
    }
    double at = r->pos_fd >= 0 ? (double)lseek(r->pos_fd, 0, SEEK_CUR) : 0, share = r->size > 0 ? at / r->size : 0;
    double left = share > 0.01 ? el * (1 - share) / share : 0;
    fprintf(p->f, "\r%s %s: %ld pairs, %.0f%%, %.0f pairs/s, %d:%02d left\033[K", p->what, r->ps, r->pairs, 100 * share, rate,
            (int)left / 60, (int)left % 60);
    fflush(p->f);
}

/* Every so many pairs: the progress line, and a stop a signal asked for. */
static S2sStatus progress_step(Progress *p, const PairReader *r, S2sError *err) {
    if (p->stop && atomic_load(p->stop))
        return s2s_fail(err, S2S_ERR_IO, "stopped by a signal while %s %s (line %ld); nothing was prepared", p->what, r->ps,
                        r->line);
    progress_draw(p, r, false);
    return S2S_OK;
}

/* ---- the text filters (the same in both passes) ---- */

/* The pairs kept so far (task.dedup), each by the first 128 bits of its SHA-256 digest: two
 * different pairs never share one, by chance or by design (a 64-bit FNV-1a did not promise it). */
typedef struct PairKey {
    uint64_t a, b;
} PairKey;

typedef struct Seen {
    HashIndex index;  /* a → the key's place in b (hash.h; empty until the first pair) */
    uint64_t *b;      /* the keys' second halves */
    int32_t n, cap;
} Seen;

typedef struct SeenLookup {
    const Seen *s;
    uint64_t b;
} SeenLookup;

static bool same_pair(const void *ctx, int32_t v) {
    const SeenLookup *l = ctx;
    return l->s->b[v] == l->b;
}

static bool seen_add(Seen *s, PairKey h) { /* false: there already */
    if (!s->index.cap) hash_index_init(&s->index, 1 << 15);
    if (hash_index_find(&s->index, h.a, same_pair, &(SeenLookup){s, h.b}) >= 0) return false;
    if (s->n == s->cap) s->b = s2s_xrealloc(s->b, (size_t)(s->cap = s->cap ? 2 * s->cap : 1 << 15) * sizeof *s->b);
    s->b[s->n] = h.b;
    hash_index_add(&s->index, h.a, s->n++);
    return true;
}

static void seen_free(Seen *s) {
    hash_index_free(&s->index);
    free(s->b);
}

static PairKey pair_digest(const char *s, const char *t) {
    DigestCtx c;
    digest_init(&c);
    digest_str(&c, s); /* a byte no UTF-8 text has after each: the two sides stay apart */
    digest_str(&c, t);
    Digest d = digest_final(&c);
    PairKey k;
    memcpy(&k, d.b, sizeof k);
    return k;
}

/* Token counts a pair may not exceed (ls, lt: the sides' tokens, target markers excluded). */
static DropReason length_check(const ConfigTask *t, int ls, int lt) {
    int lo = ls < lt ? ls : lt, hi = ls < lt ? lt : ls;
    if (hi > CORPUS_MAX_LEN || (t->max_train_len > 0 && hi > t->max_train_len)) return DROP_TOO_LONG;
    if (t->max_length_ratio > 0 && lo > 0 && hi > t->max_length_ratio * lo) return DROP_RATIO;
    return DROP_REASONS;
}

static void count_drop(CorpusCounts *c, DropReason why, long line, int corpus) {
    if (!c->dropped[why]++) {
        c->first[why] = line;
        c->first_corpus[why] = corpus;
    }
}

/* The text's verdict on the pair just read: DROP_REASONS keeps it. words: lengths in words
 * decide here (no subword model). */
static DropReason text_check(const ConfigTask *t, const PairReader *r, Seen *seen, bool words) {
    if (r->bad_utf8) return DROP_NOT_UTF8;
    if (r->long_side) return DROP_TOO_LONG;
    int ls = data_count_tokens(r->s), lt = data_count_tokens(r->t_line);
    if (!ls || !lt) return DROP_EMPTY;
    if (words) {
        DropReason why = length_check(t, ls, lt);
        if (why != DROP_REASONS) return why;
    }
    if (t->dedup && !seen_add(seen, pair_digest(r->s, r->t_line))) return DROP_DUPLICATE;
    return DROP_REASONS;
}

void corpus_counts_text(const CorpusCounts *c, const ConfigTask *t, char *out, size_t n) {
    TrainCorpora names;
    S2sError ignored;
    bool several = config_train_corpora(t, &names, &ignored) && names.n > 1;
    int k = snprintf(out, n, "%ld of %ld left out", c->read - c->kept, c->read);
    const char *sep = ": ";
    for (int i = 0; i < DROP_REASONS && k >= 0 && (size_t)k < n; i++)
        if (c->dropped[i]) {
            k += snprintf(out + k, n - (size_t)k, "%s%ld %s (the first on line %ld%s%s)", sep, c->dropped[i], DROP_NAMES[i],
                          c->first[i], several ? " of " : "", several ? names.prefix[c->first_corpus[i]] : "");
            sep = ", ";
        }
}

/* ---- vocabularies ---- */

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

static void vocab_from_counts(Vocab *out, const Vocab *seen, const long *count, int min_freq, int max_vocab) {
    int m = seen->size - TOK_SPECIALS;
    Count *c = s2s_xmalloc((size_t)(m > 0 ? m : 1) * sizeof *c);
    for (int i = 0; i < m; i++) c[i] = (Count){seen->tokens[TOK_SPECIALS + i], count[TOK_SPECIALS + i]};
    qsort(c, (size_t)m, sizeof *c, cmp_count);
    vocab_init(out);
    for (int i = 0; i < m; i++) {
        if (c[i].n < min_freq) break;
        if (max_vocab > 0 && out->size - TOK_SPECIALS >= max_vocab) break;
        vocab_add(out, c[i].tok);
    }
    free(c);
}

static void count_words(Vocab *seen, long **count, int *cap, const char *line, char ***toks, int *tcap) {
    char *copy = strdup(line);
    int k = text_split(copy, toks, tcap);
    for (int j = 0; j < k; j++) vocab_count(seen, (*toks)[j], count, cap);
    free(copy);
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

static S2sStatus learn_bpe(SubwordModel **out, char *const *lines, size_t n, const ConfigTask *t, const char *what,
                           const atomic_int *stop, S2sError *err) {
    Bpe *b = s2s_xmalloc(sizeof *b);
    bpe_init(b);
    BpeLearnOpts o = {.merges = t->bpe_vocab_size ? 0 : t->bpe_merges, .vocab_size = t->bpe_vocab_size, .min_count = 2,
                      .stop = stop};
    int learned;
    S2sStatus st = bpe_learn(b, lines, n, &o, &learned, err);
    if (st == S2S_ERR_IO) { /* stopped */
        bpe_free(b);
        free(b);
        return st;
    }
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

static S2sStatus read_model(const char *path, Subword kind, SubwordModel **m, S2sError *err) {
    char *bytes;
    size_t len;
    S2sStatus st = file_read_all(path, (size_t)1 << 30, &bytes, &len, err);
    if (st) return st;
    st = subword_from_bytes(m, task_subword_kind(kind), bytes, len, path, err);
    free(bytes);
    return st;
}

/* The sample BPE learns from: the first task.subword_sample kept pairs' places filled, then
 * each later pair takes a random place with the right odds (reservoir sampling, data_seed). */
typedef struct Sample {
    char **src, **trg;
    long *index;
    long n, cap, seen;
    Rng rng;
} Sample;

static void sample_add(Sample *s, const char *src, const char *trg) {
    long at = s->seen < s->cap ? s->seen : -1;
    if (at < 0) { /* seen < 2^31: a Dataset counts its pairs in an int */
        long j = (long)rng_below(&s->rng, (uint32_t)(s->seen + 1));
        if (j < s->cap) at = j;
    }
    if (at >= 0) {
        if (at == s->n) s->n++;
        else free(s->src[at]), free(s->trg[at]);
        s->src[at] = strdup(src);
        s->trg[at] = strdup(trg);
        s->index[at] = s->seen;
    }
    s->seen++;
}

static void sample_free(Sample *s) {
    text_free_lines(s->src, (int)s->n);
    text_free_lines(s->trg, (int)s->n);
    free(s->index);
}

static int by_first(const void *a, const void *b) {
    long x = ((const long *)a)[0], y = ((const long *)b)[0];
    return x < y ? -1 : x > y;
}

/* The sample back in the files' order (the order BPE learning breaks ties in). */
static void sample_sort(Sample *s) {
    long (*key)[2] = s2s_xmalloc((size_t)(s->n ? s->n : 1) * sizeof *key);
    for (long i = 0; i < s->n; i++) key[i][0] = s->index[i], key[i][1] = i;
    qsort(key, (size_t)s->n, sizeof *key, by_first);
    char **a = s2s_xmalloc((size_t)(s->n ? s->n : 1) * sizeof *a), **b = s2s_xmalloc((size_t)(s->n ? s->n : 1) * sizeof *b);
    for (long i = 0; i < s->n; i++) a[i] = s->src[key[i][1]], b[i] = s->trg[key[i][1]], s->index[i] = key[i][0];
    free(s->src);
    free(s->trg);
    s->src = a;
    s->trg = b;
    free(key);
}

static S2sStatus learn_from_sample(TaskData *td, const ConfigTask *t, Sample *s, const atomic_int *stop, S2sError *err) {
    sample_sort(s);
    SubwordModel *m = NULL, *mt = NULL;
    S2sStatus st;
    if (t->bpe_joint) {
        char **both = s2s_xmalloc((size_t)(2 * s->n + 1) * sizeof *both);
        for (long i = 0; i < s->n; i++) both[2 * i] = s->src[i], both[2 * i + 1] = s->trg[i];
        st = learn_bpe(&m, both, (size_t)(2 * s->n), t, "", stop, err);
        free(both);
    } else {
        char what[64];
        snprintf(what, sizeof what, "the source side (%s): ", t->src_lang);
        st = learn_bpe(&m, s->src, (size_t)s->n, t, what, stop, err);
        snprintf(what, sizeof what, "the target side (%s): ", t->trg_lang);
        if (!st) st = learn_bpe(&mt, s->trg, (size_t)s->n, t, what, stop, err);
    }
    if (st) {
        subword_free(m);
        return st;
    }
    attach_model(td, m, mt);
    return S2S_OK;
}

static S2sStatus no_pairs(const PairReader *r, const CorpusCounts *c, S2sError *err) {
    char why[400];
    corpus_counts_text(c, r->t, why, sizeof why);
    return s2s_fail(err, S2S_ERR_DATA, "%s, %s: no usable training pair (%s)", r->ps, r->pt, why);
}

S2sStatus corpus_vocab(TaskData *td, const ConfigTask *t, const TaskLoadHooks *hooks, S2sError *err) {
    if (t->subword == SUBWORD_SENTENCEPIECE || (t->subword == SUBWORD_BPE && t->bpe_model[0])) { /* the user's, for both */
        SubwordModel *m;
        S2sStatus st = t->subword == SUBWORD_SENTENCEPIECE ? read_model(t->spm_model, SUBWORD_SENTENCEPIECE, &m, err)
                                                           : read_model(t->bpe_model, SUBWORD_BPE, &m, err);
        if (!st) attach_model(td, m, NULL);
        return st;
    }
    bool words = t->subword == SUBWORD_NONE;
    PairReader r;
    S2sStatus st = reader_open(&r, t, true, err);
    if (st) return st;
    Progress pg = {hooks ? hooks->progress : NULL, hooks ? hooks->stop : NULL, words ? "counting words in" : "sampling", 0, 0};
    pg.t0 = pg.last = now_s();
    Seen seen = {0};
    Vocab vs, vt;
    vocab_init(&vs);
    vocab_init(&vt);
    long *cs = NULL, *ct = NULL;
    int caps = 0, capt = 0, tcap = 0;
    char **toks = NULL;
    Sample sample = {0};
    sample.cap = t->subword_sample > 0 ? t->subword_sample : 1;
    if (!words) {
        sample.src = s2s_xmalloc((size_t)sample.cap * sizeof *sample.src);
        sample.trg = s2s_xmalloc((size_t)sample.cap * sizeof *sample.trg);
        sample.index = s2s_xmalloc((size_t)sample.cap * sizeof *sample.index);
        rng_init(&sample.rng, (uint64_t)t->data_seed, RNG_STREAM_DATA);
    }
    CorpusCounts c = {0};
    for (bool more = true;;) {
        if ((st = reader_next(&r, &more, err)) || !more) break;
        c.read++;
        DropReason why = text_check(t, &r, &seen, words);
        if (why != DROP_REASONS) {
            count_drop(&c, why, r.line, r.corpus);
            continue;
        }
        c.kept++;
        if (words) {
            count_words(&vs, &cs, &caps, r.s, &toks, &tcap);
            count_words(&vt, &ct, &capt, r.t_line, &toks, &tcap);
        } else {
            sample_add(&sample, r.s, r.t_line);
        }
        if (!(r.pairs & 1023) && (st = progress_step(&pg, &r, err))) break;
    }
    if (!st) progress_draw(&pg, &r, true);
    if (!st && c.kept == 0) st = no_pairs(&r, &c, err);
    if (!st && words) {
        vocab_from_counts(&td->src_vocab, &vs, cs, t->min_freq, t->max_vocab);
        vocab_from_counts(&td->trg_vocab, &vt, ct, t->min_freq, t->max_vocab);
    } else if (!st) {
        st = learn_from_sample(td, t, &sample, hooks ? hooks->stop : NULL, err);
    }
    sample_free(&sample);
    seen_free(&seen);
    free(cs);
    free(ct);
    free(toks);
    vocab_free(&vs);
    vocab_free(&vt);
    reader_close(&r);
    return st;
}

/* ---- encoding, a chunk of pairs at a time on the threads ---- */

enum { CHUNK = 8192 };

typedef struct Chunk {
    const TaskData *td;
    char *text;           /* the chunk's lines back to back, NUL-terminated */
    size_t len, cap;
    size_t src_at[CHUNK], trg_at[CHUNK];
    long line[CHUNK];
    int corpus[CHUNK];
    int32_t *ids[CHUNK][2];
    int cap_ids[CHUNK][2], n_ids[CHUNK][2];
    int n;
} Chunk;

static size_t chunk_put(Chunk *ch, const char *s) {
    size_t k = strlen(s) + 1, at = ch->len;
    if (ch->len + k > ch->cap) {
        while (ch->len + k > ch->cap) ch->cap = ch->cap ? 2 * ch->cap : 1 << 20;
        ch->text = s2s_xrealloc(ch->text, ch->cap);
    }
    memcpy(ch->text + at, s, k);
    ch->len += k;
    return at;
}

static void chunk_encode(void *ctx, size_t b, size_t e) {
    Chunk *ch = ctx;
    for (size_t i = b; i < e; i++) {
        ch->n_ids[i][0] = data_encode_line(&ch->td->src_vocab, ch->text + ch->src_at[i], false, 0, NULL, &ch->ids[i][0],
                                           &ch->cap_ids[i][0]);
        ch->n_ids[i][1] = data_encode_line(&ch->td->trg_vocab, ch->text + ch->trg_at[i], true, 0, NULL, &ch->ids[i][1],
                                           &ch->cap_ids[i][1]);
    }
}

/* The chunk's pairs encoded, the length filters applied, the kept ones to the sink. */
static S2sStatus chunk_flush(Chunk *ch, const ConfigTask *t, const CorpusSink *sink, CorpusCounts *c, S2sError *err) {
    par_for((size_t)ch->n, PAR_MIN_WORK, chunk_encode, ch);
    S2sStatus st = S2S_OK;
    for (int i = 0; i < ch->n && !st; i++) {
        int ns = ch->n_ids[i][0], nt = ch->n_ids[i][1];
        DropReason why = ns == 0 || nt <= 2 ? DROP_EMPTY : length_check(t, ns, nt - 2);
        if (why != DROP_REASONS) {
            count_drop(c, why, ch->line[i], ch->corpus[i]);
            continue;
        }
        if (c->kept == 2000000000) /* a Dataset counts its pairs in an int */
            return s2s_fail(err, S2S_ERR_DATA, "more than %ld training pairs", c->kept);
        c->kept++;
        c->kept_by[ch->corpus[i]]++;
        st = sink->pair(sink->ctx, ch->ids[i][0], ns, ch->ids[i][1], nt, ch->text + ch->src_at[i], ch->text + ch->trg_at[i], err);
    }
    ch->n = 0;
    ch->len = 0;
    return st;
}

S2sStatus corpus_encode(const TaskData *td, const ConfigTask *t, const CorpusSink *sink, const TaskLoadHooks *hooks, CorpusCounts *c,
                        S2sError *err) {
    memset(c, 0, sizeof *c);
    PairReader r;
    S2sStatus st = reader_open(&r, t, false, err);
    if (st) return st;
    Progress pg = {hooks ? hooks->progress : NULL, hooks ? hooks->stop : NULL, "encoding", 0, 0};
    pg.t0 = pg.last = now_s();
    bool words = !td->src_vocab.sub;
    Seen seen = {0};
    Chunk *ch = s2s_xcalloc(1, sizeof *ch);
    ch->td = td;
    for (bool more = true; !st;) {
        if ((st = reader_next(&r, &more, err)) || !more) break;
        c->read++;
        DropReason why = text_check(t, &r, &seen, words);
        if (why != DROP_REASONS) {
            count_drop(c, why, r.line, r.corpus);
            continue;
        }
        ch->src_at[ch->n] = chunk_put(ch, r.s);
        ch->trg_at[ch->n] = chunk_put(ch, r.t_line);
        ch->corpus[ch->n] = r.corpus;
        ch->line[ch->n++] = r.line;
        if (ch->n == CHUNK && !(st = chunk_flush(ch, t, sink, c, err))) st = progress_step(&pg, &r, err);
    }
    if (!st && ch->n) st = chunk_flush(ch, t, sink, c, err);
    if (!st) progress_draw(&pg, &r, true);
    if (!st && c->kept == 0) st = no_pairs(&r, c, err);
    for (int i = 0; i < CHUNK; i++) free(ch->ids[i][0]), free(ch->ids[i][1]);
    free(ch->text);
    free(ch);
    seen_free(&seen);
    reader_close(&r);
    return st;
}
