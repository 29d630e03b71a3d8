/* vindex/vx_trace.h — routing traces: every routing decision a forward pass made (the rows of each
 * step; per MoE layer each row's experts and gate weights), in a compact binary file with a
 * header naming the model and a checksum over everything. The writer copies records into a
 * bounded ring that a thread of its own drains to the file, so the decode loop never waits on the
 * disk; the reader treats the file as untrusted (every count bounded, the checksum checked before
 * any record is handed out). The byte layout is documented in docs/fleet.md. */
#ifndef VX_TRACE_H
#define VX_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "util/mw_err.h"

#define VX_TRACE_MAGIC        "MWRTRACE"
#define VX_TRACE_VERSION      1
#define VX_TRACE_HEADER_BYTES 256
#define VX_TRACE_FP_HEX       64 /* the model fingerprint: 64 hex digits */
#define VX_TRACE_FAMILY_MAX   32 /* general.architecture, NUL-padded */
#define VX_TRACE_MAX_LAYERS   4096
#define VX_TRACE_MAX_EXPERTS  65535 /* ids travel as u16 */
#define VX_TRACE_MAX_K        256
#define VX_TRACE_MAX_ROWS     (1 << 20) /* rows of one step (the forward pass's batch limit) */

/* Record tags (u32, the first word of every record). */
enum { VX_TRACE_STEP = 1, VX_TRACE_LAYER = 2 };

/* What a trace is of. */
typedef struct vx_trace_info {
    char fingerprint[VX_TRACE_FP_HEX + 1];
    char family[VX_TRACE_FAMILY_MAX + 1];
    uint32_t n_layer, n_expert, k;
} vx_trace_info;

/* What a closed trace holds. */
typedef struct vx_trace_counts {
    uint64_t steps, layer_records, rows, assignments;
    uint64_t dropped; /* layer records the writer had no room for (it fell behind the disk) */
    uint64_t body_bytes;
} vx_trace_counts;

/* ---- writing -------------------------------------------------------------------------------- */

typedef struct vx_trace_writer vx_trace_writer;

/* Creates path (replacing a file there) and starts the writer thread; ring_bytes (0: 16 MiB,
 * taken at once) bounds the records waiting for the disk. */
int vx_trace_create(const char *path, const vx_trace_info *info, size_t ring_bytes,
                    vx_trace_writer **out, mw_err *err);
/* A forward step of T rows: row t's sequence, position and token are seq[t·stride],
 * pos[t·stride], token[t·stride] (stride in int32 elements, so an array of structs can be passed
 * as it is). Never blocks: a record the ring has no room for is dropped and counted. */
void vx_trace_step(vx_trace_writer *w, int64_t T, const int32_t *seq, const int32_t *pos,
                   const int32_t *token, size_t stride);
/* One MoE layer of the current step: T × k expert ids (best first) and gate weights. */
void vx_trace_layer(vx_trace_writer *w, int layer, int64_t T, int k, const int32_t *ids,
                    const float *weights);
/* Drains the ring, writes the final header (counts, checksum) and closes the file; counts (may be
 * NULL) receives what was written. Frees w in every case; -1 when a write failed. */
int vx_trace_finish(vx_trace_writer *w, vx_trace_counts *counts, mw_err *err);

/* ---- reading -------------------------------------------------------------------------------- */

typedef struct vx_trace_reader vx_trace_reader;

/* One record. A step's rows are (seq, pos, token) triples; a layer's ids and weights are T × k,
 * aligned. Pointers stay valid until the reader is closed. */
typedef struct vx_trace_event {
    int kind; /* VX_TRACE_STEP or VX_TRACE_LAYER */
    int layer;
    int64_t T;
    const int32_t *rows;
    const uint16_t *ids;
    const float *weights;
} vx_trace_event;

/* Maps path and checks all of it before returning: the header (magic, version, its own checksum,
 * bounds), that the trace was closed, its size, and the body's checksum. */
int vx_trace_open(const char *path, vx_trace_reader **out, mw_err *err);
const vx_trace_info *vx_trace_info_of(const vx_trace_reader *r);
const vx_trace_counts *vx_trace_counts_of(const vx_trace_reader *r);
/* The SHA-256 of the whole file, 64 hex digits (what a placement records). */
const char *vx_trace_sha256(const vx_trace_reader *r);
/* The next record: 1 with *ev filled, 0 at the end (the counts then checked against the header),
 * -1 with err naming the record when it is malformed (a layer or an id out of range, a weight
 * that is not finite, a layer record before any step or of another T). */
int vx_trace_next(vx_trace_reader *r, vx_trace_event *ev, mw_err *err);
void vx_trace_close(vx_trace_reader *r);

#endif
