/* test_layers.c — the architecture is checked, not only written: every #include of src/ and
 * include/ against the table of docs/architecture.md (which module may use which), every
 * header in a module, no include cycle between headers, no call cycle between the library's
 * files (registries aside), and exit() only in src/cli/. */
#include "test_util.h"

#include <criterion/criterion.h>
#include <fnmatch.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MODULES 24
#define MAX_FILES 256

typedef struct Module {
    char name[32], dir[64];
    char headers[40][32];
    int n_headers;
    char may_use[MAX_MODULES][32];
    int n_may_use;
} Module;

/* dst = src, cut to n − 1 bytes. */
static void copy(char *dst, size_t n, const char *src) {
    size_t k = strlen(src);
    if (k >= n) k = n - 1;
    memcpy(dst, src, k);
    dst[k] = '\0';
}

static Module g_mod[MAX_MODULES];
static int g_n_mod;

/* The words of s (space-separated) into out; returns their count. */
static int words(char *s, char out[][32], int cap) {
    int n = 0;
    for (char *w = strtok(s, " \t"); w && n < cap; w = strtok(NULL, " \t")) copy(out[n++], 32, w);
    return n;
}

static void trim(char *s) {
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n')) s[--n] = '\0';
    size_t k = strspn(s, " ");
    memmove(s, s + k, strlen(s + k) + 1);
}

/* The table between <!-- layers:begin --> and <!-- layers:end -->. */
static void read_table(void) {
    FILE *f = fopen("docs/architecture.md", "r");
    cr_assert(f, "docs/architecture.md is missing");
    char line[1024];
    bool in = false;
    g_n_mod = 0;
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, "<!-- layers:begin -->")) in = true;
        else if (strstr(line, "<!-- layers:end -->")) in = false;
        else if (in && line[0] == '|' && !strstr(line, "---") && !strstr(line, "| module |")) {
            char cell[4][512];
            char *p = line + 1;
            for (int c = 0; c < 4; c++) {
                char *bar = strchr(p, '|');
                cr_assert(bar, "a row of the layers table has fewer than 4 cells: %s", line);
                *bar = '\0';
                copy(cell[c], sizeof cell[c], p);
                trim(cell[c]);
                p = bar + 1;
            }
            cr_assert_lt(g_n_mod, MAX_MODULES);
            Module *m = &g_mod[g_n_mod++];
            memset(m, 0, sizeof *m);
            copy(m->name, sizeof m->name, cell[0]);
            copy(m->dir, sizeof m->dir, cell[1]);
            m->n_headers = words(cell[2], m->headers, 40);
            m->n_may_use = words(cell[3], m->may_use, MAX_MODULES);
        }
    }
    fclose(f);
    cr_assert_gt(g_n_mod, 5, "no layers table in docs/architecture.md");
}

static const Module *module_of_header(const char *h) { /* "tape" */
    for (int i = 0; i < g_n_mod; i++)
        for (int k = 0; k < g_mod[i].n_headers; k++)
            if (!strcmp(g_mod[i].headers[k], h)) return &g_mod[i];
    return NULL;
}

static const Module *module_of_file(const char *path) {
    if (!strncmp(path, "include/s2s/", 12)) {
        char h[64];
        snprintf(h, sizeof h, "%s", path + 12);
        h[strcspn(h, ".")] = '\0';
        return module_of_header(h);
    }
    for (int i = 0; i < g_n_mod; i++) {
        size_t n = strlen(g_mod[i].dir);
        if (!strncmp(path, g_mod[i].dir, n) && path[n] == '/') return &g_mod[i];
    }
    return NULL;
}

static bool may_use(const Module *a, const Module *b) {
    if (a == b) return true;
    for (int k = 0; k < a->n_may_use; k++)
        if (!strcmp(a->may_use[k], b->name)) return true;
    return false;
}

/* Every file of the library and the programs. */
static int all_files(char files[][128]) {
    const char *pats[] = {"src/*/*.c", "src/*/*.h", "include/s2s/*.h"};
    int n = 0;
    for (int p = 0; p < 3; p++) {
        glob_t g;
        if (glob(pats[p], 0, NULL, &g) != 0) continue;
        for (size_t i = 0; i < g.gl_pathc && n < MAX_FILES; i++) copy(files[n++], 128, g.gl_pathv[i]);
        globfree(&g);
    }
    return n;
}

/* The quoted includes of a file. */
static int includes(const char *path, char out[][64], int cap) {
    FILE *f = fopen(path, "r");
    cr_assert(f, "%s", path);
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f) && n < cap) {
        char *p = line + strspn(line, " \t");
        if (strncmp(p, "#include \"", 10) != 0) continue;
        p += 10;
        char *q = strchr(p, '"');
        if (!q) continue;
        *q = '\0';
        snprintf(out[n++], 64, "%s", p);
    }
    fclose(f);
    return n;
}

Test(layers, every_include_keeps_the_rule) {
    read_table();
    static char files[MAX_FILES][128];
    int n = all_files(files), checked = 0;
    cr_assert_gt(n, 50);
    glob_t g;
    cr_assert_eq(glob("include/s2s/*.h", 0, NULL, &g), 0);
    for (size_t i = 0; i < g.gl_pathc; i++)
        cr_expect(module_of_file(g.gl_pathv[i]) != NULL, "%s is in no module of docs/architecture.md", g.gl_pathv[i]);
    globfree(&g);
    for (int i = 0; i < n; i++) {
        const Module *m = module_of_file(files[i]);
        cr_expect(m != NULL, "%s belongs to no module of docs/architecture.md", files[i]);
        if (!m) continue;
        char inc[64][64];
        int k = includes(files[i], inc, 64);
        for (int j = 0; j < k; j++) {
            if (strncmp(inc[j], "s2s/", 4) != 0) { /* a private header: beside the file */
                char dir[128], beside[4400];
                copy(dir, sizeof dir, files[i]);
                *strrchr(dir, '/') = '\0';
                snprintf(beside, sizeof beside, "%s/%s", dir, inc[j]);
                FILE *f = fopen(beside, "r");
                cr_expect(f != NULL && strncmp(dir, "src/", 4) == 0, "%s includes \"%s\", which is not beside it", files[i], inc[j]);
                if (f) fclose(f);
                continue;
            }
            char h[64];
            snprintf(h, sizeof h, "%s", inc[j] + 4);
            h[strcspn(h, ".")] = '\0';
            const Module *t = module_of_header(h);
            cr_expect(t != NULL, "%s includes %s, which is in no module", files[i], inc[j]);
            if (t)
                cr_expect(may_use(m, t), "%s (%s) includes %s (%s): %s may use only what docs/architecture.md lists", files[i],
                          m->name, inc[j], t->name, m->name);
            checked++;
        }
    }
    cr_expect_gt(checked, 100);
}

/* Headers include each other without a cycle (depth-first search over the include graph). */
static int g_state[MAX_FILES]; /* 0 new, 1 on the path, 2 done */
static char g_files[MAX_FILES][128];
static int g_n_files;

static int index_of(const char *from, const char *inc) {
    char want[4400];
    if (!strncmp(inc, "s2s/", 4)) snprintf(want, sizeof want, "include/%s", inc);
    else {
        char dir[128];
        copy(dir, sizeof dir, from);
        *strrchr(dir, '/') = '\0';
        snprintf(want, sizeof want, "%s/%s", dir, inc);
    }
    for (int i = 0; i < g_n_files; i++)
        if (!strcmp(g_files[i], want)) return i;
    return -1;
}

static bool cycle_from(int i, char *path, size_t n) {
    g_state[i] = 1;
    char inc[64][64];
    int k = includes(g_files[i], inc, 64);
    for (int j = 0; j < k; j++) {
        int t = index_of(g_files[i], inc[j]);
        if (t < 0) continue;
        if (g_state[t] == 1 || (g_state[t] == 0 && cycle_from(t, path, n))) {
            size_t used = strlen(path);
            snprintf(path + used, n - used, " <- %s", g_files[i]);
            return true;
        }
    }
    g_state[i] = 2;
    return false;
}

Test(layers, no_include_cycle) {
    static char files[MAX_FILES][128];
    int n = all_files(files);
    g_n_files = 0;
    for (int i = 0; i < n; i++)
        if (strstr(files[i], ".h")) copy(g_files[g_n_files++], 128, files[i]);
    memset(g_state, 0, sizeof g_state);
    for (int i = 0; i < g_n_files; i++) {
        char path[2048] = "";
        if (g_state[i] == 0) cr_expect(!cycle_from(i, path, sizeof path), "an include cycle:%s", path);
    }
}

/* Only the programs end the process: the library returns statuses (DESIGN.md). */
Test(layers, only_the_programs_call_exit) {
    static char files[MAX_FILES][128];
    int n = all_files(files);
    for (int i = 0; i < n; i++) {
        if (!strncmp(files[i], "src/cli/", 8)) continue;
        FILE *f = fopen(files[i], "r");
        cr_assert(f);
        char line[1024];
        int no = 0;
        while (fgets(line, sizeof line, f)) {
            no++;
            for (char *p = line; (p = strstr(p, "exit(")); p++) {
                char before = p == line ? ' ' : p[-1];
                bool word = !(before == '_' || (before >= 'a' && before <= 'z') || (before >= 'A' && before <= 'Z') ||
                              (before >= '0' && before <= '9'));
                cr_expect(!word, "%s:%d calls exit(): only src/cli/ may", files[i], no);
            }
        }
        fclose(f);
    }
}

/* Criterion 2.4 exits 1 after a logged warning, so one in a test turns `make test` red with
 * every test passing (it did, on a machine without python3-torch): tests skip with TU_SKIP. */
Test(layers, no_test_logs_a_warning) {
    glob_t g;
    cr_assert_eq(glob("tests/*.[ch]", 0, NULL, &g), 0);
    const char *banned = "cr_log_" "warn("; /* split, so that this file does not match itself */
    for (size_t i = 0; i < g.gl_pathc; i++) {
        FILE *f = fopen(g.gl_pathv[i], "r");
        cr_assert(f);
        char line[4096];
        int no = 0;
        while (fgets(line, sizeof line, f)) {
            no++;
            cr_expect(!strstr(line, banned), "%s:%d logs a warning: Criterion then exits 1; skip with TU_SKIP", g.gl_pathv[i], no);
        }
        fclose(f);
    }
    cr_expect_gt(g.gl_pathc, 10, "the tests were found");
    globfree(&g);
}

/* One hash (hash.h's FNV-1a and index; digest.h where inputs must never be taken for one), and
 * no raw allocation in the programs: a failed malloc there went unchecked (s2s_x* say where). */
Test(layers, one_hash_and_no_raw_allocation_in_the_programs) {
    cr_expect_eq(system("grep -rlE '0x100000001b3|1099511628211|16777619' src include | grep -v '^include/s2s/hash.h$' "
                        "> /dev/null"),
                 256, "FNV-1a written outside include/s2s/hash.h");
    cr_expect_eq(system("grep -nE '(^|[^_a-z])(malloc|calloc|realloc|strdup)\\(' src/cli/*.c > /dev/null"), 256,
                 "a raw allocation in src/cli/ (use s2s_xmalloc, s2s_xcalloc, s2s_xrealloc, s2s_xstrdup)");
}

/* ---- call cycles, from the objects' symbols ---- */

#define MAX_OBJ 200
#define MAX_REG 8

typedef struct Ref { int from; char name[80]; } Ref;
typedef struct Def { int file; char name[80]; } Def;

static char g_obj[MAX_OBJ][96]; /* "core/tape" */
static int g_n_obj;
static Def *g_defs;
static int g_n_defs, g_cap_defs;
static Ref *g_refs;
static int g_n_refs, g_cap_refs;
static int g_edge[MAX_OBJ][MAX_OBJ]; /* 1 + the index of a ref that makes the edge, or 0 */
static char g_reg_file[MAX_REG][64], g_reg_syms[MAX_REG][64];
static int g_n_reg;

static int def_cmp(const void *a, const void *b) { return strcmp(((const Def *)a)->name, ((const Def *)b)->name); }

/* One object's global definitions and undefined references (nm -P: "name type ..."). */
static void read_symbols(const char *obj, int file) {
    char cmd[800];
    snprintf(cmd, sizeof cmd, "nm -P '%s' 2>/dev/null", obj);
    FILE *p = popen(cmd, "r");
    cr_assert(p, "nm");
    char name[256], type[8];
    char line[1024];
    while (fgets(line, sizeof line, p)) {
        if (sscanf(line, "%255s %7s", name, type) != 2 || strlen(name) >= 80) continue;
        if (!strcmp(type, "U")) {
            if (g_n_refs == g_cap_refs) g_refs = realloc(g_refs, (size_t)(g_cap_refs = g_cap_refs * 2 + 256) * sizeof *g_refs);
            g_refs[g_n_refs].from = file;
            copy(g_refs[g_n_refs++].name, 80, name);
        } else if (strchr("TDBRGSV", type[0])) {
            if (g_n_defs == g_cap_defs) g_defs = realloc(g_defs, (size_t)(g_cap_defs = g_cap_defs * 2 + 256) * sizeof *g_defs);
            g_defs[g_n_defs].file = file;
            copy(g_defs[g_n_defs++].name, 80, name);
        }
    }
    cr_assert_eq(pclose(p), 0, "nm failed on %s", obj);
}

/* The registries' table in docs/architecture.md. */
static void read_registries(void) {
    FILE *f = fopen("docs/architecture.md", "r");
    cr_assert(f);
    char line[1024];
    bool in = false;
    g_n_reg = 0;
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, "<!-- registries:begin -->")) in = true;
        else if (strstr(line, "<!-- registries:end -->")) in = false;
        else if (in && line[0] == '|' && !strstr(line, "---") && !strstr(line, "| file |")) {
            cr_assert_lt(g_n_reg, MAX_REG);
            char a[64], b[64];
            cr_assert_eq(sscanf(line, "| %63s | %63s |", a, b), 2, "a registry row: %s", line);
            copy(g_reg_file[g_n_reg], 64, a);
            copy(g_reg_syms[g_n_reg++], 64, b);
        }
    }
    fclose(f);
    cr_assert_gt(g_n_reg, 0, "no registries table in docs/architecture.md");
}

static bool registry_call(int from, const char *sym) {
    for (int i = 0; i < g_n_reg; i++)
        if (!strcmp(g_obj[from], g_reg_file[i]) && fnmatch(g_reg_syms[i], sym, 0) == 0) return true;
    return false;
}

static int g_cstate[MAX_OBJ];

/* Depth-first: true when a path from i comes back to a file on the path; the circle into msg. */
static bool call_cycle_from(int i, int *path, int depth, char *msg, size_t n) {
    g_cstate[i] = 1;
    path[depth] = i;
    for (int t = 0; t < g_n_obj; t++) {
        if (!g_edge[i][t]) continue;
        if (g_cstate[t] == 1) {
            size_t used = 0;
            int k = depth;
            while (path[k] != t) k--;
            for (; k <= depth; k++) {
                int a = path[k], b = k < depth ? path[k + 1] : t;
                used += (size_t)snprintf(msg + used, n > used ? n - used : 0, " %s -(%s)->", g_obj[a], g_refs[g_edge[a][b] - 1].name);
                if (used >= n) break;
            }
            if (used < n) snprintf(msg + used, n - used, " %s", g_obj[t]);
            return true;
        }
        if (g_cstate[t] == 0 && call_cycle_from(t, path, depth + 1, msg, n)) return true;
    }
    g_cstate[i] = 2;
    return false;
}

/* The library's files call each other without a circle, registries aside: an object's
 * undefined symbol defined by another object is a call (or a use) from the one to the other. */
Test(layers, no_call_cycle_between_files) {
    read_table();
    read_registries();
    const char *bin = getenv("S2S_BIN_DIR");
    char build[512];
    snprintf(build, sizeof build, "%s", bin && *bin ? bin : "build/bin");
    char *slash = strrchr(build, '/');
    cr_assert(slash, "S2S_BIN_DIR=%s: expected BUILD/bin", build);
    *slash = '\0';
    g_n_obj = g_n_defs = g_n_refs = 0;
    for (int m = 0; m < g_n_mod; m++) {
        if (!strcmp(g_mod[m].name, "cli")) continue; /* programs: each its own, linked alone */
        char pat[700];
        snprintf(pat, sizeof pat, "%s/%s/*.c", ".", g_mod[m].dir);
        glob_t g;
        if (glob(pat + 2, 0, NULL, &g) != 0) continue;
        for (size_t i = 0; i < g.gl_pathc; i++) {
            cr_assert_lt(g_n_obj, MAX_OBJ);
            char obj[700];
            snprintf(obj, sizeof obj, "%s/%.*s.o", build, (int)strlen(g.gl_pathv[i]) - 2, g.gl_pathv[i]);
            FILE *f = fopen(obj, "rb");
            cr_assert(f, "%s is not built (the test reads the objects of S2S_BIN_DIR's build)", obj);
            fclose(f);
            snprintf(g_obj[g_n_obj], sizeof g_obj[0], "%.*s", (int)strlen(g.gl_pathv[i]) - 6, g.gl_pathv[i] + 4);
            read_symbols(obj, g_n_obj++);
        }
        globfree(&g);
    }
    cr_assert_gt(g_n_obj, 100, "only %d objects", g_n_obj);
    qsort(g_defs, (size_t)g_n_defs, sizeof *g_defs, def_cmp);
    memset(g_edge, 0, sizeof g_edge);
    int edges = 0, registry = 0;
    for (int r = 0; r < g_n_refs; r++) {
        Def key;
        copy(key.name, sizeof key.name, g_refs[r].name);
        const Def *d = bsearch(&key, g_defs, (size_t)g_n_defs, sizeof *g_defs, def_cmp);
        if (!d || d->file == g_refs[r].from) continue;
        if (registry_call(g_refs[r].from, g_refs[r].name)) {
            registry++;
            continue;
        }
        if (!g_edge[g_refs[r].from][d->file]) edges++, g_edge[g_refs[r].from][d->file] = r + 1;
    }
    cr_expect_gt(edges, 300, "only %d calls between files found", edges);
    cr_expect_gt(registry, 10, "the registries' entries were not found (%d)", registry);
    memset(g_cstate, 0, sizeof g_cstate);
    static int path[MAX_OBJ];
    for (int i = 0; i < g_n_obj; i++) {
        char msg[2048] = "";
        if (g_cstate[i] == 0 && call_cycle_from(i, path, 0, msg, sizeof msg)) {
            cr_expect(false, "a call cycle:%s (a registry? list it in docs/architecture.md)", msg);
            break;
        }
    }
    free(g_defs), free(g_refs);
    g_defs = NULL, g_refs = NULL, g_cap_defs = g_cap_refs = 0;
}

/* Whether buf (n bytes) holds the bytes s with its terminating NUL: a whole string of an
 * object's debug information. */
/* Whether buf holds s as a whole string (NUL before and after: a name of the debug strings, so
 * CkptTensor is not Tensor). */
static bool holds(const char *buf, size_t n, const char *s) {
    size_t k = strlen(s) + 1;
    for (size_t i = 1; i + k <= n; i++)
        if (buf[i] == s[0] && buf[i - 1] == '\0' && memcmp(buf + i, s, k) == 0) return true;
    return false;
}

/* The back-end seam: above core, but in io/ (files), a tensor's memory is the back end's. Every
 * object there that knows the Tensor type was compiled with its data and grad fields hidden
 * (S2S_HOST_ACCESS_ONLY, which the Makefile sets: its debug information names the hidden
 * fields), so a `->data` there does not compile; core's and io's objects see the fields. Below
 * core (the modules core may use: the platform and the CPU back end) no object knows a tensor
 * at all: the back end multiplies buffers. */
Test(layers, tensor_memory_is_the_back_ends_above_core) {
    read_table();
    const char *bin = getenv("S2S_BIN_DIR");
    char build[512];
    snprintf(build, sizeof build, "%s", bin && *bin ? bin : "build/bin");
    char *slash = strrchr(build, '/');
    cr_assert(slash);
    *slash = '\0';
    const Module *core = NULL;
    for (int m = 0; m < g_n_mod; m++)
        if (!strcmp(g_mod[m].name, "core")) core = &g_mod[m];
    cr_assert(core, "no core in the layers table");
    int hidden = 0, open_ = 0, below = 0;
    for (int m = 0; m < g_n_mod; m++) {
        bool under = &g_mod[m] != core && may_use(core, &g_mod[m]);
        bool above = !under && &g_mod[m] != core && strcmp(g_mod[m].name, "io");
        char pat[100];
        snprintf(pat, sizeof pat, "%s/*.c", g_mod[m].dir);
        glob_t g;
        if (glob(pat, 0, NULL, &g) != 0) continue;
        for (size_t i = 0; i < g.gl_pathc; i++) {
            char obj[700];
            snprintf(obj, sizeof obj, "%s/%.*s.o", build, (int)strlen(g.gl_pathv[i]) - 2, g.gl_pathv[i]);
            size_t len;
            char *bytes = tu_slurp(obj, &len); /* read once, searched twice */
            cr_assert(bytes, "%s is not built", obj);
            bool knows = holds(bytes, len, "Tensor"), h = holds(bytes, len, "backend_only_data");
            free(bytes);
            below += under;
            if (under) cr_expect(!knows, "%s (%s, below core) knows the Tensor type", obj, g_mod[m].name);
            if (!knows || under) continue; /* knows no tensor */
            if (above) cr_expect(h, "%s sees a tensor's data field: above core, only tensor.h's host-access calls may", obj);
            else cr_expect(!h, "%s (%s) was compiled with the tensor fields hidden", obj, g_mod[m].name);
            hidden += h, open_ += !h;
        }
        globfree(&g);
    }
    cr_expect_gt(hidden, 20, "objects above core that know tensors: %d", hidden);
    cr_expect_gt(open_, 12, "objects of core and io that know tensors: %d", open_);
    cr_expect_gt(below, 12, "objects below core: %d", below);
}

/* The map is whole: under its "### module" heading, docs/architecture.md's table lists exactly
 * the files of the module's folder (sources, private headers, the serve page), each once. */
Test(layers, every_file_is_on_the_map) {
    read_table();
    char *doc = tu_slurp("docs/architecture.md", NULL);
    cr_assert(doc);
    int checked = 0;
    for (int m = 0; m < g_n_mod; m++) {
        char head[64];
        snprintf(head, sizeof head, "\n### %.31s\n", g_mod[m].name);
        const char *sec = strstr(doc, head);
        cr_expect(sec != NULL, "docs/architecture.md has no \"### %s\" section", g_mod[m].name);
        if (!sec) continue;
        sec += strlen(head);
        const char *end = strstr(sec, "\n#");
        size_t len = end ? (size_t)(end - sec) : strlen(sec);
        char *part = strndup(sec, len);
        int listed = 0;
        for (const char *p = part; (p = strstr(p, "\n| `")); p++) listed++;
        char pat[100];
        snprintf(pat, sizeof pat, "%s/*", g_mod[m].dir);
        glob_t g;
        int files = 0;
        if (glob(pat, 0, NULL, &g) == 0) {
            for (size_t i = 0; i < g.gl_pathc; i++) {
                const char *name = strrchr(g.gl_pathv[i], '/') + 1;
                char row[200];
                snprintf(row, sizeof row, "\n| `%s` |", name);
                cr_expect(strstr(part, row) != NULL, "%s is not in the \"### %s\" table of docs/architecture.md", g.gl_pathv[i],
                          g_mod[m].name);
                files++;
            }
            globfree(&g);
        }
        cr_expect_eq(listed, files, "the \"### %s\" table lists %d files, %s holds %d", g_mod[m].name, listed, g_mod[m].dir, files);
        checked += files;
        free(part);
    }
    cr_expect_gt(checked, 120);
    free(doc);
}
