/* digest.c — SHA-256 as FIPS 180-4 defines it, one 64-byte block at a time. */
#include "s2s/digest.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01,
    0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc,
    0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08,
    0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void block(uint32_t h[8], const uint8_t *p) {
    uint32_t w[64];
    for (int t = 0; t < 16; t++)
        w[t] = (uint32_t)p[4 * t] << 24 | (uint32_t)p[4 * t + 1] << 16 | (uint32_t)p[4 * t + 2] << 8 | p[4 * t + 3];
    for (int t = 16; t < 64; t++) {
        uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
        uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
        w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int t = 0; t < 64; t++) {
        uint32_t t1 = k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[t] + w[t];
        uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

void digest_init(DigestCtx *c) {
    static const uint32_t H0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, H0, sizeof H0);
    c->bytes = 0;
}

void digest_update(DigestCtx *c, const void *data, size_t n) {
    if (!n) return; /* data may be NULL then */
    const uint8_t *p = data;
    size_t have = (size_t)(c->bytes % 64);
    c->bytes += n;
    if (have) { /* fill the pending block first */
        size_t take = n < 64 - have ? n : 64 - have;
        memcpy(c->buf + have, p, take);
        p += take, n -= take, have += take;
        if (have < 64) return;
        block(c->h, c->buf);
    }
    for (; n >= 64; p += 64, n -= 64) block(c->h, p);
    memcpy(c->buf, p, n);
}

Digest digest_final(DigestCtx *c) {
    uint64_t bits = c->bytes * 8;
    static const uint8_t one = 0x80, zeros[64] = {0};
    digest_update(c, &one, 1);
    size_t have = (size_t)(c->bytes % 64);
    digest_update(c, zeros, have <= 56 ? 56 - have : 120 - have);
    uint8_t len[8];
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)(bits >> (56 - 8 * i));
    digest_update(c, len, 8);
    Digest d;
    for (int i = 0; i < 8; i++)
        for (int k = 0; k < 4; k++) d.b[4 * i + k] = (uint8_t)(c->h[i] >> (24 - 8 * k));
    return d;
}

void digest_str(DigestCtx *c, const char *s) {
    static const uint8_t apart = 0xff;
    digest_update(c, s, strlen(s));
    digest_update(c, &apart, 1);
}

Digest digest_of(const void *data, size_t n) {
    DigestCtx c;
    digest_init(&c);
    digest_update(&c, data, n);
    return digest_final(&c);
}

void digest_hex(const Digest *d, char out[2 * DIGEST_BYTES + 1]) {
    static const char HEX[] = "0123456789abcdef";
    for (int i = 0; i < DIGEST_BYTES; i++) out[2 * i] = HEX[d->b[i] >> 4], out[2 * i + 1] = HEX[d->b[i] & 15];
    out[2 * DIGEST_BYTES] = '\0';
}

bool digest_equal(const Digest *a, const Digest *b) { return !memcmp(a->b, b->b, DIGEST_BYTES); }

S2sStatus digest_fd(int fd, Digest *d, const char *path, S2sError *err) {
    DigestCtx c;
    digest_init(&c);
    static const size_t CHUNK = 1 << 16;
    uint8_t buf[1 << 16];
    for (off_t at = 0;;) {
        ssize_t k = pread(fd, buf, CHUNK, at);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return s2s_fail(err, S2S_ERR_IO, "%s: read error: %s", path, strerror(errno));
        if (k == 0) break;
        digest_update(&c, buf, (size_t)k);
        at += k;
    }
    *d = digest_final(&c);
    return S2S_OK;
}

S2sStatus digest_file(const char *path, Digest *d, S2sError *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return s2s_fail(err, S2S_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    S2sStatus st = digest_fd(fd, d, path, err);
    close(fd);
    return st;
}
