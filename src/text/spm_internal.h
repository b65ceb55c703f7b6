/* spm_internal.h — what spm.c (the model, normaliser and segmentation) and spm_decode.c share:
 * the pieces' types as the .model file numbers them, the pieces' index and a growing string. */
#ifndef S2S_SPM_INTERNAL_H
#define S2S_SPM_INTERNAL_H

#include "s2s/spm.h"

#include <stddef.h>

enum { SPM_NORMAL = 1, SPM_UNKNOWN = 2, SPM_CONTROL = 3, SPM_USER = 4, SPM_UNUSED = 5, SPM_BYTE = 6 };

/* A normal piece's id by its text (the hash index), or −1. */
int32_t spm_find_piece(const Spm *s, const char *t, size_t n);

/* A NUL-terminated string that grows. */
typedef struct SpmBuf {
    char *s;
    size_t n, cap;
} SpmBuf;
void spm_buf_put(SpmBuf *b, const char *p, size_t n);

#endif
