/* tests/fuzz/fuzz_hf_config.c — config.json text (Hugging Face) into GGUF-style metadata: every
 * key is known to its family or refused, never crashing; what parses is read back. */
#include <stdint.h>

#include "tests/fuzz/fz_meta.h"
#include "vindex/vx_hf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    vx_meta *m = vx_meta_new();
    if (!m) return 0;
    mw_err e;
    if (vx_hf_config_parse((const char *)data, size, "config.json", "fuzz", m, &e) == 0)
        fz_read_meta(m);
    vx_meta_free(m);
    return 0;
}
