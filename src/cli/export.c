/* export — a model file as safetensors, every weight under its PyTorch name, or as ONNX graphs.
 *   export MODEL.bin --out model.safetensors [--bf16]
 *   export MODEL.bin --format onnx --out DIR
 *   exit 0 · 1 unreadable or corrupt model, unwritable output · 2 usage */
#include "s2s/args.h"
#include "s2s/file.h"
#include "s2s/checkpoint.h"
#include "s2s/onnx.h"
#include "wait_policy.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: export MODEL.bin --out FILE.safetensors [--bf16]\n"
               "       export MODEL.bin --format onnx --out DIR [--int8]\n"
               "Writes the model's weights as safetensors under the names of its PyTorch definition, with its\n"
               "config, vocabularies and subword model in the metadata (\"s2s.config\", \"s2s.src_vocab\",\n"
               "\"s2s.trg_vocab\", \"s2s.subword\" in base64), so that ./import, Python's safetensors and other\n"
               "readers can use it.\n"
               "  --out FILE   the safetensors file (written whole, or not at all)\n"
               "  --bf16       bfloat16 weights (rounded to nearest even) instead of float32\n"
               "  --format F   safetensors (the default), or onnx: the folder DIR (made new; an existing one is\n"
               "               refused) with encoder.onnx, decoder.onnx (one decoding step: it takes and returns its\n"
               "               state) and s2s.json (vocabularies, special ids, decoding settings, each tensor's batch\n"
               "               axis), for ONNX Runtime (opset 17; docs/how-to/onnx.md)\n"
               "  --int8       with --format onnx: the products by weights in int8, as ONNX Runtime's dynamic\n"
               "               quantisation writes them (weights per channel, activations per tensor; outputs may\n"
               "               differ from float32's); an RNN's cells stay float32 (ONNX's GRU and LSTM are float)\n");
}

int main(int argc, char **argv) {
    static const struct option LONG[] = {{"help", no_argument, NULL, 'h'},
                                         {"version", no_argument, NULL, ARGS_VERSION},
                                         {"out", required_argument, NULL, 'o'},
                                         {"bf16", no_argument, NULL, 'b'},
                                         {"format", required_argument, NULL, 'f'},
                                         {"int8", no_argument, NULL, 'i'},
                                         {NULL, 0, NULL, 0}};
    const char *out = NULL;
    bool bf16 = false, onnx = false, int8 = false;
    opterr = 0;
    int o;
    while ((o = getopt_long(argc, argv, ":h", LONG, NULL)) != -1) {
        switch (o) {
        case 'o': out = optarg; break;
        case 'b': bf16 = true; break;
        case 'i': int8 = true; break;
        case 'f':
            if (strcmp(optarg, "onnx") && strcmp(optarg, "safetensors")) {
                fprintf(stderr, "export: --format: \"%s\": expected safetensors or onnx\n", optarg);
                return 2;
            }
            onnx = !strcmp(optarg, "onnx");
            break;
        default: return args_common(o, "export", usage, argv, optind, optopt);
        }
    }
    if (!out || argc - optind != 1) {
        fprintf(stderr, "export: %s (see export --help)\n",
                !out ? "--out: where the export goes is required" : "one model file, please");
        return 2;
    }
    if (onnx && bf16) {
        fprintf(stderr, "export: --bf16 is for safetensors; the ONNX graphs are float32 (or --int8)\n");
        return 2;
    }
    if (int8 && !onnx) {
        fprintf(stderr, "export: --int8 is for --format onnx\n");
        return 2;
    }
    S2sError err;
    if (file_distinct(&(FileRole){"MODEL", argv[optind]}, 1, &(FileRole){"--out", out}, 1, &err)) {
        fprintf(stderr, "export: %s\n", err.msg);
        return 2;
    }
    if (onnx ? onnx_export(argv[optind], out, int8, &err) : ckpt_export(argv[optind], out, bf16, &err)) {
        fprintf(stderr, "export: %s\n", err.msg);
        return err.status == S2S_ERR_CONFIG ? 2 : 1;
    }
    return 0;
}
