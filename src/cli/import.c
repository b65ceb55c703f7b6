/* import — a model file from a safetensors file's weights.
 *   import model.safetensors --out MODEL.bin [--config CFG [--set key=value]...]
 *          [--src-vocab FILE --trg-vocab FILE] [--subword FILE]
 *   exit 0 · 1 unreadable or corrupt file, a missing, extra or mis-shaped tensor · 2 usage, config */
#include "s2s/args.h"
#include "s2s/file.h"
#include "s2s/config.h"
#include "s2s/model.h"
#include "wait_policy.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>

static void usage(FILE *f) {
    fprintf(f, "usage: import FILE.safetensors --out MODEL.bin [--config CFG] [--set key=value]...\n"
               "              [--src-vocab FILE] [--trg-vocab FILE] [--subword FILE]\n"
               "Builds a model file from weights trained here (./export) or elsewhere under the same parameter\n"
               "names. Every name, shape and dtype is checked against the model that the config and the\n"
               "vocabularies make; what is not given comes from the file's metadata (as ./export writes it).\n"
               "  --out FILE        the model file (written whole, or not at all)\n"
               "  --config CFG      the model's config (a bare name: configs/, then the installed configs)\n"
               "  --set key=value   overrides a key of that config\n"
               "  --src-vocab FILE  the source vocabulary: one token a line, in id order, <pad> <unk> <sos> <eos> first\n"
               "  --trg-vocab FILE  the target vocabulary, the same way\n"
               "  --subword FILE    the subword model of both sides (./subword learn's, or a SentencePiece .model)\n");
}

static int fail(const char *msg, int code) {
    fprintf(stderr, "import: %s\n", msg);
    return code;
}

int main(int argc, char **argv) {
    static const struct option LONG[] = {{"help", no_argument, NULL, 'h'},
                                         {"version", no_argument, NULL, ARGS_VERSION},
                                         {"out", required_argument, NULL, 'o'},
                                         {"config", required_argument, NULL, 'c'},
                                         {"set", required_argument, NULL, 'S'},
                                         {"src-vocab", required_argument, NULL, 's'},
                                         {"trg-vocab", required_argument, NULL, 't'},
                                         {"subword", required_argument, NULL, 'w'},
                                         {NULL, 0, NULL, 0}};
    ModelImport im = {0};
    const char *config = NULL, *sets[64];
    int n_sets = 0;
    opterr = 0;
    int o;
    while ((o = getopt_long(argc, argv, ":h", LONG, NULL)) != -1) {
        switch (o) {
        case 'o': im.out = optarg; break;
        case 'c': config = optarg; break;
        case 's': im.src_vocab = optarg; break;
        case 't': im.trg_vocab = optarg; break;
        case 'w': im.subword = optarg; break;
        case 'S':
            if (n_sets == 64) return fail("too many --set options", 2);
            sets[n_sets++] = optarg;
            break;
        default: return args_common(o, "import", usage, argv, optind, optopt);
        }
    }
    if (!im.out || argc - optind != 1)
        return fail(!im.out ? "--out: where the model file goes is required (see import --help)"
                            : "one safetensors file, please (see import --help)",
                    2);
    if (n_sets && !config) return fail("--set changes the --config given; there is none", 2);
    im.path = argv[optind];
    S2sError err;
    FileRole ins[] = {{"FILE.safetensors", im.path}, {"--config", config}, {"--src-vocab", im.src_vocab},
                      {"--trg-vocab", im.trg_vocab}, {"--subword", im.subword}};
    if (file_distinct(ins, 5, &(FileRole){"--out", im.out}, 1, &err)) return fail(err.msg, 2);
    Config cfg;
    if (config) {
        char path[PATH_MAX];
        config_defaults(&cfg);
        config_find_file(config, path, sizeof path);
        if (config_load(&cfg, path, &err)) return fail(err.msg, 2);
        for (int i = 0; i < n_sets; i++)
            if (config_set(&cfg, sets[i], &err)) return fail(err.msg, 2);
        im.cfg = &cfg;
    }
    S2sStatus st = model_import(&im, &err);
    if (st) return fail(err.msg, st == S2S_ERR_CONFIG ? 2 : 1);
    return 0;
}
