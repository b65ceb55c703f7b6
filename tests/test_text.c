/* test_text.c — lines read with a bound: long lines are reported and skipped in constant
 * memory (D28), CRs and NUL bytes as the readers need them, whole files as lines, and
 * splitting on every kind of ASCII whitespace. */
#include "test_util.h"
#include "s2s/text.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

Test(text, line_reader_bounds_every_line) {
    char buf[] = "short\r\n0123456789abcdef\nok\nab\0cd\nlast without newline";
    FILE *f = fmemopen(buf, sizeof buf - 1, "rb");
    cr_assert(f);
    LineReader r;
    line_reader_init(&r, f, 8);
    const char *line;
    size_t len;
    cr_expect_eq(line_read(&r, &line, &len), LINE_OK);
    cr_expect(len == 5 && strcmp(line, "short") == 0, "a final CR is dropped");
    cr_expect_eq(line_read(&r, &line, &len), LINE_TOO_LONG);
    cr_expect_eq(r.line_no, 2);
    cr_expect_leq(r.cap, 8 + 3, "the buffer never grows past the limit (%zu)", r.cap);
    cr_expect_eq(line_read(&r, &line, &len), LINE_OK, "the next line after a long one");
    cr_expect_str_eq(line, "ok");
    cr_expect_eq(line_read(&r, &line, &len), LINE_OK);
    cr_expect(len == 5 && memcmp(line, "ab\0cd", 5) == 0, "a NUL byte is kept, with the length");
    cr_expect_eq(line_read(&r, &line, &len), LINE_TOO_LONG);
    cr_expect_eq(line_read(&r, &line, &len), LINE_EOF);
    line_reader_free(&r);
    fclose(f);
}

/* A UTF-8 byte-order mark opens some files (Windows editors): it is not the first word's. Only
 * the file's first bytes are a mark; the same bytes later are text and kept. */
Test(text, a_byte_order_mark_is_not_text) {
    char buf[] = "\xEF\xBB\xBF" "ein hund\r\n" "\xEF\xBB\xBF" "zwei";
    FILE *f = fmemopen(buf, sizeof buf - 1, "rb");
    cr_assert(f);
    LineReader r;
    line_reader_init(&r, f, 64);
    const char *line;
    size_t len;
    cr_expect_eq(line_read(&r, &line, &len), LINE_OK);
    cr_expect(len == 8 && strcmp(line, "ein hund") == 0, "'%s'", line);
    cr_expect_eq(line_read(&r, &line, &len), LINE_OK);
    cr_expect(len == 7 && strcmp(line, "\xEF\xBB\xBF" "zwei") == 0, "'%s'", line);
    cr_expect_eq(line_read(&r, &line, &len), LINE_EOF);
    line_reader_free(&r);
    fclose(f);
}

Test(text, endless_input_costs_one_line_of_memory) {
    FILE *f = fopen("/dev/zero", "rb");
    cr_assert(f);
    LineReader r;
    line_reader_init(&r, f, 1 << 16);
    const char *line;
    size_t len;
    cr_expect_eq(line_read(&r, &line, &len), LINE_TOO_LONG, "said as soon as the limit is passed");
    cr_expect_leq(r.cap, (size_t)(1 << 16) + 3);
    line_reader_free(&r);
    fclose(f);
    S2sError err;
    char **lines;
    int n;
    cr_expect_eq(text_read_lines("/dev/zero", &lines, &n, &err), S2S_ERR_DATA);
    cr_expect(strstr(err.msg, "/dev/zero:1: longer than 1048576 bytes"), "%s", err.msg);
}

Test(text, split_on_all_ascii_whitespace) {
    char s[] = " a\tb\vc\fd\re  f ";
    char **toks = NULL;
    int cap = 0, n = text_split(s, &toks, &cap);
    cr_assert_eq(n, 6);
    const char *want[] = {"a", "b", "c", "d", "e", "f"};
    for (int i = 0; i < 6; i++) cr_expect_str_eq(toks[i], want[i]);
    free(toks);
}
