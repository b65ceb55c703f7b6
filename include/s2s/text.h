/* text.h — lines of text, read with a bound: UTF-8 validation, a line reader that never
 * holds more than its limit, whole files as lines, and splitting on whitespace.
 *
 * Every line the programs read from a user or a file goes through a LineReader, so input
 * without newlines (a binary file, /dev/zero) costs at most one line's limit of memory and
 * comes back as LINE_TOO_LONG, never as an ever-growing buffer. A LineReader borrows its FILE
 * and owns its buffer; text_read_lines returns lines the caller frees with text_free_lines. */
#ifndef S2S_TEXT_H
#define S2S_TEXT_H

#include "s2s/common.h"

#include <stdint.h>
#include <stdio.h>

/* The longest line any program accepts (1 MiB): far above a sentence, far below memory. */
#define TEXT_MAX_LINE ((size_t)1 << 20)

typedef enum LineStatus {
    LINE_OK,        /* *line holds the line (without its newline and a final CR) */
    LINE_EOF,       /* no more lines */
    LINE_TOO_LONG,  /* longer than the limit: said as soon as seen; the next call skips the
                       rest of it (up to its newline) before reading on */
    LINE_ERROR,     /* a read error (errno) */
    LINE_ENDLESS,   /* TEXT_MAX_SKIP bytes without a line break after a long line: not text */
} LineStatus;

/* How far a long line is skipped in search of its end before the input is given up. */
#define TEXT_MAX_SKIP ((size_t)64 << 20)

typedef struct LineReader {
    FILE *f;
    size_t max;      /* bytes a line may have */
    char *buf;       /* the current line, NUL-terminated */
    size_t cap;
    long line_no;    /* 1-based number of the line last returned */
    bool skipping;   /* the last line was too long: its rest is skipped next */
} LineReader;

void line_reader_init(LineReader *r, FILE *f, size_t max);
void line_reader_free(LineReader *r);
/* The next line: *line points into the reader (valid until the next call), *len its bytes,
 * NUL bytes included (so a caller can tell a line that has one). A final CR is dropped, and a
 * UTF-8 byte-order mark opening the first line (files saved by Windows editors). */
LineStatus line_read(LineReader *r, const char **line, size_t *len);

/* One code point of valid UTF-8 (utf8_valid): its value in *cp, the bytes read returned. */
size_t utf8_next(const char *s, uint32_t *cp);
/* The UTF-8 bytes of code point c (at most 4) into out; their count returned. */
size_t utf8_put(uint32_t c, char *out);

/* A text file to read ("path.gz" through gzip), or NULL with errno. pos_fd (may be NULL): a
 * descriptor sharing the file's offset, so lseek(*pos_fd, 0, SEEK_CUR) tells how far the
 * reading is in the file's bytes (compressed ones for .gz); the caller closes it. */
FILE *text_open(const char *path, int *pos_fd);
/* A read error's reason: a .gz whose stream ends before the file does (cut short, even after a
 * full flush) or is damaged reads as an error with errno EBADMSG, named as such; else strerror. */
const char *text_strerror(int e);
/* Reads a text file into lines (without newlines, a final CR dropped); a path ending in
 * ".gz" is read through gzip. Each line must be valid UTF-8 without NUL bytes and at most
 * TEXT_MAX_LINE bytes; errors name the file and line. */
S2sStatus text_read_lines(const char *path, char ***lines, int *n, S2sError *err);
void text_free_lines(char **lines, int n);
/* Splits line on ASCII whitespace (space, tab, CR, LF, VT, FF) in place: *toks (grown as
 * needed, *cap its size) points into line. Returns the number of tokens. */
int text_split(char *line, char ***toks, int *cap);
/* Whether c separates tokens (text_split's whitespace). */
static inline bool text_is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
/* Whether s[0..n) is valid UTF-8 without NUL bytes (no overlongs, no surrogates, at most
 * U+10FFFF). */
bool utf8_valid(const char *s, size_t n);

#endif
