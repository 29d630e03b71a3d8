/* vindex/vx_vindex.h — operations on the vindex container: extract a source into one, verify,
 * slice and inspect one, and synthesize random-weight models. The `vindex` program is a thin
 * command line over these; reading a vindex's weights goes through vindex/vx_source.h. */
#ifndef VX_VINDEX_H
#define VX_VINDEX_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "util/mw_err.h"
#include "vindex/vx_input.h"

/* Called as work advances (bytes done of total); may be NULL. */
typedef void (*vx_progress_fn)(void *ctx, uint64_t done, uint64_t total);

typedef struct vx_extract_opts {
    bool strict; /* unrecognised source tensors are fatal */
    /* NULL (store every tensor as the source stores it) or "experts=TYPE[,dense=TYPE]": convert
     * expert weights / dense 2-D weights (not norms, biases or the router) to a ggml type; the
     * manifest records each conversion. */
    const char *transcode;
    vx_progress_fn progress;
    void *progress_ctx;
} vx_extract_opts;

typedef struct vx_extract_stats {
    size_t n_dense, n_expert_tensors, n_moe_layers, n_extents, n_transcoded;
    uint64_t dense_bytes, expert_bytes; /* as written */
    uint64_t source_bytes;              /* source files hashed for provenance */
} vx_extract_stats;

/* Writes a vindex of `in` into out_dir (created; must not exist or be empty). On failure nothing
 * that looks like a vindex is left behind. stats may be NULL. */
int vx_extract(const vx_input *in, const char *out_dir, const vx_extract_opts *opts,
               vx_extract_stats *stats, mw_err *err);

/* Checks every checksum of a vindex (manifest, dense.bin, every extent, carried files, tensor
 * digests, fingerprint). Returns -1 naming the first bad extent or file. bytes_checked may be
 * NULL. */
int vx_verify(const char *dir, vx_progress_fn progress, void *ctx, uint64_t *bytes_checked,
              mw_err *err);

/* Writes a sub-vindex holding only the extents SPEC selects (vx_expert_set_parse syntax); the
 * fingerprint stays the model's. with_dense copies dense.bin too. */
int vx_slice(const char *dir, const char *spec, const char *out_dir, bool with_dense, mw_err *err);

/* Prints a human summary, or a JSON one, of a vindex. */
int vx_inspect(const char *dir, bool json, FILE *out, mw_err *err);

#endif
