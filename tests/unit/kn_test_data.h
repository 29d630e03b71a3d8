/* tests/unit/kn_test_data.h — test data for the kernel tests, free of any test framework so the
 * aarch64 self-test (tests/neon/neon_selftest.c) shares it: a fixed-seed PRNG, random matrices in
 * every computable format, a float64 reference matmul, and the activations Q8 mode multiplies by.
 */
#ifndef KN_TEST_DATA_H
#define KN_TEST_DATA_H

#include "kernels/kn_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct kt_rng {
    uint64_t s;
} kt_rng;

static inline uint64_t kt_next(kt_rng *r) { /* splitmix64 */
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline double kt_uniform(kt_rng *r) {
    return (double)(kt_next(r) >> 11) * 0x1p-53;
}
static inline float kt_gauss(kt_rng *r, float sigma) {
    double u1 = kt_uniform(r), u2 = kt_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return (float)(sigma * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
static inline int kt_range(kt_rng *r, int lo, int hi) { /* inclusive */
    return lo + (int)(kt_next(r) % (uint64_t)(hi - lo + 1));
}

static inline float *kt_gauss_vec(kt_rng *r, int64_t n, float sigma) {
    float *v = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) v[i] = kt_gauss(r, sigma);
    return v;
}

/* A rows x cols matrix of type t quantized (from_float) from N(0, sigma^2) floats. */
static inline kn_mat kt_random_mat(kt_rng *r, kn_type t, int64_t rows, int64_t cols, float sigma) {
    const kn_type_traits *tr = kn_traits(t);
    kn_mat m = {.type = t, .rows = rows, .cols = cols, .row_bytes = kn_row_size(t, cols)};
    uint8_t *data = malloc(m.row_bytes * (size_t)rows + 1);
    float *row = malloc((size_t)cols * sizeof(float));
    for (int64_t i = 0; i < rows; i++) {
        for (int64_t k = 0; k < cols; k++) row[k] = kt_gauss(r, sigma);
        tr->from_float(row, data + (size_t)i * m.row_bytes, cols);
    }
    free(row);
    m.data = data;
    return m;
}

static inline void kt_free_mat(kn_mat *m) {
    free((void *)m->data);
    m->data = NULL;
}

/* Y = W X in float64 from dequantized weights and the given activations, rounded to float. */
static inline void kt_ref_matmul(const kn_mat *W, const float *X, int64_t T, float *Y) {
    float *w = malloc((size_t)W->cols * sizeof(float));
    for (int64_t n = 0; n < W->rows; n++) {
        kn_mat_row(W, n, w);
        for (int64_t t = 0; t < T; t++) {
            double s = 0;
            for (int64_t k = 0; k < W->cols; k++) s += (double)w[k] * X[t * W->cols + k];
            Y[t * W->rows + n] = (float)s;
        }
    }
    free(w);
}

/* The activations Q8 mode multiplies by: x rounded through the weight type's vec_dot_type. */
static inline void kt_q8_view(kn_type wt, const float *x, int64_t k, float *out) {
    const kn_type vdt = kn_traits(wt)->vec_dot_type;
    const kn_type_traits *tr = kn_traits(vdt);
    if (vdt == KN_F32) {
        memcpy(out, x, (size_t)k * sizeof(float));
        return;
    }
    void *q = malloc(kn_row_size(vdt, k));
    tr->from_float(x, q, k);
    tr->to_float(q, out, k);
    free(q);
}

/* Column counts per type: block multiples that are not multiples of 256 where allowed. */
static inline int64_t kt_pick_cols(kt_rng *r, kn_type t) {
    const int bs = kn_traits(t)->blck_size;
    if (bs == 256) return 256 * kt_range(r, 1, 3);
    if (bs == 32) {
        static const int64_t c[] = {32, 96, 2880, 352};
        return c[kt_range(r, 0, 3)];
    }
    static const int64_t c[] = {1, 7, 33, 45, 100, 2880};
    return c[kt_range(r, 0, 5)];
}

/* W in type t: from_float of Gaussian weights, or (MXFP4, Q6_K) raw random bytes so every code
 * appears: every E8M0 value (raw exponents are kept near 127 except for a few edge bytes), and
 * every Q6_K group scale, -128 and 127 included (the fp16 d stays the quantizer's). */
static inline kn_mat kt_weights(kt_rng *r, kn_type t, int64_t rows, int64_t cols, bool raw) {
    kn_mat m = kt_random_mat(r, t, rows, cols, 0.05f);
    if (raw && t == KN_MXFP4) {
        uint8_t *d = (uint8_t *)m.data;
        static const uint8_t edges[] = {0x00, 0x01, 0xFE, 0xFF, 0x02, 0x7F};
        for (int64_t n = 0; n < rows; n++)
            for (int64_t b = 0; b < cols / 32; b++) {
                uint8_t *blk = d + n * m.row_bytes + 17 * b;
                for (int j = 1; j < 17; j++) blk[j] = (uint8_t)kt_next(r);
                const int pick = kt_range(r, 0, 15);
                blk[0] = pick < 6 ? edges[pick] : (uint8_t)kt_range(r, 110, 134);
            }
    }
    if (raw && t == KN_Q6_K) {
        uint8_t *d = (uint8_t *)m.data;
        for (int64_t n = 0; n < rows; n++)
            for (int64_t b = 0; b < cols / 256; b++) {
                uint8_t *blk = d + n * m.row_bytes + 210 * b;
                for (int j = 0; j < 208; j++) blk[j] = (uint8_t)kt_next(r);
                blk[192 + kt_range(r, 0, 15)] = 0x80; /* scale -128: the widest product */
            }
    }
    return m;
}

/* Max |a - b| relative to max |b| (the reading of "relative" used for fixture tolerances: an
 * entry near zero is judged against the vector's scale, not its own size). */
static inline double kt_rel_to_max(const float *a, const float *b, size_t n) {
    double m = 0, d = 0;
    for (size_t i = 0; i < n; i++) {
        if (fabs(b[i]) > m) m = fabs(b[i]);
        double e = fabs((double)a[i] - b[i]);
        if (e > d || e != e) d = e;
    }
    return m > 0 ? d / m : d;
}

/* Bit equality of n floats; prints the first difference. Returns true when identical. */
static inline bool kt_same_bits(const char *what, const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) {
            uint32_t ua, ub;
            memcpy(&ua, &a[i], 4);
            memcpy(&ub, &b[i], 4);
            fprintf(stderr, "%s: first difference at %zu: %.9g (0x%08x) vs %.9g (0x%08x)\n", what,
                    i, a[i], ua, b[i], ub);
            return false;
        }
    }
    return true;
}

/* Every type with kernels, for loops over formats. */
static const kn_type kt_compute_types[] = {KN_F32,  KN_F16,  KN_BF16, KN_Q8_0,
                                           KN_Q4_K, KN_Q6_K, KN_Q8_K, KN_MXFP4};
#define KT_NTYPES (sizeof kt_compute_types / sizeof kt_compute_types[0])

#endif
