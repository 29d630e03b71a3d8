/* tests/unit/test_co_remote.c — the remote expert backend (coordinator/co_remote.h) against fake
 * expert nodes in this process: each fake is a thread with a ROUTER bound on inproc:// in the
 * backend's ZeroMQ context, answering Hello with a Welcome it is told to give (or an Error) and
 * ExpertBatches with outputs of a made-up expert function (or not at all). The tests pin the
 * handshake checks, the coverage check, how replicas share the work, the deadline, and the combine
 * order: node order for partial sums, selection order in exact mode, bit for bit. */
#include "tests/support/mw_test.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "coordinator/co_remote.h"
#include "util/mw_time.h"
#include "wire/wr_msg.h"
#include "wire/wr_zmq.h"

#define NL    2  /* layers */
#define NE    6  /* experts per layer */
#define NW    64 /* width */
#define NT    5  /* rows per batch */
#define NK    4  /* experts per row */
#define NODES 3
#define FP    "fingerprint-of-the-test-model"

/* The test model's experts run SiTU; every fake announces this unless told otherwise. */
static const kn_glu model_glu = {.kind = KN_GLU_SITU, .beta = 4.0f, .lbeta = 2.5f};

/* Expert e of any layer: y = x · 2^(24·(e % 3) - 24) + e. Outputs 2^24 apart in magnitude make
 * every order of summation give different bits, so the combine order shows. */
static void expert_fn(int e, const float *x, float *y) {
    const float s = ldexpf(1.0f, 24 * (e % 3) - 24);
    for (int i = 0; i < NW; i++) y[i] = x[i] * s + (float)e;
}

typedef struct fake {
    void *sock;
    pthread_t thread;
    atomic_bool stop;
    char endpoint[64];
    /* what it answers */
    const char *fingerprint;
    uint32_t width, capacity;
    bool owns[NL][NE];
    const char *backend;  /* NULL: "fake" */
    const char *glu_name; /* the GLU it announces (NULL: model_glu's) */
    int n_glu;            /* with these parameters (glu_name set) */
    float glu_params[WR_MAX_GLU_PARAMS];
    bool refuse; /* Hello gets an Error */
    bool silent; /* ExpertBatches get no answer */
    /* what it saw */
    atomic_int seen[NL][NE]; /* assignments received per (layer, expert) */
    atomic_int batches;
} fake;

static void *zctx;
static fake fakes[NODES];
/* The backend under test: the teardown destroys what a failed assertion left (its sockets must
 * close before the context can end). */
static md_expert_backend *be;

static void send_welcome(fake *f, wr_out *out, const wr_rx *rx, uint64_t seq) {
    uint8_t owned[(NL * NE + 7) / 8] = {0};
    for (int l = 0; l < NL; l++)
        for (int e = 0; e < NE; e++)
            if (f->owns[l][e]) owned[(l * NE + e) / 8] |= (uint8_t)(1u << ((l * NE + e) % 8));
    float p[KN_GLU_MAX_PARAMS];
    const int n_p = kn_glu_params(&model_glu, p);
    wr_msg w = {.kind = WR_MSG_WELCOME,
                .seq = seq,
                .welcome = {.node_id = f->endpoint,
                            .fingerprint = f->fingerprint,
                            .backend = f->backend ? f->backend : "fake",
                            .numerics = "f32,q8",
                            .capacity = f->capacity,
                            .threads = 1,
                            .n_layers = NL,
                            .n_experts = NE,
                            .width = f->width,
                            .owned = owned,
                            .glu = f->glu_name ? f->glu_name : kn_glu_name(model_glu.kind),
                            .n_glu_params = (uint32_t)(f->glu_name ? f->n_glu : n_p),
                            .glu_params = f->glu_name ? f->glu_params : p}};
    if (wr_pack(out, &w, (wr_codec){WR_F32, false}, NULL) == 0)
        wr_send(f->sock, rx->id, rx->id_len, out, 0, NULL);
}

/* Partial mode: each row's sum over its assignments, in the order they came (md_moe_accumulate,
 * as a node reduces); exact mode: one output row per assignment. */
static void answer_batch(fake *f, wr_out *out, const wr_rx *rx, uint64_t seq, const wr_batch *b) {
    const bool exact = b->mode == WR_MODE_EXACT;
    const size_t n_out = exact ? b->n_assign : b->rows;
    float *y = calloc(n_out * NW, sizeof *y), tmp[NW];
    for (uint32_t a = 0; a < b->n_assign; a++) {
        const wr_assign *as = &b->assign[a];
        atomic_fetch_add(&f->seen[b->layer][as->expert], 1);
        expert_fn(as->expert, b->x + (size_t)as->row * NW, tmp);
        if (exact)
            memcpy(y + (size_t)a * NW, tmp, sizeof tmp);
        else
            md_moe_accumulate(y + (size_t)as->row * NW, tmp, as->weight, NW);
    }
    wr_msg m = {.kind = WR_MSG_PARTIAL_BATCH,
                .seq = seq,
                .partial = {.layer = b->layer,
                            .rows = (uint32_t)n_out,
                            .width = NW,
                            .mode = b->mode,
                            .weight_bytes = 1000 * b->n_assign,
                            .y = y}};
    if (wr_pack(out, &m, b->reply, NULL) == 0) wr_send(f->sock, rx->id, rx->id_len, out, 0, NULL);
    free(y);
}

static void *fake_main(void *arg) {
    fake *f = arg;
    wr_rx rx;
    wr_in in;
    wr_out out;
    wr_rx_init(&rx);
    wr_in_init(&in, NULL);
    wr_out_init(&out);
    while (!atomic_load(&f->stop)) {
        zmq_pollitem_t it = {f->sock, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 20) <= 0) continue;
        wr_msg m;
        wr_code code;
        if (wr_recv(f->sock, &rx, true, 0, NULL) ||
            wr_parse(&in, rx.parts, rx.n_parts, rx.truncated, &m, &code, NULL))
            continue;
        if (m.kind == WR_MSG_HELLO && f->refuse) {
            if (wr_pack_error(&out, m.seq, WR_E_FINGERPRINT, "not this node's model", NULL) == 0)
                wr_send(f->sock, rx.id, rx.id_len, &out, 0, NULL);
        } else if (m.kind == WR_MSG_HELLO) {
            send_welcome(f, &out, &rx, m.seq);
        } else if (m.kind == WR_MSG_EXPERT_BATCH) {
            atomic_fetch_add(&f->batches, 1);
            if (!f->silent) answer_batch(f, &out, &rx, m.seq, &m.batch);
        }
    }
    wr_rx_free(&rx);
    wr_in_free(&in);
    wr_out_free(&out);
    return NULL;
}

/* Fake i as told by its fields (set them before starting it). */
static void start_fake(int i) {
    fake *f = &fakes[i];
    snprintf(f->endpoint, sizeof f->endpoint, "inproc://fake-node-%d", i);
    f->sock = zmq_socket(zctx, ZMQ_ROUTER);
    assert_non_null(f->sock);
    assert_int_equal(wr_socket_setup(f->sock, NULL, NULL), 0);
    assert_int_equal(zmq_bind(f->sock, f->endpoint), 0);
    atomic_store(&f->stop, false);
    assert_int_equal(pthread_create(&f->thread, NULL, fake_main, f), 0);
}

/* A fake serving the test model, owning the experts e with e % every == i % every. */
static void init_fake(int i, int every) {
    fake *f = &fakes[i];
    memset(f, 0, sizeof *f);
    f->fingerprint = FP;
    f->width = NW;
    f->capacity = 4096;
    for (int l = 0; l < NL; l++)
        for (int e = 0; e < NE; e++) f->owns[l][e] = e % every == i % every;
}

static int setup(void **state) {
    (void)state;
    zctx = zmq_ctx_new();
    return zctx ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    if (be) be->destroy(be);
    be = NULL;
    for (int i = 0; i < NODES; i++) {
        fake *f = &fakes[i];
        if (!f->sock) continue;
        atomic_store(&f->stop, true);
        pthread_join(f->thread, NULL);
        zmq_close(f->sock);
        f->sock = NULL;
    }
    zmq_ctx_term(zctx);
    zctx = NULL;
    return 0;
}

static co_remote_opts opts(int n_nodes, bool exact) {
    static const char *eps[NODES] = {"inproc://fake-node-0", "inproc://fake-node-1",
                                     "inproc://fake-node-2"};
    return (co_remote_opts){.endpoints = eps,
                            .n_nodes = n_nodes,
                            .codec = {WR_F32, false},
                            .exact = exact,
                            .deadline_ms = 5000,
                            .connect_ms = 2000,
                            .fingerprint = FP,
                            .n_layers = NL,
                            .n_experts = NE,
                            .width = NW,
                            .glu = &model_glu,
                            .numerics = KN_NUM_F32,
                            .zctx = zctx};
}

/* A batch of NT rows, each selecting NK distinct experts (shifted per row) with distinct weights.
 */
typedef struct batch {
    float x[NT * NW];
    int32_t experts[NT * NK];
    float weights[NT * NK];
    md_moe_batch b;
} batch;

static void make_batch(batch *bt, int layer) {
    for (int i = 0; i < NT * NW; i++) bt->x[i] = (float)((i * 37) % 101) / 7.0f - 5.0f;
    for (int t = 0; t < NT; t++)
        for (int j = 0; j < NK; j++) {
            bt->experts[t * NK + j] = (t + 5 * j) % NE;
            bt->weights[t * NK + j] = 0.125f * (float)(j + 1) + 0.01f * (float)t;
        }
    bt->b = (md_moe_batch){.layer = layer,
                           .T = NT,
                           .width = NW,
                           .x = bt->x,
                           .k = NK,
                           .experts = bt->experts,
                           .weights = bt->weights,
                           .numerics = KN_NUM_F32};
}

/* Exact mode's reference: every row in selection order. reverse = the wrong (last-first) order. */
static void ref_exact(const batch *bt, float *out, bool reverse) {
    float y[NW];
    memset(out, 0, sizeof(float) * NT * NW);
    for (int t = 0; t < NT; t++)
        for (int q = 0; q < NK; q++) {
            const int j = reverse ? NK - 1 - q : q;
            expert_fn(bt->experts[t * NK + j], bt->x + t * NW, y);
            md_moe_accumulate(out + t * NW, y, bt->weights[t * NK + j], NW);
        }
}

/* Partial mode's reference: node n's sum over the experts owner(e) == n gives, added per row in
 * node order (or the reverse) where the node had work for the row. */
static void ref_partial(const batch *bt, int n_nodes, int (*owner)(int layer, int e), float *out,
                        bool reverse) {
    float p[NW], y[NW];
    memset(out, 0, sizeof(float) * NT * NW);
    for (int t = 0; t < NT; t++)
        for (int q = 0; q < n_nodes; q++) {
            const int n = reverse ? n_nodes - 1 - q : q;
            bool any = false;
            memset(p, 0, sizeof p);
            for (int j = 0; j < NK; j++) {
                const int e = bt->experts[t * NK + j];
                if (owner(bt->b.layer, e) != n) continue;
                expert_fn(e, bt->x + t * NW, y);
                md_moe_accumulate(p, y, bt->weights[t * NK + j], NW);
                any = true;
            }
            if (any) md_moe_accumulate(out + t * NW, p, 1.0f, NW);
        }
}

static int owner_mod3(int layer, int e) {
    (void)layer;
    return e % 3;
}

static void test_partial_sums_combine_in_node_order(void **state) {
    (void)state;
    for (int i = 0; i < NODES; i++) init_fake(i, 3), start_fake(i);
    co_remote_opts o = opts(NODES, false);
    mw_err err;
    if (co_remote_new(&o, &be, &err)) fail_msg("%s", err.msg);
    batch bt;
    make_batch(&bt, 1);
    float out[NT * NW], want[NT * NW], wrong[NT * NW];
    if (be->run(be, &bt.b, out, &err)) fail_msg("%s", err.msg);
    ref_partial(&bt, NODES, owner_mod3, want, false);
    ref_partial(&bt, NODES, owner_mod3, wrong, true);
    assert_memory_equal(out, want, sizeof out);
    /* the fixture tells the orders apart */
    assert_true(memcmp(want, wrong, sizeof want) != 0);
    for (int i = 0; i < NODES; i++) assert_int_equal(atomic_load(&fakes[i].batches), 1);
}

static void test_exact_mode_combines_in_selection_order(void **state) {
    (void)state;
    for (int i = 0; i < NODES; i++) init_fake(i, 3), start_fake(i);
    co_remote_opts o = opts(NODES, true);
    mw_err err;
    if (co_remote_new(&o, &be, &err)) fail_msg("%s", err.msg);
    batch bt;
    make_batch(&bt, 0);
    float out[NT * NW], want[NT * NW], wrong[NT * NW];
    /* the two halves: submitted, then awaited */
    if (md_expert_submit(be, &bt.b, out, &err) || md_expert_wait(be, &bt.b, out, &err))
        fail_msg("%s", err.msg);
    ref_exact(&bt, want, false);
    ref_exact(&bt, wrong, true);
    assert_memory_equal(out, want, sizeof out);
    assert_true(memcmp(want, wrong, sizeof want) != 0);
    /* the movement counters saw every reply */
    co_remote_summary s = co_remote_summarize(be);
    assert_int_equal(s.tokens, NT);
    assert_int_equal(s.total.batches, NODES);
    assert_int_equal(s.total.assignments, NT * NK);
    assert_int_equal(s.total.weight_bytes, 1000 * NT * NK);
}

/* Batch row t alone, as a batch of one row. */
static void one_row(const batch *all, int t, batch *one) {
    *one = *all;
    memcpy(one->x, all->x + t * NW, sizeof(float) * NW);
    memcpy(one->experts, all->experts + t * NK, sizeof(int32_t) * NK);
    memcpy(one->weights, all->weights + t * NK, sizeof(float) * NK);
    one->b.T = 1;
    one->b.x = one->x;
    one->b.experts = one->experts;
    one->b.weights = one->weights;
}

/* Every node owns every expert, partial mode: a row's experts go to replicas chosen from the row
 * alone, so a row gives the same bits alone or among others, and the work spreads over both. */
static void test_replicas_partial_by_the_row(void **state) {
    (void)state;
    for (int i = 0; i < 2; i++) init_fake(i, 1), start_fake(i);
    co_remote_opts o = opts(2, false);
    mw_err err;
    if (co_remote_new(&o, &be, &err)) fail_msg("%s", err.msg);
    for (int layer = 0; layer < NL; layer++) {
        batch bt, one;
        make_batch(&bt, layer);
        float out[NT * NW], again[NT * NW], alone[NW];
        if (be->run(be, &bt.b, out, &err) || be->run(be, &bt.b, again, &err))
            fail_msg("%s", err.msg);
        assert_memory_equal(out, again, sizeof out);
        for (int t = 0; t < NT; t++) {
            one_row(&bt, t, &one);
            if (be->run(be, &one.b, alone, &err)) fail_msg("%s", err.msg);
            assert_memory_equal(alone, out + t * NW, sizeof alone);
        }
    }
    int seen[2] = {0};
    for (int n = 0; n < 2; n++)
        for (int l = 0; l < NL; l++)
            for (int e = 0; e < NE; e++) seen[n] += atomic_load(&fakes[n].seen[l][e]);
    assert_true(seen[0] > 0 && seen[1] > 0);
}

/* Exact mode: one-row steps (a decode) alternate over the replicas, the least loaded first; every
 * result is the in-process one bit for bit, whichever replica computed it. */
static void test_replicas_exact_share_the_load(void **state) {
    (void)state;
    for (int i = 0; i < 2; i++) init_fake(i, 1), start_fake(i);
    co_remote_opts o = opts(2, true);
    mw_err err;
    if (co_remote_new(&o, &be, &err)) fail_msg("%s", err.msg);
    batch bt, one;
    make_batch(&bt, 0);
    for (int step = 0; step < 20; step++) {
        one_row(&bt, step % NT, &one);
        float out[NW], want[NT * NW];
        if (be->run(be, &one.b, out, &err)) fail_msg("%s", err.msg);
        ref_exact(&bt, want, false);
        assert_memory_equal(out, want + (step % NT) * NW, sizeof out);
    }
    int seen[2] = {0};
    for (int n = 0; n < 2; n++)
        for (int e = 0; e < NE; e++) seen[n] += atomic_load(&fakes[n].seen[0][e]);
    assert_int_equal(seen[0] + seen[1], 20 * NK);
    assert_true(seen[0] >= 32 && seen[1] >= 32); /* an even split is 40 each */
}

/* A small capacity cuts a node's rows into several batches; the result is the same. */
static void test_capacity_splits_batches(void **state) {
    (void)state;
    for (int i = 0; i < NODES; i++) {
        init_fake(i, 3);
        fakes[i].capacity = 2;
        start_fake(i);
    }
    co_remote_opts o = opts(NODES, true);
    mw_err err;
    if (co_remote_new(&o, &be, &err)) fail_msg("%s", err.msg);
    batch bt;
    make_batch(&bt, 1);
    float out[NT * NW], want[NT * NW];
    if (be->run(be, &bt.b, out, &err)) fail_msg("%s", err.msg);
    ref_exact(&bt, want, false);
    assert_memory_equal(out, want, sizeof out);
    int total = 0;
    for (int i = 0; i < NODES; i++) total += atomic_load(&fakes[i].batches);
    assert_true(total > NODES); /* some node had more than 2 rows */
}

static void test_unowned_experts_are_refused(void **state) {
    (void)state;
    for (int i = 0; i < 2; i++) init_fake(i, 1);
    memset(fakes[0].owns, 0, sizeof fakes[0].owns);
    memset(fakes[1].owns, 0, sizeof fakes[1].owns);
    for (int e = 0; e < 3; e++) fakes[0].owns[0][e] = true; /* layer 0: 0-2 and 3; 4-5 nobody */
    fakes[1].owns[0][3] = true;
    for (int e = 0; e < 4; e++) fakes[1].owns[1][e] = true; /* layer 1: 0-3; 4-5 nobody */
    for (int i = 0; i < 2; i++) start_fake(i);
    co_remote_opts o = opts(2, false);
    mw_err err;
    assert_int_equal(co_remote_new(&o, &be, &err), -1);
    assert_null(be);
    assert_string_equal(err.msg, "4 experts are owned by no node (layer:experts): 0:4-5, 1:4-5");
    /* a dense layer is not asked for: with layer 1 dense only layer 0's gap remains */
    const uint8_t moe[NL] = {1, 0};
    o.layer_moe = moe;
    assert_int_equal(co_remote_new(&o, &be, &err), -1);
    assert_string_equal(err.msg, "2 experts are owned by no node (layer:experts): 0:4-5");
    fakes[1].owns[0][4] = fakes[1].owns[0][5] = true; /* the next Welcome covers layer 0 */
    if (co_remote_new(&o, &be, &err)) fail_msg("%s", err.msg);
}

static void test_handshake_refusals(void **state) {
    (void)state;
    init_fake(0, 1);
    fakes[0].refuse = true;
    start_fake(0);
    co_remote_opts o = opts(1, false);
    mw_err err;
    assert_int_equal(co_remote_new(&o, &be, &err), -1);
    assert_non_null(strstr(err.msg, "node 0 (inproc://fake-node-0) refused the handshake: "
                                    "fingerprint: not this node's model"));
    fakes[0].refuse = false;
    fakes[0].fingerprint = "another-model";
    assert_int_equal(co_remote_new(&o, &be, &err), -1);
    assert_non_null(strstr(err.msg, "serves model another-model, the coordinator's is " FP));
    fakes[0].fingerprint = FP;
    fakes[0].width = NW + 1;
    assert_int_equal(co_remote_new(&o, &be, &err), -1);
    assert_non_null(strstr(err.msg, "serves width 65, 2 layers × 6 experts; the model has 64"));
    fakes[0].width = NW;
    fakes[0].capacity = 0;
    assert_int_equal(co_remote_new(&o, &be, &err), -1);
    assert_non_null(strstr(err.msg, "announces capacity 0"));
    assert_null(be);
}

/* Exact mode keeps Metal and CPU owners of one expert apart; partial mode, two Metal owners, or
 * a Metal and a CPU node owning different experts are served. */
static void test_exact_mode_keeps_metal_and_cpu_apart(void **state) {
    (void)state;
    for (int i = 0; i < 2; i++) init_fake(i, 1), start_fake(i);
    fakes[0].backend = "cpu-avx2";
    fakes[1].backend = "metal-apple-m2-ultra";
    co_remote_opts o = opts(2, true);
    mw_err err;
    assert_int_equal(co_remote_new(&o, &be, &err), -1);
    if (!strstr(err.msg, "exact mode: expert 0:0 is owned by node ") ||
        !strstr(err.msg, "(cpu-avx2)") || !strstr(err.msg, "(metal-apple-m2-ultra)"))
        fail_msg("%s", err.msg);
    assert_null(be);
    o.exact = false;
    if (co_remote_new(&o, &be, &err)) fail_msg("%s", err.msg);
    be->destroy(be);
    be = NULL;
    o.exact = true;
    fakes[0].backend = "metal-apple-m4-max";
    if (co_remote_new(&o, &be, &err)) fail_msg("%s", err.msg);
    be->destroy(be);
    be = NULL;
    fakes[0].backend = "cpu-neon";
    for (int i = 0; i < 2; i++) /* even experts on 0, odd on 1 */
        for (int l = 0; l < NL; l++)
            for (int e = 0; e < NE; e++) fakes[i].owns[l][e] = e % 2 == i;
    fakes[1].backend = "metal-apple-m2-ultra";
    if (co_remote_new(&o, &be, &err)) fail_msg("%s", err.msg);
}

/* The node's experts must run the model's GLU policy, parameters bit for bit: another kind,
 * another parameter, none announced, an unknown kind and a malformed one are each refused at the
 * handshake, naming the node and both policies. */
static void test_glu_mismatch_is_refused(void **state) {
    (void)state;
    init_fake(0, 1);
    start_fake(0);
    co_remote_opts o = opts(1, false);
    mw_err err;
    static const struct {
        const char *name;
        int n;
        float p[2];
        const char *says;
    } cases[] = {
        {"swiglu",
         0,
         {0},
         "runs experts with GLU swiglu; the model's is situ(beta=4, "
         "linear_beta=2.5)"},
        {"situ",
         2,
         {4.0f, 0.0f},
         "runs experts with GLU situ(beta=4, linear_beta=0); the "
         "model's is situ(beta=4, linear_beta=2.5)"},
        {"situ", 2, {4.0000005f, 2.5f}, "GLU situ(beta=4.00000048, linear_beta=2.5); the model's"},
        {"", 0, {0}, "announces no GLU policy; the model's experts run situ(beta=4, "},
        {"geglu", 0, {0}, "GLU 'geglu', which this coordinator does not know"},
        {"situ", 1, {4.0f}, "announces a GLU policy that cannot run: GLU situ takes 2 parameters"},
        {"situ", 2, {-4.0f, 1.0f}, "beta = -4 must be finite and > 0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fakes[0].glu_name = cases[i].name;
        fakes[0].n_glu = cases[i].n;
        memcpy(fakes[0].glu_params, cases[i].p, sizeof cases[i].p);
        assert_int_equal(co_remote_new(&o, &be, &err), -1);
        assert_null(be);
        if (!strstr(err.msg, "node 0 (inproc://fake-node-0)") || !strstr(err.msg, cases[i].says))
            fail_msg("case %zu: %s", i, err.msg);
    }
    fakes[0].glu_name = NULL; /* the model's own: accepted */
    if (co_remote_new(&o, &be, &err)) fail_msg("%s", err.msg);
    be->destroy(be);
    be = NULL;
    /* the coordinator must know its own */
    o.glu = NULL;
    assert_int_equal(co_remote_new(&o, &be, &err), -1);
    assert_non_null(strstr(err.msg, "GLU policy is required"));
}

/* A node that never answers: at the deadline it is lost, and without a replica the layer fails,
 * naming the node, the layer and the experts nobody serves. */
static void test_silent_node_misses_the_deadline(void **state) {
    (void)state;
    for (int i = 0; i < 2; i++) init_fake(i, 2), start_fake(i);
    fakes[1].silent = true;
    co_remote_opts o = opts(2, false);
    o.deadline_ms = 300;
    mw_err err;
    if (co_remote_new(&o, &be, &err)) fail_msg("%s", err.msg);
    batch bt;
    make_batch(&bt, 0);
    float out[NT * NW];
    const int64_t t0 = mw_now_ms();
    assert_int_equal(be->run(be, &bt.b, out, &err), -1);
    const int64_t dt = mw_now_ms() - t0;
    /* lost at the deadline, and with no replica its experts are unserved: both named */
    if (!strstr(err.msg, "node 1 (inproc://fake-node-1) is down (no answer for layer 0 within the "
                         "300 ms deadline)") ||
        !strstr(err.msg, "have no live owner"))
        fail_msg("%s", err.msg);
    assert_true(dt >= 300 && dt < 3000);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_partial_sums_combine_in_node_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exact_mode_combines_in_selection_order, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_replicas_partial_by_the_row, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replicas_exact_share_the_load, setup, teardown),
        cmocka_unit_test_setup_teardown(test_capacity_splits_batches, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unowned_experts_are_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_handshake_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_glu_mismatch_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exact_mode_keeps_metal_and_cpu_apart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_silent_node_misses_the_deadline, setup, teardown),
    };
    return cmocka_run_group_tests_name("co_remote", tests, NULL, NULL);
}
