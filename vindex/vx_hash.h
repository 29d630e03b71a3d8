/* vindex/vx_hash.h — the checksums of the vindex: BLAKE2b-256 (libsodium crypto_generichash) as
 * the fast one, checked at every mount, and SHA-256 (OpenSSL's EVP interface, which uses the CPU's
 * SHA instructions — libsodium's portable SHA-256 is several times slower) for `verify` and
 * provenance. Private to vindex/. */
#ifndef VX_HASH_H
#define VX_HASH_H

#include <sodium.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kn.h"

#define VX_DIGEST_BYTES 32
#define VX_DIGEST_HEX   (2 * VX_DIGEST_BYTES + 1)

/* Initializes libsodium once (thread-safe); every function below calls it. */
void vx_hash_init(void);

typedef struct vx_b2 {
    crypto_generichash_state st;
} vx_b2;
void vx_b2_init(vx_b2 *h);
void vx_b2_update(vx_b2 *h, const void *p, size_t n);
void vx_b2_final(vx_b2 *h, uint8_t out[VX_DIGEST_BYTES]);
void vx_blake2b(const void *p, size_t n, uint8_t out[VX_DIGEST_BYTES]);

/* An OpenSSL digest context lives on the heap: init returns -1 when it cannot be had; final
 * writes the digest, releases the context and returns -1 when any step failed; vx_sha_free
 * releases a state that will not be finished (a no-op on a finished or zeroed one). */
typedef struct vx_sha {
    struct evp_md_ctx_st *ctx;
    bool failed;
} vx_sha;
int vx_sha_init(vx_sha *h);
void vx_sha_update(vx_sha *h, const void *p, size_t n);
int vx_sha_final(vx_sha *h, uint8_t out[VX_DIGEST_BYTES]);
void vx_sha_free(vx_sha *h);

/* A batch of hash updates run in parallel: each job feeds its segments, in order, to one state
 * (exactly one of b2 / sha is set). Jobs are claimed dynamically by the pool's threads (NULL pool:
 * inline), so independent streams (an extent's BLAKE2b and SHA-256, several extents, a tensor's
 * running digest) proceed at once. Put the longest jobs first. */
typedef struct vx_hash_seg {
    const void *p;
    size_t n;
} vx_hash_seg;

typedef struct vx_hash_job {
    vx_b2 *b2;
    vx_sha *sha;
    const vx_hash_seg *segs;
    size_t n_segs;
} vx_hash_job;

void vx_hash_run(kn_pool *pool, const vx_hash_job *jobs, size_t n);
/* A pool for vindex work (hashing, synthesis): one thread per online CPU, at most 8; NULL when
 * that is one. */
kn_pool *vx_pool_new(void);

void vx_hex(const uint8_t d[VX_DIGEST_BYTES], char out[VX_DIGEST_HEX]);
/* Parses 64 hex digits; returns 0 or -1. */
int vx_unhex(const char *s, uint8_t d[VX_DIGEST_BYTES]);

#endif
