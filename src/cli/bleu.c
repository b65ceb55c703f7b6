/* bleu — corpus BLEU of a hypothesis file against one reference file, as multi-bleu.perl.
 *   bleu REF < HYP      (both tokenised, one sentence a line)
 *   exit 0 · 1 IO or mismatched files · 2 usage */
#include "s2s/bleu.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    const char *ref_path = NULL, *hyp_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: bleu REF [HYP]   (HYP defaults to stdin)\n"
                   "Corpus BLEU-4 as multi-bleu.perl: clipped n-gram precisions, brevity penalty.\n");
            return 0;
        }
        if (!ref_path) ref_path = argv[i];
        else if (!hyp_path) hyp_path = argv[i];
        else {
            fprintf(stderr, "bleu: %s: unexpected argument (see bleu --help)\n", argv[i]);
            return 2;
        }
    }
    if (!ref_path) {
        fprintf(stderr, "usage: bleu REF [HYP]\n");
        return 2;
    }
    char **ref, **hyp;
    int nr, nh;
    S2sError err;
    if (text_read_lines(ref_path, &ref, &nr, &err)) {
        fprintf(stderr, "bleu: %s\n", err.msg);
        return 1;
    }
    if (text_read_lines(hyp_path ? hyp_path : "/dev/stdin", &hyp, &nh, &err)) {
        fprintf(stderr, "bleu: %s\n", err.msg);
        text_free_lines(ref, nr);
        return 1;
    }
    int rc = 0;
    if (nr != nh) {
        fprintf(stderr, "bleu: %s has %d lines, the hypotheses %d\n", ref_path, nr, nh);
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
