/* vindex/vx_gguf_write.c — the GGUF v3 writer and the metadata encoder it shares with the model
 * fingerprint.
 *
 * Tensors are laid out in the order they were added, each at a multiple of the alignment. Data is
 * either copied at add time or produced by a fill callback while the file is written, in pieces of
 * whole rows, so a model larger than memory streams straight to disk. */
#include "vindex/vx_gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vindex/vx_gguf_internal.h"
#include "vindex/vx_strmap.h"

/* llama.cpp rejects tensor names of GGML_MAX_NAME (64) bytes or more. */
#define GGML_MAX_NAME 64
/* Size of the pieces a fill callback produces (rounded to whole rows). */
#define FILL_CHUNK (8u << 20)

/* ---- encoding ------------------------------------------------------------------------------ */

void vx__buf_put(vx__buf *b, const void *d, size_t n) {
    if (b->oom || n == 0) return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n) cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

void vx__buf_u32(vx__buf *b, uint32_t v) {
    vx__buf_put(b, &v, 4);
}
void vx__buf_u64(vx__buf *b, uint64_t v) {
    vx__buf_put(b, &v, 8);
}

void vx__buf_str(vx__buf *b, const char *s, uint64_t len) {
    vx__buf_u64(b, len);
    vx__buf_put(b, s, len);
}

void vx__buf_free(vx__buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* The value without its type tag (arrays carry their element type inline). */
static void put_val(vx__buf *b, const vx__val *v) {
    if (v->type == VX_STR) {
        vx__buf_str(b, v->u.str.s, v->u.str.len);
        return;
    }
    if (v->type != VX_ARR) {
        vx__buf_put(b, v->u.raw, vx__vtype_size(v->type));
        return;
    }
    vx__buf_u32(b, v->u.arr.elem);
    vx__buf_u64(b, v->u.arr.n);
    if (v->u.arr.elem == VX_STR) {
        for (uint64_t i = 0; i < v->u.arr.n; i++) {
            uint64_t len;
            const char *s = vx__val_arr_str(v, i, &len);
            vx__buf_str(b, s, len);
        }
    } else if (v->u.arr.elem == VX_ARR) {
        const vx__val *items = v->u.arr.data;
        for (uint64_t i = 0; i < v->u.arr.n; i++) put_val(b, &items[i]);
    } else {
        vx__buf_put(b, v->u.arr.data, v->u.arr.n * vx__vtype_size(v->u.arr.elem));
    }
}

void vx__gguf_put_kv(vx__buf *b, const char *key, const vx__val *v) {
    vx__buf_str(b, key, strlen(key));
    vx__buf_u32(b, v->type);
    put_val(b, v);
}

/* ---- writer -------------------------------------------------------------------------------- */

typedef struct wtensor {
    char *name;
    kn_type type;
    int n_dims;
    int64_t ne[VX_GGUF_MAX_DIMS];
    uint64_t nbytes;
    void *data; /* copied at add time, or NULL when filled */
    vx_gguf_fill_fn fill;
    void *ctx;
} wtensor;

struct vx_gguf_writer {
    uint32_t alignment;
    vx_meta *meta;
    wtensor *t;
    size_t n, cap;
    vx_strmap names;
};

vx_gguf_writer *vx_gguf_writer_new(uint32_t alignment) {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) return NULL;
    vx_gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->alignment = alignment;
    if (!(w->meta = vx_meta_new())) {
        free(w);
        return NULL;
    }
    return w;
}

void vx_gguf_writer_free(vx_gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n; i++) {
        free(w->t[i].name);
        free(w->t[i].data);
    }
    free(w->t);
    vx_strmap_free(&w->names);
    vx_meta_free(w->meta);
    free(w);
}

vx_meta *vx_gguf_writer_meta(vx_gguf_writer *w) {
    return w->meta;
}

static wtensor *add_tensor(vx_gguf_writer *w, const char *name, kn_type type, int n_dims,
                           const int64_t *ne, mw_err *err) {
    size_t len = strlen(name);
    if (len == 0 || len >= GGML_MAX_NAME) {
        mw_errf(err, "GGUF writer: tensor name '%s' must be 1..%d bytes", name, GGML_MAX_NAME - 1);
        return NULL;
    }
    int64_t full[VX_GGUF_MAX_DIMS] = {1, 1, 1, 1};
    for (int d = 0; d < n_dims && d < VX_GGUF_MAX_DIMS; d++) full[d] = ne[d];
    char why[120];
    uint64_t nbytes;
    if (kn_traits(type) && kn_traits(type)->planar) {
        mw_errf(err, "GGUF writer: tensor '%s': %s is ours, not a GGUF type", name,
                kn_type_name(type));
        return NULL;
    }
    if (vx__tensor_nbytes(type, n_dims, full, &nbytes, why, sizeof why)) {
        mw_errf(err, "GGUF writer: tensor '%s' %s", name, why);
        return NULL;
    }
    if (vx_strmap_get(&w->names, name) >= 0) {
        mw_errf(err, "GGUF writer: duplicate tensor name '%s'", name);
        return NULL;
    }
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        wtensor *t = realloc(w->t, cap * sizeof *t);
        if (!t) goto oom;
        w->t = t;
        w->cap = cap;
    }
    wtensor *t = &w->t[w->n];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(name))) goto oom;
    if (vx_strmap_put(&w->names, t->name, w->n) != 0) {
        free(t->name);
        goto oom;
    }
    t->type = type;
    t->n_dims = n_dims;
    memcpy(t->ne, full, sizeof full);
    t->nbytes = nbytes;
    w->n++;
    return t;
oom:
    mw_errf(err, "GGUF writer: out of memory adding '%s'", name);
    return NULL;
}

int vx_gguf_writer_add(vx_gguf_writer *w, const char *name, kn_type type, int n_dims,
                       const int64_t *ne, const void *data, mw_err *err) {
    wtensor *t = add_tensor(w, name, type, n_dims, ne, err);
    if (!t) return -1;
    t->data = malloc(t->nbytes ? t->nbytes : 1);
    if (!t->data) return mw_errf(err, "GGUF writer: out of memory copying '%s'", name);
    memcpy(t->data, data, t->nbytes);
    return 0;
}

int vx_gguf_writer_add_fill(vx_gguf_writer *w, const char *name, kn_type type, int n_dims,
                            const int64_t *ne, vx_gguf_fill_fn fill, void *ctx, mw_err *err) {
    wtensor *t = add_tensor(w, name, type, n_dims, ne, err);
    if (!t) return -1;
    t->fill = fill;
    t->ctx = ctx;
    return 0;
}

static int write_all(int fd, const void *p, size_t n, const char *path, mw_err *err) {
    const uint8_t *c = p;
    while (n > 0) {
        ssize_t k = write(fd, c, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return mw_errf(err, "%s: write failed: %s", path, strerror(errno));
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

static uint64_t pad_to(uint64_t x, uint64_t a) {
    return (x + a - 1) / a * a;
}

/* The header: magic, version, counts, metadata (general.alignment added when not the default) and
 * the tensor directory, padded to the alignment. */
static int build_header(vx_gguf_writer *w, vx__buf *h, mw_err *err) {
    int64_t a;
    int rc = vx_meta_get_i64(w->meta, "general.alignment", &a, err);
    if (rc < 0) return -1;
    if (rc > 0 && a != (int64_t)w->alignment)
        return mw_errf(err, "GGUF writer: general.alignment %lld disagrees with the writer's %u",
                       (long long)a, w->alignment);
    if (rc == 0 && w->alignment != 32 &&
        vx_meta_set_u32(w->meta, "general.alignment", w->alignment))
        return mw_errf(err, "GGUF writer: out of memory");
    vx__buf_put(h, "GGUF", 4);
    vx__buf_u32(h, 3);
    vx__buf_u64(h, w->n);
    vx__buf_u64(h, vx_meta_count(w->meta));
    for (size_t i = 0; i < vx_meta_count(w->meta); i++)
        vx__gguf_put_kv(h, vx_meta_key(w->meta, i), vx__meta_val(w->meta, i));
    uint64_t off = 0;
    for (size_t i = 0; i < w->n; i++) {
        const wtensor *t = &w->t[i];
        vx__buf_str(h, t->name, strlen(t->name));
        vx__buf_u32(h, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++) vx__buf_u64(h, (uint64_t)t->ne[d]);
        vx__buf_u32(h, (uint32_t)t->type);
        vx__buf_u64(h, off);
        off = pad_to(off + t->nbytes, w->alignment);
    }
    static const uint8_t zeros[64];
    size_t pad = pad_to(h->n, w->alignment) - h->n;
    while (pad > 0) {
        size_t k = pad < sizeof zeros ? pad : sizeof zeros;
        vx__buf_put(h, zeros, k);
        pad -= k;
    }
    if (h->oom) return mw_errf(err, "GGUF writer: out of memory building the header");
    return 0;
}

/* Streams one filled tensor in pieces of whole rows. */
static int write_filled(int fd, const wtensor *t, uint8_t *buf, size_t buf_len, const char *path,
                        mw_err *err) {
    uint64_t row = kn_row_size(t->type, t->ne[0]);
    uint64_t piece = row == 0 || row >= buf_len ? buf_len : buf_len / row * row;
    for (uint64_t done = 0; done < t->nbytes;) {
        uint64_t n = t->nbytes - done < piece ? t->nbytes - done : piece;
        if (t->fill(t->ctx, buf, n, err) != 0)
            return mw_err_wrap(err, "%s: producing tensor '%s'", path, t->name);
        if (write_all(fd, buf, n, path, err)) return -1;
        done += n;
    }
    return 0;
}

int vx_gguf_writer_write(vx_gguf_writer *w, const char *path, mw_err *err) {
    vx__buf h = {0};
    if (build_header(w, &h, err) != 0) {
        vx__buf_free(&h);
        return -1;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        vx__buf_free(&h);
        return mw_errf(err, "%s: cannot create: %s", path, strerror(errno));
    }
    uint64_t max_row = 0;
    for (size_t i = 0; i < w->n; i++) {
        uint64_t r = kn_row_size(w->t[i].type, w->t[i].ne[0]);
        if (w->t[i].fill && r > max_row) max_row = r;
    }
    size_t buf_len = max_row > FILL_CHUNK ? (size_t)max_row : FILL_CHUNK;
    uint8_t *buf = malloc(buf_len);
    int rc = buf ? write_all(fd, h.p, h.n, path, err) : mw_errf(err, "%s: out of memory", path);
    static const uint8_t zeros[64];
    for (size_t i = 0; i < w->n && rc == 0; i++) {
        const wtensor *t = &w->t[i];
        rc = t->fill ? write_filled(fd, t, buf, buf_len, path, err)
                     : write_all(fd, t->data, t->nbytes, path, err);
        uint64_t pad = pad_to(t->nbytes, w->alignment) - t->nbytes;
        while (rc == 0 && pad > 0) {
            size_t k = pad < sizeof zeros ? pad : sizeof zeros;
            rc = write_all(fd, zeros, k, path, err);
            pad -= k;
        }
    }
    free(buf);
    vx__buf_free(&h);
    if (close(fd) != 0 && rc == 0) rc = mw_errf(err, "%s: close failed: %s", path, strerror(errno));
    if (rc != 0) unlink(path);
    return rc;
}
