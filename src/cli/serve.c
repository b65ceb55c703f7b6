/* serve — a model behind an HTTP JSON API (server.h). Thin: arguments, signals, exit codes.
 *   serve [MODEL.bin] [--runs DIR] [--port 8080] [--host 127.0.0.1] [--threads N] [--max-body BYTES]
 *                   [--max-sentences N] [--timeout S] [--batch-wait MS]
 *   exit 0 after SIGINT/SIGTERM (requests in flight finished) · 1 unreadable model, cannot
 *   listen · 2 usage */
#include "s2s/args.h"
#include "s2s/server.h"
#include "stop_signals.h"
#include "wait_policy.h"

#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>

static void usage(FILE *f) {
    fprintf(f, "usage: serve [MODEL.bin] [--runs DIR] [--port N] [--host ADDR] [--threads N] [--max-body BYTES]\n"
               "             [--max-sentences N]"
               " [--timeout S] [--batch-wait MS]\n"
               "Serves a model over HTTP: POST /api/translate with {\"text\": [\"...\"], \"beam\": 1, \"n_best\": 1,\n"
               "\"alpha\": 1, \"attention\": false} gives the translations (with n-best lists and the attention\n"
               "weights on request); GET /api/models describes the model; with --runs, GET /api/runs lists the\n"
               "runs, GET /api/runs/NAME/log?from=BYTES gives a log (as it grows) and GET /api/runs/NAME/files/REL\n"
               "a run's pictures and summaries. GET / is the page. SIGINT or SIGTERM stops it after the\n"
               "requests in flight.\n"
               "  --runs DIR          serve the runs under DIR (read only; nothing outside it)\n"
               "  --port N            the TCP port (default 8080; 0: any free port, printed)\n"
               "  --host ADDR         the IPv4 address to listen on (default 127.0.0.1: this machine only)\n"
               "  --threads N         decoding threads (default: the cores)\n"
               "  --max-body BYTES    a larger request body is refused with 413 (default 1048576)\n"
               "  --max-sentences N   sentences in one request (default 256)\n"
               "  --timeout S         a request must arrive whole within S seconds, and an idle connection\n"
               "                      is closed after S seconds (default 30)\n"
               "  --batch-wait MS     after a request, wait MS milliseconds for others to decode with it\n"
               "                      (default 0: requests that arrive during a decoding join the next one)\n");
}

int main(int argc, char **argv) {
    enum { O_PORT = ARGS_OWN, O_HOST, O_THREADS, O_BODY, O_SENT, O_TIMEOUT, O_WAIT, O_RUNS };
    static const struct option LONG[] = {{"help", no_argument, NULL, 'h'},
                                         {"version", no_argument, NULL, ARGS_VERSION},
                                         {"port", required_argument, NULL, O_PORT},
                                         {"host", required_argument, NULL, O_HOST},
                                         {"threads", required_argument, NULL, O_THREADS},
                                         {"max-body", required_argument, NULL, O_BODY},
                                         {"max-sentences", required_argument, NULL, O_SENT},
                                         {"timeout", required_argument, NULL, O_TIMEOUT},
                                         {"batch-wait", required_argument, NULL, O_WAIT},
                                         {"runs", required_argument, NULL, O_RUNS},
                                         {NULL, 0, NULL, 0}};
    ServeOptions so = serve_defaults();
    S2sError err;
    long body = (long)so.max_body;
    opterr = 0;
    int o;
    while ((o = getopt_long(argc, argv, ":h", LONG, NULL)) != -1) {
        S2sStatus st = S2S_OK;
        switch (o) {
        case O_PORT: st = args_int("--port", optarg, 0, 65535, &so.port, &err); break;
        case O_HOST: so.host = optarg; break;
        case O_RUNS: so.runs_dir = optarg; break;
        case O_THREADS: st = args_int("--threads", optarg, 0, 1024, &so.threads, &err); break;
        case O_BODY: st = args_long("--max-body", optarg, 1024, 1L << 30, &body, &err); break;
        case O_SENT: st = args_int("--max-sentences", optarg, 1, 100000, &so.max_sentences, &err); break;
        case O_TIMEOUT: st = args_int("--timeout", optarg, 1, 3600, &so.timeout_s, &err); break;
        case O_WAIT: st = args_int("--batch-wait", optarg, 0, 10000, &so.batch_wait_ms, &err); break;
        default: return args_common(o, "serve", usage, argv, optind, optopt);
        }
        if (st) {
            fprintf(stderr, "serve: %s (see serve --help)\n", err.msg);
            return 2;
        }
    }
    if (argc - optind > 1 || (argc - optind == 0 && !so.runs_dir)) {
        fprintf(stderr, "serve: one model file, or --runs DIR, or both (see serve --help)\n");
        return 2;
    }
    so.max_body = (size_t)body;
    so.out = stdout;
    so.stop = &g_stop;
    catch_stop_signals(); /* before any thread of ours exists */
    if (serve_run(optind < argc ? argv[optind] : NULL, &so, &err)) {
        fprintf(stderr, "serve: %s\n", err.msg);
        return err.status == S2S_ERR_CONFIG ? 2 : 1;
    }
    return 0;
}
