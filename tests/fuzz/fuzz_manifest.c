/* tests/fuzz/fuzz_manifest.c — a vindex's manifest.json as untrusted input: the reader checks
 * format, shapes, layout, extents and provenance; what it accepts is walked (held set, every
 * layer's extents, the fingerprint recomputed). */
#include <stdint.h>

#include "tests/fuzz/fz.h"
#include "tests/fuzz/fz_meta.h"
#include "vindex/vx_manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_file("manifest.json", data, size);
    vx_manifest m;
    mw_err e;
    if (vx_manifest_read(fz_dir(), &m, &e) != 0) return 0;
    fz_read_meta(m.meta);
    vx_expert_set held;
    if (vx_manifest_held(&m, &held, &e) == 0) vx_expert_set_free(&held);
    volatile uint64_t sink = 0;
    for (int l = 0; l < m.n_layers; l++) {
        const vx_mf_layer *L = vx_manifest_layer(&m, l);
        for (int x = 0; L && x < m.n_experts; x++) {
            const vx_mf_extent *ext = vx_manifest_extent(L, x);
            if (ext) sink += ext->offset;
        }
    }
    (void)sink;
    char fp[VX_DIGEST_HEX];
    vx_manifest_fingerprint(&m, fp, &e);
    vx_manifest_free(&m);
    return 0;
}
