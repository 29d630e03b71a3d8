/* vindex/vx_gguf_internal.h — GGUF encoding pieces shared inside vindex/: tensor byte sizes, a
 * growable byte buffer and the metadata encoder (the GGUF writer and the model fingerprint both
 * serialize metadata exactly as GGUF stores it). */
#ifndef VX_GGUF_INTERNAL_H
#define VX_GGUF_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kn.h"
#include "vindex/vx_meta_internal.h"

/* Bytes of a tensor of `type` with n_dims dimensions ne (ggml order). On a bad type, shape or an
 * overflow returns -1 and writes the reason ("has 5 dimensions (must be 1..4)") into why. */
int vx__tensor_nbytes(kn_type type, int n_dims, const int64_t *ne, uint64_t *nbytes, char *why,
                      size_t why_len);

typedef struct vx__buf {
    uint8_t *p;
    size_t n, cap;
    bool oom; /* set once an append failed; later appends are ignored */
} vx__buf;

void vx__buf_put(vx__buf *b, const void *d, size_t n);
void vx__buf_u32(vx__buf *b, uint32_t v);
void vx__buf_u64(vx__buf *b, uint64_t v);
void vx__buf_str(vx__buf *b, const char *s, uint64_t len); /* GGUF string: u64 length + bytes */
void vx__buf_free(vx__buf *b);

/* Appends one GGUF metadata entry: key, u32 type, value. */
void vx__gguf_put_kv(vx__buf *b, const char *key, const vx__val *v);

#endif
