/* test_file.c — files appear whole or not at all: the atomic write, and a FileTmp that is
 * committed, aborted, or committed after a failed write. */
#include "test_util.h"
#include "s2s/file.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
    tu_rm_rf(dir);
}

/* D1: a destination that is not a regular file is written as it is, never replaced by one;
 * a symlink is followed (its target replaced, the link kept). */
Test(file, devices_pipes_and_symlinks_keep_what_they_are) {
    S2sError err;
    cr_expect_eq(file_write_atomic("/dev/null", "x", 1, &err), S2S_OK, "%s", err.msg);
    struct stat st;
    cr_assert_eq(stat("/dev/null", &st), 0);
    cr_expect(S_ISCHR(st.st_mode), "/dev/null is still a device");

    char dir[] = "/tmp/s2s_file_XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    char target[160], link[160], fifo[160], out[160], cmd[600];
    snprintf(target, sizeof target, "%s/target.txt", dir);
    snprintf(link, sizeof link, "%s/link.txt", dir);
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    snprintf(out, sizeof out, "%s/from_fifo.txt", dir);
    cr_assert_eq(file_write_atomic(target, "old", 3, &err), S2S_OK);
    cr_assert_eq(chmod(target, 0600), 0);
    cr_assert_eq(symlink("target.txt", link), 0);
    cr_expect_eq(file_write_atomic(link, "new", 3, &err), S2S_OK, "%s", err.msg);
    cr_assert_eq(lstat(link, &st), 0);
    cr_expect(S_ISLNK(st.st_mode), "the link is still a link");
    expect_content(target, "new");
    cr_assert_eq(stat(target, &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0600, "a replaced file keeps its mode");
    cr_expect_eq(entries(dir), 2, "no temporary file left");

    cr_assert_eq(mkfifo(fifo, 0644), 0);
    snprintf(cmd, sizeof cmd, "cat %s > %s &", fifo, out);
    cr_assert_eq(system(cmd), 0);
    cr_expect_eq(file_write_atomic(fifo, "through", 7, &err), S2S_OK, "%s", err.msg);
    snprintf(cmd, sizeof cmd, "for i in $(seq 100); do test -s %s && break; sleep 0.02; done", out);
    cr_assert_eq(system(cmd), 0);
    expect_content(out, "through");
    cr_assert_eq(lstat(fifo, &st), 0);
    cr_expect(S_ISFIFO(st.st_mode), "the pipe is still a pipe");

    snprintf(link, sizeof link, "%s/dangling", dir);
    cr_assert_eq(symlink("nowhere/x", link), 0);
    cr_expect_eq(file_write_atomic(link, "x", 1, &err), S2S_ERR_IO);
    cr_expect(strstr(err.msg, "a symbolic link to a missing file"), "%s", err.msg);
    cr_expect_eq(file_write_atomic(dir, "x", 1, &err), S2S_ERR_IO);
    cr_expect(strstr(err.msg, "is a directory"), "%s", err.msg);
    tu_rm_rf(dir);
}

Test(file, read_all_is_bounded) {
    char dir[] = "/tmp/s2s_file_XXXXXX", path[128];
    temp_file_path(dir, path, sizeof path);
    S2sError err;
    cr_assert_eq(file_write_atomic(path, "0123456789", 10, &err), S2S_OK);
    char *buf;
    size_t n;
    cr_expect_eq(file_read_all(path, 10, &buf, &n, &err), S2S_OK);
    cr_expect(n == 10 && strcmp(buf, "0123456789") == 0);
    free(buf);
    cr_expect_eq(file_read_all(path, 9, &buf, &n, &err), S2S_ERR_IO);
    cr_expect(strstr(err.msg, "10 bytes; the limit for this file is 9"), "%s", err.msg);
    cr_expect_eq(file_read_all(dir, 100, &buf, &n, &err), S2S_ERR_IO);
    cr_expect(strstr(err.msg, "is a directory"), "%s", err.msg);
    /* an endless stream stops at the limit */
    cr_expect_eq(file_read_all("/dev/zero", 5000, &buf, &n, &err), S2S_ERR_IO);
    cr_expect(strstr(err.msg, "larger than 5000 bytes"), "%s", err.msg);
    unlink(path);
    rmdir(dir);
}

Test(file, lock_is_exclusive_and_stale_temporaries_go) {
    char dir[] = "/tmp/s2s_file_XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    FileLock a, b;
    S2sError err;
    cr_assert_eq(file_lock(&a, dir, &err), S2S_OK, "%s", err.msg);
    long pid;
    cr_expect(file_lock_held(dir, &pid) && pid == (long)getpid());
    cr_expect_eq(file_lock(&b, dir, &err), S2S_ERR_IO);
    char want[64];
    snprintf(want, sizeof want, "in use by another process (pid %ld)", (long)getpid());
    cr_expect(strstr(err.msg, want), "%s", err.msg);
    file_unlock(&a);
    cr_expect(!file_lock_held(dir, NULL));
    cr_expect_eq(file_lock(&b, dir, &err), S2S_OK);
    file_unlock(&b);

    const char *names[] = {"last.bin.tmp.AbC123", "x.png.tmp.zzzzzz", "keep.tmp.1", "keep.tmp.ABCDEFG", "keep.txt"};
    for (int i = 0; i < 5; i++) {
        char p[200];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        cr_assert_eq(file_write_atomic(p, "x", 1, &err), S2S_OK);
    }
    cr_expect_eq(file_remove_stale_tmps(dir), 2);
    cr_expect_eq(entries(dir), 4, "three files and .lock stay");
    tu_rm_rf(dir);
}
