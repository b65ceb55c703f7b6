/* checkpoint.h — the model file (model.bin, last.bin): self-contained and checked.
 *
 * Layout (little-endian): "S2SMODEL", u32 format version, u32 section count, sections
 * (4-byte tag, u64 length, payload), then a CRC32 of everything before it. Sections: CONF
 * (the resolved config, JSON), VSRC/VTRG (vocabularies), TENS (tensor table: name, shape),
 * DATA (the weights, in table order), SUBW (the subword model's text, bpe.h; when the task
 * has one; the source's when the languages have their own, SUBT then the target's), and for resuming MOM1/MOM2 (Adam moments), EMAW (the
 * weights' moving average, train.ema_decay) and STAT (training state, JSON). The loader checks the magic, version and checksum, every count
 * against a limit and every length against the bytes remaining, so a corrupt or foreign file
 * gives one clear error and never a crash or a huge allocation.
 *
 * A Checkpoint owns everything it holds (one buffer for the file, pointers into it). Saving
 * borrows the ParamStore and vocabularies, writes a temporary file and renames it (file.h). */
#ifndef S2S_CHECKPOINT_H
#define S2S_CHECKPOINT_H

#include "s2s/common.h"
#include "s2s/params.h"

#define CKPT_VERSION 1u

typedef struct CkptTensor {
    char name[PARAM_NAME_MAX];
    int ndim;
    int shape[S2S_MAX_DIMS];
    size_t size;
    const void *data;           /* little-endian floats inside the file buffer, maybe unaligned:
                                   read them with memcpy */
    const void *m, *v;          /* moments, or NULL */
    const void *ema;            /* moving average, or NULL */
} CkptTensor;

typedef struct Checkpoint {
    unsigned char *buf;         /* the whole file */
    size_t len;
    char *config_json;          /* NUL-terminated copies */
    char *state_json;           /* NULL when absent */
    char *subword;              /* the subword model's text, or NULL */
    size_t subword_len;
    char *subword_trg;          /* the target's, when it has its own (else NULL: subword serves both) */
    size_t subword_trg_len;
    char **src_tokens, **trg_tokens;
    int n_src, n_trg;
    CkptTensor *tensors;
    int n_tensors;
    bool has_moments;
    bool has_ema;
} Checkpoint;

typedef struct CkptSave {
    const char *config_json;
    const char *const *src_tokens; int n_src;
    const char *const *trg_tokens; int n_trg;
    const ParamStore *params;
    bool with_moments;          /* write m and v (they must exist) */
    const char *state_json;     /* or NULL */
    const char *subword;        /* or NULL */
    size_t subword_len;
    const char *subword_trg;    /* the target's own, or NULL */
    size_t subword_trg_len;
    bool with_ema;              /* write the moving average (it must exist) */
} CkptSave;

S2sStatus ckpt_save(const char *path, const CkptSave *s, S2sError *err);
S2sStatus ckpt_load(Checkpoint *c, const char *path, S2sError *err);
/* The same from a descriptor open for reading (not closed here); path names it in messages. */
S2sStatus ckpt_load_fd(Checkpoint *c, int fd, const char *path, S2sError *err);
/* Parses a file image; `origin` names it in messages. Takes a copy of buf. */
S2sStatus ckpt_from_memory(Checkpoint *c, const void *buf, size_t len, const char *origin, S2sError *err);
void ckpt_free(Checkpoint *c);
/* Copies the tensors into ps by name; every parameter must be present with its shape.
 * Moments too when with_moments (the file must have them). */
S2sStatus ckpt_restore(const Checkpoint *c, ParamStore *ps, bool with_moments, const char *origin, S2sError *err);
/* out = the element-wise mean of the weights of paths[0 .. n) (checkpoint averaging; summed
 * in double, rounded once), with the first file's config, vocabularies and subword model, no
 * training state. Every file must have the first's architecture (the config's model section),
 * vocabularies, subword model and tensor table: else S2S_ERR_DATA, one line naming the file
 * and the first difference. */
S2sStatus ckpt_average(const char *const *paths, int n, const char *out, S2sError *err);
/* A model file as safetensors (safetensors.h): every weight under its name, F32 or (bf16)
 * BF16, and the metadata below (config JSON, vocabularies as JSON arrays, subword models in
 * base64), for ./import and other readers. */
#define CKPT_META_VERSION "s2s.version"
#define CKPT_META_CONFIG "s2s.config"
#define CKPT_META_SRC_VOCAB "s2s.src_vocab"
#define CKPT_META_TRG_VOCAB "s2s.trg_vocab"
#define CKPT_META_SUBWORD "s2s.subword"
#define CKPT_META_SUBWORD_TRG "s2s.subword_trg"
S2sStatus ckpt_export(const char *in, const char *out, bool bf16, S2sError *err);
/* The moving average into ps->ema (made if absent); the file must have it. After ckpt_restore. */
S2sStatus ckpt_restore_ema(const Checkpoint *c, ParamStore *ps, const char *origin, S2sError *err);

#endif
