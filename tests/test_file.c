/* test_file.c — files appear whole or not at all: the atomic write, and a FileTmp that is
 * committed, aborted, or committed after a failed write. */
#include "s2s/file.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int entries(const char *dir) {
    DIR *d = opendir(dir);
    cr_assert(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

static void expect_content(const char *path, const char *want) {
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s missing", path);
    char buf[64] = {0};
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    cr_expect_eq(n, strlen(want));
    cr_expect_str_eq(buf, want);
}

/* A new empty folder (dir is its mkdtemp template) and the path of f.txt in it. */
static void temp_file_path(char *dir, char *path, size_t n) {
    cr_assert(mkdtemp(dir) != NULL);
    snprintf(path, n, "%s/f.txt", dir);
}

Test(file, atomic_write_replaces_and_leaves_no_temporary) {
    char dir[] = "/tmp/s2s_file_XXXXXX", path[128];
    temp_file_path(dir, path, sizeof path);
    S2sError err;
    cr_assert_eq(file_write_atomic(path, "one", 3, &err), S2S_OK);
    cr_assert_eq(file_write_atomic(path, "two!", 4, &err), S2S_OK);
    expect_content(path, "two!");
    cr_expect_eq(entries(dir), 1, "a temporary file was left behind");
    unlink(path);
    rmdir(dir);
    cr_expect_eq(file_write_atomic("/nonexistent/dir/f", "x", 1, &err), S2S_ERR_IO);
    cr_expect(strstr(err.msg, "/nonexistent/dir/f: cannot create a temporary file"), "%s", err.msg);
}

Test(file, abort_and_failed_commit_keep_the_old_file) {
    char dir[] = "/tmp/s2s_file_XXXXXX", path[128];
    temp_file_path(dir, path, sizeof path);
    S2sError err;
    cr_assert_eq(file_write_atomic(path, "old", 3, &err), S2S_OK);

    FileTmp t;
    cr_assert_eq(file_tmp_open(&t, path, &err), S2S_OK);
    fputs("half of a new", t.f);
    fflush(t.f);
    cr_expect_eq(entries(dir), 2, "the temporary file sits beside the destination");
    expect_content(path, "old");
    file_tmp_abort(&t);
    file_tmp_abort(&t); /* twice is harmless */
    expect_content(path, "old");
    cr_expect_eq(entries(dir), 1);

    cr_assert_eq(file_tmp_open(&t, path, &err), S2S_OK);
    fputs("new", t.f);
    cr_expect_eq(file_tmp_commit(&t, true, &err), S2S_ERR_IO, "a write the caller saw fail");
    cr_expect(strstr(err.msg, "f.txt: cannot write"), "%s", err.msg);
    expect_content(path, "old");
    cr_expect_eq(entries(dir), 1);

    cr_assert_eq(file_tmp_open(&t, path, &err), S2S_OK);
    fputs("new", t.f);
    cr_expect_eq(file_tmp_commit(&t, false, &err), S2S_OK);
    expect_content(path, "new");
    cr_expect_eq(entries(dir), 1);
    unlink(path);
    rmdir(dir);
}

Test(file, mkdirs_makes_parents_and_refuses_a_file) {
    char dir[] = "/tmp/s2s_file_XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    char path[160];
    snprintf(path, sizeof path, "%s/a/b/c", dir);
    S2sError err;
    cr_expect_eq(file_mkdirs(path, &err), S2S_OK);
    cr_expect_eq(file_mkdirs(path, &err), S2S_OK, "an existing folder is fine");
    snprintf(path, sizeof path, "%s/a/b/c/f", dir);
    cr_assert_eq(file_write_atomic(path, "x", 1, &err), S2S_OK);
    cr_expect_eq(file_mkdirs(path, &err), S2S_ERR_IO);
    cr_expect(strstr(err.msg, "not a directory"), "%s", err.msg);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_expect_eq(system(cmd), 0);
}
