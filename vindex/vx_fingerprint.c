/* vindex/vx_fingerprint.c — the model fingerprint (see vx_fingerprint.h for the exact bytes). */
#include "vindex/vx_fingerprint.h"

#include <stdlib.h>
#include <string.h>

#include "vindex/vx_gguf_internal.h"

static int by_name(const void *a, const void *b) {
    return strcmp(((const vx_fp_tensor *)a)->name, ((const vx_fp_tensor *)b)->name);
}

int vx_fingerprint(const vx_meta *meta, vx_fp_tensor *tensors, size_t n, char out[VX_DIGEST_HEX],
                   mw_err *err) {
    vx__buf b = {0};
    static const char tag[] = "moewire-fingerprint-v1";
    vx__buf_put(&b, tag, sizeof tag);
    uint64_t n_kv = 0;
    for (size_t i = 0; i < vx_meta_count(meta); i++)
        if (strcmp(vx_meta_key(meta, i), "general.alignment") != 0) n_kv++;
    vx__buf_u64(&b, n_kv);
    for (size_t i = 0; i < vx_meta_count(meta); i++)
        if (strcmp(vx_meta_key(meta, i), "general.alignment") != 0)
            vx__gguf_put_kv(&b, vx_meta_key(meta, i), vx__meta_val(meta, i));
    qsort(tensors, n, sizeof *tensors, by_name);
    vx__buf_u64(&b, n);
    for (size_t i = 0; i < n; i++) {
        const vx_fp_tensor *t = &tensors[i];
        vx__buf_str(&b, t->name, strlen(t->name));
        vx__buf_u32(&b, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++) vx__buf_u64(&b, (uint64_t)t->ne[d]);
        vx__buf_u32(&b, (uint32_t)t->type);
        vx__buf_put(&b, t->digest, VX_DIGEST_BYTES);
    }
    if (b.oom) {
        vx__buf_free(&b);
        return mw_errf(err, "fingerprint: out of memory");
    }
    uint8_t d[VX_DIGEST_BYTES];
    vx_blake2b(b.p, b.n, d);
    vx_hex(d, out);
    vx__buf_free(&b);
    return 0;
}
