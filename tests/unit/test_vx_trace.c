/* tests/unit/test_vx_trace.c — routing traces: what the writer writes is what the reader reads,
 * a full ring drops whole records and says so, and every corruption of the file (header, body,
 * truncation, an unfinished trace, records that are well checksummed but wrong) is refused with a
 * message naming it; then the routing statistics of a trace whose counts are known by hand. */
#include "tests/support/mw_test.h"
#include "vindex/vx_rstats.h"
#include "vindex/vx_trace.h"
#include "vindex/vx_trace_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static vx_trace_info info(uint32_t L, uint32_t E, uint32_t k) {
    vx_trace_info i = {.n_layer = L, .n_expert = E, .k = k};
    memset(i.fingerprint, 'a', VX_TRACE_FP_HEX);
    snprintf(i.family, sizeof i.family, "qwen3moe");
    return i;
}

static char *tpath(const char *name) {
    static char buf[4][4200];
    static int n;
    char *p = buf[n++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s", mwt_tmp, name);
    return p;
}

/* Two steps of a 2-layer, 8-expert, top-2 model: step 0 has 3 rows, step 1 one row. */
static const int32_t rows0[3][4] = {{0, 0, 11, 0}, {0, 1, 12, 0}, {1, 0, 13, 1}};
static const int32_t ids0[2][6] = {{0, 1, 0, 1, 2, 3}, {7, 6, 5, 4, 7, 6}};
static const float w0[6] = {0.75f, 0.25f, 0.5f, 0.5f, 0.9f, 0.1f};
static const int32_t rows1[1][4] = {{0, 2, 14, 1}};
static const int32_t ids1[2] = {0, 2};
static const float w1[2] = {0.6f, 0.4f};

static void write_sample(const char *path, size_t ring) {
    vx_trace_info i = info(2, 8, 2);
    vx_trace_writer *w;
    mw_err err;
    if (vx_trace_create(path, &i, ring, &w, &err)) fail_msg("%s", err.msg);
    vx_trace_step(w, 3, &rows0[0][0], &rows0[0][1], &rows0[0][2], 4);
    vx_trace_layer(w, 0, 3, 2, ids0[0], w0);
    vx_trace_layer(w, 1, 3, 2, ids0[1], w0);
    vx_trace_step(w, 1, &rows1[0][0], &rows1[0][1], &rows1[0][2], 4);
    vx_trace_layer(w, 1, 1, 2, ids1, w1);
    vx_trace_counts c;
    if (vx_trace_finish(w, &c, &err)) fail_msg("%s", err.msg);
    assert_int_equal(c.steps, 2);
    assert_int_equal(c.layer_records, 3);
    assert_int_equal(c.rows, 4);
    assert_int_equal(c.assignments, 14);
    assert_int_equal(c.dropped, 0);
}

static void test_round_trip(void **state) {
    (void)state;
    const char *p = tpath("a.trace");
    write_sample(p, 0);
    vx_trace_reader *r;
    mw_err err;
    if (vx_trace_open(p, &r, &err)) fail_msg("%s", err.msg);
    assert_string_equal(vx_trace_info_of(r)->family, "qwen3moe");
    assert_int_equal(strlen(vx_trace_sha256(r)), 64);
    vx_trace_event ev;
    assert_int_equal(vx_trace_next(r, &ev, &err), 1);
    assert_int_equal(ev.kind, VX_TRACE_STEP);
    assert_int_equal(ev.T, 3);
    assert_int_equal(ev.rows[2 * 3 + 0], 1); /* row 2: seq 1, pos 0, token 13 */
    assert_int_equal(ev.rows[2 * 3 + 2], 13);
    for (int l = 0; l < 2; l++) {
        assert_int_equal(vx_trace_next(r, &ev, &err), 1);
        assert_int_equal(ev.kind, VX_TRACE_LAYER);
        assert_int_equal(ev.layer, l);
        for (int j = 0; j < 6; j++) assert_int_equal(ev.ids[j], ids0[l][j]);
        assert_memory_equal(ev.weights, w0, sizeof w0);
    }
    assert_int_equal(vx_trace_next(r, &ev, &err), 1);
    assert_int_equal(ev.rows[1], 2);
    assert_int_equal(vx_trace_next(r, &ev, &err), 1);
    assert_int_equal(ev.ids[1], 2);
    assert_true(ev.weights[0] == 0.6f);
    assert_int_equal(vx_trace_next(r, &ev, &err), 0);
    vx_trace_close(r);
}

/* A layer record larger than the whole ring is dropped and counted; the file stays valid. */
static void test_full_ring_drops_whole_records(void **state) {
    (void)state;
    const char *p = tpath("drop.trace");
    vx_trace_info i = info(1, 8, 2);
    vx_trace_writer *w;
    mw_err err;
    if (vx_trace_create(p, &i, 1, &w, &err)) fail_msg("%s", err.msg); /* the smallest ring */
    enum { T = 40000 };                                               /* 480 KB of ids+weights */
    int32_t *rows = calloc(T * 3, sizeof *rows), *ids = calloc(T * 2, sizeof *ids);
    float *wt = calloc(T * 2, sizeof *wt);
    vx_trace_step(w, 1, rows, rows + 1, rows + 2, 3);
    vx_trace_layer(w, 0, 1, 2, ids, wt);
    vx_trace_step(w, T, rows, rows + 1, rows + 2, 3); /* does not fit: its layers go with it */
    vx_trace_layer(w, 0, T, 2, ids, wt);
    vx_trace_counts c;
    if (vx_trace_finish(w, &c, &err)) fail_msg("%s", err.msg);
    assert_int_equal(c.steps, 1);
    assert_int_equal(c.layer_records, 1);
    assert_int_equal(c.dropped, 1);
    vx_trace_reader *r;
    if (vx_trace_open(p, &r, &err)) fail_msg("%s", err.msg);
    assert_int_equal(vx_trace_counts_of(r)->dropped, 1);
    vx_trace_event ev;
    int n = 0, got;
    while ((got = vx_trace_next(r, &ev, &err)) == 1) n++;
    assert_int_equal(got, 0);
    assert_int_equal(n, 2);
    vx_trace_close(r);
    free(rows);
    free(ids);
    free(wt);
}

static void expect_refused(const char *path, const char *fault) {
    vx_trace_reader *r = NULL;
    mw_err err = {{0}};
    int rc = vx_trace_open(path, &r, &err);
    if (rc == 0) { /* the header and checksum held: a record must be refused */
        vx_trace_event ev;
        while ((rc = vx_trace_next(r, &ev, &err)) == 1) {
        }
        vx_trace_close(r);
        if (rc == 0) fail_msg("%s read cleanly, expected '%s'", path, fault);
    }
    if (!strstr(err.msg, fault)) fail_msg("error '%s' lacks '%s'", err.msg, fault);
}

static uint8_t *load(const char *path, size_t *n) {
    uint8_t *b = mwt_read_file(path, n);
    assert_non_null(b);
    return b;
}

static void save(const char *path, const uint8_t *b, size_t n) {
    assert_int_equal(mwt_write_file(path, b, n), 0);
}

/* Rewrites the header's counts and both checksums, so only the records themselves are wrong. */
static void resign(uint8_t *b, size_t n, const vx_trace_counts *c) {
    vx_trace_info i = info(2, 8, 2);
    vx_trace_counts cc = *c;
    cc.body_bytes = n - VX_TRACE_HEADER_BYTES;
    uint8_t d[VX_DIGEST_BYTES];
    vx_blake2b(b + VX_TRACE_HEADER_BYTES, cc.body_bytes, d);
    vx_trace__encode_header(&i, &cc, d, b);
}

static void test_corruption_is_refused(void **state) {
    (void)state;
    const char *good = tpath("good.trace"), *bad = tpath("bad.trace");
    write_sample(good, 0);
    size_t n;
    uint8_t *b = load(good, &n);
    const vx_trace_counts c = {2, 3, 4, 14, 0, 0};
    struct {
        size_t off;
        uint8_t val;
        bool sign;
        const char *fault;
    } cases[] = {
        {0, 'X', false, "not a moewire routing trace"},
        {VX_TH_N_EXPERT, 9, false, "header's checksum"},
        {VX_TRACE_HEADER_BYTES + 20, 0xff, false, "body's checksum"},
        {VX_TH_FLAGS, 0, false, "never finished"},
        /* step record (8 + 36 bytes), then layer 0's header: layer, T, k; then ids */
        {VX_TRACE_HEADER_BYTES + 44 + 4, 9, true, "layer 9"},
        {VX_TRACE_HEADER_BYTES + 44 + 8, 2, true, "2 rows"},
        {VX_TRACE_HEADER_BYTES + 44 + 16, 8, true, "expert 8"},
        {VX_TRACE_HEADER_BYTES + 44, 7, true, "unknown record tag 7"},
        {VX_TRACE_HEADER_BYTES, 2, true, "before any step"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t *m = malloc(n);
        memcpy(m, b, n);
        m[cases[i].off] = cases[i].val;
        if (cases[i].sign) resign(m, n, &c);
        if (cases[i].off == VX_TH_FLAGS) /* unfinished: its writer's header, re-checksummed */
            vx_blake2b(m, VX_TH_SELF_B2, m + VX_TH_SELF_B2);
        save(bad, m, n);
        expect_refused(bad, cases[i].fault);
        free(m);
    }
    /* a weight that is not finite, well signed */
    uint8_t *m = malloc(n);
    memcpy(m, b, n);
    const float nan = NAN;
    memcpy(m + VX_TRACE_HEADER_BYTES + 44 + 16 + 12, &nan, 4);
    resign(m, n, &c);
    save(bad, m, n);
    expect_refused(bad, "not finite");
    /* counts that disagree with the records */
    memcpy(m, b, n);
    const vx_trace_counts more = {3, 3, 4, 14, 0, 0};
    resign(m, n, &more);
    save(bad, m, n);
    expect_refused(bad, "the header says 3");
    free(m);
    /* truncated */
    save(bad, b, n - 8);
    expect_refused(bad, "body bytes");
    save(bad, b, 100);
    expect_refused(bad, "not a moewire routing trace");
    free(b);
}

/* ---- statistics ----------------------------------------------------------------------------- */

static void test_stats_by_hand(void **state) {
    (void)state;
    const char *p = tpath("s.trace");
    write_sample(p, 0);
    vx_rstats s = {0};
    mw_err err;
    if (vx_rstats_add_trace(&s, p, &err) || vx_rstats_top_pairs(&s, 4, &err))
        fail_msg("%s", err.msg);
    /* layer 0: rows {0,1}, {0,1}, {2,3} */
    const vx_rstats_layer *L0 = &s.layers[0], *L1 = &s.layers[1];
    assert_int_equal(L0->rows, 3);
    assert_int_equal(L0->count[0], 2);
    assert_int_equal(L0->count[3], 1);
    assert_true(fabs(L0->mass[0] - 1.25) < 1e-9);
    assert_int_equal(L0->n_top, 2);
    assert_int_equal(L0->top[0].a, 0);
    assert_int_equal(L0->top[0].b, 1);
    assert_int_equal(L0->top[0].count, 2);
    /* max/mean: 2 / (3 rows · 2 / 8 experts) */
    assert_true(fabs(vx_rstats_max_mean(&s, 0) - 2.0 / 0.75) < 1e-9);
    /* union at B = 1: 2 per row; B = 2: {0,1} then (partial batch of 1 not counted) */
    assert_true(L0->union_mean[0] == 2.0);
    assert_int_equal(L0->union_n[1], 1);
    assert_true(L0->union_mean[1] == 2.0);
    /* layer 1: {7,6}, {5,4}, {7,6}, {0,2}: B = 2 → {7,6,5,4} = 4 and {7,6,0,2} = 4 */
    assert_int_equal(L1->rows, 4);
    assert_int_equal(L1->union_n[1], 2);
    assert_true(L1->union_mean[1] == 4.0);
    assert_int_equal(L1->union_n[2], 1);
    assert_true(L1->union_mean[2] == 6.0);
    assert_true(fabs(vx_rstats_uniform_union(8, 2, 2) - 8 * (1 - 0.75 * 0.75)) < 1e-12);
    /* JSON and back */
    const char *j = tpath("s.json");
    FILE *f = fopen(j, "w");
    if (vx_rstats_write_json(&s, f, &err)) fail_msg("%s", err.msg);
    fclose(f);
    vx_rstats t;
    if (vx_rstats_load(j, &t, &err)) fail_msg("%s", err.msg);
    assert_int_equal(t.layers[1].rows, 4);
    assert_int_equal(t.layers[1].count[7], 2);
    assert_int_equal(t.layers[0].n_top, 2);
    assert_string_equal(t.src[0].sha256, s.src[0].sha256);
    vx_rstats_free(&t);
    vx_rstats_free(&s);
}

static void bad_json(const char *text, const char *fault) {
    const char *j = tpath("bad.json");
    save(j, (const uint8_t *)text, strlen(text));
    vx_rstats s;
    mw_err err = {{0}};
    if (vx_rstats_load(j, &s, &err) == 0) {
        vx_rstats_free(&s);
        fail_msg("'%s' loaded, expected '%s'", text, fault);
    }
    if (!strstr(err.msg, fault)) fail_msg("error '%s' lacks '%s'", err.msg, fault);
}

#define HEAD                                                                                       \
    "{\"format\":\"moewire-routing-stats\",\"version\":1,\"fingerprint\":\""                       \
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\",\"family\":\"x\","         \
    "\"n_layer\":2,\"n_expert\":3,\"k\":1,\"traces\":[],"

static void test_stats_json_is_untrusted(void **state) {
    (void)state;
    bad_json("[1]", "expected a JSON object");
    bad_json("{\"format\":\"other\"}", "not moewire routing statistics");
    bad_json(HEAD "\"layers\":[{\"layer\":2,\"rows\":1,\"count\":[1,0,0],\"mass\":[1,0,0],"
                  "\"pairs\":[]}]}",
             "\"layer\" must be");
    bad_json(HEAD "\"layers\":[{\"layer\":0,\"rows\":1,\"count\":[1,0],\"mass\":[1,0,0],"
                  "\"pairs\":[]}]}",
             "must hold 3 numbers");
    bad_json(HEAD "\"layers\":[{\"layer\":0,\"rows\":1,\"count\":[5,0,0],\"mass\":[1,0,0],"
                  "\"pairs\":[]}]}",
             "out of range");
    bad_json(HEAD "\"layers\":[{\"layer\":0,\"rows\":1,\"count\":[1,0,0],\"mass\":[-1,0,0],"
                  "\"pairs\":[]}]}",
             "out of range");
    bad_json(HEAD "\"layers\":[{\"layer\":0,\"rows\":1,\"count\":[1,0,0],\"mass\":[1,0,0],"
                  "\"pairs\":[[2,1,1]]}]}",
             "a < b < 3");
    bad_json(HEAD "\"layers\":[{\"layer\":0,\"rows\":1,\"count\":[1,0,0],\"mass\":[1,0,0],"
                  "\"pairs\":[]},{\"layer\":0,\"rows\":1,\"count\":[1,0,0],\"mass\":[1,0,0],"
                  "\"pairs\":[]}]}",
             "listed twice");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_full_ring_drops_whole_records),
        cmocka_unit_test(test_corruption_is_refused),
        cmocka_unit_test(test_stats_by_hand),
        cmocka_unit_test(test_stats_json_is_untrusted),
    };
    return cmocka_run_group_tests(tests, mwt_tmp_setup, mwt_tmp_teardown);
}
