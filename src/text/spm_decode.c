/* spm_decode.c — SentencePiece pieces back to text, as spm_decode: byte pieces joined into
 * UTF-8 (U+FFFD for what is not), "▁" as spaces, the dummy prefix's space dropped, control
 * pieces silent, unknown ones as the model's surface. */
#include "s2s/spm.h"
#include "s2s/text.h"
#include "spm_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a piece's id: normal pieces by the index, the few others (control, unknown, bytes) by a
 * scan; a piece the model does not have: the unknown id */
static int piece_id(const Spm *s, const char *p, size_t n) {
    int id = spm_find_piece(s, p, n);
    if (id >= 0) return id;
    for (int i = 0; i < s->n; i++)
        if (s->type[i] != SPM_NORMAL && s->type[i] != SPM_UNUSED && strlen(s->piece[i]) == n && !memcmp(s->piece[i], p, n)) return i;
    return s->unk_id;
}

static void flush_bytes(SpmBuf *out, const unsigned char *b, int nb) {
    for (int i = 0; i < nb;) {
        int take = 0;
        for (int w = 4; w >= 1 && !take; w--)
            if (i + w <= nb && utf8_valid((const char *)b + i, (size_t)w)) take = w;
        if (take) spm_buf_put(out, (const char *)b + i, (size_t)take);
        else spm_buf_put(out, "\xEF\xBF\xBD", 3);
        i += take ? take : 1;
    }
}

char *spm_decode_text(const Spm *s, const char *pieces) {
    SpmBuf out = {0};
    spm_buf_put(&out, "", 0);
    unsigned char bytes[256];
    int nb = 0;
    bool bos_ws = true, bos_seen = false;
    for (const char *p = pieces; *p;) {
        while (*p == ' ') p++;
        const char *e = p;
        while (*e && *e != ' ') e++;
        size_t n = (size_t)(e - p);
        if (!n) break;
        int id = piece_id(s, p, n);
        if (s->type[id] == SPM_BYTE && nb < (int)sizeof bytes) {
            unsigned v = 0;
            sscanf(s->piece[id], "<0x%2X>", &v);
            bytes[nb++] = (unsigned char)v;
            p = e;
            continue;
        }
        flush_bytes(&out, bytes, nb);
        nb = 0;
        if (bos_seen || out.n) bos_ws = false;
        if (s->type[id] == SPM_CONTROL) {
            bos_seen = false;
        } else if (id == s->unk_id) {
            bool literal = strlen(s->piece[id]) == n && !memcmp(s->piece[id], p, n);
            if (literal) spm_buf_put(&out, s->unk_surface, strlen(s->unk_surface));
            else spm_buf_put(&out, p, n); /* text the model does not have: as it is */
            bos_seen = false;
        } else {
            const char *q = p;
            bos_seen = false;
            if (bos_ws && (s->add_dummy_prefix || s->remove_extra_whitespaces) && n >= 3 && !memcmp(q, "\xe2\x96\x81", 3)) {
                q += 3;
                bos_seen = !s->remove_extra_whitespaces;
            }
            while (q < e) {
                if (e - q >= 3 && !memcmp(q, "\xe2\x96\x81", 3)) {
                    spm_buf_put(&out, " ", 1);
                    q += 3;
                } else {
                    spm_buf_put(&out, q++, 1);
                }
            }
        }
        p = e;
    }
    flush_bytes(&out, bytes, nb);
    return out.s;
}
