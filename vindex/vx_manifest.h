/* vindex/vx_manifest.h — the vindex manifest (manifest.json) as a validated C structure: what
 * extract builds and writes, and what mount, verify, slice and inspect read. Private to vindex/.
 * The byte-level format is documented in docs/vindex-format.md. */
#ifndef VX_MANIFEST_H
#define VX_MANIFEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "kernels/kn.h"
#include "util/mw_err.h"
#include "vindex/vx_experts.h"
#include "vindex/vx_hash.h"
#include "vindex/vx_meta.h"
#include "vindex/vx_source.h"

#define VX_FORMAT_NAME        "moewire-vindex"
#define VX_FORMAT_VERSION     1
#define VX_ALIGN              64 /* every tensor, part and extent starts at a multiple of this */
#define VX_MANIFEST           "manifest.json"
#define VX_DENSE_FILE         "dense.bin"
#define VX_TOKENIZER_FILE     "tokenizer.gguf" /* the tokenizer extract writes from a GGUF */
#define VX_MANIFEST_MAX_BYTES (1ull << 30)

/* A whole file with its checksums (dense.bin, carried tokenizer files). */
typedef struct vx_mf_file {
    char *name;
    uint64_t size;
    uint8_t b2[VX_DIGEST_BYTES];
    uint8_t sha[VX_DIGEST_BYTES];
} vx_mf_file;

typedef struct vx_mf_tensor {
    char *name;
    kn_type type;
    int n_dims;
    int64_t ne[4];
    uint64_t nbytes;
    uint8_t digest[VX_DIGEST_BYTES]; /* BLAKE2b-256 of the tensor's bytes (fingerprint input) */
    int layer;                       /* expert tensors: their layer; dense tensors: -1 */
    vx_role role;                    /* expert tensors only */
    uint64_t offset;                 /* dense tensors: byte offset in dense.bin */
} vx_mf_tensor;

typedef struct vx_mf_extent {
    int expert;
    uint64_t offset; /* in the layer's expert file; the length is the layer's extent_bytes */
    uint8_t b2[VX_DIGEST_BYTES];
    uint8_t sha[VX_DIGEST_BYTES];
} vx_mf_extent;

/* One MoE layer: its expert file and the extents it holds. */
typedef struct vx_mf_layer {
    int layer;
    char *file;
    uint64_t file_size;
    uint64_t extent_bytes;
    int part_tensor[VX_ROLE_COUNT]; /* index into tensors, -1 when the role is absent */
    uint64_t part_off[VX_ROLE_COUNT];
    vx_layer_experts shape;
    size_t n_ext;
    vx_mf_extent *ext; /* ascending expert index */
} vx_mf_layer;

typedef struct vx_manifest {
    vx_meta *meta;
    char fingerprint[VX_DIGEST_HEX];
    const char *arch; /* in meta */
    int n_layers, n_experts;
    int64_t hidden;
    int64_t expert_width; /* vx_model_shape's */
    size_t n_tensors;
    vx_mf_tensor *tensors; /* dense ones first */
    size_t n_dense;
    bool has_dense; /* dense.bin present (a slice may omit it) */
    vx_mf_file dense;
    size_t n_carried;
    vx_mf_file *carried;
    size_t n_moe;       /* layers with experts */
    vx_mf_layer *moe;   /* ascending layer */
    json_t *provenance; /* kept as written: sources, per-tensor ranges, dropped, transcodes */
} vx_manifest;

void vx_manifest_free(vx_manifest *m);

/* Reads DIR/manifest.json and validates everything it says (types, shapes, sizes, offsets,
 * alignment, overlaps, file names, the files' actual sizes and the fingerprint). */
int vx_manifest_read(const char *dir, vx_manifest *m, mw_err *err);
/* Writes DIR/manifest.json atomically (through a temporary file and rename). */
int vx_manifest_write(const vx_manifest *m, const char *dir, mw_err *err);

/* The fingerprint of m's metadata and tensor table. */
int vx_manifest_fingerprint(const vx_manifest *m, char out[VX_DIGEST_HEX], mw_err *err);
/* The (layer, expert) pairs whose extents m holds. */
int vx_manifest_held(const vx_manifest *m, vx_expert_set *out, mw_err *err);
/* The layer entry for a layer, or NULL when it has no experts. */
const vx_mf_layer *vx_manifest_layer(const vx_manifest *m, int layer);
/* The extent of (layer entry, expert), or NULL when not held. */
const vx_mf_extent *vx_manifest_extent(const vx_mf_layer *L, int expert);

/* Lays out a layer's parts inside an extent (role order, each 64-aligned) from L->shape; sets
 * part_off and extent_bytes. */
void vx_manifest_layout_parts(vx_mf_layer *L);
/* Hashes k extents of layer L in parallel: each one's BLAKE2b (and SHA-256 when sha is non-NULL)
 * into b2[i] / sha[i], and, when digest is non-NULL, each role's part of each extent, in order,
 * into the running tensor digests digest[role] (roles absent from L are skipped). Returns -1 when
 * memory or an OpenSSL context cannot be had. */
int vx_hash_extents(kn_pool *pool, const vx_mf_layer *L, const uint8_t *const *ext, size_t k,
                    uint8_t (*b2)[VX_DIGEST_BYTES], uint8_t (*sha)[VX_DIGEST_BYTES], vx_b2 *digest);

/* Whether a name may be a file of a vindex: letters, digits, '.', '_', '-', not starting with
 * '.', shorter than 256 bytes. */
bool vx_safe_file_name(const char *s);

/* "experts-007.bin" */
void vx_expert_file_name(int layer, char *out, size_t n);

/* Metadata <-> JSON (every GGUF value type, faithfully). */
json_t *vx_meta_to_json(const vx_meta *m);
int vx_meta_from_json(const json_t *arr, vx_meta *m, mw_err *err);

#endif
