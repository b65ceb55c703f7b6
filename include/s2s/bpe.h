/* bpe.h — byte-pair-encoding subword models in SentencePiece's manner: a word is "▁" (U+2581)
 * followed by its characters, and pieces are merged in the order they were learned. The
 * whitespace is a symbol, so raw text goes in and the same text (its whitespace runs made one
 * space) comes back out, without a tokeniser. Characters never seen in training fall back to
 * their UTF-8 bytes (<0x41>), never to a crash or a lost character.
 *
 * Ids: the vocabulary's four specials (vocab.h), the 256 byte pieces, the characters (most
 * frequent first), then one piece per merge. A Bpe owns its pieces and tables; learning
 * borrows the lines it reads. The file format (bpe_save) is text: a header line, the
 * characters one a line, then the merges "left right" one a line. */
#ifndef S2S_BPE_H
#define S2S_BPE_H

#include "s2s/common.h"
#include "s2s/vocab.h"
#include "s2s/rng.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define BPE_BYTES 256
#define BPE_MAX_PIECES (1 << 22)  /* a model file may not hold more characters + merges */
#define BPE_WORD_MARK "\xe2\x96\x81" /* ▁ */

typedef struct BpeMerge {
    int32_t left, right, piece;
} BpeMerge;

typedef struct Bpe {
    Vocab pieces;        /* id ↔ piece text (specials, bytes, characters, merges) */
    int n_chars;         /* characters: ids BPE_FIRST_CHAR .. + n_chars */
    BpeMerge *merges;
    int n_merges, cap_merges;
    HashIndex ranks;     /* (left, right) → the rank of its first merge (hash.h) */
    HashIndex text;      /* characters' and merges' texts → id (in pieces.tokens) */
} Bpe;

#define BPE_FIRST_BYTE 4 /* after the specials */
#define BPE_FIRST_CHAR (BPE_FIRST_BYTE + BPE_BYTES)

typedef struct BpeLearnOpts {
    int merges;          /* how many merges, or 0 with vocab_size */
    int vocab_size;      /* all pieces, specials and bytes included (0: merges decides) */
    int min_count;       /* a pair seen fewer times is never merged (2) */
    const atomic_int *stop; /* a signal's request to stop, polled every few thousand lines and merges, or NULL */
} BpeLearnOpts;

void bpe_init(Bpe *b);
void bpe_free(Bpe *b);

/* Learns from lines of raw UTF-8 text (words split on ASCII whitespace). *learned: the merges
 * made, fewer than asked when no pair is seen min_count times any more (not an error). A
 * vocabulary size below the specials, bytes and characters is (S2S_ERR_CONFIG); a stop asked
 * for is S2S_ERR_IO ("stopped"), within a fraction of a second. */
S2sStatus bpe_learn(Bpe *b, char *const *lines, size_t n, const BpeLearnOpts *o, int *learned, S2sError *err);
/* ./subword learn: learns from every line of the files inputs[0..n) (plain or gzip) and saves
 * the model at out, which may be none of them (file_distinct, before anything is read). */
S2sStatus bpe_learn_files(Bpe *b, const char *const *inputs, int n, const BpeLearnOpts *o, const char *out, int *learned,
                          S2sError *err);

/* A line of raw text (valid UTF-8) as piece ids, into *ids (grown; *cap its size);
 * returns their count. Linear-logarithmic in the line's length. */
int bpe_encode(const Bpe *b, const char *line, int32_t **ids, int *cap);
/* The same with BPE-dropout: each applicable merge left out with probability dropout (in
 * [0, 1], rng drawn from) at every step, so a word comes out in a random, finer segmentation;
 * 0 is bpe_encode, 1 makes no merge (the longest segmentation). */
int bpe_encode_sampled(const Bpe *b, const char *line, float dropout, Rng *rng, int32_t **ids, int *cap);
/* The text of piece ids (malloc'ed): pieces joined, "▁" made a space, the first one dropped;
 * byte pieces joined into characters (a byte sequence that is not UTF-8 becomes U+FFFD). */
char *bpe_decode(const Bpe *b, const int32_t *ids, int n);
int bpe_size(const Bpe *b);
const char *bpe_piece(const Bpe *b, int id);
/* The id of a piece's text: a character or merge, else a byte piece (<0x41>) or a special;
 * TOK_UNK for anything else. */
int32_t bpe_piece_id(const Bpe *b, const char *piece);

S2sStatus bpe_save(const Bpe *b, const char *path, S2sError *err);
/* The model file's text (malloc'ed), *len its bytes: what bpe_parse reads. */
char *bpe_format(const Bpe *b, size_t *len);
S2sStatus bpe_load(Bpe *b, const char *path, S2sError *err);
/* The pieces as a vocabulary (the same ids). */
void bpe_vocab(const Bpe *b, Vocab *v);
/* From a model file's bytes; origin names it in messages (file and line). */
S2sStatus bpe_parse(Bpe *b, const char *text, size_t len, const char *origin, S2sError *err);

#endif
