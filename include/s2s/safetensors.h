/* safetensors.h — Hugging Face's safetensors files, read and written.
 *
 * The format: a little-endian u64 N, N bytes of a JSON object (per tensor name: "dtype",
 * "shape", "data_offsets" [begin, end) into the data that follows; an optional
 * "__metadata__" object of strings), then the tensors' bytes. The reader checks everything
 * before it reads the data: N against the file and 100 MB, the JSON, every dtype, shape and
 * byte count, offsets inside the data, in order, without overlap or a gap (as the reference
 * implementation does), names unique. It takes F32, BF16 and F16 (others are named and
 * refused). The writer puts the tensors in the order given, F32 or BF16, with the header
 * padded by spaces to a multiple of 8 bytes, through a temporary file and a rename.
 *
 * A SafeTensors owns its buffer and parsed header; its tensors point into them. Saving
 * borrows the caller's arrays. */
#ifndef S2S_SAFETENSORS_H
#define S2S_SAFETENSORS_H

#include "s2s/common.h"

#include <cjson/cJSON.h>
#include <stdint.h>

#define SAFETENSORS_MAX_HEADER 100000000u /* the reference implementation's limit */
#define SAFETENSORS_MAX_DIMS 8

typedef enum { SAFETENSORS_F32, SAFETENSORS_BF16, SAFETENSORS_F16 } SafeDtype;
extern const char *const SAFE_DTYPE_NAMES[]; /* "F32", "BF16", "F16" */

typedef struct SafeTensor {
    const char *name;           /* into the parsed header */
    SafeDtype dtype;
    int ndim;
    int64_t shape[SAFETENSORS_MAX_DIMS];
    size_t numel;
    size_t offset;              /* of its bytes within the data */
    const unsigned char *data;  /* little-endian values, maybe unaligned */
} SafeTensor;

typedef struct SafeTensors {
    unsigned char *buf;         /* the data after the header */
    size_t len;
    cJSON *header;
    const cJSON *metadata;      /* "__metadata__", or NULL */
    SafeTensor *tensors;        /* in file order */
    int n;
} SafeTensors;

S2sStatus safetensors_load(SafeTensors *s, const char *path, S2sError *err);
/* Parses a whole file image (a copy of its data is taken); origin names it in messages. */
S2sStatus safetensors_from_memory(SafeTensors *s, const void *buf, size_t len, const char *origin, S2sError *err);
void safetensors_free(SafeTensors *s);
const SafeTensor *safetensors_find(const SafeTensors *s, const char *name);
/* A metadata string, or NULL. */
const char *safetensors_meta(const SafeTensors *s, const char *key);
/* Element i as a float (BF16 and F16 widened exactly). */
float safetensors_value(const SafeTensor *t, size_t i);

typedef struct SafeSaveTensor {
    const char *name;
    int ndim;
    const int *shape;
    const void *data;           /* numel little-endian float32 values, maybe unaligned */
} SafeSaveTensor;

/* Writes n tensors (as dtype: F32, or BF16 rounded to nearest even) and n_meta metadata
 * pairs (keys[i] → values[i], strings). */
S2sStatus safetensors_save(const char *path, const SafeSaveTensor *t, int n, const char *const *keys,
                           const char *const *values, int n_meta, SafeDtype dtype, S2sError *err);

/* Base64 (RFC 4648, padded) for bytes kept in the metadata's strings; malloc'd. decode
 * returns NULL on a character or length that is not base64. */
char *safetensors_b64_encode(const void *bytes, size_t n);
unsigned char *safetensors_b64_decode(const char *txt, size_t *n);

#endif
