/* tests/unit/test_md_attn.c — batch attention against a double-precision reference: GQA head
 * mapping, causal mask, sliding window (p - t < n_swa), sinks in the denominator only, several
 * sequences in one batch (keys from the cache and from the batch), ring or full caches on the
 * sliding layer, and the same result whatever the thread count. At gpt-oss's head shape (eight
 * query heads of 64 per KV head, sinks) with sequences longer than the window and key counts
 * that are not multiples of 8 or 16: each row's output is the same bits alone or in any batch,
 * with any thread count and with every instruction set; sixteen rows of different lengths, past a
 * block of keys, keep the bits on 1-3 threads. Wide caches grow past the size at which a buffer is
 * a mapping of its own and keep every row, and a pass brings a full layer's pages in before its
 * writes. Caches of f16 and bf16 hold the keys and
 * values rounded (the references round them too), in half the bytes, and keep the bits: a row
 * reads the same values from the batch as from the cache. */
#include "tests/support/mw_test.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "model/md_attn.h"

enum { HQ = 4, HK = 2, DK = 8, DV = 6, NSWA = 3 };

typedef struct fixture {
    md_config cfg;
    uint8_t swa[2];
    md_kv kv;
} fixture;

/* The type the cache under test keeps: the references read keys and values rounded to it. */
static kn_type cache_type = KN_F32;

static float rounded(float x) {
    if (cache_type == KN_F16) return kn_fp16_to_f32(kn_f32_to_fp16(x));
    if (cache_type == KN_BF16) return kn_bf16_to_f32(kn_f32_to_bf16(x));
    return x;
}

static float val(int seq, int layer, int64_t pos, int i, int which) {
    return sinf(0.37f * (float)(seq * 1000 + layer * 100 + pos * 7 + i) + (float)which);
}

static void setup(fixture *f, bool rings) {
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
    assert_int_equal(md_kv_init(&f->kv, &f->cfg, 2, 64, rings, cache_type, NULL), 0);
}

/* The batch's K and V of one layer: val() of each row's position. */
static void batch_kv(const md_row *rows, int64_t T, int layer, float *k, float *v) {
    for (int64_t t = 0; t < T; t++) {
        for (int i = 0; i < HK * DK; i++)
            k[t * HK * DK + i] = val(rows[t].seq, layer, rows[t].pos, i, 0);
        for (int i = 0; i < HK * DV; i++)
            v[t * HK * DV + i] = val(rows[t].seq, layer, rows[t].pos, i, 1);
    }
}

/* Extends seq to n positions in one committed pass. */
static void fill(fixture *f, int seq, int64_t n) {
    const int64_t from = f->kv.seqs[seq].n, T = n - from;
    md_row *rows = calloc((size_t)T, sizeof *rows);
    float *k = malloc((size_t)T * HK * DK * sizeof(float));
    float *v = malloc((size_t)T * HK * DV * sizeof(float));
    for (int64_t t = 0; t < T; t++) rows[t] = (md_row){.seq = seq, .pos = (int32_t)(from + t)};
    assert_int_equal(md_kv_begin(&f->kv, rows, T, NULL), 0);
    for (int l = 0; l < 2; l++) {
        batch_kv(rows, T, l, k, v);
        md_kv_store(&f->kv, l, k, v);
    }
    md_kv_commit(&f->kv);
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
                d += (double)q[h * DK + i] * rounded(val(row->seq, layer, t, kvh * DK + i, 0));
            s[t] = d / sqrt((double)DK);
            m = fmax(m, s[t]);
        }
        for (int64_t t = t0; t <= row->pos; t++) z += exp(s[t] - m);
        if (sinks) z += exp(sinks[h] - m);
        for (int d = 0; d < DV; d++) {
            double acc = 0;
            for (int64_t t = t0; t <= row->pos; t++)
                acc += exp(s[t] - m) / z * rounded(val(row->seq, layer, t, kvh * DV + d, 1));
            out[h * DV + d] = acc;
        }
    }
}

/* Attention of a batch of new rows (continuing their sequences) on both layers against the
 * reference; the pass is committed when `commit`. */
static void check_batch(fixture *f, const md_row *rows, int64_t T, const float *sinks,
                        kn_pool *pool, bool commit) {
    float *q = malloc((size_t)T * HQ * DK * sizeof(float));
    float *out = malloc((size_t)T * HQ * DV * sizeof(float));
    float *k = malloc((size_t)T * HK * DK * sizeof(float) * 2);
    float *v = malloc((size_t)T * HK * DV * sizeof(float) * 2);
    for (int64_t i = 0; i < T * HQ * DK; i++) q[i] = cosf(0.13f * (float)i);
    md_attn_ws ws = {0};
    assert_int_equal(md_kv_begin(&f->kv, rows, T, NULL), 0);
    for (int layer = 0; layer < 2; layer++) {
        float *kl = k + layer * T * HK * DK, *vl = v + layer * T * HK * DV;
        batch_kv(rows, T, layer, kl, vl);
        md_kv_store(&f->kv, layer, kl, vl);
        assert_int_equal(md_attn_ws_reserve(&ws, &f->cfg, rows, T, kn_pool_size(pool), NULL), 0);
        md_attn_args a = {.cfg = &f->cfg,
                          .kv = &f->kv,
                          .layer = layer,
                          .rows = rows,
                          .T = T,
                          .k = kl,
                          .v = vl,
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
    if (commit) md_kv_commit(&f->kv);
    md_attn_ws_free(&ws);
    free(q);
    free(out);
    free(k);
    free(v);
}

static void window_sinks_gqa_two_sequences(bool rings) {
    fixture f;
    setup(&f, rings);
    fill(&f, 0, 10);
    fill(&f, 1, 2);
    fill(&f, 1, 5); /* two passes: the ring has wrapped */
    /* new rows of both sequences interleaved; seq 1 out of batch order with seq 0 */
    const md_row rows[] = {{0, 10, 0, 0}, {1, 5, 0, 0}, {0, 11, 0, 0},
                           {0, 12, 0, 0}, {1, 6, 0, 0}, {0, 13, 0, 0}};
    const float sinks[HQ] = {0.5f, -1.0f, 3.0f, 0.0f};
    check_batch(&f, rows, 6, sinks, NULL, false);
    check_batch(&f, rows, 6, NULL, NULL, false);
    kn_pool *pool = kn_pool_create(3);
    check_batch(&f, rows, 6, sinks, pool, true);
    kn_pool_destroy(pool);
    /* and on from there, one row */
    const md_row next = {0, 14, 0, 0};
    check_batch(&f, &next, 1, sinks, NULL, true);
    assert_int_equal(f.kv.seqs[0].n, 15);
    assert_int_equal(f.kv.seqs[1].n, 7);
    md_kv_free(&f.kv);
}

static void test_window_sinks_gqa_two_sequences(void **state) {
    (void)state;
    const kn_type types[] = {KN_F32, KN_F16, KN_BF16};
    for (int i = 0; i < 3; i++) {
        cache_type = types[i];
        window_sinks_gqa_two_sequences(true);
        window_sinks_gqa_two_sequences(false);
    }
    cache_type = KN_F32;
}

static void test_kv_grows_and_keeps_rows(void **state) {
    (void)state;
    cache_type = KN_F32; /* read as floats below, whatever a failed test left */
    fixture f;
    setup(&f, true);
    fill(&f, 0, 3);
    assert_int_equal(f.kv.seqs[0].n, 3);
    /* growing past the first allocation keeps what was stored; the ring stays the window */
    md_kv_free(&f.kv);
    setup(&f, true);
    fill(&f, 0, 40);
    fill(&f, 0, 64);
    assert_true(f.kv.seqs[0].cap >= 64);
    assert_int_equal(f.kv.seqs[0].ring_cap, NSWA);
    const float *k1 = f.kv.seqs[0].k[1], *v1 = f.kv.seqs[0].v[1], *k0 = f.kv.seqs[0].k[0];
    assert_float_equal(k1[63 * HK * DK + 5], val(0, 1, 63, 5, 0), 0);
    assert_float_equal(v1[2 * HK * DV + 1], val(0, 1, 2, 1, 1), 0);
    assert_float_equal(k0[(63 % NSWA) * HK * DK + 5], val(0, 0, 63, 5, 0), 0);
    md_kv_free(&f.kv);
}

/* Wide rows (8 KV heads of 64 or 48: 2 or 1.5 KB a position) grow a full layer's cache from 64 to
 * 1024 positions, past the size at which a buffer becomes a mapping of its own (mremap on Linux),
 * in passes of odd sizes; every stored row is still there after each growth, the ring stays the
 * window, and the cache frees cleanly. */
static void wide_caches_grow(int head_dim) {
    const int WK = 8 * head_dim;
    enum { WN = 1000 };
    md_config cfg = {.n_layer = 2,
                     .n_head = 8,
                     .n_head_kv = 8,
                     .head_dim_k = head_dim,
                     .head_dim_v = head_dim,
                     .n_swa = 100};
    uint8_t swa[2] = {1, 0};
    cfg.layer_swa = swa;
    md_kv kv;
    assert_int_equal(md_kv_init(&kv, &cfg, 2, 1024, true, KN_F32, NULL), 0);
    float *k = malloc(37 * (size_t)WK * sizeof(float)),
          *v = malloc(37 * (size_t)WK * sizeof(float));
    md_row rows[37];
    for (int64_t from = 0; from < WN;) {
        const int64_t T = from + 37 <= WN ? 37 : WN - from;
        for (int sq = 0; sq < 2; sq++) {
            for (int64_t t = 0; t < T; t++) {
                rows[t] = (md_row){.seq = sq, .pos = (int32_t)(from + t)};
                for (int i = 0; i < WK; i++) {
                    k[t * WK + i] = (float)(sq * 100000 + (from + t) * 7 + i);
                    v[t * WK + i] = -(float)(sq * 100000 + (from + t) * 7 + i);
                }
            }
            assert_int_equal(md_kv_begin(&kv, rows, T, NULL), 0);
            md_kv_store(&kv, 0, k, v);
            md_kv_store(&kv, 1, k, v);
            md_kv_commit(&kv);
            const float *ck = kv.seqs[sq].k[1], *cv = kv.seqs[sq].v[1];
            for (int64_t p = 0; p < from + T; p += 13)
                for (int i = 0; i < WK; i += 101) {
                    assert_true(ck[p * WK + i] == (float)(sq * 100000 + p * 7 + i));
                    assert_true(cv[p * WK + i] == -(float)(sq * 100000 + p * 7 + i));
                }
            const int64_t last = from + T - 1;
            const float *ring = kv.seqs[sq].k[0];
            assert_true(ring[(last % 100) * WK + 3] == (float)(sq * 100000 + last * 7 + 3));
        }
        from += T;
    }
    assert_int_equal(kv.seqs[0].cap, 1024);
    assert_int_equal(kv.seqs[1].ring_cap, 100);
    md_kv_free(&kv);
    free(k);
    free(v);
}

static void test_wide_caches_grow(void **state) {
    (void)state;
    wide_caches_grow(64); /* 64 positions are 128 KB: a mapping from the start */
    wide_caches_grow(48); /* 96 KB: realloc first, then moved into a mapping */
}

/* Whether the pages of [p, p + bytes) are all in (mincore). */
static bool resident(const void *p, size_t bytes) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = (uintptr_t)p & ~(page - 1), e = (uintptr_t)p + bytes;
    const size_t n = (e - a + page - 1) / page;
    unsigned char *vec = malloc(n);
    assert_non_null(vec);
    assert_int_equal(mincore((void *)a, e - a, vec), 0);
    bool all = true;
    for (size_t i = 0; i < n; i++) all = all && (vec[i] & 1);
    free(vec);
    return all;
}

/* A pass's start brings in the pages of a full layer's mapping (2 KB a position here) for the
 * positions its rows write and a stretch after them, before anything is written: a decode step's
 * writes do not fault them in one at a time. Needs a kernel with MADV_POPULATE_WRITE (5.14) that
 * carries it out. */
static void test_full_layer_pages_come_in_ahead(void **state) {
    (void)state;
#ifdef MADV_POPULATE_WRITE
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *probe = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANON, -1, 0);
    assert_true(probe != MAP_FAILED);
    /* the advice known and carried out (qemu-user accepts it and does nothing) */
    const bool can = madvise(probe, page, MADV_POPULATE_WRITE) == 0 && resident(probe, page);
    munmap(probe, page);
    if (!can) skip();
    enum { WK = 8 * 64 };
    const size_t rb = WK * sizeof(float);
    md_config cfg = {.n_layer = 1, .n_head = 8, .n_head_kv = 8, .head_dim_k = 64, .head_dim_v = 64};
    uint8_t swa[1] = {0};
    cfg.layer_swa = swa;
    md_kv kv;
    assert_int_equal(md_kv_init(&kv, &cfg, 1, 4096, true, KN_F32, NULL), 0);
    static float k[WK], v[WK];
    for (int32_t pos = 0; pos < 200; pos++) {
        const md_row row = {.seq = 0, .pos = pos};
        assert_int_equal(md_kv_begin(&kv, &row, 1, NULL), 0);
        const md_kv_seq *s = &kv.seqs[0];
        if (!resident((const uint8_t *)s->k[0] + (size_t)pos * rb, rb) ||
            !resident((const uint8_t *)s->v[0] + (size_t)pos * rb, rb))
            fail_msg("position %d's pages are not in before its write", pos);
        md_kv_store(&kv, 0, k, v);
        md_kv_commit(&kv);
    }
    /* 200 positions written: their pages are in, and the 64 after; the cache has 256 */
    const md_kv_seq *s = &kv.seqs[0];
    assert_int_equal(s->cap, 256);
    assert_true(resident(s->k[0], 256 * rb));
    md_kv_free(&kv);
#else
    skip();
#endif
}

/* ---- gpt-oss's head shape, bit for bit ------------------------------------------------------ */

enum { GH = 16, GK = 2, GD = 64, GSWA = 20, GMAX = 16, GPOS = 1200 };

static float gval(int seq, int layer, int64_t pos, int i, int which) {
    return sinf(0.11f * (float)(seq * 5000 + layer * 700 + pos * 13 + i) + 0.7f * (float)which);
}

static void g_batch_kv(const md_row *rows, int64_t T, int layer, float *k, float *v) {
    for (int64_t t = 0; t < T; t++)
        for (int i = 0; i < GK * GD; i++) {
            k[t * GK * GD + i] = gval(rows[t].seq, layer, rows[t].pos, i, 0);
            v[t * GK * GD + i] = gval(rows[t].seq, layer, rows[t].pos, i, 1);
        }
}

/* Sequence seq's positions [0, len) stored on both layers and committed (rows, k, v: room for
 * len rows). */
static void g_commit_seq(md_kv *kv, int seq, int len, md_row *rows, float *k, float *v) {
    for (int p = 0; p < len; p++) rows[p] = (md_row){.seq = seq, .pos = p};
    assert_int_equal(md_kv_begin(kv, rows, len, NULL), 0);
    for (int layer = 0; layer < 2; layer++) {
        g_batch_kv(rows, len, layer, k, v);
        md_kv_store(kv, layer, k, v);
    }
    md_kv_commit(kv);
}

/* The batch's attention on both layers (no commit): out is T × 2 layers × GH·GD. */
static void g_run(md_kv *kv, const md_config *cfg, const md_row *rows, int64_t T, kn_pool *pool,
                  const float *sinks, float *out) {
    float k[GMAX * GK * GD], v[GMAX * GK * GD], q[GMAX * GH * GD], o[GMAX * GH * GD];
    for (int64_t t = 0; t < T; t++)
        for (int i = 0; i < GH * GD; i++)
            q[t * GH * GD + i] = 0.6f * gval(rows[t].seq, 9, rows[t].pos, i, 2);
    md_attn_ws ws = {0};
    assert_int_equal(md_kv_begin(kv, rows, T, NULL), 0);
    assert_int_equal(md_attn_ws_reserve(&ws, cfg, rows, T, kn_pool_size(pool), NULL), 0);
    for (int layer = 0; layer < 2; layer++) {
        g_batch_kv(rows, T, layer, k, v);
        md_kv_store(kv, layer, k, v);
        md_attn_args a = {.cfg = cfg,
                          .kv = kv,
                          .layer = layer,
                          .rows = rows,
                          .T = T,
                          .k = k,
                          .v = v,
                          .q = q,
                          .sinks = sinks,
                          .out = o};
        assert_int_equal(md_attention(&a, &ws, pool, NULL), 0);
        for (int64_t t = 0; t < T; t++)
            memcpy(out + (t * 2 + layer) * GH * GD, o + t * GH * GD, GH * GD * sizeof(float));
    }
    md_attn_ws_free(&ws);
}

/* Row `row` of rows (at index t) against a double reference on both layers. */
static void g_reference_check(const md_row *row, const float *sinks, const float *out) {
    for (int layer = 0; layer < 2; layer++)
        for (int h = 0; h < GH; h++) {
            const int kvh = h / (GH / GK);
            int64_t t0 = layer == 0 ? row->pos - GSWA + 1 : 0;
            if (t0 < 0) t0 = 0;
            double s[GPOS], m = sinks[h], z = 0;
            for (int64_t p = t0; p <= row->pos; p++) {
                double d = 0;
                for (int i = 0; i < GD; i++)
                    d += (double)(0.6f * gval(row->seq, 9, row->pos, h * GD + i, 2)) *
                         rounded(gval(row->seq, layer, p, kvh * GD + i, 0));
                s[p - t0] = d / 8.0;
                m = fmax(m, s[p - t0]);
            }
            for (int64_t p = t0; p <= row->pos; p++) z += exp(s[p - t0] - m);
            z += exp(sinks[h] - m);
            for (int i = 0; i < GD; i++) {
                double acc = 0;
                for (int64_t p = t0; p <= row->pos; p++)
                    acc +=
                        exp(s[p - t0] - m) / z * rounded(gval(row->seq, layer, p, kvh * GD + i, 1));
                assert_float_equal(out[layer * GH * GD + h * GD + i], acc, 2e-6);
            }
        }
}

static md_config g_cfg(uint8_t *swa) {
    md_config cfg = {.n_layer = 2,
                     .n_head = GH,
                     .n_head_kv = GK,
                     .head_dim_k = GD,
                     .head_dim_v = GD,
                     .kq_scale = 0.125f,
                     .n_swa = GSWA};
    swa[0] = 1; /* layer 0 slides */
    swa[1] = 0;
    cfg.layer_swa = swa;
    return cfg;
}

static void gpt_oss_shape_bits(void) {
    uint8_t swa[2];
    const md_config cfg = g_cfg(swa);
    float sinks[GH];
    for (int h = 0; h < GH; h++) sinks[h] = 0.3f * (float)(h % 5) - 0.5f;
    md_kv kv;
    assert_int_equal(md_kv_init(&kv, &cfg, 3, 64, true, cache_type, NULL), 0);
    /* sequences of 45, 23 and 3 positions, committed */
    static const int lens[3] = {45, 23, 3};
    for (int sq = 0; sq < 3; sq++) {
        md_row rows[45];
        float k[45 * GK * GD], v[45 * GK * GD];
        g_commit_seq(&kv, sq, lens[sq], rows, k, v);
    }
    /* a batch of five rows: each sequence continues, two of them by two rows */
    const md_row all[5] = {
        {0, 45, 0, 0}, {1, 23, 0, 0}, {2, 3, 0, 0}, {0, 46, 0, 0}, {1, 24, 0, 0}};
    enum { W = 2 * GH * GD };
    static float ref[5 * W], got[5 * W];
    g_run(&kv, &cfg, all, 5, NULL, sinks, ref);
    for (int t = 0; t < 5; t++) g_reference_check(&all[t], sinks, ref + t * W);
    /* the thread split */
    for (int nt = 2; nt <= 3; nt++) {
        kn_pool *pool = kn_pool_create(nt);
        g_run(&kv, &cfg, all, 5, pool, sinks, got);
        kn_pool_destroy(pool);
        if (memcmp(ref, got, sizeof ref)) fail_msg("%d threads change the bits", nt);
    }
    /* each sequence's rows on their own, and the batch in another order */
    const md_row s0[2] = {all[0], all[3]}, s1[2] = {all[1], all[4]}, s2[1] = {all[2]};
    const int at0[2] = {0, 3}, at1[2] = {1, 4}, at2[1] = {2};
    const struct {
        const md_row *rows;
        const int *at;
        int T;
    } alone[3] = {{s0, at0, 2}, {s1, at1, 2}, {s2, at2, 1}};
    for (int a = 0; a < 3; a++) {
        g_run(&kv, &cfg, alone[a].rows, alone[a].T, NULL, sinks, got);
        for (int t = 0; t < alone[a].T; t++)
            if (memcmp(ref + alone[a].at[t] * W, got + t * W, W * sizeof(float)))
                fail_msg("row %d alone differs from the batch", alone[a].at[t]);
    }
    const md_row shuffled[5] = {all[2], all[1], all[0], all[4], all[3]};
    const int from[5] = {2, 1, 0, 4, 3};
    g_run(&kv, &cfg, shuffled, 5, NULL, sinks, got);
    for (int t = 0; t < 5; t++)
        if (memcmp(ref + from[t] * W, got + t * W, W * sizeof(float)))
            fail_msg("row %d moves in the batch and changes", from[t]);
    /* every instruction set gives the scalar definition's bits */
    const kn_isa best = kn_isa_active();
    assert_int_equal(kn_isa_force(KN_ISA_SCALAR), 0);
    static float scalar[5 * W];
    g_run(&kv, &cfg, all, 5, NULL, sinks, scalar);
    for (int isa = KN_ISA_SCALAR + 1; isa < KN_ISA_COUNT; isa++) {
        if (kn_isa_force((kn_isa)isa)) continue;
        g_run(&kv, &cfg, all, 5, NULL, sinks, got);
        if (memcmp(scalar, got, sizeof got))
            fail_msg("%s differs from scalar", kn_isa_name((kn_isa)isa));
    }
    kn_isa_force(best);
    md_kv_free(&kv);
}

static void test_gpt_oss_shape_bits(void **state) {
    (void)state;
    const kn_type types[] = {KN_F32, KN_F16, KN_BF16};
    for (int i = 0; i < 3; i++) {
        cache_type = types[i];
        gpt_oss_shape_bits();
    }
    cache_type = KN_F32;
}

/* Sixteen sequences of different lengths decode a row each, past the window (layer 0 slides) and
 * past a block of keys; the longest sees more keys than the scores of all of a row's heads have
 * room for at once, so its KV heads go one at a time. The same bits on one, two and three threads
 * and with each row alone, and each row the reference's. */
static void test_sixteen_rows_threads_keep_bits(void **state) {
    (void)state;
    uint8_t swa[2];
    const md_config cfg = g_cfg(swa);
    float sinks[GH];
    for (int h = 0; h < GH; h++) sinks[h] = 0.2f * (float)(h % 3) - 0.3f;
    enum { B = 16, LONG = 1100, W = 2 * GH * GD };
    assert_true((int)LONG < (int)GPOS);
    md_kv kv;
    assert_int_equal(md_kv_init(&kv, &cfg, B, LONG + 8, true, KN_F32, NULL), 0);
    int lens[B];
    for (int s = 0; s < B; s++) lens[s] = s + 1 < B ? 5 + 9 * s : LONG;
    md_row *fill = malloc(LONG * sizeof *fill);
    float *k = malloc((size_t)LONG * GK * GD * sizeof *k),
          *v = malloc((size_t)LONG * GK * GD * sizeof *v);
    assert_true(fill && k && v);
    for (int s = 0; s < B; s++) g_commit_seq(&kv, s, lens[s], fill, k, v);
    free(fill);
    free(k);
    free(v);
    md_row rows[B];
    for (int s = 0; s < B; s++) rows[s] = (md_row){s, lens[s], 0, 0};
    static float ref[B * W], got[B * W];
    g_run(&kv, &cfg, rows, B, NULL, sinks, ref);
    for (int s = 0; s < B; s++) g_reference_check(&rows[s], sinks, ref + s * W);
    for (int nt = 2; nt <= 3; nt++) {
        kn_pool *pool = kn_pool_create(nt);
        g_run(&kv, &cfg, rows, B, pool, sinks, got);
        kn_pool_destroy(pool);
        if (memcmp(ref, got, sizeof ref)) fail_msg("%d threads change the bits", nt);
    }
    for (int s = 0; s < B; s++) {
        g_run(&kv, &cfg, &rows[s], 1, NULL, sinks, got);
        if (memcmp(ref + s * W, got, W * sizeof(float)))
            fail_msg("row of %d positions alone differs from the batch", lens[s]);
    }
    md_kv_free(&kv);
}

/* A sequence of 31 positions cached one pass per position (decode), or 24 at once and 7 in the
 * batch (prefill): position 30's attention is the same bits in f16 and bf16, because the batch's
 * rows are rounded as the cache will hold them. The cache takes half of f32's bytes, and a type
 * it does not keep is refused. */
static void test_cache_types_keep_bits_in_half_the_bytes(void **state) {
    (void)state;
    uint8_t swa[2];
    const md_config cfg = g_cfg(swa);
    float sinks[GH] = {0};
    enum { W = 2 * GH * GD };
    const kn_type types[] = {KN_F16, KN_BF16};
    uint64_t bytes[3];
    for (int ti = 0; ti < 3; ti++) {
        const kn_type type = ti < 2 ? types[ti] : KN_F32;
        md_kv a, b;
        assert_int_equal(md_kv_init(&a, &cfg, 1, 64, true, type, NULL), 0);
        assert_int_equal(md_kv_init(&b, &cfg, 1, 64, true, type, NULL), 0);
        static float out[GMAX * W], last_a[W];
        for (int p = 0; p <= 30; p++) { /* decode: every earlier position from the cache */
            const md_row r = {0, p, 0, 0};
            g_run(&a, &cfg, &r, 1, NULL, sinks, out);
            md_kv_commit(&a);
        }
        memcpy(last_a, out, sizeof last_a);
        md_row rows[GMAX];
        for (int from = 0; from < 24; from += 8) { /* 24 positions committed, 7 in the batch */
            for (int t = 0; t < 8; t++) rows[t] = (md_row){0, from + t, 0, 0};
            g_run(&b, &cfg, rows, 8, NULL, sinks, out);
            md_kv_commit(&b);
        }
        for (int t = 0; t < 7; t++) rows[t] = (md_row){0, 24 + t, 0, 0};
        g_run(&b, &cfg, rows, 7, NULL, sinks, out);
        if (memcmp(last_a, out + 6 * W, sizeof last_a))
            fail_msg("%s cache: decode and prefill differ (max |diff| %g)", kn_type_name(type),
                     mwt_max_abs_diff(last_a, out + 6 * W, W));
        bytes[ti] = md_kv_bytes(&a);
        assert_int_equal(md_kv_row_bytes(&cfg, type),
                         (uint64_t)GK * 2 * GD * (type == KN_F32 ? 4 : 2));
        md_kv_free(&a);
        md_kv_free(&b);
    }
    assert_true(bytes[0] * 2 == bytes[2] && bytes[1] == bytes[0]);
    md_kv kv;
    mw_err err;
    assert_int_equal(md_kv_init(&kv, &cfg, 1, 64, true, KN_Q8_0, &err), -1);
    assert_non_null(strstr(err.msg, "q8_0"));
    assert_int_equal(md_kv_type_from_name("f16"), KN_F16);
    assert_int_equal(md_kv_type_from_name("bf16"), KN_BF16);
    assert_int_equal(md_kv_type_from_name("q8_0"), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window_sinks_gqa_two_sequences),
        cmocka_unit_test(test_kv_grows_and_keeps_rows),
        cmocka_unit_test(test_wide_caches_grow),
        cmocka_unit_test(test_full_layer_pages_come_in_ahead),
        cmocka_unit_test(test_gpt_oss_shape_bits),
        cmocka_unit_test(test_sixteen_rows_threads_keep_bits),
        cmocka_unit_test(test_cache_types_keep_bits_in_half_the_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
