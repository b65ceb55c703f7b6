/* test_threads.c — the programs on a machine that does other work: OpenMP's threads told to
 * sleep when they wait (unless the user said otherwise), and the same bits with one competing
 * busy process as without, for float32, bf16 and int8 on 1 and 2 threads; signals while the
 * threads sleep. The pool itself:
 * test_par.c. */
#include "test_cli.h"
#include "s2s/gemm.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* What libgomp read at its start, as OMP_DISPLAY_ENV prints it: GOMP_SPINCOUNT's value. */
static long spincount(const char *env) {
    char *d = tu_tmpdir();
    cr_assert_eq(tu_sh("env %s OMP_DISPLAY_ENV=verbose %s/translate --help > %s/out.txt 2>&1", env, tu_bin(), d), 0);
    char *out = tu_slurp(tu_path(d, "out.txt"), NULL);
    const char *at = out ? strstr(out, "GOMP_SPINCOUNT = '") : NULL;
    cr_assert(at != NULL, "no GOMP_SPINCOUNT in OMP_DISPLAY_ENV's report:\n%s", out ? out : "");
    long v = strtol(at + strlen("GOMP_SPINCOUNT = '"), NULL, 10);
    free(out);
    tu_rm_rf(d);
    free(d);
    return v;
}

Test(threads_cli, openmp_threads_sleep_when_they_wait_unless_the_user_says) {
    cr_expect_eq(spincount("-u OMP_WAIT_POLICY -u GOMP_SPINCOUNT"), 0);
    cr_expect_eq(spincount("-u OMP_WAIT_POLICY GOMP_SPINCOUNT=77"), 77);
    cr_expect_gt(spincount("-u GOMP_SPINCOUNT OMP_WAIT_POLICY=active"), 1000000, "the user's active policy spins");
    cr_expect_eq(spincount("-u GOMP_SPINCOUNT OMP_WAIT_POLICY=passive"), 0);
}

/* A child that keeps one core busy until killed. */
static pid_t busy_start(void) {
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        volatile unsigned long x = 0;
        for (;;) x++;
    }
    return pid;
}

static void busy_stop(pid_t pid) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* Big enough that the loops split (an LSTM's gates are 256 × 1024 per step), small enough to
 * train in a few seconds. */
static void write_wide(const char *dir) {
    tu_write(tu_path(dir, "wide.json"),
             "{\"name\": \"wide\", \"seed\": 2,"
             " \"task\": {\"type\": \"reverse\", \"alphabet\": \"abcdef\", \"min_len\": 3, \"max_len\": 12,"
             "          \"train_size\": 1024, \"valid_size\": 64, \"test_size\": 256, \"data_seed\": 4},"
             " \"model\": {\"cell\": \"lstm\", \"embedding\": 64, \"encoder_hidden\": 256, \"decoder_hidden\": 256,"
             "           \"attention\": \"additive\", \"dropout\": 0.1},"
             " \"train\": {\"lr\": 0.003, \"batch_size\": 256, \"epochs\": 1}}");
}

/* Trains (precision, threads) and translates the test strings with int8 weights, quiet or
 * beside a busy process; the model file and the translations land in dir/tag. */
static void run(const char *d, const char *precision, int threads, bool busy, const char *tag) {
    pid_t b = busy ? busy_start() : 0;
    int rc = tu_sh("%s/train --config %s/wide.json --set precision=%s --set threads=%d --out %s/%s > /dev/null 2>&1 &&"
                   " %s/translate %s/%s/model.bin --int8 --beam 3 --input %s/in.txt --output %s/%s/int8.txt",
                   tu_bin(), d, precision, threads, d, tag, tu_bin(), d, tag, d, d, tag);
    if (busy) busy_stop(b);
    cr_assert_eq(rc, 0, "%s, %d threads%s", precision, threads, busy ? ", busy" : "");
}

Test(threads_cli, a_busy_machine_gives_the_same_bits, .timeout = 300) {
    char *d = tu_tmpdir();
    write_wide(d);
    FILE *f = fopen(tu_path(d, "in.txt"), "w");
    cr_assert(f != NULL);
    for (int i = 0; i < 600; i++) fprintf(f, "%.*s\n", 3 + i % 10, &"abcdeffedcbaabcdef"[i % 6]);
    fclose(f);
    const char *precisions[] = {"fp32", "bf16"};
    for (int p = 0; p < 2; p++) {
        if (p == 1 && !gemm_cpu_has_bf16()) continue; /* tu_require_bf16 would skip the float32 half */
        for (int th = 1; th <= 2; th++) {
            char quiet[64], busy[64], a[512], b[512];
            snprintf(quiet, sizeof quiet, "%s-%d-quiet", precisions[p], th);
            snprintf(busy, sizeof busy, "%s-%d-busy", precisions[p], th);
            run(d, precisions[p], th, false, quiet);
            run(d, precisions[p], th, true, busy);
            snprintf(a, sizeof a, "%s/%s/model.bin", d, quiet);
            snprintf(b, sizeof b, "%s/%s/model.bin", d, busy);
            cr_expect(tu_same_file(a, b), "%s, %d threads: model.bin differs with a busy process beside", precisions[p], th);
            snprintf(a, sizeof a, "%s/%s/int8.txt", d, quiet);
            snprintf(b, sizeof b, "%s/%s/int8.txt", d, busy);
            cr_expect(tu_same_file(a, b), "%s, %d threads: int8 translations differ with a busy process beside",
                      precisions[p], th);
        }
    }
    tu_rm_rf(d);
    free(d);
}

/* A folder of a new cgroup of this machine's cpu controller allowing one CPU (v1's
 * cpu.cfs_quota_us, or v2's cpu.max where the root lets children limit cpu), or NULL with the
 * reason when the test may not make one (not root, no such controller). */
static char *quota_group(char *why, size_t n) {
    static char dir[128];
    const char *v1 = "/sys/fs/cgroup/cpu", *v2 = "/sys/fs/cgroup";
    bool is_v1 = access("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", W_OK) == 0;
    bool is_v2 = !is_v1 && tu_file_has("/sys/fs/cgroup/cgroup.subtree_control", "cpu");
    if (!is_v1 && !is_v2) {
        snprintf(why, n, "no cpu controller this test may write under /sys/fs/cgroup");
        return NULL;
    }
    snprintf(dir, sizeof dir, "%s/s2s-test-%d", is_v1 ? v1 : v2, (int)getpid());
    if (mkdir(dir, 0755) != 0 ||
        tu_sh(is_v1 ? "echo 100000 > %s/cpu.cfs_quota_us" : "echo '100000 100000' > %s/cpu.max", dir) != 0) {
        snprintf(why, n, "cannot make a cgroup with a CPU quota at %s", dir);
        rmdir(dir);
        return NULL;
    }
    return dir;
}

Test(threads_cli, a_run_under_a_cpu_quota_uses_the_quota, .timeout = 120) {
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) cr_skip_test("one core: a quota of one CPU changes nothing");
    char why[256];
    char *group = quota_group(why, sizeof why);
    if (!group) cr_skip_test("%s", why);
    char *d = tu_tmpdir();
    write_config(d, 1);
    int rc = tu_sh("env -u OMP_NUM_THREADS sh -c 'echo $$ > %s/cgroup.procs && exec %s/train --config %s/small.json --out %s/q' "
                   "> %s/q.txt 2>&1",
                   group, tu_bin(), d, d, d);
    int rc2 = tu_sh("env -u OMP_NUM_THREADS sh -c 'echo $$ > %s/cgroup.procs && exec %s/train --config %s/small.json --set threads=2 "
                    "--out %s/t2' > %s/t2.txt 2>&1",
                    group, tu_bin(), d, d, d);
    rmdir(group);
    cr_assert_eq(rc, 0);
    cr_assert_eq(rc2, 0);
    cr_expect(tu_file_has(tu_path(d, "q.txt"), "threads: 1, the CPU quota of this process's cgroup (1.00 CPUs)"),
              "the run does not say it follows the quota");
    cr_expect(!tu_file_has(tu_path(d, "t2.txt"), "CPU quota"), "threads=2 is the user's choice");
    tu_rm_rf(d);
    free(d);
}

/* More threads than CPUs: the run says so, and two such runs, one beside a busy process, give
 * the same model. */
Test(threads_cli, more_threads_than_cpus_are_said_and_give_the_same_bits, .timeout = 120) {
    char *d = tu_tmpdir();
    write_config(d, 1);
    int th = gemm_cpus() * 2 + 1;
    const char *cmd = "%s/train --config %s/small.json --set threads=%d --set train_size=1500 --out %s/%s > %s/%s.txt 2>&1";
    cr_assert_eq(tu_sh(cmd, tu_bin(), d, th, d, "a", d, "a"), 0);
    pid_t b = busy_start();
    int rc = tu_sh(cmd, tu_bin(), d, th, d, "b", d, "b");
    busy_stop(b);
    cr_assert_eq(rc, 0);
    char want[160];
    snprintf(want, sizeof want, "threads: %d, more than the %d CPUs this process may run on", th, gemm_cpus());
    cr_expect(tu_file_has(tu_path(d, "a.txt"), want), "no word of %d threads on %d CPUs", th, gemm_cpus());
    char a[256], b2[256];
    snprintf(a, sizeof a, "%s/a/model.bin", d);
    snprintf(b2, sizeof b2, "%s/b/model.bin", d);
    cr_expect(tu_same_file(a, b2));
    tu_rm_rf(d);
    free(d);
}

/* SIGINT and SIGTERM to a run whose threads keep falling asleep (two busy processes on the
 * cores, 2 threads): the pool's workers block signals, so the program's handler takes them on
 * the main thread, which may itself be asleep waiting for a worker's chunk; the step finishes,
 * last.bin is written, exit 130 (143); resumed quietly, the model equals an uninterrupted run. */
Test(threads_cli, signals_while_threads_sleep_stop_the_run_cleanly, .timeout = 300) {
    char *d = tu_tmpdir();
    write_wide(d);
    const char *train = "%s/train --config %s/wide.json --set threads=2 --set epochs=12 --out %s/%s";
    char cmd[512];
    snprintf(cmd, sizeof cmd, train, tu_bin(), d, d, "full");
    cr_assert_eq(tu_sh("%s > /dev/null 2>&1", cmd), 0);
    const char *sig[] = {"INT", "TERM"};
    const int code[] = {130, 143};
    for (int s = 0; s < 2; s++) {
        char tag[16];
        snprintf(tag, sizeof tag, "part-%s", sig[s]);
        snprintf(cmd, sizeof cmd, train, tu_bin(), d, d, tag);
        pid_t b1 = busy_start(), b2 = busy_start();
        /* once the first epoch is printed: a signal that lands mid-run, whatever the machine's speed */
        int rc = tu_sh("%s > %s/%s.txt 2> %s/%s.err & pid=$!; while ! grep -q 'epoch  1 ' %s/%s.txt && kill -0 $pid; do "
                       "sleep 0.02; done; kill -%s $pid; wait $pid",
                       cmd, d, tag, d, tag, d, tag, sig[s]);
        busy_stop(b1);
        busy_stop(b2);
        char errf[64];
        snprintf(errf, sizeof errf, "%s.err", tag);
        char *err = tu_slurp(tu_path(d, errf), NULL);
        cr_assert_eq(rc, code[s], "SIG%s: exit %d, not %d: %s", sig[s], rc, code[s], err ? err : "");
        cr_expect(err && strstr(err, "interrupted after step") && strstr(err, "--resume"), "SIG%s: %s", sig[s], err ? err : "");
        free(err);
        cr_assert_eq(tu_sh("%s/train --resume %s/%s > /dev/null 2>&1", tu_bin(), d, tag), 0);
        char a[256], b[256];
        snprintf(a, sizeof a, "%s/full/model.bin", d);
        snprintf(b, sizeof b, "%s/%s/model.bin", d, tag);
        cr_expect(tu_same_file(a, b), "SIG%s while the threads sleep, then --resume: another model", sig[s]);
    }
    tu_rm_rf(d);
    free(d);
}
