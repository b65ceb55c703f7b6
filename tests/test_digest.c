/* test_digest.c — SHA-256 against FIPS 180-4's examples, whatever way the bytes arrive. */
#include "test_util.h"
#include "s2s/digest.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static void expect_hex(const Digest *d, const char *want, const char *what) {
    char hex[2 * DIGEST_BYTES + 1];
    digest_hex(d, hex);
    cr_expect_str_eq(hex, want, "%s", what);
}

Test(digest, fips_180_4_examples) {
    Digest d = digest_of("", 0);
    expect_hex(&d, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "empty");
    d = digest_of("abc", 3);
    expect_hex(&d, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", "abc");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    d = digest_of(two, strlen(two));
    expect_hex(&d, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1", "two blocks");
    char *a = malloc(1000000);
    memset(a, 'a', 1000000);
    DigestCtx c;
    digest_init(&c);
    for (int i = 0; i < 1000; i++) digest_update(&c, a + 1000 * i, 1000);
    d = digest_final(&c);
    expect_hex(&d, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0", "a million a's");
    free(a);
}

/* Every length around the block and padding edges, in one piece and a byte at a time. */
Test(digest, any_split_gives_the_same_digest) {
    unsigned char buf[300];
    for (int i = 0; i < 300; i++) buf[i] = (unsigned char)(i * 7 + 3);
    for (size_t n = 0; n < 300; n++) {
        Digest whole = digest_of(buf, n);
        DigestCtx c;
        digest_init(&c);
        for (size_t i = 0; i < n; i++) digest_update(&c, buf + i, 1);
        Digest bytes = digest_final(&c);
        cr_assert(digest_equal(&whole, &bytes), "length %zu", n);
    }
    /* one bit changed anywhere: another digest */
    Digest a = digest_of(buf, 200);
    buf[199] ^= 1;
    Digest b = digest_of(buf, 200);
    cr_expect(!digest_equal(&a, &b));
}

/* A file's digest is its bytes' (sha256sum's, where there is one). */
Test(digest, a_file_digest_is_sha256sum) {
    char *d = tu_tmpdir();
    tu_write(tu_path(d, "f.txt"), "ein Mann fährt Fahrrad\n");
    Digest g;
    S2sError err;
    cr_assert_eq(digest_file(tu_path(d, "f.txt"), &g, &err), S2S_OK, "%s", err.msg);
    char hex[2 * DIGEST_BYTES + 1];
    digest_hex(&g, hex);
    if (tu_sh("command -v sha256sum > /dev/null") == 0) {
        cr_assert_eq(tu_sh("cd %s && sha256sum f.txt | cut -c1-64 > sum.txt", d), 0);
        char *want = tu_slurp(tu_path(d, "sum.txt"), NULL);
        want[strcspn(want, "\n")] = '\0';
        cr_expect_str_eq(hex, want);
        free(want);
    }
    cr_expect_eq(digest_file(tu_path(d, "none"), &g, &err), S2S_ERR_IO);
    tu_rm_rf(d);
    free(d);
}
