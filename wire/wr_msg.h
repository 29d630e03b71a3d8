/* wire/wr_msg.h — moewire messages in C: packing them into parts (a protobuf envelope + raw tensor
 * frames) and checking received parts against every rule of docs/wire-protocol.md.
 *
 * Nothing here touches a socket (wire/wr_zmq.h moves parts), so the malformed-message corpus can
 * be fed straight to wr_parse. A parsed message's pointers (strings, rows, assignments) point into
 * the wr_in that parsed it and stay valid until its next wr_parse or wr_in_free. */
#ifndef WR_MSG_H
#define WR_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/mw_err.h"
#include "wire/wr_codec.h"

#define WR_VERSION 1
/* Bytes of a node's liveness token (Welcome.live_token, wire/wr_live.h). */
#define WR_LIVE_TOKEN 16

/* Parts of one message: the envelope and at most WR_MAX_FRAMES raw frames. */
#define WR_MAX_FRAMES 4
#define WR_MAX_PARTS  (1 + WR_MAX_FRAMES)

/* Hard limits, whatever a receiver configures. */
#define WR_MAX_ENVELOPE   (1u << 20) /* bytes of the protobuf envelope */
#define WR_MAX_STRING     4096       /* bytes of any string field */
#define WR_MAX_OWNED_BITS (1u << 24) /* n_layers × n_experts in a Welcome */
#define WR_MAX_GLU_PARAMS 8          /* parameters of a Welcome's GLU policy */

/* Error codes: the wire's ErrorCode numbers. */
typedef enum wr_code {
    WR_OK = 0,
    WR_E_VERSION = 1,
    WR_E_MALFORMED = 2,
    WR_E_FRAME = 3,
    WR_E_TOO_LARGE = 4,
    WR_E_UNEXPECTED = 5,
    WR_E_SHAPE = 6,
    WR_E_LAYER = 7,
    WR_E_EXPERT = 8,
    WR_E_NOT_OWNED = 9,
    WR_E_ROW = 10,
    WR_E_NON_FINITE = 11,
    WR_E_FINGERPRINT = 12,
    WR_E_INTERNAL = 13,
    WR_CODE_END
} wr_code;

/* "version", "malformed", ...; "unknown" for codes this build does not know. */
const char *wr_code_name(int code);

typedef enum wr_kind {
    WR_MSG_NONE = 0,
    WR_MSG_HELLO,
    WR_MSG_WELCOME,
    WR_MSG_EXPERT_BATCH,
    WR_MSG_PARTIAL_BATCH,
    WR_MSG_ERROR,
    WR_MSG_PING,
    WR_MSG_PONG,
    WR_MSG_KIND_END
} wr_kind;

const char *wr_kind_name(wr_kind k);

typedef enum wr_mode { WR_MODE_PARTIAL = 0, WR_MODE_EXACT = 1 } wr_mode;

/* One routed (row, expert) pair with its router weight; 12 bytes on the wire. */
typedef struct wr_assign {
    int32_t row;
    int32_t expert;
    float weight;
} wr_assign;

typedef struct wr_hello {
    const char *client;
    const char *fingerprint;
} wr_hello;

typedef struct wr_welcome {
    const char *node_id, *fingerprint, *backend, *numerics;
    uint32_t capacity, threads;
    uint32_t n_layers, n_experts;
    uint32_t width;       /* of the experts' rows: hidden size, or a latent MoE's expert width */
    const uint8_t *owned; /* ceil(n_layers * n_experts / 8) bytes, see wr_owned_get */
    const char *glu;      /* the experts' GLU kind ("" = not announced) */
    uint32_t n_glu_params;
    const float *glu_params;   /* its parameters, in the kind's order (kernels/glu.c) */
    float read_gbps;           /* the backend's measured read bandwidth, GB/s; 0 = not measured */
    uint32_t live_port;        /* its liveness channel's UDP port (wire/wr_live.h); 0 = none */
    const uint8_t *live_token; /* WR_LIVE_TOKEN bytes its pings must carry (NULL when no port) */
} wr_welcome;

/* The wire's Numerics numbers; the same values as kn_numerics. */
typedef enum wr_numerics { WR_NUM_F32 = 0, WR_NUM_Q8 = 1, WR_NUM_END } wr_numerics;

typedef struct wr_batch {
    uint32_t layer, rows, width, n_assign;
    wr_mode mode;
    wr_codec reply;
    wr_numerics numerics;
    const float *x;          /* rows × width */
    const wr_assign *assign; /* n_assign */
    /* Packing only: NULL, or row i of the message is row x_rows[i] of x (gathered while it is
     * encoded, so a sender need not copy its rows out first). NULL in a parsed message. */
    const int32_t *x_rows;
} wr_batch;

typedef struct wr_partial {
    uint32_t layer, rows, width;
    wr_mode mode;
    uint64_t compute_ns, weight_bytes;
    uint64_t queue_ns; /* received → execution started (receive, checks, grouping, waiting) */
    const float *y;    /* rows × width */
} wr_partial;

typedef struct wr_error_msg {
    int code; /* a wr_code, or a code from a newer peer */
    const char *message;
} wr_error_msg;

typedef struct wr_ping {
    uint64_t t_ns;
} wr_ping;

typedef struct wr_msg {
    wr_kind kind;
    uint32_t version;
    uint64_t seq;
    union {
        wr_hello hello;
        wr_welcome welcome;
        wr_batch batch;
        wr_partial partial;
        wr_error_msg error;
        wr_ping ping; /* also Pong */
    };
} wr_msg;

/* Bit (layer, expert) of a Welcome's owned bitmap. */
static inline bool wr_owned_get(const uint8_t *bits, uint32_t n_experts, uint32_t layer,
                                uint32_t expert) {
    uint64_t b = (uint64_t)layer * n_experts + expert;
    return (bits[b / 8] >> (b % 8)) & 1;
}
static inline size_t wr_owned_bytes(uint32_t n_layers, uint32_t n_experts) {
    return (size_t)(((uint64_t)n_layers * n_experts + 7) / 8);
}

/* A growable byte buffer. */
typedef struct wr_buf {
    uint8_t *p;
    size_t len, cap;
} wr_buf;

/* ---- sending ------------------------------------------------------------------------------- */

/* A packed message: part 0 is the envelope, parts 1.. the raw frames as they go on the wire.
 * Buffers are kept between messages, so packing every layer allocates nothing in steady state. */
typedef struct wr_out {
    int n_parts;
    const uint8_t *part[WR_MAX_PARTS];
    size_t part_len[WR_MAX_PARTS];
    size_t bytes; /* sum of part_len: the message's wire bytes */
    wr_buf env, raw[WR_MAX_FRAMES], lz4[WR_MAX_FRAMES];
    /* per frame slot: LZ4 attempts still to skip after one that did not pay (activation rows
     * rarely compress; an attempt costs about as much as encoding the frame) */
    uint8_t lz4_skip[WR_MAX_FRAMES];
} wr_out;

/* After an LZ4 attempt on a frame slot that did not pay, the next WR_LZ4_BACKOFF frames of that
 * slot (of messages packed with the same wr_out) are sent raw without trying. */
#define WR_LZ4_BACKOFF 7

void wr_out_init(wr_out *o);
void wr_out_free(wr_out *o);
/* Packs m (its version is ignored: WR_VERSION is written). Tensor frames of an ExpertBatch use
 * `codec`; a PartialBatch's use `codec` too (pass the batch's reply codec). -1 only on bad input
 * (invalid dtype, sizes beyond the hard limits) or allocation failure. */
int wr_pack(wr_out *o, const wr_msg *m, wr_codec codec, mw_err *err);
/* Packs an Error reply for request `seq`. */
int wr_pack_error(wr_out *o, uint64_t seq, wr_code code, const char *message, mw_err *err);

/* ---- receiving ----------------------------------------------------------------------------- */

/* What a receiver accepts; every count and size is checked against these before it is used. */
typedef struct wr_limits {
    uint32_t max_rows;        /* rows of a batch (and of a reply) */
    uint32_t max_width;       /* elements per row */
    uint32_t max_assign;      /* assignments of a batch */
    uint64_t max_frame_bytes; /* raw (decompressed) bytes of one frame */
    bool reject_nonfinite;    /* NaN/Inf in rows → WR_E_NON_FINITE (weights are always checked) */
} wr_limits;

/* 65536 rows, width 65536, 1 M assignments, 256 MiB per frame, non-finite rows refused. */
wr_limits wr_limits_default(void);

/* A view of one received part. */
typedef struct wr_part {
    const void *data;
    size_t len;
} wr_part;

typedef struct wr_in {
    wr_limits lim;
    void *env;           /* the unpacked protobuf envelope (internal) */
    wr_buf rows, assign; /* decoded tensors */
    wr_buf scratch;      /* LZ4 output before decoding */
    size_t bytes;        /* wire bytes of the last parsed message */
} wr_in;

void wr_in_init(wr_in *in, const wr_limits *lim); /* lim NULL = wr_limits_default() */
void wr_in_free(wr_in *in);

/* Checks and decodes n parts (part 0 = envelope). On success fills *m and returns 0. On failure
 * returns -1, sets *code to the wr_code an Error reply should carry, m->seq to the request's seq
 * when the envelope was readable (else 0), and err to a sentence naming the message, the part and
 * the fault. `truncated_parts` > 0 says the transport dropped that many parts beyond the maximum.
 */
int wr_parse(wr_in *in, const wr_part *parts, int n, int truncated_parts, wr_msg *m, wr_code *code,
             mw_err *err);

#endif
