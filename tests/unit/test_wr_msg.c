/* tests/unit/test_wr_msg.c — packing and parsing of every message kind with every codec, the
 * malformed-message corpus (each fault → its error code, naming the frame), a mutation fuzz pass
 * (no crash, always a code), and movement accounting. */
#include "tests/support/mw_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "proto/moewire.pb-c.h"
#include "wire/wr_msg.h"
#include "wire/wr_stats.h"

enum { ROWS = 5, WIDTH = 37, NA = 9 };

static float X[ROWS * WIDTH];
static wr_assign A[NA];

static void fill_batch(void) {
    for (int i = 0; i < ROWS * WIDTH; i++) X[i] = sinf((float)i * 0.37f) * (float)(1 + i % 7);
    for (int j = 0; j < NA; j++) A[j] = (wr_assign){j % ROWS, (j * 7) % 32, 0.1f * (float)(j + 1)};
}

static wr_msg batch_msg(void) {
    return (wr_msg){.kind = WR_MSG_EXPERT_BATCH,
                    .seq = 42,
                    .batch = {.layer = 3,
                              .rows = ROWS,
                              .width = WIDTH,
                              .n_assign = NA,
                              .mode = WR_MODE_EXACT,
                              .reply = {WR_BF16, true},
                              .numerics = WR_NUM_Q8,
                              .x = X,
                              .assign = A}};
}

/* Copies o's parts into owned buffers the corpus can mutate. */
typedef struct parts {
    int n;
    uint8_t *data[8];
    size_t len[8];
} parts;

static parts copy_parts(const wr_out *o) {
    parts p = {.n = o->n_parts};
    for (int i = 0; i < o->n_parts; i++) {
        p.len[i] = o->part_len[i];
        p.data[i] = malloc(p.len[i] + 1);
        memcpy(p.data[i], o->part[i], p.len[i]);
    }
    return p;
}

static void free_parts(parts *p) {
    for (int i = 0; i < 8; i++) free(p->data[i]);
    memset(p, 0, sizeof *p);
}

static int parse_parts(wr_in *in, const parts *p, int truncated, wr_msg *m, wr_code *code,
                       mw_err *err) {
    wr_part v[8];
    for (int i = 0; i < p->n; i++) v[i] = (wr_part){p->data[i], p->len[i]};
    return wr_parse(in, v, p->n, truncated, m, code, err);
}

/* Re-encodes part 0 after `edit` changed the unpacked envelope. */
typedef void (*env_edit)(Moewire__Envelope *env);
static void edit_envelope(parts *p, env_edit edit) {
    Moewire__Envelope *env = moewire__envelope__unpack(NULL, p->len[0], p->data[0]);
    assert_non_null(env);
    size_t n_frames = env->n_frames; /* edits may hide parts of the tree: restore before freeing */
    Moewire__Envelope__BodyCase body = env->body_case;
    edit(env);
    size_t len = moewire__envelope__get_packed_size(env);
    free(p->data[0]);
    p->data[0] = malloc(len + 1);
    p->len[0] = moewire__envelope__pack(env, p->data[0]);
    env->n_frames = n_frames;
    env->body_case = body;
    moewire__envelope__free_unpacked(env, NULL);
}

/* Parses what o packed; a failure fails the test with the parser's message. */
static void parse_out(wr_in *in, const wr_out *o, wr_msg *r) {
    wr_part v[WR_MAX_PARTS];
    for (int k = 0; k < o->n_parts; k++) v[k] = (wr_part){o->part[k], o->part_len[k]};
    wr_code code;
    mw_err e;
    if (wr_parse(in, v, o->n_parts, 0, r, &code, &e) != 0) fail_msg("%s", e.msg);
}

static void test_batch_round_trip_every_codec(void **state) {
    (void)state;
    fill_batch();
    for (int d = WR_F32; d < WR_DTYPE_END; d++) {
        for (int lz = 0; lz < 2; lz++) {
            wr_codec codec = {(wr_dtype)d, lz};
            wr_out o;
            wr_out_init(&o);
            wr_msg m = batch_msg();
            mw_err e;
            assert_int_equal(wr_pack(&o, &m, codec, &e), 0);
            assert_int_equal(o.n_parts, 3);
            wr_in in;
            wr_in_init(&in, NULL);
            wr_msg r;
            parse_out(&in, &o, &r);
            assert_int_equal(r.kind, WR_MSG_EXPERT_BATCH);
            assert_int_equal(r.version, WR_VERSION);
            assert_int_equal(r.seq, 42);
            assert_int_equal(r.batch.layer, 3);
            assert_int_equal(r.batch.rows, ROWS);
            assert_int_equal(r.batch.width, WIDTH);
            assert_int_equal(r.batch.n_assign, NA);
            assert_int_equal(r.batch.mode, WR_MODE_EXACT);
            assert_int_equal(r.batch.reply.dtype, WR_BF16);
            assert_true(r.batch.reply.lz4);
            assert_int_equal(r.batch.numerics, WR_NUM_Q8);
            assert_memory_equal(r.batch.assign, A, sizeof A);
            float want[ROWS * WIDTH];
            uint8_t enc[ROWS * WIDTH * 4];
            wr_encode(codec.dtype, X, ROWS * WIDTH, enc);
            wr_decode(codec.dtype, enc, ROWS * WIDTH, want);
            assert_memory_equal(r.batch.x, want, sizeof want);
            assert_int_equal(in.bytes, o.bytes);
            wr_in_free(&in);
            wr_out_free(&o);
        }
    }
}

/* Rows gathered while packing (x_rows) go on the wire as the same rows copied out first would. */
static void test_batch_rows_gathered(void **state) {
    (void)state;
    fill_batch();
    static const int32_t pick[3] = {4, 1, 3};
    float copied[3 * WIDTH];
    for (int i = 0; i < 3; i++)
        memcpy(copied + i * WIDTH, X + pick[i] * WIDTH, sizeof(float) * WIDTH);
    wr_assign a[3] = {{0, 5, 0.5f}, {1, 6, 0.25f}, {2, 7, 0.25f}};
    for (int d = WR_F32; d < WR_DTYPE_END; d++) {
        wr_codec codec = {(wr_dtype)d, false};
        wr_msg m = batch_msg();
        m.batch.rows = 3;
        m.batch.n_assign = 3;
        m.batch.assign = a;
        wr_out want, got;
        wr_out_init(&want);
        wr_out_init(&got);
        mw_err e;
        m.batch.x = copied;
        assert_int_equal(wr_pack(&want, &m, codec, &e), 0);
        m.batch.x = X;
        m.batch.x_rows = pick;
        assert_int_equal(wr_pack(&got, &m, codec, &e), 0);
        assert_int_equal(got.n_parts, want.n_parts);
        for (int i = 0; i < want.n_parts; i++) {
            assert_int_equal(got.part_len[i], want.part_len[i]);
            assert_memory_equal(got.part[i], want.part[i], want.part_len[i]);
        }
        static const int32_t bad[3] = {4, -1, 3};
        m.batch.x_rows = bad;
        assert_int_equal(wr_pack(&got, &m, codec, &e), -1);
        wr_out_free(&want);
        wr_out_free(&got);
    }
}

static void test_lz4_frames_are_flagged_and_decoded(void **state) {
    (void)state;
    /* Rows of few distinct values compress well; a random row does not. */
    enum { R = 8, W = 2880 };
    static float x[R * W];
    for (int i = 0; i < R * W; i++) x[i] = (float)((i / 97) % 4);
    static wr_assign a[64];
    for (int j = 0; j < 64; j++) a[j] = (wr_assign){j % R, j % 4, 0.25f};
    wr_msg m = {.kind = WR_MSG_EXPERT_BATCH,
                .seq = 7,
                .batch = {.layer = 0,
                          .rows = R,
                          .width = W,
                          .n_assign = 64,
                          .reply = {WR_F16, false},
                          .x = x,
                          .assign = a}};
    wr_out o;
    wr_out_init(&o);
    mw_err e;
    assert_int_equal(wr_pack(&o, &m, (wr_codec){WR_F16, true}, &e), 0);
    assert_true(o.part_len[1] <= wr_lz4_limit(R * W * 2));
    assert_true(o.part_len[2] <= wr_lz4_limit(64 * 12));
    Moewire__Envelope *env = moewire__envelope__unpack(NULL, o.part_len[0], o.part[0]);
    assert_int_equal(env->frames[0]->compression, MOEWIRE__COMPRESSION__COMPRESSION_LZ4);
    assert_int_equal(env->frames[0]->raw_bytes, R * W * 2);
    moewire__envelope__free_unpacked(env, NULL);
    wr_in in;
    wr_in_init(&in, NULL);
    wr_msg r;
    parse_out(&in, &o, &r);
    assert_memory_equal(r.batch.x, x, sizeof x); /* small integers are exact in f16 */
    assert_memory_equal(r.batch.assign, a, sizeof a);
    /* Same message without +lz4: raw frames. */
    assert_int_equal(wr_pack(&o, &m, (wr_codec){WR_F16, false}, &e), 0);
    assert_int_equal(o.part_len[1], R * W * 2);
    /* Random rows with +lz4: LZ4 does not pay, frame sent raw. */
    static float saved[R * W];
    memcpy(saved, x, sizeof x);
    for (int i = 0; i < R * W; i++) x[i] = sinf((float)i * 12.9898f) * 43758.5453f;
    assert_int_equal(wr_pack(&o, &m, (wr_codec){WR_F32, true}, &e), 0);
    assert_int_equal(o.part_len[1], R * W * 4);
    assert_true(o.part_len[2] < 64 * 12); /* the assignments' slot still compresses */
    /* After that miss the rows slot skips WR_LZ4_BACKOFF attempts, even on compressible rows,
     * and tries again on the next; every packing still parses to the same rows. */
    memcpy(x, saved, sizeof x);
    for (int k = 0; k <= WR_LZ4_BACKOFF; k++) {
        assert_int_equal(wr_pack(&o, &m, (wr_codec){WR_F16, true}, &e), 0);
        if (k < WR_LZ4_BACKOFF)
            assert_int_equal(o.part_len[1], R * W * 2);
        else
            assert_true(o.part_len[1] <= wr_lz4_limit(R * W * 2));
        parse_out(&in, &o, &r);
        assert_memory_equal(r.batch.x, x, sizeof x);
    }
    wr_in_free(&in);
    wr_out_free(&o);
}

static void test_other_kinds_round_trip(void **state) {
    (void)state;
    uint8_t owned[wr_owned_bytes(3, 10)];
    memset(owned, 0, sizeof owned);
    owned[0] = 0x81; /* (0,0) and (0,7) */
    owned[3] = 0x01; /* bit 24 = (2,4) */
    float y[2 * 11];
    for (int i = 0; i < 22; i++) y[i] = (float)i - 10.5f;
    const float glu[2] = {4.0f, -0.0f};
    wr_msg msgs[] = {
        {.kind = WR_MSG_HELLO, .seq = 1, .hello = {"coord-a", "abc123"}},
        {.kind = WR_MSG_WELCOME,
         .seq = 1,
         .welcome = {"node-1", "abc123", "cpu-avx2", "f32", 4096, 2, 3, 10, 2880, owned, "situ", 2,
                     glu, 612.5f, 40123, (const uint8_t *)"0123456789abcdef"}},
        {.kind = WR_MSG_PARTIAL_BATCH,
         .seq = 9,
         .partial = {5, 2, 11, WR_MODE_PARTIAL, 12345, 67890, 4444, y}},
        {.kind = WR_MSG_ERROR,
         .seq = 9,
         .error = {WR_E_NOT_OWNED, "expert 3 of layer 1 is not owned"}},
        {.kind = WR_MSG_PING, .seq = 2, .ping = {99}},
        {.kind = WR_MSG_PONG, .seq = 2, .ping = {99}},
    };
    wr_out o;
    wr_out_init(&o);
    wr_in in;
    wr_in_init(&in, NULL);
    for (size_t i = 0; i < sizeof msgs / sizeof msgs[0]; i++) {
        mw_err e;
        assert_int_equal(wr_pack(&o, &msgs[i], (wr_codec){WR_F32, true}, &e), 0);
        wr_msg r;
        parse_out(&in, &o, &r);
        assert_int_equal(r.kind, msgs[i].kind);
        assert_int_equal(r.seq, msgs[i].seq);
        switch (r.kind) {
        case WR_MSG_HELLO:
            assert_string_equal(r.hello.client, "coord-a");
            assert_string_equal(r.hello.fingerprint, "abc123");
            break;
        case WR_MSG_WELCOME:
            assert_string_equal(r.welcome.node_id, "node-1");
            assert_string_equal(r.welcome.backend, "cpu-avx2");
            assert_string_equal(r.welcome.numerics, "f32");
            assert_int_equal(r.welcome.capacity, 4096);
            assert_int_equal(r.welcome.width, 2880);
            assert_true(r.welcome.read_gbps == 612.5f);
            assert_true(wr_owned_get(r.welcome.owned, 10, 0, 0));
            assert_true(wr_owned_get(r.welcome.owned, 10, 0, 7));
            assert_true(wr_owned_get(r.welcome.owned, 10, 2, 4));
            assert_false(wr_owned_get(r.welcome.owned, 10, 1, 0));
            assert_string_equal(r.welcome.glu, "situ");
            assert_int_equal(r.welcome.n_glu_params, 2);
            assert_memory_equal(r.welcome.glu_params, glu, sizeof glu); /* -0 stays -0 */
            assert_int_equal(r.welcome.live_port, 40123);
            assert_memory_equal(r.welcome.live_token, "0123456789abcdef", WR_LIVE_TOKEN);
            break;
        case WR_MSG_PARTIAL_BATCH:
            assert_int_equal(r.partial.layer, 5);
            assert_int_equal(r.partial.compute_ns, 12345);
            assert_int_equal(r.partial.weight_bytes, 67890);
            assert_int_equal(r.partial.queue_ns, 4444);
            assert_memory_equal(r.partial.y, y, sizeof y);
            break;
        case WR_MSG_ERROR:
            assert_int_equal(r.error.code, WR_E_NOT_OWNED);
            assert_string_equal(r.error.message, "expert 3 of layer 1 is not owned");
            break;
        default:
            assert_int_equal(r.ping.t_ns, 99);
        }
    }
    wr_in_free(&in);
    wr_out_free(&o);
}

/* ---- the malformed corpus ------------------------------------------------------------------- */

static void set_version_2(Moewire__Envelope *e) {
    e->version = 2;
}
static void set_version_0(Moewire__Envelope *e) {
    e->version = 0;
}
static void version_0_no_body(Moewire__Envelope *e) {
    e->version = 0;
    e->body_case = MOEWIRE__ENVELOPE__BODY__NOT_SET;
}
static void rows_huge(Moewire__Envelope *e) {
    e->expert_batch->rows = 1u << 30;
}
static void rows_zero(Moewire__Envelope *e) {
    e->expert_batch->rows = 0;
}
static void width_huge(Moewire__Envelope *e) {
    e->expert_batch->width = 0xffffffffu;
}
static void n_assign_more(Moewire__Envelope *e) {
    e->expert_batch->n_assign++;
}
static void n_assign_huge(Moewire__Envelope *e) {
    e->expert_batch->n_assign = 0xffffffffu;
}
static void dtype_zero(Moewire__Envelope *e) {
    e->expert_batch->dtype = 0;
}
static void dtype_99(Moewire__Envelope *e) {
    e->expert_batch->dtype = 99;
}
static void dtype_f16(Moewire__Envelope *e) {
    e->expert_batch->dtype = MOEWIRE__DTYPE__DTYPE_F16;
}
static void reply_dtype_bad(Moewire__Envelope *e) {
    e->expert_batch->reply_dtype = 7;
}
static void mode_bad(Moewire__Envelope *e) {
    e->expert_batch->mode = 5;
}
static void numerics_bad(Moewire__Envelope *e) {
    e->expert_batch->numerics = 7;
}
static void raw_bytes_lie(Moewire__Envelope *e) {
    e->frames[0]->raw_bytes += 4;
}
static void raw_bytes_huge(Moewire__Envelope *e) {
    e->frames[0]->raw_bytes = 1ull << 62;
}
static void flag_lz4(Moewire__Envelope *e) {
    e->frames[0]->compression = MOEWIRE__COMPRESSION__COMPRESSION_LZ4;
}
static void compression_bad(Moewire__Envelope *e) {
    e->frames[1]->compression = 9;
}
static void one_frame_desc(Moewire__Envelope *e) {
    e->n_frames = 1;
}
static void no_body(Moewire__Envelope *e) {
    e->body_case = MOEWIRE__ENVELOPE__BODY__NOT_SET;
}

typedef enum mutation {
    M_NONE,
    M_EMPTY,            /* zero parts */
    M_EMPTY_ENVELOPE,   /* part 0 of 0 bytes: no version, no body */
    M_GARBAGE_ENVELOPE, /* not protobuf */
    M_TRUNC_ENVELOPE,   /* envelope cut in the middle */
    M_TRUNC_ROWS,       /* rows frame one byte short */
    M_LONG_ROWS,        /* rows frame one byte long */
    M_TRUNC_ASSIGN,     /* assignments frame cut */
    M_DROP_FRAME,       /* last frame missing */
    M_EXTRA_FRAME,      /* one frame too many */
    M_TOO_MANY_PARTS,   /* transport dropped parts beyond the maximum */
    M_HUGE_ENVELOPE,
    M_LZ4_GARBAGE, /* flagged LZ4, raw bytes inside */
    M_ROW_OUT_OF_RANGE,
    M_ROW_NEGATIVE,
    M_EXPERT_NEGATIVE,
    M_WEIGHT_NAN,
    M_ROW_NAN,
    M_ROW_INF,
    M_EDIT, /* envelope edit */
} mutation;

typedef struct corpus_case {
    const char *name;
    mutation mut;
    env_edit edit;
    wr_code code;
    const char *needle; /* must appear in the error message */
} corpus_case;

static const corpus_case corpus[] = {
    {"empty message", M_EMPTY, NULL, WR_E_MALFORMED, "empty"},
    {"empty envelope", M_EMPTY_ENVELOPE, NULL, WR_E_MALFORMED, "no version and no body"},
    {"version 0, no body", M_EDIT, version_0_no_body, WR_E_MALFORMED, "no version and no body"},
    {"garbage envelope", M_GARBAGE_ENVELOPE, NULL, WR_E_MALFORMED, "protobuf"},
    {"truncated envelope", M_TRUNC_ENVELOPE, NULL, WR_E_MALFORMED, "protobuf"},
    {"version 2", M_EDIT, set_version_2, WR_E_VERSION, "version 2"},
    {"version 0", M_EDIT, set_version_0, WR_E_VERSION, "version 0"},
    {"rows frame short", M_TRUNC_ROWS, NULL, WR_E_FRAME, "frame 1 (rows)"},
    {"rows frame long", M_LONG_ROWS, NULL, WR_E_FRAME, "frame 1 (rows)"},
    {"assignments cut", M_TRUNC_ASSIGN, NULL, WR_E_FRAME, "frame 2 (assignments)"},
    {"missing frame", M_DROP_FRAME, NULL, WR_E_FRAME, "frames"},
    {"extra frame", M_EXTRA_FRAME, NULL, WR_E_FRAME, "frames"},
    {"too many parts", M_TOO_MANY_PARTS, NULL, WR_E_FRAME, "parts"},
    {"huge envelope", M_HUGE_ENVELOPE, NULL, WR_E_TOO_LARGE, "envelope"},
    {"rows 2^30", M_EDIT, rows_huge, WR_E_TOO_LARGE, "rows"},
    {"rows 0", M_EDIT, rows_zero, WR_E_MALFORMED, "rows is 0"},
    {"width 2^32-1", M_EDIT, width_huge, WR_E_TOO_LARGE, "width"},
    {"n_assign disagrees", M_EDIT, n_assign_more, WR_E_FRAME, "frame 2 (assignments)"},
    {"n_assign 2^32-1", M_EDIT, n_assign_huge, WR_E_TOO_LARGE, "n_assign"},
    {"dtype 0", M_EDIT, dtype_zero, WR_E_MALFORMED, "dtype"},
    {"dtype 99", M_EDIT, dtype_99, WR_E_MALFORMED, "dtype"},
    {"dtype disagrees with frame", M_EDIT, dtype_f16, WR_E_FRAME, "frame 1 (rows)"},
    {"reply dtype 7", M_EDIT, reply_dtype_bad, WR_E_MALFORMED, "reply dtype"},
    {"mode 5", M_EDIT, mode_bad, WR_E_MALFORMED, "mode"},
    {"numerics 7", M_EDIT, numerics_bad, WR_E_MALFORMED, "numerics"},
    {"raw bytes lie", M_EDIT, raw_bytes_lie, WR_E_FRAME, "raw bytes"},
    {"raw bytes 2^62", M_EDIT, raw_bytes_huge, WR_E_FRAME, "raw bytes"},
    {"lz4 flag on raw data", M_LZ4_GARBAGE, flag_lz4, WR_E_FRAME, "LZ4"},
    {"compression 9", M_EDIT, compression_bad, WR_E_MALFORMED, "compression"},
    {"frame descs 1", M_EDIT, one_frame_desc, WR_E_FRAME, "declares 1 frames"},
    {"no body", M_EDIT, no_body, WR_E_MALFORMED, "no known body"},
    {"row out of range", M_ROW_OUT_OF_RANGE, NULL, WR_E_ROW, "row 5 of a 5-row"},
    {"row negative", M_ROW_NEGATIVE, NULL, WR_E_ROW, "row -1"},
    {"expert negative", M_EXPERT_NEGATIVE, NULL, WR_E_EXPERT, "expert -3"},
    {"weight NaN", M_WEIGHT_NAN, NULL, WR_E_NON_FINITE, "weight"},
    {"row NaN", M_ROW_NAN, NULL, WR_E_NON_FINITE, "row 2 element 5 is NaN"},
    {"row Inf", M_ROW_INF, NULL, WR_E_NON_FINITE, "row 4 element 36 is Inf"},
};

static void set_assign(parts *p, int j, wr_assign a) {
    memcpy(p->data[2] + 12 * j, &a, 12);
}

static void apply(parts *p, const corpus_case *c, int *truncated) {
    wr_assign a = A[4];
    float f;
    switch (c->mut) {
    case M_EMPTY:
        p->n = 0;
        break;
    case M_EMPTY_ENVELOPE:
        p->len[0] = 0;
        break;
    case M_GARBAGE_ENVELOPE:
        memset(p->data[0], 0xff, p->len[0]);
        break;
    case M_TRUNC_ENVELOPE:
        p->len[0] -= 3;
        break;
    case M_TRUNC_ROWS:
        p->len[1] -= 1;
        break;
    case M_LONG_ROWS:
        p->data[1] = realloc(p->data[1], p->len[1] + 1);
        p->data[1][p->len[1]++] = 0;
        break;
    case M_TRUNC_ASSIGN:
        p->len[2] -= 5;
        break;
    case M_DROP_FRAME:
        p->n = 2;
        break;
    case M_EXTRA_FRAME:
        p->data[3] = malloc(4);
        p->len[3] = 4;
        memset(p->data[3], 0, 4);
        p->n = 4;
        break;
    case M_TOO_MANY_PARTS:
        *truncated = 3;
        break;
    case M_HUGE_ENVELOPE:
        p->data[0] = realloc(p->data[0], WR_MAX_ENVELOPE + 1);
        p->len[0] = WR_MAX_ENVELOPE + 1;
        break;
    case M_LZ4_GARBAGE:
        edit_envelope(p, c->edit);
        p->len[1] -= 64; /* shorter than raw, so it is read as LZ4 */
        memset(p->data[1], 0xf0, p->len[1]);
        break;
    case M_ROW_OUT_OF_RANGE:
        a.row = ROWS;
        set_assign(p, 4, a);
        break;
    case M_ROW_NEGATIVE:
        a.row = -1;
        set_assign(p, 4, a);
        break;
    case M_EXPERT_NEGATIVE:
        a.expert = -3;
        set_assign(p, 4, a);
        break;
    case M_WEIGHT_NAN:
        a.weight = NAN;
        set_assign(p, 4, a);
        break;
    case M_ROW_NAN:
        f = NAN;
        memcpy(p->data[1] + 4 * (2 * WIDTH + 5), &f, 4);
        break;
    case M_ROW_INF:
        f = -INFINITY;
        memcpy(p->data[1] + 4 * (4 * WIDTH + 36), &f, 4);
        break;
    case M_EDIT:
        edit_envelope(p, c->edit);
        break;
    case M_NONE:
        break;
    }
}

static void test_malformed_corpus(void **state) {
    (void)state;
    fill_batch();
    wr_out o;
    wr_out_init(&o);
    wr_msg m = batch_msg();
    assert_int_equal(wr_pack(&o, &m, (wr_codec){WR_F32, false}, NULL), 0);
    wr_in in;
    wr_in_init(&in, NULL);
    for (size_t i = 0; i < sizeof corpus / sizeof corpus[0]; i++) {
        const corpus_case *c = &corpus[i];
        parts p = copy_parts(&o);
        int truncated = 0;
        apply(&p, c, &truncated);
        wr_msg r;
        wr_code code = WR_OK;
        mw_err e = {{0}};
        int rc = parse_parts(&in, &p, truncated, &r, &code, &e);
        if (rc != -1 || code != c->code || !strstr(e.msg, c->needle))
            fail_msg("case '%s': rc %d, code %s (want %s), message: %s", c->name, rc,
                     wr_code_name(code), wr_code_name(c->code), e.msg);
        /* Once the envelope is readable, the reply can name the request. */
        if (c->mut >= M_TRUNC_ROWS && c->mut != M_HUGE_ENVELOPE) {
            assert_int_equal(r.seq, 42);
            assert_non_null(strstr(e.msg, "seq 42"));
        }
        free_parts(&p);
        /* The same wr_in parses a valid message right after. */
        p = copy_parts(&o);
        if (parse_parts(&in, &p, 0, &r, &code, &e) != 0) fail_msg("after '%s': %s", c->name, e.msg);
        free_parts(&p);
    }
    wr_in_free(&in);
    wr_out_free(&o);
}

static void test_limits_are_the_receivers(void **state) {
    (void)state;
    fill_batch();
    wr_out o;
    wr_out_init(&o);
    wr_msg m = batch_msg();
    assert_int_equal(wr_pack(&o, &m, (wr_codec){WR_F32, false}, NULL), 0);
    parts p = copy_parts(&o);
    wr_limits lim = wr_limits_default();
    lim.max_frame_bytes = ROWS * WIDTH * 4 - 1;
    wr_in in;
    wr_in_init(&in, &lim);
    wr_msg r;
    wr_code code;
    mw_err e;
    assert_int_equal(parse_parts(&in, &p, 0, &r, &code, &e), -1);
    assert_int_equal(code, WR_E_TOO_LARGE);
    wr_in_free(&in);
    lim = wr_limits_default();
    lim.max_rows = ROWS - 1;
    wr_in_init(&in, &lim);
    assert_int_equal(parse_parts(&in, &p, 0, &r, &code, &e), -1);
    assert_int_equal(code, WR_E_TOO_LARGE);
    wr_in_free(&in);
    /* NaN rows pass when the receiver does not refuse them (weights are always checked). */
    lim = wr_limits_default();
    lim.reject_nonfinite = false;
    wr_in_init(&in, &lim);
    float nan = NAN;
    memcpy(p.data[1], &nan, 4);
    assert_int_equal(parse_parts(&in, &p, 0, &r, &code, &e), 0);
    assert_true(isnan(r.batch.x[0]));
    wr_in_free(&in);
    free_parts(&p);
    wr_out_free(&o);
}

static void bad_owned_len(Moewire__Envelope *e) {
    e->welcome->owned.len--;
}
static void welcome_zero_layers(Moewire__Envelope *e) {
    e->welcome->n_layers = 0;
}
static void welcome_huge(Moewire__Envelope *e) {
    e->welcome->n_layers = 1u << 20;
    e->welcome->n_experts = 1u << 20;
}
static void welcome_many_glu_params(Moewire__Envelope *e) { /* it had none */
    e->welcome->n_glu_params = WR_MAX_GLU_PARAMS + 1;
    e->welcome->glu_params = calloc(WR_MAX_GLU_PARAMS + 1, sizeof(float));
}

static void welcome_nan_bandwidth(Moewire__Envelope *e) {
    e->welcome->read_gbps = NAN;
}
static void welcome_negative_bandwidth(Moewire__Envelope *e) {
    e->welcome->read_gbps = -1.0f;
}

static void test_malformed_welcome_and_partial(void **state) {
    (void)state;
    uint8_t owned[5] = {0}; /* ceil(4 × 9 / 8) */
    wr_msg w = {.kind = WR_MSG_WELCOME,
                .welcome = {"n", "f", "b", "f32", 1, 1, 4, 9, 64, owned, "swiglu", 0, NULL}};
    static const env_edit edits[] = {bad_owned_len,         welcome_zero_layers,
                                     welcome_huge,          welcome_many_glu_params,
                                     welcome_nan_bandwidth, welcome_negative_bandwidth};
    static const wr_code codes[] = {WR_E_MALFORMED, WR_E_MALFORMED, WR_E_TOO_LARGE,
                                    WR_E_TOO_LARGE, WR_E_MALFORMED, WR_E_MALFORMED};
    wr_out o;
    wr_out_init(&o);
    wr_in in;
    wr_in_init(&in, NULL);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(wr_pack(&o, &w, (wr_codec){WR_F32, false}, NULL), 0);
        parts p = copy_parts(&o);
        edit_envelope(&p, edits[i]);
        wr_msg r;
        wr_code code;
        mw_err e;
        assert_int_equal(parse_parts(&in, &p, 0, &r, &code, &e), -1);
        assert_int_equal(code, codes[i]);
        assert_non_null(strstr(e.msg, "welcome"));
        free_parts(&p);
    }
    /* A partial batch whose frame is short of its declared shape. */
    float y[3 * 4] = {0};
    wr_msg pm = {
        .kind = WR_MSG_PARTIAL_BATCH, .seq = 5, .partial = {1, 3, 4, WR_MODE_PARTIAL, 0, 0, 0, y}};
    assert_int_equal(wr_pack(&o, &pm, (wr_codec){WR_F16, false}, NULL), 0);
    parts p = copy_parts(&o);
    p.len[1] -= 2;
    wr_msg r;
    wr_code code;
    mw_err e;
    assert_int_equal(parse_parts(&in, &p, 0, &r, &code, &e), -1);
    assert_int_equal(code, WR_E_FRAME);
    assert_non_null(strstr(e.msg, "partial_batch seq 5"));
    free_parts(&p);
    wr_in_free(&in);
    wr_out_free(&o);
}

/* Random mutations of valid messages: every outcome is a clean success or a coded error. */
static void test_mutation_fuzz(void **state) {
    (void)state;
    fill_batch();
    wr_out o;
    wr_out_init(&o);
    wr_in in;
    wr_in_init(&in, NULL);
    uint64_t s = 12345;
    int failures = 0;
    for (int iter = 0; iter < 3000; iter++) {
        wr_msg m = batch_msg();
        wr_codec codec = {(wr_dtype)(1 + iter % 3), iter % 2};
        assert_int_equal(wr_pack(&o, &m, codec, NULL), 0);
        parts p = copy_parts(&o);
        int flips = 1 + iter % 4;
        for (int k = 0; k < flips; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            int part = (int)((s >> 33) % (uint64_t)p.n);
            if (p.len[part] == 0) continue;
            size_t pos = (size_t)((s >> 13) % p.len[part]);
            p.data[part][pos] ^= (uint8_t)(1u << ((s >> 5) % 8));
            if ((s >> 40) % 7 == 0) p.len[part] = pos; /* sometimes cut the part there */
        }
        wr_msg r;
        wr_code code = WR_OK;
        mw_err e = {{0}};
        if (parse_parts(&in, &p, 0, &r, &code, &e) != 0) {
            assert_true(code > WR_OK && code < WR_CODE_END);
            assert_true(e.msg[0] != '\0');
            failures++;
        }
        free_parts(&p);
    }
    assert_true(failures > 100); /* the mutations do reach the checks */
    wr_in_free(&in);
    wr_out_free(&o);
}

static void test_movement_accounting(void **state) {
    (void)state;
    wr_stats s;
    mw_err e;
    assert_int_equal(wr_stats_init(&s, 2, 3, &e), 0);
    wr_stats_at(&s, 0, 1)->tx_bytes = 100;
    wr_stats_at(&s, 0, 1)->weight_bytes = 1000;
    wr_stats_at(&s, 1, 1)->rx_bytes = 50;
    wr_stats_at(&s, 1, 2)->rx_bytes = 25;
    wr_stats_at(&s, 1, 2)->weight_bytes = 500;
    wr_stats_at(&s, 1, 2)->rtt_max_ns = 7;
    wr_stats_ctrl(&s, 0)->tx_bytes = 999; /* control traffic stays out of the ratio */
    assert_null(wr_stats_at(&s, 2, 0));
    assert_null(wr_stats_at(&s, 0, 3));
    assert_null(wr_stats_at(&s, -1, 0));
    wr_counters all = wr_stats_sum(&s, -1, -1);
    assert_int_equal(all.tx_bytes + all.rx_bytes, 175);
    assert_int_equal(all.rtt_max_ns, 7);
    assert_true(fabs(wr_movement_ratio(&all) - 175.0 / 1500.0) < 1e-12);
    wr_counters layer1 = wr_stats_sum(&s, -1, 1);
    assert_true(fabs(wr_movement_ratio(&layer1) - 150.0 / 1000.0) < 1e-12);
    wr_counters node1 = wr_stats_sum(&s, 1, -1);
    assert_int_equal(node1.rx_bytes, 75);
    wr_counters none = {0};
    assert_true(wr_movement_ratio(&none) == 0.0);
    wr_stats_reset(&s);
    assert_int_equal(wr_stats_sum(&s, -1, -1).tx_bytes, 0);
    wr_stats_free(&s);
    assert_int_equal(wr_stats_init(&s, 0, 3, &e), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_round_trip_every_codec),
        cmocka_unit_test(test_batch_rows_gathered),
        cmocka_unit_test(test_lz4_frames_are_flagged_and_decoded),
        cmocka_unit_test(test_other_kinds_round_trip),
        cmocka_unit_test(test_malformed_corpus),
        cmocka_unit_test(test_limits_are_the_receivers),
        cmocka_unit_test(test_malformed_welcome_and_partial),
        cmocka_unit_test(test_mutation_fuzz),
        cmocka_unit_test(test_movement_accounting),
    };
    return cmocka_run_group_tests_name("wire messages", tests, NULL, NULL);
}
