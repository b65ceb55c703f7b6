/* test_compare_jobs.c — ./compare as a job runner: its arguments checked, the user's threads
 * kept and only finished runs counted, signals passed on to the trainings, a crashed or
 * interrupted training called so. */
#include "test_compare.h"

/* D2, D8, D36-D38: lists and numbers on the command line are checked, never truncated,
 * overflowed or counted twice; exit 2 before anything is trained. */
Test(compare, arguments_are_checked, .timeout = 60) {
    char *d = tu_tmpdir();
    char cfg[600];
    write_tinycmp(cfg, sizeof cfg, d, 2);
    char many[4096] = "";
    for (int i = 0; i < 300; i++) snprintf(many + strlen(many), sizeof many - strlen(many), "%s%d", i ? "," : "", i);
    struct {
        const char *args, *says;
    } cases[] = {
        {"--attention dot --seeds 1,1,2", "--seeds: 1 is given twice"},
        {"--attention dot,dummy,dot --seeds 1", "--attention: dot is given twice"},
        {"--attention dot --seeds 1 --jobs 2x", "--jobs: expected an integer in [1, 64], got \"2x\""},
        {"--attention dot --seeds ''", "--seeds: expected a comma-separated list, got nothing"},
        {"--attention dot --seeds 1,,2", "--seeds: an empty item"},
        {"--attention dot --seeds 99999999999999999999", "--seeds: expected an integer in [0, 1000000000000000]"},
        {"--attention dot,dummy,meanpool,dot,a,b,c,d,e,f,g,h,i,j,k,l,m --seeds 1", "--attention: at most 16 items"},
        {"--attention dot --seeds 1 --bogus", "--bogus: unknown option"},
        {"--attention nope --seeds 1", "model.attention: expected one of"},
        {"--vary heads --seeds 1", "--vary heads: expected key=value,value,..."},
        {"--vary heads=2,4,2 --seeds 1", "--vary heads: 2 is given twice"},
        {"--vary nokey=1,2 --seeds 1", "unknown key \"nokey\""},
        {"--vary heads=1,x --seeds 1", "model.heads: \"x\" is not a value"},
        {"--vary seed=1,2 --seeds 1", "--vary seed: the seeds are --seeds"},
        {"--vary threads=1,2 --seeds 1", "--vary train.threads: threads change no number"},
        {"--attention dot,dummy --vary model.attention=dot --seeds 1", "model.attention is varied twice"},
        {"--vary heads=1,2,3,4 --vary lr=0.1,0.2,0.3,0.4,0.5 --seeds 1", "more than 16 variants"},
        {"--vary a=1 --vary b=1 --vary c=1 --vary d=1 --vary e=1 --seeds 1", "--vary: at most 4 keys"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = tu_sh("%s/compare --config %s %s --out %s/cmp > /dev/null 2> %s/err.txt", tu_bin(), cfg, cases[i].args, d, d);
        cr_expect_eq(rc, 2, "%s: exit %d", cases[i].args, rc);
        cr_expect(file_has(d, "err.txt", cases[i].says), "%s: %s", cases[i].args, tu_slurp(tu_path(d, "err.txt"), NULL));
    }
    cr_expect_eq(tu_sh("%s/compare --config %s --attention dot --seeds %s --out %s/cmp > /dev/null 2> %s/err.txt", tu_bin(), cfg,
                       many, d, d), 2);
    cr_expect(file_has(d, "err.txt", "--seeds: at most 256 items"));
    cr_expect_eq(tu_sh("test ! -e %s/cmp", d), 0, "nothing was made");
    cr_expect_eq(tu_sh("%s/compare --runs %s %s/. > /dev/null 2> %s/err.txt", tu_bin(), d, d, d), 2);
    cr_expect(file_has(d, "err.txt", "is given twice"));
    tu_rm_rf(d);
    free(d);
}

/* D27: the config's threads are kept; D31: a run paused by --pause-at is resumed, not
 * tabulated; a folder with a run of another config is refused, not mixed in. */
Test(compare, runs_keep_the_users_threads_and_only_finished_runs_count, .timeout = 240) {
    char *d = tu_tmpdir();
    char cfg[600];
    write_tinycmp(cfg, sizeof cfg, d, 2);
    /* dot-seed1 paused after 3 steps, as a user might have left it */
    cr_assert_eq(tu_sh("%s/train --config %s --set attention=dot --seed 1 --set threads=1 --out %s/cmp/dot-seed1 --pause-at 3"
                       " > /dev/null", tu_bin(), cfg, d), 0);
    cr_assert_eq(tu_sh("%s/compare --config %s --attention dot --seeds 1,2 --set threads=1 --out %s/cmp > %s/out.txt 2>&1",
                       tu_bin(), cfg, d, d), 0);
    cr_expect(file_has(d, "out.txt", "dot seed 1: resumed (1 threads)"), "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    cr_expect(file_has(d, "out.txt", "dot seed 2: started (1 threads)"));
    cr_expect(file_has(d, "cmp/dot-seed2/config.json", "\"threads\":\t1"), "the user's threads reach the run");
    /* the table's test metric of seed 1 is the resumed run's final one */
    char run[600];
    snprintf(run, sizeof run, "%s/cmp/dot-seed1", d);
    double m = from_log(run, false);
    char p[600];
    snprintf(p, sizeof p, "%s/cmp/summary.json", d);
    cJSON *s = tu_json_load(p);
    cr_assert(s);
    const cJSON *bs = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(s, "variants"), 0), "by_seed");
    cr_expect_float_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(bs, 0), "test_metric")->valuedouble, m, 1e-9);
    cJSON_Delete(s);
    /* another config over the same folders: refused by name, exit 1 */
    cr_expect_eq(tu_sh("%s/compare --config %s --attention dot --seeds 1 --set epochs=3 --out %s/cmp > /dev/null 2> %s/err.txt",
                       tu_bin(), cfg, d, d), 1);
    cr_expect(file_has(d, "err.txt", "holds a run of another config (train.epochs is 2 there, 3 here)"), "%s",
              tu_slurp(tu_path(d, "err.txt"), NULL));
    /* keys that change no number (logging, kept files, how ranks sum) leave the runs the same */
    cr_expect_eq(tu_sh("%s/compare --config %s --attention dot --seeds 1 --set log_every=7 --set keep_last=2 --set "
                       "overlap_sum=on --set threads=1 --out %s/cmp > %s/out.txt 2>&1",
                       tu_bin(), cfg, d, d),
                 0, "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    cr_expect(file_has(d, "out.txt", "dot seed 1: finished earlier"), "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    /* D20: a log that is a folder is an error, not an abort */
    cr_assert_eq(tu_sh("mkdir -p %s/bad && cp %s/cmp/dot-seed1/config.json %s/bad/ && mkdir %s/bad/log.jsonl", d, d, d, d), 0);
    cr_expect_eq(tu_sh("%s/compare --runs %s/bad --out %s/o > /dev/null 2> %s/err.txt", tu_bin(), d, d, d), 1);
    cr_expect(file_has(d, "err.txt", "log.jsonl: missing, or not a regular file"));
    tu_rm_rf(d);
    free(d);
}

/* Processes of the train program (this build's) with dir in their arguments, from /proc. */
static int trainings_in(const char *dir) {
    DIR *pd = opendir("/proc");
    cr_assert(pd);
    int n = 0;
    for (struct dirent *e; (e = readdir(pd));) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char p[300], buf[8192];
        snprintf(p, sizeof p, "/proc/%s/cmdline", e->d_name);
        FILE *f = fopen(p, "rb");
        if (!f) continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = '\0';
        size_t a0 = strlen(buf);
        if (a0 < 6 || strcmp(buf + a0 - 6, "/train") != 0) continue;
        for (size_t k = 0; k < len; k += strlen(buf + k) + 1)
            if (strstr(buf + k, dir)) {
                n++;
                break;
            }
    }
    closedir(pd);
    return n;
}

/* D11: a signal to compare stops its trainings (they save; the same command resumes them),
 * and a SIGKILLed compare takes them along; a second compare in the same folder is refused. */
Test(compare, signals_reach_the_trainings, .timeout = 240) {
    char *d = tu_tmpdir();
    char cfg[600], cmp[700], wait_runs[2048];
    write_tinycmp(cfg, sizeof cfg, d, 400);
    snprintf(cmp, sizeof cmp, "%s/cmp", d);
    snprintf(wait_runs, sizeof wait_runs,
             "until test -s %s/dot-seed1/log.jsonl -a -s %s/dummy-seed1/log.jsonl || ! kill -0 $p 2> /dev/null;"
             " do sleep 0.05; done;", cmp, cmp);
    int rc = tu_sh("{ %s/compare --config %s --attention dot,dummy --seeds 1 --jobs 2 --out %s > %s/out.txt 2>&1 & p=$!; %s"
                   " %s/compare --config %s --attention dot --seeds 1 --out %s > /dev/null 2> %s/err2.txt; echo $? > %s/rc2;"
                   " kill -TERM $p; wait $p; } 2> /dev/null",
                   tu_bin(), cfg, cmp, d, wait_runs, tu_bin(), cfg, cmp, d, d);
    cr_expect_eq(rc, 143, "SIGTERM: compare exits 143 (got %d)", rc);
    cr_expect(file_has(d, "rc2", "1\n") && file_has(d, "err2.txt", "another comparison runs there"),
              "a second compare in the folder is refused");
    cr_expect_eq(trainings_in(cmp), 0, "the trainings stopped with compare");
    cr_expect(file_has(d, "out.txt", "dot seed 1: interrupted (exit 143)") && file_has(d, "out.txt", "dummy seed 1: interrupted (exit 143)"),
              "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    cr_expect_eq(tu_sh("test -s %s/dot-seed1/last.bin -a -s %s/dummy-seed1/last.bin", cmp, cmp), 0, "both can resume");
    /* SIGKILL: nothing can be forwarded; the trainings learn of it from the kernel */
    rc = tu_sh("{ %s/compare --config %s --attention dot,dummy --seeds 1 --jobs 2 --out %s > %s/out2.txt 2>&1 & p=$!;"
               " until test $(grep -c resumed %s/out2.txt) -eq 2 || ! kill -0 $p 2> /dev/null; do sleep 0.05; done; sleep 0.3;"
               " kill -KILL $p; wait $p; } 2> /dev/null",
               tu_bin(), cfg, cmp, d, d);
    cr_expect_eq(rc, 137);
    int left = 1;
    for (int i = 0; i < 200 && (left = trainings_in(cmp)); i++) nanosleep(&(struct timespec){0, 50000000}, NULL);
    cr_expect_eq(left, 0, "%d trainings outlived a SIGKILLed compare", left);
    tu_rm_rf(d);
    free(d);
}

/* compare with a stand-in train program (a shell script): its exit code, and its report. */
static int compare_with_stand_in(const char *d, const char *script) {
    char cfg[600];
    write_tinycmp(cfg, sizeof cfg, d, 1);
    cr_assert_eq(tu_sh("cp %s/compare %s/compare && printf '#!/bin/sh\\n%s\\n' > %s/train && chmod +x %s/train", tu_bin(), d, script,
                       d, d),
                 0);
    return tu_sh("%s/compare --config %s --attention dot --seeds 1 --out %s/cmp > %s/out.txt 2>&1", d, cfg, d, d);
}

/* D34: a training that crashes is reported as crashed, with its signal, and fails the
 * comparison; it is not called interrupted. A stand-in train program segfaults. */
Test(compare, a_crashed_training_is_called_crashed, .timeout = 60) {
    char *d = tu_tmpdir();
    cr_expect_eq(compare_with_stand_in(d, "kill -SEGV $$"), 1);
    cr_expect(file_has(d, "out.txt", "dot seed 1: CRASHED (signal 11: Segmentation fault)"), "%s",
              tu_slurp(tu_path(d, "out.txt"), NULL));
    cr_expect(!file_has(d, "out.txt", "interrupted"));
    tu_rm_rf(d);
    free(d);
}

/* Old D12: a training stopped by SIGTERM before its own handler was set (during start-up) died
 * of the signal and was reported as CRASHED; a stop signal is an interruption however it
 * ended the training. A stand-in train program takes SIGTERM with the default action. */
Test(compare, a_training_stopped_during_start_up_is_interrupted, .timeout = 60) {
    char *d = tu_tmpdir();
    cr_expect_neq(compare_with_stand_in(d, "kill -TERM $$"), 0);
    cr_expect(file_has(d, "out.txt", "dot seed 1: interrupted (signal 15"), "%s", tu_slurp(tu_path(d, "out.txt"), NULL));
    cr_expect(!file_has(d, "out.txt", "CRASHED"));
    tu_rm_rf(d);
    free(d);
}
