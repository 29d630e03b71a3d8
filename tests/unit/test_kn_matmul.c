/* tests/unit/test_kn_matmul.c — kn_matmul: accuracy against a float64 reference in both
 * numerics modes, the documented canonical order (emulated independently), and the invariances
 * that make exact mode work, asserted bit for bit: T = 1 vs T rows (batch invariance), 1 vs 2
 * threads, scalar vs every SIMD ISA. Shapes include K = 2880 (90 MXFP4 blocks), K not a multiple
 * of 32 for float weights, T not a multiple of any SIMD width, and MXFP4 E8M0 edge bytes.
 * kn_matmul_many (several matrices on one input) = one kn_matmul each, bit for bit. */
#include "tests/unit/kn_test_util.h"

static const int64_t Ts[] = {1, 2, 3, 5, 7, 8, 9, 12, 13, 15, 16, 17}; /* each path's bounds */
#define NTS (sizeof Ts / sizeof Ts[0])

static void run(const kn_mat *W, const float *X, int64_t T, float *Y, kn_numerics num,
                kn_pool *pool) {
    kn_matmul(W, X, T, Y, num, pool);
}

static void test_accuracy_against_float64(void **state) {
    (void)state;
    kt_rng r = {2024};
    for (size_t ti = 0; ti < KT_NTYPES; ti++) {
        const kn_type t = kt_compute_types[ti];
        for (int rep = 0; rep < 2; rep++) {
            const int64_t rows = kt_range(&r, 1, 40), cols = kt_pick_cols(&r, t), T = 3;
            kn_mat W = kt_weights(&r, t, rows, cols, false);
            float *X = kt_gauss_vec(&r, T * cols, 1.0f), *Xq = malloc(T * cols * 4);
            float *Y = malloc(T * rows * 4), *R = malloc(T * rows * 4);
            for (int64_t i = 0; i < T; i++) kt_q8_view(t, X + i * cols, cols, Xq + i * cols);
            kt_ref_matmul(&W, X, T, R);
            run(&W, X, T, Y, KN_NUM_F32, NULL);
            const double ef = kt_rel_to_max(Y, R, T * rows);
            kt_ref_matmul(&W, Xq, T, R);
            run(&W, X, T, Y, KN_NUM_Q8, NULL);
            const double eq = kt_rel_to_max(Y, R, T * rows);
            if (ef > 2e-6 || eq > 2e-6)
                fail_msg("%s %lldx%lld: f32 err %.2e, q8 err %.2e", kn_type_name(t),
                         (long long)rows, (long long)cols, ef, eq);
            kt_free_mat(&W);
            free(X), free(Xq), free(Y), free(R);
        }
    }
}

/* The documented order, written independently of the kernels: float lanes k % 32 folded by the
 * tree; MXFP4 Q8 block lanes b % 8 with fmaf of the exact integer sums. */
static void test_canonical_order_emulated(void **state) {
    (void)state;
    kt_rng r = {77};
    kt_variant isas[KT_MAX_VARIANTS];
    const int nisa = kt_variants(isas);
    const kn_isa prev = kn_isa_active();
    const int64_t rows = 5, cols = 2880 + 64; /* 92 blocks: lanes 0..3 get a 12th block */
    kn_mat Wf = kt_weights(&r, KN_F32, rows, cols, false);
    kn_mat Wm = kt_weights(&r, KN_MXFP4, rows, cols, true);
    float *x = kt_gauss_vec(&r, cols, 1.0f), y[5], want_f[5], want_m[5];
    kn__block_q8_0 *xq = malloc(cols / 32 * sizeof *xq);
    kn__quant_q8_0(x, xq, cols);
    for (int64_t n = 0; n < rows; n++) {
        const float *w = (const float *)((const uint8_t *)Wf.data + n * Wf.row_bytes);
        float l[32] = {0}, v[8];
        for (int64_t k = 0; k < cols; k++) l[k % 32] = fmaf(w[k], x[k], l[k % 32]);
        for (int i = 0; i < 8; i++) v[i] = (l[i] + l[i + 8]) + (l[i + 16] + l[i + 24]);
        want_f[n] = ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
        const uint8_t *wb = (const uint8_t *)Wm.data + n * Wm.row_bytes;
        float a[8] = {0};
        for (int64_t b = 0; b < cols / 32; b++) {
            int32_t isum = 0;
            for (int j = 0; j < 32; j++) {
                const int code = (wb[17 * b + 1 + j % 16] >> (j < 16 ? 0 : 4)) & 0xF;
                isum += kn__mxfp4_kvalues[code] * xq[b].qs[j];
            }
            const float scale = kn_fp16_to_f32(xq[b].d) * ldexpf(1.0f, wb[17 * b] - 128);
            a[b % 8] = fmaf((float)isum, scale, a[b % 8]);
        }
        want_m[n] = ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
    }
    for (int i = 0; i < nisa; i++) {
        kt_use(&isas[i]);
        run(&Wf, x, 1, y, KN_NUM_F32, NULL);
        assert_true(kt_same_bits("f32 lanes", y, want_f, rows));
        run(&Wm, x, 1, y, KN_NUM_Q8, NULL);
        assert_true(kt_same_bits("mxfp4 block lanes", y, want_m, rows));
    }
    kn_isa_force(prev);
    kt_free_mat(&Wf), kt_free_mat(&Wm);
    free(x), free(xq);
}

/* For every type and mode, each row of X is computed alone by the scalar reference (T = 1, no
 * pool); then every ISA computes T-row batches for each T in Ts, alternately with a 2-thread pool
 * and without, and every row must equal its T = 1 scalar result bit for bit. That proves batch
 * invariance, thread-count invariance and ISA agreement at once. */
static void test_invariance_batch_threads_isa(void **state) {
    (void)state;
    kt_rng r = {31337};
    kt_variant isas[KT_MAX_VARIANTS];
    const int nisa = kt_variants(isas);
    const kn_isa prev = kn_isa_active();
    kn_pool *pool = kn_pool_create(2);
    const int64_t Tmax = Ts[NTS - 1];
    for (size_t ti = 0; ti < KT_NTYPES; ti++) {
        const kn_type t = kt_compute_types[ti];
        for (int rep = 0; rep < 2; rep++) {
            /* long rows first: K = 2880 (90 blocks) for 32-blocks, 11 super-blocks for K-quants
             * (a full batch of 8 in the kernels that take them 8 at a time, then a tail) */
            const int bs = kn_traits(t)->blck_size;
            const int64_t cols = rep == 0 && bs == 32    ? 2880
                                 : rep == 0 && bs == 256 ? 256 * 11
                                                         : kt_pick_cols(&r, t);
            /* enough rows that batches really split across two threads */
            int64_t rows = kt_range(&r, 1, 3) * 13 + (int64_t)(20000 / cols);
            if (rows > 200) rows = 200 + kt_range(&r, 0, 7);
            kn_mat W = kt_weights(&r, t, rows, cols, true);
            float *X = kt_gauss_vec(&r, Tmax * cols, 1.0f);
            float *single = malloc(Tmax * rows * 4), *Y = malloc(Tmax * rows * 4);
            for (int num = 0; num < 2; num++) {
                kn_isa_force(KN_ISA_SCALAR);
                for (int64_t tt = 0; tt < Tmax; tt++)
                    run(&W, X + tt * cols, 1, single + tt * rows, (kn_numerics)num, NULL);
                for (int i = 0; i < nisa; i++) {
                    kt_use(&isas[i]);
                    for (size_t k = 0; k < NTS; k++) {
                        const int64_t T = Ts[k];
                        /* the scalar reference only at the largest batch: it is slow under ASan */
                        if (isas[i].isa == KN_ISA_SCALAR && k != NTS - 1) continue;
                        run(&W, X, T, Y, (kn_numerics)num, k & 1 ? NULL : pool);
                        char what[160];
                        snprintf(what, sizeof what, "%s %s %s %lldx%lld T=%lld (%s)", isas[i].name,
                                 kn_type_name(t), kn_numerics_name(num), (long long)rows,
                                 (long long)cols, (long long)T, k & 1 ? "1 thread" : "2 threads");
                        assert_true(kt_same_bits(what, Y, single, T * rows));
                    }
                }
            }
            kt_free_mat(&W);
            free(X), free(Y), free(single);
        }
    }
    kn_pool_destroy(pool);
    kn_isa_force(prev);
}

/* kn_matmul_many = one kn_matmul per matrix: matrices of types that share an activation format
 * (Q8_0, MXFP4) and that do not (F32, F16, Q6_K), more matrices than the small path holds,
 * T = 1 and a batch, 1 and 2 threads, both numerics modes. */
static void test_matmul_many_equals_single(void **state) {
    (void)state;
    kt_rng r = {4711};
    enum { N = 6 };
    const kn_type types[N] = {KN_Q8_0, KN_MXFP4, KN_F32, KN_Q8_0, KN_F16, KN_Q6_K};
    const int64_t cols = 512;
    kn_mat W[N];
    const kn_mat *Wp[N];
    float *Y[N], *S[N];
    const int64_t Tmax = 5;
    for (int i = 0; i < N; i++) {
        W[i] = kt_weights(&r, types[i], 40 + 24 * i, cols, false);
        Wp[i] = &W[i];
        Y[i] = malloc(Tmax * W[i].rows * 4);
        S[i] = malloc(Tmax * W[i].rows * 4);
    }
    float *X = kt_gauss_vec(&r, Tmax * cols, 1.0f);
    kn_pool *pool = kn_pool_create(2);
    for (int num = 0; num < 2; num++)
        for (int64_t T = 1; T <= Tmax; T += Tmax - 1)
            for (int n = 3; n <= N; n += N - 3)
                for (int p = 0; p < 2; p++) {
                    for (int i = 0; i < n; i++) {
                        kn_matmul(&W[i], X, T, S[i], (kn_numerics)num, NULL);
                        memset(Y[i], 0xff, T * W[i].rows * 4);
                    }
                    kn_matmul_many(Wp, Y, n, X, T, (kn_numerics)num, p ? pool : NULL);
                    for (int i = 0; i < n; i++) {
                        char what[96];
                        snprintf(what, sizeof what, "%s in %d, T=%lld, %s, %d thread(s)",
                                 kn_type_name(types[i]), n, (long long)T, kn_numerics_name(num),
                                 p + 1);
                        assert_true(kt_same_bits(what, Y[i], S[i], T * W[i].rows));
                    }
                }
    kn_pool_destroy(pool);
    for (int i = 0; i < N; i++) kt_free_mat(&W[i]), free(Y[i]), free(S[i]);
    free(X);
}

/* A job of many megabytes is cut into big chunks and a tail of small ones (kn__run_parts): every
 * row is still computed once, whole, by one thread. Parts of row counts that are not multiples of
 * the chunk alignment, a tail that starts inside a part, one tall matrix alone; 2 threads against
 * the caller alone, T = 1 and 3, outputs first filled with NaN. */
static kn_mat big_weights(kt_rng *r, kn_type t, int64_t rows, int64_t cols) {
    const size_t rb = kn_row_size(t, cols), bb = t == KN_MXFP4 ? 17 : 34;
    uint8_t *d = malloc(rb * (size_t)rows);
    for (size_t i = 0; i < rb * (size_t)rows; i++) d[i] = (uint8_t)kt_next(r);
    const uint16_t scale = kn_f32_to_fp16(0.01f);
    for (size_t b = 0; b < rb * (size_t)rows; b += bb) { /* sane scales: exponent or fp16 d */
        if (t == KN_MXFP4)
            d[b] = (uint8_t)kt_range(r, 118, 127);
        else
            memcpy(d + b, &scale, 2);
    }
    return (kn_mat){t, rows, cols, rb, d, NULL};
}

static void test_big_jobs_split_rows(void **state) {
    (void)state;
    kt_rng r = {90210};
    enum { N = 7 };
    const int64_t rows[N] = {701, 597, 901, 603, 599, 1001, 3301}, cols = 2880, Tmax = 3;
    kn_mat W[N];
    const kn_mat *Wp[N];
    float *Y[N], *S[N];
    for (int i = 0; i < N; i++) {
        W[i] = big_weights(&r, i % 3 == 2 ? KN_Q8_0 : KN_MXFP4, rows[i], cols);
        Wp[i] = &W[i];
        Y[i] = malloc(Tmax * rows[i] * 4);
        S[i] = malloc(Tmax * rows[i] * 4);
    }
    float *X = kt_gauss_vec(&r, Tmax * cols, 1.0f);
    kn_pool *pool = kn_pool_create(2);
    for (int64_t T = 1; T <= Tmax; T += Tmax - 1)
        for (int alone = 0; alone < 2; alone++) { /* the first N - 1 together, then the last */
            const int first = alone ? N - 1 : 0, n = alone ? 1 : N - 1;
            for (int i = first; i < first + n; i++) {
                kn_matmul(&W[i], X, T, S[i], KN_NUM_Q8, NULL);
                memset(Y[i], 0xff, T * rows[i] * 4);
            }
            kn_matmul_many(Wp + first, Y + first, n, X, T, KN_NUM_Q8, pool);
            for (int i = first; i < first + n; i++) {
                char what[96];
                snprintf(what, sizeof what, "%lld rows (%s) of a %d-matrix job, T=%lld",
                         (long long)rows[i], kn_type_name(W[i].type), n, (long long)T);
                assert_true(kt_same_bits(what, Y[i], S[i], T * rows[i]));
            }
        }
    kn_pool_destroy(pool);
    for (int i = 0; i < N; i++) kt_free_mat(&W[i]), free(Y[i]), free(S[i]);
    free(X);
}

/* E8M0 edge exponents inside matmuls: 0x00 / 0x01 are subnormal scales (no flush to zero),
 * 0xFE / 0xFF are huge but finite until a value overflows. */
static void test_e8m0_edges_in_matmul(void **state) {
    (void)state;
    enum { ROWS = 5, COLS = 2880 };
    const uint8_t e[ROWS] = {0x00, 0x01, 0xFE, 0xFF, 0xFF};
    kn_mat W = {KN_MXFP4, ROWS, COLS, kn_row_size(KN_MXFP4, COLS), NULL, NULL};
    uint8_t *d = calloc(ROWS, W.row_bytes);
    for (int n = 0; n < ROWS; n++)
        for (int b = 0; b < COLS / 32; b++) {
            uint8_t *blk = d + n * W.row_bytes + 17 * b;
            blk[0] = e[n];
            if (n < 2) memset(blk + 1, 0x11, 16); /* every code 1 */
        }
    d[2 * W.row_bytes + 1] = 1; /* one weight 1 * 2^126 */
    d[3 * W.row_bytes + 1] = 1; /* one weight 1 * 2^127: finite */
    d[4 * W.row_bytes + 1] = 2; /* one weight 2 * 2^127: inf as a float */
    W.data = d;
    float x[COLS], y[ROWS], yq[ROWS];
    for (int k = 0; k < COLS; k++) x[k] = k % 2 == 0 ? 1.0f : 0.0f;  /* sum 1440 */
    const double dx = kn_fp16_to_f32(kn_f32_to_fp16(1.0f / 127.0f)); /* x quantizes exactly */
    kt_variant isas[KT_MAX_VARIANTS];
    const int nisa = kt_variants(isas);
    const kn_isa prev = kn_isa_active();
    for (int i = 0; i < nisa; i++) {
        kt_use(&isas[i]);
        kn_matmul(&W, x, 1, y, KN_NUM_F32, NULL);
        kn_matmul(&W, x, 1, yq, KN_NUM_Q8, NULL);
        assert_true(y[0] == 1440.0f * 0x1p-128f); /* normal result from subnormal weights */
        assert_true(y[1] == 1440.0f * 0x1p-127f);
        assert_true(y[2] == 0x1p126f);
        assert_true(y[3] == 0x1p127f);
        assert_true(isinf(y[4]) && y[4] > 0);
        const double w0 = 1440.0 * 127.0 * dx * 0x1p-128, w1 = 2 * w0;
        assert_true(fabs(yq[0] - w0) <= 1e-6 * w0 && fabs(yq[1] - w1) <= 1e-6 * w1);
        assert_true(yq[2] == (float)(127.0 * dx * 0x1p126));
        assert_true(yq[3] == (float)(127.0 * dx * 0x1p127));
        /* the integer domain keeps 2 * 127 * dx * 2^127 just below FLT_MAX */
        assert_true(yq[4] == (float)(254.0 * dx * 0x1p127) && !isinf(yq[4]));
    }
    kn_isa_force(prev);
    free(d);
}

/* Rows whose block count is not a multiple of 8 end in a partial group, which the streaming
 * (T = 1) kernels and the batch kernels' tile decode may read in place past the row: the bytes
 * there belong to the next row and must not leak into the result, even when they hold inf / NaN
 * Q8_0 scales or subnormal MXFP4 exponents. Odd rows start with such poisoned blocks; every even
 * row (whose tail reads them) must equal the scalar reference bit for bit, for every tail length
 * 1..7, every ISA and T from 1 to 9 tokens (the streaming few-token kernels, both widths of the
 * batch tiles). The last row (no next row to read) is even and checked too. */
static void test_partial_group_reads_past_row(void **state) {
    (void)state;
    kt_rng r = {4242};
    kt_variant isas[KT_MAX_VARIANTS];
    const int nisa = kt_variants(isas);
    const kn_isa prev = kn_isa_active();
    const kn_type types[] = {KN_MXFP4, KN_Q8_0};
    enum { ROWS = 7 };
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const kn_type t = types[ti];
        const int bs = kn_traits(t)->type_size;
        for (int tail = 1; tail < 8; tail++) {
            const int64_t cols = 32 * (8 * 11 + tail);
            kn_mat W = kt_weights(&r, t, ROWS, cols, true);
            uint8_t *d = (uint8_t *)W.data;
            for (int n = 1; n < ROWS; n += 2)
                for (int b = 0; b < 8; b++) {
                    uint8_t *blk = d + (size_t)n * W.row_bytes + (size_t)b * bs;
                    if (t == KN_Q8_0)
                        kn__wr16(blk, b % 2 ? 0x7C00 : 0x7E01); /* +inf, NaN */
                    else
                        blk[0] = (uint8_t)(b % 2); /* subnormal h */
                }
            enum { TMAX = 9 };
            float *x = kt_gauss_vec(&r, TMAX * cols, 1.0f), y[TMAX * ROWS], want[TMAX * ROWS];
            for (int k = 0; k < 7; k++) {
                const int64_t T = (int64_t[]){1, 2, 3, 4, 5, 8, TMAX}[k];
                kn_isa_force(KN_ISA_SCALAR);
                run(&W, x, T, want, KN_NUM_Q8, NULL);
                for (int i = 0; i < nisa; i++) {
                    kt_use(&isas[i]);
                    run(&W, x, T, y, KN_NUM_Q8, NULL);
                    for (int64_t tt = 0; tt < T; tt++)
                        for (int n = 0; n < ROWS; n += 2) {
                            char what[112];
                            snprintf(what, sizeof what, "%s %s K=%lld T=%lld token %lld row %d",
                                     isas[i].name, kn_type_name(t), (long long)cols, (long long)T,
                                     (long long)tt, n);
                            assert_true(
                                kt_same_bits(what, &y[tt * ROWS + n], &want[tt * ROWS + n], 1));
                        }
                }
            }
            kt_free_mat(&W);
            free(x);
        }
    }
    kn_isa_force(prev);
}

/* K-quants at the edges of the integer sums the SIMD kernels keep narrow: every 6-bit scale and
 * min at 63 and activations at the quantizer's extreme (|q| = 127 in a whole block, so a group's
 * bsums pair reaches 2 * 16 * 127 = 4064, the int16 that AVX-512 Q4_K's transposed min sums keep),
 * Q6_K's codes all 63 or all 0 in two blocks of three (AVX-VNNI packs sums of 4 code * q products
 * to int16: 4 * 63 * 127 = 32004), signs alternating by block and by row; K with and without a
 * partial 8-block chunk; every ISA at T = 1 .. 9 equals the scalar reference bit for bit. */
static void test_kquant_extreme_sums(void **state) {
    (void)state;
    kt_rng r = {9090};
    kt_variant isas[KT_MAX_VARIANTS];
    const int nisa = kt_variants(isas);
    const kn_isa prev = kn_isa_active();
    const kn_type types[] = {KN_Q4_K, KN_Q6_K};
    enum { ROWS = 5, TMAX = 9 };
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const kn_type t = types[ti];
        for (int nbk = 3; nbk <= 11; nbk += 8) {
            const int64_t cols = 256 * nbk;
            kn_mat W = kt_weights(&r, t, ROWS, cols, true);
            uint8_t *d = (uint8_t *)W.data;
            const int bsz = kn_traits(t)->type_size;
            for (int n = 0; n < ROWS; n++)
                for (int b = 0; b < nbk; b++) {
                    uint8_t *blk = d + (size_t)n * W.row_bytes + (size_t)b * bsz;
                    if (t == KN_Q4_K)
                        memset(blk + 4, 0xFF, 12); /* scales and mins 63 */
                    else {
                        memset(blk + 192, (n + b) % 2 ? 0x80 : 0x7F, 16); /* scales -128 / 127 */
                        if (b % 3 < 2) /* codes all 63 or all 0 (-32); the third block's random */
                            memset(blk, b % 3 ? 0x00 : 0xFF, 192);
                    }
                }
            float *x = malloc(sizeof(float) * TMAX * cols), y[TMAX * ROWS], want[TMAX * ROWS];
            /* one magnitude a block: |q| = 127; q = -127 where a value has its block's first
             * value's sign, so in three blocks of six the rest take the other sign: q = +127 */
            for (int64_t i = 0; i < TMAX * cols; i++)
                x[i] = ((i / 256 + i / cols) % 2 ? -1.0f : 1.0f) *
                       (i % 256 && i / 256 / 3 % 2 ? -1.0f : 1.0f) * (float)(1 + (i / cols) % 3);
            for (int64_t T = 1; T <= TMAX; T++) {
                kn_isa_force(KN_ISA_SCALAR);
                run(&W, x, T, want, KN_NUM_Q8, NULL);
                for (int i = 0; i < nisa; i++) {
                    kt_use(&isas[i]);
                    run(&W, x, T, y, KN_NUM_Q8, NULL);
                    char what[112];
                    snprintf(what, sizeof what, "%s %s K=%lld T=%lld", isas[i].name,
                             kn_type_name(t), (long long)cols, (long long)T);
                    assert_true(kt_same_bits(what, y, want, T * ROWS));
                }
            }
            kt_free_mat(&W);
            free(x);
        }
    }
    kn_isa_force(prev);
}

/* The streaming few-token kernels at every batch size from 1 to 17 (passes of up to 8 tokens, the
 * switch to the batch tiles), on widths whose block count leaves a partial group or chunk of 8
 * (MXFP4 and Q8_0: 1 to 9 groups and tails, MXFP4 also an even and an odd count of full groups
 * without a tail and K = 2880, read from the stored rows and from the packed copy where that
 * replaces them, the rows two groups a step; Q6_K: 1 to 9 super-blocks; Q4_K: 1 to 15, so a chunk's
 * halves of four hold 0 to 4 of them, and 37 and 40, past the AVX2 kernel's 32 super-blocks of
 * unpacked scales at a time), on row ranges that start
 * inside the matrix (a 2-thread pool splits them; each unit is decoded ahead, across row ends):
 * every ISA equals the scalar reference bit for bit. */
static void test_streaming_every_batch_size(void **state) {
    (void)state;
    kt_rng r = {1717};
    kt_variant isas[KT_MAX_VARIANTS];
    const int nisa = kt_variants(isas);
    const kn_isa prev = kn_isa_active();
    kn_pool *pool = kn_pool_create(2);
    static const struct {
        kn_type t;
        int64_t cols;
    } shapes[] = {
        {KN_MXFP4, 32 * 3},  {KN_MXFP4, 32 * 8},  {KN_MXFP4, 32 * 37}, {KN_MXFP4, 32 * 16},
        {KN_MXFP4, 32 * 24}, {KN_MXFP4, 32 * 90}, {KN_Q8_0, 32 * 8},   {KN_Q8_0, 32 * 21},
        {KN_Q8_0, 32 * 72},  {KN_Q6_K, 256 * 1},  {KN_Q6_K, 256 * 8},  {KN_Q6_K, 256 * 9},
        {KN_Q6_K, 256 * 5},  {KN_Q4_K, 256 * 1},  {KN_Q4_K, 256 * 6},  {KN_Q4_K, 256 * 9},
        {KN_Q4_K, 256 * 15}, {KN_Q4_K, 256 * 7},  {KN_Q4_K, 256 * 37}, {KN_Q4_K, 256 * 40}};
    enum { TMAX = 17 };
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int64_t cols = shapes[si].cols, rows = 9 + (int64_t)si % 3;
        kn_mat W = kt_weights(&r, shapes[si].t, rows, cols, false);
        float *X = kt_gauss_vec(&r, TMAX * cols, 1.0f);
        float *want = malloc(TMAX * rows * 4), *got = malloc(TMAX * rows * 4);
        kn_isa_force(KN_ISA_SCALAR);
        for (int64_t t = 0; t < TMAX; t++)
            run(&W, X + t * cols, 1, want + t * rows, KN_NUM_Q8, NULL);
        for (int i = 0; i < nisa; i++) {
            if (isas[i].isa == KN_ISA_SCALAR) continue;
            kt_use(&isas[i]);
            /* the stored rows, then the packed copy where it replaces them (MXFP4) */
            const size_t pb = kn_pack_replaces(&W) ? kn_pack_bytes(&W) : 0;
            void *buf = NULL;
            if (pb) assert_int_equal(posix_memalign(&buf, 64, pb), 0);
            kn_mat P = W;
            kn_pack(&P, buf); /* nothing without a buffer */
            for (int v = 0; v < (pb ? 2 : 1); v++)
                for (int64_t T = 1; T <= TMAX; T++) {
                    memset(got, 0xff, T * rows * 4);
                    run(v ? &P : &W, X, T, got, KN_NUM_Q8, (T + v) % 2 ? pool : NULL);
                    char what[112];
                    snprintf(what, sizeof what, "%s%s %s %lldx%lld T=%lld", isas[i].name,
                             v ? " packed" : "", kn_type_name(W.type), (long long)rows,
                             (long long)cols, (long long)T);
                    assert_true(kt_same_bits(what, got, want, T * rows));
                }
            free(buf);
        }
        kt_free_mat(&W);
        free(X), free(want), free(got);
    }
    kn_pool_destroy(pool);
    kn_isa_force(prev);
}

/* W with its rows `pad` bytes further apart (a view into a wider stride, as a fused matrix's). */
static kn_mat strided(const kn_mat *W, size_t pad) {
    kn_mat S = *W;
    S.row_bytes = W->row_bytes + pad;
    uint8_t *d = calloc((size_t)W->rows, S.row_bytes);
    for (int64_t r = 0; r < W->rows; r++)
        memcpy(d + (size_t)r * S.row_bytes, (const uint8_t *)W->data + (size_t)r * W->row_bytes,
               W->row_bytes);
    S.data = d;
    return S;
}

/* The ISAs that share one packed layout (the AVX2 row's packer and kn_simd_x86_stream.h). */
static bool x86_layout(kn_isa isa) {
    return isa == KN_ISA_AVX2 || isa == KN_ISA_AVXVNNI;
}

/* A packed copy (kn_pack: on AVX-512 Q8_0's batch tiles and MXFP4's groups in its decode order,
 * on AVX2 and AVX-VNNI MXFP4's groups in theirs and Q4_K's super-blocks with their codes in the
 * order of one multiply per two groups) gives the bits of the stored rows, on every ISA that
 * packs: odd and even row counts, widths with and without a tail group (K = 2880), an odd block
 * count, MXFP4 rows with no full group, Q4_K rows of one super-block, of a full chunk of 8 and a
 * part, of 37 (past the 32 whose scales the AVX2 kernel unpacks at a time), with every scale and
 * code byte random, a row stride wider than the row, every T from 1 to 17 (the one-token
 * kernels, the few-token passes, the batch tiles), 1 and 2 threads (so slices start and end
 * inside a row pair), kn_matmul_many; a view changed after packing (fewer rows, data moved on a
 * row) ignores the packed copy. A copy read at every T (kn_pack_replaces: MXFP4, and Q4_K on AVX2
 * and AVX-VNNI) is as large as the rows and is all that is read: the stored bytes overwritten
 * after packing change no bit. A copy packed under one ISA is read by that ISA only (AVX2 and
 * AVX-VNNI share one): every ISA given every other's copy reads the stored rows. Q8_0's pairs
 * (AVX-512) are the stored rows' size (fp16 scales, a tail group of only its blocks; an odd last
 * row in its pair twice), kept beside the stored rows and read by one token where rows have no
 * tail group and by batches of 7 or more; where the active kernels have no packed layout,
 * kn_pack_bytes is 0 and kn_pack leaves W alone. */
static void test_packed_equals_stored(void **state) {
    (void)state;
    kt_rng r = {4242};
    kn_pool *pool = kn_pool_create(2);
    kt_variant isas[KT_MAX_VARIANTS];
    const int nisa = kt_variants(isas);
    const kn_isa prev = kn_isa_active();
    static const kn_type types[] = {KN_Q8_0, KN_MXFP4, KN_Q4_K};
    static const int64_t q4k_blocks[7] = {1, 12, 16, 37, 0, 7, 9}; /* 0: kt_pick_cols */
    enum { TMAX = 17 };
    uint64_t x86_magic[2] = {0, 0};
    for (int rep = 0; rep < 21; rep++) {
        const kn_type type = types[rep / 7];
        const int c = rep % 7;
        const int64_t cols = type == KN_Q4_K && c != 4 ? 256 * q4k_blocks[c]
                             : c < 2                   ? 2880
                             : c == 2                  ? 4096
                             : c == 3                  ? 13 * 32
                             : c == 5                  ? 352
                             : c == 6                  ? 64
                                                       : kt_pick_cols(&r, type);
        const int64_t rows = kt_range(&r, 1, 9) * 2 + (c % 2) + (c == 5 ? 300 : 0);
        /* raw MXFP4 bytes put an edge exponent in a third of the blocks, so a wide row's result
         * is inf or NaN whatever its codes: the wide ones are quantized Gaussian weights */
        kn_mat W0 = kt_weights(&r, type, rows, cols, type != KN_MXFP4 || c >= 4);
        if (type == KN_Q4_K && c != 1) /* every scale, min and code: random bytes after d, dmin */
            for (int64_t n = 0; n < rows; n++)
                for (int64_t b = 0; b < cols / 256; b++)
                    for (int j = 4; j < 144; j++)
                        ((uint8_t *)W0.data)[n * W0.row_bytes + 144 * b + j] = (uint8_t)kt_next(&r);
        kn_mat W = c == 4 ? strided(&W0, 24) : W0;
        float *X = kt_gauss_vec(&r, TMAX * cols, 1.0f);
        float *want = malloc(TMAX * TMAX * rows * 4), *got = malloc(TMAX * rows * 4);
        kn_isa_force(KN_ISA_SCALAR);
        for (int64_t T = 1; T <= TMAX; T++)
            run(&W, X, T, want + (T - 1) * TMAX * rows, KN_NUM_Q8, NULL);
        kn_mat P[KT_MAX_VARIANTS]; /* W packed under each ISA (packed NULL: it has no layout) */
        void *buf[KT_MAX_VARIANTS];
        for (int i = 0; i < nisa; i++) {
            kt_use(&isas[i]);
            const size_t pb = kn_pack_bytes(&W);
            const bool x86 = x86_layout(isas[i].isa);
            const bool packs =
                isas[i].isa == KN_ISA_AVX512 ? type != KN_Q4_K : x86 && type != KN_Q8_0;
            if (packs) {
                assert_true(pb > 0);
                assert_int_equal(kn_pack_replaces(&W), type != KN_Q8_0);
            }
            if (isas[i].isa == KN_ISA_SCALAR || ((x86 || isas[i].isa == KN_ISA_AVX512) && !packs))
                assert_int_equal(pb, 0);
            /* as large as the rows; Q8_0's pairs: as the stored rows, an odd last one twice */
            if (kn_pack_replaces(&W)) assert_int_equal(pb, 64 + (size_t)rows * W.row_bytes);
            if (packs && type == KN_Q8_0)
                assert_int_equal(pb, 64 + (size_t)(rows + 1) / 2 * 2 * kn_row_size(type, cols));
            buf[i] = NULL;
            if (pb) assert_int_equal(posix_memalign(&buf[i], 64, pb), 0);
            P[i] = W;
            kn_pack(&P[i], buf[i]);
            assert_true(pb ? P[i].packed == buf[i] : P[i].packed == NULL);
            /* AVX2's MXFP4 copies of rows with an exponent below 2 in a full group (raw bytes
             * with edge exponents, K = 352) and of quantized weights (K = 2880) keep their
             * exponents in two ways (kn_simd_x86.h), told apart by the header: both are read */
            if (x86 && type == KN_MXFP4 && (c == 0 || c == 5))
                memcpy(&x86_magic[c == 5], buf[i], sizeof x86_magic[0]);
        }
        for (int i = 0; i < nisa; i++) {
            if (!buf[i]) continue;
            kt_use(&isas[i]);
            for (int64_t T = 1; T <= TMAX; T++) {
                const float *w = want + (T - 1) * TMAX * rows;
                for (int th = 0; th < 2; th++) {
                    memset(got, 0xff, T * rows * 4);
                    run(&P[i], X, T, got, KN_NUM_Q8, th ? pool : NULL);
                    char what[160];
                    snprintf(what, sizeof what, "%s packed %s %lldx%lld T=%lld %d thread(s)",
                             isas[i].name, kn_type_name(type), (long long)rows, (long long)cols,
                             (long long)T, th + 1);
                    assert_true(kt_same_bits(what, got, w, T * rows));
                }
            }
            /* kn_matmul_many with a packed and a stored matrix */
            const kn_mat *two[2] = {&P[i], &W};
            float *Y2 = malloc(TMAX * rows * 4);
            float *const outs[2] = {got, Y2};
            kn_matmul_many(two, outs, 2, X, 9, KN_NUM_Q8, pool);
            assert_true(
                kt_same_bits("packed in kn_matmul_many", got, want + 8 * TMAX * rows, 9 * rows));
            assert_true(
                kt_same_bits("stored in kn_matmul_many", Y2, want + 8 * TMAX * rows, 9 * rows));
            free(Y2);
            /* views changed after packing: the packed copy describes another matrix */
            if (rows > 2) {
                float *ref = malloc(5 * rows * 4);
                kn_mat V = P[i];
                V.rows = rows - 1;
                run(&V, X, 5, got, KN_NUM_Q8, pool);
                kn_mat Vw = W;
                Vw.rows = rows - 1;
                run(&Vw, X, 5, ref, KN_NUM_Q8, pool);
                assert_true(kt_same_bits("view with fewer rows", got, ref, 5 * (rows - 1)));
                V = P[i];
                V.rows = rows - 1;
                V.data = (const uint8_t *)V.data + V.row_bytes;
                Vw = V;
                Vw.packed = NULL;
                run(&V, X, 5, got, KN_NUM_Q8, pool);
                run(&Vw, X, 5, ref, KN_NUM_Q8, pool);
                assert_true(kt_same_bits("view moved a row on", got, ref, 5 * (rows - 1)));
                free(ref);
            }
        }
        /* each ISA's copy made from a scratch copy S of the rows, whose bytes are then
         * overwritten: under the ISA that made it (and AVX-VNNI and AVX2, one layout), a copy
         * read at every T (kn_pack_replaces) is all that is read, so no bit changes; every other
         * ISA ignores it and reads the overwritten rows, as without it (AVX2's and AVX-512's
         * MXFP4 layouts share their code bytes: only this tells whether a kernel took another
         * ISA's copy for its own) */
        float *ref = malloc(TMAX * rows * 4);
        for (int j = 0; j < nisa; j++) {
            if (!buf[j]) continue;
            kt_use(&isas[j]);
            const bool every_t = kn_pack_replaces(&W);
            kn_mat S = strided(&W, 0), Q = S;
            void *qb = NULL;
            assert_int_equal(posix_memalign(&qb, 64, kn_pack_bytes(&S)), 0);
            kn_pack(&Q, qb);
            memset((void *)S.data, 0xA5, (size_t)rows * S.row_bytes);
            for (int i = 0; i < nisa; i++) {
                const bool own = i == j || (x86_layout(isas[i].isa) && x86_layout(isas[j].isa));
                if (own && !every_t) continue;
                kt_use(&isas[i]);
                for (int64_t T = 1; T <= TMAX; T++) {
                    if (i != j && T != 1 && T != 5 && T != 17) continue;
                    memset(got, 0xff, T * rows * 4);
                    run(&Q, X, T, got, KN_NUM_Q8, T % 2 ? pool : NULL);
                    if (!own) run(&S, X, T, ref, KN_NUM_Q8, NULL);
                    char what[160];
                    snprintf(what, sizeof what, "%s given %s's packed %s %lldx%lld T=%lld",
                             isas[i].name, isas[j].name, kn_type_name(type), (long long)rows,
                             (long long)cols, (long long)T);
                    assert_true(kt_same_bits(what, got, own ? want + (T - 1) * TMAX * rows : ref,
                                             T * rows));
                }
            }
            free(qb);
            kt_free_mat(&S);
        }
        free(ref);
        for (int i = 0; i < nisa; i++) free(buf[i]);
        free(X), free(want), free(got);
        if (c == 4) kt_free_mat(&W);
        kt_free_mat(&W0);
    }
    for (int i = 0; i < nisa; i++)
        if (isas[i].isa == KN_ISA_AVX2) assert_true(x86_magic[0] && x86_magic[1] != x86_magic[0]);
    kn_pool_destroy(pool);
    kn_isa_force(prev);
}

/* A kernel's rows over any range [n0, n1) of a packed MXFP4 or Q8_0 copy, called directly
 * (kn_matmul cuts ranges at multiples of 24 rows): ranges that start and end at every row, inside
 * a row pair too, the odd last row alone or with the rows before it, at every T from 1 to 20 (the
 * streaming passes of 1 to 8 tokens, the batch tile past 16) and on widths with and without a
 * tail group (Q8_0: tails of 1 to 7 blocks, which its pairs keep compact, so a read past them
 * leaves the copy: ASan) and with no full group: each row equals the scalar reference bit for bit
 * and no row outside the range is written. */
static void test_packed_row_ranges(void **state) {
    (void)state;
    kt_rng r = {9090};
    kt_variant isas[KT_MAX_VARIANTS];
    const int nisa = kt_variants(isas);
    const kn_isa prev = kn_isa_active();
    static const struct {
        kn_type t;
        int64_t cols;
    } widths[] = {{KN_MXFP4, 2880},   {KN_MXFP4, 32 * 16}, {KN_MXFP4, 32 * 5}, {KN_Q8_0, 2880},
                  {KN_Q8_0, 32 * 16}, {KN_Q8_0, 32 * 5},   {KN_Q8_0, 32 * 1},  {KN_Q8_0, 32 * 9},
                  {KN_Q8_0, 32 * 10}, {KN_Q8_0, 32 * 11},  {KN_Q8_0, 32 * 12}, {KN_Q8_0, 32 * 13},
                  {KN_Q8_0, 32 * 14}, {KN_Q8_0, 32 * 15},  {KN_Q8_0, 32 * 23}};
    enum { TMAX = 20 };
    for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++)
        for (int64_t rows = 7; rows <= 8; rows++) {
            const int64_t cols = widths[wi].cols;
            const kn_type type = widths[wi].t;
            kn_mat W = kt_weights(&r, type, rows, cols, true);
            float *X = kt_gauss_vec(&r, TMAX * cols, 1.0f);
            float *want = malloc(TMAX * rows * 4), *got = malloc(TMAX * rows * 4);
            kn_isa_force(KN_ISA_SCALAR);
            run(&W, X, TMAX, want, KN_NUM_Q8, NULL);
            for (int i = 0; i < nisa; i++) {
                kt_use(&isas[i]);
                const size_t pb = kn_pack_bytes(&W);
                if (!pb) continue;
                void *buf = NULL;
                /* exactly the copy's bytes: ASan sees any read past its end */
                assert_int_equal(posix_memalign(&buf, 64, pb), 0);
                kn_mat P = W;
                kn_pack(&P, buf);
                const kn__kernel *k = kn__kernel_for(type, KN_NUM_Q8);
                const size_t stride = kn__align64(k->act_bytes(cols));
                void *act = NULL, *scratch = NULL;
                assert_int_equal(posix_memalign(&act, 64, stride * TMAX), 0);
                const size_t sb = k->scratch_bytes ? k->scratch_bytes(&P, TMAX) : 0;
                if (sb) assert_int_equal(posix_memalign(&scratch, 64, sb), 0);
                for (int64_t t = 0; t < TMAX; t++)
                    k->act_prep(X + t * cols, (uint8_t *)act + t * stride, cols);
                for (int64_t T = 1; T <= TMAX; T++) {
                    const kn__act x = {act, stride, T};
                    for (int64_t n0 = 0; n0 < rows; n0++)
                        for (int64_t n1 = n0 + 1; n1 <= rows; n1++) {
                            memset(got, 0xff, T * rows * 4);
                            k->rows(&P, &x, got, rows, n0, n1, scratch);
                            for (int64_t t = 0; t < T; t++)
                                for (int64_t n = 0; n < rows; n++) {
                                    const float *w = want + t * rows + n, *g = got + t * rows + n;
                                    uint32_t none = 0xffffffffu, gb;
                                    memcpy(&gb, g, 4);
                                    const bool ok =
                                        n >= n0 && n < n1 ? !memcmp(g, w, 4) : gb == none;
                                    if (!ok)
                                        fail_msg("%s packed %s %lldx%lld T=%lld rows [%lld, %lld): "
                                                 "row %lld token %lld",
                                                 isas[i].name, kn_type_name(type), (long long)rows,
                                                 (long long)cols, (long long)T, (long long)n0,
                                                 (long long)n1, (long long)n, (long long)t);
                                }
                        }
                }
                free(act), free(scratch), free(buf);
            }
            kt_free_mat(&W);
            free(X), free(want), free(got);
        }
    kn_isa_force(prev);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accuracy_against_float64),
        cmocka_unit_test(test_canonical_order_emulated),
        cmocka_unit_test(test_invariance_batch_threads_isa),
        cmocka_unit_test(test_matmul_many_equals_single),
        cmocka_unit_test(test_big_jobs_split_rows),
        cmocka_unit_test(test_e8m0_edges_in_matmul),
        cmocka_unit_test(test_partial_group_reads_past_row),
        cmocka_unit_test(test_kquant_extreme_sums),
        cmocka_unit_test(test_streaming_every_batch_size),
        cmocka_unit_test(test_packed_equals_stored),
        cmocka_unit_test(test_packed_row_ranges),
    };
    return cmocka_run_group_tests_name("kernels_matmul", tests, NULL, NULL);
}
