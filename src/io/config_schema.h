/* config_schema.h — private to src/io: the config keys' table (config_schema.c), which
 * config.c parses, sets, prints and compares with. */
#ifndef S2S_CONFIG_SCHEMA_H
#define S2S_CONFIG_SCHEMA_H

#include "s2s/config.h"

#include <stddef.h>

/* K_NAME: a string that becomes a file name (runs/<name>): no '/', no "." or "..".
 * K_ENUM: one of a table of names, kept as the enum value of its index. */
typedef enum KeyType { K_STR, K_INT, K_LONG, K_FLOAT, K_BOOL, K_NAME, K_ENUM } KeyType;

/* When a key means something: a transformer has no recurrent cell, a word vocabulary no BPE
 * merges. Names variants by the keys that matter (./compare). */
typedef enum When {
    W_ALWAYS,
    W_REVERSE,     /* task.type reverse */
    W_DATA_SEED,   /* reverse (the strings), or translate with bpe (the sample learned from) */
    W_TRANSLATE,   /* task.type translate */
    W_BPE,         /* translate, subword bpe */
    W_BPE_DROPOUT, /* ... with bpe_dropout > 0 */
    W_SPM,         /* translate, subword sentencepiece */
    W_RNN,         /* model.type rnn */
    W_RNN_LEARNED, /* rnn with learned embeddings */
    W_KQ,          /* rnn with scaled_dot or additive attention */
    W_HEADS,       /* a transformer, or an rnn with multihead attention */
    W_TF,          /* model.type transformer */
    W_TF_LEARNED,  /* transformer with learned positions */
    W_ADAM,        /* optimizer adam or adamw */
    W_TEACHER,     /* translate with task.teacher */
    W_DISTILL,     /* translate with task.teacher or task.teacher_output */
} When;

typedef struct Key {
    const char *path;
    KeyType type;
    size_t off, size;
    double min, max;
    const char *const *names; /* K_ENUM: the names, in the order of the enum's values */
    const char *help;
    When when; /* under which configs the key changes anything (config_key_applies) */
} Key;

extern const Key CONFIG_KEYS[];
extern const char *const CONFIG_WHEN_TEXT[]; /* whose key a When is, for messages */
extern const int CONFIG_N_KEYS;

#endif
