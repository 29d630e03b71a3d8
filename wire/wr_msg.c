/* wire/wr_msg.c — packs moewire messages into parts and checks received parts: the one place that
 * knows the envelope schema, the frame order of each message kind, and which size every frame must
 * have. Receivers see a clean error (code + sentence) for anything that breaks a rule. */
#include "wire/wr_msg.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/moewire.pb-c.h"
#include "util/mw_grow.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the wire is little-endian");
_Static_assert(sizeof(wr_assign) == 12, "an assignment is 12 bytes on the wire");
_Static_assert((int)WR_F32 == MOEWIRE__DTYPE__DTYPE_F32 &&
                   (int)WR_F16 == MOEWIRE__DTYPE__DTYPE_F16 &&
                   (int)WR_BF16 == MOEWIRE__DTYPE__DTYPE_BF16,
               "wr_dtype mirrors DType");
_Static_assert((int)WR_E_INTERNAL == MOEWIRE__ERROR_CODE__ERROR_INTERNAL,
               "wr_code mirrors ErrorCode");
_Static_assert((int)WR_MODE_EXACT == MOEWIRE__MODE__MODE_EXACT, "wr_mode mirrors Mode");
_Static_assert((int)WR_NUM_Q8 == MOEWIRE__NUMERICS__NUMERICS_Q8, "wr_numerics mirrors Numerics");

#define ASSIGN_BYTES 12

/* One row per message kind: its name, its envelope oneof case and how many raw frames follow. */
static const struct {
    const char *name;
    Moewire__Envelope__BodyCase body;
    int frames;
} kinds[WR_MSG_KIND_END] = {
    [WR_MSG_NONE] = {"none", MOEWIRE__ENVELOPE__BODY__NOT_SET, 0},
    [WR_MSG_HELLO] = {"hello", MOEWIRE__ENVELOPE__BODY_HELLO, 0},
    [WR_MSG_WELCOME] = {"welcome", MOEWIRE__ENVELOPE__BODY_WELCOME, 0},
    [WR_MSG_EXPERT_BATCH] = {"expert_batch", MOEWIRE__ENVELOPE__BODY_EXPERT_BATCH, 2},
    [WR_MSG_PARTIAL_BATCH] = {"partial_batch", MOEWIRE__ENVELOPE__BODY_PARTIAL_BATCH, 1},
    [WR_MSG_ERROR] = {"error", MOEWIRE__ENVELOPE__BODY_ERROR, 0},
    [WR_MSG_PING] = {"ping", MOEWIRE__ENVELOPE__BODY_PING, 0},
    [WR_MSG_PONG] = {"pong", MOEWIRE__ENVELOPE__BODY_PONG, 0},
};

static const char *const code_names[WR_CODE_END] = {
    [WR_OK] = "ok",
    [WR_E_VERSION] = "version",
    [WR_E_MALFORMED] = "malformed",
    [WR_E_FRAME] = "frame",
    [WR_E_TOO_LARGE] = "too-large",
    [WR_E_UNEXPECTED] = "unexpected",
    [WR_E_SHAPE] = "shape",
    [WR_E_LAYER] = "layer",
    [WR_E_EXPERT] = "expert",
    [WR_E_NOT_OWNED] = "not-owned",
    [WR_E_ROW] = "row",
    [WR_E_NON_FINITE] = "non-finite",
    [WR_E_FINGERPRINT] = "fingerprint",
    [WR_E_INTERNAL] = "internal",
};

const char *wr_code_name(int code) {
    return code >= 0 && code < WR_CODE_END ? code_names[code] : "unknown";
}

const char *wr_kind_name(wr_kind k) {
    return k >= 0 && k < WR_MSG_KIND_END ? kinds[k].name : "unknown";
}

wr_limits wr_limits_default(void) {
    return (wr_limits){.max_rows = 1u << 16,
                       .max_width = 1u << 16,
                       .max_assign = 1u << 20,
                       .max_frame_bytes = 1ull << 28,
                       .reject_nonfinite = true};
}

static int buf_reserve(wr_buf *b, size_t n) {
    return mw_grow((void **)&b->p, &b->cap, n, 1);
}

static void buf_free(wr_buf *b) {
    free(b->p);
    *b = (wr_buf){0};
}

/* ---- packing ------------------------------------------------------------------------------- */

void wr_out_init(wr_out *o) {
    memset(o, 0, sizeof *o);
}

void wr_out_free(wr_out *o) {
    buf_free(&o->env);
    for (int i = 0; i < WR_MAX_FRAMES; i++) {
        buf_free(&o->raw[i]);
        buf_free(&o->lz4[i]);
    }
    o->n_parts = 0;
}

/* Frame i's raw bytes are in o->raw[i]; sends them LZ4-compressed when allowed and worth it. */
static void finish_frame(wr_out *o, int i, bool lz4, Moewire__FrameDesc *fd) {
    wr_buf *raw = &o->raw[i];
    fd->raw_bytes = raw->len;
    fd->compression = MOEWIRE__COMPRESSION__COMPRESSION_NONE;
    o->part[1 + i] = raw->p;
    o->part_len[1 + i] = raw->len;
    if (!lz4) return;
    if (o->lz4_skip[i]) {
        o->lz4_skip[i]--;
        return;
    }
    if (buf_reserve(&o->lz4[i], wr_lz4_limit(raw->len) + 1) != 0) return;
    size_t c = wr_lz4_compress(raw->p, raw->len, o->lz4[i].p, o->lz4[i].cap);
    if (!c) {
        o->lz4_skip[i] = WR_LZ4_BACKOFF;
        return;
    }
    o->lz4[i].len = c;
    fd->compression = MOEWIRE__COMPRESSION__COMPRESSION_LZ4;
    o->part[1 + i] = o->lz4[i].p;
    o->part_len[1 + i] = c;
}

/* Frame i: `rows` rows of x in the codec, row r being x's row idx[r] (idx NULL: row r). */
static int pack_rows(wr_out *o, int i, wr_codec codec, const float *x, const int32_t *idx,
                     uint64_t rows, uint64_t width, Moewire__FrameDesc *fd, mw_err *err) {
    if (!wr_dtype_valid(codec.dtype)) return mw_errf(err, "invalid wire dtype %d", codec.dtype);
    uint64_t n = rows * width, bytes = n * wr_dtype_size(codec.dtype);
    if (rows == 0 || width == 0 || bytes > wr_limits_default().max_frame_bytes)
        return mw_errf(err, "cannot send %" PRIu64 " × %" PRIu64 " rows", rows, width);
    if (buf_reserve(&o->raw[i], bytes) != 0) return mw_errf(err, "out of memory packing rows");
    if (!idx) {
        wr_encode(codec.dtype, x, n, o->raw[i].p);
    } else {
        const size_t row_bytes = (size_t)width * wr_dtype_size(codec.dtype);
        for (uint64_t r = 0; r < rows; r++) {
            if (idx[r] < 0) return mw_errf(err, "cannot send row %d", idx[r]);
            wr_encode(codec.dtype, x + (size_t)idx[r] * width, width, o->raw[i].p + r * row_bytes);
        }
    }
    o->raw[i].len = bytes;
    finish_frame(o, i, codec.lz4, fd);
    return 0;
}

static int pack_assign(wr_out *o, int i, bool lz4, const wr_assign *a, uint64_t n,
                       Moewire__FrameDesc *fd, mw_err *err) {
    if (n == 0 || n > wr_limits_default().max_assign)
        return mw_errf(err, "cannot send %" PRIu64 " assignments", n);
    if (buf_reserve(&o->raw[i], n * ASSIGN_BYTES) != 0)
        return mw_errf(err, "out of memory packing assignments");
    memcpy(o->raw[i].p, a, n * ASSIGN_BYTES); /* the struct is the little-endian wire layout */
    o->raw[i].len = n * ASSIGN_BYTES;
    finish_frame(o, i, lz4, fd);
    return 0;
}

static char *str_or_empty(const char *s) {
    return (char *)(s ? s : "");
}

/* Packs the envelope, whose body and frame descriptors the caller filled, as part 0. */
static int pack_envelope(wr_out *o, const Moewire__Envelope *env, mw_err *err) {
    size_t len = moewire__envelope__get_packed_size(env);
    if (len > WR_MAX_ENVELOPE) return mw_errf(err, "envelope of %zu bytes is too large", len);
    if (buf_reserve(&o->env, len ? len : 1) != 0) return mw_errf(err, "out of memory packing");
    o->env.len = moewire__envelope__pack(env, o->env.p);
    o->part[0] = o->env.p;
    o->part_len[0] = o->env.len;
    o->n_parts = 1 + (int)env->n_frames;
    o->bytes = 0;
    for (int i = 0; i < o->n_parts; i++) o->bytes += o->part_len[i];
    return 0;
}

/* One pack_* per message kind: it fills its body (and frames) into env, then packs env. */

static int pack_hello(wr_out *o, const wr_msg *m, wr_codec codec, Moewire__Envelope *env,
                      mw_err *err) {
    Moewire__Hello hello = MOEWIRE__HELLO__INIT;
    hello.client = str_or_empty(m->hello.client);
    hello.fingerprint = str_or_empty(m->hello.fingerprint);
    env->hello = &hello;
    return pack_envelope(o, env, err);
}

static int pack_welcome(wr_out *o, const wr_msg *m, wr_codec codec, Moewire__Envelope *env,
                        mw_err *err) {
    const wr_welcome *w = &m->welcome;
    Moewire__Welcome welcome = MOEWIRE__WELCOME__INIT;
    welcome.node_id = str_or_empty(w->node_id);
    welcome.fingerprint = str_or_empty(w->fingerprint);
    welcome.backend = str_or_empty(w->backend);
    welcome.numerics = str_or_empty(w->numerics);
    welcome.capacity = w->capacity;
    welcome.threads = w->threads;
    welcome.n_layers = w->n_layers;
    welcome.n_experts = w->n_experts;
    welcome.width = w->width;
    welcome.owned.len = w->owned ? wr_owned_bytes(w->n_layers, w->n_experts) : 0;
    welcome.owned.data = (uint8_t *)w->owned;
    welcome.glu = str_or_empty(w->glu);
    welcome.n_glu_params = w->glu_params ? w->n_glu_params : 0;
    welcome.glu_params = (float *)w->glu_params;
    welcome.read_gbps = w->read_gbps;
    welcome.live_port = w->live_token ? w->live_port : 0;
    welcome.live_token.len = w->live_token && w->live_port ? WR_LIVE_TOKEN : 0;
    welcome.live_token.data = (uint8_t *)w->live_token;
    env->welcome = &welcome;
    return pack_envelope(o, env, err);
}

/* Frames: the rows in the codec, then the assignments. */
static int pack_batch(wr_out *o, const wr_msg *m, wr_codec codec, Moewire__Envelope *env,
                      mw_err *err) {
    const wr_batch *b = &m->batch;
    if (!wr_dtype_valid(b->reply.dtype))
        return mw_errf(err, "invalid reply dtype %d", b->reply.dtype);
    Moewire__ExpertBatch batch = MOEWIRE__EXPERT_BATCH__INIT;
    batch.layer = b->layer;
    batch.rows = b->rows;
    batch.width = b->width;
    batch.dtype = (Moewire__DType)codec.dtype;
    batch.n_assign = b->n_assign;
    batch.mode = (Moewire__Mode)b->mode;
    batch.reply_dtype = (Moewire__DType)b->reply.dtype;
    batch.reply_lz4 = b->reply.lz4;
    batch.numerics = (Moewire__Numerics)b->numerics;
    if (pack_rows(o, 0, codec, b->x, b->x_rows, b->rows, b->width, env->frames[0], err) != 0 ||
        pack_assign(o, 1, codec.lz4, b->assign, b->n_assign, env->frames[1], err) != 0)
        return -1;
    env->expert_batch = &batch;
    return pack_envelope(o, env, err);
}

/* Frame: the output rows in the codec. */
static int pack_partial(wr_out *o, const wr_msg *m, wr_codec codec, Moewire__Envelope *env,
                        mw_err *err) {
    const wr_partial *p = &m->partial;
    Moewire__PartialBatch partial = MOEWIRE__PARTIAL_BATCH__INIT;
    partial.layer = p->layer;
    partial.rows = p->rows;
    partial.width = p->width;
    partial.dtype = (Moewire__DType)codec.dtype;
    partial.mode = (Moewire__Mode)p->mode;
    partial.compute_ns = p->compute_ns;
    partial.weight_bytes = p->weight_bytes;
    partial.queue_ns = p->queue_ns;
    if (pack_rows(o, 0, codec, p->y, NULL, p->rows, p->width, env->frames[0], err) != 0) return -1;
    env->partial_batch = &partial;
    return pack_envelope(o, env, err);
}

static int pack_error(wr_out *o, const wr_msg *m, wr_codec codec, Moewire__Envelope *env,
                      mw_err *err) {
    Moewire__Error error = MOEWIRE__ERROR__INIT;
    error.code = (Moewire__ErrorCode)m->error.code;
    error.message = str_or_empty(m->error.message);
    env->error = &error;
    return pack_envelope(o, env, err);
}

static int pack_ping(wr_out *o, const wr_msg *m, wr_codec codec, Moewire__Envelope *env,
                     mw_err *err) {
    Moewire__Ping ping = MOEWIRE__PING__INIT;
    ping.t_ns = m->ping.t_ns;
    env->ping = &ping;
    return pack_envelope(o, env, err);
}

static int pack_pong(wr_out *o, const wr_msg *m, wr_codec codec, Moewire__Envelope *env,
                     mw_err *err) {
    Moewire__Pong pong = MOEWIRE__PONG__INIT;
    pong.t_ns = m->ping.t_ns;
    env->pong = &pong;
    return pack_envelope(o, env, err);
}

int wr_pack(wr_out *o, const wr_msg *m, wr_codec codec, mw_err *err) {
    if (m->kind <= WR_MSG_NONE || m->kind >= WR_MSG_KIND_END)
        return mw_errf(err, "cannot pack a message of kind %d", m->kind);
    Moewire__FrameDesc fd[WR_MAX_FRAMES];
    Moewire__FrameDesc *fdp[WR_MAX_FRAMES];
    for (int i = 0; i < WR_MAX_FRAMES; i++) {
        moewire__frame_desc__init(&fd[i]);
        fdp[i] = &fd[i];
    }
    Moewire__Envelope env = MOEWIRE__ENVELOPE__INIT;
    env.version = WR_VERSION;
    env.seq = m->seq;
    env.body_case = kinds[m->kind].body;
    env.n_frames = (size_t)kinds[m->kind].frames;
    env.frames = fdp;
    switch (m->kind) {
    case WR_MSG_HELLO:
        return pack_hello(o, m, codec, &env, err);
    case WR_MSG_WELCOME:
        return pack_welcome(o, m, codec, &env, err);
    case WR_MSG_EXPERT_BATCH:
        return pack_batch(o, m, codec, &env, err);
    case WR_MSG_PARTIAL_BATCH:
        return pack_partial(o, m, codec, &env, err);
    case WR_MSG_ERROR:
        return pack_error(o, m, codec, &env, err);
    case WR_MSG_PING:
        return pack_ping(o, m, codec, &env, err);
    case WR_MSG_PONG:
        return pack_pong(o, m, codec, &env, err);
    default:
        return mw_errf(err, "cannot pack a message of kind %d", m->kind);
    }
}

int wr_pack_error(wr_out *o, uint64_t seq, wr_code code, const char *message, mw_err *err) {
    char msg[WR_MAX_STRING];
    snprintf(msg, sizeof msg, "%s", message ? message : ""); /* bounded to what receivers accept */
    wr_msg m = {.kind = WR_MSG_ERROR, .seq = seq, .error = {.code = code, .message = msg}};
    return wr_pack(o, &m, (wr_codec){WR_F32, false}, err);
}

/* ---- parsing ------------------------------------------------------------------------------- */

void wr_in_init(wr_in *in, const wr_limits *lim) {
    memset(in, 0, sizeof *in);
    in->lim = lim ? *lim : wr_limits_default();
}

static void drop_env(wr_in *in) {
    if (in->env) moewire__envelope__free_unpacked(in->env, NULL);
    in->env = NULL;
}

void wr_in_free(wr_in *in) {
    drop_env(in);
    buf_free(&in->rows);
    buf_free(&in->assign);
    buf_free(&in->scratch);
}

/* A parse failure: the code for the Error reply and a sentence for its message. */
typedef struct fault {
    wr_code *code;
    mw_err *err;
} fault;

#define FAIL(f, c, ...) (*(f)->code = (c), mw_errf((f)->err, __VA_ARGS__))

static int check_str(const fault *f, const char *field, const char *s) {
    if (s && strlen(s) > WR_MAX_STRING)
        return FAIL(f, WR_E_TOO_LARGE, "%s is longer than %d bytes", field, WR_MAX_STRING);
    return 0;
}

static const char *str(const char *s) {
    return s ? s : "";
}

/* Checks a count against [1, max]: 0 is malformed, above max is too large. */
static int check_count(const fault *f, const char *what, uint64_t v, uint64_t max) {
    if (v == 0) return FAIL(f, WR_E_MALFORMED, "%s is 0", what);
    if (v > max)
        return FAIL(f, WR_E_TOO_LARGE, "%s %" PRIu64 " exceeds the limit %" PRIu64, what, v, max);
    return 0;
}

/* Frame i (1-based part index) must carry exactly `raw` bytes once decompressed; returns a
 * pointer to those bytes (the part itself, or `scratch` after LZ4). */
static const uint8_t *frame_bytes(wr_in *in, const Moewire__Envelope *env, const wr_part *parts,
                                  int i, const char *what, uint64_t raw, const fault *f) {
    const Moewire__FrameDesc *fd = env->frames[i - 1];
    const wr_part *p = &parts[i];
    if (raw > in->lim.max_frame_bytes) {
        FAIL(f, WR_E_TOO_LARGE, "frame %d (%s) would hold %" PRIu64 " bytes, the limit is %" PRIu64,
             i, what, raw, in->lim.max_frame_bytes);
        return NULL;
    }
    if (p->len > in->lim.max_frame_bytes) {
        FAIL(f, WR_E_TOO_LARGE, "frame %d (%s) is %zu bytes, the limit is %" PRIu64, i, what,
             p->len, in->lim.max_frame_bytes);
        return NULL;
    }
    if (fd->raw_bytes != raw) {
        FAIL(f, WR_E_FRAME,
             "frame %d (%s): the envelope declares %" PRIu64 " raw bytes, the shape needs %" PRIu64,
             i, what, (uint64_t)fd->raw_bytes, raw);
        return NULL;
    }
    switch (fd->compression) {
    case MOEWIRE__COMPRESSION__COMPRESSION_NONE:
        if (p->len != raw) {
            FAIL(f, WR_E_FRAME, "frame %d (%s) is %zu bytes, the envelope declares %" PRIu64, i,
                 what, p->len, raw);
            return NULL;
        }
        return p->data;
    case MOEWIRE__COMPRESSION__COMPRESSION_LZ4: {
        if (p->len == 0 || p->len >= raw) {
            FAIL(f, WR_E_FRAME,
                 "frame %d (%s) is %zu bytes of LZ4 for %" PRIu64
                 " raw bytes (must be non-empty and smaller)",
                 i, what, p->len, raw);
            return NULL;
        }
        if (buf_reserve(&in->scratch, raw) != 0) {
            FAIL(f, WR_E_INTERNAL, "out of memory for frame %d (%s)", i, what);
            return NULL;
        }
        mw_err e;
        if (wr_lz4_decompress(p->data, p->len, in->scratch.p, raw, &e) != 0) {
            FAIL(f, WR_E_FRAME, "frame %d (%s): %s", i, what, e.msg);
            return NULL;
        }
        return in->scratch.p;
    }
    default:
        FAIL(f, WR_E_MALFORMED, "frame %d (%s) has unknown compression %d", i, what,
             (int)fd->compression);
        return NULL;
    }
}

/* Decodes frame i as rows × width elements of dtype into in->rows (as floats). */
static const float *frame_rows(wr_in *in, const Moewire__Envelope *env, const wr_part *parts, int i,
                               const char *what, int dtype, uint32_t rows, uint32_t width,
                               const fault *f) {
    if (!wr_dtype_valid(dtype)) {
        FAIL(f, WR_E_MALFORMED, "frame %d (%s) has unknown dtype %d", i, what, dtype);
        return NULL;
    }
    uint64_t n = (uint64_t)rows * width;
    uint64_t raw = n * wr_dtype_size((wr_dtype)dtype);
    const uint8_t *src = frame_bytes(in, env, parts, i, what, raw, f);
    if (!src) return NULL;
    if (buf_reserve(&in->rows, n * sizeof(float)) != 0) {
        FAIL(f, WR_E_INTERNAL, "out of memory for frame %d (%s)", i, what);
        return NULL;
    }
    float *x = (float *)(void *)in->rows.p;
    if (!in->lim.reject_nonfinite) {
        wr_decode((wr_dtype)dtype, src, n, x);
    } else {
        size_t bad = wr_decode_checked((wr_dtype)dtype, src, n, x);
        if (bad < n) {
            FAIL(f, WR_E_NON_FINITE, "frame %d (%s): row %" PRIu64 " element %" PRIu64 " is %s", i,
                 what, (uint64_t)(bad / width), (uint64_t)(bad % width),
                 x[bad] != x[bad] ? "NaN" : "Inf");
            return NULL;
        }
    }
    return x;
}

static int parse_welcome(wr_in *in, const Moewire__Welcome *w, wr_msg *m, const fault *f) {
    (void)in;
    if (check_str(f, "node_id", w->node_id) || check_str(f, "fingerprint", w->fingerprint) ||
        check_str(f, "backend", w->backend) || check_str(f, "numerics", w->numerics) ||
        check_str(f, "glu", w->glu))
        return -1;
    if (w->n_glu_params > WR_MAX_GLU_PARAMS)
        return FAIL(f, WR_E_TOO_LARGE, "glu_params has %zu values, the limit is %d",
                    w->n_glu_params, WR_MAX_GLU_PARAMS);
    uint64_t bits = (uint64_t)w->n_layers * w->n_experts;
    if (check_count(f, "n_layers", w->n_layers, WR_MAX_OWNED_BITS) ||
        check_count(f, "n_experts", w->n_experts, WR_MAX_OWNED_BITS) ||
        check_count(f, "n_layers × n_experts", bits, WR_MAX_OWNED_BITS))
        return -1;
    if (w->owned.len != wr_owned_bytes(w->n_layers, w->n_experts))
        return FAIL(f, WR_E_MALFORMED, "owned bitmap is %zu bytes, %u × %u experts need %zu",
                    w->owned.len, w->n_layers, w->n_experts,
                    wr_owned_bytes(w->n_layers, w->n_experts));
    if (!(w->read_gbps >= 0.0f && w->read_gbps <= 1e6f))
        return FAIL(f, WR_E_MALFORMED, "read bandwidth %g GB/s", (double)w->read_gbps);
    if (w->live_port > 65535 || (w->live_port && w->live_token.len != WR_LIVE_TOKEN) ||
        (!w->live_port && w->live_token.len))
        return FAIL(f, WR_E_MALFORMED, "liveness port %u with a token of %zu bytes (%d expected)",
                    w->live_port, w->live_token.len, WR_LIVE_TOKEN);
    m->welcome = (wr_welcome){.node_id = str(w->node_id),
                              .fingerprint = str(w->fingerprint),
                              .backend = str(w->backend),
                              .numerics = str(w->numerics),
                              .capacity = w->capacity,
                              .threads = w->threads,
                              .n_layers = w->n_layers,
                              .n_experts = w->n_experts,
                              .width = w->width,
                              .owned = w->owned.data,
                              .glu = str(w->glu),
                              .n_glu_params = (uint32_t)w->n_glu_params,
                              .glu_params = w->glu_params,
                              .read_gbps = w->read_gbps,
                              .live_port = w->live_port,
                              .live_token = w->live_port ? w->live_token.data : NULL};
    return 0;
}

static int check_mode(const fault *f, int mode) {
    if (mode != WR_MODE_PARTIAL && mode != WR_MODE_EXACT)
        return FAIL(f, WR_E_MALFORMED, "unknown mode %d", mode);
    return 0;
}

static int parse_batch(wr_in *in, const Moewire__Envelope *env, const wr_part *parts, wr_msg *m,
                       const fault *f) {
    const Moewire__ExpertBatch *b = env->expert_batch;
    const wr_limits *lim = &in->lim;
    if (check_count(f, "rows", b->rows, lim->max_rows) ||
        check_count(f, "width", b->width, lim->max_width) ||
        check_count(f, "n_assign", b->n_assign, lim->max_assign) || check_mode(f, b->mode))
        return -1;
    if (!wr_dtype_valid(b->reply_dtype))
        return FAIL(f, WR_E_MALFORMED, "unknown reply dtype %d", (int)b->reply_dtype);
    if ((int)b->numerics < 0 || (int)b->numerics >= WR_NUM_END)
        return FAIL(f, WR_E_MALFORMED, "unknown numerics %d", (int)b->numerics);
    /* Assignments first (cheap to check), copied out of the scratch the rows' LZ4 reuses. */
    uint64_t raw = (uint64_t)b->n_assign * ASSIGN_BYTES;
    const uint8_t *ab = frame_bytes(in, env, parts, 2, "assignments", raw, f);
    if (!ab) return -1;
    if (buf_reserve(&in->assign, raw) != 0)
        return FAIL(f, WR_E_INTERNAL, "out of memory for %u assignments", b->n_assign);
    wr_assign *a = (wr_assign *)(void *)in->assign.p;
    memcpy(a, ab, raw); /* the struct is the little-endian wire layout */
    for (uint32_t j = 0; j < b->n_assign; j++) {
        if (a[j].row < 0 || (uint32_t)a[j].row >= b->rows)
            return FAIL(f, WR_E_ROW, "assignment %u names row %d of a %u-row batch", j, a[j].row,
                        b->rows);
        if (a[j].expert < 0)
            return FAIL(f, WR_E_EXPERT, "assignment %u names expert %d", j, a[j].expert);
        if (wr_first_nonfinite(&a[j].weight, 1) == 0)
            return FAIL(f, WR_E_NON_FINITE, "assignment %u has a non-finite weight", j);
    }
    const float *x = frame_rows(in, env, parts, 1, "rows", b->dtype, b->rows, b->width, f);
    if (!x) return -1;
    m->batch = (wr_batch){.layer = b->layer,
                          .rows = b->rows,
                          .width = b->width,
                          .n_assign = b->n_assign,
                          .mode = (wr_mode)b->mode,
                          .reply = {(wr_dtype)b->reply_dtype, b->reply_lz4},
                          .numerics = (wr_numerics)b->numerics,
                          .x = x,
                          .assign = a};
    return 0;
}

static int parse_partial(wr_in *in, const Moewire__Envelope *env, const wr_part *parts, wr_msg *m,
                         const fault *f) {
    const Moewire__PartialBatch *p = env->partial_batch;
    /* An exact-mode reply has one row per assignment. */
    uint32_t max_rows = (int)p->mode == WR_MODE_EXACT ? in->lim.max_assign : in->lim.max_rows;
    if (check_count(f, "rows", p->rows, max_rows) ||
        check_count(f, "width", p->width, in->lim.max_width) || check_mode(f, p->mode))
        return -1;
    const float *y = frame_rows(in, env, parts, 1, "rows", p->dtype, p->rows, p->width, f);
    if (!y) return -1;
    m->partial = (wr_partial){.layer = p->layer,
                              .rows = p->rows,
                              .width = p->width,
                              .mode = (wr_mode)p->mode,
                              .compute_ns = p->compute_ns,
                              .weight_bytes = p->weight_bytes,
                              .queue_ns = p->queue_ns,
                              .y = y};
    return 0;
}

static wr_kind kind_of(Moewire__Envelope__BodyCase c) {
    for (int k = WR_MSG_NONE + 1; k < WR_MSG_KIND_END; k++)
        if (kinds[k].body == c) return (wr_kind)k;
    return WR_MSG_NONE;
}

static int parse_body(wr_in *in, const Moewire__Envelope *env, const wr_part *parts, wr_msg *m,
                      const fault *f) {
    switch (m->kind) {
    case WR_MSG_HELLO:
        if (check_str(f, "client", env->hello->client) ||
            check_str(f, "fingerprint", env->hello->fingerprint))
            return -1;
        m->hello = (wr_hello){str(env->hello->client), str(env->hello->fingerprint)};
        return 0;
    case WR_MSG_WELCOME:
        return parse_welcome(in, env->welcome, m, f);
    case WR_MSG_EXPERT_BATCH:
        return parse_batch(in, env, parts, m, f);
    case WR_MSG_PARTIAL_BATCH:
        return parse_partial(in, env, parts, m, f);
    case WR_MSG_ERROR:
        if (check_str(f, "message", env->error->message)) return -1;
        m->error = (wr_error_msg){(int)env->error->code, str(env->error->message)};
        return 0;
    case WR_MSG_PING:
        m->ping.t_ns = env->ping->t_ns;
        return 0;
    case WR_MSG_PONG:
        m->ping.t_ns = env->pong->t_ns;
        return 0;
    default:
        return FAIL(f, WR_E_MALFORMED, "envelope has no known body");
    }
}

int wr_parse(wr_in *in, const wr_part *parts, int n, int truncated_parts, wr_msg *m, wr_code *code,
             mw_err *err) {
    fault f = {code, err};
    memset(m, 0, sizeof *m);
    *code = WR_OK;
    drop_env(in);
    in->bytes = 0;
    for (int i = 0; i < n; i++) in->bytes += parts[i].len;
    if (n < 1) return FAIL(&f, WR_E_MALFORMED, "empty message");
    if (parts[0].len > WR_MAX_ENVELOPE)
        return FAIL(&f, WR_E_TOO_LARGE, "envelope of %zu bytes exceeds %u", parts[0].len,
                    WR_MAX_ENVELOPE);
    Moewire__Envelope *env = moewire__envelope__unpack(NULL, parts[0].len, parts[0].data);
    if (!env)
        return FAIL(&f, WR_E_MALFORMED, "envelope (%zu bytes) is not a valid protobuf Envelope",
                    parts[0].len);
    in->env = env;
    m->seq = env->seq;
    m->version = env->version;
    m->kind = kind_of(env->body_case);
    int rc;
    /* An envelope with neither a version nor a body (an empty part, or only unknown fields) is
     * no moewire message at all: malformed, not a version mismatch. */
    if (env->version == 0 && m->kind == WR_MSG_NONE)
        rc = FAIL(&f, WR_E_MALFORMED, "envelope (%zu bytes) has no version and no body",
                  parts[0].len);
    else if (env->version != WR_VERSION)
        rc = FAIL(&f, WR_E_VERSION, "protocol version %u is not supported (this peer speaks %d)",
                  env->version, WR_VERSION);
    else if (m->kind == WR_MSG_NONE)
        rc = FAIL(&f, WR_E_MALFORMED, "envelope has no known body");
    else if (truncated_parts > 0 || n > WR_MAX_PARTS)
        rc = FAIL(&f, WR_E_FRAME, "message has more than %d parts", WR_MAX_PARTS);
    else if (env->n_frames != (size_t)kinds[m->kind].frames)
        rc = FAIL(&f, WR_E_FRAME, "envelope declares %zu frames, a %s has %d", env->n_frames,
                  kinds[m->kind].name, kinds[m->kind].frames);
    else if (n - 1 != kinds[m->kind].frames)
        rc = FAIL(&f, WR_E_FRAME, "message carries %d frames after the envelope, a %s has %d",
                  n - 1, kinds[m->kind].name, kinds[m->kind].frames);
    else
        rc = parse_body(in, env, parts, m, &f);
    if (rc != 0) mw_err_wrap(err, "%s seq %" PRIu64, kinds[m->kind].name, m->seq);
    return rc;
}
