/* bleu — corpus BLEU of a hypothesis file against one reference file, as multi-bleu.perl.
 *   bleu REF [HYP]      (both tokenised, one sentence a line; HYP defaults to stdin)
 *   exit 0 · 1 IO, files that are not text, or files that do not pair up · 2 usage */
#include "s2s/args.h"
#include "s2s/bleu.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: bleu REF [HYP]   (HYP defaults to stdin)\n"
               "Corpus BLEU-4 as multi-bleu.perl: clipped n-gram precisions, brevity penalty.\n"
               "Both files are tokenised text, one sentence a line, as many lines in each.\n");
}

int main(int argc, char **argv) {
    static const struct option LONG[] = {{"help", no_argument, NULL, 'h'}, {"version", no_argument, NULL, ARGS_VERSION},
                                         {NULL, 0, NULL, 0}};
    opterr = 0;
    int o;
    while ((o = getopt_long(argc, argv, ":h", LONG, NULL)) != -1) return args_common(o, "bleu", usage, argv, optind, optopt);
    if (optind == argc || argc - optind > 2) {
        if (argc - optind > 2) fprintf(stderr, "bleu: %s: unexpected argument (see bleu --help)\n", argv[optind + 2]);
        else usage(stderr);
        return 2;
    }
    const char *ref_path = argv[optind], *hyp_path = optind + 1 < argc ? argv[optind + 1] : "/dev/stdin";
    char **ref, **hyp;
    int nr, nh;
    S2sError err;
    if (text_read_lines(ref_path, &ref, &nr, &err)) {
        fprintf(stderr, "bleu: %s\n", err.msg);
        return 1;
    }
    if (text_read_lines(hyp_path, &hyp, &nh, &err)) {
        fprintf(stderr, "bleu: %s\n", err.msg);
        text_free_lines(ref, nr);
        return 1;
    }
    int rc = 0;
    if (nr != nh) {
        fprintf(stderr, "bleu: %s has %d lines, the hypotheses %d\n", ref_path, nr, nh);
        rc = 1;
    } else if (nr == 0) {
        fprintf(stderr, "bleu: %s: no sentences to score\n", ref_path);
        rc = 1;
    } else {
        Bleu b;
        bleu_init(&b);
        for (int i = 0; i < nr; i++) bleu_add_text(&b, hyp[i], ref[i]);
        BleuScore s = bleu_score(&b);
        char line[256];
        bleu_format(&s, line, sizeof line);
        printf("%s\n", line);
        bleu_free(&b);
    }
    text_free_lines(ref, nr);
    text_free_lines(hyp, nh);
    return rc;
}
