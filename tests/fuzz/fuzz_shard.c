/* tests/fuzz/fuzz_shard.c — an expert node's owned set: the SPEC text (`0-23:0-15,5:20`) and the
 * @shard.json file, against model shapes chosen by the first byte; a set that parses is
 * formatted and parsed again to the same set. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fz.h"
#include "vindex/vx_source.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const char *spec, int layers, int experts) {
    vx_expert_set s, t;
    mw_err e;
    if (vx_expert_set_parse(spec, layers, experts, &s, &e) != 0) return;
    char *text = vx_expert_set_format(&s);
    if (text) {
        if (vx_expert_set_parse(text, layers, experts, &t, &e) != 0) __builtin_trap();
        if (memcmp(s.bits, t.bits, ((size_t)layers * (size_t)experts + 7) / 8)) __builtin_trap();
        vx_expert_set_free(&t);
        free(text);
    }
    vx_expert_set_free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const int shapes[][2] = {{4, 8}, {1, 1}, {24, 32}, {92, 896}, {61, 256}, {3, 12}};
    if (size < 1) return 0;
    const int *sh = shapes[data[0] % (sizeof shapes / sizeof shapes[0])];
    /* as SPEC text */
    char *spec = malloc(size);
    if (!spec) return 0;
    memcpy(spec, data + 1, size - 1);
    spec[size - 1] = '\0';
    check(spec, sh[0], sh[1]);
    free(spec);
    /* as a shard file */
    const char *path = fz_file("shard.json", data + 1, size - 1);
    char at[600];
    snprintf(at, sizeof at, "@%s", path);
    check(at, sh[0], sh[1]);
    return 0;
}
