/* tests/integration/test_node_malformed.c — a raw ZeroMQ client against a real expert-node process
 * (the gpt-oss fixture GGUF, a subset of experts): the fingerprint computed before it is ready; the
 * handshake; batches in partial and exact mode checked bit for bit against md_moe_exec in this
 * process; two clients at once; then every kind of malformed or refused request, each answered by
 * an Error with the right code and seq, with a valid request served right after each; an oversized
 * frame that libzmq cuts off; and a clean SIGTERM. */
#include "tests/support/mw_test.h"
#include "tests/support/mwt_node.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/md_config.h"
#include "model/md_local.h"
#include "model/md_moe.h"
#include "proto/moewire.pb-c.h"
#include "vindex/vx_source.h"
#include "wire/wr_zmq.h"

#define SPEC "0-3:0-3,2:5" /* layers 0-3 experts 0-3, plus expert 5 of layer 2 */

typedef struct fixture {
    char *dir;
    const char *model;
    pid_t pid;
    char endpoint[256];
    void *ctx;
    vx_source *src;
    md_config cfg;
    int64_t width;
} fixture;

static fixture F;

static void start_node(const char *model, const char *spec, const char *numerics,
                       const char *capacity) {
    const char *args[] = {"--experts", spec, "--numerics", numerics, "--capacity", capacity, NULL};
    mwt_node n = mwt_node_up(model, F.dir, "node", args, 30000); /* ASan builds start slowly */
    F.pid = n.pid;
    snprintf(F.endpoint, sizeof F.endpoint, "%s", n.endpoint);
}

static int setup(void **state) {
    (void)state;
    F.dir = mwt_tmpdir("node-malformed");
    F.model = mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf");
    F.ctx = zmq_ctx_new();
    mw_err e;
    if (vx_source_open(F.model, NULL, &F.src, &e) ||
        md_config_read(vx_source_meta(F.src), &F.cfg, &e))
        fail_msg("%s", e.msg);
    F.width = F.cfg.n_embd;
    assert_int_equal(F.width, 256); /* the buffers below are sized for the fixture */
    start_node(F.model, SPEC, "f32", "64");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    mwt_node_kill(&(mwt_node){.pid = F.pid});
    zmq_ctx_term(F.ctx);
    md_config_free(&F.cfg);
    vx_source_close(F.src);
    mwt_rmrf(F.dir);
    free(F.dir);
    return 0;
}

static void *dealer(void) {
    void *s = zmq_socket(F.ctx, ZMQ_DEALER);
    mw_err e;
    assert_int_equal(wr_socket_setup(s, NULL, &e), 0);
    int t = 20000;
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &t, sizeof t);
    zmq_setsockopt(s, ZMQ_SNDTIMEO, &t, sizeof t);
    assert_int_equal(zmq_connect(s, F.endpoint), 0);
    return s;
}

/* Sends raw parts, then receives and parses the reply. */
static void roundtrip_parts(void *s, const uint8_t *const *data, const size_t *len, int n,
                            wr_in *in, wr_msg *r) {
    for (int i = 0; i < n; i++)
        assert_true(zmq_send(s, len[i] ? data[i] : (const uint8_t *)"", len[i],
                             i + 1 < n ? ZMQ_SNDMORE : 0) >= 0);
    wr_rx rx;
    wr_rx_init(&rx);
    mw_err e;
    if (wr_recv(s, &rx, false, 0, &e) != 0) fail_msg("no reply from the node: %s", e.msg);
    wr_code code;
    if (wr_parse(in, rx.parts, rx.n_parts, rx.truncated, r, &code, &e) != 0)
        fail_msg("bad reply from the node: %s", e.msg);
    /* Keep the reply's parts alive for the caller: wr_parse copied tensors into `in`; strings
     * point into in's envelope. */
    wr_rx_free(&rx);
}

static void roundtrip(void *s, const wr_out *o, wr_in *in, wr_msg *r) {
    roundtrip_parts(s, o->part, o->part_len, o->n_parts, in, r);
}

static const kn_expert *lookup(void *ctx, int layer, int expert, mw_err *err) {
    static kn_expert view;
    if (vx_source_expert(ctx, layer, expert, &view, err)) return NULL;
    return &view;
}

/* What the node must return, computed here with the same executor. */
static float *expected(const wr_batch *b, md_moe_output mode) {
    md_assignment *a = malloc(b->n_assign * sizeof *a);
    for (uint32_t j = 0; j < b->n_assign; j++)
        a[j] = (md_assignment){b->assign[j].row, b->assign[j].expert, b->assign[j].weight};
    int64_t out_rows = mode == MD_MOE_EXACT ? b->n_assign : b->rows;
    float *y = malloc((size_t)out_rows * (size_t)F.width * sizeof *y);
    md_moe_exec_args args = {.layer = (int)b->layer,
                             .rows = b->rows,
                             .width = F.width,
                             .x = b->x,
                             .assign = a,
                             .n_assign = b->n_assign,
                             .mode = mode,
                             .glu = &F.cfg.glu,
                             .numerics = KN_NUM_F32,
                             .lookup = lookup,
                             .lookup_ctx = F.src};
    mw_err e;
    if (md_moe_exec(&args, y, NULL, &e)) fail_msg("%s", e.msg);
    free(a);
    return y;
}

enum { ROWS = 5, NA = 9 };
static float X[ROWS * 256];
static wr_assign A[NA];

static wr_msg valid_batch(uint64_t seq, int layer, wr_mode mode) {
    for (int i = 0; i < ROWS * F.width; i++) X[i] = sinf(0.1f * (float)i + (float)seq) * 2.0f;
    for (int j = 0; j < NA; j++)
        A[j] = (wr_assign){j % ROWS, (j * 3 + (int)seq) % 4, 0.125f * (float)(j + 1)};
    return (wr_msg){.kind = WR_MSG_EXPERT_BATCH,
                    .seq = seq,
                    .batch = {.layer = (uint32_t)layer,
                              .rows = ROWS,
                              .width = (uint32_t)F.width,
                              .n_assign = NA,
                              .mode = mode,
                              .reply = {WR_F32, false},
                              .x = X,
                              .assign = A}};
}

/* Sends a valid batch and checks the reply bit for bit. */
static void check_valid(void *s, uint64_t seq, wr_mode mode) {
    wr_msg m = valid_batch(seq, (int)(seq % 4), mode);
    wr_out o;
    wr_out_init(&o);
    assert_int_equal(wr_pack(&o, &m, (wr_codec){WR_F32, false}, NULL), 0);
    wr_in in;
    wr_in_init(&in, NULL);
    wr_msg r;
    roundtrip(s, &o, &in, &r);
    if (r.kind == WR_MSG_ERROR) fail_msg("valid batch refused: %s", r.error.message);
    assert_int_equal(r.kind, WR_MSG_PARTIAL_BATCH);
    assert_int_equal(r.seq, seq);
    assert_int_equal(r.partial.mode, mode);
    assert_true(r.partial.weight_bytes > 0);
    uint32_t rows = mode == WR_MODE_EXACT ? NA : ROWS;
    assert_int_equal(r.partial.rows, rows);
    float *want = expected(&m.batch, mode == WR_MODE_EXACT ? MD_MOE_EXACT : MD_MOE_PARTIAL);
    assert_memory_equal(r.partial.y, want, (size_t)rows * (size_t)F.width * sizeof(float));
    free(want);
    wr_in_free(&in);
    wr_out_free(&o);
}

/* A GGUF source's fingerprint reads the whole file: the node computes it before it is ready (its
 * log says so and names it), not when the first Hello comes, which with a model of many GB would
 * outlast the coordinator's handshake deadline. */
static void test_fingerprint_before_ready(void **state) {
    (void)state;
    char log[4200];
    snprintf(log, sizeof log, "%s/node.log", F.dir);
    char *l = mwt_read_file(log, NULL);
    assert_non_null(l);
    char want[128];
    snprintf(want, sizeof want, "model fingerprint %s", vx_source_fingerprint(F.src));
    if (!strstr(l, "expert-node: fingerprinting ") || !strstr(l, want))
        fail_msg("the ready node's log lacks the fingerprint (%s):\n%s", want, l);
    free(l);
}

static void test_handshake_and_valid_batches(void **state) {
    (void)state;
    void *s = dealer();
    wr_msg hello = {
        .kind = WR_MSG_HELLO, .seq = 3, .hello = {"test", vx_source_fingerprint(F.src)}};
    wr_out o;
    wr_out_init(&o);
    assert_int_equal(wr_pack(&o, &hello, (wr_codec){WR_F32, false}, NULL), 0);
    wr_in in;
    wr_in_init(&in, NULL);
    wr_msg r;
    roundtrip(s, &o, &in, &r);
    assert_int_equal(r.kind, WR_MSG_WELCOME);
    assert_int_equal(r.seq, 3);
    assert_string_equal(r.welcome.fingerprint, vx_source_fingerprint(F.src));
    assert_int_equal(r.welcome.width, F.width);
    assert_int_equal(r.welcome.n_layers, 4);
    assert_int_equal(r.welcome.n_experts, 8);
    assert_int_equal(r.welcome.capacity, 64);
    assert_string_equal(r.welcome.numerics, "f32");
    for (uint32_t l = 0; l < 4; l++)
        for (uint32_t e = 0; e < 8; e++)
            assert_int_equal(wr_owned_get(r.welcome.owned, 8, l, e), e < 4 || (l == 2 && e == 5));
    wr_msg ping = {.kind = WR_MSG_PING, .seq = 11, .ping = {12345}};
    assert_int_equal(wr_pack(&o, &ping, (wr_codec){WR_F32, false}, NULL), 0);
    roundtrip(s, &o, &in, &r);
    assert_int_equal(r.kind, WR_MSG_PONG);
    assert_int_equal(r.seq, 11);
    assert_int_equal(r.ping.t_ns, 12345);
    check_valid(s, 100, WR_MODE_PARTIAL);
    check_valid(s, 101, WR_MODE_EXACT);
    check_valid(s, 102, WR_MODE_PARTIAL);
    wr_in_free(&in);
    wr_out_free(&o);
    zmq_close(s);
}

/* Two clients with several requests queued while the node is paused, so that its next round
 * merges them (same layer and mode share one md_moe_exec): each gets its own, correct answer. */
static void test_two_clients(void **state) {
    (void)state;
    enum { PER = 3 };
    void *c[2] = {dealer(), dealer()};
    static float xs[2][PER][ROWS * 256];
    static wr_assign as[2][PER][NA];
    float *want[2][PER];
    wr_out o;
    wr_out_init(&o);
    /* One request first, so both connections are up before the pause. */
    for (int k = 0; k < 2; k++) check_valid(c[k], 500 + (uint64_t)k, WR_MODE_PARTIAL);
    assert_int_equal(kill(F.pid, SIGSTOP), 0);
    for (int i = 0; i < PER; i++) {
        for (int k = 0; k < 2; k++) {
            wr_mode mode = i == 2 ? WR_MODE_PARTIAL : WR_MODE_EXACT;
            wr_msg m = valid_batch(200 + (uint64_t)(10 * k + i), 1, mode);
            memcpy(xs[k][i], X, sizeof xs[k][i]);
            memcpy(as[k][i], A, sizeof as[k][i]);
            m.batch.x = xs[k][i];
            m.batch.assign = as[k][i];
            want[k][i] = expected(&m.batch, mode == WR_MODE_EXACT ? MD_MOE_EXACT : MD_MOE_PARTIAL);
            assert_int_equal(wr_pack(&o, &m, (wr_codec){WR_F32, false}, NULL), 0);
            mw_err e;
            assert_int_equal(wr_send(c[k], NULL, 0, &o, 0, &e), 0);
        }
    }
    usleep(100000);
    assert_int_equal(kill(F.pid, SIGCONT), 0);
    for (int k = 1; k >= 0; k--) {
        for (int i = 0; i < PER; i++) {
            wr_rx rx;
            wr_rx_init(&rx);
            mw_err e;
            assert_int_equal(wr_recv(c[k], &rx, false, 0, &e), 0);
            wr_in in;
            wr_in_init(&in, NULL);
            wr_msg r;
            wr_code code;
            assert_int_equal(wr_parse(&in, rx.parts, rx.n_parts, 0, &r, &code, &e), 0);
            if (r.kind == WR_MSG_ERROR) fail_msg("%s", r.error.message);
            assert_int_equal(r.kind, WR_MSG_PARTIAL_BATCH);
            assert_int_equal(r.seq, 200 + (uint64_t)(10 * k + i));
            assert_memory_equal(r.partial.y, want[k][i],
                                (size_t)r.partial.rows * F.width * sizeof(float));
            wr_in_free(&in);
            wr_rx_free(&rx);
            free(want[k][i]);
        }
        zmq_close(c[k]);
    }
    wr_out_free(&o);
}

/* ---- the malformed requests --------------------------------------------------------------- */

typedef void (*env_edit)(Moewire__Envelope *e);
static void v2(Moewire__Envelope *e) {
    e->version = 2;
}
static void rows_huge(Moewire__Envelope *e) {
    e->expert_batch->rows = 100000;
}
static void width_plus(Moewire__Envelope *e) {
    e->expert_batch->width = 1u << 20;
}
static void layer_99(Moewire__Envelope *e) {
    e->expert_batch->layer = 99;
}
static void q8(Moewire__Envelope *e) {
    e->expert_batch->numerics = MOEWIRE__NUMERICS__NUMERICS_Q8;
}
static void lz4_flag(Moewire__Envelope *e) {
    e->frames[0]->compression = MOEWIRE__COMPRESSION__COMPRESSION_LZ4;
}
static void no_body(Moewire__Envelope *e) {
    e->body_case = MOEWIRE__ENVELOPE__BODY__NOT_SET;
}

typedef struct bad {
    const char *name;
    wr_code code;
    const char *needle;
} bad;

/* Builds the parts of a valid batch (seq 7, layer 2) and lets `mutate` spoil them. */
typedef struct parts {
    int n;
    uint8_t *d[6];
    size_t len[6];
} parts;

static parts batch_parts(const wr_msg *m, wr_codec codec) {
    wr_out o;
    wr_out_init(&o);
    assert_int_equal(wr_pack(&o, m, codec, NULL), 0);
    parts p = {.n = o.n_parts};
    for (int i = 0; i < o.n_parts; i++) {
        p.len[i] = o.part_len[i];
        p.d[i] = malloc(p.len[i] + 16);
        memcpy(p.d[i], o.part[i], p.len[i]);
    }
    wr_out_free(&o);
    return p;
}

static void edit(parts *p, env_edit f) {
    Moewire__Envelope *env = moewire__envelope__unpack(NULL, p->len[0], p->d[0]);
    assert_non_null(env);
    Moewire__Envelope__BodyCase body = env->body_case;
    f(env);
    free(p->d[0]);
    p->d[0] = malloc(moewire__envelope__get_packed_size(env) + 1);
    p->len[0] = moewire__envelope__pack(env, p->d[0]);
    env->body_case = body;
    moewire__envelope__free_unpacked(env, NULL);
}

static void send_bad(void *s, parts *p, const bad *b, uint64_t seq) {
    wr_in in;
    wr_in_init(&in, NULL);
    wr_msg r;
    roundtrip_parts(s, (const uint8_t *const *)p->d, p->len, p->n, &in, &r);
    if (r.kind != WR_MSG_ERROR || r.error.code != (int)b->code ||
        !strstr(r.error.message, b->needle))
        fail_msg("case '%s': got %s code %s: %s", b->name, wr_kind_name(r.kind),
                 r.kind == WR_MSG_ERROR ? wr_code_name(r.error.code) : "-",
                 r.kind == WR_MSG_ERROR ? r.error.message : "");
    assert_int_equal(r.seq, seq);
    wr_in_free(&in);
    for (int i = 0; i < 6; i++) free(p->d[i]);
    memset(p, 0, sizeof *p);
}

/* Cases past the edits of a valid batch: other messages, and a batch of the wrong width, in p
 * (the valid batch's parts freed); false past the last case. */
static bool other_message(int c, wr_msg *m, parts *p, bad *b) {
    const wr_codec f32 = {WR_F32, false};
    for (int i = 0; i < 6; i++) free(p->d[i]);
    switch (c) {
    case 15: {
        *b = (bad){"partial batch to a node", WR_E_UNEXPECTED, "does not accept"};
        wr_msg pm = {.kind = WR_MSG_PARTIAL_BATCH,
                     .seq = 7,
                     .partial = {.layer = 0, .rows = 1, .width = 4, .y = X}};
        *p = batch_parts(&pm, f32);
        break;
    }
    case 16: {
        *b = (bad){"hello from another model", WR_E_FINGERPRINT, "not this node's"};
        wr_msg h = {.kind = WR_MSG_HELLO, .seq = 7, .hello = {"x", "0123456789abcdef"}};
        *p = batch_parts(&h, f32);
        break;
    }
    case 17: {
        *b = (bad){"width smaller than the model", WR_E_SHAPE, "width 255"};
        m->batch.width = (uint32_t)F.width - 1;
        *p = batch_parts(m, f32);
        break;
    }
    default:
        return false;
    }
    return true;
}

/* Case c of the malformed requests: p (the parts of a valid batch m) made bad as b says, and
 * the seq the node's Error must carry; false past the last case (p freed). */
static bool corrupt(int c, wr_msg *m, parts *p, bad *b, uint64_t *seq) {
    float nan = NAN;
    switch (c) {
    case 0:
        *b = (bad){"garbage envelope", WR_E_MALFORMED, "protobuf"};
        memset(p->d[0], 0xfe, p->len[0]);
        *seq = 0;
        break;
    case 1:
        *b = (bad){"version 2", WR_E_VERSION, "version 2"}, edit(p, v2);
        break;
    case 2:
        *b = (bad){"rows frame short", WR_E_FRAME, "frame 1"}, p->len[1] -= 4;
        break;
    case 3:
        *b = (bad){"extra frame", WR_E_FRAME, "frames"};
        p->d[3] = malloc(8);
        p->len[3] = 8;
        memset(p->d[3], 1, 8);
        p->n = 4;
        break;
    case 4:
        *b = (bad){"missing frame", WR_E_FRAME, "frames"}, p->n = 2;
        break;
    case 5:
        *b = (bad){"rows beyond capacity", WR_E_TOO_LARGE, "rows"}, edit(p, rows_huge);
        break;
    case 6:
        *b = (bad){"width beyond the model", WR_E_TOO_LARGE, "width"}, edit(p, width_plus);
        break;
    case 7:
        *b = (bad){"layer 99", WR_E_LAYER, "layer 99"}, edit(p, layer_99);
        break;
    case 8: {
        *b = (bad){"expert 99", WR_E_EXPERT, "expert 99"};
        wr_assign a = {1, 99, 0.5f};
        memcpy(p->d[2] + 12 * 3, &a, 12);
        break;
    }
    case 9: {
        *b = (bad){"expert not owned", WR_E_NOT_OWNED, "expert 6 of layer 2"};
        wr_assign a = {1, 6, 0.5f};
        memcpy(p->d[2] + 12 * 3, &a, 12);
        break;
    }
    case 10: {
        *b = (bad){"row out of range", WR_E_ROW, "row 5"};
        wr_assign a = {ROWS, 1, 0.5f};
        memcpy(p->d[2], &a, 12);
        break;
    }
    case 11:
        *b = (bad){"NaN row", WR_E_NON_FINITE, "NaN"};
        memcpy(p->d[1] + 4 * (3 * F.width + 17), &nan, 4);
        break;
    case 12:
        *b = (bad){"numerics q8", WR_E_UNEXPECTED, "numerics"}, edit(p, q8);
        break;
    case 13:
        *b = (bad){"LZ4 garbage", WR_E_FRAME, "LZ4"};
        edit(p, lz4_flag);
        p->len[1] /= 2;
        break;
    case 14:
        *b = (bad){"no body", WR_E_MALFORMED, "body"}, edit(p, no_body);
        break;
    default:
        return other_message(c, m, p, b);
    }
    return true;
}

static void test_malformed_requests(void **state) {
    (void)state;
    void *s = dealer();
    wr_codec f32 = {WR_F32, false};
    uint64_t next_valid = 300;
    for (int c = 0;; c++) {
        wr_msg m = valid_batch(7, 2, WR_MODE_PARTIAL);
        parts p = batch_parts(&m, f32);
        bad b;
        uint64_t seq = 7;
        if (!corrupt(c, &m, &p, &b, &seq)) break;
        send_bad(s, &p, &b, seq);
        check_valid(s, next_valid++, c % 2 ? WR_MODE_EXACT : WR_MODE_PARTIAL);
    }
    zmq_close(s);
}

/* A frame beyond the node's largest message: libzmq drops that connection before buffering it;
 * the node itself, and every other client, carry on. */
static void test_oversized_frame_drops_only_that_peer(void **state) {
    (void)state;
    void *s = dealer();
    size_t big = 2 * WR_MAX_ENVELOPE + 4096; /* beyond both the envelope and the frame limit */
    uint8_t *junk = calloc(1, big);
    zmq_send(s, junk, 8, ZMQ_SNDMORE);
    zmq_send(s, junk, big, 0);
    free(junk);
    int t = 1000;
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &t, sizeof t);
    zmq_msg_t m;
    zmq_msg_init(&m);
    assert_int_equal(zmq_msg_recv(&m, s, 0), -1); /* no reply: the connection was cut */
    assert_int_equal(errno, EAGAIN);
    zmq_msg_close(&m);
    zmq_close(s);
    void *other = dealer();
    check_valid(other, 400, WR_MODE_PARTIAL);
    zmq_close(other);
}

/* A batch a little over the node's limits, on a node whose largest frame exceeds the envelope
 * limit (capacity 2048 × width 256 × f32 = 2 MiB): answered ERROR_TOO_LARGE naming the limit, not
 * cut off with the connection. */
static void test_batch_just_over_the_limit_is_answered(void **state) {
    (void)state;
    pid_t first = F.pid;
    char first_ep[256];
    snprintf(first_ep, sizeof first_ep, "%s", F.endpoint);
    start_node(F.model, SPEC, "f32", "2048");
    void *s = dealer();
    enum { BIG = 2049 };
    float *x = calloc((size_t)BIG * 256, sizeof *x);
    wr_assign a[2] = {{0, 1, 0.5f}, {BIG - 1, 2, 0.25f}};
    wr_msg m = {.kind = WR_MSG_EXPERT_BATCH,
                .seq = 41,
                .batch = {.layer = 1,
                          .rows = BIG,
                          .width = (uint32_t)F.width,
                          .n_assign = 2,
                          .reply = {WR_F32, false},
                          .x = x,
                          .assign = a}};
    wr_codec f32 = {WR_F32, false};
    parts p = batch_parts(&m, f32);
    bad b = {"2049 rows", WR_E_TOO_LARGE, "rows 2049 exceeds the limit 2048"};
    send_bad(s, &p, &b, 41);
    /* one row declared, a rows frame over the 2 MiB frame limit */
    m.seq = 42;
    m.batch.rows = 1;
    a[1].row = 0;
    p = batch_parts(&m, f32);
    p.len[1] = (2u << 20) + 256;
    p.d[1] = realloc(p.d[1], p.len[1]);
    memset(p.d[1], 0, p.len[1]);
    b = (bad){"rows frame over the frame limit", WR_E_TOO_LARGE, "the limit is 2097152"};
    send_bad(s, &p, &b, 42);
    free(x);
    zmq_close(s);
    kill(F.pid, SIGKILL);
    mwt_wait(F.pid, 5000);
    F.pid = first;
    snprintf(F.endpoint, sizeof F.endpoint, "%s", first_ep);
}

static void test_sigterm_stops_cleanly(void **state) {
    (void)state;
    assert_int_equal(kill(F.pid, SIGTERM), 0);
    int st = mwt_wait(F.pid, 5000);
    F.pid = -1;
    assert_int_equal(st, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fingerprint_before_ready),
        cmocka_unit_test(test_handshake_and_valid_batches),
        cmocka_unit_test(test_two_clients),
        cmocka_unit_test(test_malformed_requests),
        cmocka_unit_test(test_oversized_frame_drops_only_that_peer),
        cmocka_unit_test(test_batch_just_over_the_limit_is_answered),
        cmocka_unit_test(test_sigterm_stops_cleanly),
    };
    return cmocka_run_group_tests_name("expert node, raw client", tests, setup, teardown);
}
