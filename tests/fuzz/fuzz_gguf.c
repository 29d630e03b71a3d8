/* tests/fuzz/fuzz_gguf.c — the GGUF reader on arbitrary bytes: a file that opens is read
 * through: every metadata entry by its getters, every tensor's first and last byte. */
#include <stdint.h>

#include "tests/fuzz/fz.h"
#include "tests/fuzz/fz_meta.h"
#include "vindex/vx_gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fz_file("in.gguf", data, size);
    vx_gguf *g;
    mw_err e;
    if (vx_gguf_open(path, &g, &e) != 0) return 0;
    fz_read_meta(vx_gguf_meta(g));
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < vx_gguf_n_tensors(g); i++) {
        const vx_tensor *t = vx_gguf_tensor(g, i);
        if (t->nbytes)
            sink ^= ((const uint8_t *)t->data)[0] ^ ((const uint8_t *)t->data)[t->nbytes - 1];
        if (vx_gguf_find(g, t->name) != t) __builtin_trap();
    }
    (void)sink;
    vx_gguf_close(g);
    return 0;
}
