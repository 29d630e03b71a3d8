/* vindex/vx_manifest.c — manifest.json: writing it, and reading it as untrusted input.
 *
 * Reading checks every statement against every other and against the files on disk: known types,
 * shapes that give the stated byte counts, the canonical part layout, 64-byte alignment, extents
 * and dense tensors inside their files and not overlapping, safe file names, and a fingerprint
 * that matches the metadata and tensor table. Only then do mount, verify and slice use it. */
#include "vindex/vx_manifest.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vindex/vx_fingerprint.h"
#include "vindex/vx_gguf_internal.h"
#include "vindex/vx_strmap.h"

static uint64_t align_up(uint64_t x) {
    return (x + VX_ALIGN - 1) / VX_ALIGN * VX_ALIGN;
}

void vx_expert_file_name(int layer, char *out, size_t n) {
    snprintf(out, n, "experts-%03d.bin", layer);
}

void vx_manifest_layout_parts(vx_mf_layer *L) {
    uint64_t off = 0;
    for (int r = 0; r < VX_ROLE_COUNT; r++) {
        L->part_off[r] = 0;
        if (!L->shape.part[r].present) continue;
        L->part_off[r] = off;
        off = align_up(off + L->shape.part[r].slice_bytes);
    }
    L->extent_bytes = off;
}

int vx_hash_extents(kn_pool *pool, const vx_mf_layer *L, const uint8_t *const *ext, size_t k,
                    uint8_t (*b2)[VX_DIGEST_BYTES], uint8_t (*sha)[VX_DIGEST_BYTES],
                    vx_b2 *digest) {
    vx_b2 *hb = malloc(k * sizeof *hb);
    vx_sha *hs = sha ? malloc(k * sizeof *hs) : NULL;
    vx_hash_seg *segs = malloc((k + VX_ROLE_COUNT * k) * sizeof *segs);
    vx_hash_job *jobs = malloc((2 * k + VX_ROLE_COUNT) * sizeof *jobs);
    if (!hb || (sha && !hs) || !segs || !jobs) {
        free(hb);
        free(hs);
        free(segs);
        free(jobs);
        return -1;
    }
    size_t nj = 0;
    int rc = 0;
    for (size_t i = 0; i < k; i++) {
        segs[i] = (vx_hash_seg){ext[i], L->extent_bytes};
        vx_b2_init(&hb[i]);
        if (sha) {
            if (vx_sha_init(&hs[i])) {
                while (i-- > 0) vx_sha_free(&hs[i]);
                rc = -1;
                goto out;
            }
            jobs[nj++] = (vx_hash_job){.sha = &hs[i], .segs = &segs[i], .n_segs = 1};
        }
    }
    for (size_t i = 0; i < k; i++)
        jobs[nj++] = (vx_hash_job){.b2 = &hb[i], .segs = &segs[i], .n_segs = 1};
    for (int r = 0; digest && r < VX_ROLE_COUNT; r++) {
        if (!L->shape.part[r].present) continue;
        vx_hash_seg *rs = &segs[k + (size_t)r * k];
        for (size_t i = 0; i < k; i++)
            rs[i] = (vx_hash_seg){ext[i] + L->part_off[r], L->shape.part[r].slice_bytes};
        jobs[nj++] = (vx_hash_job){.b2 = &digest[r], .segs = rs, .n_segs = k};
    }
    vx_hash_run(pool, jobs, nj);
    for (size_t i = 0; i < k; i++) {
        vx_b2_final(&hb[i], b2[i]);
        if (sha && vx_sha_final(&hs[i], sha[i])) rc = -1;
    }
out:
    free(hb);
    free(hs);
    free(segs);
    free(jobs);
    return rc;
}

static void free_file(vx_mf_file *f) {
    free(f->name);
}

void vx_manifest_free(vx_manifest *m) {
    if (!m) return;
    vx_meta_free(m->meta);
    for (size_t i = 0; m->tensors && i < m->n_tensors; i++) free(m->tensors[i].name);
    free(m->tensors);
    free_file(&m->dense);
    for (size_t i = 0; m->carried && i < m->n_carried; i++) free_file(&m->carried[i]);
    free(m->carried);
    for (size_t i = 0; m->moe && i < m->n_moe; i++) {
        free(m->moe[i].file);
        free(m->moe[i].ext);
    }
    free(m->moe);
    json_decref(m->provenance);
    memset(m, 0, sizeof *m);
}

const vx_mf_layer *vx_manifest_layer(const vx_manifest *m, int layer) {
    for (size_t i = 0; i < m->n_moe; i++)
        if (m->moe[i].layer == layer) return &m->moe[i];
    return NULL;
}

const vx_mf_extent *vx_manifest_extent(const vx_mf_layer *L, int expert) {
    size_t lo = 0, hi = L->n_ext;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (L->ext[mid].expert == expert) return &L->ext[mid];
        if (L->ext[mid].expert < expert)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

int vx_manifest_held(const vx_manifest *m, vx_expert_set *out, mw_err *err) {
    if (vx_expert_set_init(out, m->n_layers, m->n_experts, false))
        return mw_errf(err, "%s: out of memory", VX_MANIFEST);
    for (size_t i = 0; i < m->n_moe; i++)
        for (size_t j = 0; j < m->moe[i].n_ext; j++)
            vx_expert_set_put(out, m->moe[i].layer, m->moe[i].ext[j].expert, true);
    return 0;
}

int vx_manifest_fingerprint(const vx_manifest *m, char out[VX_DIGEST_HEX], mw_err *err) {
    vx_fp_tensor *fp = calloc(m->n_tensors ? m->n_tensors : 1, sizeof *fp);
    if (!fp) return mw_errf(err, "%s: out of memory", VX_MANIFEST);
    for (size_t i = 0; i < m->n_tensors; i++) {
        const vx_mf_tensor *t = &m->tensors[i];
        fp[i] = (vx_fp_tensor){.name = t->name, .type = t->type, .n_dims = t->n_dims};
        memcpy(fp[i].ne, t->ne, sizeof fp[i].ne);
        memcpy(fp[i].digest, t->digest, VX_DIGEST_BYTES);
    }
    int rc = vx_fingerprint(m->meta, fp, m->n_tensors, out, err);
    free(fp);
    return rc;
}

/* ---- writing ------------------------------------------------------------------------------- */

static json_t *hex_json(const uint8_t d[VX_DIGEST_BYTES]) {
    char h[VX_DIGEST_HEX];
    vx_hex(d, h);
    return json_string(h);
}

static json_t *file_json(const vx_mf_file *f) {
    return json_pack("{s:s,s:I,s:o,s:o}", "name", f->name, "size", (json_int_t)f->size, "blake2b",
                     hex_json(f->b2), "sha256", hex_json(f->sha));
}

static json_t *tensor_json(const vx_mf_tensor *t) {
    json_t *ne = json_array();
    for (int d = 0; d < t->n_dims; d++) json_array_append_new(ne, json_integer(t->ne[d]));
    json_t *j = json_pack("{s:s,s:s,s:o,s:I,s:o}", "name", t->name, "type", kn_type_name(t->type),
                          "ne", ne, "nbytes", (json_int_t)t->nbytes, "digest", hex_json(t->digest));
    if (!j) return NULL;
    if (t->layer < 0) {
        json_object_set_new(j, "offset", json_integer((json_int_t)t->offset));
    } else {
        json_object_set_new(j, "layer", json_integer(t->layer));
        json_object_set_new(j, "role", json_string(vx_role_name(t->role)));
    }
    return j;
}

static json_t *layer_json(const vx_manifest *m, const vx_mf_layer *L) {
    json_t *parts = json_array(), *ext = json_array();
    for (int r = 0; r < VX_ROLE_COUNT; r++) {
        if (L->part_tensor[r] < 0) continue;
        json_array_append_new(parts,
                              json_pack("{s:s,s:s,s:I,s:I}", "role", vx_role_name((vx_role)r),
                                        "tensor", m->tensors[L->part_tensor[r]].name, "offset",
                                        (json_int_t)L->part_off[r], "nbytes",
                                        (json_int_t)L->shape.part[r].slice_bytes));
    }
    for (size_t i = 0; i < L->n_ext; i++)
        json_array_append_new(ext,
                              json_pack("{s:i,s:I,s:o,s:o}", "expert", L->ext[i].expert, "offset",
                                        (json_int_t)L->ext[i].offset, "blake2b",
                                        hex_json(L->ext[i].b2), "sha256", hex_json(L->ext[i].sha)));
    return json_pack("{s:i,s:s,s:I,s:I,s:o,s:o}", "layer", L->layer, "file", L->file, "file_size",
                     (json_int_t)L->file_size, "extent_bytes", (json_int_t)L->extent_bytes, "parts",
                     parts, "extents", ext);
}

static json_t *manifest_json(const vx_manifest *m, mw_err *err) {
    vx_expert_set held;
    if (vx_manifest_held(m, &held, err)) return NULL;
    char *holds = vx_expert_set_format(&held);
    vx_expert_set_free(&held);
    json_t *tensors = json_array(), *layers = json_array(), *carried = json_array();
    for (size_t i = 0; i < m->n_tensors; i++)
        json_array_append_new(tensors, tensor_json(&m->tensors[i]));
    for (size_t i = 0; i < m->n_moe; i++) json_array_append_new(layers, layer_json(m, &m->moe[i]));
    for (size_t i = 0; i < m->n_carried; i++)
        json_array_append_new(carried, file_json(&m->carried[i]));
    json_t *files = json_pack("{s:o}", "carried", carried);
    if (m->has_dense) json_object_set_new(files, "dense", file_json(&m->dense));
    json_t *root = json_pack(
        "{s:s,s:i,s:s,s:s,s:i,s:i,s:s,s:b,s:o,s:o,s:o,s:o,s:O}", "format", VX_FORMAT_NAME,
        "version", VX_FORMAT_VERSION, "fingerprint", m->fingerprint, "arch", m->arch, "layers",
        m->n_layers, "experts", m->n_experts, "holds", holds ? holds : "", "dense", m->has_dense,
        "metadata", vx_meta_to_json(m->meta), "files", files, "tensors", tensors, "moe_layers",
        layers, "provenance", m->provenance ? m->provenance : json_object());
    free(holds);
    if (!root) mw_errf(err, "%s: out of memory building the manifest", VX_MANIFEST);
    return root;
}

int vx_manifest_write(const vx_manifest *m, const char *dir, mw_err *err) {
    json_t *root = manifest_json(m, err);
    if (!root) return -1;
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/%s", dir, VX_MANIFEST);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int rc = json_dump_file(root, tmp, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    json_decref(root);
    if (rc != 0) {
        unlink(tmp);
        return mw_errf(err, "%s: cannot write", tmp);
    }
    if (rename(tmp, path) != 0) return mw_errf(err, "%s: rename failed: %s", path, strerror(errno));
    return 0;
}

/* ---- reading ------------------------------------------------------------------------------- */

/* Reading state: the directory, for file-size checks, and the error sink. */
typedef struct rd {
    const char *dir;
    mw_err *err;
} rd;

static int fault(rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fault(rd *r, const char *fmt, ...) {
    char msg[MW_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return mw_errf(r->err, "%s/%s: %s", r->dir, VX_MANIFEST, msg);
}

/* A non-negative integer field. */
static int get_u64(rd *r, const json_t *o, const char *key, const char *what, uint64_t *out) {
    const json_t *j = json_object_get(o, key);
    if (!json_is_integer(j) || json_integer_value(j) < 0)
        return fault(r, "%s: '%s' must be a non-negative integer", what, key);
    *out = (uint64_t)json_integer_value(j);
    return 0;
}

static int get_int(rd *r, const json_t *o, const char *key, const char *what, int max, int *out) {
    uint64_t v;
    if (get_u64(r, o, key, what, &v)) return -1;
    if (v >= (uint64_t)max)
        return fault(r, "%s: '%s' = %llu is out of range (< %d)", what, key, (unsigned long long)v,
                     max);
    *out = (int)v;
    return 0;
}

static int get_digest(rd *r, const json_t *o, const char *key, const char *what,
                      uint8_t d[VX_DIGEST_BYTES]) {
    if (vx_unhex(json_string_value(json_object_get(o, key)), d))
        return fault(r, "%s: '%s' must be 64 hex digits", what, key);
    return 0;
}

static const char *get_str(rd *r, const json_t *o, const char *key, const char *what) {
    const json_t *j = json_object_get(o, key);
    const char *s = json_string_value(j);
    if (!s || strlen(s) != json_string_length(j) || !*s) {
        fault(r, "%s: '%s' must be a non-empty string", what, key);
        return NULL;
    }
    return s;
}

/* Only plain names inside the directory: no separators, no leading dot, bounded length. */
bool vx_safe_file_name(const char *s) {
    size_t n = strlen(s);
    return n > 0 && n < 256 && s[0] != '.' &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

/* The size of DIR/name on disk, or -1 with an error naming it. */
static int disk_size(rd *r, const char *name, uint64_t *size) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", r->dir, name);
    struct stat st;
    if (stat(path, &st) != 0) return mw_errf(r->err, "%s: missing: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) return mw_errf(r->err, "%s: not a regular file", path);
    *size = (uint64_t)st.st_size;
    return 0;
}

static int read_file_entry(rd *r, const json_t *o, const char *what, vx_mf_file *f) {
    const char *name = get_str(r, o, "name", what);
    if (!name) return -1;
    if (!vx_safe_file_name(name)) return fault(r, "%s: unsafe file name '%s'", what, name);
    if (get_u64(r, o, "size", what, &f->size) || get_digest(r, o, "blake2b", what, f->b2) ||
        get_digest(r, o, "sha256", what, f->sha))
        return -1;
    if (!(f->name = strdup(name))) return fault(r, "out of memory");
    uint64_t actual;
    if (disk_size(r, name, &actual)) return -1;
    if (actual != f->size)
        return mw_errf(r->err, "%s/%s: size %llu, but the manifest says %llu", r->dir, name,
                       (unsigned long long)actual, (unsigned long long)f->size);
    return 0;
}

static int read_tensor(rd *r, const json_t *o, size_t i, vx_mf_tensor *t, const vx_manifest *m) {
    char what[160];
    snprintf(what, sizeof what, "tensors[%zu]", i);
    const char *name = get_str(r, o, "name", what);
    if (!name) return -1;
    if (strlen(name) > 4096) return fault(r, "%s: name too long", what);
    if (!(t->name = strdup(name))) return fault(r, "out of memory");
    snprintf(what, sizeof what, "tensor '%.100s'", name);
    const char *tn = get_str(r, o, "type", what);
    int type = tn ? kn_type_from_name(tn) : -1;
    if (type < 0 || !kn_traits((kn_type)type)) return fault(r, "%s: unknown type", what);
    t->type = (kn_type)type;
    const json_t *ne = json_object_get(o, "ne");
    size_t nd = json_array_size(ne);
    if (!json_is_array(ne) || nd < 1 || nd > 4)
        return fault(r, "%s: 'ne' must be an array of 1..4 integers", what);
    t->n_dims = (int)nd;
    for (int d = 0; d < 4; d++) t->ne[d] = 1;
    for (size_t d = 0; d < nd; d++) {
        const json_t *v = json_array_get(ne, d);
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return fault(r, "%s: 'ne' must be an array of 1..4 non-negative integers", what);
        t->ne[d] = json_integer_value(v);
    }
    char why[120];
    uint64_t want;
    if (vx__tensor_nbytes(t->type, t->n_dims, t->ne, &want, why, sizeof why))
        return fault(r, "%s: %s", what, why);
    if (get_u64(r, o, "nbytes", what, &t->nbytes) || get_digest(r, o, "digest", what, t->digest))
        return -1;
    if (t->nbytes != want)
        return fault(r, "%s: nbytes %llu, but its type and shape make %llu", what,
                     (unsigned long long)t->nbytes, (unsigned long long)want);
    int layer, role = vx_expert_role(name, &layer);
    t->layer = -1;
    if (role < 0) {
        if (json_object_get(o, "layer")) return fault(r, "%s: a dense tensor has no layer", what);
        if (get_u64(r, o, "offset", what, &t->offset)) return -1;
        if (t->offset % VX_ALIGN) return fault(r, "%s: offset is not %d-aligned", what, VX_ALIGN);
        return 0;
    }
    int jl = -1;
    if (get_int(r, o, "layer", what, m->n_layers, &jl)) return -1;
    const char *rn = get_str(r, o, "role", what);
    if (!rn) return -1;
    if (jl != layer || vx_role_from_name(rn) != role)
        return fault(r, "%s: layer/role disagree with the name", what);
    t->layer = layer;
    t->role = (vx_role)role;
    return 0;
}

static int cmp_off(const void *a, const void *b) {
    const vx_mf_tensor *x = *(const vx_mf_tensor *const *)a, *y = *(const vx_mf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Dense tensors inside dense.bin, not overlapping. */
static int check_dense_layout(rd *r, vx_manifest *m) {
    if (!m->has_dense || m->n_dense == 0) return 0;
    const vx_mf_tensor **by = malloc(m->n_dense * sizeof *by);
    if (!by) return fault(r, "out of memory");
    for (size_t i = 0; i < m->n_dense; i++) by[i] = &m->tensors[i];
    qsort(by, m->n_dense, sizeof *by, cmp_off);
    int rc = 0;
    for (size_t i = 0; i < m->n_dense && rc == 0; i++) {
        const vx_mf_tensor *t = by[i];
        if (t->offset > m->dense.size || t->nbytes > m->dense.size - t->offset)
            rc =
                fault(r, "tensor '%s' (%llu bytes at %llu) extends past the end of %s (%llu bytes)",
                      t->name, (unsigned long long)t->nbytes, (unsigned long long)t->offset,
                      VX_DENSE_FILE, (unsigned long long)m->dense.size);
        else if (i > 0 && by[i - 1]->offset + by[i - 1]->nbytes > t->offset)
            rc = fault(r, "tensors '%s' and '%s' overlap in %s", by[i - 1]->name, t->name,
                       VX_DENSE_FILE);
    }
    free(by);
    return rc;
}

static int read_tensors(rd *r, const json_t *arr, vx_manifest *m, vx_strmap *names) {
    if (!json_is_array(arr)) return fault(r, "'tensors' must be an array");
    m->n_tensors = json_array_size(arr);
    m->tensors = calloc(m->n_tensors ? m->n_tensors : 1, sizeof *m->tensors);
    if (!m->tensors) return fault(r, "out of memory");
    for (size_t i = 0; i < m->n_tensors; i++) {
        vx_mf_tensor *t = &m->tensors[i];
        if (read_tensor(r, json_array_get(arr, i), i, t, m)) return -1;
        int rc = vx_strmap_put(names, t->name, i);
        if (rc < 0) return fault(r, "out of memory");
        if (rc > 0) return fault(r, "tensor '%s' is listed twice", t->name);
        if (t->layer < 0) {
            if (m->n_dense != i) return fault(r, "dense tensor '%s' after expert tensors", t->name);
            m->n_dense++;
        }
    }
    return check_dense_layout(r, m);
}

static int read_parts(rd *r, const json_t *parts, vx_manifest *m, vx_mf_layer *L,
                      const vx_strmap *names, const char *what) {
    if (!json_is_array(parts)) return fault(r, "%s: 'parts' must be an array", what);
    uint64_t stated[VX_ROLE_COUNT] = {0};
    size_t i;
    const json_t *p;
    json_array_foreach(parts, i, p) {
        const char *rn = get_str(r, p, "role", what), *tn = get_str(r, p, "tensor", what);
        if (!rn || !tn) return -1;
        int role = vx_role_from_name(rn);
        long ti = vx_strmap_get(names, tn);
        if (role < 0) return fault(r, "%s: unknown role '%s'", what, rn);
        if (ti < 0) return fault(r, "%s: part '%s' names unknown tensor '%s'", what, rn, tn);
        const vx_mf_tensor *t = &m->tensors[ti];
        if (t->layer != L->layer || t->role != (vx_role)role)
            return fault(r, "%s: part '%s' names tensor '%s' of another layer or role", what, rn,
                         tn);
        if (L->part_tensor[role] >= 0) return fault(r, "%s: role '%s' appears twice", what, rn);
        L->part_tensor[role] = (int)ti;
        if (get_u64(r, p, "offset", what, &stated[role])) return -1;
        if (vx_layer_set_part(&L->shape, (vx_role)role, t->type, t->n_dims, t->ne, m->n_experts,
                              t->name, r->err))
            return mw_err_wrap(r->err, "%s/%s", r->dir, VX_MANIFEST);
        uint64_t nb;
        if (get_u64(r, p, "nbytes", what, &nb)) return -1;
        if (nb != L->shape.part[role].slice_bytes)
            return fault(r, "%s: part '%s' is %llu bytes, its tensor makes %llu", what, rn,
                         (unsigned long long)nb,
                         (unsigned long long)L->shape.part[role].slice_bytes);
    }
    if (vx_layer_check(&L->shape, L->layer, m->expert_width, r->err))
        return mw_err_wrap(r->err, "%s/%s", r->dir, VX_MANIFEST);
    if (!L->shape.present) return fault(r, "%s: no parts", what);
    uint64_t stated_extent = L->extent_bytes;
    vx_manifest_layout_parts(L);
    for (int role = 0; role < VX_ROLE_COUNT; role++)
        if (L->part_tensor[role] >= 0 && stated[role] != L->part_off[role])
            return fault(r, "%s: part '%s' at offset %llu, the layout puts it at %llu", what,
                         vx_role_name((vx_role)role), (unsigned long long)stated[role],
                         (unsigned long long)L->part_off[role]);
    if (stated_extent != L->extent_bytes)
        return fault(r, "%s: extent_bytes %llu, the parts make %llu", what,
                     (unsigned long long)stated_extent, (unsigned long long)L->extent_bytes);
    return 0;
}

static int read_extents(rd *r, const json_t *arr, vx_manifest *m, vx_mf_layer *L,
                        const char *what) {
    if (!json_is_array(arr)) return fault(r, "%s: 'extents' must be an array", what);
    L->n_ext = json_array_size(arr);
    if (L->n_ext > (size_t)m->n_experts)
        return fault(r, "%s: %zu extents for %d experts", what, L->n_ext, m->n_experts);
    L->ext = calloc(L->n_ext ? L->n_ext : 1, sizeof *L->ext);
    if (!L->ext) return fault(r, "out of memory");
    for (size_t i = 0; i < L->n_ext; i++) {
        const json_t *o = json_array_get(arr, i);
        vx_mf_extent *x = &L->ext[i];
        if (get_int(r, o, "expert", what, m->n_experts, &x->expert) ||
            get_u64(r, o, "offset", what, &x->offset) || get_digest(r, o, "blake2b", what, x->b2) ||
            get_digest(r, o, "sha256", what, x->sha))
            return -1;
        if (i > 0 && x->expert <= L->ext[i - 1].expert)
            return fault(r, "%s: extents must list experts in ascending order, once each", what);
        if (x->offset % VX_ALIGN)
            return fault(r, "%s: extent of expert %d is not %d-aligned", what, x->expert, VX_ALIGN);
        if (x->offset > L->file_size || L->extent_bytes > L->file_size - x->offset)
            return fault(r,
                         "%s: extent of expert %d (%llu bytes at %llu) extends past the end of "
                         "%s (%llu bytes)",
                         what, x->expert, (unsigned long long)L->extent_bytes,
                         (unsigned long long)x->offset, L->file, (unsigned long long)L->file_size);
        if (i > 0 && L->ext[i - 1].offset + L->extent_bytes > x->offset)
            return fault(r, "%s: extents of experts %d and %d overlap", what, L->ext[i - 1].expert,
                         x->expert);
    }
    return 0;
}

static int read_layers(rd *r, const json_t *arr, vx_manifest *m, const vx_strmap *names) {
    if (!json_is_array(arr)) return fault(r, "'moe_layers' must be an array");
    m->n_moe = json_array_size(arr);
    if (m->n_moe > (size_t)m->n_layers)
        return fault(r, "%zu MoE layers for a model of %d layers", m->n_moe, m->n_layers);
    m->moe = calloc(m->n_moe ? m->n_moe : 1, sizeof *m->moe);
    if (!m->moe) return fault(r, "out of memory");
    for (size_t i = 0; i < m->n_moe; i++) {
        const json_t *o = json_array_get(arr, i);
        vx_mf_layer *L = &m->moe[i];
        for (int k = 0; k < VX_ROLE_COUNT; k++) L->part_tensor[k] = -1;
        char what[64];
        snprintf(what, sizeof what, "moe_layers[%zu]", i);
        if (get_int(r, o, "layer", what, m->n_layers, &L->layer)) return -1;
        if (i > 0 && L->layer <= m->moe[i - 1].layer)
            return fault(r, "moe_layers must be in ascending layer order, once each");
        snprintf(what, sizeof what, "layer %d", L->layer);
        const char *file = get_str(r, o, "file", what);
        if (!file) return -1;
        char want[64];
        vx_expert_file_name(L->layer, want, sizeof want);
        if (strcmp(file, want) != 0) return fault(r, "%s: file must be '%s'", what, want);
        if (!(L->file = strdup(file))) return fault(r, "out of memory");
        if (get_u64(r, o, "file_size", what, &L->file_size) ||
            get_u64(r, o, "extent_bytes", what, &L->extent_bytes) ||
            read_parts(r, json_object_get(o, "parts"), m, L, names, what) ||
            read_extents(r, json_object_get(o, "extents"), m, L, what))
            return -1;
        uint64_t actual = 0;
        if (L->n_ext > 0 || L->file_size > 0) {
            if (disk_size(r, L->file, &actual)) return -1;
            if (actual != L->file_size)
                return mw_errf(r->err, "%s/%s: size %llu, but the manifest says %llu", r->dir,
                               L->file, (unsigned long long)actual,
                               (unsigned long long)L->file_size);
        }
    }
    /* every expert tensor belongs to a listed layer's parts */
    for (size_t i = m->n_dense; i < m->n_tensors; i++) {
        const vx_mf_tensor *t = &m->tensors[i];
        const vx_mf_layer *L = vx_manifest_layer(m, t->layer);
        if (!L || L->part_tensor[t->role] != (int)i)
            return fault(r, "expert tensor '%s' is not a part of its layer", t->name);
    }
    return 0;
}

static int read_files(rd *r, const json_t *files, vx_manifest *m) {
    if (!json_is_object(files)) return fault(r, "'files' must be an object");
    const json_t *dense = json_object_get(files, "dense");
    if (m->has_dense != (dense != NULL))
        return fault(r, "'dense' says %s but files.dense is %s", m->has_dense ? "true" : "false",
                     dense ? "present" : "absent");
    if (dense) {
        if (read_file_entry(r, dense, "files.dense", &m->dense)) return -1;
        if (strcmp(m->dense.name, VX_DENSE_FILE) != 0)
            return fault(r, "files.dense must be named %s", VX_DENSE_FILE);
    }
    const json_t *carried = json_object_get(files, "carried");
    if (!json_is_array(carried)) return fault(r, "files.carried must be an array");
    m->n_carried = json_array_size(carried);
    m->carried = calloc(m->n_carried ? m->n_carried : 1, sizeof *m->carried);
    if (!m->carried) return fault(r, "out of memory");
    for (size_t i = 0; i < m->n_carried; i++) {
        char what[64];
        snprintf(what, sizeof what, "files.carried[%zu]", i);
        if (read_file_entry(r, json_array_get(carried, i), what, &m->carried[i])) return -1;
        const char *n = m->carried[i].name;
        if (!strcmp(n, VX_MANIFEST) || !strcmp(n, VX_DENSE_FILE) || !strncmp(n, "experts-", 8))
            return fault(r, "%s: carried file may not be named '%s'", what, n);
    }
    return 0;
}

static json_t *load_json(rd *r) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", r->dir, VX_MANIFEST);
    struct stat st;
    if (stat(path, &st) != 0) {
        mw_errf(r->err, "%s: not a vindex (no %s: %s)", r->dir, VX_MANIFEST, strerror(errno));
        return NULL;
    }
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > VX_MANIFEST_MAX_BYTES) {
        mw_errf(r->err, "%s: not a regular file of at most %llu bytes", path,
                (unsigned long long)VX_MANIFEST_MAX_BYTES);
        return NULL;
    }
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!root) mw_errf(r->err, "%s: bad JSON at line %d: %s", path, je.line, je.text);
    return root;
}

static int read_root(rd *r, const json_t *root, vx_manifest *m) {
    vx_strmap names = {0};
    int rc = -1;
    const char *fmt = json_string_value(json_object_get(root, "format"));
    const json_t *ver = json_object_get(root, "version");
    if (!json_is_object(root) || !fmt || strcmp(fmt, VX_FORMAT_NAME) != 0) {
        fault(r, "not a %s manifest", VX_FORMAT_NAME);
        goto out;
    }
    if (!json_is_integer(ver) || json_integer_value(ver) != VX_FORMAT_VERSION) {
        fault(r, "unsupported format version (this program reads version %d)", VX_FORMAT_VERSION);
        goto out;
    }
    if (!(m->meta = vx_meta_new())) goto out;
    if (vx_meta_from_json(json_object_get(root, "metadata"), m->meta, r->err)) {
        mw_err_wrap(r->err, "%s", r->dir);
        goto out;
    }
    vx_model_shape sh;
    char where[4200];
    snprintf(where, sizeof where, "%s/%s", r->dir, VX_MANIFEST);
    if (vx_model_shape_read(m->meta, where, &sh, r->err)) goto out;
    m->arch = sh.arch;
    m->n_layers = sh.n_layers;
    m->n_experts = sh.n_experts;
    m->hidden = sh.hidden;
    m->expert_width = sh.expert_width;
    int jl = -1, je = -1;
    if (get_int(r, root, "layers", "manifest", 1 << 21, &jl) ||
        get_int(r, root, "experts", "manifest", 1 << 21, &je))
        goto out;
    const char *arch = json_string_value(json_object_get(root, "arch"));
    if (jl != m->n_layers || je != m->n_experts || !arch || strcmp(arch, m->arch) != 0) {
        fault(r, "arch/layers/experts disagree with the metadata");
        goto out;
    }
    const json_t *dense = json_object_get(root, "dense");
    if (!json_is_boolean(dense)) {
        fault(r, "'dense' must be true or false");
        goto out;
    }
    m->has_dense = json_is_true(dense);
    if (read_files(r, json_object_get(root, "files"), m) ||
        read_tensors(r, json_object_get(root, "tensors"), m, &names) ||
        read_layers(r, json_object_get(root, "moe_layers"), m, &names))
        goto out;
    const json_t *prov = json_object_get(root, "provenance");
    if (!json_is_object(prov)) {
        fault(r, "'provenance' must be an object");
        goto out;
    }
    m->provenance = json_incref((json_t *)prov);
    rc = 0;
out:
    vx_strmap_free(&names);
    return rc;
}

/* The stated fingerprint and expert set must match what the tables say. */
static int check_summary(rd *r, const json_t *root, vx_manifest *m) {
    const char *fp = json_string_value(json_object_get(root, "fingerprint"));
    if (vx_manifest_fingerprint(m, m->fingerprint, r->err)) return -1;
    if (!fp || strcmp(fp, m->fingerprint) != 0)
        return fault(r, "fingerprint %s does not match the metadata and tensor table (%s)",
                     fp ? fp : "(missing)", m->fingerprint);
    vx_expert_set held;
    if (vx_manifest_held(m, &held, r->err)) return -1;
    char *txt = vx_expert_set_format(&held);
    vx_expert_set_free(&held);
    const char *holds = json_string_value(json_object_get(root, "holds"));
    int rc = !txt || !holds || strcmp(txt, holds) != 0
                 ? fault(r, "'holds' (%s) disagrees with the extents listed (%s)",
                         holds ? holds : "(missing)", txt ? txt : "?")
                 : 0;
    free(txt);
    return rc;
}

int vx_manifest_read(const char *dir, vx_manifest *m, mw_err *err) {
    memset(m, 0, sizeof *m);
    rd r = {dir, err};
    json_t *root = load_json(&r);
    if (!root) return -1;
    int rc = read_root(&r, root, m);
    if (rc == 0) rc = check_summary(&r, root, m);
    json_decref(root);
    if (rc != 0) vx_manifest_free(m);
    return rc;
}
