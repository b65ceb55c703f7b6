/* s2s.h — the library's stable entry points, for programs that link libs2s (pkg-config s2s).
 *
 * A model file in, translations out; a config in, a trained run out. Everything here keeps
 * its signature within a major version (the shared library's soname, libs2s.so.0). The other
 * headers under s2s/ are the modules the programs are built from (docs/architecture.md): they
 * are installed for those who want the engine itself, and may change between versions.
 *
 * An S2sModel owns the loaded model, its config, vocabularies and tape; s2s_close frees it.
 * One S2sModel serves one thread at a time. */
#ifndef S2S_S2S_H
#define S2S_S2S_H

#include "s2s/common.h"

typedef struct S2sModel S2sModel;

/* Loads a model file (model.bin, ./average's, ./import's). threads: GEMM threads (0: the
 * libraries' default). NULL with err set when the file cannot be read or is not a model. */
S2sModel *s2s_open(const char *path, int threads, S2sError *err);
/* Translates one line of raw text as ./translate does (beam 1: greedy; alpha: beam search's
 * length normalisation); the output is malloc'd, NULL with err set when the line cannot be
 * read by the model's task. */
char *s2s_translate(S2sModel *m, const char *line, int beam, float alpha, S2sError *err);
void s2s_close(S2sModel *m);

/* Training is config_load (s2s/config.h) then train_run (s2s/train.h), as ./train does. */

#endif
