/* vindex/vx_meta.c — the typed key/value metadata table (GGUF's value model) and its getters.
 *
 * Entries keep their insertion order (GGUF writers and the fingerprint depend on it) and are also
 * indexed by a hash map, so lookups and duplicate checks stay O(1) for any number of keys. */
#include "vindex/vx_meta.h"

#include <stdlib.h>
#include <string.h>

#include "vindex/vx_meta_internal.h"
#include "vindex/vx_strmap.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "moewire reads little-endian files in place and needs a little-endian host"
#endif

typedef struct vx_entry {
    char *key;
    vx__val v;
} vx_entry;

struct vx_meta {
    vx_entry *e;
    size_t n, cap;
    vx_strmap index;
};

/* One row per value type: size of a scalar and its name (GGUF's ids are the indices). */
static const struct {
    const char *name;
    uint8_t size;
} vtypes[VX_VTYPE_COUNT] = {
    [VX_U8] = {"u8", 1},   [VX_I8] = {"i8", 1},   [VX_U16] = {"u16", 2}, [VX_I16] = {"i16", 2},
    [VX_U32] = {"u32", 4}, [VX_I32] = {"i32", 4}, [VX_F32] = {"f32", 4}, [VX_BOOL] = {"bool", 1},
    [VX_STR] = {"str", 0}, [VX_ARR] = {"arr", 0}, [VX_U64] = {"u64", 8}, [VX_I64] = {"i64", 8},
    [VX_F64] = {"f64", 8},
};

bool vx__vtype_valid(uint32_t t) {
    return t < VX_VTYPE_COUNT;
}

size_t vx__vtype_size(vx_vtype t) {
    return vx__vtype_valid(t) ? vtypes[t].size : 0;
}

const char *vx_vtype_name(vx_vtype t) {
    return vx__vtype_valid(t) ? vtypes[t].name : "unknown";
}

static bool is_int(vx_vtype t) {
    return t == VX_U8 || t == VX_I8 || t == VX_U16 || t == VX_I16 || t == VX_U32 || t == VX_I32 ||
           t == VX_U64 || t == VX_I64;
}

/* ---- values -------------------------------------------------------------------------------- */

void vx__val_free(vx__val *v) {
    if (v->type == VX_STR) {
        free(v->u.str.s);
    } else if (v->type == VX_ARR) {
        if (v->u.arr.elem == VX_ARR) {
            vx__val *items = v->u.arr.data;
            for (uint64_t i = 0; items && i < v->u.arr.n; i++) vx__val_free(&items[i]);
        }
        free(v->u.arr.data);
        free(v->u.arr.offs);
    }
    memset(v, 0, sizeof *v);
}

int vx__val_copy(vx__val *dst, const vx__val *src) {
    *dst = *src;
    if (src->type == VX_STR) {
        dst->u.str.s = malloc(src->u.str.len + 1);
        if (!dst->u.str.s) return -1;
        memcpy(dst->u.str.s, src->u.str.s, src->u.str.len + 1);
        return 0;
    }
    if (src->type != VX_ARR) return 0;
    dst->u.arr.data = NULL;
    dst->u.arr.offs = NULL;
    uint64_t n = src->u.arr.n;
    if (src->u.arr.elem == VX_ARR) {
        vx__val *items = calloc(n ? n : 1, sizeof *items);
        if (!items) return -1;
        dst->u.arr.data = items;
        const vx__val *from = src->u.arr.data;
        for (uint64_t i = 0; i < n; i++) {
            if (vx__val_copy(&items[i], &from[i]) != 0) {
                dst->u.arr.n = i;
                vx__val_free(dst);
                return -1;
            }
        }
        return 0;
    }
    size_t bytes =
        src->u.arr.elem == VX_STR ? src->u.arr.offs[n] : n * vx__vtype_size(src->u.arr.elem);
    dst->u.arr.data = malloc(bytes ? bytes : 1);
    if (!dst->u.arr.data) return -1;
    memcpy(dst->u.arr.data, src->u.arr.data, bytes);
    if (src->u.arr.elem == VX_STR) {
        dst->u.arr.offs = malloc((n + 1) * sizeof *dst->u.arr.offs);
        if (!dst->u.arr.offs) {
            vx__val_free(dst);
            return -1;
        }
        memcpy(dst->u.arr.offs, src->u.arr.offs, (n + 1) * sizeof *dst->u.arr.offs);
    }
    return 0;
}

/* Reads a scalar of type t from raw little-endian bytes. */
#define LOAD(T)                                                                                    \
    do {                                                                                           \
        T x_;                                                                                      \
        memcpy(&x_, p, sizeof x_);                                                                 \
        return x_;                                                                                 \
    } while (0)
static int64_t raw_i64(vx_vtype t, const uint8_t *p, bool *ok) {
    *ok = true;
    switch (t) {
    case VX_U8:
        return p[0];
    case VX_I8:
        return (int8_t)p[0];
    case VX_BOOL:
        return p[0] != 0;
    case VX_U16:
        LOAD(uint16_t);
    case VX_I16:
        LOAD(int16_t);
    case VX_U32:
        LOAD(uint32_t);
    case VX_I32:
        LOAD(int32_t);
    case VX_I64:
        LOAD(int64_t);
    case VX_U64: {
        uint64_t x;
        memcpy(&x, p, 8);
        if (x > INT64_MAX) *ok = false;
        return (int64_t)x;
    }
    default:
        *ok = false;
        return 0;
    }
}

static double raw_f64(vx_vtype t, const uint8_t *p) {
    if (t == VX_F32) {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    if (t == VX_F64) {
        double d;
        memcpy(&d, p, 8);
        return d;
    }
    if (t == VX_U64) {
        uint64_t x;
        memcpy(&x, p, 8);
        return (double)x;
    }
    bool ok;
    return (double)raw_i64(t, p, &ok);
}

/* ---- the table ----------------------------------------------------------------------------- */

vx_meta *vx_meta_new(void) {
    return calloc(1, sizeof(vx_meta));
}

void vx_meta_free(vx_meta *m) {
    if (!m) return;
    for (size_t i = 0; i < m->n; i++) {
        free(m->e[i].key);
        vx__val_free(&m->e[i].v);
    }
    free(m->e);
    vx_strmap_free(&m->index);
    free(m);
}

size_t vx_meta_count(const vx_meta *m) {
    return m->n;
}

const char *vx_meta_key(const vx_meta *m, size_t i) {
    return i < m->n ? m->e[i].key : NULL;
}

vx_vtype vx_meta_type(const vx_meta *m, size_t i) {
    return i < m->n ? m->e[i].v.type : VX_VTYPE_COUNT;
}

vx_vtype vx_meta_arr_type(const vx_meta *m, size_t i) {
    return i < m->n && m->e[i].v.type == VX_ARR ? m->e[i].v.u.arr.elem : VX_VTYPE_COUNT;
}

uint64_t vx_meta_arr_len(const vx_meta *m, size_t i) {
    return i < m->n && m->e[i].v.type == VX_ARR ? m->e[i].v.u.arr.n : 0;
}

const void *vx_meta_arr_raw(const vx_meta *m, size_t i) {
    if (i >= m->n || m->e[i].v.type != VX_ARR) return NULL;
    vx_vtype el = m->e[i].v.u.arr.elem;
    return el == VX_STR || el == VX_ARR ? NULL : m->e[i].v.u.arr.data;
}

long vx_meta_find(const vx_meta *m, const char *key) {
    return vx_strmap_get(&m->index, key);
}

const vx__val *vx__meta_val(const vx_meta *m, size_t i) {
    return i < m->n ? &m->e[i].v : NULL;
}

int vx__meta_put(vx_meta *m, const char *key, size_t key_len, vx__val *v, bool replace) {
    char *k = malloc(key_len + 1);
    if (!k) {
        vx__val_free(v);
        return -1;
    }
    memcpy(k, key, key_len);
    k[key_len] = '\0';
    long at = vx_strmap_get(&m->index, k);
    if (at >= 0) {
        free(k);
        if (!replace) {
            vx__val_free(v);
            return 1;
        }
        vx__val_free(&m->e[at].v);
        m->e[at].v = *v;
        return 0;
    }
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        vx_entry *e = realloc(m->e, cap * sizeof *e);
        if (!e) goto oom;
        m->e = e;
        m->cap = cap;
    }
    if (vx_strmap_put(&m->index, k, m->n) != 0) goto oom;
    m->e[m->n].key = k;
    m->e[m->n].v = *v;
    m->n++;
    return 0;
oom:
    free(k);
    vx__val_free(v);
    return -1;
}

int vx_meta_copy_entry(vx_meta *dst, const vx_meta *src, size_t i) {
    if (i >= src->n) return -1;
    vx__val v;
    if (vx__val_copy(&v, &src->e[i].v) != 0) return -1;
    return vx__meta_put(dst, src->e[i].key, strlen(src->e[i].key), &v, true) < 0 ? -1 : 0;
}

vx_meta *vx_meta_clone(const vx_meta *src) {
    vx_meta *m = vx_meta_new();
    for (size_t i = 0; m && i < src->n; i++) {
        if (vx_meta_copy_entry(m, src, i)) {
            vx_meta_free(m);
            m = NULL;
        }
    }
    return m;
}

/* ---- getters ------------------------------------------------------------------------------- */

static int type_error(mw_err *err, const char *key, vx_vtype have, const char *want) {
    return mw_errf(err, "metadata key '%s' has type %s, expected %s", key, vx_vtype_name(have),
                   want);
}

/* Finds key; returns its value, or NULL (absent). */
static const vx__val *lookup(const vx_meta *m, const char *key) {
    long i = vx_meta_find(m, key);
    return i < 0 ? NULL : &m->e[i].v;
}

int vx_meta_get_i64(const vx_meta *m, const char *key, int64_t *out, mw_err *err) {
    const vx__val *v = lookup(m, key);
    if (!v) return 0;
    if (!is_int(v->type)) return type_error(err, key, v->type, "an integer");
    bool ok;
    int64_t x = raw_i64(v->type, v->u.raw, &ok);
    if (!ok) return mw_errf(err, "metadata key '%s': value does not fit in int64", key);
    *out = x;
    return 1;
}

int vx_meta_get_f64(const vx_meta *m, const char *key, double *out, mw_err *err) {
    const vx__val *v = lookup(m, key);
    if (!v) return 0;
    if (!is_int(v->type) && v->type != VX_F32 && v->type != VX_F64)
        return type_error(err, key, v->type, "a number");
    *out = raw_f64(v->type, v->u.raw);
    return 1;
}

int vx_meta_get_bool(const vx_meta *m, const char *key, bool *out, mw_err *err) {
    const vx__val *v = lookup(m, key);
    if (!v) return 0;
    if (v->type != VX_BOOL) return type_error(err, key, v->type, "bool");
    *out = v->u.raw[0] != 0;
    return 1;
}

int vx_meta_get_str(const vx_meta *m, const char *key, const char **out, mw_err *err) {
    const vx__val *v = lookup(m, key);
    if (!v) return 0;
    if (v->type != VX_STR) return type_error(err, key, v->type, "str");
    *out = v->u.str.s;
    return 1;
}

/* Finds an array key and checks idx; returns the value, NULL when absent, or sets *bad. */
static const vx__val *lookup_elem(const vx_meta *m, const char *key, uint64_t idx, bool *bad,
                                  mw_err *err) {
    *bad = false;
    const vx__val *v = lookup(m, key);
    if (!v) return NULL;
    if (v->type != VX_ARR) {
        *bad = true;
        type_error(err, key, v->type, "an array");
        return NULL;
    }
    if (idx >= v->u.arr.n) {
        *bad = true;
        mw_errf(err, "metadata key '%s': index %llu out of range (array of %llu)", key,
                (unsigned long long)idx, (unsigned long long)v->u.arr.n);
        return NULL;
    }
    return v;
}

static int elem_type_error(mw_err *err, const char *key, vx_vtype have, const char *want) {
    return mw_errf(err, "metadata key '%s' is an array of %s, expected %s", key,
                   vx_vtype_name(have), want);
}

int vx_meta_arr_i64(const vx_meta *m, const char *key, uint64_t idx, int64_t *out, mw_err *err) {
    bool bad;
    const vx__val *v = lookup_elem(m, key, idx, &bad, err);
    if (!v) return bad ? -1 : 0;
    vx_vtype el = v->u.arr.elem;
    if (!is_int(el) && el != VX_BOOL) return elem_type_error(err, key, el, "integers");
    bool ok;
    int64_t x = raw_i64(el, (const uint8_t *)v->u.arr.data + idx * vx__vtype_size(el), &ok);
    if (!ok)
        return mw_errf(err, "metadata key '%s'[%llu]: value does not fit in int64", key,
                       (unsigned long long)idx);
    *out = x;
    return 1;
}

int vx_meta_arr_f64(const vx_meta *m, const char *key, uint64_t idx, double *out, mw_err *err) {
    bool bad;
    const vx__val *v = lookup_elem(m, key, idx, &bad, err);
    if (!v) return bad ? -1 : 0;
    vx_vtype el = v->u.arr.elem;
    if (!is_int(el) && el != VX_BOOL && el != VX_F32 && el != VX_F64)
        return elem_type_error(err, key, el, "numbers");
    *out = raw_f64(el, (const uint8_t *)v->u.arr.data + idx * vx__vtype_size(el));
    return 1;
}

int vx_meta_arr_str(const vx_meta *m, const char *key, uint64_t idx, const char **out, size_t *len,
                    mw_err *err) {
    bool bad;
    const vx__val *v = lookup_elem(m, key, idx, &bad, err);
    if (!v) return bad ? -1 : 0;
    if (v->u.arr.elem != VX_STR) return elem_type_error(err, key, v->u.arr.elem, "strings");
    uint64_t l;
    *out = vx__val_arr_str(v, idx, &l);
    if (len) *len = (size_t)l;
    return 1;
}

/* ---- setters ------------------------------------------------------------------------------- */

int vx_meta_set_scalar(vx_meta *m, const char *key, vx_vtype type, const void *raw) {
    size_t sz = vx__vtype_size(type);
    if (sz == 0) return -1;
    vx__val v = {.type = type};
    memcpy(v.u.raw, raw, sz);
    return vx__meta_put(m, key, strlen(key), &v, true) < 0 ? -1 : 0;
}

int vx_meta_set_u32(vx_meta *m, const char *key, uint32_t v) {
    return vx_meta_set_scalar(m, key, VX_U32, &v);
}
int vx_meta_set_i32(vx_meta *m, const char *key, int32_t v) {
    return vx_meta_set_scalar(m, key, VX_I32, &v);
}
int vx_meta_set_u64(vx_meta *m, const char *key, uint64_t v) {
    return vx_meta_set_scalar(m, key, VX_U64, &v);
}
int vx_meta_set_f32(vx_meta *m, const char *key, float v) {
    return vx_meta_set_scalar(m, key, VX_F32, &v);
}
int vx_meta_set_f64(vx_meta *m, const char *key, double v) {
    return vx_meta_set_scalar(m, key, VX_F64, &v);
}
int vx_meta_set_bool(vx_meta *m, const char *key, bool v) {
    uint8_t b = v ? 1 : 0;
    return vx_meta_set_scalar(m, key, VX_BOOL, &b);
}

int vx_meta_set_str(vx_meta *m, const char *key, const char *s, size_t len) {
    vx__val v = {.type = VX_STR};
    v.u.str.s = malloc(len + 1);
    if (!v.u.str.s) return -1;
    memcpy(v.u.str.s, s, len);
    v.u.str.s[len] = '\0';
    v.u.str.len = len;
    return vx__meta_put(m, key, strlen(key), &v, true) < 0 ? -1 : 0;
}

int vx_meta_set_arr(vx_meta *m, const char *key, vx_vtype elem, const void *data, uint64_t n) {
    size_t sz = vx__vtype_size(elem);
    if (sz == 0 || n > SIZE_MAX / sz) return -1;
    vx__val v = {.type = VX_ARR};
    v.u.arr.elem = elem;
    v.u.arr.n = n;
    v.u.arr.data = malloc(n > 0 ? n * sz : 1);
    if (!v.u.arr.data) return -1;
    if (n) memcpy(v.u.arr.data, data, n * sz);
    return vx__meta_put(m, key, strlen(key), &v, true) < 0 ? -1 : 0;
}

int vx_meta_set_arr_str(vx_meta *m, const char *key, const char *const *strs, const size_t *lens,
                        uint64_t n) {
    if (n >= SIZE_MAX / sizeof(uint64_t)) return -1;
    vx__val v = {.type = VX_ARR};
    v.u.arr.elem = VX_STR;
    v.u.arr.n = n;
    v.u.arr.offs = malloc((n + 1) * sizeof(uint64_t));
    if (!v.u.arr.offs) return -1;
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        v.u.arr.offs[i] = total;
        total += (lens ? lens[i] : strlen(strs[i])) + 1;
    }
    v.u.arr.offs[n] = total;
    v.u.arr.data = malloc(total ? total : 1);
    if (!v.u.arr.data) {
        vx__val_free(&v);
        return -1;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint64_t l = v.u.arr.offs[i + 1] - v.u.arr.offs[i] - 1;
        memcpy((char *)v.u.arr.data + v.u.arr.offs[i], strs[i], l);
        ((char *)v.u.arr.data)[v.u.arr.offs[i] + l] = '\0';
    }
    return vx__meta_put(m, key, strlen(key), &v, true) < 0 ? -1 : 0;
}
