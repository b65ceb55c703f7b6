/* distill.c — the teacher's translations of the training sources, made once into the cache
 * folder and resumed where a stop left them (distill.h). */
#include "run_internal.h" /* run_now */
#include "s2s/distill.h"
#include "s2s/file.h"
#include "s2s/prepared.h"
#include "s2s/tape.h"
#include "s2s/translator.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct Teacher {
    int n;
    char path[MODEL_MAX_ENSEMBLE][CONFIG_STR];
    Seq2Seq m[MODEL_MAX_ENSEMBLE];
    Config cfg[MODEL_MAX_ENSEMBLE];
    Vocab src[MODEL_MAX_ENSEMBLE], trg[MODEL_MAX_ENSEMBLE];
    Tape tape[MODEL_MAX_ENSEMBLE];
    Digest digest[MODEL_MAX_ENSEMBLE]; /* of the bytes each model was loaded from */
    int loaded, taped;
} Teacher;

static void teacher_free(Teacher *t) {
    for (int k = 0; k < t->taped; k++) tape_free(&t->tape[k]);
    for (int k = 0; k < t->loaded; k++) {
        model_free(&t->m[k]);
        vocab_free(&t->src[k]);
        vocab_free(&t->trg[k]);
    }
    free(t);
}

/* task.teacher's comma-separated files into t->path. */
static S2sStatus teacher_paths(Teacher *t, const char *list, S2sError *err) {
    for (const char *p = list;;) {
        while (*p == ' ') p++;
        size_t len = strcspn(p, ",");
        while (len && p[len - 1] == ' ') len--;
        if (len == 0 || len >= CONFIG_STR || t->n == MODEL_MAX_ENSEMBLE)
            return s2s_fail(err, S2S_ERR_CONFIG, "task.teacher: expected model files separated by commas (%d at most), got \"%s\"",
                            MODEL_MAX_ENSEMBLE, list);
        snprintf(t->path[t->n++], CONFIG_STR, "%.*s", (int)len, p);
        p += strcspn(p, ",");
        if (!*p) return S2S_OK;
        p++;
    }
}

/* Model k from its file, and the digest of the very bytes it was made from: one descriptor for
 * both (a teacher still training renames a new model.bin over the path, which leaves this
 * descriptor on the old file), and a file written in place meanwhile is refused. */
static S2sStatus teacher_read(Teacher *t, int k, S2sError *err) {
    int fd;
    S2sStatus st = file_open_regular(t->path[k], O_RDONLY, &fd, err);
    if (st) return st;
    FileStamp before, after; /* equal stamps before and after: the same bytes (file.h) */
    if (!file_stamp(fd, &before)) st = s2s_fail(err, S2S_ERR_IO, "%s: %s", t->path[k], strerror(errno));
    if (!st) st = digest_fd(fd, &t->digest[k], t->path[k], err);
    if (!st) st = model_load_fd(&t->m[k], &t->cfg[k], &t->src[k], &t->trg[k], fd, t->path[k], err);
    if (!st) t->loaded++;
    if (!st && (!file_stamp(fd, &after) || !file_stamp_equal(&before, &after)))
        st = s2s_fail(err, S2S_ERR_IO, "%s: the file changed while it was read (a teacher still training writes it); try again",
                      t->path[k]);
    close(fd);
    return st;
}

/* The teacher's models loaded, frozen, each with its tape, agreeing as an ensemble. */
static S2sStatus teacher_load(Teacher *t, const ConfigTask *task, const ConfigTrain *tc, S2sError *err) {
    Precision prec = task->teacher_precision;
    for (int k = 0; k < t->n; k++) {
        S2sStatus st = teacher_read(t, k, err);
        if (st) return st;
        if (k && (st = translator_check_ensemble(&t->cfg[0], &t->src[0], &t->trg[0], &t->cfg[k], &t->src[k], &t->trg[k],
                                                 t->path[k], err)))
            return st;
        if ((st = tape_init_engine(&t->tape[k], prec, t->cfg[k].train.gemm, tc->threads, "task.teacher_precision bf16", err)))
            return st;
        t->taped++;
        params_freeze(&t->m[k].params, prec == PRECISION_BF16);
    }
    return S2S_OK;
}

/* One side's vocabulary against the teacher's: the student learns the teacher's pieces. */
static S2sStatus same_vocab(const Vocab *student, const Vocab *teacher, const char *side, const char *path,
                            const ConfigTask *st, const ConfigTask *tt, S2sError *err) {
    int at = vocab_first_difference(student, teacher->tokens, teacher->size);
    if (at < 0) return S2S_OK;
    return s2s_fail(err, S2S_ERR_CONFIG,
                    "task.teacher: %s has a %s vocabulary of %d entries (%s, %d merges, from %s/%s), the student's task "
                    "makes one of %d (%s, %d merges, from %s/%s); they differ at entry %d (\"%s\" against \"%s\"). A "
                    "student learns its teacher's pieces: give it the teacher's task settings",
                    path, side, teacher->size, SUBWORD_NAMES[tt->subword], tt->bpe_merges, tt->data_dir, tt->train_prefix,
                    student->size, SUBWORD_NAMES[st->subword], st->bpe_merges, st->data_dir, st->train_prefix, at,
                    at < teacher->size ? teacher->tokens[at] : "(none)", at < student->size ? student->tokens[at] : "(none)");
}

/* The student's vocabularies (its original data, loaded through the cache) against the teacher's. */
static S2sStatus check_vocab(const Teacher *t, const ConfigTask *student, const TaskLoadHooks *hooks, S2sError *err) {
    const ConfigTask *tt = &t->cfg[0].task;
    if (tt->type != TASK_TRANSLATE || strcmp(tt->src_lang, student->src_lang) || strcmp(tt->trg_lang, student->trg_lang))
        return s2s_fail(err, S2S_ERR_CONFIG, "task.teacher: %s translates %s (%s → %s), the student %s → %s", t->path[0],
                        TASK_TYPE_NAMES[tt->type], tt->src_lang, tt->trg_lang, student->src_lang, student->trg_lang);
    if (tt->subword != student->subword)
        return s2s_fail(err, S2S_ERR_CONFIG, "task.teacher: %s reads task.subword %s, the student's task.subword is %s; a "
                        "student learns its teacher's pieces", t->path[0], SUBWORD_NAMES[tt->subword],
                        SUBWORD_NAMES[student->subword]);
    ConfigTask plain = *student;
    plain.teacher[0] = plain.teacher_output[0] = '\0';
    TaskData td;
    S2sStatus st = task_load_hooks(&td, &plain, hooks, err);
    if (st) return st;
    st = same_vocab(&td.src_vocab, &t->src[0], "source", t->path[0], student, tt, err);
    if (!st) st = same_vocab(&td.trg_vocab, &t->trg[0], "target", t->path[0], student, tt, err);
    task_free(&td);
    return st;
}

/* cache_dir/KEY.teacher.LANG: KEY the SHA-256 digest of the teacher's beam, α, length limit and
 * precision, of the bytes each teacher model was loaded from (not of its file as it is now: a
 * teacher still training replaces it), of the source file's bytes and of task.train_max_lines
 * where it cuts them. Not of the build: a new build does not translate again. */
static S2sStatus output_path(const Teacher *t, const ConfigTask *task, const char *source, int max_len, char *out,
                             size_t n, S2sError *err) {
    char settings[144];
    int at = snprintf(settings, sizeof settings, "distill 2|%d|%.9g|%d|%s|%d|%s", task->teacher_beam,
                     (double)task->teacher_alpha, max_len, task->trg_lang, task->teacher_nbest,
                     PRECISION_NAMES[task->teacher_precision]);
    if (task->train_max_lines > 0) snprintf(settings + at, sizeof settings - (size_t)at, "|first %d", task->train_max_lines);
    DigestCtx c;
    digest_init(&c);
    digest_str(&c, settings);
    for (int k = 0; k < t->n; k++) digest_update(&c, t->digest[k].b, DIGEST_BYTES);
    Digest src;
    S2sStatus st = digest_file(source, &src, err);
    if (st) return st;
    digest_update(&c, src.b, DIGEST_BYTES);
    Digest key = digest_final(&c);
    char suffix[CONFIG_STR + 16];
    snprintf(suffix, sizeof suffix, ".teacher.%s", task->trg_lang);
    prepared_name(out, n, task->cache_dir, &key, suffix);
    if (strlen(task->cache_dir) + 1 + PREPARED_NAME_HEX + strlen(suffix) >= n)
        return s2s_fail(err, S2S_ERR_CONFIG, "task.cache_dir: \"%s\" is too long a folder name for the teacher's file",
                        task->cache_dir);
    return S2S_OK;
}

/* The lines a file has, or max when it has more (max > 0: task.train_max_lines). */
static S2sStatus count_lines(const char *path, long max, long *n, S2sError *err) {
    *n = 0;
    FILE *f = text_open(path, NULL);
    if (!f) return s2s_fail(err, S2S_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    LineReader lr;
    line_reader_init(&lr, f, TEXT_MAX_LINE);
    const char *s;
    size_t len;
    LineStatus ls = LINE_EOF;
    while ((max <= 0 || *n < max) && ((ls = line_read(&lr, &s, &len)) == LINE_OK || ls == LINE_TOO_LONG)) ++*n;
    line_reader_free(&lr);
    fclose(f);
    if (max > 0 && *n == max) return S2S_OK;
    if (ls != LINE_EOF) return s2s_fail(err, S2S_ERR_DATA, "%s:%ld: cannot be read as text", path, *n + 1);
    return S2S_OK;
}

/* Whether a cached translations file is whole: n_best lines for each of the source's, the last
 * one ended (write_block ends every line). A file cut, extended or unreadable is made again. */
static bool output_whole(const char *path, const char *source, long max, int n_best, char *why, size_t n_why) {
    long have = 0, sources = 0;
    S2sError e;
    if (count_lines(path, 0, &have, &e) || count_lines(source, max, &sources, &e)) {
        snprintf(why, n_why, "%.*s", (int)(n_why > 1 ? n_why - 1 : 0), e.msg);
        return false;
    }
    struct stat sb;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    char last = '\n';
    bool ended = fd >= 0 && fstat(fd, &sb) == 0 && (sb.st_size == 0 || pread(fd, &last, 1, sb.st_size - 1) == 1) && last == '\n';
    if (fd >= 0) close(fd);
    if (have == sources * n_best && ended) return true;
    snprintf(why, n_why, "%ld lines%s, expected %ld", have, ended ? "" : " (the last one cut)", sources * n_best);
    return false;
}

/* Whether descriptor fd is the file at path. */
static bool is_file(int fd, const char *path) {
    struct stat a, b;
    return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* The .part file opened and locked, waiting (a second a look, a stop heeded) for another s2s
 * that translates into it (./compare's jobs of one teacher); *finished when that one made the
 * whole file meanwhile (nothing to do), else the .part cut after its last whole line and *done
 * its lines. */
static S2sStatus part_open(const char *part, const char *path, int per_line, int *fd, long *done, bool *finished, FILE *log,
                           const TaskLoadHooks *hooks, S2sError *err) {
    *finished = false;
    *fd = open(part, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    struct stat sb;
    if (*fd >= 0 && (fstat(*fd, &sb) != 0 || !S_ISREG(sb.st_mode))) { /* a FIFO or device planted in the cache: not ours */
        close(*fd);
        unlink(part);
        *fd = open(part, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    }
    if (*fd < 0) return s2s_fail(err, S2S_ERR_IO, "%s: cannot open: %s", part, strerror(errno));
    int fl = fcntl(*fd, F_GETFL);
    if (fl >= 0) fcntl(*fd, F_SETFL, fl & ~O_NONBLOCK);
    for (bool said = false; flock(*fd, LOCK_EX | LOCK_NB) != 0;) {
        if (errno != EWOULDBLOCK && errno != EINTR) return s2s_fail(err, S2S_ERR_IO, "%s: cannot lock: %s", part, strerror(errno));
        if (!said && log) fprintf(log, "teacher: another s2s translates into %s; waiting for it\n", part), fflush(log);
        said = true;
        if (hooks && hooks->stop && atomic_load(hooks->stop)) return s2s_fail(err, S2S_ERR_IO, "stopped while waiting for %s", part);
        sleep(1);
    }
    if (file_is_regular(path)) { /* the other one finished: its .part is the file now, or this one is new and empty */
        if (!is_file(*fd, path) && is_file(*fd, part)) unlink(part);
        *finished = true;
        return S2S_OK;
    }
    char buf[1 << 16];
    off_t at = 0, whole = 0;
    ssize_t k;
    long lines = 0;
    *done = 0;
    while ((k = read(*fd, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < k; i++)
            if (buf[i] == '\n' && ++lines % per_line == 0) ++*done, whole = at + i + 1; /* a source's last translation */
        at += k;
    }
    if (k < 0 || ftruncate(*fd, whole) != 0 || lseek(*fd, whole, SEEK_SET) != whole)
        return s2s_fail(err, S2S_ERR_IO, "%s: cannot read or cut: %s", part, strerror(errno));
    return S2S_OK;
}

/* One block's translations appended and synced: the n best of each line, best first, "" for
 * one the beam did not find or a line without any (the corpus filters drop an empty target),
 * line breaks in an output made spaces. */
static S2sStatus write_block(FILE *f, const TranslatedLine *out, int n, int n_best, const char *part, S2sError *err) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n_best; j++) {
            const char *text = out[i].status == S2S_OK && out[i].text[j] ? out[i].text[j] : "";
            for (const char *p = text; *p; p++) fputc(*p == '\n' || *p == '\r' ? ' ' : *p, f);
            fputc('\n', f);
        }
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) return s2s_fail(err, S2S_ERR_IO, "%s: cannot write: %s", part, strerror(errno));
    return S2S_OK;
}

typedef struct Block {
    char *line[DISTILL_BLOCK];
    TranslatedLine out[DISTILL_BLOCK];
} Block;

/* Source lines done .. total translated into f, a block at a time. */
static S2sStatus translate_rest(const Translator *tr, const char *source, FILE *f, const char *part, long done, long total,
                                const TaskLoadHooks *hooks, S2sError *err) {
    FILE *in = text_open(source, NULL);
    if (!in) return s2s_fail(err, S2S_ERR_IO, "%s: cannot open: %s", source, strerror(errno));
    LineReader lr;
    line_reader_init(&lr, in, TEXT_MAX_LINE);
    Block *b = s2s_xcalloc(1, sizeof *b);
    S2sStatus st = S2S_OK;
    const char *s;
    size_t len;
    for (long i = 0; i < done && !st; i++) {
        LineStatus ls = line_read(&lr, &s, &len);
        if (ls != LINE_OK && ls != LINE_TOO_LONG) st = s2s_fail(err, S2S_ERR_DATA, "%s: fewer than %ld lines now", source, total);
    }
    double t0 = run_now();
    for (long at = done; at < total && !st;) {
        int n = 0;
        for (; n < DISTILL_BLOCK && at + n < total; n++) {
            LineStatus ls = line_read(&lr, &s, &len);
            if (ls == LINE_EOF || ls == LINE_ERROR || ls == LINE_ENDLESS) {
                st = s2s_fail(err, S2S_ERR_DATA, "%s: %ld lines, %ld before; changed under the run?", source, at + n, total);
                break;
            }
            b->line[n] = NULL; /* too long, or a NUL byte: no output */
            if (ls == LINE_OK && strlen(s) == len) memcpy(b->line[n] = s2s_xmalloc(len + 1), s, len + 1);
        }
        if (!st) {
            translator_run(tr, (const char *const *)b->line, n, at, b->out);
            st = write_block(f, b->out, n, tr->n_best, part, err);
            translator_free_results(b->out, n);
        }
        for (int i = 0; i < n; i++) free(b->line[i]);
        at += n;
        if (hooks && hooks->progress)
            fprintf(hooks->progress, "\rteacher: %ld of %ld lines, %.1f a second ", at, total, (double)(at - done) / (run_now() - t0 + 1e-9));
        if (!st && at < total && hooks && hooks->stop && atomic_load(hooks->stop))
            st = s2s_fail(err, S2S_ERR_IO, "stopped: the teacher translated %ld of %ld lines into %s; the same command goes on "
                          "from there", at, total, part);
    }
    if (hooks && hooks->progress) fputc('\n', hooks->progress);
    free(b);
    line_reader_free(&lr);
    fclose(in);
    return st;
}

/* The translations into path (through path.part, resumed), then renamed into place. */
static S2sStatus make_output(Teacher *t, const ConfigTask *task, const char *source, const char *path, int max_len,
                             FILE *log, const TaskLoadHooks *hooks, S2sError *err) {
    long total;
    S2sStatus st = count_lines(source, task->train_max_lines, &total, err);
    if (st || (st = file_mkdirs(task->cache_dir, err))) return st;
    char part[CONFIG_STR + 8];
    snprintf(part, sizeof part, "%s.part", path);
    int fd;
    long done = 0;
    bool finished;
    if ((st = part_open(part, path, task->teacher_nbest, &fd, &done, &finished, log, hooks, err)) || finished) {
        if (fd >= 0) close(fd);
        if (!st && log) fprintf(log, "teacher: translations read from %s\n", path);
        return st;
    }
    if (done > total) {
        close(fd);
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s holds translations of %ld lines, more than the %ld of %s; delete it", part,
                        done, total, source);
    }
    if (log) {
        fprintf(log, "teacher: %s", t->path[0]);
        for (int k = 1; k < t->n; k++) fprintf(log, " + %s", t->path[k]);
        fprintf(log, " (beam %d, alpha %g", task->teacher_beam, (double)task->teacher_alpha);
        if (task->teacher_nbest > 1) fprintf(log, ", the %d best", task->teacher_nbest);
        if (task->teacher_precision != PRECISION_FP32) fprintf(log, ", %s", PRECISION_NAMES[task->teacher_precision]);
        fprintf(log, ") translate %ld training sources into %s", total - done, path);
        if (done) fprintf(log, " (%ld translated before)", done);
        fputc('\n', log);
        fflush(log);
    }
    Seq2Seq *more[MODEL_MAX_ENSEMBLE];
    Tape *more_t[MODEL_MAX_ENSEMBLE];
    for (int k = 1; k < t->n; k++) more[k - 1] = &t->m[k], more_t[k - 1] = &t->tape[k];
    Translator tr = translator_make(&t->m[0], &t->cfg[0], &t->src[0], &t->trg[0], &t->tape[0],
                                    &(DecodeSettings){task->teacher_beam, task->teacher_nbest, task->teacher_alpha, max_len, false, false});
    tr.more = more;
    tr.more_tapes = more_t;
    tr.n_more = t->n - 1;
    FILE *f = fdopen(fd, "a");
    if (!f) {
        close(fd);
        return s2s_fail(err, S2S_ERR_IO, "%s: %s", part, strerror(errno));
    }
    st = translate_rest(&tr, source, f, part, done, total, hooks, err);
    if (!st && rename(part, path) != 0) st = s2s_fail(err, S2S_ERR_IO, "%s: cannot rename to %s: %s", part, path, strerror(errno));
    fclose(f); /* the lock goes with it */
    if (!st) {
        char suffix[32];
        snprintf(suffix, sizeof suffix, ".teacher.%s", task->trg_lang);
        prepared_prune(task->cache_dir, suffix, DISTILL_KEEP);
    }
    return st;
}

S2sStatus distill_prepare(const Config *cfg, ConfigTask *task, FILE *log, const TaskLoadHooks *hooks, S2sError *err) {
    *task = cfg->task;
    if (cfg->task.type != TASK_TRANSLATE || !cfg->task.teacher[0]) return S2S_OK;
    TrainCorpora c;
    if (!config_train_corpora(&cfg->task, &c, err)) return S2S_ERR_CONFIG;
    char source[CONFIG_STR + 96], target[CONFIG_STR + 96], path[CONFIG_STR];
    task_split_paths(&cfg->task, c.prefix[0], source, target, sizeof source);
    Teacher *t = s2s_xcalloc(1, sizeof *t);
    S2sStatus st = teacher_paths(t, cfg->task.teacher, err);
    if (!st) st = teacher_load(t, &cfg->task, &cfg->train, err);
    if (!st) st = check_vocab(t, &cfg->task, hooks, err);
    int max_len = t->n ? t->cfg[0].train.max_decode_len : 0;
    if (!st) st = output_path(t, &cfg->task, source, max_len, path, sizeof path, err);
    char why[CONFIG_STR + 64];
    if (!st && file_is_regular(path) && !output_whole(path, source, cfg->task.train_max_lines, cfg->task.teacher_nbest, why, sizeof why)) {
        if (log) fprintf(log, "teacher: %s was damaged (%s): made again\n", path, why);
        unlink(path);
    }
    if (!st && !file_is_regular(path)) st = make_output(t, &cfg->task, source, path, max_len, log, hooks, err);
    else if (!st) {
        file_mark_used(path); /* the last to be pruned */
        if (log) fprintf(log, "teacher: translations read from %s\n", path);
    }
    if (!st) snprintf(task->teacher_output, sizeof task->teacher_output, "%s", path);
    teacher_free(t);
    return st;
}
