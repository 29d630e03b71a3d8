/* vindex/vx_source_internal.h — the vx_source object shared by its two backings: a GGUF file
 * (vx_source_gguf.c) and a mounted vindex directory (vx_mount.c). Private to vindex/. */
#ifndef VX_SOURCE_INTERNAL_H
#define VX_SOURCE_INTERNAL_H

#include <pthread.h>

#include "vindex/vx_experts.h"
#include "vindex/vx_hash.h"
#include "vindex/vx_source.h"
#include "vindex/vx_strmap.h"

struct vx_source {
    char *path;
    vx_meta *meta; /* owned */
    const char *arch;
    int n_layers, n_experts;
    int64_t hidden;
    int64_t expert_width;     /* vx_model_shape's */
    vx_expert_set held;       /* the (layer, expert) pairs this opening serves */
    vx_layer_experts *layers; /* n_layers entries */
    /* Pointer to expert e's slice of role r in layer l (only called for held experts). */
    const uint8_t *(*part_ptr)(const vx_source *s, int layer, int expert, vx_role r);
    /* Every tensor, dense first (n_dense of them); expert tensors follow. */
    vx_tensor *list;
    size_t n_list, n_dense;
    bool dense_mapped; /* whether vx_source_tensor serves dense tensors */
    vx_strmap dense_index;
    /* The fingerprint, computed on first use by compute_fp. */
    pthread_mutex_t fp_lock;
    bool fp_ok;
    char fp[VX_DIGEST_HEX];
    int (*compute_fp)(vx_source *s, mw_err *err);
    uint64_t fp_bytes; /* what compute_fp reads (0: the fingerprint is stored) */
    /* vx_source_opts' progress callback, kept for the fingerprint computed later */
    void (*progress)(void *ctx, const char *what, uint64_t done, uint64_t total);
    void *progress_ctx;
    uint64_t verify_total, verify_done; /* mount: extent bytes to check, checked */
    void (*close_impl)(vx_source *s);
    /* A carried file by name (vx_source_carried); NULL for backings that carry none. */
    int (*carried)(const vx_source *s, const char *name, char *path, size_t plen, mw_err *err);
    void *impl;
};

/* The backings' openers, which vx_source_open (vx_source_open.c) picks between: a vindex
 * directory (vx_mount.c) and a GGUF file (vx_source_gguf.c). */
int vx__source_open_vindex(const char *dir, const vx_source_opts *opts, vx_source **out,
                           mw_err *err);
int vx__source_open_gguf(const char *path, const vx_source_opts *opts, vx_source **out,
                         mw_err *err);

/* Shared steps of both backings (vx_source.c). */
/* A source for path with a zeroed impl of impl_size bytes and the backing's callbacks (close_impl
 * frees the impl); NULL when out of memory. */
vx_source *vx__source_alloc(const char *path, size_t impl_size, void (*close_impl)(vx_source *),
                            int (*compute_fp)(vx_source *, mw_err *),
                            const uint8_t *(*part_ptr)(const vx_source *, int, int, vx_role));
/* Reads arch, block_count, expert_count and embedding_length from s->meta. */
int vx__source_read_shape(vx_source *s, mw_err *err);
/* Restricts s->held (already the pairs the backing holds) to opts->experts, refusing pairs the
 * backing does not hold. */
int vx__source_restrict(vx_source *s, const vx_source_opts *opts, mw_err *err);
/* Builds the name index of the first n_dense entries of s->list. */
int vx__source_index_dense(vx_source *s, mw_err *err);

#endif
