/* tests/fuzz/fuzz_safetensors.c — the safetensors header reader on arbitrary bytes: a file that
 * opens is read through (metadata, every tensor's first and last byte, lookups by name). */
#include <stdint.h>

#include "tests/fuzz/fz.h"
#include "vindex/vx_safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fz_file("in.safetensors", data, size);
    vx_st_file *f;
    mw_err e;
    if (vx_st_open(path, &f, &e) != 0) return 0;
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < vx_st_n_meta(f); i++)
        sink ^= (uint8_t)vx_st_meta_value(f, i)[0] ^ (uint8_t)vx_st_meta_key(f, i)[0];
    for (size_t i = 0; i < vx_st_n_tensors(f); i++) {
        const vx_st_tensor *t = vx_st_tensor_at(f, i);
        if (t->nbytes) sink ^= t->data[0] ^ t->data[t->nbytes - 1];
        if (vx_st_find(f, t->name) != t) __builtin_trap();
    }
    (void)sink;
    vx_st_close(f);
    return 0;
}
