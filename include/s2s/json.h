/* json.h — checks on JSON (cJSON) that every reader of the project's JSON shares.
 *
 * cJSON keeps every member of an object, duplicates included, and its lookups return the
 * first: a file with a key twice would silently mean one of them. Readers refuse such files
 * with json_find_duplicate, and strings cut by a NUL with json_find_nul. Borrows the tree;
 * owns nothing. */
#ifndef S2S_JSON_H
#define S2S_JSON_H

#include "s2s/common.h"

#include <cjson/cJSON.h>

/* The first member (depth first) whose key an earlier member of the same object has, or
 * NULL. Its dotted path ("model.cell", "heads.1.Q") goes into path. */
const cJSON *json_find_duplicate(const cJSON *node, char *path, size_t n);
/* The first "\u0000" escape inside a string of JSON text (cJSON would end the string there,
 * so "dot\u0000bogus" would read as "dot"), or NULL. Every reader of JSON from a user (a config
 * file, --set, a config or options from the C API and Python) refuses text that has one. */
const char *json_find_nul(const char *text);
/* S2S_ERR_CONFIG "origin:line:col: a string holds \u0000 ..." when text has one, else S2S_OK. */
S2sStatus json_refuse_nul(const char *text, const char *origin, S2sError *err);
/* The 1-based line and column of the byte at in text (for messages). */
void json_line_col(const char *text, const char *at, int *line, int *col);
/* Where a parser stopped at (or just after) the start of a comment, which JSON does not have:
 * "//" or, for a block comment, its slash-star as a string; *col moved back to the comment's
 * first column. NULL: no comment there. */
const char *json_comment_at(const char *text, const char *at, int *col);
/* "line:col" (1-based) of the k-th (0-based) occurrence of "key" in text, into buf; "" when
 * not found. */
void json_key_position(const char *text, const char *key, int k, char *buf, size_t n);

#endif
