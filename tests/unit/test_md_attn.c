/* tests/unit/test_md_attn.c — batch attention against a double-precision reference: GQA head
 * mapping, causal mask, sliding window (p - t < n_swa), sinks in the denominator only, several
 * sequences in one batch, and the same result whatever the thread count. */
#include "tests/support/mw_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/md_attn.h"

enum { HQ = 4, HK = 2, DK = 8, DV = 6, NSWA = 3 };

typedef struct fixture {
    md_config cfg;
    uint8_t swa[2];
    md_kv kv;
} fixture;

static float val(int seq, int layer, int64_t pos, int i, int which) {
    return sinf(0.37f * (float)(seq * 1000 + layer * 100 + pos * 7 + i) + (float)which);
}

static void setup(fixture *f) {
    memset(f, 0, sizeof *f);
    f->cfg.n_layer = 2;
    f->cfg.n_head = HQ;
    f->cfg.n_head_kv = HK;
    f->cfg.head_dim_k = DK;
    f->cfg.head_dim_v = DV;
    f->cfg.kq_scale = 1.0f / sqrtf((float)DK);
    f->cfg.n_swa = NSWA;
    f->swa[0] = 1; /* layer 0 slides, layer 1 sees everything */
    f->cfg.layer_swa = f->swa;
    assert_int_equal(md_kv_init(&f->kv, &f->cfg, 2, 64, NULL), 0);
}

/* Fills positions 0..n-1 of seq in both layers through md_kv_store. */
static void fill(fixture *f, int seq, int64_t n) {
    md_row *rows = calloc((size_t)n, sizeof *rows);
    float *k = malloc((size_t)n * HK * DK * sizeof(float));
    float *v = malloc((size_t)n * HK * DV * sizeof(float));
    for (int64_t t = 0; t < n; t++) rows[t] = (md_row){.seq = seq, .pos = (int32_t)t};
    assert_int_equal(md_kv_reserve(&f->kv, rows, n, NULL), 0);
    for (int l = 0; l < 2; l++) {
        for (int64_t t = 0; t < n; t++) {
            for (int i = 0; i < HK * DK; i++) k[t * HK * DK + i] = val(seq, l, t, i, 0);
            for (int i = 0; i < HK * DV; i++) v[t * HK * DV + i] = val(seq, l, t, i, 1);
        }
        md_kv_store(&f->kv, l, rows, n, k, v);
    }
    md_kv_commit(&f->kv, rows, n);
    free(rows);
    free(k);
    free(v);
}

static void reference(const fixture *f, int layer, const md_row *row, const float *q,
                      const float *sinks, double *out) {
    for (int h = 0; h < HQ; h++) {
        int kvh = h / (HQ / HK);
        int64_t t0 = layer == 0 ? row->pos - NSWA + 1 : 0;
        if (t0 < 0) t0 = 0;
        double s[64], m = sinks ? sinks[h] : -INFINITY, z = 0;
        for (int64_t t = t0; t <= row->pos; t++) {
            double d = 0;
            for (int i = 0; i < DK; i++)
                d += (double)q[h * DK + i] * val(row->seq, layer, t, kvh * DK + i, 0);
            s[t] = d / sqrt((double)DK);
            m = fmax(m, s[t]);
        }
        for (int64_t t = t0; t <= row->pos; t++) z += exp(s[t] - m);
        if (sinks) z += exp(sinks[h] - m);
        for (int d = 0; d < DV; d++) {
            double acc = 0;
            for (int64_t t = t0; t <= row->pos; t++)
                acc += exp(s[t] - m) / z * val(row->seq, layer, t, kvh * DV + d, 1);
            out[h * DV + d] = acc;
        }
    }
}

static void check_batch(fixture *f, const md_row *rows, int64_t T, const float *sinks,
                        kn_pool *pool) {
    float *q = malloc((size_t)T * HQ * DK * sizeof(float));
    float *out = malloc((size_t)T * HQ * DV * sizeof(float));
    for (int64_t i = 0; i < T * HQ * DK; i++) q[i] = cosf(0.13f * (float)i);
    md_attn_ws ws = {0};
    for (int layer = 0; layer < 2; layer++) {
        assert_int_equal(md_attn_ws_reserve(&ws, &f->kv, rows, T, kn_pool_size(pool), NULL), 0);
        md_attn_args a = {.cfg = &f->cfg,
                          .kv = &f->kv,
                          .layer = layer,
                          .rows = rows,
                          .T = T,
                          .q = q,
                          .sinks = sinks,
                          .out = out};
        assert_int_equal(md_attention(&a, &ws, pool, NULL), 0);
        for (int64_t t = 0; t < T; t++) {
            double ref[HQ * DV];
            reference(f, layer, &rows[t], q + t * HQ * DK, sinks, ref);
            for (int i = 0; i < HQ * DV; i++)
                assert_float_equal(out[t * HQ * DV + i], ref[i], 2e-6);
        }
    }
    md_attn_ws_free(&ws);
    free(q);
    free(out);
}

static void test_window_sinks_gqa_two_sequences(void **state) {
    (void)state;
    fixture f;
    setup(&f);
    fill(&f, 0, 10);
    fill(&f, 1, 5);
    /* rows of both sequences interleaved, early (inside the window) and late positions */
    const md_row rows[] = {{0, 0, 0, 0}, {1, 4, 0, 0}, {0, 1, 0, 0},
                           {0, 9, 0, 0}, {1, 2, 0, 0}, {0, 5, 0, 0}};
    const float sinks[HQ] = {0.5f, -1.0f, 3.0f, 0.0f};
    check_batch(&f, rows, 6, sinks, NULL);
    check_batch(&f, rows, 6, NULL, NULL);
    kn_pool *pool = kn_pool_create(3);
    check_batch(&f, rows, 6, sinks, pool);
    kn_pool_destroy(pool);
    md_kv_free(&f.kv);
}

static void test_kv_grows_and_keeps_rows(void **state) {
    (void)state;
    fixture f;
    setup(&f);
    fill(&f, 0, 3);
    assert_int_equal(f.kv.seqs[0].n, 3);
    /* growing past the first allocation keeps what was stored */
    md_kv_free(&f.kv);
    setup(&f);
    fill(&f, 0, 64);
    assert_true(f.kv.seqs[0].cap >= 64);
    assert_float_equal(md_kv_k(&f.kv, 0, 1, 63)[5], val(0, 1, 63, 5, 0), 0);
    assert_float_equal(md_kv_v(&f.kv, 0, 0, 2)[1], val(0, 0, 2, 1, 1), 0);
    md_kv_free(&f.kv);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window_sinks_gqa_two_sequences),
        cmocka_unit_test(test_kv_grows_and_keeps_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
