/* export — a model file as safetensors, every weight under its PyTorch name.
 *   export MODEL.bin --out model.safetensors [--bf16]
 *   exit 0 · 1 unreadable or corrupt model, unwritable output · 2 usage */
#include "s2s/args.h"
#include "s2s/file.h"
#include "s2s/checkpoint.h"
#include "wait_policy.h"

#include <getopt.h>
#include <stdio.h>

static void usage(FILE *f) {
    fprintf(f, "usage: export MODEL.bin --out FILE.safetensors [--bf16]\n"
               "Writes the model's weights as safetensors under the names of its PyTorch definition, with its\n"
               "config, vocabularies and subword model in the metadata (\"s2s.config\", \"s2s.src_vocab\",\n"
               "\"s2s.trg_vocab\", \"s2s.subword\" in base64), so that ./import, Python's safetensors and other\n"
               "readers can use it.\n"
               "  --out FILE   the safetensors file (written whole, or not at all)\n"
               "  --bf16       bfloat16 weights (rounded to nearest even) instead of float32\n");
}

int main(int argc, char **argv) {
    static const struct option LONG[] = {{"help", no_argument, NULL, 'h'},
                                         {"version", no_argument, NULL, ARGS_VERSION},
                                         {"out", required_argument, NULL, 'o'},
                                         {"bf16", no_argument, NULL, 'b'},
                                         {NULL, 0, NULL, 0}};
    const char *out = NULL;
    bool bf16 = false;
    opterr = 0;
    int o;
    while ((o = getopt_long(argc, argv, ":h", LONG, NULL)) != -1) {
        switch (o) {
        case 'o': out = optarg; break;
        case 'b': bf16 = true; break;
        default: return args_common(o, "export", usage, argv, optind, optopt);
        }
    }
    if (!out || argc - optind != 1) {
        fprintf(stderr, "export: %s (see export --help)\n",
                !out ? "--out: where the safetensors file goes is required" : "one model file, please");
        return 2;
    }
    S2sError err;
    if (file_distinct(&(FileRole){"MODEL", argv[optind]}, 1, &(FileRole){"--out", out}, 1, &err)) {
        fprintf(stderr, "export: %s\n", err.msg);
        return 2;
    }
    if (ckpt_export(argv[optind], out, bf16, &err)) {
        fprintf(stderr, "export: %s\n", err.msg);
        return 1;
    }
    return 0;
}
