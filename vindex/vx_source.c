/* vindex/vx_source.c — model weights from a GGUF file, and the accessors every source shares.
 *
 * A GGUF source maps the whole file once (vx_gguf); expert e of a layer is a view into the 3-D
 * expert tensors. Dense tensors are the ones that are not routed-expert tensors. */
#include "vindex/vx_source.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "vindex/vx_fingerprint.h"
#include "vindex/vx_source_internal.h"

/* ---- shared -------------------------------------------------------------------------------- */

int vx_source_carried(const vx_source *s, const char *name, char *path, size_t plen, mw_err *err) {
    return s->carried ? s->carried(s, name, path, plen, err) : 0;
}

vx_source *vx_source_alloc(const char *path, size_t impl_size, void (*close_impl)(vx_source *),
                           int (*compute_fp)(vx_source *, mw_err *),
                           const uint8_t *(*part_ptr)(const vx_source *, int, int, vx_role)) {
    vx_source *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->path = strdup(path);
    s->impl = calloc(1, impl_size);
    if (!s->path || !s->impl) {
        free(s->path);
        free(s->impl);
        free(s);
        return NULL;
    }
    s->close_impl = close_impl;
    s->compute_fp = compute_fp;
    s->part_ptr = part_ptr;
    pthread_mutex_init(&s->fp_lock, NULL);
    return s;
}

int vx_source_read_shape(vx_source *s, mw_err *err) {
    vx_model_shape sh;
    if (vx_model_shape_read(s->meta, s->path, &sh, err)) return -1;
    s->arch = sh.arch;
    s->n_layers = sh.n_layers;
    s->n_experts = sh.n_experts;
    s->hidden = sh.hidden;
    s->layers = calloc(sh.n_layers ? (size_t)sh.n_layers : 1, sizeof *s->layers);
    if (!s->layers) return mw_errf(err, "%s: out of memory", s->path);
    return 0;
}

int vx_source_restrict(vx_source *s, const vx_source_opts *opts, mw_err *err) {
    const vx_expert_set *want = opts ? opts->experts : NULL;
    if (!want) return 0;
    if (want->n_layers == 0 && !want->bits) { /* the empty set: no experts at all */
        for (int l = 0; l < s->n_layers; l++)
            for (int e = 0; e < s->n_experts; e++) vx_expert_set_put(&s->held, l, e, false);
        return 0;
    }
    if (want->n_layers != s->n_layers || want->n_experts != s->n_experts)
        return mw_errf(err,
                       "%s: the expert set is for %d layers × %d experts, the model has %d × %d",
                       s->path, want->n_layers, want->n_experts, s->n_layers, s->n_experts);
    for (int l = 0; l < s->n_layers; l++) {
        /* a layer the model gives no experts (deepseek2's leading dense layers) has none to
         * serve, whatever range the set names */
        for (int e = 0; s->layers[l].present && e < s->n_experts; e++) {
            bool w = vx_expert_set_has(want, l, e);
            if (w && !vx_expert_set_has(&s->held, l, e))
                return mw_errf(err, "%s: expert (layer %d, expert %d) is not held by this source",
                               s->path, l, e);
            vx_expert_set_put(&s->held, l, e, w);
        }
    }
    return 0;
}

int vx_source_index_dense(vx_source *s, mw_err *err) {
    for (size_t i = 0; i < s->n_dense; i++) {
        int rc = vx_strmap_put(&s->dense_index, s->list[i].name, i);
        if (rc < 0) return mw_errf(err, "%s: out of memory", s->path);
        if (rc > 0) return mw_errf(err, "%s: duplicate tensor '%s'", s->path, s->list[i].name);
    }
    return 0;
}

void vx_source_close(vx_source *s) {
    if (!s) return;
    if (s->close_impl) s->close_impl(s);
    vx_strmap_free(&s->dense_index);
    vx_expert_set_free(&s->held);
    free(s->layers);
    free(s->list);
    vx_meta_free(s->meta);
    pthread_mutex_destroy(&s->fp_lock);
    free(s->path);
    free(s);
}

const char *vx_source_path(const vx_source *s) {
    return s->path;
}
const vx_meta *vx_source_meta(const vx_source *s) {
    return s->meta;
}
const char *vx_source_arch(const vx_source *s) {
    return s->arch;
}
int vx_source_n_layers(const vx_source *s) {
    return s->n_layers;
}
int vx_source_n_experts(const vx_source *s) {
    return s->n_experts;
}
size_t vx_source_n_tensors(const vx_source *s) {
    return s->n_list;
}

const vx_tensor *vx_source_tensor_at(const vx_source *s, size_t i) {
    return i < s->n_list ? &s->list[i] : NULL;
}

const vx_tensor *vx_source_tensor(const vx_source *s, const char *name) {
    if (!s->dense_mapped) return NULL;
    long i = vx_strmap_get(&s->dense_index, name);
    return i < 0 ? NULL : &s->list[i];
}

bool vx_source_layer_has_experts(const vx_source *s, int layer) {
    return layer >= 0 && layer < s->n_layers && s->layers[layer].present;
}

bool vx_source_has_expert(const vx_source *s, int layer, int expert) {
    return vx_expert_set_has(&s->held, layer, expert);
}

int vx_source_expert(const vx_source *s, int layer, int expert, kn_expert *out, mw_err *err) {
    if (!vx_expert_set_has(&s->held, layer, expert))
        return mw_errf(err, "%s: expert (layer %d, expert %d) is not %s", s->path, layer, expert,
                       layer >= 0 && layer < s->n_layers && expert >= 0 && expert < s->n_experts
                           ? "held by this opening"
                           : "in the model");
    const uint8_t *base[VX_ROLE_COUNT] = {0};
    const vx_layer_experts *L = &s->layers[layer];
    for (int r = 0; r < VX_ROLE_COUNT; r++)
        if (L->part[r].present) base[r] = s->part_ptr(s, layer, expert, (vx_role)r);
    vx_layer_view(L, base, out);
    return 0;
}

const char *vx_source_fingerprint(const vx_source *cs) {
    /* Computed once, on first use; the source object is never const at allocation. */
    vx_source *s = (vx_source *)cs;
    pthread_mutex_lock(&s->fp_lock);
    if (!s->fp_ok) {
        mw_err err;
        s->fp_ok = s->compute_fp(s, &err) == 0;
    }
    pthread_mutex_unlock(&s->fp_lock);
    return s->fp_ok ? s->fp : NULL;
}

uint64_t vx_source_fingerprint_cost(const vx_source *cs) {
    vx_source *s = (vx_source *)cs;
    pthread_mutex_lock(&s->fp_lock);
    const uint64_t b = s->fp_ok ? 0 : s->fp_bytes;
    pthread_mutex_unlock(&s->fp_lock);
    return b;
}

/* ---- GGUF backing -------------------------------------------------------------------------- */

typedef struct gguf_impl {
    vx_gguf *g;
    const vx_tensor **parts; /* n_layers × VX_ROLE_COUNT */
} gguf_impl;

static const uint8_t *gguf_part(const vx_source *s, int layer, int expert, vx_role r) {
    const gguf_impl *gi = s->impl;
    const vx_tensor *t = gi->parts[(size_t)layer * VX_ROLE_COUNT + r];
    return (const uint8_t *)t->data + (uint64_t)expert * s->layers[layer].part[r].slice_bytes;
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
        kn_pool *pool = vx_pool_new();
        vx_hash_run(pool, jobs, n);
        kn_pool_destroy(pool);
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
        if (vx_layer_check(&s->layers[l], l, s->hidden, err))
            return mw_err_wrap(err, "%s", s->path);
    return 0;
}

static int open_gguf(const char *path, const vx_source_opts *opts, vx_source **out, mw_err *err) {
    vx_source *s =
        vx_source_alloc(path, sizeof(gguf_impl), gguf_close, gguf_fingerprint, gguf_part);
    if (!s) return mw_errf(err, "%s: out of memory", path);
    gguf_impl *gi = s->impl;
    if (vx_gguf_open(path, &gi->g, err)) goto fail;
    if (!(s->meta = vx_meta_clone(vx_gguf_meta(gi->g)))) {
        mw_errf(err, "%s: out of memory", path);
        goto fail;
    }
    if (vx_source_read_shape(s, err) || gguf_classify(s, gi, err)) goto fail;
    for (size_t i = 0; i < vx_gguf_n_tensors(gi->g); i++)
        s->fp_bytes += vx_gguf_tensor(gi->g, i)->nbytes;
    if (vx_expert_set_init(&s->held, s->n_layers, s->n_experts, false)) {
        mw_errf(err, "%s: out of memory", path);
        goto fail;
    }
    for (int l = 0; l < s->n_layers; l++)
        for (int e = 0; s->layers[l].present && e < s->n_experts; e++)
            vx_expert_set_put(&s->held, l, e, true);
    if (vx_source_restrict(s, opts, err)) goto fail;
    s->dense_mapped = !opts || opts->dense;
    if (vx_source_index_dense(s, err)) goto fail;
    *out = s;
    return 0;
fail:
    vx_source_close(s);
    return -1;
}

int vx_source_open(const char *path, const vx_source_opts *opts, vx_source **out, mw_err *err) {
    *out = NULL;
    struct stat st;
    if (stat(path, &st) != 0) return mw_errf(err, "%s: no such file or directory", path);
    if (S_ISDIR(st.st_mode)) return vx_source_open_vindex(path, opts, out, err);
    return open_gguf(path, opts, out, err);
}
