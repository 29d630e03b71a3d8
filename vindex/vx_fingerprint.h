/* vindex/vx_fingerprint.h — the model fingerprint: one digest over what makes a model that model,
 * independent of the container holding it.
 *
 * fingerprint = BLAKE2b-256 of: "moewire-fingerprint-v1\0"; u64 count and the metadata entries in
 * table order, GGUF-encoded (general.alignment excluded: it is a property of one file); u64 count
 * and, for each tensor sorted by name (bytewise), GGUF string name, u32 n_dims, n_dims × u64 ne,
 * u32 ggml type, and the BLAKE2b-256 of the tensor's stored bytes. A GGUF file and the vindex
 * extracted from it therefore share their fingerprint, and so does every slice of that vindex.
 * Private to vindex/. */
#ifndef VX_FINGERPRINT_H
#define VX_FINGERPRINT_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kn.h"
#include "util/mw_err.h"
#include "vindex/vx_hash.h"
#include "vindex/vx_meta.h"

typedef struct vx_fp_tensor {
    const char *name;
    kn_type type;
    int n_dims;
    int64_t ne[4];
    uint8_t digest[VX_DIGEST_BYTES]; /* BLAKE2b-256 of the stored bytes */
} vx_fp_tensor;

/* Computes the fingerprint as 64 hex digits. The tensor array is reordered (sorted by name). */
int vx_fingerprint(const vx_meta *meta, vx_fp_tensor *tensors, size_t n, char out[VX_DIGEST_HEX],
                   mw_err *err);

#endif
