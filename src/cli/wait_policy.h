/* wait_policy.h — oneDNN's OpenMP threads sleep when they wait, in the programs.
 * Included by one program's main file; adds a function to the program's .preinit_array.
 *
 * libgomp reads its settings once, in its constructor, before main and before any library
 * code runs; only a program's preinit functions come earlier. Its default spins 300,000
 * rounds (about 3 ms) after every parallel region: on a quiet machine that is cheap, on a busy
 * one the spinning threads take the cores the working ones wait for (an epoch of `reverse`
 * 30–88 s instead of 3.5 s with one competing busy process). The library's own loops run on
 * its own pool (src/cpu/par.c), which sleeps after PAR_SPIN_NS; here libgomp, which runs the
 * GEMMs, is told to sleep at once (GOMP_SPINCOUNT=0): with one busy process beside it, the
 * default cost the homework model a third of its training speed and two thirds of its greedy
 * decoding's. A user's OMP_WAIT_POLICY or GOMP_SPINCOUNT wins: then nothing is set. The Python package does the same before it loads
 * the library (python/s2s/_lib.py). */
#ifndef S2S_CLI_WAIT_POLICY_H
#define S2S_CLI_WAIT_POLICY_H

#include <string.h>
#include <unistd.h>

#define S2S_GOMP_SPINCOUNT "0"

static int env_has(char **envp, const char *name) {
    size_t n = strlen(name);
    for (char **e = envp; e && *e; e++)
        if (!strncmp(*e, name, n) && (*e)[n] == '=') return 1;
    return 0;
}

/* Runs before every constructor, libc's included, with the environment it is given: libc has
 * not yet set `environ`, and what setenv did here would be dropped when it does. So the
 * program starts again, once, with the setting in its environment (a millisecond or two); when
 * that cannot be done (no /proc, a huge environment), it runs on with libgomp's default. */
static void wait_policy_preinit(int argc, char **argv, char **envp) {
    enum { MAX_ENV = 4096 };
    (void)argc;
    if (!envp || env_has(envp, "OMP_WAIT_POLICY") || env_has(envp, "GOMP_SPINCOUNT")) return;
    char *env[MAX_ENV];
    size_t n = 0;
    while (envp[n] && n + 2 < MAX_ENV) {
        env[n] = envp[n];
        n++;
    }
    if (envp[n]) return;
    static char setting[] = "GOMP_SPINCOUNT=" S2S_GOMP_SPINCOUNT;
    env[n] = setting;
    env[n + 1] = NULL;
    execve("/proc/self/exe", argv, env);
}

__attribute__((used, section(".preinit_array"))) static void (*const wait_policy_entry)(int, char **,
                                                                                       char **) = wait_policy_preinit;

#endif
