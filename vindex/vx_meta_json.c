/* vindex/vx_meta_json.c — metadata tables as manifest JSON, every GGUF value type kept exactly.
 *
 * An entry is {"key": K, "type": T, "value": V}; arrays add "elem" (the element type) and nested
 * arrays hold {"elem": T, "value": [...]} objects. Integers are JSON integers (a u64 above 2^63-1
 * is a decimal string), floats JSON numbers printed to round-trip (non-finite ones as "0x" + their
 * bit pattern), strings JSON strings (or {"hex": ...} when they are not valid UTF-8). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vindex/vx_manifest.h"
#include "vindex/vx_meta_internal.h"

static json_t *hex_string(const void *p, size_t n) {
    static const char digits[] = "0123456789abcdef";
    char *h = malloc(2 * n + 1);
    if (!h) return NULL;
    for (size_t i = 0; i < n; i++) {
        h[2 * i] = digits[((const uint8_t *)p)[i] >> 4];
        h[2 * i + 1] = digits[((const uint8_t *)p)[i] & 15];
    }
    h[2 * n] = '\0';
    json_t *s = json_pack("{s:s}", "hex", h);
    free(h);
    return s;
}

static json_t *str_json(const char *s, size_t len) {
    json_t *j = json_stringn(s, len);
    return j ? j : hex_string(s, len);
}

static json_t *float_json(double v, uint64_t bits, int width) {
    if (isfinite(v)) return json_real(v);
    char b[24];
    snprintf(b, sizeof b, "0x%0*" PRIx64, width, bits);
    return json_string(b);
}

static json_t *scalar_json(vx_vtype t, const uint8_t *p) {
    switch (t) {
    case VX_U8:
        return json_integer(p[0]);
    case VX_I8:
        return json_integer((int8_t)p[0]);
    case VX_BOOL:
        return json_boolean(p[0] != 0);
    default:
        break;
    }
    uint64_t u = 0;
    memcpy(&u, p, vx__vtype_size(t));
    switch (t) {
    case VX_U16:
        return json_integer((uint16_t)u);
    case VX_I16:
        return json_integer((int16_t)u);
    case VX_U32:
        return json_integer((uint32_t)u);
    case VX_I32:
        return json_integer((int32_t)u);
    case VX_I64:
        return json_integer((int64_t)u);
    case VX_U64: {
        if (u <= INT64_MAX) return json_integer((json_int_t)u);
        char b[24];
        snprintf(b, sizeof b, "%" PRIu64, u);
        return json_string(b);
    }
    case VX_F32: {
        float f;
        memcpy(&f, p, 4);
        return float_json(f, (uint32_t)u, 8);
    }
    case VX_F64: {
        double d;
        memcpy(&d, p, 8);
        return float_json(d, u, 16);
    }
    default:
        return NULL;
    }
}

/* The JSON array of an array value's elements. */
static json_t *array_json(const vx__val *v) {
    json_t *a = json_array();
    if (!a) return NULL;
    for (uint64_t i = 0; i < v->u.arr.n; i++) {
        json_t *e;
        if (v->u.arr.elem == VX_STR) {
            uint64_t len;
            const char *s = vx__val_arr_str(v, i, &len);
            e = str_json(s, len);
        } else if (v->u.arr.elem == VX_ARR) {
            const vx__val *inner = &((const vx__val *)v->u.arr.data)[i];
            e = json_pack("{s:s,s:o}", "elem", vx_vtype_name(inner->u.arr.elem), "value",
                          array_json(inner));
        } else {
            size_t sz = vx__vtype_size(v->u.arr.elem);
            e = scalar_json(v->u.arr.elem, (const uint8_t *)v->u.arr.data + i * sz);
        }
        if (!e || json_array_append_new(a, e) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

json_t *vx_meta_to_json(const vx_meta *m) {
    json_t *out = json_array();
    for (size_t i = 0; out && i < vx_meta_count(m); i++) {
        const vx__val *v = vx__meta_val(m, i);
        json_t *e;
        if (v->type == VX_ARR)
            e = json_pack("{s:s,s:s,s:s,s:o}", "key", vx_meta_key(m, i), "type", "arr", "elem",
                          vx_vtype_name(v->u.arr.elem), "value", array_json(v));
        else if (v->type == VX_STR)
            e = json_pack("{s:s,s:s,s:o}", "key", vx_meta_key(m, i), "type", "str", "value",
                          str_json(v->u.str.s, v->u.str.len));
        else
            e = json_pack("{s:s,s:s,s:o}", "key", vx_meta_key(m, i), "type", vx_vtype_name(v->type),
                          "value", scalar_json(v->type, v->u.raw));
        if (!e || json_array_append_new(out, e) != 0) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

/* ---- reading ------------------------------------------------------------------------------- */

typedef struct ctx {
    const char *what; /* "metadata[3] ('key')" */
    mw_err *err;
} ctx;

static int bad(const ctx *c, const char *fault) {
    return mw_errf(c->err, "%s: %s: %s", VX_MANIFEST, c->what, fault);
}

static int vtype_from_name(const char *s) {
    for (int t = 0; t < VX_VTYPE_COUNT; t++)
        if (!strcmp(s, vx_vtype_name((vx_vtype)t))) return t;
    return -1;
}

static int unhex_bytes(const char *h, size_t n_hex, uint8_t *out) {
    for (size_t i = 0; i < n_hex / 2; i++) {
        unsigned v;
        if (sscanf(h + 2 * i, "%2x", &v) != 1) return -1;
        out[i] = (uint8_t)v;
    }
    return 0;
}

/* Non-finite floats come back from their "0x..." bit pattern. */
static int float_bits(const json_t *j, int width, uint64_t *bits) {
    const char *s = json_string_value(j);
    if (!s || strlen(s) != (size_t)width + 2 || strncmp(s, "0x", 2) != 0) return -1;
    for (int i = 2; i < width + 2; i++)
        if (!strchr("0123456789abcdef", s[i])) return -1;
    *bits = strtoull(s + 2, NULL, 16);
    return 0;
}

static int scalar_from_json(const ctx *c, vx_vtype t, const json_t *j, uint8_t raw[8]) {
    memset(raw, 0, 8);
    static const struct {
        int64_t lo, hi;
    } range[VX_VTYPE_COUNT] = {
        [VX_U8] = {0, UINT8_MAX},          [VX_I8] = {INT8_MIN, INT8_MAX},
        [VX_U16] = {0, UINT16_MAX},        [VX_I16] = {INT16_MIN, INT16_MAX},
        [VX_U32] = {0, UINT32_MAX},        [VX_I32] = {INT32_MIN, INT32_MAX},
        [VX_I64] = {INT64_MIN, INT64_MAX}, [VX_U64] = {0, INT64_MAX},
    };
    if (t == VX_BOOL) {
        if (!json_is_boolean(j)) return bad(c, "expected true or false");
        raw[0] = json_is_true(j);
        return 0;
    }
    if (t == VX_F32 || t == VX_F64) {
        uint64_t bits;
        if (json_is_number(j)) {
            double d = json_number_value(j);
            if (t == VX_F32) {
                float f = (float)d;
                memcpy(raw, &f, 4);
            } else {
                memcpy(raw, &d, 8);
            }
            return 0;
        }
        if (float_bits(j, t == VX_F32 ? 8 : 16, &bits)) return bad(c, "expected a number");
        memcpy(raw, &bits, vx__vtype_size(t));
        return 0;
    }
    if (t == VX_U64 && json_is_string(j)) {
        const char *s = json_string_value(j);
        size_t n = strlen(s);
        if (n == 0 || n > 20 || strspn(s, "0123456789") != n) return bad(c, "expected a u64");
        errno = 0;
        unsigned long long v = strtoull(s, NULL, 10);
        if (errno) return bad(c, "u64 out of range");
        memcpy(raw, &v, 8);
        return 0;
    }
    if (!json_is_integer(j)) return bad(c, "expected an integer");
    json_int_t v = json_integer_value(j);
    if (v < range[t].lo || v > range[t].hi) {
        char msg[80];
        snprintf(msg, sizeof msg, "value %lld out of range for %s", (long long)v, vx_vtype_name(t));
        return bad(c, msg);
    }
    memcpy(raw, &v, vx__vtype_size(t)); /* little-endian: the low bytes */
    return 0;
}

static int string_from_json(const ctx *c, const json_t *j, char **s, uint64_t *len) {
    if (json_is_string(j)) {
        *len = json_string_length(j);
        *s = malloc(*len + 1);
        if (!*s) return bad(c, "out of memory");
        memcpy(*s, json_string_value(j), *len + 1);
        return 0;
    }
    const char *h = json_string_value(json_object_get(j, "hex"));
    size_t n = h ? strlen(h) : 1;
    if (!json_is_object(j) || json_object_size(j) != 1 || !h || n % 2)
        return bad(c, "expected a string or {\"hex\": ...}");
    *len = n / 2;
    *s = malloc(*len + 1);
    if (!*s) return bad(c, "out of memory");
    (*s)[*len] = '\0';
    if (unhex_bytes(h, n, (uint8_t *)*s)) {
        free(*s);
        return bad(c, "bad hex string");
    }
    return 0;
}

static int array_from_json(const ctx *c, const char *elem_name, const json_t *items, vx__val *v,
                           int depth);

static int elem_type(const ctx *c, const char *name, int *t) {
    *t = name ? vtype_from_name(name) : -1;
    return *t < 0 ? bad(c, "unknown array element type") : 0;
}

static int array_from_json(const ctx *c, const char *elem_name, const json_t *items, vx__val *v,
                           int depth) {
    memset(v, 0, sizeof *v);
    v->type = VX_ARR;
    int et;
    if (elem_type(c, elem_name, &et)) return -1;
    if (!json_is_array(items)) return bad(c, "array value must be a JSON array");
    if (depth >= VX__META_MAX_DEPTH) return bad(c, "arrays nested too deeply");
    size_t n = json_array_size(items);
    v->u.arr.elem = (vx_vtype)et;
    if (et == VX_STR) {
        char **strs = calloc(n ? n : 1, sizeof *strs);
        uint64_t *lens = calloc(n ? n : 1, sizeof *lens);
        int rc = strs && lens ? 0 : bad(c, "out of memory");
        uint64_t total = 0;
        for (size_t i = 0; rc == 0 && i < n; i++) {
            rc = string_from_json(c, json_array_get(items, i), &strs[i], &lens[i]);
            total += lens[i] + 1;
        }
        if (rc == 0) {
            v->u.arr.offs = malloc((n + 1) * sizeof(uint64_t));
            v->u.arr.data = malloc(total ? total : 1);
            if (!v->u.arr.offs || !v->u.arr.data) rc = bad(c, "out of memory");
        }
        for (size_t i = 0, at = 0; rc == 0 && i <= n; i++) {
            v->u.arr.offs[i] = at;
            if (i == n) break;
            memcpy((char *)v->u.arr.data + at, strs[i], lens[i] + 1);
            at += lens[i] + 1;
        }
        v->u.arr.n = rc == 0 ? n : 0;
        for (size_t i = 0; strs && i < n; i++) free(strs[i]);
        free(strs);
        free(lens);
        return rc;
    }
    if (et == VX_ARR) {
        vx__val *inner = calloc(n ? n : 1, sizeof *inner);
        if (!inner) return bad(c, "out of memory");
        v->u.arr.data = inner;
        for (size_t i = 0; i < n; i++) {
            v->u.arr.n = i + 1;
            const json_t *it = json_array_get(items, i);
            if (array_from_json(c, json_string_value(json_object_get(it, "elem")),
                                json_object_get(it, "value"), &inner[i], depth + 1))
                return -1;
        }
        v->u.arr.n = n;
        return 0;
    }
    size_t sz = vx__vtype_size((vx_vtype)et);
    v->u.arr.data = malloc(n ? n * sz : 1);
    if (!v->u.arr.data) return bad(c, "out of memory");
    for (size_t i = 0; i < n; i++) {
        uint8_t raw[8];
        if (scalar_from_json(c, (vx_vtype)et, json_array_get(items, i), raw)) return -1;
        memcpy((uint8_t *)v->u.arr.data + i * sz, raw, sz);
    }
    v->u.arr.n = n;
    return 0;
}

int vx_meta_from_json(const json_t *arr, vx_meta *m, mw_err *err) {
    if (!json_is_array(arr)) return mw_errf(err, "%s: metadata must be an array", VX_MANIFEST);
    size_t i;
    const json_t *e;
    json_array_foreach(arr, i, e) {
        char what[200];
        ctx c = {what, err};
        const json_t *jk = json_object_get(e, "key");
        const char *key = json_string_value(jk);
        snprintf(what, sizeof what, "metadata[%zu] ('%.100s')", i, key ? key : "?");
        if (!key || json_string_length(jk) == 0 || strlen(key) != json_string_length(jk))
            return bad(&c, "key must be a non-empty string without NUL");
        const char *tn = json_string_value(json_object_get(e, "type"));
        int t = tn ? vtype_from_name(tn) : -1;
        if (t < 0) return bad(&c, "unknown value type");
        const json_t *jv = json_object_get(e, "value");
        if (!jv) return bad(&c, "value missing");
        vx__val v = {.type = (vx_vtype)t};
        int rc;
        if (t == VX_ARR)
            rc = array_from_json(&c, json_string_value(json_object_get(e, "elem")), jv, &v, 0);
        else if (t == VX_STR)
            rc = string_from_json(&c, jv, &v.u.str.s, &v.u.str.len);
        else
            rc = scalar_from_json(&c, (vx_vtype)t, jv, v.u.raw);
        if (rc) {
            vx__val_free(&v);
            return -1;
        }
        rc = vx__meta_put(m, key, strlen(key), &v, false);
        if (rc < 0) return bad(&c, "out of memory");
        if (rc > 0) return bad(&c, "duplicate key");
    }
    return 0;
}
