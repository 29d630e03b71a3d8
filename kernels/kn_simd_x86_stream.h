/* kernels/kn_simd_x86_stream.h — internal: the streaming kernels of the AVX2 and AVX-VNNI rows for
 * a few tokens: MXFP4, Q8_0 and Q6_K rows against 1 to 16 tokens (passes of up to 8), included by
 * kn_simd_avx2.c and kn_simd_avxvnni.c after kn_simd_x86_int8.h, whose names, multiply-add macros,
 * decoders and batch tiles they use (larger batches still take its tiles); and the entry of Q4_K,
 * whose packed copy (kn_simd_x86.h) these two rows alone read, with kn_simd_x86_int8.h's kernels.
 *
 * The streaming structure: each unit of a row (a group of 8 blocks, a Q6_K super-block) is decoded
 * once in registers and applied to every token, so the row is read from memory once whatever the
 * tokens and nothing is stored; the token loop is unrolled to a constant count, so each token's
 * accumulator stays in a register and its pointers are computed once per call. Q6_K's codes are
 * group-interleaved at decode (kn__x86_q6k_interleave, the activations' second copy of q matches),
 * so two vpmaddubsw add in int16 before one multiply by the group scales: 8 + 5 multiplies per
 * super-block and token instead of the 8 + 9 of one vpmaddwd per 32 values; each token's 8-lane
 * sums of 8 super-blocks are reduced together (kn__x86_reduce8_i32) and the canonical fma runs on
 * 8 lanes at once, with the 8 weight scales converted in one step and the tokens' d_x read from a
 * contiguous copy. One token's Q8_0 rows skip the interleaving transpose: the stored blocks meet
 * a natural-order copy of q and the group's 8 block sums are reduced together. One token's MXFP4
 * rows skip it too: block pairs and qword unpacks against a copy of q in that order
 * (kn__x86_prep_q8_0m), h(e) computed from the exponent bytes rather than looked up. Every block's
 * sum and fma are the canonical ones, so the bits are the scalar reference's at any T.
 *
 * Tried and dropped, each slower in alternated runs (docs/kernels.md): decoding one unit ahead into
 * a ring in L1 so its shuffles overlap the previous unit's multiply-adds (the ring's stores and
 * loads cost more than the overlap gives); two rows per pass, each token's group loaded once for
 * both (the rows' weights then come back from L1); the batch tile from 2 tokens on; MXFP4's h(e)
 * by vpgatherdd (slow on AMD cores); one token's Q6_K on natural codes without the interleave (the
 * per-chunk scale shuffles cost more than the unpacks they replace) with vpmaddubsw: AVX-VNNI's
 * one-token Q6_K (xs_rows_q6k1) skips the interleave another way, its vpdpbusd sums packed to
 * int16 so that 4 shuffles spread the scales. */
#ifndef KN_SIMD_X86_STREAM_H
#define KN_SIMD_X86_STREAM_H

#define KN__XS_FEW 8  /* tokens a streaming pass takes */
#define KN__XS_MAX 16 /* batches up to this many tokens stream (in passes); more: the tiles */
_Static_assert(KN__XS_FEW <= KN__X86_PASS_MAX, "kn__x86_few_passes takes up to 16 a pass");

/* Q8_0 with vpdpbusd (AVX-VNNI): the weights' sign bit flipped (w + 128: unsigned, one vpxor) meet
 * the token's q as they are, and its prepared sums (kn__x86_prep_q8_0v, defined in kn_simd_avx2.c:
 * -128 * sum(q) a block) take the 128 back, so a Q8_0 group costs what an MXFP4 group does: no
 * |w| and no sign(x, w) per token. vpmaddubsw (AVX2) cannot take it: (w + 128) * x pairs overflow
 * its int16 sums, so AVX2 keeps |w| against sign(x, w). */
#ifdef KN__DPBUSD
#define KN__XS_Q8_FLIP      1
#define KN__XS_Q8_PREP      kn__x86_prep_q8_0v
#define KN__XS_Q8_PREP_NAME "q8_0v"
#else
#define KN__XS_Q8_FLIP      0
#define KN__XS_Q8_PREP      kn__x86_prep_q8_0n
#define KN__XS_Q8_PREP_NAME "q8_0n"
#endif
void kn__x86_prep_q8_0v(const float *x, void *dst, int64_t k);

/* ---- MXFP4 and Q8_0 -------------------------------------------------------------------------- */

/* A decoded group: MXFP4's biased codes (w[0..7]); Q8_0's |w| (w[0..7]) and w for the signs
 * (w[8..15]), or with vpdpbusd its w + 128 (w[0..7]); and the 8 blocks' weight scales (0 for
 * blocks past the row). A local value: the compiler keeps it in registers. */
typedef struct kn__xs_grp {
    __m256i w[16];
    __m256 sw;
} kn__xs_grp;

/* Group g of a row (nb blocks, `full` of its groups whole; `packed`: a row of MXFP4's packed copy,
 * kn_simd_x86.h, its exponents as e - 1 with e1). A tail group is
 * read in place when its window lies before `end` (the blocks past the row meet zero activations
 * and get a weight scale of 0: Q8_0's d there could be inf or NaN, a subnormal MXFP4 h costs a
 * microcode assist), else through the zero-padding decoder. */
static inline __attribute__((always_inline)) kn__xs_grp
KN__X86_NAME(xs_dec32)(const uint8_t *row, int64_t g, int64_t nb, int64_t full, const uint8_t *end,
                       const bool q8, const bool packed, const bool e1) {
    const int bytes = q8 ? KN__Q8_0_BYTES : KN__MXFP4_BYTES;
    const uint8_t *grp = row + g * 8 * bytes;
    __m256i w[8];
    __m256 sw;
    if (g < full || end - grp >= 8 * bytes) {
        if (g < full)
            kn__x86_prefetch(grp, 8 * bytes);
        else if (q8) /* a Q8_0 tail holds lines the full groups' prefetches miss (K = 2880) */
            kn__x86_prefetch(grp, (int)(nb - 8 * full) * bytes);
        if (q8) {
            kn__x86_q8_0_group(grp, w);
            sw = kn__x86_q8_0_d(grp);
        } else if (packed && g < full) {
            kn__x86_mxfp4p_group(grp, w);
            sw = kn__x86_mxfp4p_h(grp, e1);
        } else if (packed) {
            const int n = (int)(nb - 8 * full);
            kn__x86_mxfp4p_codes(grp, 4 * n, w);
            sw = kn__x86_mxfp4p_h8(grp + 16 * n, e1);
        } else {
            kn__x86_mxfp4_group(grp, w);
            sw = kn__x86_mxfp4_h(grp);
        }
        if (g >= full) sw = _mm256_and_ps(sw, kn__x86_live_lanes(nb - 8 * full));
    } else {
        _Alignas(64) uint8_t dec[KN__X86_GROUP_QS + 32];
        const int64_t kt = (nb - 8 * full) * KN__QK32;
        if (q8)
            kn__x86_decode_q8_0(grp, kt, dec);
        else if (packed)
            (e1 ? kn__x86_decode_mxfp4q : kn__x86_decode_mxfp4p)(grp, kt, dec);
        else
            kn__x86_decode_mxfp4(grp, kt, dec);
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) w[k] = _mm256_load_si256((const __m256i *)dec + k);
        sw = _mm256_load_ps((const float *)(dec + KN__X86_GROUP_QS));
    }
    kn__xs_grp s;
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
        if (q8 && KN__XS_Q8_FLIP) {
            s.w[k] = _mm256_xor_si256(w[k], _mm256_set1_epi8(-128));
            s.w[8 + k] = _mm256_setzero_si256();
        } else {
            s.w[k] = q8 ? _mm256_sign_epi8(w[k], w[k]) : w[k];
            s.w[8 + k] = q8 ? w[k] : _mm256_setzero_si256();
        }
    }
    s.sw = sw;
    return s;
}

/* Q8_0's block sums without vpdpbusd: |w| against sign(x, w) (exact), |w| taken once per group for
 * all tokens. */
static inline __m256i KN__X86_NAME(xs_sum8_abs)(const __m256i *aw, const __m256i *w,
                                                const __m256i *x) {
    __m256i acc[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
        const __m256i sx = _mm256_sign_epi8(_mm256_load_si256(x + k), w[k]);
        acc[k % 2] = _mm256_add_epi32(
            acc[k % 2], _mm256_madd_epi16(_mm256_maddubs_epi16(aw[k], sx), _mm256_set1_epi16(1)));
    }
    return _mm256_add_epi32(acc[0], acc[1]);
}

#ifdef KN__DPBUSD
/* A token's group sums with vpdpbusd (MXFP4's biased codes, Q8_0's w + 128) against its q, from
 * the token's bias sums xs: four chains of two, as vpdpbusd's latency (4 cycles on Zen 5) over
 * two chains of four left one token's groups waiting on the chains. MXFP4 passes of two or more
 * tokens keep sum8_small's two chains: they have chains enough, and four cost instructions
 * (docs/kernels.md, AVX2 and AVX-VNNI on Zen 5). */
static inline __m256i KN__X86_NAME(xs_sum8_dp)(const __m256i *w, const __m256i *x,
                                               const int32_t *xs) {
    __m256i a[4] = {_mm256_load_si256((const __m256i *)xs), _mm256_setzero_si256(),
                    _mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) a[k % 4] = KN__DPBUSD(a[k % 4], w[k], _mm256_load_si256(x + k));
    return _mm256_add_epi32(_mm256_add_epi32(a[0], a[1]), _mm256_add_epi32(a[2], a[3]));
}
#endif

/* Decoded group g against the nt tokens' group g. */
static inline __attribute__((always_inline)) void
KN__X86_NAME(xs_group32)(const kn__xs_grp *s, int64_t g, const uint8_t *const *x,
                         const float *const *dx, const int32_t *const *xs, __m256 *acc,
                         const int nt, const bool q8) {
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        const __m256i *xv = (const __m256i *)(x[t] + g * KN__X86_GROUP_QS);
        /* one token: |w| where it is used, as the 8 registers of |w| would spill */
        const __m256i isum =
            q8 && !KN__XS_Q8_FLIP ? (nt == 1 ? KN__X86_NAME(sum8_signed)(s->w + 8, xv)
                                             : KN__X86_NAME(xs_sum8_abs)(s->w, s->w + 8, xv))
#ifdef KN__DPBUSD
            : q8 || nt == 1 ? KN__X86_NAME(xs_sum8_dp)(s->w, xv, xs[t] + 8 * g)
#endif
                            : _mm256_add_epi32(KN__X86_NAME(sum8_small)(s->w, xv),
                                               _mm256_load_si256((const __m256i *)(xs[t] + 8 * g)));
        acc[t] = KN__X86_NAME(group_fma)(isum, dx[t] + 8 * g, s->sw, acc[t]);
    }
}

/* One token's Q8_0 group g (full) from the stored blocks as they lie against the natural copy of
 * its q (kn__x86_prep_q8_0n / _0v): per block |w| against sign(x, w), or w + 128 against x with
 * vpdpbusd (exact), 8 dwords summing to its isum (with vpdpbusd, but for the block's -128 * sum(q)
 * at xs, added after); the 8 blocks reduced together (kn__x86_reduce8_i32) into lane j = block j.
 * No transpose: one token uses each decoded group once, and the reduction costs less than the
 * interleaving. */
static inline __attribute__((always_inline)) __m256i
KN__X86_NAME(xs_q8_0_isum1)(const uint8_t *grp, const uint8_t *xn, const int32_t *xs) {
    __m256i s[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
        const __m256i w = _mm256_loadu_si256((const __m256i *)(grp + KN__Q8_0_BYTES * j + 2));
        const __m256i x = _mm256_load_si256((const __m256i *)(xn + 32 * j));
#if KN__XS_Q8_FLIP
        s[j] = KN__DPBUSD(_mm256_setzero_si256(), _mm256_xor_si256(w, _mm256_set1_epi8(-128)), x);
#else
        s[j] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w)),
                                 _mm256_set1_epi16(1));
#endif
    }
    const __m256i r = kn__x86_reduce8_i32(s);
    return KN__XS_Q8_FLIP ? _mm256_add_epi32(r, _mm256_load_si256((const __m256i *)xs)) : r;
}

/* Group g's 320 bytes of a token prepared by kn__x86_prep_q8_0m for k values. */
static inline const uint8_t *kn__xs_q8_0m_grp(const uint8_t *x, int64_t k, int64_t g) {
    return x + kn__x86_q8_0p_bytes(k) + g * KN__X86_Q8_0M_GROUP;
}

/* One token's MXFP4 group (full, 136 stored bytes at grp) against its q, d_x and sums in the
 * layout of kn__x86_prep_q8_0m (xm: kn__xs_q8_0m_grp), added to acc (lanes in
 * kn__x86_pair_lanes order). No 8 x 8 transpose: a load and an insert put block 2i's 16 code
 * bytes in the low half of a[i] and block 2i + 1's in the high one, and one qword unpack of a[i]
 * and a[i + 1] gives 8 bytes of each of 4 blocks, each block in a qword of its own; one vpshufb
 * per nibble half gives the biased codes (kvalue + 12, unsigned: no sign handling, the token's
 * -12 * sum(q) takes the bias back), vpmaddubsw against the token's q in the same order, and the
 * 4 vectors of a block set add in int16 (8 products a lane, at most 8 * 24 * 127 = 24384) before
 * one vpmaddwd. Two vshufps and an add then leave one lane per block (vphaddd costs two cycles of
 * the pipes the multiply-adds and vpshufb use). The 8 exponents come in the same order from 4
 * loads 30 bytes apart (e of block 2i is byte 0 of dword i, e of block 2i + 1 byte 1 of dword
 * 4 + i) and 3 vpblendd; h(e) = 2^(e - 128) is then integer arithmetic on e << 23
 * (kn__e8m0_half_bits' values, subnormals included), no table lookups. */
static inline __attribute__((always_inline)) __m256
KN__X86_NAME(xs_mxfp4_grp1)(const uint8_t *grp, const uint8_t *xm, __m256 acc) {
    const __m256i tbl = _mm256_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0,
                                         12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    kn__x86_prefetch(grp, 8 * KN__MXFP4_BYTES);
    __m256i a[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        const uint8_t *qs = grp + 2 * KN__MXFP4_BYTES * i + 1;
        a[i] = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)qs)),
                                       _mm_loadu_si128((const __m128i *)(qs + KN__MXFP4_BYTES)), 1);
    }
    __m256i s[2]; /* set h: blocks 4h, 4h + 2 (low half), 4h + 1, 4h + 3, two dwords each */
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m256i u = _mm256_unpacklo_epi64(a[2 * h], a[2 * h + 1]); /* bytes 0..7 */
        const __m256i v = _mm256_unpackhi_epi64(a[2 * h], a[2 * h + 1]); /* bytes 8..15 */
        const __m256i *x = (const __m256i *)(xm + 128 * h);
        const __m256i c[4] = {
            _mm256_and_si256(u, m4), _mm256_and_si256(_mm256_srli_epi16(u, 4), m4),
            _mm256_and_si256(v, m4), _mm256_and_si256(_mm256_srli_epi16(v, 4), m4)};
        __m256i p[4];
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
#ifdef KN__DPBUSD
            p[k] = KN__DPBUSD(_mm256_setzero_si256(), _mm256_shuffle_epi8(tbl, c[k]),
                              _mm256_load_si256(x + k));
#else
            p[k] = _mm256_maddubs_epi16(_mm256_shuffle_epi8(tbl, c[k]), _mm256_load_si256(x + k));
#endif
        }
#ifdef KN__DPBUSD
        s[h] = _mm256_add_epi32(_mm256_add_epi32(p[0], p[1]), _mm256_add_epi32(p[2], p[3]));
#else
        s[h] = _mm256_madd_epi16(
            _mm256_add_epi16(_mm256_add_epi16(p[0], p[1]), _mm256_add_epi16(p[2], p[3])),
            _mm256_set1_epi16(1));
#endif
    }
    const __m256 s0 = _mm256_castsi256_ps(s[0]), s1 = _mm256_castsi256_ps(s[1]);
    const __m256i isum = _mm256_add_epi32(
        _mm256_add_epi32(_mm256_castps_si256(_mm256_shuffle_ps(s0, s1, _MM_SHUFFLE(2, 0, 2, 0))),
                         _mm256_castps_si256(_mm256_shuffle_ps(s0, s1, _MM_SHUFFLE(3, 1, 3, 1)))),
        _mm256_load_si256((const __m256i *)(xm + KN__X86_GROUP_QS + 32)));
    /* e << 23 per lane (a dword's other bytes masked off), then h (kn__x86_e8m0_half8) */
    const __m256i e = _mm256_blend_epi32(
        _mm256_blend_epi32(_mm256_loadu_si256((const __m256i *)grp),
                           _mm256_loadu_si256((const __m256i *)(grp + 30)), 0x22),
        _mm256_blend_epi32(_mm256_loadu_si256((const __m256i *)(grp + 60)),
                           _mm256_loadu_si256((const __m256i *)(grp + 90)), 0x88),
        0xCC);
    const __m256i e23 =
        _mm256_and_si256(_mm256_sllv_epi32(e, _mm256_setr_epi32(23, 23, 23, 23, 15, 15, 15, 15)),
                         _mm256_set1_epi32(0xFF << 23));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum),
                           _mm256_mul_ps(_mm256_load_ps((const float *)(xm + KN__X86_GROUP_QS)),
                                         kn__x86_e8m0_half8(e23)),
                           acc);
}

/* Rows n0 .. n1 of W (MXFP4, MXFP4's packed copy, or Q8_0) against nt prepared tokens: the full
 * groups in a loop without branches, then a tail group. One token's stored MXFP4 rows take
 * xs_mxfp4_grp1; a packed group decodes straight into the interleaved layout, which at one token
 * needs no reduction of block pairs. */
static inline __attribute__((always_inline)) void
KN__X86_NAME(xs_rows32)(const kn_mat *W, const uint8_t *const *x, float *Y, int64_t ldy, int64_t n0,
                        int64_t n1, const int nt, const bool q8, const bool packed, const bool e1) {
    const int64_t nb = W->cols / KN__QK32, ng = (nb + 7) / 8, full = nb / 8;
    const uint8_t *end = kn__x86_mat_end(W);
    const float *dx[KN__XS_FEW];
    const int32_t *xs[KN__XS_FEW];
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        dx[t] = (const float *)(x[t] + ng * KN__X86_GROUP_QS);
        xs[t] = (const int32_t *)(dx[t] + ng * 8);
    }
    for (int64_t r = n0; r < n1; r++) {
        const uint8_t *row = (const uint8_t *)W->data + (size_t)r * W->row_bytes;
        __m256 acc[KN__XS_FEW];
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
        if (q8 && nt == 1) {
            const uint8_t *xn = x[0] + kn__x86_q8_0p_bytes(W->cols);
            for (int64_t g = 0; g < full; g++) {
                const uint8_t *grp = row + g * 8 * KN__Q8_0_BYTES;
                kn__x86_prefetch(grp, 8 * KN__Q8_0_BYTES);
                acc[0] = KN__X86_NAME(group_fma)(
                    KN__X86_NAME(xs_q8_0_isum1)(grp, xn + g * KN__X86_GROUP_QS, xs[0] + 8 * g),
                    dx[0] + 8 * g, kn__x86_q8_0_d(grp), acc[0]);
            }
        } else if (!q8 && !packed && nt == 1) {
            for (int64_t g = 0; g < full; g++)
                acc[0] = KN__X86_NAME(xs_mxfp4_grp1)(row + g * 8 * KN__MXFP4_BYTES,
                                                     kn__xs_q8_0m_grp(x[0], W->cols, g), acc[0]);
            /* the lanes back in block order for the tail group and the canonical sum */
            acc[0] = _mm256_permutevar8x32_ps(acc[0], _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        } else {
            for (int64_t g = 0; g < full; g++) {
                const kn__xs_grp s = KN__X86_NAME(xs_dec32)(row, g, nb, full, end, q8, packed, e1);
                KN__X86_NAME(xs_group32)(&s, g, x, dx, xs, acc, nt, q8);
            }
        }
        if (full < ng) {
            const kn__xs_grp s = KN__X86_NAME(xs_dec32)(row, full, nb, full, end, q8, packed, e1);
            KN__X86_NAME(xs_group32)(&s, full, x, dx, xs, acc, nt, q8);
        }
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) Y[t * ldy + r] = kn__x86_tree8(acc[t]);
    }
}

/* ---- Q6_K ------------------------------------------------------------------------------------ */

/* The prepared Q6_K activation row (defined in kn_simd_avx2.c): kn__x86_prep_q8_Ki's bytes, then
 * the blocks' d as floats at kn__xs_q8_Kd_dx, zero-padded to a multiple of 8 (a chunk's 8 in one
 * load). */
size_t kn__x86_q8_Kd_bytes(int64_t k);
void kn__x86_prep_q8_Kd(const float *x, void *dst, int64_t k);
static inline size_t kn__xs_q8_Kd_dx(int64_t k) {
    return kn__x86_q8_Ki_bytes(k);
}

/* d of the first n (1 .. 8) super-blocks at blk as floats, 0 in the lanes beyond. */
static inline __m256 kn__xs_q6k_d(const uint8_t *blk, int n) {
#define KN__XS_D(i) (short)(n > (i) ? kn__rd16(blk + (i)*KN__Q6_K_BYTES + 208) : 0)
    return _mm256_cvtph_ps(_mm_setr_epi16(KN__XS_D(0), KN__XS_D(1), KN__XS_D(2), KN__XS_D(3),
                                          KN__XS_D(4), KN__XS_D(5), KN__XS_D(6), KN__XS_D(7)));
#undef KN__XS_D
}

/* Rows n0 .. n1 of W (Q6_K) against nt tokens: per super-block and token, vpmaddubsw of two code
 * vectors against the interleaved q added in int16 (at most 32004), one multiply-add by the group
 * scales, from sum(-32 * scale * bsum): 8 lanes totalling the exact isum, kept for the chunk. */
static inline __attribute__((always_inline)) void
KN__X86_NAME(xs_rows_q6k)(const kn_mat *W, const uint8_t *const *x, float *Y, int64_t ldy,
                          int64_t n0, int64_t n1, const int nt) {
    const int64_t nb = W->cols / KN__QK_K;
    const kn__block_q8_K *xb[KN__XS_FEW];
    const uint8_t *qi[KN__XS_FEW];
    const float *dx[KN__XS_FEW];
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        xb[t] = (const kn__block_q8_K *)x[t];
        qi[t] = x[t] + kn__x86_q8_Ki_qs(W->cols);
        dx[t] = (const float *)(x[t] + kn__xs_q8_Kd_dx(W->cols));
    }
    /* lanes past a row's last super-block are read and get d_w = d_x = 0: whatever they hold
     * adds 0 */
    __m256i s[KN__XS_FEW][8];
    memset(s, 0, sizeof s);
    for (int64_t r = n0; r < n1; r++) {
        const uint8_t *row = (const uint8_t *)W->data + (size_t)r * W->row_bytes;
        __m256 acc[KN__XS_FEW];
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
        for (int64_t b0 = 0; b0 < nb; b0 += 8) {
            const int n = nb - b0 < 8 ? (int)(nb - b0) : 8;
            for (int i = 0; i < n; i++) {
                const int64_t b = b0 + i;
                const uint8_t *blk = row + b * KN__Q6_K_BYTES;
                __m256i c[8];
                kn__x86_prefetch(blk, KN__Q6_K_BYTES);
                kn__x86_q6k_codes(blk, c);
                kn__x86_q6k_interleave(c);
                const __m256i sg = kn__x86_q6k_group_scales(blk);
                const __m256i scm = _mm256_mullo_epi16(
                    _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 192))),
                    _mm256_set1_epi16(-32));
#pragma GCC unroll 8
                for (int t = 0; t < nt; t++) {
                    __m256i a =
                        _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xb[t][b].bsums), scm);
                    const uint8_t *q = qi[t] + KN__QK_K * b;
#pragma GCC unroll 4
                    for (int k = 0; k < 8; k += 2) {
                        const __m256i p = _mm256_add_epi16(
                            _mm256_maddubs_epi16(c[k],
                                                 _mm256_load_si256((const __m256i *)(q + 32 * k))),
                            _mm256_maddubs_epi16(
                                c[k + 1], _mm256_load_si256((const __m256i *)(q + 32 * k + 32))));
                        a = KN__DPWSSD(a, p, sg);
                    }
                    s[t][i] = a;
                }
            }
            const __m256 dw = kn__xs_q6k_d(row + b0 * KN__Q6_K_BYTES, n);
#pragma GCC unroll 8
            for (int t = 0; t < nt; t++)
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(kn__x86_reduce8_i32(s[t])),
                                         _mm256_mul_ps(dw, _mm256_loadu_ps(dx[t] + b0)), acc[t]);
        }
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) Y[t * ldy + r] = kn__x86_tree8(acc[t]);
    }
}

#ifdef KN__DPBUSD
/* One token's rows with vpdpbusd (AVX-VNNI) on the natural codes: no interleave. Per super-block
 * 8 vpdpbusd of the codes (0..63, unsigned as the instruction wants) against the token's q in the
 * prepared blocks leave, per dword, the sum of 4 products of one group (lanes 0-3 of vector j:
 * group 2j, lanes 4-7: 2j + 1; at most 4 * 63 * 127 = 32004), so two vectors pack to int16
 * exactly (vpackssdw does not saturate) and one vpdpwssd applies the group scales to both: 4
 * scale multiplies, their 4 vectors shuffled once per super-block from the group scales in
 * kn__x86_q6k_group_scales' order, and the bsums' -32 * scale as above. The same 8 lanes totalling
 * the exact isum. The shuffle pipes see 11 operations a super-block in place of the interleave's
 * 24 unpacks and 3 more; with more tokens the interleave is shared and each token's packs would
 * come on top, so passes of 2 to 8 keep it. */
static inline __attribute__((always_inline)) void
KN__X86_NAME(xs_rows_q6k1)(const kn_mat *W, const uint8_t *const *x, float *Y, int64_t n0,
                           int64_t n1) {
    const int64_t nb = W->cols / KN__QK_K;
    const kn__block_q8_K *xb = (const kn__block_q8_K *)x[0];
    const float *dx = (const float *)(x[0] + kn__xs_q8_Kd_dx(W->cols));
    /* word pairs of the group-scale vector: scales 4m, 4m + 2 (low lane), 4m + 1, 4m + 3 (high
     * lane), each in 4 words: the groups of vpackssdw(vector 2m, vector 2m + 1)'s words */
#define KN__XS_SIDX(m)                                                                             \
    _mm256_setr_epi8(4 * (m), 4 * (m) + 1, 4 * (m), 4 * (m) + 1, 4 * (m), 4 * (m) + 1, 4 * (m),    \
                     4 * (m) + 1, 4 * (m) + 2, 4 * (m) + 3, 4 * (m) + 2, 4 * (m) + 3, 4 * (m) + 2, \
                     4 * (m) + 3, 4 * (m) + 2, 4 * (m) + 3, 4 * (m), 4 * (m) + 1, 4 * (m),         \
                     4 * (m) + 1, 4 * (m), 4 * (m) + 1, 4 * (m), 4 * (m) + 1, 4 * (m) + 2,         \
                     4 * (m) + 3, 4 * (m) + 2, 4 * (m) + 3, 4 * (m) + 2, 4 * (m) + 3, 4 * (m) + 2, \
                     4 * (m) + 3)
    const __m256i sidx[4] = {KN__XS_SIDX(0), KN__XS_SIDX(1), KN__XS_SIDX(2), KN__XS_SIDX(3)};
#undef KN__XS_SIDX
    /* lanes past a row's last super-block are read and get d_w = d_x = 0: whatever they hold
     * adds 0 */
    __m256i s[8];
    memset(s, 0, sizeof s);
    for (int64_t r = n0; r < n1; r++) {
        const uint8_t *row = (const uint8_t *)W->data + (size_t)r * W->row_bytes;
        __m256 acc = _mm256_setzero_ps();
        for (int64_t b0 = 0; b0 < nb; b0 += 8) {
            const int n = nb - b0 < 8 ? (int)(nb - b0) : 8;
            for (int i = 0; i < n; i++) {
                const int64_t b = b0 + i;
                const uint8_t *blk = row + b * KN__Q6_K_BYTES;
                __m256i c[8], p[8];
                kn__x86_prefetch(blk, KN__Q6_K_BYTES);
                kn__x86_q6k_codes(blk, c);
#pragma GCC unroll 8
                for (int k = 0; k < 8; k++)
                    p[k] = KN__DPBUSD(_mm256_setzero_si256(), c[k],
                                      _mm256_loadu_si256((const __m256i *)(xb[b].qs + 32 * k)));
                const __m256i g = kn__x86_q6k_group_scales(blk);
                const __m256i scm = _mm256_mullo_epi16(
                    _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 192))),
                    _mm256_set1_epi16(-32));
                __m256i a0 =
                    _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xb[b].bsums), scm);
                __m256i a1 = _mm256_madd_epi16(_mm256_packs_epi32(p[0], p[1]),
                                               _mm256_shuffle_epi8(g, sidx[0]));
                a0 =
                    KN__DPWSSD(a0, _mm256_packs_epi32(p[2], p[3]), _mm256_shuffle_epi8(g, sidx[1]));
                a1 =
                    KN__DPWSSD(a1, _mm256_packs_epi32(p[4], p[5]), _mm256_shuffle_epi8(g, sidx[2]));
                a0 =
                    KN__DPWSSD(a0, _mm256_packs_epi32(p[6], p[7]), _mm256_shuffle_epi8(g, sidx[3]));
                s[i] = _mm256_add_epi32(a0, a1);
            }
            const __m256 dw = kn__xs_q6k_d(row + b0 * KN__Q6_K_BYTES, n);
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(kn__x86_reduce8_i32(s)),
                                  _mm256_mul_ps(dw, _mm256_loadu_ps(dx + b0)), acc);
        }
        Y[r] = kn__x86_tree8(acc);
    }
}
#endif

/* ---- rows against n tokens, passes, kernels -------------------------------------------------- */

/* xs_<kind>_<n>: rows n0 .. n1 against n tokens (one function per n, so the token loops unroll to
 * constants; flattened: GCC would otherwise call the decoders in these large bodies). */
#ifdef KN__DPBUSD
#define KN__XS_Q6K_ROWS(W, x, Y, ldy, n0, n1, n)                                                   \
    do {                                                                                           \
        if ((n) == 1)                                                                              \
            KN__X86_NAME(xs_rows_q6k1)(W, x, Y, n0, n1);                                           \
        else                                                                                       \
            KN__X86_NAME(xs_rows_q6k)(W, x, Y, ldy, n0, n1, n);                                    \
    } while (0)
#else
#define KN__XS_Q6K_ROWS KN__X86_NAME(xs_rows_q6k)
#endif
#define KN__XS_ROWS(n)                                                                             \
    static __attribute__((flatten)) void KN__X86_NAME(xs_mxfp4_##n)(                               \
        const kn_mat *W, const uint8_t *const *x, float *Y, int64_t ldy, int64_t n0, int64_t n1) { \
        KN__X86_NAME(xs_rows32)(W, x, Y, ldy, n0, n1, n, false, false, false);                     \
    }                                                                                              \
    static __attribute__((flatten)) void KN__X86_NAME(xs_mxfp4p_##n)(                              \
        const kn_mat *W, const uint8_t *const *x, float *Y, int64_t ldy, int64_t n0, int64_t n1) { \
        KN__X86_NAME(xs_rows32)(W, x, Y, ldy, n0, n1, n, false, true, false);                      \
    }                                                                                              \
    static __attribute__((flatten)) void KN__X86_NAME(xs_mxfp4q_##n)(                              \
        const kn_mat *W, const uint8_t *const *x, float *Y, int64_t ldy, int64_t n0, int64_t n1) { \
        KN__X86_NAME(xs_rows32)(W, x, Y, ldy, n0, n1, n, false, true, true);                       \
    }                                                                                              \
    static __attribute__((flatten)) void KN__X86_NAME(xs_q8_0_##n)(                                \
        const kn_mat *W, const uint8_t *const *x, float *Y, int64_t ldy, int64_t n0, int64_t n1) { \
        KN__X86_NAME(xs_rows32)(W, x, Y, ldy, n0, n1, n, true, false, false);                      \
    }                                                                                              \
    static __attribute__((flatten)) void KN__X86_NAME(xs_q6k_##n)(                                 \
        const kn_mat *W, const uint8_t *const *x, float *Y, int64_t ldy, int64_t n0, int64_t n1) { \
        KN__XS_Q6K_ROWS(W, x, Y, ldy, n0, n1, n);                                                  \
    }
KN__XS_ROWS(1)
KN__XS_ROWS(2)
KN__XS_ROWS(3)
KN__XS_ROWS(4)
KN__XS_ROWS(5)
KN__XS_ROWS(6)
KN__XS_ROWS(7)
KN__XS_ROWS(8)
#undef KN__XS_ROWS

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
KN__XS_TABLE(mxfp4p)
KN__XS_TABLE(mxfp4q)
KN__XS_TABLE(q8_0)
KN__XS_TABLE(q6k)
#undef KN__XS_TABLE

/* Batches up to KN__XS_MAX tokens stream; larger ones take kn_simd_x86_int8.h's kernel of the
 * type (its batch tile). */
static inline void KN__X86_NAME(xs_rows)(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy,
                                         int64_t n0, int64_t n1, void *scratch,
                                         const kn__x86_few_fn *fns) {
    if (x->T > KN__XS_MAX)
        KN__X86_NAME(int8_kernels)[W->type]->rows(W, x, Y, ldy, n0, n1, scratch);
    else
        kn__x86_few_passes(W, x, Y, ldy, n0, n1, fns, KN__XS_FEW);
}
#define KN__XS_ROWS_FN(kind, fns)                                                                  \
    static void KN__X86_NAME(xs_rows_##kind)(const kn_mat *W, const kn__act *x, float *Y,          \
                                             int64_t ldy, int64_t n0, int64_t n1, void *scratch) { \
        KN__X86_NAME(xs_rows)(W, x, Y, ldy, n0, n1, scratch, KN__X86_NAME(fns));                   \
    }
KN__XS_ROWS_FN(q8_0, xs_q8_0)
KN__XS_ROWS_FN(q6_K, xs_q6k)
#undef KN__XS_ROWS_FN

/* MXFP4: from the packed copy when W->packed is this row's layout of W (a view of it: the same
 * rows at the same offsets), at every T; else from the stored rows. */
static void KN__X86_NAME(xs_rows_mxfp4)(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy,
                                        int64_t n0, int64_t n1, void *scratch) {
    bool e1;
    const uint8_t *pk = kn__x86_mxfp4p_data(W, &e1);
    if (!pk) {
        KN__X86_NAME(xs_rows)(W, x, Y, ldy, n0, n1, scratch, KN__X86_NAME(xs_mxfp4));
        return;
    }
    kn_mat P = *W;
    P.data = pk;
    P.packed = NULL;
    if (x->T > KN__XS_MAX) KN__X86_NAME(rows_tile)
    (&P, x, Y, ldy, n0, n1, scratch, e1 ? kn__x86_decode_mxfp4q : kn__x86_decode_mxfp4p);
    else kn__x86_few_passes(&P, x, Y, ldy, n0, n1,
                            e1 ? KN__X86_NAME(xs_mxfp4q) : KN__X86_NAME(xs_mxfp4p), KN__XS_FEW);
}

/* Q4_K: from the packed copy when W->packed is this row's layout of W, at every T (up to
 * KN__X86_Q4K_FEW tokens streamed as the stored rows are, beyond them its rows decoded into the
 * batch tile); else kn_simd_x86_int8.h's kernel on the stored rows. */
KN__X86_ROWS(q4_Kp_tiled, (size_t)(W->cols / KN__QK_K) * sizeof(kn__x86_q4k),
             kn__x86_decode_q4_Kp(src, W->cols, (kn__x86_q4k *)dst),
             KN__X86_NAME(dot_q4_K)((const kn__x86_q4k *)dec, (const kn__block_q8_K *)xt,
                                    W->cols / KN__QK_K))
static void KN__X86_NAME(xs_rows_q4_K)(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy,
                                       int64_t n0, int64_t n1, void *scratch) {
    const uint8_t *pk = kn__packed_data(W, KN__X86_Q4KP_MAGIC);
    if (!pk) {
        KN__X86_NAME(rows_q4_K)(W, x, Y, ldy, n0, n1, scratch);
        return;
    }
    kn_mat P = *W;
    P.data = pk;
    P.packed = NULL;
    if (x->T > KN__X86_Q4K_FEW)
        KN__X86_NAME(rows_q4_Kp_tiled)(&P, x, Y, ldy, n0, n1, scratch);
    else
        KN__X86_NAME(rows_q4_K_few)(&P, x, Y, ldy, n0, n1, true);
}

/* The tile's scratch, for batches beyond KN__XS_MAX only. */
static size_t KN__X86_NAME(xs_scratch)(const kn_mat *W, int64_t T) {
    const kn__kernel *k = KN__X86_NAME(int8_kernels)[W->type];
    return T > KN__XS_MAX ? k->scratch_bytes(W, T) : 0;
}

static const kn__kernel KN__X86_NAME(xs_k_mxfp4) = {
    KN__X86_LABEL "-mxfp4-q8_0m", kn__x86_q8_0m_bytes, kn__x86_prep_q8_0m, KN__X86_NAME(xs_scratch),
    KN__X86_NAME(xs_rows_mxfp4)};
static const kn__kernel KN__X86_NAME(xs_k_q8_0) = {
    KN__X86_LABEL "-q8_0-" KN__XS_Q8_PREP_NAME, kn__x86_q8_0n_bytes, KN__XS_Q8_PREP,
    KN__X86_NAME(xs_scratch), KN__X86_NAME(xs_rows_q8_0)};
static const kn__kernel KN__X86_NAME(xs_k_q4_K) = {KN__X86_LABEL "-q4_K-q8_Kn", kn__x86_q8_Kn_bytes,
                                                   kn__x86_prep_q8_Kn, KN__X86_NAME(scratch_q4_K),
                                                   KN__X86_NAME(xs_rows_q4_K)};
static const kn__kernel KN__X86_NAME(xs_k_q6_K) = {KN__X86_LABEL "-q6_K-q8_Kd", kn__x86_q8_Kd_bytes,
                                                   kn__x86_prep_q8_Kd, KN__X86_NAME(xs_scratch),
                                                   KN__X86_NAME(xs_rows_q6_K)};

/* The Q8-mode kernel of type t: the streaming ones above, else kn_simd_x86_int8.h's. */
static inline const kn__kernel *KN__X86_NAME(xs_kernel)(kn_type t) {
    switch (t) {
    case KN_MXFP4:
        return &KN__X86_NAME(xs_k_mxfp4);
    case KN_Q8_0:
        return &KN__X86_NAME(xs_k_q8_0);
    case KN_Q6_K:
        return &KN__X86_NAME(xs_k_q6_K);
    case KN_Q4_K:
        return &KN__X86_NAME(xs_k_q4_K);
    default:
        return (int)t >= 0 && t < KN_TYPE_COUNT ? KN__X86_NAME(int8_kernels)[t] : NULL;
    }
}

#endif
