/* vindex/vx_verify.c — `vindex verify`: every checksum a vindex states, checked against its bytes.
 *
 * Reading the manifest already proves its tables consistent and its fingerprint right; then each
 * file is hashed: dense.bin (BLAKE2b and SHA-256, plus every dense tensor's digest), every extent
 * (both checksums), every expert tensor whose extents are all present (its digest, fed extent by
 * extent in expert order), and the carried files. The first mismatch is the error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "vindex/vx_io.h"
#include "vindex/vx_manifest.h"
#include "vindex/vx_map.h"
#include "vindex/vx_vindex.h"

typedef struct vjob {
    const char *dir;
    const vx_manifest *m;
    vx_progress_fn progress;
    void *ctx;
    uint64_t done, total;
    kn_pool *pool;
    mw_err *err;
} vjob;

static void advance(void *arg, uint64_t n) {
    vjob *v = arg;
    v->done += n;
    if (v->progress) v->progress(v->ctx, v->done, v->total);
}

/* Maps a whole file of the vindex read-only, for one sequential pass. */
static const uint8_t *map_file(vjob *v, const char *name, uint64_t size, vx_map *m, char *path,
                               size_t plen) {
    snprintf(path, plen, "%s/%s", v->dir, name);
    vx_file_id id;
    if (vx_map_file(path, MADV_SEQUENTIAL, m, &id, v->err)) return NULL;
    if (id.size != size || !m->p) {
        vx_unmap(m);
        mw_errf(v->err, "%s: size changed since the manifest was read", path);
        return NULL;
    }
    return m->p;
}

static int verify_dense(vjob *v) {
    const vx_manifest *m = v->m;
    if (!m->has_dense || m->dense.size == 0) return 0;
    char path[4096];
    vx_map map;
    const uint8_t *p = map_file(v, VX_DENSE_FILE, m->dense.size, &map, path, sizeof path);
    if (!p) return -1;
    /* the file's two checksums and every tensor's digest, in parallel */
    size_t n = m->n_dense + 2;
    vx_hash_seg *segs = malloc(n * sizeof *segs);
    vx_hash_job *jobs = malloc(n * sizeof *jobs);
    vx_b2 *dig = malloc(n * sizeof *dig);
    vx_sha sha;
    int rc = segs && jobs && dig && !vx_sha_init(&sha) ? 0 : mw_errf(v->err, "out of memory");
    if (rc == 0) {
        for (size_t i = 0; i < n; i++) {
            vx_b2_init(&dig[i]);
            segs[i] = i < 2 ? (vx_hash_seg){p, m->dense.size}
                            : (vx_hash_seg){p + m->tensors[i - 2].offset, m->tensors[i - 2].nbytes};
            jobs[i] = (vx_hash_job){.b2 = i == 0 ? NULL : &dig[i],
                                    .sha = i == 0 ? &sha : NULL,
                                    .segs = &segs[i],
                                    .n_segs = 1};
        }
        vx_hash_run(v->pool, jobs, n);
        uint8_t d[VX_DIGEST_BYTES];
        if (vx_sha_final(&sha, d))
            rc = mw_errf(v->err, "%s: SHA-256 failed", path);
        else if (memcmp(d, m->dense.sha, sizeof d) != 0)
            rc = mw_errf(v->err, "%s: checksum mismatch (SHA-256)", path);
        vx_b2_final(&dig[1], d);
        if (rc == 0 && memcmp(d, m->dense.b2, sizeof d) != 0)
            rc = mw_errf(v->err, "%s: checksum mismatch (BLAKE2b)", path);
        for (size_t i = 2; i < n && rc == 0; i++) {
            vx_b2_final(&dig[i], d);
            if (memcmp(d, m->tensors[i - 2].digest, sizeof d) != 0)
                rc = mw_errf(v->err, "%s: tensor '%s': digest mismatch", path,
                             m->tensors[i - 2].name);
        }
    }
    free(segs);
    free(jobs);
    free(dig);
    vx_unmap(&map);
    advance(v, m->dense.size);
    return rc;
}

#define BATCH 16

static int verify_layer(vjob *v, const vx_mf_layer *L) {
    if (L->n_ext == 0) return 0;
    char path[4096];
    vx_map map;
    const uint8_t *p = map_file(v, L->file, L->file_size, &map, path, sizeof path);
    if (!p) return -1;
    /* tensor digests only when the layer holds every expert (a slice may not) */
    bool complete = L->n_ext == (size_t)v->m->n_experts;
    vx_b2 digest[VX_ROLE_COUNT];
    for (int r = 0; r < VX_ROLE_COUNT; r++) vx_b2_init(&digest[r]);
    size_t B = 2 * (size_t)kn_pool_size(v->pool);
    if (B > BATCH) B = BATCH;
    int rc = 0;
    for (size_t i0 = 0; i0 < L->n_ext && rc == 0; i0 += B) {
        size_t k = L->n_ext - i0 < B ? L->n_ext - i0 : B;
        const uint8_t *ext[BATCH];
        uint8_t b2[BATCH][VX_DIGEST_BYTES], sha[BATCH][VX_DIGEST_BYTES];
        for (size_t i = 0; i < k; i++) ext[i] = p + L->ext[i0 + i].offset;
        if (vx_hash_extents(v->pool, L, ext, k, b2, sha, complete ? digest : NULL))
            rc = mw_errf(v->err, "out of memory");
        for (size_t i = 0; i < k && rc == 0; i++) {
            const vx_mf_extent *x = &L->ext[i0 + i];
            const char *which = memcmp(b2[i], x->b2, VX_DIGEST_BYTES)     ? "BLAKE2b"
                                : memcmp(sha[i], x->sha, VX_DIGEST_BYTES) ? "SHA-256"
                                                                          : NULL;
            if (which)
                rc = mw_errf(v->err,
                             "%s: extent (layer %d, expert %d) in %s: checksum mismatch "
                             "(%s)",
                             v->dir, L->layer, x->expert, L->file, which);
            advance(v, L->extent_bytes);
        }
    }
    for (int r = 0; r < VX_ROLE_COUNT && rc == 0 && complete; r++) {
        if (L->part_tensor[r] < 0) continue;
        uint8_t d[VX_DIGEST_BYTES];
        vx_b2_final(&digest[r], d);
        const vx_mf_tensor *t = &v->m->tensors[L->part_tensor[r]];
        if (memcmp(d, t->digest, sizeof d) != 0)
            rc = mw_errf(v->err, "%s: tensor '%s': digest mismatch", path, t->name);
    }
    vx_unmap(&map);
    return rc;
}

static int verify_carried(vjob *v, const vx_mf_file *f) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", v->dir, f->name);
    uint8_t b2[VX_DIGEST_BYTES], sha[VX_DIGEST_BYTES];
    if (vx_hash_range(path, 0, f->size, b2, sha, advance, v, v->err)) return -1;
    if (memcmp(b2, f->b2, sizeof b2) != 0 || memcmp(sha, f->sha, sizeof sha) != 0)
        return mw_errf(v->err, "%s: checksum mismatch", path);
    return 0;
}

int vx_verify(const char *dir, vx_progress_fn progress, void *ctx, uint64_t *bytes_checked,
              mw_err *err) {
    vx_manifest m;
    if (vx_manifest_read(dir, &m, err)) return -1;
    vjob v = {.dir = dir, .m = &m, .progress = progress, .ctx = ctx, .err = err};
    v.total = m.has_dense ? m.dense.size : 0;
    for (size_t i = 0; i < m.n_moe; i++) v.total += m.moe[i].n_ext * m.moe[i].extent_bytes;
    for (size_t i = 0; i < m.n_carried; i++) v.total += m.carried[i].size;
    v.pool = vx_pool_new();
    int rc = verify_dense(&v);
    for (size_t i = 0; i < m.n_moe && rc == 0; i++) rc = verify_layer(&v, &m.moe[i]);
    for (size_t i = 0; i < m.n_carried && rc == 0; i++) rc = verify_carried(&v, &m.carried[i]);
    kn_pool_destroy(v.pool);
    if (bytes_checked) *bytes_checked = v.done;
    vx_manifest_free(&m);
    return rc;
}
