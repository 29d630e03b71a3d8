/* vindex/vx_input_gguf.c — a GGUF file as an extract input: every tensor passes through under its
 * own name and bytes (no relayout), so every source tensor is consumed and none is dropped. */
#include <stdlib.h>
#include <string.h>

#include "kernels/kn.h"

#include "vindex/vx_gguf.h"
#include "vindex/vx_input.h"
#include "vindex/vx_synth.h"

typedef struct gguf_in {
    vx_gguf *g;
    vx_input_file file;
    vx_input_range *ranges;
} gguf_in;

static int read_tensor(const vx_input *in, const vx_input_tensor *t, uint64_t off, void *dst,
                       uint64_t len, mw_err *err) {
    const vx_tensor *src = t->impl;
    if (off > t->nbytes || len > t->nbytes - off)
        return mw_errf(err, "%s: tensor '%s': read of %llu bytes at %llu is outside its %llu bytes",
                       in->files[0].path, t->name, (unsigned long long)len, (unsigned long long)off,
                       (unsigned long long)t->nbytes);
    const uint8_t *p = (const uint8_t *)src->data + off;
    memcpy(dst, p, len);
    vx_map_release(p, len); /* extract reads each byte once: keep its resident size small */
    return 0;
}

static void close_gguf(vx_input *in) {
    gguf_in *gi = in->impl;
    if (gi) {
        vx_gguf_close(gi->g);
        free(gi->ranges);
        free(gi);
    }
    vx_meta_free(in->meta);
    free(in->tensors);
    free(in);
}

int vx_input_open_gguf(const char *path, vx_input **out, mw_err *err) {
    *out = NULL;
    vx_input *in = calloc(1, sizeof *in);
    gguf_in *gi = calloc(1, sizeof *gi);
    if (!in || !gi) {
        free(in);
        free(gi);
        return mw_errf(err, "%s: out of memory", path);
    }
    in->kind = "gguf";
    in->impl = gi;
    in->close = close_gguf;
    if (vx_gguf_open(path, &gi->g, err)) goto fail;
    const char *slash = strrchr(vx_gguf_path(gi->g), '/');
    gi->file.path = vx_gguf_path(gi->g);
    gi->file.name = slash ? slash + 1 : gi->file.path;
    gi->file.size = vx_gguf_file_size(gi->g);
    gi->file.data = vx_gguf_base(gi->g);
    gi->file.id = *vx_gguf_file_id(gi->g);
    in->files = &gi->file;
    in->n_files = 1;
    if (!(in->meta = vx_meta_clone(vx_gguf_meta(gi->g)))) goto oom;
    size_t n = vx_gguf_n_tensors(gi->g);
    in->tensors = calloc(n ? n : 1, sizeof *in->tensors);
    gi->ranges = calloc(n ? n : 1, sizeof *gi->ranges);
    if (!in->tensors || !gi->ranges) goto oom;
    in->n_tensors = n;
    for (size_t i = 0; i < n; i++) {
        const vx_tensor *t = vx_gguf_tensor(gi->g, i);
        vx_input_tensor *it = &in->tensors[i];
        gi->ranges[i] = (vx_input_range){0, t->name, t->offset, t->nbytes};
        it->name = t->name;
        it->type = t->type;
        it->n_dims = t->n_dims;
        memcpy(it->ne, t->ne, sizeof it->ne);
        it->nbytes = t->nbytes;
        it->n_ranges = 1;
        it->ranges = &gi->ranges[i];
        it->read = read_tensor;
        it->impl = (void *)t;
    }
    *out = in;
    return 0;
oom:
    mw_errf(err, "%s: out of memory", path);
fail:
    close_gguf(in);
    return -1;
}

/* ---- any input written as GGUF ------------------------------------------------------------- */

typedef struct write_progress {
    vx_progress_fn fn;
    void *ctx;
    uint64_t done, total;
} write_progress;

typedef struct tensor_fill {
    const vx_input *in;
    const vx_input_tensor *t;
    uint64_t pos;
    write_progress *wp;
} tensor_fill;

static int fill_from_input(void *ctx, void *dst, uint64_t nbytes, mw_err *err) {
    tensor_fill *f = ctx;
    if (f->t->read(f->in, f->t, f->pos, dst, nbytes, err)) return -1;
    f->pos += nbytes;
    f->wp->done += nbytes;
    if (f->wp->fn) f->wp->fn(f->wp->ctx, f->wp->done, f->wp->total);
    return 0;
}

/* A planar MXFP4 tensor (mxfp4_ct, which no GGUF holds) written as ggml's block_mxfp4, as
 * llama.cpp's converter repacks it: the same values, output rows in order (row i: matrix
 * i / rows, its row i % rows), each read as its codes and its scale bytes. */
static int fill_planar(void *ctx, void *dst, uint64_t nbytes, mw_err *err) {
    tensor_fill *f = ctx;
    const vx_input_tensor *t = f->t;
    const int64_t cols = t->ne[0], rows = t->ne[1];
    const uint64_t rs = kn_row_size(KN_MXFP4, cols), codes = (uint64_t)(rows * cols / 2);
    const uint64_t mat = (uint64_t)rows * rs;
    uint8_t *one = malloc(rs), *out = dst;
    if (!one) return mw_errf(err, "%s: out of memory", t->name);
    int rc = 0;
    for (uint64_t done = 0; rc == 0 && done < nbytes; done += rs, out += rs) {
        const uint64_t i = (f->pos + done) / rs, m = i / (uint64_t)rows, r = i % (uint64_t)rows;
        rc =
            t->read(f->in, t, m * mat + r * (uint64_t)(cols / 2), one, (uint64_t)(cols / 2), err) ||
                    t->read(f->in, t, m * mat + codes + r * (uint64_t)(cols / 32), one + cols / 2,
                            (uint64_t)(cols / 32), err)
                ? -1
                : 0;
        const kn_mat row = {
            .type = KN_MXFP4_CT, .rows = 1, .cols = cols, .row_bytes = rs, .data = one};
        if (rc == 0) kn_mxfp4_ct_rows_to_blocks(&row, 0, 1, out);
    }
    free(one);
    f->pos += nbytes;
    f->wp->done += nbytes;
    if (f->wp->fn) f->wp->fn(f->wp->ctx, f->wp->done, f->wp->total);
    return rc;
}

int vx_input_write_gguf(const vx_input *in, const char *path, vx_progress_fn progress, void *ctx,
                        mw_err *err) {
    vx_gguf_writer *w = vx_gguf_writer_new(32);
    tensor_fill *fills = calloc(in->n_tensors ? in->n_tensors : 1, sizeof *fills);
    write_progress wp = {progress, ctx, 0, 0};
    int rc = w && fills ? 0 : mw_errf(err, "%s: out of memory", path);
    for (size_t i = 0; rc == 0 && i < vx_meta_count(in->meta); i++)
        if (strcmp(vx_meta_key(in->meta, i), "general.alignment") != 0 &&
            vx_meta_copy_entry(vx_gguf_writer_meta(w), in->meta, i))
            rc = mw_errf(err, "%s: out of memory", path);
    for (size_t i = 0; rc == 0 && i < in->n_tensors; i++) {
        const vx_input_tensor *t = &in->tensors[i];
        fills[i] = (tensor_fill){in, t, 0, &wp};
        wp.total += t->nbytes;
        const bool planar = t->type == KN_MXFP4_CT;
        rc = vx_gguf_writer_add_fill(w, t->name, planar ? KN_MXFP4 : t->type, t->n_dims, t->ne,
                                     planar ? fill_planar : fill_from_input, &fills[i], err);
    }
    if (rc == 0) rc = vx_gguf_writer_write(w, path, err);
    vx_gguf_writer_free(w);
    free(fills);
    return rc;
}
