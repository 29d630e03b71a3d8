/* vindex/vx_slice.c — `vindex slice`: a sub-vindex holding only some (layer, expert) extents.
 *
 * The slice keeps the whole model description (metadata, tensor table, digests, so the same
 * fingerprint) and lists only the extents it holds, repacked into its own expert files. Each copied
 * extent is checked against its BLAKE2b on the way, so a slice never inherits corruption. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vindex/vx_io.h"
#include "vindex/vx_manifest.h"
#include "vindex/vx_map.h"
#include "vindex/vx_vindex.h"

/* Copies bytes [off, off + len) of src into the sink, returning their BLAKE2b. */
static int copy_range(int fd, const char *src, uint64_t off, uint64_t len, vx_sink *s, uint8_t *buf,
                      size_t buf_len, uint8_t b2[VX_DIGEST_BYTES], mw_err *err) {
    vx_b2 h;
    vx_b2_init(&h);
    for (uint64_t at = 0; at < len;) {
        size_t want = len - at < buf_len ? (size_t)(len - at) : buf_len;
        ssize_t k = pread(fd, buf, want, (off_t)(off + at));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0)
            return mw_errf(err, "%s: read failed at %llu", src, (unsigned long long)(off + at));
        vx_b2_update(&h, buf, (size_t)k);
        if (vx_sink_write(s, buf, (uint64_t)k, err)) return -1;
        at += (uint64_t)k;
    }
    vx_b2_final(&h, b2);
    return 0;
}

static int open_src(const char *dir, const char *name, char *path, size_t n, mw_err *err) {
    snprintf(path, n, "%s/%s", dir, name);
    return vx_open_file(path, NULL, err);
}

/* Copies a whole file, checking its BLAKE2b. */
static int copy_file(const char *dir, const char *out, const vx_mf_file *f, uint8_t *buf,
                     size_t buf_len, mw_err *err) {
    char src[4096], dst[4096];
    int fd = open_src(dir, f->name, src, sizeof src, err);
    if (fd < 0) return -1;
    snprintf(dst, sizeof dst, "%s/%s", out, f->name);
    vx_sink s;
    uint8_t b2[VX_DIGEST_BYTES];
    int rc = vx_sink_open(&s, dst, false, err);
    if (rc == 0) rc = copy_range(fd, src, 0, f->size, &s, buf, buf_len, b2, err);
    if (rc == 0 && memcmp(b2, f->b2, sizeof b2) != 0)
        rc = mw_errf(err, "%s: checksum mismatch", src);
    close(fd);
    if (rc) {
        if (s.fd >= 0) vx_sink_abort(&s);
        return -1;
    }
    return vx_sink_close(&s, NULL, NULL, err);
}

/* Rewrites layer L keeping the extents in `want`; L is updated to describe the new file. */
static int slice_layer(const char *dir, const char *out, vx_mf_layer *L, const vx_expert_set *want,
                       uint8_t *buf, size_t buf_len, mw_err *err) {
    size_t kept = 0;
    for (size_t i = 0; i < L->n_ext; i++)
        kept += vx_expert_set_has(want, L->layer, L->ext[i].expert);
    if (kept == 0) {
        L->n_ext = 0;
        L->file_size = 0;
        return 0;
    }
    char src[4096], dst[4096];
    int fd = open_src(dir, L->file, src, sizeof src, err);
    if (fd < 0) return -1;
    snprintf(dst, sizeof dst, "%s/%s", out, L->file);
    vx_sink s;
    if (vx_sink_open(&s, dst, false, err)) {
        close(fd);
        return -1;
    }
    size_t n = 0;
    int rc = 0;
    for (size_t i = 0; i < L->n_ext && rc == 0; i++) {
        vx_mf_extent x = L->ext[i];
        if (!vx_expert_set_has(want, L->layer, x.expert)) continue;
        uint8_t b2[VX_DIGEST_BYTES];
        uint64_t at = s.pos;
        rc = copy_range(fd, src, x.offset, L->extent_bytes, &s, buf, buf_len, b2, err);
        if (rc == 0 && memcmp(b2, x.b2, sizeof b2) != 0)
            rc = mw_errf(err, "%s: extent (layer %d, expert %d) in %s: checksum mismatch", dir,
                         L->layer, x.expert, L->file);
        x.offset = at;
        L->ext[n++] = x;
    }
    close(fd);
    L->n_ext = n;
    L->file_size = s.pos;
    if (rc) {
        vx_sink_abort(&s);
        return -1;
    }
    return vx_sink_close(&s, NULL, NULL, err);
}

static int slice_into(const char *dir, const char *spec, const char *out, bool with_dense,
                      vx_manifest *m, uint8_t *buf, size_t buf_len, mw_err *err) {
    vx_expert_set want, held;
    if (vx_expert_set_parse(spec, m->n_layers, m->n_experts, &want, err)) return -1;
    /* a spec over the model's leading dense layers names no experts there ("all" included) */
    for (int l = 0; l < m->n_layers; l++)
        for (int e = 0; !vx_manifest_layer(m, l) && e < m->n_experts; e++)
            vx_expert_set_put(&want, l, e, false);
    if (vx_expert_set_count(&want) == 0) {
        vx_expert_set_free(&want);
        return mw_errf(err, "--experts %s: names no expert of the model's MoE layers", spec);
    }
    int rc = vx_manifest_held(m, &held, err);
    for (int l = 0; rc == 0 && l < m->n_layers; l++)
        for (int e = 0; rc == 0 && e < m->n_experts; e++)
            if (vx_expert_set_has(&want, l, e) && !vx_expert_set_has(&held, l, e))
                rc = mw_errf(err, "%s: does not hold expert (layer %d, expert %d)", dir, l, e);
    vx_expert_set_free(&held);
    if (rc == 0 && with_dense && !m->has_dense)
        rc = mw_errf(err, "%s: holds no dense tensors to copy", dir);
    if (rc == 0) rc = vx_mkdir_fresh(out, err);
    if (rc == 0 && with_dense) rc = copy_file(dir, out, &m->dense, buf, buf_len, err);
    m->has_dense = with_dense;
    for (size_t i = 0; i < m->n_moe && rc == 0; i++)
        rc = slice_layer(dir, out, &m->moe[i], &want, buf, buf_len, err);
    for (size_t i = 0; i < m->n_carried && rc == 0; i++)
        rc = copy_file(dir, out, &m->carried[i], buf, buf_len, err);
    if (rc == 0) {
        char *holds = vx_expert_set_format(&want);
        json_object_set_new(m->provenance, "slice",
                            json_pack("{s:s,s:s}", "from", dir, "spec", holds ? holds : spec));
        free(holds);
        rc = vx_manifest_write(m, out, err);
    }
    vx_expert_set_free(&want);
    return rc;
}

int vx_slice(const char *dir, const char *spec, const char *out_dir, bool with_dense, mw_err *err) {
    vx_manifest m;
    if (vx_manifest_read(dir, &m, err)) return -1;
    size_t buf_len = 4u << 20;
    uint8_t *buf = malloc(buf_len);
    int rc = buf ? slice_into(dir, spec, out_dir, with_dense, &m, buf, buf_len, err)
                 : mw_errf(err, "out of memory");
    free(buf);
    vx_manifest_free(&m);
    return rc;
}
