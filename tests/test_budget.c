/* test_budget.c — the house's budgets, checked: a library or program file of src/, a test or
 * a benchmark holds at most BUDGET_FILE lines and a function at most BUDGET_FUNCTION, except
 * those tests/budgets.txt lists, each with the size it may not grow past and why. A listed one that grows fails, and
 * so does one back within the budget (its line must go), so the list only ever shrinks. */
#include "test_util.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUDGET_FILE 700
#define BUDGET_FUNCTION 120

typedef struct Allowed {
    char kind[16], file[128], name[96];
    int ceiling;
    bool seen;
} Allowed;

static int load_allowed(Allowed *a, int cap) {
    FILE *f = fopen("tests/budgets.txt", "r");
    cr_assert(f != NULL, "tests/budgets.txt is missing");
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        cr_assert_lt(n, cap);
        Allowed *x = &a[n];
        memset(x, 0, sizeof *x);
        if (!strncmp(line, "file ", 5)) {
            cr_assert_eq(sscanf(line, "%15s %127s %d", x->kind, x->file, &x->ceiling), 3, "budgets.txt: %s", line);
        } else {
            cr_assert_eq(sscanf(line, "%15s %127s %95s %d", x->kind, x->file, x->name, &x->ceiling), 4, "budgets.txt: %s", line);
            cr_assert_str_eq(x->kind, "function", "budgets.txt: %s", line);
        }
        cr_assert(strstr(line, " to cut") || strstr(line, " a table"), "budgets.txt: say why (a table, or to cut): %s", line);
        n++;
    }
    fclose(f);
    return n;
}

static Allowed *find(Allowed *a, int n, const char *kind, const char *file, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(a[i].kind, kind) && !strcmp(a[i].file, file) && (!name || !strcmp(a[i].name, name))) return &a[i];
    return NULL;
}

/* Checks one size against the budget and the list. */
static void check(Allowed *a, int n, const char *kind, const char *file, const char *name, int size, int budget) {
    Allowed *x = find(a, n, kind, file, name);
    if (x) {
        x->seen = true;
        cr_expect_leq(size, x->ceiling, "%s %s%s%s: %d lines, past its ceiling %d in tests/budgets.txt", kind, file, name ? " " : "",
                      name ? name : "", size, x->ceiling);
        cr_expect_gt(size, budget, "%s %s%s%s: %d lines, within the budget now: take its line out of tests/budgets.txt", kind, file,
                     name ? " " : "", name ? name : "", size);
    } else {
        cr_expect_leq(size, budget, "%s %s%s%s: %d lines, over the budget of %d (cut it along its jobs)", kind, file, name ? " " : "",
                      name ? name : "", size, budget);
    }
}

/* The function a column-0 signature line names ("static int foo(" → "foo"; a test,
 * "Test(suite, name, …" → "suite/name"), or "". */
static void function_name(const char *line, char *out, size_t n) {
    out[0] = '\0';
    const char *paren = strchr(line, '(');
    if (!paren) return;
    char suite[48], name[96];
    if (sscanf(line, "Test(%47[a-z0-9_], %95[A-Za-z0-9_]", suite, name) == 2) {
        snprintf(out, n, "%.40s/%.54s", suite, name);
        return;
    }
    const char *e = paren, *s = paren;
    while (s > line && (s[-1] == '_' || (s[-1] >= 'a' && s[-1] <= 'z') || (s[-1] >= 'A' && s[-1] <= 'Z') || (s[-1] >= '0' && s[-1] <= '9')))
        s--;
    snprintf(out, n, "%.*s", (int)(e - s), s);
}

/* Every function of one file: from its column-0 signature to the "}" that closes it. */
static void check_file(Allowed *a, int n, const char *path, int *files, int *functions) {
    FILE *f = fopen(path, "r");
    cr_assert(f != NULL, "%s", path);
    char line[4096], name[96] = "";
    int no = 0, start = 0;
    bool in_sig = false, in_body = false;
    while (fgets(line, sizeof line, f)) {
        no++;
        size_t len = strcspn(line, "\n");
        line[len] = '\0';
        if (in_body) {
            if (!strcmp(line, "}")) {
                check(a, n, "function", path, name, no - start + 1, BUDGET_FUNCTION);
                (*functions)++;
                in_body = false;
            }
            continue;
        }
        bool col0 = (line[0] >= 'a' && line[0] <= 'z') || (line[0] >= 'A' && line[0] <= 'Z') || line[0] == '_';
        if (!in_sig && col0 && strchr(line, '(') && !strchr(line, ';') && !strchr(line, '=') && strncmp(line, "typedef", 7) &&
            strncmp(line, "struct", 6) && strncmp(line, "enum", 4)) {
            function_name(line, name, sizeof name);
            start = no;
            in_sig = true;
        }
        if (in_sig) {
            if (len && line[len - 1] == '{') {
                in_sig = false;
                in_body = true;
            } else if (strchr(line, ';')) {
                in_sig = false; /* a declaration over several lines */
            }
        }
    }
    fclose(f);
    check(a, n, "file", path, NULL, no, BUDGET_FILE);
    (*files)++;
}

Test(budget, files_and_functions_stay_within_budget) {
    Allowed a[64];
    int n = load_allowed(a, 64), files = 0, functions = 0;
    char dirs[40][64];
    int n_dirs = tu_module_dirs(dirs, 32);
    cr_assert_gt(n_dirs, 10, "the layers table of docs/architecture.md was not read");
    const char *tests[] = {"tests", "tests/fuzz", "tests/mpi", "tests/install", "bench"}; /* under the same budgets */
    for (size_t k = 0; k < sizeof tests / sizeof *tests; k++) snprintf(dirs[n_dirs++], sizeof dirs[0], "%s", tests[k]);
    for (int k = 0; k < n_dirs; k++) {
        DIR *d = opendir(dirs[k]);
        cr_assert(d != NULL, "%s", dirs[k]);
        for (struct dirent *e; (e = readdir(d));) {
            size_t l = strlen(e->d_name);
            if (l < 3 || strcmp(e->d_name + l - 2, ".c")) continue;
            char path[300];
            snprintf(path, sizeof path, "%.63s/%.200s", dirs[k], e->d_name);
            check_file(a, n, path, &files, &functions);
        }
        closedir(d);
    }
    cr_expect_gt(files, 60, "only %d files read", files);
    cr_expect_gt(functions, 800, "only %d functions found: the scan lost its way", functions);
    for (int i = 0; i < n; i++)
        cr_expect(a[i].seen, "tests/budgets.txt lists %s %s %s, which is gone: take its line out", a[i].kind, a[i].file, a[i].name);
}
