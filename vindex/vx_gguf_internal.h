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
int vx_tensor_nbytes(kn_type type, int n_dims, const int64_t *ne, uint64_t *nbytes, char *why,
                     size_t why_len);

typedef struct vx_buf {
    uint8_t *p;
    size_t n, cap;
    bool oom; /* set once an append failed; later appends are ignored */
} vx_buf;

void vx_buf_put(vx_buf *b, const void *d, size_t n);
void vx_buf_u32(vx_buf *b, uint32_t v);
void vx_buf_u64(vx_buf *b, uint64_t v);
void vx_buf_str(vx_buf *b, const char *s, uint64_t len); /* GGUF string: u64 length + bytes */
void vx_buf_free(vx_buf *b);

/* Appends one GGUF metadata entry: key, u32 type, value. */
void vx_gguf_put_kv(vx_buf *b, const char *key, const vx_val *v);

#endif
