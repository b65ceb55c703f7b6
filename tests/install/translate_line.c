/* translate_line.c — a program built against the installed library (make test-install):
 *   translate_line MODEL.bin "a line" [beam]
 * prints the line's translation, as ./translate would. */
#include <s2s/s2s.h>

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: translate_line MODEL.bin LINE [BEAM]\n");
        return 2;
    }
    S2sError err;
    S2sModel *m = s2s_open(argv[1], 1, &err);
    if (!m) {
        fprintf(stderr, "translate_line: %s\n", err.msg);
        return 1;
    }
    char *out = s2s_translate(m, argv[2], argc > 3 ? atoi(argv[3]) : 1, 1.0f, &err);
    if (!out) {
        fprintf(stderr, "translate_line: %s\n", err.msg);
        s2s_close(m);
        return 1;
    }
    printf("%s\n", out);
    free(out);
    s2s_close(m);
    return 0;
}
