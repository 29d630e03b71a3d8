/* tests/fuzz/fuzz_wire.c — the wire decoder: arbitrary multipart messages (the input holds parts
 * as [u16 length][bytes], at most 7) through wr_parse with a node's limits or the defaults
 * (first byte). A message that parses packs again and parses to the same content. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wr_msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void same_or_trap(const wr_msg *a, const wr_msg *b) {
    if (a->kind != b->kind || a->seq != b->seq) __builtin_trap();
    if (a->kind == WR_MSG_EXPERT_BATCH) {
        const wr_batch *x = &a->batch, *y = &b->batch;
        if (x->rows != y->rows || x->width != y->width || x->n_assign != y->n_assign ||
            x->layer != y->layer || x->mode != y->mode ||
            memcmp(x->x, y->x, (size_t)x->rows * x->width * sizeof(float)) ||
            memcmp(x->assign, y->assign, (size_t)x->n_assign * sizeof(wr_assign)))
            __builtin_trap();
    } else if (a->kind == WR_MSG_PARTIAL_BATCH) {
        const wr_partial *x = &a->partial, *y = &b->partial;
        if (x->rows != y->rows || x->width != y->width ||
            memcmp(x->y, y->y, (size_t)x->rows * x->width * sizeof(float)))
            __builtin_trap();
    } else if (a->kind == WR_MSG_ERROR) {
        if (a->error.code != b->error.code || strcmp(a->error.message, b->error.message))
            __builtin_trap();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    wr_limits lim = wr_limits_default();
    if (data[0] & 1) { /* an expert node's: capacity 64, width 256, 8 experts */
        lim.max_rows = 64;
        lim.max_width = 256;
        lim.max_assign = 64 * 8;
        lim.max_frame_bytes = 64 * 256 * 4;
    }
    wr_part parts[8];
    int n = 0;
    size_t at = 1;
    while (n < 7 && at + 2 <= size) {
        size_t len = (size_t)data[at] | (size_t)data[at + 1] << 8;
        at += 2;
        if (len > size - at) len = size - at;
        parts[n++] = (wr_part){data + at, len};
        at += len;
    }
    int truncated = n > WR_MAX_PARTS ? n - WR_MAX_PARTS : 0;
    if (n > WR_MAX_PARTS) n = WR_MAX_PARTS;
    wr_in in, in2;
    wr_in_init(&in, &lim);
    wr_in_init(&in2, &lim);
    wr_msg m, m2;
    wr_code code;
    mw_err e;
    if (wr_parse(&in, parts, n, truncated, &m, &code, &e) == 0 && m.kind != WR_MSG_WELCOME) {
        wr_out o;
        wr_out_init(&o);
        wr_codec codec = {WR_F32, false};
        if (wr_pack(&o, &m, codec, &e) == 0) {
            wr_part back[WR_MAX_PARTS];
            for (int i = 0; i < o.n_parts; i++) back[i] = (wr_part){o.part[i], o.part_len[i]};
            if (wr_parse(&in2, back, o.n_parts, 0, &m2, &code, &e) != 0) __builtin_trap();
            same_or_trap(&m, &m2);
        }
        wr_out_free(&o);
    } else if (code <= WR_OK || code >= WR_CODE_END) {
        if (m.kind != WR_MSG_WELCOME) __builtin_trap(); /* a failure always names its code */
    }
    wr_in_free(&in);
    wr_in_free(&in2);
    return 0;
}
