/* vindex/vx_trace_internal.h — the routing trace's header layout, shared by its writer and its
 * reader. Private to vindex/. */
#ifndef VX_TRACE_INTERNAL_H
#define VX_TRACE_INTERNAL_H

#include <stdint.h>

#include "util/mw_err.h"
#include "vindex/vx_hash.h"
#include "vindex/vx_trace.h"

/* Byte offsets in the header (docs/fleet.md). */
enum {
    VX_TH_MAGIC = 0,
    VX_TH_VERSION = 8,
    VX_TH_SIZE = 12,
    VX_TH_FP = 16,
    VX_TH_FAMILY = 80,
    VX_TH_N_LAYER = 112,
    VX_TH_N_EXPERT = 116,
    VX_TH_K = 120,
    VX_TH_FLAGS = 124,
    VX_TH_COUNTS = 128, /* steps, layer records, rows, assignments, dropped, body bytes: u64 */
    VX_TH_BODY_B2 = 176,
    VX_TH_SELF_B2 = 208,
};

#define VX_TRACE_CLOSED 1u /* flags: the writer finished (counts and checksum are final) */

/* Bounds of what a trace may describe; -1 naming `where` otherwise. */
int vx_trace__check_info(const vx_trace_info *info, const char *where, mw_err *err);
/* The header: counts NULL for a trace still being written (flags 0, counts 0). */
void vx_trace__encode_header(const vx_trace_info *info, const vx_trace_counts *counts,
                             const uint8_t body_b2[VX_DIGEST_BYTES],
                             uint8_t out[VX_TRACE_HEADER_BYTES]);

#endif
