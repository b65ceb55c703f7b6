/* spm.h — SentencePiece model files (.model, as spm_train writes them), read and used to
 * segment text exactly as spm_encode does: the model's own normalisation (its precompiled
 * character map, e.g. nmt_nfkc, or none for identity), whitespace as "▁", and the unigram
 * model's best segmentation (SentencePiece's optimised Viterbi, float scores); unknown
 * characters become the unknown piece (runs merged) or, with byte fallback, their bytes; BPE
 * models merge by piece score as SentencePiece's BPE does. Models with user-defined symbols are
 * refused with a message for now; a piece marked unused (a vocabulary cut after training) is
 * split back at its first split into two pieces, where SentencePiece remembers the merge it
 * made (the same unless two such splits exist).
 *
 * An Spm owns copies of everything it reads from the file. */
#ifndef S2S_SPM_H
#define S2S_SPM_H

#include "s2s/common.h"
#include "s2s/hash.h"

#include <stddef.h>
#include <stdint.h>

typedef struct Spm {
    char **piece;          /* id → piece text */
    float *score;
    uint8_t *type;         /* SentencePiece's: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte */
    int n, cap;
    int unk_id;
    int model_type;        /* 1 unigram, 2 bpe */
    bool byte_fallback;
    bool add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces;
    uint32_t *trie;        /* the normaliser's double array (darts-clone units), or NULL */
    size_t n_units;
    char *norm;            /* its replacement strings, NUL-separated */
    size_t norm_len;
    HashIndex index;       /* normal/unused/user piece text → id (hash.h) */
    int max_piece_bytes;
    float min_score, max_score;
    char *unk_surface;     /* what decoding writes for the unknown piece (" ⁇ ") */
    int byte_id[256];      /* the byte pieces' ids (byte fallback), −1 where absent */
    unsigned char *raw;    /* the file's bytes, for a model file to carry */
    size_t raw_len;
} Spm;

/* From a .model file's bytes; origin names it in messages. */
S2sStatus spm_parse(Spm *s, const void *data, size_t len, const char *origin, S2sError *err);
S2sStatus spm_load(Spm *s, const char *path, S2sError *err);
void spm_free(Spm *s);

/* The model's normalisation of a line (malloc'ed), "▁" for the spaces it keeps. */
char *spm_normalize(const Spm *s, const char *line);
/* A line's pieces as spm_encode prints them, separated by single spaces (malloc'ed). */
char *spm_encode_text(const Spm *s, const char *line);
/* Pieces separated by spaces back to text, as spm_decode does (malloc'ed). */
char *spm_decode_text(const Spm *s, const char *pieces);
/* The same pieces as ids, into *ids (grown; *cap its size); returns their count. */
int spm_encode_ids(const Spm *s, const char *line, int32_t **ids, int *cap);

#endif
