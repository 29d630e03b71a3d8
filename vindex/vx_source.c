/* vindex/vx_source.c — the source object every backing shares: its allocation and the steps both
 * backings run (shape, expert restriction, dense index), its accessors and the fingerprint on first
 * use. The backings are vx_source_gguf.c (a GGUF file) and vx_mount.c (a vindex directory);
 * vx_source_open.c picks one. */
#include "vindex/vx_source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vindex/vx_source_internal.h"

int vx_source_carried(const vx_source *s, const char *name, char *path, size_t plen, mw_err *err) {
    return s->carried ? s->carried(s, name, path, plen, err) : 0;
}

vx_source *vx__source_alloc(const char *path, size_t impl_size, void (*close_impl)(vx_source *),
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

int vx__source_read_shape(vx_source *s, mw_err *err) {
    vx_model_shape sh;
    if (vx_model_shape_read(s->meta, s->path, &sh, err)) return -1;
    s->arch = sh.arch;
    s->n_layers = sh.n_layers;
    s->n_experts = sh.n_experts;
    s->hidden = sh.hidden;
    s->expert_width = sh.expert_width;
    s->layers = calloc(sh.n_layers ? (size_t)sh.n_layers : 1, sizeof *s->layers);
    if (!s->layers) return mw_errf(err, "%s: out of memory", s->path);
    return 0;
}

int vx__source_restrict(vx_source *s, const vx_source_opts *opts, mw_err *err) {
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

int vx__source_index_dense(vx_source *s, mw_err *err) {
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

uint64_t vx_source_extent_bytes(const vx_source *s, int layer) {
    if (!vx_source_layer_has_experts(s, layer)) return 0;
    uint64_t b = 0;
    for (int r = 0; r < VX_ROLE_COUNT; r++)
        if (s->layers[layer].part[r].present)
            b += (s->layers[layer].part[r].slice_bytes + 63) & ~63ull;
    return b;
}

uint64_t vx_source_dense_bytes(const vx_source *s) {
    uint64_t b = 0;
    for (size_t i = 0; i < s->n_dense; i++) b += s->list[i].nbytes;
    return b;
}

int64_t vx_source_width(const vx_source *s) {
    return s->hidden;
}

int vx_source_experts_used(const vx_source *s) {
    char key[96];
    int64_t k = 0;
    snprintf(key, sizeof key, "%s.expert_used_count", s->arch);
    return vx_meta_get_i64(s->meta, key, &k, NULL) == 1 && k > 0 && k <= INT32_MAX ? (int)k : 0;
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
