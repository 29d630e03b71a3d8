/* tests/fuzz/fuzz_trace.c — a routing trace (vindex/vx_trace.h) twice: the input as a whole file
 * (the header's checks), and the input after its first byte as the body of a trace whose header
 * is written for it with the right size and checksums (the first byte picks the model's shape),
 * so the record parser is reached; then the routing statistics of it. A record handed out must
 * hold only ids below the expert count and finite weights. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fz.h"
#include "vindex/vx_rstats.h"
#include "vindex/vx_trace.h"
#include "vindex/vx_trace_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void read_all(const char *path, uint32_t n_expert) {
    vx_trace_reader *r;
    if (vx_trace_open(path, &r, NULL)) return;
    vx_trace_event ev;
    while (vx_trace_next(r, &ev, NULL) == 1) {
        if (ev.kind != VX_TRACE_LAYER) continue;
        for (int64_t i = 0; i < ev.T * (int64_t)vx_trace_info_of(r)->k; i++)
            if (ev.ids[i] >= n_expert || !isfinite(ev.weights[i])) __builtin_trap();
    }
    vx_trace_close(r);
    vx_rstats s = {0};
    if (vx_rstats_add_trace(&s, path, NULL) == 0) vx_rstats_top_pairs(&s, 8, NULL);
    vx_rstats_free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const uint32_t shapes[][3] = {{2, 8, 2}, {1, 1, 1}, {3, 16, 4}, {93, 896, 16}};
    read_all(fz_file("raw.trace", data, size), 65535);
    if (size < 1) return 0;
    const uint32_t *sh = shapes[data[0] % (sizeof shapes / sizeof shapes[0])];
    vx_trace_info info = {.n_layer = sh[0], .n_expert = sh[1], .k = sh[2]};
    memset(info.fingerprint, 'a', VX_TRACE_FP_HEX);
    memcpy(info.family, "fuzz", 5);
    uint8_t *file = malloc(VX_TRACE_HEADER_BYTES + size - 1);
    if (!file) return 0;
    memcpy(file + VX_TRACE_HEADER_BYTES, data + 1, size - 1);
    vx_trace_counts c = {.body_bytes = size - 1};
    uint8_t b2[VX_DIGEST_BYTES];
    vx_blake2b(data + 1, size - 1, b2);
    vx_trace__encode_header(&info, &c, b2, file);
    read_all(fz_file("signed.trace", file, VX_TRACE_HEADER_BYTES + size - 1), sh[1]);
    free(file);
    return 0;
}
