/* vindex/vx_source_gguf.c — a GGUF file as a source.
 *
 * A GGUF source maps the whole file once (vx_gguf); expert e of a layer is a view into the 3-D
 * expert tensors. Dense tensors are the ones that are not routed-expert tensors. */
#include <stdlib.h>
#include <string.h>

#include "vindex/vx_fingerprint.h"
#include "vindex/vx_source_internal.h"

typedef struct gguf_impl {
    vx_gguf *g;
    const vx_tensor **parts; /* n_layers × VX_ROLE_COUNT */
} gguf_impl;

static const uint8_t *gguf_part(const vx_source *s, int layer, int expert, vx_role r) {
    const gguf_impl *gi = s->impl;
    const vx_tensor *t = gi->parts[(size_t)layer * VX_ROLE_COUNT + r];
    return (const uint8_t *)t->data + (uint64_t)expert * s->layers[layer].part[r].slice_bytes;
}

/* Every tensor's digest, in parallel; a group of about GROUP bytes at a time when someone follows
 * the progress (the whole file at once otherwise). */
static void hash_all(const vx_source *s, const vx_hash_job *jobs, size_t n) {
    enum { GROUP = 256 << 20 };
    kn_pool *pool = vx_pool_new();
    uint64_t done = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        uint64_t bytes = 0;
        while (j < n && (!s->progress || bytes < GROUP)) bytes += jobs[j++].segs[0].n;
        vx_hash_run(pool, jobs + i, j - i);
        done += bytes;
        if (s->progress) s->progress(s->progress_ctx, "fingerprint", done, s->fp_bytes);
        i = j;
    }
    kn_pool_destroy(pool);
}

static int gguf_fingerprint(vx_source *s, mw_err *err) {
    const gguf_impl *gi = s->impl;
    size_t n = vx_gguf_n_tensors(gi->g);
    vx_fp_tensor *fp = calloc(n ? n : 1, sizeof *fp);
    vx_b2 *st = calloc(n ? n : 1, sizeof *st);
    vx_hash_seg *segs = calloc(n ? n : 1, sizeof *segs);
    vx_hash_job *jobs = calloc(n ? n : 1, sizeof *jobs);
    int rc = fp && st && segs && jobs ? 0 : mw_errf(err, "%s: out of memory", s->path);
    if (rc == 0) {
        /* every tensor's digest, in parallel: this reads the whole file once */
        for (size_t i = 0; i < n; i++) {
            const vx_tensor *t = vx_gguf_tensor(gi->g, i);
            vx_b2_init(&st[i]);
            segs[i] = (vx_hash_seg){t->data, t->nbytes};
            jobs[i] = (vx_hash_job){.b2 = &st[i], .segs = &segs[i], .n_segs = 1};
        }
        hash_all(s, jobs, n);
        for (size_t i = 0; i < n; i++) {
            const vx_tensor *t = vx_gguf_tensor(gi->g, i);
            fp[i].name = t->name;
            fp[i].type = t->type;
            fp[i].n_dims = t->n_dims;
            memcpy(fp[i].ne, t->ne, sizeof fp[i].ne);
            vx_b2_final(&st[i], fp[i].digest);
        }
        rc = vx_fingerprint(s->meta, fp, n, s->fp, err);
    }
    free(fp);
    free(st);
    free(segs);
    free(jobs);
    return rc;
}

static void gguf_close(vx_source *s) {
    gguf_impl *gi = s->impl;
    if (!gi) return;
    free(gi->parts);
    vx_gguf_close(gi->g);
    free(gi);
}

/* Sorts the file's tensors into the list (dense first) and the per-layer expert roles. */
static int gguf_classify(vx_source *s, gguf_impl *gi, mw_err *err) {
    size_t n = vx_gguf_n_tensors(gi->g);
    s->list = calloc(n ? n : 1, sizeof *s->list);
    gi->parts = calloc((size_t)(s->n_layers ? s->n_layers : 1) * VX_ROLE_COUNT, sizeof *gi->parts);
    if (!s->list || !gi->parts) return mw_errf(err, "%s: out of memory", s->path);
    size_t n_exp = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < n; i++) {
            const vx_tensor *t = vx_gguf_tensor(gi->g, i);
            int layer, r = vx_expert_role(t->name, &layer);
            if ((r >= 0) != (pass == 1)) continue;
            s->list[s->n_list++] = *t;
            if (r < 0) {
                s->n_dense++;
                continue;
            }
            n_exp++;
            if (s->n_experts == 0)
                return mw_errf(err, "%s: expert tensor '%s' but no %s.expert_count", s->path,
                               t->name, s->arch);
            if (layer >= s->n_layers)
                return mw_errf(err, "%s: expert tensor '%s' is beyond %s.block_count = %d", s->path,
                               t->name, s->arch, s->n_layers);
            if (vx_layer_set_part(&s->layers[layer], (vx_role)r, t->type, t->n_dims, t->ne,
                                  s->n_experts, t->name, err))
                return mw_err_wrap(err, "%s", s->path);
            gi->parts[(size_t)layer * VX_ROLE_COUNT + r] = t;
        }
    }
    for (int l = 0; l < s->n_layers; l++)
        if (vx_layer_check(&s->layers[l], l, s->expert_width, err))
            return mw_err_wrap(err, "%s", s->path);
    return 0;
}

int vx__source_open_gguf(const char *path, const vx_source_opts *opts, vx_source **out,
                         mw_err *err) {
    vx_source *s =
        vx__source_alloc(path, sizeof(gguf_impl), gguf_close, gguf_fingerprint, gguf_part);
    if (!s) return mw_errf(err, "%s: out of memory", path);
    gguf_impl *gi = s->impl;
    if (vx_gguf_open(path, &gi->g, err)) goto fail;
    if (!(s->meta = vx_meta_clone(vx_gguf_meta(gi->g)))) {
        mw_errf(err, "%s: out of memory", path);
        goto fail;
    }
    if (vx__source_read_shape(s, err) || gguf_classify(s, gi, err)) goto fail;
    for (size_t i = 0; i < vx_gguf_n_tensors(gi->g); i++)
        s->fp_bytes += vx_gguf_tensor(gi->g, i)->nbytes;
    if (vx_expert_set_init(&s->held, s->n_layers, s->n_experts, false)) {
        mw_errf(err, "%s: out of memory", path);
        goto fail;
    }
    for (int l = 0; l < s->n_layers; l++)
        for (int e = 0; s->layers[l].present && e < s->n_experts; e++)
            vx_expert_set_put(&s->held, l, e, true);
    if (vx__source_restrict(s, opts, err)) goto fail;
    s->dense_mapped = !opts || opts->dense;
    if (vx__source_index_dense(s, err)) goto fail;
    *out = s;
    return 0;
fail:
    vx_source_close(s);
    return -1;
}
