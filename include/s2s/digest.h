/* digest.h — SHA-256 (FIPS 180-4): the digest that decides whether two inputs are the same.
 *
 * Where s2s reuses work because "the same inputs" were seen before (prepared data under a key
 * made of the settings and the files' bytes, a teacher's cached translations, a resumed run's
 * data, the ranks of one job agreeing), the sameness is a SHA-256 digest of the bytes: made for
 * the purpose, so two different inputs never share one by accident, and none can be found on
 * purpose (CRC-32 and Adler-32, which it replaces, are linear: a changed corpus with their
 * values was found in seconds). Checksums that catch damage (a checkpoint's, a prepared
 * file's) are another job and stay CRC-32. Owns nothing; a DigestCtx is a plain value. */
#ifndef S2S_DIGEST_H
#define S2S_DIGEST_H

#include "s2s/common.h"

#include <stddef.h>
#include <stdint.h>

#define DIGEST_BYTES 32

typedef struct Digest {
    uint8_t b[DIGEST_BYTES];
} Digest;

typedef struct DigestCtx {
    uint32_t h[8];
    uint64_t bytes;     /* hashed so far */
    uint8_t buf[64];    /* a block not yet full */
} DigestCtx;

void digest_init(DigestCtx *c);
void digest_update(DigestCtx *c, const void *data, size_t n);
Digest digest_final(DigestCtx *c);
/* A string and then a byte no UTF-8 text has, so that strings one after the other stay apart. */
void digest_str(DigestCtx *c, const char *s);
/* The digest of n bytes. */
Digest digest_of(const void *data, size_t n);
/* 2 × DIGEST_BYTES lower-case hex digits and a NUL into out. */
void digest_hex(const Digest *d, char out[2 * DIGEST_BYTES + 1]);
bool digest_equal(const Digest *a, const Digest *b);
/* The digest of a file's bytes, read through fd from offset 0 to its end (the descriptor's
 * position is left alone); path names it in messages. S2S_ERR_IO on a read error. */
S2sStatus digest_fd(int fd, Digest *d, const char *path, S2sError *err);
/* The same for a file by name. */
S2sStatus digest_file(const char *path, Digest *d, S2sError *err);

#endif
