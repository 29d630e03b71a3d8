/* vindex/vx_gguf.c — the GGUF v2/v3 reader: maps the file and validates every byte it uses.
 *
 * Layout (little-endian): "GGUF", u32 version, u64 n_tensors, u64 n_kv, n_kv × (string key,
 * u32 type, value), n_tensors × (string name, u32 n_dims, n_dims × u64 ne, u32 ggml type,
 * u64 offset), padding to general.alignment (default 32), tensor data. A string is u64 length +
 * bytes. Counts and lengths are bounded by the bytes left in the file BEFORE anything is
 * allocated, so a hostile header cannot ask for more memory than a constant times the file size. */
#include "vindex/vx_gguf.h"

#include <stdlib.h>
#include <string.h>

#include "vindex/vx_gguf_internal.h"
#include "vindex/vx_map.h"
#include "vindex/vx_meta_internal.h"
#include "vindex/vx_strmap.h"

struct vx_gguf {
    char *path;
    vx_map map;
    vx_file_id id;
    const uint8_t *base; /* map.p */
    uint64_t size;
    uint32_t version;
    vx_meta *meta;
    uint64_t alignment;
    uint64_t data_offset;
    size_t n_tensors;
    vx_tensor *tensors;
    vx_strmap index;
};

/* Smallest encodings, used to bound counts by the bytes left. */
#define MIN_KV_BYTES     14 /* key len 8 + 1 char + type 4 + 1-byte value */
#define MIN_TENSOR_BYTES 33 /* name len 8 + 1 char + n_dims 4 + ne 8 + type 4 + offset 8 */
#define MAX_KEY_LEN      65535
#define MAX_NAME_LEN     4096

/* A bounds-checked cursor over the mapping. Every read names what it was reading when the file
 * ends too early. */
typedef struct rd {
    const uint8_t *p;
    uint64_t size, pos;
    const char *path;
    mw_err *err;
    char what[160]; /* the item being read, for messages */
} rd;

static uint64_t left(const rd *r) {
    return r->size - r->pos;
}

static int need(rd *r, uint64_t n) {
    if (n <= left(r)) return 0;
    return mw_errf(
        r->err, "%s: truncated: %s needs %llu bytes at offset %llu but the file has %llu", r->path,
        r->what, (unsigned long long)n, (unsigned long long)r->pos, (unsigned long long)left(r));
}

static int rd_u32(rd *r, uint32_t *v) {
    if (need(r, 4)) return -1;
    memcpy(v, r->p + r->pos, 4);
    r->pos += 4;
    return 0;
}

static int rd_u64(rd *r, uint64_t *v) {
    if (need(r, 8)) return -1;
    memcpy(v, r->p + r->pos, 8);
    r->pos += 8;
    return 0;
}

/* Keys and tensor names end up in error messages, manifests and terminals: a control byte there
 * (NUL, escape, newline) is a malformed file, not a name. Returns a description of the first one
 * found, or NULL. */
/* Length of the well-formed UTF-8 sequence at s[0 .. n) (RFC 3629: no overlong forms, no
 * surrogates, nothing past U+10FFFF), or 0. */
static size_t utf8_seq(const unsigned char *s, uint64_t n) {
    const unsigned c = s[0];
    size_t len = c < 0x80                 ? 1
                 : c >= 0xc2 && c <= 0xdf ? 2
                 : c >= 0xe0 && c <= 0xef ? 3
                 : c >= 0xf0 && c <= 0xf4 ? 4
                                          : 0;
    if (!len || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) || (c == 0xf0 && s[1] < 0x90) ||
        (c == 0xf4 && s[1] > 0x8f))
        return 0;
    return len;
}

/* Names (metadata keys, tensor names) are UTF-8 text without control characters: they end up
 * in JSON (the manifest), messages and terminals. */
static const char *bad_name_byte(const char *s, uint64_t n, char buf[32]) {
    for (uint64_t i = 0; i < n;) {
        const unsigned char c = (unsigned char)s[i];
        if (c == 0) return "a NUL byte";
        if (c < 0x20 || c == 0x7f) {
            snprintf(buf, 32, "control byte 0x%02x", c);
            return buf;
        }
        size_t len = utf8_seq((const unsigned char *)s + i, n - i);
        if (!len) {
            snprintf(buf, 32, "invalid UTF-8 at byte %llu", (unsigned long long)i);
            return buf;
        }
        i += len;
    }
    return NULL;
}

/* A GGUF string: returns a pointer into the mapping and its length. */
static int rd_str(rd *r, const char **s, uint64_t *len) {
    if (rd_u64(r, len)) return -1;
    if (*len > left(r))
        return mw_errf(r->err,
                       "%s: %s: string length %llu at offset %llu runs past the end of the "
                       "file (%llu bytes left)",
                       r->path, r->what, (unsigned long long)*len, (unsigned long long)(r->pos - 8),
                       (unsigned long long)left(r));
    *s = (const char *)r->p + r->pos;
    r->pos += *len;
    return 0;
}

static int read_val(rd *r, vx_vtype type, vx__val *out, int depth);

static int read_str_array(rd *r, vx__val *out, uint64_t n) {
    if (n > left(r) / 8)
        return mw_errf(r->err, "%s: %s: array of %llu strings cannot fit in the %llu bytes left",
                       r->path, r->what, (unsigned long long)n, (unsigned long long)left(r));
    /* First pass: validate every length and size the blob; second pass: copy. */
    uint64_t start = r->pos, total = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *s;
        uint64_t len;
        if (rd_str(r, &s, &len)) return -1;
        total += len + 1;
    }
    out->u.arr.offs = malloc((n + 1) * sizeof(uint64_t));
    out->u.arr.data = malloc(total ? total : 1);
    if (!out->u.arr.offs || !out->u.arr.data)
        return mw_errf(r->err, "%s: %s: out of memory", r->path, r->what);
    r->pos = start;
    uint64_t at = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *s;
        uint64_t len;
        rd_str(r, &s, &len);
        out->u.arr.offs[i] = at;
        memcpy((char *)out->u.arr.data + at, s, len);
        ((char *)out->u.arr.data)[at + len] = '\0';
        at += len + 1;
    }
    out->u.arr.offs[n] = at;
    return 0;
}

static int read_array(rd *r, vx__val *out, int depth) {
    uint32_t elem;
    uint64_t n;
    if (rd_u32(r, &elem) || rd_u64(r, &n)) return -1;
    if (!vx__vtype_valid(elem))
        return mw_errf(r->err, "%s: %s: unknown array element type %u", r->path, r->what, elem);
    out->u.arr.elem = (vx_vtype)elem;
    if (elem == VX_STR) {
        out->u.arr.n = n;
        return read_str_array(r, out, n);
    }
    if (elem == VX_ARR) {
        if (depth + 1 >= VX__META_MAX_DEPTH)
            return mw_errf(r->err, "%s: %s: arrays nested deeper than %d levels", r->path, r->what,
                           VX__META_MAX_DEPTH);
        if (n > left(r) / 12)
            return mw_errf(r->err, "%s: %s: array of %llu arrays cannot fit in the %llu bytes left",
                           r->path, r->what, (unsigned long long)n, (unsigned long long)left(r));
        vx__val *items = calloc(n ? n : 1, sizeof *items);
        if (!items) return mw_errf(r->err, "%s: %s: out of memory", r->path, r->what);
        out->u.arr.data = items;
        for (uint64_t i = 0; i < n; i++) {
            out->u.arr.n = i + 1; /* so a failure frees what was read */
            if (read_val(r, VX_ARR, &items[i], depth + 1)) return -1;
        }
        out->u.arr.n = n;
        return 0;
    }
    size_t sz = vx__vtype_size((vx_vtype)elem);
    if (n > left(r) / sz)
        return mw_errf(r->err, "%s: %s: array of %llu %s values cannot fit in the %llu bytes left",
                       r->path, r->what, (unsigned long long)n, vx_vtype_name((vx_vtype)elem),
                       (unsigned long long)left(r));
    out->u.arr.data = malloc(n > 0 ? n * sz : 1);
    if (!out->u.arr.data) return mw_errf(r->err, "%s: %s: out of memory", r->path, r->what);
    memcpy(out->u.arr.data, r->p + r->pos, n * sz);
    if (elem == VX_BOOL) /* any non-zero byte is true; keep one spelling so digests agree */
        for (uint64_t i = 0; i < n; i++)
            ((uint8_t *)out->u.arr.data)[i] = ((uint8_t *)out->u.arr.data)[i] != 0;
    out->u.arr.n = n;
    r->pos += n * sz;
    return 0;
}

static int read_val(rd *r, vx_vtype type, vx__val *out, int depth) {
    memset(out, 0, sizeof *out);
    out->type = type;
    if (type == VX_ARR) return read_array(r, out, depth);
    if (type == VX_STR) {
        const char *s;
        uint64_t len;
        if (rd_str(r, &s, &len)) return -1;
        out->u.str.s = malloc(len + 1);
        if (!out->u.str.s) return mw_errf(r->err, "%s: %s: out of memory", r->path, r->what);
        memcpy(out->u.str.s, s, len);
        out->u.str.s[len] = '\0';
        out->u.str.len = len;
        return 0;
    }
    size_t sz = vx__vtype_size(type);
    if (need(r, sz)) return -1;
    memcpy(out->u.raw, r->p + r->pos, sz);
    if (type == VX_BOOL) out->u.raw[0] = out->u.raw[0] != 0;
    r->pos += sz;
    return 0;
}

static int read_header_kv(rd *r, vx_gguf *g, uint64_t n_kv) {
    char *what = r->what;
    for (uint64_t i = 0; i < n_kv; i++) {
        snprintf(what, sizeof r->what, "metadata entry #%llu key", (unsigned long long)i);
        const char *key;
        uint64_t klen;
        uint32_t type;
        if (rd_str(r, &key, &klen)) return -1;
        if (klen == 0 || klen > MAX_KEY_LEN)
            return mw_errf(r->err, "%s: metadata entry #%llu: key length %llu (must be 1..%d)",
                           g->path, (unsigned long long)i, (unsigned long long)klen, MAX_KEY_LEN);
        char cb[32];
        const char *bad = bad_name_byte(key, klen, cb);
        if (bad)
            return mw_errf(r->err, "%s: metadata entry #%llu: key contains %s", g->path,
                           (unsigned long long)i, bad);
        snprintf(what, sizeof r->what, "metadata key '%.*s'", (int)(klen < 100 ? klen : 100), key);
        if (rd_u32(r, &type)) return -1;
        if (!vx__vtype_valid(type))
            return mw_errf(r->err, "%s: %s: unknown value type %u", g->path, what, type);
        vx__val v;
        if (read_val(r, (vx_vtype)type, &v, 0)) {
            vx__val_free(&v);
            return -1;
        }
        int rc = vx__meta_put(g->meta, key, klen, &v, false);
        if (rc < 0) return mw_errf(r->err, "%s: out of memory reading metadata", g->path);
        if (rc > 0) return mw_errf(r->err, "%s: duplicate %s", g->path, what);
    }
    return 0;
}

static int read_alignment(vx_gguf *g, mw_err *err) {
    g->alignment = 32;
    int64_t a;
    int rc = vx_meta_get_i64(g->meta, "general.alignment", &a, err);
    if (rc < 0) return mw_err_wrap(err, "%s", g->path);
    if (rc == 0) return 0;
    if (a <= 0 || (a & (a - 1)) != 0 || a > (1 << 30))
        return mw_errf(err, "%s: general.alignment %lld is not a power of two in 1..2^30", g->path,
                       (long long)a);
    g->alignment = (uint64_t)a;
    return 0;
}

/* Byte alignment the data of a type needs in memory: the largest power of two dividing its block
 * size, capped at 8 (a float tensor needs 4, an fp16-scaled block 2, MXFP4's 17-byte block 1). */
static uint64_t natural_alignment(const kn_type_traits *tr) {
    uint64_t a = 1;
    while (a < 8 && (uint64_t)tr->type_size % (a * 2) == 0) a *= 2;
    return a;
}

int vx__tensor_nbytes(kn_type type, int n_dims, const int64_t *ne, uint64_t *nbytes, char *why,
                      size_t why_len) {
    const kn_type_traits *tr = kn_traits(type);
    if (!tr || tr->blck_size <= 0 || tr->type_size <= 0) {
        snprintf(why, why_len, "unknown ggml type id %d", (int)type);
        return -1;
    }
    if (n_dims < 1 || n_dims > VX_GGUF_MAX_DIMS) {
        snprintf(why, why_len, "has %d dimensions (must be 1..%d)", n_dims, VX_GGUF_MAX_DIMS);
        return -1;
    }
    uint64_t rows = 1;
    for (int d = 0; d < VX_GGUF_MAX_DIMS; d++) {
        int64_t n = d < n_dims ? ne[d] : 1;
        if (n < 0) {
            snprintf(why, why_len, "has negative dimension ne[%d] = %lld", d, (long long)n);
            return -1;
        }
        /* An empty tensor holds nothing a model can use, and its row size would be unbounded by
         * the file (0 rows of any length take 0 bytes): refused. */
        if (n == 0) {
            snprintf(why, why_len, "has a zero-sized dimension ne[%d] = 0", d);
            return -1;
        }
        if (d > 0) {
            if (rows > (uint64_t)INT64_MAX / (uint64_t)n) {
                snprintf(why, why_len, "element count overflows (ne product too large)");
                return -1;
            }
            rows *= (uint64_t)n;
        }
    }
    if (ne[0] % tr->blck_size != 0) {
        snprintf(why, why_len, "ne[0] = %lld is not a multiple of the %s block size %d",
                 (long long)ne[0], tr->name, tr->blck_size);
        return -1;
    }
    uint64_t row = (uint64_t)(ne[0] / tr->blck_size) * (uint64_t)tr->type_size;
    if (row > (uint64_t)INT64_MAX / rows) {
        snprintf(why, why_len, "byte size overflows");
        return -1;
    }
    *nbytes = row * rows;
    return 0;
}

static int read_tensor_infos(rd *r, vx_gguf *g) {
    char *what = r->what;
    for (size_t i = 0; i < g->n_tensors; i++) {
        vx_tensor *t = &g->tensors[i];
        snprintf(what, sizeof r->what, "tensor info #%zu", i);
        const char *name;
        uint64_t nlen;
        if (rd_str(r, &name, &nlen)) return -1;
        if (nlen == 0 || nlen > MAX_NAME_LEN)
            return mw_errf(r->err, "%s: tensor #%zu: name length %llu (must be 1..%d)", g->path, i,
                           (unsigned long long)nlen, MAX_NAME_LEN);
        char cb[32];
        const char *bad = bad_name_byte(name, nlen, cb);
        if (bad) return mw_errf(r->err, "%s: tensor #%zu: name contains %s", g->path, i, bad);
        char *nm = malloc(nlen + 1);
        if (!nm) return mw_errf(r->err, "%s: out of memory", g->path);
        memcpy(nm, name, nlen);
        nm[nlen] = '\0';
        t->name = nm;
        snprintf(what, sizeof r->what, "tensor '%.100s'", nm);
        int rc = vx_strmap_put(&g->index, nm, i);
        if (rc < 0) return mw_errf(r->err, "%s: out of memory", g->path);
        if (rc > 0) return mw_errf(r->err, "%s: duplicate tensor name '%s'", g->path, nm);
        uint32_t n_dims, type;
        if (rd_u32(r, &n_dims)) return -1;
        if (n_dims < 1 || n_dims > VX_GGUF_MAX_DIMS)
            return mw_errf(r->err, "%s: tensor '%s' has %u dimensions (must be 1..%d)", g->path, nm,
                           n_dims, VX_GGUF_MAX_DIMS);
        t->n_dims = (int)n_dims;
        for (int d = 0; d < VX_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < n_dims; d++) {
            uint64_t v;
            if (rd_u64(r, &v)) return -1;
            if (v > (uint64_t)INT64_MAX)
                return mw_errf(r->err, "%s: tensor '%s': ne[%u] = %llu is out of range", g->path,
                               nm, d, (unsigned long long)v);
            t->ne[d] = (int64_t)v;
        }
        if (rd_u32(r, &type) || rd_u64(r, &t->offset)) return -1;
        t->type = (kn_type)type;
        char why[120];
        if (kn_traits(t->type) && kn_traits(t->type)->planar)
            return mw_errf(r->err, "%s: tensor '%s': type id %u is not a GGUF type", g->path, nm,
                           type);
        if (vx__tensor_nbytes(t->type, t->n_dims, t->ne, &t->nbytes, why, sizeof why))
            return mw_errf(r->err, "%s: tensor '%s': %s", g->path, nm, why);
    }
    return 0;
}

static int cmp_by_offset(const void *a, const void *b) {
    const vx_tensor *x = *(const vx_tensor *const *)a, *y = *(const vx_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Places each tensor in the data section: aligned, inside the file, no two overlapping. */
static int place_tensors(vx_gguf *g, mw_err *err) {
    uint64_t data_size = g->size > g->data_offset ? g->size - g->data_offset : 0;
    for (size_t i = 0; i < g->n_tensors; i++) {
        vx_tensor *t = &g->tensors[i];
        if (t->offset % g->alignment != 0)
            return mw_errf(err,
                           "%s: tensor '%s': data offset %llu is not a multiple of the "
                           "alignment %llu",
                           g->path, t->name, (unsigned long long)t->offset,
                           (unsigned long long)g->alignment);
        if (t->offset > data_size || t->nbytes > data_size - t->offset)
            return mw_errf(err,
                           "%s: tensor '%s' (%llu bytes at data offset %llu) extends past the "
                           "end of the file (data section holds %llu bytes)",
                           g->path, t->name, (unsigned long long)t->nbytes,
                           (unsigned long long)t->offset, (unsigned long long)data_size);
        t->offset += g->data_offset; /* absolute from here on */
        uint64_t nat = natural_alignment(kn_traits(t->type));
        if (t->offset % nat != 0)
            return mw_errf(err,
                           "%s: tensor '%s': data at file offset %llu is misaligned for %s "
                           "(needs %llu-byte alignment)",
                           g->path, t->name, (unsigned long long)t->offset, kn_type_name(t->type),
                           (unsigned long long)nat);
        t->data = g->base + t->offset;
    }
    if (g->n_tensors < 2) return 0;
    const vx_tensor **by_off = malloc(g->n_tensors * sizeof *by_off);
    if (!by_off) return mw_errf(err, "%s: out of memory", g->path);
    for (size_t i = 0; i < g->n_tensors; i++) by_off[i] = &g->tensors[i];
    qsort(by_off, g->n_tensors, sizeof *by_off, cmp_by_offset);
    int rc = 0;
    const vx_tensor *prev = NULL;
    for (size_t i = 0; i < g->n_tensors && rc == 0; i++) {
        const vx_tensor *t = by_off[i];
        if (t->nbytes == 0) continue;
        if (prev && prev->offset + prev->nbytes > t->offset)
            rc = mw_errf(err,
                         "%s: tensor '%s' (file bytes %llu..%llu) overlaps tensor '%s' "
                         "(file bytes %llu..%llu)",
                         g->path, t->name, (unsigned long long)t->offset,
                         (unsigned long long)(t->offset + t->nbytes), prev->name,
                         (unsigned long long)prev->offset,
                         (unsigned long long)(prev->offset + prev->nbytes));
        prev = t;
    }
    free(by_off);
    return rc;
}

static int parse(vx_gguf *g, mw_err *err) {
    rd r = {.p = g->base, .size = g->size, .path = g->path, .err = err, .what = "the header"};
    if (g->size < 4 || memcmp(g->base, "GGUF", 4) != 0)
        return mw_errf(err, "%s: bad magic (not a GGUF file)", g->path);
    r.pos = 4;
    if (rd_u32(&r, &g->version)) return -1;
    if (g->version == 0x02000000u || g->version == 0x03000000u)
        return mw_errf(err, "%s: big-endian GGUF files are not supported", g->path);
    if (g->version != 2 && g->version != 3)
        return mw_errf(err, "%s: unsupported GGUF version %u (expected 2 or 3)", g->path,
                       g->version);
    uint64_t n_tensors, n_kv;
    if (rd_u64(&r, &n_tensors) || rd_u64(&r, &n_kv)) return -1;
    if (n_kv > left(&r) / MIN_KV_BYTES)
        return mw_errf(err, "%s: metadata count %llu cannot fit in the %llu bytes left", g->path,
                       (unsigned long long)n_kv, (unsigned long long)left(&r));
    if (n_tensors > left(&r) / MIN_TENSOR_BYTES)
        return mw_errf(err, "%s: tensor count %llu cannot fit in the %llu bytes left", g->path,
                       (unsigned long long)n_tensors, (unsigned long long)left(&r));
    g->meta = vx_meta_new();
    if (!g->meta) return mw_errf(err, "%s: out of memory", g->path);
    if (read_header_kv(&r, g, n_kv)) return -1;
    if (read_alignment(g, err)) return -1;
    /* The tensor count is rechecked against what is left after the metadata. */
    if (n_tensors > left(&r) / MIN_TENSOR_BYTES)
        return mw_errf(err, "%s: tensor count %llu cannot fit in the %llu bytes left", g->path,
                       (unsigned long long)n_tensors, (unsigned long long)left(&r));
    g->n_tensors = (size_t)n_tensors;
    g->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensors);
    if (!g->tensors) return mw_errf(err, "%s: out of memory", g->path);
    if (read_tensor_infos(&r, g)) return -1;
    g->data_offset = (r.pos + g->alignment - 1) / g->alignment * g->alignment;
    if (g->n_tensors > 0 && g->data_offset > g->size)
        return mw_errf(err,
                       "%s: truncated: the data section would start at offset %llu but the "
                       "file has %llu bytes",
                       g->path, (unsigned long long)g->data_offset, (unsigned long long)g->size);
    return place_tensors(g, err);
}

int vx_gguf_open(const char *path, vx_gguf **out, mw_err *err) {
    *out = NULL;
    vx_gguf *g = calloc(1, sizeof *g);
    if (!g || !(g->path = strdup(path))) {
        free(g);
        return mw_errf(err, "%s: out of memory", path);
    }
    if (vx_map_file(path, 0, &g->map, &g->id, err)) goto fail;
    g->base = g->map.p;
    g->size = g->map.len;
    if (g->size < 24) {
        mw_errf(err, "%s: truncated: %llu bytes is shorter than a GGUF header", path,
                (unsigned long long)g->size);
        goto fail;
    }
    if (parse(g, err) != 0) goto fail;
    *out = g;
    return 0;
fail:
    vx_gguf_close(g);
    return -1;
}

void vx_gguf_close(vx_gguf *g) {
    if (!g) return;
    vx_unmap(&g->map);
    for (size_t i = 0; g->tensors && i < g->n_tensors; i++) free((char *)g->tensors[i].name);
    free(g->tensors);
    vx_strmap_free(&g->index);
    vx_meta_free(g->meta);
    free(g->path);
    free(g);
}

uint32_t vx_gguf_version(const vx_gguf *g) {
    return g->version;
}
const char *vx_gguf_path(const vx_gguf *g) {
    return g->path;
}
const vx_meta *vx_gguf_meta(const vx_gguf *g) {
    return g->meta;
}
uint64_t vx_gguf_alignment(const vx_gguf *g) {
    return g->alignment;
}
uint64_t vx_gguf_data_offset(const vx_gguf *g) {
    return g->data_offset;
}
uint64_t vx_gguf_file_size(const vx_gguf *g) {
    return g->size;
}
const uint8_t *vx_gguf_base(const vx_gguf *g) {
    return g->base;
}
const vx_file_id *vx_gguf_file_id(const vx_gguf *g) {
    return &g->id;
}
size_t vx_gguf_n_tensors(const vx_gguf *g) {
    return g->n_tensors;
}

const vx_tensor *vx_gguf_tensor(const vx_gguf *g, size_t i) {
    return i < g->n_tensors ? &g->tensors[i] : NULL;
}

const vx_tensor *vx_gguf_find(const vx_gguf *g, const char *name) {
    long i = vx_strmap_get(&g->index, name);
    return i < 0 ? NULL : &g->tensors[i];
}
