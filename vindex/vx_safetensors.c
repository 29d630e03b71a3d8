/* vindex/vx_safetensors.c — the safetensors reader: header parsing and validation, the dtype
 * table, and checkpoint sets (single file, directory, or sharded through the index). */
#include "vindex/vx_safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kernels/kn.h"
#include "vindex/vx_json.h"
#include "vindex/vx_map.h"

/* ---- dtype table -------------------------------------------------------------------------- */

static const struct {
    const char *name;
    int bits;
    int kn; /* kn_type holding the same bytes, -1 if none */
} st_dtypes[VX_ST_DTYPE_COUNT] = {
    [VX_ST_BOOL] = {"BOOL", 8, -1},       [VX_ST_U8] = {"U8", 8, -1},
    [VX_ST_I8] = {"I8", 8, KN_I8},        [VX_ST_U16] = {"U16", 16, -1},
    [VX_ST_I16] = {"I16", 16, KN_I16},    [VX_ST_U32] = {"U32", 32, -1},
    [VX_ST_I32] = {"I32", 32, KN_I32},    [VX_ST_U64] = {"U64", 64, -1},
    [VX_ST_I64] = {"I64", 64, KN_I64},    [VX_ST_F16] = {"F16", 16, KN_F16},
    [VX_ST_BF16] = {"BF16", 16, KN_BF16}, [VX_ST_F32] = {"F32", 32, KN_F32},
    [VX_ST_F64] = {"F64", 64, KN_F64},    [VX_ST_C64] = {"C64", 64, -1},
    [VX_ST_F8_E4M3] = {"F8_E4M3", 8, -1}, [VX_ST_F8_E5M2] = {"F8_E5M2", 8, -1},
    [VX_ST_F8_E8M0] = {"F8_E8M0", 8, -1}, [VX_ST_F6_E2M3] = {"F6_E2M3", 6, -1},
    [VX_ST_F6_E3M2] = {"F6_E3M2", 6, -1}, [VX_ST_F4] = {"F4", 4, -1},
};

const char *vx_st_dtype_name(vx_st_dtype d) {
    return (unsigned)d < VX_ST_DTYPE_COUNT ? st_dtypes[d].name : "unknown";
}
int vx_st_dtype_bits(vx_st_dtype d) {
    return (unsigned)d < VX_ST_DTYPE_COUNT ? st_dtypes[d].bits : 0;
}
int vx_st_dtype_kn(vx_st_dtype d) {
    return (unsigned)d < VX_ST_DTYPE_COUNT ? st_dtypes[d].kn : -1;
}

static int dtype_from_name(const char *s) {
    for (int d = 0; d < VX_ST_DTYPE_COUNT; d++)
        if (!strcmp(st_dtypes[d].name, s)) return d;
    return -1;
}

/* ---- one file ----------------------------------------------------------------------------- */

struct vx_st_file {
    char *path;
    vx_map map;
    vx_file_id id;
    const uint8_t *base; /* map.p */
    uint64_t size;
    size_t n;
    vx_st_tensor *tensors; /* sorted by name */
    size_t n_meta;
    char **meta_kv; /* key0, value0, key1, value1, ... */
};

static void file_free(vx_st_file *f) {
    if (!f) return;
    for (size_t i = 0; i < f->n; i++) free((char *)f->tensors[i].name);
    free(f->tensors);
    for (size_t i = 0; i < 2 * f->n_meta; i++) free(f->meta_kv[i]);
    free(f->meta_kv);
    vx_unmap(&f->map);
    free(f->path);
    free(f);
}

void vx_st_close(vx_st_file *f) {
    file_free(f);
}

/* Reads a non-negative JSON integer. */
static bool json_u64(const json_t *v, uint64_t max, uint64_t *out) {
    if (!json_is_integer(v)) return false;
    json_int_t x = json_integer_value(v);
    if (x < 0 || (uint64_t)x > max) return false;
    *out = (uint64_t)x;
    return true;
}

static int parse_meta(vx_st_file *f, json_t *obj, mw_err *err) {
    if (!json_is_object(obj)) return mw_errf(err, "%s: __metadata__ is not a JSON object", f->path);
    size_t n = json_object_size(obj);
    f->meta_kv = calloc(2 * n + 1, sizeof *f->meta_kv);
    if (!f->meta_kv) return mw_errf(err, "%s: out of memory", f->path);
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        if (!json_is_string(v))
            return mw_errf(err, "%s: __metadata__ value of '%s' is not a string", f->path, key);
        char *k = strdup(key), *s = strdup(json_string_value(v));
        f->meta_kv[2 * f->n_meta] = k;
        f->meta_kv[2 * f->n_meta + 1] = s;
        f->n_meta++;
        if (!k || !s) return mw_errf(err, "%s: out of memory", f->path);
    }
    return 0;
}

/* Offset of the first control character (C0, DEL, or C1 in its UTF-8 form) in s, or -1. Names
 * end up in messages, listings and terminals, where such bytes would act instead of print. */
static long control_char(const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f || (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f))
            return (long)(p - (const unsigned char *)s);
    return -1;
}

/* Fills t from one header entry; data_size is the size of the data area. */
static int parse_entry(const vx_st_file *f, const char *name, json_t *e, uint64_t data_start,
                       uint64_t data_size, vx_st_tensor *t, mw_err *err) {
    if (!*name) return mw_errf(err, "%s: a tensor has an empty name", f->path);
    long bad = control_char(name);
    if (bad >= 0) {
        unsigned cp = (unsigned char)name[bad];
        if (cp == 0xc2) cp = (unsigned char)name[bad + 1];
        return mw_errf(err,
                       "%s: the tensor name starting '%.*s' has control character U+%04X at "
                       "byte %ld",
                       f->path, (int)(bad < 64 ? bad : 64), name, cp, bad);
    }
    if (!json_is_object(e))
        return mw_errf(err, "%s: tensor '%s': header entry is not a JSON object", f->path, name);
    json_t *dt = json_object_get(e, "dtype");
    json_t *shape = json_object_get(e, "shape");
    json_t *offs = json_object_get(e, "data_offsets");
    if (!json_is_string(dt))
        return mw_errf(err, "%s: tensor '%s': missing or non-string dtype", f->path, name);
    int d = dtype_from_name(json_string_value(dt));
    if (d < 0)
        return mw_errf(err, "%s: tensor '%s': unknown dtype '%s'", f->path, name,
                       json_string_value(dt));
    t->dtype = (vx_st_dtype)d;
    if (!json_is_array(shape))
        return mw_errf(err, "%s: tensor '%s': missing or non-array shape", f->path, name);
    size_t nd = json_array_size(shape);
    if (nd > VX_ST_MAX_DIMS)
        return mw_errf(err, "%s: tensor '%s': rank %zu exceeds %d", f->path, name, nd,
                       VX_ST_MAX_DIMS);
    t->n_dims = (int)nd;
    uint64_t count = 1;
    for (size_t i = 0; i < nd; i++) {
        uint64_t dim;
        if (!json_u64(json_array_get(shape, i), INT64_MAX, &dim))
            return mw_errf(err, "%s: tensor '%s': shape[%zu] is not a non-negative integer",
                           f->path, name, i);
        t->shape[i] = (int64_t)dim;
        if (__builtin_mul_overflow(count, dim, &count))
            return mw_errf(err, "%s: tensor '%s': element count overflows", f->path, name);
    }
    for (size_t i = nd; i < VX_ST_MAX_DIMS; i++) t->shape[i] = 1;
    t->n_elements = count;
    uint64_t bits;
    if (__builtin_mul_overflow(count, (uint64_t)st_dtypes[d].bits, &bits))
        return mw_errf(err, "%s: tensor '%s': byte size overflows", f->path, name);
    if (bits % 8)
        return mw_errf(err, "%s: tensor '%s': %llu elements of %s do not fill whole bytes", f->path,
                       name, (unsigned long long)count, st_dtypes[d].name);
    uint64_t want = bits / 8;
    uint64_t begin, end;
    if (!json_is_array(offs) || json_array_size(offs) != 2 ||
        !json_u64(json_array_get(offs, 0), UINT64_MAX, &begin) ||
        !json_u64(json_array_get(offs, 1), UINT64_MAX, &end))
        return mw_errf(err, "%s: tensor '%s': data_offsets is not a pair of non-negative integers",
                       f->path, name);
    if (begin > end || end > data_size)
        return mw_errf(err,
                       "%s: tensor '%s': data_offsets [%llu, %llu) out of range (data area is %llu "
                       "bytes)",
                       f->path, name, (unsigned long long)begin, (unsigned long long)end,
                       (unsigned long long)data_size);
    if (end - begin != want)
        return mw_errf(err,
                       "%s: tensor '%s': data_offsets span %llu bytes but shape and dtype %s need "
                       "%llu",
                       f->path, name, (unsigned long long)(end - begin), st_dtypes[d].name,
                       (unsigned long long)want);
    t->offset = data_start + begin;
    t->nbytes = want;
    t->data = f->base + t->offset;
    return 0;
}

static int by_offset(const void *a, const void *b) {
    const vx_st_tensor *x = *(const vx_st_tensor *const *)a, *y = *(const vx_st_tensor *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const vx_st_tensor *)a)->name, ((const vx_st_tensor *)b)->name);
}

static int check_overlaps(const vx_st_file *f, mw_err *err) {
    if (f->n < 2) return 0;
    const vx_st_tensor **order = malloc(f->n * sizeof *order);
    if (!order) return mw_errf(err, "%s: out of memory", f->path);
    for (size_t i = 0; i < f->n; i++) order[i] = &f->tensors[i];
    qsort(order, f->n, sizeof *order, by_offset);
    const vx_st_tensor *prev = NULL; /* the non-empty tensor reaching furthest so far */
    int rc = 0;
    for (size_t i = 0; i < f->n && !rc; i++) {
        const vx_st_tensor *t = order[i];
        if (!t->nbytes) continue;
        if (prev && t->offset < prev->offset + prev->nbytes)
            rc = mw_errf(err, "%s: tensors '%s' and '%s' overlap", f->path, prev->name, t->name);
        if (!prev || t->offset + t->nbytes > prev->offset + prev->nbytes) prev = t;
    }
    free(order);
    return rc;
}

static int parse_header(vx_st_file *f, mw_err *err) {
    if (f->size < 8)
        return mw_errf(err, "%s: %llu bytes is too short for a safetensors header", f->path,
                       (unsigned long long)f->size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | f->base[i];
    if (hlen > VX_ST_MAX_HEADER)
        return mw_errf(err, "%s: header length %llu exceeds the %u-byte limit", f->path,
                       (unsigned long long)hlen, VX_ST_MAX_HEADER);
    if (hlen > f->size - 8)
        return mw_errf(err, "%s: header length %llu runs past the end of the file (%llu bytes)",
                       f->path, (unsigned long long)hlen, (unsigned long long)f->size);
    /* an entry is an object holding two arrays and some 10 keys and values in 49 bytes or more */
    static const vx_json_limits lim = {
        .max_depth = 8, .bytes_per_object = 32, .bytes_per_array = 16, .bytes_per_item = 4};
    char what[MW_ERR_MAX];
    snprintf(what, sizeof what, "%s: header", f->path);
    json_t *root = vx_json_parse((const char *)f->base + 8, hlen, what, &lim, err);
    if (!root) return -1;
    int rc = 0;
    if (!json_is_object(root)) {
        rc = mw_errf(err, "%s: header is not a JSON object", f->path);
        goto out;
    }
    size_t n = json_object_size(root);
    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    if (!f->tensors) {
        rc = mw_errf(err, "%s: out of memory", f->path);
        goto out;
    }
    uint64_t data_start = 8 + hlen, data_size = f->size - data_start;
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (!strcmp(key, "__metadata__")) {
            if ((rc = parse_meta(f, v, err))) goto out;
            continue;
        }
        vx_st_tensor *t = &f->tensors[f->n];
        if ((rc = parse_entry(f, key, v, data_start, data_size, t, err))) goto out;
        if (!(t->name = strdup(key))) {
            rc = mw_errf(err, "%s: out of memory", f->path);
            goto out;
        }
        f->n++;
    }
    if ((rc = check_overlaps(f, err))) goto out;
    qsort(f->tensors, f->n, sizeof *f->tensors, by_name);
out:
    json_decref(root);
    return rc;
}

int vx_st_open(const char *path, vx_st_file **out, mw_err *err) {
    *out = NULL;
    vx_st_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return mw_errf(err, "%s: out of memory", path);
    }
    int rc = vx_map_file(path, 0, &f->map, &f->id, err);
    f->base = f->map.p;
    f->size = f->map.len;
    if (!rc) rc = parse_header(f, err);
    if (rc) {
        file_free(f);
        return -1;
    }
    *out = f;
    return 0;
}

const char *vx_st_path(const vx_st_file *f) {
    return f->path;
}
uint64_t vx_st_file_size(const vx_st_file *f) {
    return f->size;
}
const uint8_t *vx_st_base(const vx_st_file *f) {
    return f->base;
}
const vx_file_id *vx_st_file_id(const vx_st_file *f) {
    return &f->id;
}
size_t vx_st_n_tensors(const vx_st_file *f) {
    return f->n;
}
const vx_st_tensor *vx_st_tensor_at(const vx_st_file *f, size_t i) {
    return i < f->n ? &f->tensors[i] : NULL;
}

const vx_st_tensor *vx_st_find(const vx_st_file *f, const char *name) {
    vx_st_tensor key = {.name = name};
    return bsearch(&key, f->tensors, f->n, sizeof key, by_name);
}

size_t vx_st_n_meta(const vx_st_file *f) {
    return f->n_meta;
}
const char *vx_st_meta_key(const vx_st_file *f, size_t i) {
    return i < f->n_meta ? f->meta_kv[2 * i] : NULL;
}
const char *vx_st_meta_value(const vx_st_file *f, size_t i) {
    return i < f->n_meta ? f->meta_kv[2 * i + 1] : NULL;
}
const char *vx_st_meta_get(const vx_st_file *f, const char *key) {
    for (size_t i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta_kv[2 * i], key)) return f->meta_kv[2 * i + 1];
    return NULL;
}

/* ---- checkpoint sets ---------------------------------------------------------------------- */

#define ST_MAX_FILES      65536
#define ST_MAX_INDEX_SIZE (64u << 20)

typedef struct set_entry {
    const vx_st_tensor *t;
    int file;
} set_entry;

struct vx_st_set {
    vx_confine conf; /* the files the directory may contribute */
    size_t n_files;
    vx_st_file **files;
    char **names;
    size_t n;
    set_entry *ents; /* sorted by tensor name */
};

void vx_st_set_close(vx_st_set *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n_files; i++) {
        vx_st_close(s->files[i]);
        free(s->names[i]);
    }
    free(s->files);
    free(s->names);
    free(s->ents);
    vx_confine_free(&s->conf);
    free(s);
}

size_t vx_st_set_n_files(const vx_st_set *s) {
    return s->n_files;
}
const vx_st_file *vx_st_set_file(const vx_st_set *s, size_t i) {
    return i < s->n_files ? s->files[i] : NULL;
}
const char *vx_st_set_file_name(const vx_st_set *s, size_t i) {
    return i < s->n_files ? s->names[i] : NULL;
}
size_t vx_st_set_n_tensors(const vx_st_set *s) {
    return s->n;
}

const vx_st_tensor *vx_st_set_tensor_at(const vx_st_set *s, size_t i, int *file) {
    if (i >= s->n) return NULL;
    if (file) *file = s->ents[i].file;
    return s->ents[i].t;
}

static int ent_by_name(const void *a, const void *b) {
    return strcmp(((const set_entry *)a)->t->name, ((const set_entry *)b)->t->name);
}

long vx_st_set_lookup(const vx_st_set *s, const char *name) {
    vx_st_tensor kt = {.name = name};
    set_entry key = {.t = &kt};
    const set_entry *e = bsearch(&key, s->ents, s->n, sizeof key, ent_by_name);
    return e ? (long)(e - s->ents) : -1;
}

const vx_st_tensor *vx_st_set_find(const vx_st_set *s, const char *name, int *file) {
    long i = vx_st_set_lookup(s, name);
    return i < 0 ? NULL : vx_st_set_tensor_at(s, (size_t)i, file);
}

/* Appends NAME (a file name inside dir) to the set and opens it. */
static int set_add_file(vx_st_set *s, const char *dir, const char *name, mw_err *err) {
    if (s->n_files >= ST_MAX_FILES)
        return mw_errf(err, "%s: more than %d safetensors files", dir, ST_MAX_FILES);
    size_t cap = s->n_files + 1;
    vx_st_file **files = realloc(s->files, cap * sizeof *files);
    if (files) s->files = files;
    char **names = realloc(s->names, cap * sizeof *names);
    if (names) s->names = names;
    char *path = malloc(strlen(dir) + strlen(name) + 2);
    char *nm = strdup(name);
    if (!files || !names || !path || !nm) {
        free(path);
        free(nm);
        return mw_errf(err, "%s: out of memory", dir);
    }
    sprintf(path, "%s/%s", dir, name);
    vx_st_file *f;
    int rc = vx_confine_check(&s->conf, path, err);
    if (rc == 0) rc = vx_st_open(path, &f, err);
    free(path);
    if (rc) {
        free(nm);
        return -1;
    }
    s->files[s->n_files] = f;
    s->names[s->n_files] = nm;
    s->n_files++;
    return 0;
}

static bool has_suffix(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int set_scan_dir(vx_st_set *s, const char *dir, mw_err *err) {
    DIR *d = opendir(dir);
    if (!d) return mw_errf(err, "%s: cannot open directory: %s", dir, strerror(errno));
    char **names = NULL;
    size_t n = 0;
    int rc = 0;
    struct dirent *de;
    while (!rc && (de = readdir(d))) {
        if (de->d_name[0] == '.' || !has_suffix(de->d_name, ".safetensors")) continue;
        char **grown = n < ST_MAX_FILES ? realloc(names, (n + 1) * sizeof *names) : NULL;
        if (!grown) {
            rc = mw_errf(err, "%s: too many safetensors files", dir);
            break;
        }
        names = grown;
        if (!(names[n] = strdup(de->d_name)))
            rc = mw_errf(err, "%s: out of memory", dir);
        else
            n++;
    }
    closedir(d);
    if (!rc && !n) rc = mw_errf(err, "%s: no *.safetensors file and no %s", dir, VX_ST_INDEX_NAME);
    if (!rc) qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n && !rc; i++) rc = set_add_file(s, dir, names[i], err);
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return rc;
}

/* A shard name from the index must name a file inside the directory. */
static bool plain_file_name(const char *s) {
    return *s && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

static long set_file_index(const vx_st_set *s, const char *name) {
    for (size_t i = 0; i < s->n_files; i++)
        if (!strcmp(s->names[i], name)) return (long)i;
    return -1;
}

static int set_from_index(vx_st_set *s, const char *dir, const char *index_path, mw_err *err) {
    size_t len;
    char *text = vx_read_file(index_path, ST_MAX_INDEX_SIZE, &len, err);
    if (!text) return -1;
    /* a few objects and arrays, and a tensor name and a file name per entry */
    static const vx_json_limits lim = {
        .max_depth = 8, .bytes_per_object = 4096, .bytes_per_array = 4096, .bytes_per_item = 16};
    json_t *root = vx_json_parse(text, len, index_path, &lim, err);
    free(text);
    if (!root) return -1;
    int rc = 0;
    json_t *wm = json_is_object(root) ? json_object_get(root, "weight_map") : NULL;
    const char *key;
    json_t *v;
    if (!json_is_object(root))
        rc = mw_errf(err, "%s: not a JSON object", index_path);
    else if (!json_is_object(wm))
        rc = mw_errf(err, "%s: missing or non-object weight_map", index_path);
    else if (json_object_size(wm) == 0)
        rc = mw_errf(err, "%s: weight_map is empty", index_path);
    if (rc) goto out;
    /* the shard files, in order of first mention */
    json_object_foreach(wm, key, v) {
        if (!json_is_string(v) || !plain_file_name(json_string_value(v))) {
            rc = mw_errf(err, "%s: weight_map entry '%s' does not name a file of the directory",
                         index_path, key);
            goto out;
        }
        const char *fname = json_string_value(v);
        if (set_file_index(s, fname) < 0 && (rc = set_add_file(s, dir, fname, err))) {
            mw_err_wrap(err, "%s names shard %s", index_path, fname);
            goto out;
        }
    }
    /* every mapped tensor is in its shard */
    json_object_foreach(wm, key, v) {
        long fi = set_file_index(s, json_string_value(v));
        if (!vx_st_find(s->files[fi], key)) {
            rc = mw_errf(err, "%s: tensor '%s' is mapped to %s, which does not hold it", index_path,
                         key, s->names[fi]);
            goto out;
        }
    }
    /* every shard tensor is mapped to its shard */
    for (size_t i = 0; i < s->n_files; i++) {
        for (size_t j = 0; j < vx_st_n_tensors(s->files[i]); j++) {
            const char *tn = vx_st_tensor_at(s->files[i], j)->name;
            json_t *m = json_object_get(wm, tn);
            if (!m) {
                rc = mw_errf(err, "%s: shard %s holds tensor '%s', which the index does not list",
                             index_path, s->names[i], tn);
                goto out;
            }
            if (strcmp(json_string_value(m), s->names[i])) {
                rc = mw_errf(err, "%s: tensor '%s' is in shard %s but the index maps it to %s",
                             index_path, tn, s->names[i], json_string_value(m));
                goto out;
            }
        }
    }
out:
    json_decref(root);
    return rc;
}

static int set_build_entries(vx_st_set *s, const char *dir, mw_err *err) {
    size_t n = 0;
    for (size_t i = 0; i < s->n_files; i++) n += vx_st_n_tensors(s->files[i]);
    s->ents = calloc(n ? n : 1, sizeof *s->ents);
    if (!s->ents) return mw_errf(err, "%s: out of memory", dir);
    for (size_t i = 0; i < s->n_files; i++)
        for (size_t j = 0; j < vx_st_n_tensors(s->files[i]); j++)
            s->ents[s->n++] = (set_entry){vx_st_tensor_at(s->files[i], j), (int)i};
    qsort(s->ents, s->n, sizeof *s->ents, ent_by_name);
    for (size_t i = 1; i < s->n; i++)
        if (!strcmp(s->ents[i].t->name, s->ents[i - 1].t->name))
            return mw_errf(err, "%s: tensor '%s' appears in both %s and %s", dir,
                           s->ents[i].t->name, s->names[s->ents[i - 1].file],
                           s->names[s->ents[i].file]);
    return 0;
}

int vx_st_set_open(const char *dir, vx_st_set **out, mw_err *err) {
    *out = NULL;
    vx_st_set *s = calloc(1, sizeof *s);
    char *index = malloc(strlen(dir) + sizeof VX_ST_INDEX_NAME + 1);
    if (!s || !index) {
        free(s);
        free(index);
        return mw_errf(err, "%s: out of memory", dir);
    }
    sprintf(index, "%s/%s", dir, VX_ST_INDEX_NAME);
    struct stat st;
    int rc = vx_confine_init(&s->conf, dir, err);
    if (rc == 0 && lstat(index, &st) == 0)
        rc = vx_confine_check(&s->conf, index, err) || set_from_index(s, dir, index, err) ? -1 : 0;
    else if (rc == 0)
        rc = set_scan_dir(s, dir, err);
    free(index);
    if (!rc) rc = set_build_entries(s, dir, err);
    if (rc) {
        vx_st_set_close(s);
        return -1;
    }
    *out = s;
    return 0;
}
