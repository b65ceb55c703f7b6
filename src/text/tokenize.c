/* tokenize.c — raw text into the Multi30k token convention, so a user can type a sentence:
 * lowercase (UTF-8 aware), normalise punctuation, and split as Moses' tokenizer.perl does
 * (no aggressive hyphen splitting; & | < > ' " [ ] escaped as entities). The Multi30k
 * pipeline lowercases before tokenising, so a period is split off only at the end of a
 * line (mid-line ones are followed by a lowercase word, which Moses keeps attached). */
#include "s2s/vocab.h"

#include <stdlib.h>
#include <string.h>

typedef struct Buf {
    char *s;
    size_t n, cap;
} Buf;

static void put(Buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        b->cap = 2 * (b->n + n + 1) + 64;
        b->s = s2s_xrealloc(b->s, b->cap);
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}
static void putc_(Buf *b, char c) { put(b, &c, 1); }
static void puts_(Buf *b, const char *s) { put(b, s, strlen(s)); }

/* Lowercase: ASCII, Latin-1 (À–Þ but ×), Latin Extended-A pairs, Greek and Cyrillic capitals. */
static char *lowercase(const char *in) {
    Buf b = {0};
    const unsigned char *p = (const unsigned char *)in;
    while (*p) {
        if (*p < 0x80) {
            putc_(&b, (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p));
            p++;
            continue;
        }
        int len = (*p & 0xE0) == 0xC0 ? 2 : (*p & 0xF0) == 0xE0 ? 3 : (*p & 0xF8) == 0xF0 ? 4 : 1;
        if (len == 2 && p[1]) {
            unsigned cp = (unsigned)(p[0] & 0x1F) << 6 | (p[1] & 0x3F);
            if ((cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) || (cp >= 0x391 && cp <= 0x3AB && cp != 0x3A2)) cp += 0x20;
            else if (cp >= 0x410 && cp <= 0x42F) cp += 0x20;
            else if (cp >= 0x400 && cp <= 0x40F) cp += 0x50;
            else if (cp >= 0x100 && cp <= 0x17F && !(cp >= 0x138 && cp <= 0x148) && !(cp >= 0x179) && cp % 2 == 0) cp += 1;
            else if (((cp >= 0x139 && cp <= 0x148) || cp >= 0x179) && cp <= 0x17E && cp % 2 == 1) cp += 1;
            char out[2] = {(char)(0xC0 | (cp >> 6)), (char)(0x80 | (cp & 0x3F))};
            put(&b, out, 2);
            p += 2;
            continue;
        }
        for (int k = 0; k < len && *p; k++) putc_(&b, (char)*p++);
    }
    if (!b.s) b.s = calloc(1, 1);
    return b.s;
}

/* Replaces every occurrence of `from` by `to`. */
static char *replace(char *s, const char *from, const char *to) {
    if (!strstr(s, from)) return s;
    Buf b = {0};
    size_t fl = strlen(from);
    for (const char *p = s; *p;) {
        if (!strncmp(p, from, fl)) {
            puts_(&b, to);
            p += fl;
        } else {
            putc_(&b, *p++);
        }
    }
    free(s);
    return b.s ? b.s : calloc(1, 1);
}

static bool is_alpha(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80; }
static bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static bool is_alnum(unsigned char c) { return is_alpha(c) || is_digit(c); }

/* A few of Moses' non-breaking prefixes: German abbreviations, ordinals and single
 * letters; English titles before a number. */
static bool nonbreaking(const char *w, size_t n, const char *lang, const char *next) {
    static const char *const DE[] = {"ca", "bzw", "usw", "evtl", "etc", "ggf", "inkl", "nr", "str", "vgl", "z.b", "d.h"};
    static const char *const EN[] = {"mr", "mrs", "ms", "dr", "st", "jr", "sr", "no", "vs", "etc"};
    bool de = strcmp(lang, "de") == 0;
    if (de) {
        bool digits = n > 0;
        for (size_t k = 0; k < n; k++) digits &= is_digit((unsigned char)w[k]);
        if (digits || n == 1) return true; /* ordinals ("10."), single letters ("linie a.") */
    }
    const char *const *list = de ? DE : EN;
    size_t count = de ? sizeof DE / sizeof *DE : sizeof EN / sizeof *EN;
    for (size_t i = 0; i < count; i++)
        if (strlen(list[i]) == n && !strncmp(list[i], w, n)) return de || (next && is_digit((unsigned char)next[0]));
    return false;
}

char *tok_normalize(const char *line, const char *lang) {
    char *s = lowercase(line);
    /* normalize-punctuation.perl: Unicode quotes and dashes to ASCII */
    static const char *const MAP[][2] = {
        {"\r", ""},          {"\xe2\x80\x9e", "\""}, {"\xe2\x80\x9c", "\""}, {"\xe2\x80\x9d", "\""},
        {"\xe2\x80\x93", "-"}, {"\xe2\x80\x94", " - "}, {"\xc2\xb4", "'"},    {"\xe2\x80\x98", "'"},
        {"\xe2\x80\x99", "'"}, {"\xe2\x80\x9a", "\""}, {"''", "\""},         {"\xe2\x80\xa6", "..."},
        {"\xc2\xab", "\""},  {"\xc2\xbb", "\""},     {"`", "'"},          {"\xc2\xa0", " "}, /* no-break space */
    };
    for (size_t i = 0; i < sizeof MAP / sizeof MAP[0]; i++) s = replace(s, MAP[i][0], MAP[i][1]);
    bool en = strcmp(lang, "en") == 0;
    /* quotation and period: English puts the period inside ("93."), German outside */
    if (en) {
        s = replace(s, "\".", ".\"");
        s = replace(s, "\",", ",\"");
    } else {
        s = replace(s, ".\"", "\".");
        s = replace(s, ",\"", "\",");
    }
    /* tokenizer.perl: pad special characters, commas outside numbers, apostrophes */
    Buf b = {0};
    putc_(&b, ' ');
    size_t n = strlen(s);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i], prev = i ? (unsigned char)s[i - 1] : ' ', next = (unsigned char)s[i + 1];
        if (c < 0x20 || c == '\t') {
            putc_(&b, ' ');
        } else if (c == ',') {
            if (is_digit(prev) && is_digit(next)) putc_(&b, ',');
            else puts_(&b, " , ");
        } else if (c == '\'') {
            if (!en) puts_(&b, " ' ");
            else if (is_alpha(prev) && is_alpha(next)) puts_(&b, " '");
            else if (is_digit(prev) && next == 's') puts_(&b, " '");
            else puts_(&b, " ' ");
        } else if (c < 0x80 && !is_alnum(c) && c != ' ' && c != '.' && c != '-') {
            putc_(&b, ' ');
            putc_(&b, (char)c);
            putc_(&b, ' ');
        } else {
            putc_(&b, (char)c);
        }
    }
    free(s);
    /* words; a final period is split off (unless the word holds another period and a letter) */
    Buf out = {0};
    char *save = NULL, *words = b.s ? b.s : "";
    char *w = strtok_r(words, " ", &save);
    while (w) {
        char *nextw = strtok_r(NULL, " ", &save);
        size_t wl = strlen(w);
        bool split_dot = false;
        if (wl > 1 && w[wl - 1] == '.' && !(wl > 2 && w[wl - 2] == '.')) {
            bool inner_dot = memchr(w, '.', wl - 1) != NULL, alpha = false;
            for (size_t k = 0; k + 1 < wl; k++) alpha |= is_alpha((unsigned char)w[k]);
            bool next_lower = nextw && (is_alpha((unsigned char)nextw[0]) && !(nextw[0] >= 'A' && nextw[0] <= 'Z'));
            split_dot = !(inner_dot && alpha) && !next_lower && !nonbreaking(w, wl - 1, lang, nextw);
        }
        if (out.n) putc_(&out, ' ');
        for (size_t k = 0; k < wl - (split_dot ? 1 : 0); k++) {
            switch (w[k]) { /* the escapes of tokenizer.perl */
            case '&': puts_(&out, "&amp;"); break;
            case '|': puts_(&out, "&#124;"); break;
            case '<': puts_(&out, "&lt;"); break;
            case '>': puts_(&out, "&gt;"); break;
            case '\'': puts_(&out, "&apos;"); break;
            case '"': puts_(&out, "&quot;"); break;
            case '[': puts_(&out, "&#91;"); break;
            case ']': puts_(&out, "&#93;"); break;
            default: putc_(&out, w[k]);
            }
        }
        if (split_dot) puts_(&out, " .");
        w = nextw;
    }
    free(b.s);
    return out.s ? out.s : calloc(1, 1);
}
