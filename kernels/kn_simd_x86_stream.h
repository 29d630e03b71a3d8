/* kernels/kn_simd_x86_stream.h — internal: the streaming kernels of the AVX2 and AVX-VNNI rows for
 * a few tokens (MXFP4 and Q8_0 up to 8, Q6_K up to 16 in passes of 8), included by kn_simd_avx2.c
 * and kn_simd_avxvnni.c after kn_simd_x86_int8.h (whose names, multiply-add macros, decoders and
 * batch tiles they use).
 *
 * Why this shape: with 16 vector registers a group's decoded weights (8 vectors) and a few tokens'
 * accumulators fill the register file, and on these cores the token work of one group (two
 * hundred instructions at 8 tokens) fills the scheduler, so a group decoded just before its tokens
 * waits for its loads and shuffles while the multiply pipes idle: the decode's latency is paid once
 * per group. Here each unit (a group of 8 blocks, a Q6_K super-block) is decoded one step ahead
 * into a two-slot ring in L1, across row ends too: the next unit's shuffles run beside this unit's
 * multiply-adds, whose weights come back from the ring with a few loads. A unit is decoded once and
 * applied to every token, so the row is read from memory once whatever the tokens. Q6_K keeps each
 * token's 8-lane super-block sums of a chunk of 8 super-blocks in L1 and reduces them together
 * (kn__x86_reduce8_i32), then runs the canonical fma on 8 lanes at once; the scales of a chunk's
 * super-blocks are converted in one step. Every block's sum and fma are the canonical ones, so the
 * bits are the scalar reference's at any T. */
#ifndef KN_SIMD_X86_STREAM_H
#define KN_SIMD_X86_STREAM_H

#ifndef KN__XS_RING
#define KN__XS_RING 1
#endif
#define KN__XS_FEW 8 /* tokens a streaming pass takes */
#define KN__XS_Q6K_MAX                                                                             \
    16 /* Q6_K batches up to this many tokens stream (in passes); more: the tile */

/* ---- MXFP4 and Q8_0 -------------------------------------------------------------------------- */

/* A decoded group in the ring: MXFP4's biased codes (w[0..7]); Q8_0's |w| (w[0..7]) and w for the
 * signs (w[8..15]); then the 8 blocks' weight scales (0 for blocks past the row). */
typedef struct kn__xs_grp {
    __m256i w[16];
    __m256 sw;
} kn__xs_grp;

/* Group g of a row (nb blocks, `full` of its groups whole) into slot s. A tail group is read in
 * place when its window lies before `end` (the blocks past the row meet zero activations and get
 * a weight scale of 0: Q8_0's d there could be inf or NaN, a subnormal MXFP4 h costs a microcode
 * assist), else through the zero-padding decoder. */
static inline __attribute__((always_inline)) void
KN__X86_NAME(xs_dec32)(const uint8_t *row, int64_t g, int64_t nb, int64_t full, const uint8_t *end,
                       kn__xs_grp *s, const bool q8) {
    const int bytes = q8 ? KN__Q8_0_BYTES : KN__MXFP4_BYTES;
    const uint8_t *grp = row + g * 8 * bytes;
    __m256i w[8];
    __m256 sw;
    if (g < full) {
        kn__x86_prefetch(grp, 8 * bytes);
        if (q8) {
            kn__x86_q8_0_group(grp, w);
            sw = kn__x86_q8_0_d(grp);
        } else {
            kn__x86_mxfp4_group(grp, w);
            sw = kn__x86_mxfp4_h(grp);
        }
    } else if (end - grp >= 8 * bytes) {
        if (q8) {
            kn__x86_q8_0_group(grp, w);
            sw = kn__x86_q8_0_d(grp);
        } else {
            kn__x86_mxfp4_group(grp, w);
            sw = kn__x86_mxfp4_h(grp);
        }
        sw = _mm256_and_ps(sw, kn__x86_live_lanes(nb - 8 * full));
    } else {
        _Alignas(64) uint8_t dec[KN__X86_GROUP_QS + 32];
        if (q8)
            kn__x86_decode_q8_0(grp, (nb - 8 * full) * KN__QK32, dec);
        else
            kn__x86_decode_mxfp4(grp, (nb - 8 * full) * KN__QK32, dec);
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) w[k] = _mm256_load_si256((const __m256i *)dec + k);
        sw = _mm256_load_ps((const float *)(dec + KN__X86_GROUP_QS));
    }
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
        if (q8) {
            _mm256_store_si256(&s->w[k], _mm256_sign_epi8(w[k], w[k]));
            _mm256_store_si256(&s->w[8 + k], w[k]);
        } else {
            _mm256_store_si256(&s->w[k], w[k]);
        }
    }
    _mm256_store_ps((float *)&s->sw, sw);
}

/* Q8_0's block sums from the ring: |w| against sign(x, w) (exact). */
static inline __m256i KN__X86_NAME(xs_sum8_abs)(const __m256i *aw, const __m256i *w,
                                                const __m256i *x) {
    __m256i acc[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
        const __m256i sx = _mm256_sign_epi8(_mm256_load_si256(x + k), _mm256_load_si256(w + k));
#ifdef KN__DPBUSD
        acc[k % 2] = KN__DPBUSD(acc[k % 2], _mm256_load_si256(aw + k), sx);
#else
        acc[k % 2] = _mm256_add_epi32(
            acc[k % 2], _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_load_si256(aw + k), sx),
                                          _mm256_set1_epi16(1)));
#endif
    }
    return _mm256_add_epi32(acc[0], acc[1]);
}

/* Rows n0 .. n1 of W (MXFP4 or Q8_0) against nt prepared tokens, each unit decoded one step ahead
 * (the next row's first group while a row's last one runs). */
static inline __attribute__((always_inline)) void
KN__X86_NAME(xs_rows32)(const kn_mat *W, const uint8_t *const *x, float *Y, int64_t ldy, int64_t n0,
                        int64_t n1, const int nt, const bool q8) {
    if (n0 >= n1) return;
    const int64_t nb = W->cols / KN__QK32, ng = (nb + 7) / 8, full = nb / 8;
    const uint8_t *end = kn__x86_mat_end(W), *data = W->data;
    const float *dx[KN__XS_FEW];
    const int32_t *xs[KN__XS_FEW];
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        dx[t] = (const float *)(x[t] + ng * KN__X86_GROUP_QS);
        xs[t] = (const int32_t *)(dx[t] + ng * 8);
    }
#if KN__XS_RING
    kn__xs_grp ring[2];
    int slot = 0;
    KN__X86_NAME(xs_dec32)(data + (size_t)n0 * W->row_bytes, 0, nb, full, end, &ring[0], q8);
#endif
    for (int64_t r = n0; r < n1; r++) {
        const uint8_t *row = data + (size_t)r * W->row_bytes;
        __m256 acc[KN__XS_FEW];
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
        for (int64_t g = 0; g < ng; g++) {
#if KN__XS_RING
            if (g + 1 < ng)
                KN__X86_NAME(xs_dec32)(row, g + 1, nb, full, end, &ring[slot ^ 1], q8);
            else if (r + 1 < n1)
                KN__X86_NAME(xs_dec32)(row + W->row_bytes, 0, nb, full, end, &ring[slot ^ 1], q8);
            const kn__xs_grp *s = &ring[slot];
            slot ^= 1;
#else
            kn__xs_grp cur;
            KN__X86_NAME(xs_dec32)(row, g, nb, full, end, &cur, q8);
            const kn__xs_grp *s = &cur;
#endif
#pragma GCC unroll 8
            for (int t = 0; t < nt; t++) {
                const __m256i *xv = (const __m256i *)(x[t] + g * KN__X86_GROUP_QS);
                const __m256i isum =
                    q8 ? KN__X86_NAME(xs_sum8_abs)(s->w, s->w + 8, xv)
                       : _mm256_add_epi32(KN__X86_NAME(sum8_small)(s->w, xv),
                                          _mm256_load_si256((const __m256i *)(xs[t] + 8 * g)));
                acc[t] = KN__X86_NAME(group_fma)(isum, dx[t] + 8 * g, s->sw, acc[t]);
            }
        }
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) Y[t * ldy + r] = kn__x86_tree8(acc[t]);
    }
}

/* xs_<kind><n>: rows n0 .. n1 against n tokens (one function per n, so the token loops unroll to
 * constants), and the tables of them by n. */
#define KN__XS_ROWS32(n)                                                                           \
    static __attribute__((flatten)) void KN__X86_NAME(xs_mxfp4_##n)(                               \
        const kn_mat *W, const uint8_t *const *x, float *Y, int64_t ldy, int64_t n0, int64_t n1) { \
        KN__X86_NAME(xs_rows32)(W, x, Y, ldy, n0, n1, n, false);                                   \
    }                                                                                              \
    static __attribute__((flatten)) void KN__X86_NAME(xs_q8_0_##n)(                                \
        const kn_mat *W, const uint8_t *const *x, float *Y, int64_t ldy, int64_t n0, int64_t n1) { \
        KN__X86_NAME(xs_rows32)(W, x, Y, ldy, n0, n1, n, true);                                    \
    }
KN__XS_ROWS32(1)
KN__XS_ROWS32(2)
KN__XS_ROWS32(3)
KN__XS_ROWS32(4)
KN__XS_ROWS32(5)
KN__XS_ROWS32(6)
KN__XS_ROWS32(7)
KN__XS_ROWS32(8)
#undef KN__XS_ROWS32

#define KN__XS_TABLE(kind)                                                                         \
    static const kn__x86_few_fn KN__X86_NAME(xs_##kind)[KN__XS_FEW + 1] = {                        \
        NULL,                                                                                      \
        KN__X86_NAME(xs_##kind##_1),                                                               \
        KN__X86_NAME(xs_##kind##_2),                                                               \
        KN__X86_NAME(xs_##kind##_3),                                                               \
        KN__X86_NAME(xs_##kind##_4),                                                               \
        KN__X86_NAME(xs_##kind##_5),                                                               \
        KN__X86_NAME(xs_##kind##_6),                                                               \
        KN__X86_NAME(xs_##kind##_7),                                                               \
        KN__X86_NAME(xs_##kind##_8)};
KN__XS_TABLE(mxfp4)
KN__XS_TABLE(q8_0)

/* Rows n0 .. n1 against all of x's tokens with fns[n], in passes of at most KN__XS_FEW tokens as
 * even as can be (each pass streams the rows again). */
static inline void KN__X86_NAME(xs_passes)(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy,
                                           int64_t n0, int64_t n1, const kn__x86_few_fn *fns) {
    const int64_t passes = (x->T + KN__XS_FEW - 1) / KN__XS_FEW;
    for (int64_t p = 0, t0 = 0; p < passes; p++) {
        const int64_t tn = (x->T - t0) / (passes - p);
        const uint8_t *xt[KN__XS_FEW];
        for (int64_t t = 0; t < tn; t++)
            xt[t] = (const uint8_t *)x->data + (size_t)(t0 + t) * x->stride;
        fns[tn](W, xt, Y + t0 * ldy, ldy, n0, n1);
        t0 += tn;
    }
}

/* MXFP4 / Q8_0 rows: up to KN__XS_FEW tokens streamed, batches beyond through the decoded tile. */
static void KN__X86_NAME(xs_rows_mxfp4)(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy,
                                        int64_t n0, int64_t n1, void *scratch) {
    if (x->T > KN__XS_FEW)
        KN__X86_NAME(rows_tile)(W, x, Y, ldy, n0, n1, scratch, true);
    else
        KN__X86_NAME(xs_passes)(W, x, Y, ldy, n0, n1, KN__X86_NAME(xs_mxfp4));
}

static void KN__X86_NAME(xs_rows_q8_0)(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy,
                                       int64_t n0, int64_t n1, void *scratch) {
    if (x->T > KN__XS_FEW)
        KN__X86_NAME(rows_tile)(W, x, Y, ldy, n0, n1, scratch, false);
    else
        KN__X86_NAME(xs_passes)(W, x, Y, ldy, n0, n1, KN__X86_NAME(xs_q8_0));
}

/* ---- Q6_K ------------------------------------------------------------------------------------ */

/* A decoded super-block in the ring: the codes group-interleaved (kn__x86_q6k_interleave), the
 * per-word group scales and the 16 scales times -32 (against the bsums). */
typedef struct kn__xs_q6 {
    __m256i c[8];
    __m256i sg, scm;
} kn__xs_q6;

static inline __attribute__((always_inline)) void KN__X86_NAME(xs_dec_q6)(const uint8_t *blk,
                                                                          kn__xs_q6 *s) {
    __m256i c[8];
    kn__x86_prefetch(blk, KN__Q6_K_BYTES);
    kn__x86_q6k_codes(blk, c);
    kn__x86_q6k_interleave(c);
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) _mm256_store_si256(&s->c[i], c[i]);
    _mm256_store_si256(&s->sg, kn__x86_q6k_group_scales(blk));
    _mm256_store_si256(
        &s->scm,
        _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 192))),
                           _mm256_set1_epi16(-32)));
}

/* The prepared Q6_K activation row (defined in kn_simd_avx2.c): kn__x86_prep_q8_Ki's bytes, then
 * the blocks' d as floats at kn__xs_q8_Kd_dx, zero-padded to a multiple of 8 (a chunk's 8 in one
 * load). */
size_t kn__x86_q8_Kd_bytes(int64_t k);
void kn__x86_prep_q8_Kd(const float *x, void *dst, int64_t k);
static inline size_t kn__xs_q8_Kd_dx(int64_t k) {
    return kn__x86_q8_Ki_bytes(k);
}

/* Rows n0 .. n1 of W (Q6_K) against nt tokens: per super-block and token, vpmaddubsw of two code
 * vectors against the interleaved q added in int16 (at most 32004), one multiply-add by the group
 * scales, from sum(-32 * scale * bsum): 8 lanes totalling the exact isum, kept for the chunk. */
static inline __attribute__((always_inline)) void
KN__X86_NAME(xs_rows_q6k)(const kn_mat *W, const uint8_t *const *x, float *Y, int64_t ldy,
                          int64_t n0, int64_t n1, const int nt) {
    if (n0 >= n1) return;
    const int64_t nb = W->cols / KN__QK_K;
    const uint8_t *data = W->data;
    const kn__block_q8_K *xb[KN__XS_FEW];
    const uint8_t *qi[KN__XS_FEW];
    const float *dx[KN__XS_FEW];
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        xb[t] = (const kn__block_q8_K *)x[t];
        qi[t] = x[t] + kn__x86_q8_Ki_qs(W->cols);
        dx[t] = (const float *)(x[t] + kn__xs_q8_Kd_dx(W->cols));
    }
    __m256i s[KN__XS_FEW][8];
#if KN__XS_RING
    kn__xs_q6 ring[2];
    int slot = 0;
    KN__X86_NAME(xs_dec_q6)(data + (size_t)n0 * W->row_bytes, &ring[0]);
#endif
    for (int64_t r = n0; r < n1; r++) {
        const uint8_t *row = data + (size_t)r * W->row_bytes;
        __m256 acc[KN__XS_FEW];
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
        for (int64_t b0 = 0; b0 < nb; b0 += 8) {
            const int n = nb - b0 < 8 ? (int)(nb - b0) : 8;
            for (int i = 0; i < n; i++) {
                const int64_t b = b0 + i;
#if KN__XS_RING
                if (b + 1 < nb)
                    KN__X86_NAME(xs_dec_q6)(row + (b + 1) * KN__Q6_K_BYTES, &ring[slot ^ 1]);
                else if (r + 1 < n1)
                    KN__X86_NAME(xs_dec_q6)(row + W->row_bytes, &ring[slot ^ 1]);
                const kn__xs_q6 *w = &ring[slot];
                slot ^= 1;
#else
                kn__xs_q6 cur;
                KN__X86_NAME(xs_dec_q6)(row + b * KN__Q6_K_BYTES, &cur);
                const kn__xs_q6 *w = &cur;
#endif
#pragma GCC unroll 8
                for (int t = 0; t < nt; t++) {
                    __m256i a = _mm256_madd_epi16(
                        _mm256_loadu_si256((const __m256i *)xb[t][b].bsums), w->scm);
                    const uint8_t *q = qi[t] + KN__QK_K * b;
#pragma GCC unroll 4
                    for (int k = 0; k < 8; k += 2) {
                        const __m256i p = _mm256_add_epi16(
                            _mm256_maddubs_epi16(w->c[k],
                                                 _mm256_load_si256((const __m256i *)(q + 32 * k))),
                            _mm256_maddubs_epi16(
                                w->c[k + 1],
                                _mm256_load_si256((const __m256i *)(q + 32 * k + 32))));
                        a = KN__DPWSSD(a, p, w->sg);
                    }
                    _mm256_store_si256(&s[t][i], a);
                }
            }
            for (int i = n; i < 8; i++)
                for (int t = 0; t < nt; t++) s[t][i] = _mm256_setzero_si256();
            _Alignas(16) uint16_t d16[8];
            for (int i = 0; i < 8; i++)
                d16[i] = i < n ? kn__rd16(row + (b0 + i) * KN__Q6_K_BYTES + 208) : 0;
            const __m256 dw = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)d16));
#pragma GCC unroll 8
            for (int t = 0; t < nt; t++)
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(kn__x86_reduce8_i32(s[t])),
                                         _mm256_mul_ps(dw, _mm256_loadu_ps(dx[t] + b0)), acc[t]);
        }
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) Y[t * ldy + r] = kn__x86_tree8(acc[t]);
    }
}

#define KN__XS_ROWS_Q6K(n)                                                                         \
    static __attribute__((flatten)) void KN__X86_NAME(xs_q6k_##n)(                                 \
        const kn_mat *W, const uint8_t *const *x, float *Y, int64_t ldy, int64_t n0, int64_t n1) { \
        KN__X86_NAME(xs_rows_q6k)(W, x, Y, ldy, n0, n1, n);                                        \
    }
KN__XS_ROWS_Q6K(1)
KN__XS_ROWS_Q6K(2)
KN__XS_ROWS_Q6K(3)
KN__XS_ROWS_Q6K(4)
KN__XS_ROWS_Q6K(5)
KN__XS_ROWS_Q6K(6)
KN__XS_ROWS_Q6K(7)
KN__XS_ROWS_Q6K(8)
#undef KN__XS_ROWS_Q6K
KN__XS_TABLE(q6k)
#undef KN__XS_TABLE

/* Q6_K rows: up to KN__XS_Q6K_MAX tokens streamed (in passes), batches beyond through the tile. */
static void KN__X86_NAME(xs_rows_q6_K)(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy,
                                       int64_t n0, int64_t n1, void *scratch) {
    if (x->T > KN__XS_Q6K_MAX)
        KN__X86_NAME(rows_q6_K_tiled)(W, x, Y, ldy, n0, n1, scratch);
    else
        KN__X86_NAME(xs_passes)(W, x, Y, ldy, n0, n1, KN__X86_NAME(xs_q6k));
}

static size_t KN__X86_NAME(xs_scratch_q6_K)(const kn_mat *W, int64_t T) {
    return T > KN__XS_Q6K_MAX ? KN__X86_NAME(scratch_q6_K)(W, T) : 0;
}

/* ---- this variant's streaming kernels -------------------------------------------------------- */

static const kn__kernel KN__X86_NAME(xs_k_mxfp4) = {
    KN__X86_LABEL "-mxfp4-q8_0p", kn__x86_q8_0p_bytes, kn__x86_prep_q8_0p,
    KN__X86_NAME(scratch_mxfp4), KN__X86_NAME(xs_rows_mxfp4)};
static const kn__kernel KN__X86_NAME(xs_k_q8_0) = {KN__X86_LABEL "-q8_0-q8_0p", kn__x86_q8_0p_bytes,
                                                   kn__x86_prep_q8_0p, KN__X86_NAME(scratch_q8_0),
                                                   KN__X86_NAME(xs_rows_q8_0)};
static const kn__kernel KN__X86_NAME(xs_k_q6_K) = {
    KN__X86_LABEL "-q6_K-q8_Kd", kn__x86_q8_Kd_bytes, kn__x86_prep_q8_Kd,
    KN__X86_NAME(xs_scratch_q6_K), KN__X86_NAME(xs_rows_q6_K)};

/* The Q8-mode kernel of type t: the streaming ones above, else kn_simd_x86_int8.h's. */
static inline const kn__kernel *KN__X86_NAME(xs_kernel)(kn_type t) {
    switch (t) {
    case KN_Q6_K:
        return &KN__X86_NAME(xs_k_q6_K);
    default:
        return (int)t >= 0 && t < KN_TYPE_COUNT ? KN__X86_NAME(int8_kernels)[t] : NULL;
    }
}

#endif
