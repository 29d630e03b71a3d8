/* vindex/vx_mount.c — a vindex directory as a source: the mount.
 *
 * The manifest is read and validated first. dense.bin is mapped when the opening asks for dense
 * tensors; of the expert files only the owned extents are mapped (runs of adjacent extents share
 * one mapping, so a node owning whole ranges needs a handful of mappings, not one per extent).
 * With verify_on_mount each mapped extent's BLAKE2b, and dense.bin's, is checked before the source
 * is handed out; a mismatch refuses the mount naming the extent. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vindex/vx_manifest.h"
#include "vindex/vx_io.h"
#include "vindex/vx_map.h"
#include "vindex/vx_source_internal.h"

typedef struct vindex_impl {
    vx_manifest m;
    vx_map *maps;
    size_t n_maps, cap_maps;
    const uint8_t **ext;          /* n_layers × n_experts extent starts, NULL when not mapped */
    const vx_mf_layer **by_layer; /* n_layers entries, NULL for layers without experts */
    kn_pool *pool;                /* mount-time hashing only */
} vindex_impl;

static void vindex_close(vx_source *s) {
    vindex_impl *vi = s->impl;
    if (!vi) return;
    for (size_t i = 0; i < vi->n_maps; i++) vx_unmap(&vi->maps[i]);
    free(vi->maps);
    free(vi->ext);
    free(vi->by_layer);
    kn_pool_destroy(vi->pool);
    vx_manifest_free(&vi->m);
    free(vi);
}

static const uint8_t *vindex_part(const vx_source *s, int layer, int expert, vx_role r) {
    const vindex_impl *vi = s->impl;
    const vx_mf_layer *L = vi->by_layer[layer];
    return vi->ext[(size_t)layer * (size_t)s->n_experts + (size_t)expert] + L->part_off[r];
}

static int vindex_fingerprint(vx_source *s, mw_err *err) {
    const vindex_impl *vi = s->impl;
    memcpy(s->fp, vi->m.fingerprint, sizeof s->fp);
    return 0;
}

static int vindex_carried(const vx_source *s, const char *name, char *path, size_t plen,
                          mw_err *err) {
    const vindex_impl *vi = s->impl;
    for (size_t i = 0; i < vi->m.n_carried; i++) {
        const vx_mf_file *f = &vi->m.carried[i];
        if (strcmp(f->name, name)) continue;
        snprintf(path, plen, "%s/%s", s->path, f->name);
        uint8_t b2[VX_DIGEST_BYTES], sha[VX_DIGEST_BYTES];
        if (vx_hash_range(path, 0, f->size, b2, sha, NULL, NULL, err)) return -1;
        if (memcmp(b2, f->b2, sizeof b2) || memcmp(sha, f->sha, sizeof sha))
            return mw_errf(err, "%s: checksum mismatch", path);
        return 1;
    }
    return 0;
}

/* Maps [off, off + len) of fd read-only; returns a pointer to byte off. */
static const uint8_t *map_range(vx_source *s, int fd, uint64_t off, uint64_t len, const char *path,
                                mw_err *err) {
    vindex_impl *vi = s->impl;
    if (vi->n_maps == vi->cap_maps) {
        size_t cap = vi->cap_maps ? vi->cap_maps * 2 : 16;
        vx_map *m = realloc(vi->maps, cap * sizeof *m);
        if (!m) {
            mw_errf(err, "%s: out of memory", path);
            return NULL;
        }
        vi->maps = m;
        vi->cap_maps = cap;
    }
    vx_map *m = &vi->maps[vi->n_maps];
    if (len == 0) {
        mw_errf(err, "%s: empty range at %llu", path, (unsigned long long)off);
        return NULL;
    }
    if (vx_map_fd(fd, path, off, len, 0, m, err)) return NULL;
    vi->n_maps++;
    return m->p;
}

/* Opens a file of the vindex and checks its size against the manifest. */
static int open_sized(const char *dir, const char *name, uint64_t size, char *path, size_t plen,
                      mw_err *err) {
    snprintf(path, plen, "%s/%s", dir, name);
    vx_file_id id;
    int fd = vx_open_file(path, &id, err);
    if (fd >= 0 && id.size != size) {
        close(fd);
        return mw_errf(err, "%s: size changed since the manifest was read", path);
    }
    return fd;
}

static int map_dense(vx_source *s, bool verify, mw_err *err) {
    vindex_impl *vi = s->impl;
    const vx_manifest *m = &vi->m;
    if (!m->has_dense)
        return mw_errf(err, "%s: this vindex holds no dense tensors (sliced without them)",
                       s->path);
    char path[4096];
    int fd = open_sized(s->path, VX_DENSE_FILE, m->dense.size, path, sizeof path, err);
    if (fd < 0) return -1;
    const uint8_t *base = m->dense.size ? map_range(s, fd, 0, m->dense.size, path, err) : NULL;
    close(fd);
    if (m->dense.size && !base) return -1;
    if (verify) {
        uint8_t d[VX_DIGEST_BYTES];
        vx_blake2b(base, m->dense.size, d);
        if (memcmp(d, m->dense.b2, sizeof d) != 0)
            return mw_errf(err, "%s: checksum mismatch", path);
    }
    for (size_t i = 0; i < m->n_dense; i++)
        s->list[i].data = base ? base + m->tensors[i].offset : NULL;
    return 0;
}

/* Checks the BLAKE2b of extents [i, j) of L (just mapped), a batch at a time in parallel. */
static int verify_run(vx_source *s, const vx_mf_layer *L, size_t i, size_t j, mw_err *err) {
    vindex_impl *vi = s->impl;
    enum { BATCH = 16 };
    for (size_t i0 = i; i0 < j; i0 += BATCH) {
        size_t k = j - i0 < BATCH ? j - i0 : BATCH;
        const uint8_t *ext[BATCH];
        uint8_t b2[BATCH][VX_DIGEST_BYTES];
        for (size_t x = 0; x < k; x++)
            ext[x] =
                vi->ext[(size_t)L->layer * (size_t)s->n_experts + (size_t)L->ext[i0 + x].expert];
        if (vx_hash_extents(vi->pool, L, ext, k, b2, NULL, NULL))
            return mw_errf(err, "%s: out of memory", s->path);
        for (size_t x = 0; x < k; x++)
            if (memcmp(b2[x], L->ext[i0 + x].b2, VX_DIGEST_BYTES) != 0)
                return mw_errf(err, "%s: extent (layer %d, expert %d) in %s: checksum mismatch",
                               s->path, L->layer, L->ext[i0 + x].expert, L->file);
    }
    return 0;
}

/* Maps the held extents of one layer, a run of adjacent extents per mapping. */
static int map_layer(vx_source *s, const vx_mf_layer *L, bool verify, mw_err *err) {
    vindex_impl *vi = s->impl;
    char path[4096];
    int fd = -1;
    for (size_t i = 0; i < L->n_ext;) {
        if (!vx_expert_set_has(&s->held, L->layer, L->ext[i].expert)) {
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < L->n_ext && vx_expert_set_has(&s->held, L->layer, L->ext[j].expert) &&
               L->ext[j].offset == L->ext[j - 1].offset + L->extent_bytes)
            j++;
        if (fd < 0 && (fd = open_sized(s->path, L->file, L->file_size, path, sizeof path, err)) < 0)
            return -1;
        uint64_t len = L->ext[j - 1].offset + L->extent_bytes - L->ext[i].offset;
        const uint8_t *base = map_range(s, fd, L->ext[i].offset, len, path, err);
        if (!base) {
            close(fd);
            return -1;
        }
        for (size_t k = i; k < j; k++)
            vi->ext[(size_t)L->layer * (size_t)s->n_experts + (size_t)L->ext[k].expert] =
                base + (L->ext[k].offset - L->ext[i].offset);
        if (verify && verify_run(s, L, i, j, err)) {
            close(fd);
            return -1;
        }
        if (verify) s->verify_done += (uint64_t)(j - i) * L->extent_bytes;
        i = j;
    }
    if (fd >= 0) close(fd);
    return 0;
}

static int build_list(vx_source *s) {
    const vx_manifest *m = &((vindex_impl *)s->impl)->m;
    s->list = calloc(m->n_tensors ? m->n_tensors : 1, sizeof *s->list);
    if (!s->list) return -1;
    for (size_t i = 0; i < m->n_tensors; i++) {
        const vx_mf_tensor *t = &m->tensors[i];
        vx_tensor *v = &s->list[i];
        v->name = t->name;
        v->type = t->type;
        v->n_dims = t->n_dims;
        memcpy(v->ne, t->ne, sizeof v->ne);
        v->offset = t->layer < 0 ? t->offset : 0;
        v->nbytes = t->nbytes;
    }
    s->n_list = m->n_tensors;
    s->n_dense = m->n_dense;
    return 0;
}

int vx__source_open_vindex(const char *dir, const vx_source_opts *opts, vx_source **out,
                           mw_err *err) {
    *out = NULL;
    vx_source *s =
        vx__source_alloc(dir, sizeof(vindex_impl), vindex_close, vindex_fingerprint, vindex_part);
    if (!s) return mw_errf(err, "%s: out of memory", dir);
    vindex_impl *vi = s->impl;
    s->carried = vindex_carried;
    bool dense = !opts || opts->dense, verify = !opts || opts->verify_on_mount;
    if (vx_manifest_read(dir, &vi->m, err)) goto fail;
    s->meta = vi->m.meta; /* the source owns the table from here */
    vi->m.meta = NULL;
    if (vx__source_read_shape(s, err)) goto fail;
    for (size_t i = 0; i < vi->m.n_moe; i++) s->layers[vi->m.moe[i].layer] = vi->m.moe[i].shape;
    if (vx_manifest_held(&vi->m, &s->held, err) || vx__source_restrict(s, opts, err)) goto fail;
    vi->ext = calloc((size_t)s->n_layers * (size_t)s->n_experts + 1, sizeof *vi->ext);
    vi->by_layer = calloc((size_t)s->n_layers + 1, sizeof *vi->by_layer);
    if (!vi->ext || !vi->by_layer || build_list(s)) {
        mw_errf(err, "%s: out of memory", dir);
        goto fail;
    }
    for (size_t i = 0; i < vi->m.n_moe; i++) vi->by_layer[vi->m.moe[i].layer] = &vi->m.moe[i];
    if (dense && map_dense(s, verify, err)) goto fail;
    if (verify) vi->pool = vx_pool_new();
    for (size_t i = 0; verify && i < vi->m.n_moe; i++)
        for (size_t k = 0; k < vi->m.moe[i].n_ext; k++)
            if (vx_expert_set_has(&s->held, vi->m.moe[i].layer, vi->m.moe[i].ext[k].expert))
                s->verify_total += vi->m.moe[i].extent_bytes;
    const bool report = verify && opts && opts->progress;
    for (size_t i = 0; i < vi->m.n_moe; i++) {
        if (map_layer(s, &vi->m.moe[i], verify, err)) goto fail;
        if (report) opts->progress(opts->progress_ctx, "mount", s->verify_done, s->verify_total);
    }
    kn_pool_destroy(vi->pool);
    vi->pool = NULL;
    s->dense_mapped = dense;
    if (vx__source_index_dense(s, err)) goto fail;
    *out = s;
    return 0;
fail:
    vx_source_close(s);
    return -1;
}
