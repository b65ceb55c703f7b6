/* subword.h — a task's subword model behind one interface: byte-pair encoding learned here
 * (bpe.h) or a SentencePiece model brought by the user (spm.h). Raw text to the vocabulary's
 * ids and back, the vocabulary of its pieces, and the bytes the model file keeps (section SUBW).
 *
 * A SubwordModel owns its model and id tables; vocabularies own a SubwordModel each (vocab.h). */
#ifndef S2S_SUBWORD_H
#define S2S_SUBWORD_H

#include "s2s/bpe.h"
#include "s2s/spm.h"
#include "s2s/vocab.h"

/* A model's kind; the values are those of the config's task.subword (config.h's Subword) and
 * of the prepared files' header, so data/ passes either across as they are. */
typedef enum SubwordKind { SUBWORD_KIND_BPE = 1, SUBWORD_KIND_SENTENCEPIECE = 2 } SubwordKind;

typedef struct SubwordModel {
    SubwordKind kind;
    Bpe *bpe;
    Spm *spm;
    int32_t *to_vocab;     /* SentencePiece id → vocabulary id */
    int32_t *from_vocab;   /* vocabulary id → SentencePiece id, −1: none (<pad>, <sos>, <eos>) */
    int n_vocab;
} SubwordModel;

/* Takes ownership of b (learned or parsed). */
SubwordModel *subword_of_bpe(Bpe *b);
/* A model of the given kind from the bytes a model file or a .model file holds. */
S2sStatus subword_from_bytes(SubwordModel **out, SubwordKind kind, const void *bytes, size_t len, const char *origin, S2sError *err);
/* Its pieces as a vocabulary (the four specials first), into v (initialised here). */
void subword_vocab(SubwordModel *m, Vocab *v);
/* Raw text → vocabulary ids, into *ids (grown; *cap its size); returns their count. */
int subword_encode(const SubwordModel *m, const char *line, int32_t **ids, int *cap);
/* With BPE-dropout (bpe_encode_sampled; BPE models only, dropout 0 for SentencePiece). */
int subword_encode_sampled(const SubwordModel *m, const char *line, float dropout, Rng *rng, int32_t **ids, int *cap);
/* Vocabulary ids → raw text (malloc'ed). */
char *subword_decode(const SubwordModel *m, const int32_t *ids, int n);
/* The bytes the model file keeps (malloc'ed), *len their count. */
char *subword_bytes(const SubwordModel *m, size_t *len);
SubwordModel *subword_copy(const SubwordModel *m);
void subword_free(SubwordModel *m);
/* v owns m from now on (vocab_free frees it). */
void subword_attach(Vocab *v, SubwordModel *m);

#endif
