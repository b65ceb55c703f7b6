/* text.c — bounded line reading, UTF-8 validation, whitespace splitting. */
#define _GNU_SOURCE /* fopencookie: a gzip file read through the same line reader */
#include "s2s/text.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>
#include <stdlib.h>
#include <string.h>

bool utf8_valid(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        if (c < 0x80) {
            if (c == 0) return false;
            i++;
            continue;
        }
        int len;
        uint32_t cp, min;
        if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F, min = 0x80;
        else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F, min = 0x800;
        else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07, min = 0x10000;
        else return false;
        if (i + (size_t)len > n) return false;
        for (int k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return false;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += (size_t)len;
    }
    return true;
}

size_t utf8_next(const char *str, uint32_t *cp) {
    const unsigned char *p = (const unsigned char *)str;
    uint32_t c = p[0];
    size_t extra = c < 0x80 ? 0 : c < 0xE0 ? 1 : c < 0xF0 ? 2 : 3;
    if (extra) c &= 0x3Fu >> extra;
    for (size_t k = 1; k <= extra; k++) c = (c << 6) | (p[k] & 0x3Fu);
    *cp = c;
    return extra + 1;
}

size_t utf8_put(uint32_t c, char *out) {
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (char)(0xC0 | (c >> 6));
        out[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = (char)(0xE0 | (c >> 12));
        out[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        out[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (c >> 18));
    out[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    out[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

void line_reader_init(LineReader *r, FILE *f, size_t max) {
    memset(r, 0, sizeof *r);
    r->f = f;
    r->max = max;
    r->cap = max + 3 < 256 ? max + 3 : 256;
    r->buf = s2s_xmalloc(r->cap);
}

void line_reader_free(LineReader *r) {
    free(r->buf);
    memset(r, 0, sizeof *r);
}

LineStatus line_read(LineReader *r, const char **line, size_t *len) {
    int c;
    if (r->skipping) { /* the rest of the line that was too long, in constant memory and time */
        size_t skipped = 0;
        while ((c = getc_unlocked(r->f)) != EOF && c != '\n')
            if (++skipped == TEXT_MAX_SKIP) return LINE_ENDLESS; /* /dev/zero, a binary file */
        r->skipping = false;
        if (c == EOF) return ferror(r->f) ? LINE_ERROR : LINE_EOF;
    }
    size_t n = 0;
    /* the limit counts the line's own bytes; one more is kept to see a final CR */
    while ((c = getc_unlocked(r->f)) != EOF && c != '\n') {
        if (n == r->max + 1) { /* said at once: an endless line (/dev/zero) is not read to its end */
            r->line_no++;
            r->skipping = true;
            return LINE_TOO_LONG;
        }
        if (n + 2 > r->cap) {
            size_t nc = r->cap * 2 < r->max + 3 ? r->cap * 2 : r->max + 3;
            r->buf = s2s_xrealloc(r->buf, nc);
            r->cap = nc;
        }
        r->buf[n++] = (char)c;
    }
    if (c == EOF && ferror(r->f)) return LINE_ERROR;
    if (c == EOF && n == 0) return LINE_EOF;
    r->line_no++;
    if (n && r->buf[n - 1] == '\r') n--;
    if (r->line_no == 1 && n >= 3 && !memcmp(r->buf, "\xEF\xBB\xBF", 3)) { /* a UTF-8 BOM: a mark, not text */
        n -= 3;
        memmove(r->buf, r->buf + 3, n);
    }
    if (n > r->max) return LINE_TOO_LONG; /* max + 1 bytes then the newline */
    r->buf[n] = '\0';
    *line = r->buf;
    *len = n;
    return LINE_OK;
}

void text_free_lines(char **lines, int n) {
    if (!lines) return;
    for (int i = 0; i < n; i++) free(lines[i]);
    free(lines);
}

/* gzread returns 0 at the end of the input even when its stream did not end there (cut
 * short, however cleanly: after a full flush every line before looks whole); gzerror says so. */
static ssize_t gz_cookie_read(void *cookie, char *buf, size_t n) {
    unsigned chunk = n > (1u << 30) ? 1u << 30 : (unsigned)n;
    int k = gzread((gzFile)cookie, buf, chunk), e = Z_OK;
    if (k == 0) gzerror((gzFile)cookie, &e);
    if (k < 0 || e == Z_BUF_ERROR || (e != Z_OK && e != Z_STREAM_END)) {
        errno = EBADMSG; /* text_strerror names it */
        return -1;
    }
    return k;
}

const char *text_strerror(int e) {
    return e == EBADMSG ? "its gzip stream is damaged or cut short (the file ends before the stream does)" : strerror(e);
}

static int gz_cookie_close(void *cookie) { return gzclose_r((gzFile)cookie) == Z_OK ? 0 : EOF; }

static bool ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && !strcmp(s + n - k, tail);
}

FILE *text_open(const char *path, int *pos_fd) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    int pos = pos_fd ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1; /* shares the file offset */
    FILE *f = NULL;
    if (ends_with(path, ".gz")) {
        gzFile g = gzdopen(fd, "rb");
        if (g && !(f = fopencookie(g, "rb", (cookie_io_functions_t){.read = gz_cookie_read, .close = gz_cookie_close})))
            gzclose_r(g);
        if (!g) close(fd);
    } else if (!(f = fdopen(fd, "rb"))) {
        close(fd);
    }
    if (!f && pos >= 0) close(pos);
    if (pos_fd) *pos_fd = f ? pos : -1;
    return f;
}

S2sStatus text_read_lines(const char *path, char ***out, int *n_out, S2sError *err) {
    FILE *f = text_open(path, NULL);
    if (!f) return s2s_fail(err, S2S_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    LineReader r;
    line_reader_init(&r, f, TEXT_MAX_LINE);
    char **lines = NULL;
    int n = 0, cap = 0;
    S2sStatus st = S2S_OK;
    for (;;) {
        const char *line;
        size_t len;
        LineStatus ls = line_read(&r, &line, &len);
        if (ls == LINE_EOF) break;
        if (ls == LINE_ERROR) {
            st = s2s_fail(err, S2S_ERR_IO, "%s: read error: %s", path, text_strerror(errno));
            break;
        }
        if (ls == LINE_TOO_LONG) {
            st = s2s_fail(err, S2S_ERR_DATA, "%s:%ld: longer than %zu bytes; not a text file of sentences?", path, r.line_no,
                          TEXT_MAX_LINE);
            break;
        }
        if (!utf8_valid(line, len)) {
            st = s2s_fail(err, S2S_ERR_DATA, "%s:%ld: not valid UTF-8 text", path, r.line_no);
            break;
        }
        if (n == 2000000000) {
            st = s2s_fail(err, S2S_ERR_DATA, "%s: more than %d lines", path, n);
            break;
        }
        if (n == cap) lines = s2s_xrealloc(lines, (size_t)(cap = cap ? 2 * cap : 1024) * sizeof *lines);
        lines[n] = s2s_xmalloc(len + 1);
        memcpy(lines[n], line, len + 1);
        n++;
    }
    line_reader_free(&r);
    fclose(f);
    if (st) {
        text_free_lines(lines, n);
        return st;
    }
    *out = lines;
    *n_out = n;
    return S2S_OK;
}

int text_split(char *line, char ***toks, int *cap) {
    int n = 0;
    for (char *p = line; *p;) {
        while (text_is_space(*p)) *p++ = '\0';
        if (!*p) break;
        if (n == *cap) *toks = s2s_xrealloc(*toks, (size_t)(*cap = *cap ? 2 * *cap : 64) * sizeof **toks);
        (*toks)[n++] = p;
        while (*p && !text_is_space(*p)) p++;
    }
    return n;
}
