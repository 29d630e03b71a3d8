/* kernels/kn_simd_x86_int8.h — internal: the Q8-mode row kernels for x86, written once and
 * compiled by each x86 row of the ISA table: kn_simd_avx2.c (integer multiply-adds as vpmaddubsw +
 * vpmaddwd), kn_simd_avxvnni.c and kn_simd_avx512.c (vpdpbusd / vpdpwssd, 256 bits wide). Integer
 * sums are exact either way, so all of them give the canonical bits.
 *
 * The including file defines, before including:
 *   KN__X86_NAME(id)   a per-variant name for id;  KN__X86_LABEL  the variant's name as a string
 *   KN__DPWSSD(acc, a, b)   acc + vpmaddwd(a, b)
 * and either KN__DPBUSD(acc, a, b), a fused acc + u8 × s8 multiply-add (vpdpbusd), or
 *   KN__X86_NAME(sum8_small)(w, x)   per-lane sum over k < 8 of w[k] . x[k] (u8 w <= 24, s8 x)
 *   KN__X86_NAME(sum8_signed)(w, x)  the same for signed int8 w
 * and gets rows_* / scratch_* functions and the table KN__X86_NAME(int8_kernels).
 *
 * Q4_K up to 16 tokens streams each stored row once and decodes it in registers; MXFP4, Q8_0 and
 * Q6_K here, and Q4_K beyond 16 tokens, decode a tile of rows into L1 scratch once and apply it to
 * every token. Few-token MXFP4, Q8_0 and Q6_K calls never reach these: the AVX2 and AVX-VNNI rows
 * stream them with kn_simd_x86_stream.h up to 16 tokens, the AVX-512 row with its own kernels. */

#ifdef KN__DPBUSD
/* Sum over k of w[k] . x[k] per block lane: two chains of four vpdpbusd. */
static inline __m256i KN__X86_NAME(sum8_small)(const __m256i *w, const __m256i *x) {
    __m256i a = _mm256_setzero_si256(), b = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        a = KN__DPBUSD(a, _mm256_load_si256(w + k), _mm256_load_si256(x + k));
        b = KN__DPBUSD(b, _mm256_load_si256(w + 4 + k), _mm256_load_si256(x + 4 + k));
    }
    return _mm256_add_epi32(a, b);
}

/* Signed int8 weights: |w| against sign(x, w). */
static inline __m256i KN__X86_NAME(sum8_signed)(const __m256i *w, const __m256i *x) {
    __m256i acc[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
        const __m256i wk = _mm256_load_si256(w + k);
        acc[k % 2] = KN__DPBUSD(acc[k % 2], _mm256_sign_epi8(wk, wk),
                                _mm256_sign_epi8(_mm256_load_si256(x + k), wk));
    }
    return _mm256_add_epi32(acc[0], acc[1]);
}
#endif

/* The float step of one group: acc += isum * (d_x * scale_w), lane by lane. */
static inline __m256 KN__X86_NAME(group_fma)(__m256i isum, const float *dx, __m256 sw, __m256 acc) {
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(_mm256_load_ps(dx), sw), acc);
}

/* One decoded row's group against the token's group: MXFP4 codes carry the +12 bias, taken back
 * with the token's per-block -12 * sum(q); Q8_0 weights are signed. */
static inline __m256i KN__X86_NAME(isum_mxfp4)(const __m256i *w, const __m256i *x,
                                               const int32_t *xs) {
    return _mm256_add_epi32(KN__X86_NAME(sum8_small)(w, x), _mm256_load_si256((const __m256i *)xs));
}
static inline __m256i KN__X86_NAME(isum_q8_0)(const __m256i *w, const __m256i *x,
                                              const int32_t *xs) {
    (void)xs;
    return KN__X86_NAME(sum8_signed)(w, x);
}

/* Four decoded rows (w[r]: codes, then per-block weight scales) against one prepared token, with
 * four independent accumulators so the rows' fma chains overlap. */
#define KN__X86_DOT_TILE(kind)                                                                     \
    static inline void KN__X86_NAME(dot_tile_##kind)(const uint8_t *const w[4], const uint8_t *x,  \
                                                     int64_t ng, float out[4]) {                   \
        const float *dx = (const float *)(x + ng * KN__X86_GROUP_QS);                              \
        const int32_t *xs = (const int32_t *)(dx + ng * 8);                                        \
        const float *s0 = (const float *)(w[0] + ng * KN__X86_GROUP_QS);                           \
        const float *s1 = (const float *)(w[1] + ng * KN__X86_GROUP_QS);                           \
        const float *s2 = (const float *)(w[2] + ng * KN__X86_GROUP_QS);                           \
        const float *s3 = (const float *)(w[3] + ng * KN__X86_GROUP_QS);                           \
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                                \
        for (int64_t g = 0; g < ng; g++) {                                                         \
            const __m256i *xv = (const __m256i *)(x + g * KN__X86_GROUP_QS);                       \
            const int64_t o = g * KN__X86_GROUP_QS / 32;                                           \
            a0 = KN__X86_NAME(group_fma)(                                                          \
                KN__X86_NAME(isum_##kind)((const __m256i *)w[0] + o, xv, xs + 8 * g), dx + 8 * g,  \
                _mm256_load_ps(s0 + 8 * g), a0);                                                   \
            a1 = KN__X86_NAME(group_fma)(                                                          \
                KN__X86_NAME(isum_##kind)((const __m256i *)w[1] + o, xv, xs + 8 * g), dx + 8 * g,  \
                _mm256_load_ps(s1 + 8 * g), a1);                                                   \
            a2 = KN__X86_NAME(group_fma)(                                                          \
                KN__X86_NAME(isum_##kind)((const __m256i *)w[2] + o, xv, xs + 8 * g), dx + 8 * g,  \
                _mm256_load_ps(s2 + 8 * g), a2);                                                   \
            a3 = KN__X86_NAME(group_fma)(                                                          \
                KN__X86_NAME(isum_##kind)((const __m256i *)w[3] + o, xv, xs + 8 * g), dx + 8 * g,  \
                _mm256_load_ps(s3 + 8 * g), a3);                                                   \
        }                                                                                          \
        out[0] = kn__x86_tree8(a0), out[1] = kn__x86_tree8(a1);                                    \
        out[2] = kn__x86_tree8(a2), out[3] = kn__x86_tree8(a3);                                    \
    }
KN__X86_DOT_TILE(mxfp4)
KN__X86_DOT_TILE(q8_0)

/* A K-quant super-block's scaled code sums: per 32-chunk, codes times q8 (vpmaddubsw) times the
 * group scales (vpmaddwd), in four independent chains. */
static inline __m256i KN__X86_NAME(q_k_sum)(const uint8_t *codes, const int16_t (*sc16)[16],
                                            const int8_t *qs) {
    __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                      _mm256_setzero_si256()};
#pragma GCC unroll 8
    for (int c = 0; c < 8; c++) {
        const __m256i p = _mm256_maddubs_epi16(_mm256_load_si256((const __m256i *)(codes + 32 * c)),
                                               _mm256_loadu_si256((const __m256i *)(qs + 32 * c)));
        acc[c % 4] = KN__DPWSSD(acc[c % 4], p, _mm256_load_si256((const __m256i *)sc16[c]));
    }
    return _mm256_add_epi32(_mm256_add_epi32(acc[0], acc[1]), _mm256_add_epi32(acc[2], acc[3]));
}

/* ---- Q6_K batches: 2 decoded rows x up to 4 tokens per register tile ------------------------- */

/* Per super-block and pair (row r, token t): codes 0..63 times q8 (vpmaddubsw), times the group
 * scales (vpmaddwd), starting from sum(-32 * scale * bsum), so the 8 dword lanes total the block's
 * exact isum. The tile's 8 accumulators live in registers (AVX2 has 16), each row's codes and
 * scales are loaded once per chunk for all its tokens and each token's q once for both rows; after
 * the super-block one horizontal reduction turns the 8 accumulators into one vector whose lane
 * 4r + t is pair (r, t)'s isum, and one vector fma with d_w * d_x adds it to lane b % 8 of all 8
 * pairs. */

#define KN__Q6_R 2 /* rows of a register tile */
#define KN__Q6_T 4 /* tokens of a register tile */

/* Lane 4r + t: the sum of the 8 dwords of a[r][t] (exact). */
static inline __m256i KN__X86_NAME(q6k_reduce)(const __m256i a[KN__Q6_R][KN__Q6_T]) {
    const __m256i q0 =
        _mm256_hadd_epi32(_mm256_hadd_epi32(a[0][0], a[0][1]), _mm256_hadd_epi32(a[0][2], a[0][3]));
    const __m256i q1 =
        _mm256_hadd_epi32(_mm256_hadd_epi32(a[1][0], a[1][1]), _mm256_hadd_epi32(a[1][2], a[1][3]));
    /* q_r: lane t the low-half partial of a[r][t], lane 4 + t the high-half partial */
    return _mm256_add_epi32(_mm256_permute2x128_si256(q0, q1, 0x20),
                            _mm256_permute2x128_si256(q0, q1, 0x31));
}

/* Rows w[0], w[1] (decoded) against tokens x[0 .. nt - 1] (prepared by kn__x86_prep_q8_Ki; the
 * interleaved q at qi[t]): out[4r + t] in the canonical order. Inlined into one function per nt,
 * so the loops unroll to constants. */
static inline __attribute__((always_inline)) void
KN__X86_NAME(q6k_tile)(const kn__x86_q6k *const w[KN__Q6_R],
                       const kn__block_q8_K *const x[KN__Q6_T], const uint8_t *const qi[KN__Q6_T],
                       int64_t nb, float out[KN__Q6_R * KN__Q6_T], const int nt) {
    __m256 lane[KN__QLANES];
    for (int l = 0; l < KN__QLANES; l++) lane[l] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const kn__x86_q6k *w0 = w[0] + b, *w1 = w[1] + b;
        __m256i acc[KN__Q6_R][KN__Q6_T];
#pragma GCC unroll 4
        for (int t = 0; t < KN__Q6_T; t++) {
            if (t < nt) {
                const __m256i bs = _mm256_loadu_si256((const __m256i *)x[t][b].bsums);
                acc[0][t] = _mm256_madd_epi16(bs, _mm256_load_si256((const __m256i *)w0->scm32));
                acc[1][t] = _mm256_madd_epi16(bs, _mm256_load_si256((const __m256i *)w1->scm32));
            } else {
                acc[0][t] = acc[1][t] = _mm256_setzero_si256();
            }
        }
        const __m256i g0 = _mm256_load_si256((const __m256i *)w0->sg);
        const __m256i g1 = _mm256_load_si256((const __m256i *)w1->sg);
        /* not unrolled: GCC would hoist the products of several steps and spill them */
#pragma GCC unroll 1
        for (int k = 0; k < 8; k += 2) {
            const __m256i a0 = _mm256_load_si256((const __m256i *)(w0->codes + 32 * k));
            const __m256i a1 = _mm256_load_si256((const __m256i *)(w0->codes + 32 * k + 32));
            const __m256i c0 = _mm256_load_si256((const __m256i *)(w1->codes + 32 * k));
            const __m256i c1 = _mm256_load_si256((const __m256i *)(w1->codes + 32 * k + 32));
#pragma GCC unroll 4
            for (int t = 0; t < nt; t++) {
                const uint8_t *q = qi[t] + KN__QK_K * b + 32 * k;
                const __m256i q0 = _mm256_load_si256((const __m256i *)q);
                const __m256i q1 = _mm256_load_si256((const __m256i *)(q + 32));
                acc[0][t] = KN__DPWSSD(
                    acc[0][t],
                    _mm256_add_epi16(_mm256_maddubs_epi16(a0, q0), _mm256_maddubs_epi16(a1, q1)),
                    g0);
                acc[1][t] = KN__DPWSSD(
                    acc[1][t],
                    _mm256_add_epi16(_mm256_maddubs_epi16(c0, q0), _mm256_maddubs_epi16(c1, q1)),
                    g1);
            }
        }
        const __m256 dw = _mm256_setr_m128(_mm_set1_ps(w0->d), _mm_set1_ps(w1->d));
        const __m128 dx4 = _mm_setr_ps(x[0][b].d, nt > 1 ? x[1][b].d : 0.0f,
                                       nt > 2 ? x[2][b].d : 0.0f, nt > 3 ? x[3][b].d : 0.0f);
        const __m256 scale = _mm256_mul_ps(dw, _mm256_setr_m128(dx4, dx4));
        __m256 *l = &lane[b % KN__QLANES];
        *l = _mm256_fmadd_ps(_mm256_cvtepi32_ps(KN__X86_NAME(q6k_reduce)(acc)), scale, *l);
    }
    const __m256 s = _mm256_add_ps(
        _mm256_add_ps(_mm256_add_ps(lane[0], lane[4]), _mm256_add_ps(lane[2], lane[6])),
        _mm256_add_ps(_mm256_add_ps(lane[1], lane[5]), _mm256_add_ps(lane[3], lane[7])));
    _mm256_storeu_ps(out, s);
}

static void KN__X86_NAME(q6k_tile4)(const kn__x86_q6k *const w[KN__Q6_R],
                                    const kn__block_q8_K *const x[KN__Q6_T],
                                    const uint8_t *const qi[KN__Q6_T], int64_t nb,
                                    float out[KN__Q6_R * KN__Q6_T]) {
    KN__X86_NAME(q6k_tile)(w, x, qi, nb, out, 4);
}

/* One or two tokens left: half the work of a padded tile. */
static void KN__X86_NAME(q6k_tile2)(const kn__x86_q6k *const w[KN__Q6_R],
                                    const kn__block_q8_K *const x[KN__Q6_T],
                                    const uint8_t *const qi[KN__Q6_T], int64_t nb,
                                    float out[KN__Q6_R * KN__Q6_T]) {
    KN__X86_NAME(q6k_tile)(w, x, qi, nb, out, 2);
}

/* Rows n0 .. n1 of W (T > 1): a tile of rows decoded once, then every token against it. */
static void KN__X86_NAME(rows_q6_K_tiled)(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy,
                                          int64_t n0, int64_t n1, void *scratch) {
    const int64_t nb = W->cols / KN__QK_K;
    const size_t rb = (size_t)nb * sizeof(kn__x86_q6k);
    const int R = kn__x86_tile_rows_by(rb, KN__Q6_R);
    for (int64_t r0 = n0; r0 < n1; r0 += R) {
        const int rn = n1 - r0 < R ? (int)(n1 - r0) : R;
        for (int r = 0; r < rn; r++)
            kn__x86_decode_q6_K((const uint8_t *)W->data + (size_t)(r0 + r) * W->row_bytes, W->cols,
                                (kn__x86_q6k *)((uint8_t *)scratch + (size_t)r * rb));
        const int64_t r2 = n1 - (r0 + rn) < R ? n1 : r0 + rn + R; /* the next tile */
        for (int64_t t0 = 0; t0 < x->T; t0 += KN__Q6_T) {
            const int tn = x->T - t0 < KN__Q6_T ? (int)(x->T - t0) : KN__Q6_T;
            kn__x86_prefetch_rows(W, r0 + rn, r2, t0 / KN__Q6_T, (x->T + KN__Q6_T - 1) / KN__Q6_T);
            const kn__block_q8_K *xt[KN__Q6_T];
            const uint8_t *qi[KN__Q6_T];
            for (int t = 0; t < KN__Q6_T; t++) { /* missing tokens repeat the last; not stored */
                const uint8_t *p =
                    (const uint8_t *)x->data + (size_t)(t0 + (t < tn ? t : tn - 1)) * x->stride;
                xt[t] = (const kn__block_q8_K *)p;
                qi[t] = p + kn__x86_q8_Ki_qs(W->cols);
            }
            for (int r = 0; r < rn; r += KN__Q6_R) {
                const kn__x86_q6k *w[KN__Q6_R];
                for (int i = 0; i < KN__Q6_R; i++) /* a missing row repeats the first; not stored */
                    w[i] = (const kn__x86_q6k *)((const uint8_t *)scratch +
                                                 (size_t)(r + i < rn ? r + i : r) * rb);
                _Alignas(32) float out[KN__Q6_R * KN__Q6_T];
                if (tn > 2)
                    KN__X86_NAME(q6k_tile4)(w, xt, qi, nb, out);
                else
                    KN__X86_NAME(q6k_tile2)(w, xt, qi, nb, out);
                for (int t = 0; t < tn; t++)
                    for (int i = 0; i < KN__Q6_R && r + i < rn; i++)
                        Y[(t0 + t) * ldy + r0 + r + i] = out[KN__Q6_T * i + t];
            }
        }
    }
}

/* Q4_K x Q8_K: scaled codes and mins as two exact sums, two fmas into the block's lane. */
static inline float KN__X86_NAME(dot_q4_K)(const kn__x86_q4k *w, const kn__block_q8_K *x,
                                           int64_t nb) {
    float lane[KN__QLANES] = {0};
    for (int64_t b = 0; b < nb; b++, w++, x++) {
        const __m256i acc = KN__X86_NAME(q_k_sum)(w->codes, w->sc16, x->qs);
        const int32_t msum =
            kn__x86_hsum_i32(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)x->bsums),
                                               _mm256_load_si256((const __m256i *)w->m16)));
        float *l = &lane[b % KN__QLANES];
        kn__x86_fma_lane(l, kn__x86_hsum_i32(acc), w->d * x->d);
        kn__x86_fma_lane(l, msum, -(w->dmin * x->d));
    }
    return kn__tree8(lane);
}

/* A stored Q4_K super-block's 8 scales (bytes 0..7) and 8 mins (bytes 8..15) in both 128-bit
 * halves, unpacked from their 12 packed bytes four at a time: kn__q4k_scale_min's rule on 32-bit
 * words. The 16 bytes are loaded into both halves (a load, no shuffle), so the in-lane vpshufb
 * that spread them widen them to words too (index -128: a zero high byte). */
static inline __m256i KN__X86_NAME(q4k_scales_mins)(const uint8_t *packed) {
    /* words u0, u1, u2 of the 12 bytes (the 4 bytes after them, a super-block's first codes, are
     * loaded and dropped): dwords u0 & m6, (u2 & m4) | ((u0 >> 6) & m2) << 4, u1 & m6,
     * ((u2 >> 4) & m4) | ((u1 >> 6) & m2) << 4; ((u >> 6) & m2) << 4 is (u >> 2) & (m2 << 4). */
    const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)packed));
    const __m256i lo =
        _mm256_and_si256(_mm256_srlv_epi32(_mm256_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0)),
                                           _mm256_setr_epi32(0, 0, 0, 4, 0, 0, 0, 4)),
                         _mm256_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f,
                                           0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
    const __m256i hi = _mm256_and_si256(
        _mm256_srli_epi32(_mm256_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0)), 2),
        _mm256_setr_epi32(0, 0x30303030, 0, 0x30303030, 0, 0x30303030, 0, 0x30303030));
    return _mm256_or_si256(lo, hi);
}

/* One stored Q4_K super-block against one block of the token (kn__x86_prep_q8_Kn: its q and
 * bsums at xn), its scales and mins unpacked beforehand (sc: kn__x86_q4k_scales' words): the even
 * lanes of the result sum to the codes times q times the group scales, the odd lanes to the bsums
 * times the mins (both exact): the two 8-lane sums joined by two unpacks and an add, so a chunk
 * holds 8 vectors, not 16 (AVX2's 16 registers spilled them). Each group scale comes into every
 * word by a broadcast load (a load, no shuffle). */
static inline __attribute__((always_inline)) __m256i
KN__X86_NAME(q4k_row_block)(const uint8_t *row, const uint8_t *xn, const int16_t *sc) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    kn__x86_prefetch(row, KN__Q4_K_BYTES);
    const __m256i ms = _mm256_madd_epi16(_mm256_load_si256((const __m256i *)(xn + KN__QK_K)),
                                         _mm256_load_si256((const __m256i *)sc));
    __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                      _mm256_setzero_si256()};
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) { /* 32 bytes of codes: groups 2j (low nibbles), 2j + 1 */
        const __m256i q = _mm256_loadu_si256((const __m256i *)(row + 16 + 32 * j));
        const __m256i plo = _mm256_maddubs_epi16(_mm256_and_si256(q, m4),
                                                 _mm256_load_si256((const __m256i *)(xn + 64 * j)));
        const __m256i phi =
            _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
                                 _mm256_load_si256((const __m256i *)(xn + 64 * j + 32)));
        acc[j] = KN__DPWSSD(acc[j], plo, _mm256_broadcastw_epi16(_mm_loadu_si16(sc + 16 + 2 * j)));
        acc[j] = KN__DPWSSD(acc[j], phi, _mm256_broadcastw_epi16(_mm_loadu_si16(sc + 17 + 2 * j)));
    }
    const __m256i is =
        _mm256_add_epi32(_mm256_add_epi32(acc[0], acc[1]), _mm256_add_epi32(acc[2], acc[3]));
    return _mm256_add_epi32(_mm256_unpacklo_epi32(is, ms), _mm256_unpackhi_epi32(is, ms));
}

/* A row's super-blocks' scales and mins unpacked and d and dmin copied, before the chunks that
 * read them: per super-block i, at sc + KN__X86_Q4K_SC * i, 16 words (word w: the min of group
 * w / 2, against the bsums) and the 8 group scales as words; dword i of dd: its d low, dmin high
 * (zero from n up to the next multiple of 8). Done in the chunks, the scales' unpack and spread
 * (8 vpshufb a super-block) and the gather of d and dmin (16 scalar loads, 8 inserts a chunk) cost
 * more than the copies and the loads that read them (docs/kernels.md). */
#define KN__X86_Q4K_DD 32 /* super-blocks a row's copy holds */
#define KN__X86_Q4K_SC 32 /* words a super-block's scales and mins take in it */
static inline void KN__X86_NAME(q4k_scales)(const uint8_t *row, int n, int16_t *sc, uint32_t *dd) {
    for (int i = 0; i < n; i++, row += KN__Q4_K_BYTES, sc += KN__X86_Q4K_SC) {
        memcpy(dd + i, row, 4);
        const __m256i sm = KN__X86_NAME(q4k_scales_mins)(row + 4);
        _mm256_store_si256(
            (__m256i *)sc,
            _mm256_shuffle_epi8(sm, _mm256_setr_epi8(8, -128, 8, -128, 9, -128, 9, -128, 10, -128,
                                                     10, -128, 11, -128, 11, -128, 12, -128, 12,
                                                     -128, 13, -128, 13, -128, 14, -128, 14, -128,
                                                     15, -128, 15, -128)));
        _mm_store_si128((__m128i *)(sc + 16),
                        _mm256_castsi256_si128(_mm256_shuffle_epi8(
                            sm, _mm256_setr_epi8(0, -128, 1, -128, 2, -128, 3, -128, 4, -128, 5,
                                                 -128, 6, -128, 7, -128, 0, -128, 1, -128, 2, -128,
                                                 3, -128, 4, -128, 5, -128, 6, -128, 7, -128))));
    }
    for (int i = n; i % 8; i++) dd[i] = 0;
}

/* The canonical fmas of a chunk of 8 super-blocks: c[i] holds super-block i's code-sum partials
 * in its even lanes and its min-sum partials in its odd ones, dw and dmw the chunk's d and dmin,
 * xd the activations' d. The chunk's sums are reduced together (unpacks and adds: per 128-bit
 * half the code and min partials of 4 super-blocks, then the halves added), and the two
 * canonical fmas run 8 lanes at once. Lanes past the row hold sums 0 and scales 0, which leave a
 * lane (never -0) unchanged. */
static inline __attribute__((always_inline)) __m256
KN__X86_NAME(q4k_chunk_fma)(const __m256i c[8], __m256 dw, __m256 dmw, __m256 xd, __m256 lane) {
    __m256i ci[2], cm[2]; /* per half: super-blocks 4k .. 4k + 3's code sums, min sums */
#pragma GCC unroll 2
    for (int k = 0; k < 2; k++) {
        const __m256i *b = c + 4 * k;
        const __m256i t01 =
            _mm256_add_epi32(_mm256_unpacklo_epi32(b[0], b[1]), _mm256_unpackhi_epi32(b[0], b[1]));
        const __m256i t23 =
            _mm256_add_epi32(_mm256_unpacklo_epi32(b[2], b[3]), _mm256_unpackhi_epi32(b[2], b[3]));
        ci[k] = _mm256_unpacklo_epi64(t01, t23);
        cm[k] = _mm256_unpackhi_epi64(t01, t23);
    }
    const __m256i is = _mm256_add_epi32(_mm256_permute2x128_si256(ci[0], ci[1], 0x20),
                                        _mm256_permute2x128_si256(ci[0], ci[1], 0x31));
    const __m256i ms = _mm256_add_epi32(_mm256_permute2x128_si256(cm[0], cm[1], 0x20),
                                        _mm256_permute2x128_si256(cm[0], cm[1], 0x31));
    lane = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(dw, xd), lane);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(ms),
                           _mm256_xor_ps(_mm256_mul_ps(dmw, xd), _mm256_set1_ps(-0.0f)), lane);
}

/* n <= 8 super-blocks (a chunk) of a stored row against their blocks of the token (xn, the
 * blocks' d at dx; sc, dd: the chunk's part of kn__x86_q4k_scales' copy), added to the canonical
 * lanes b % 8; d and dmin of its super-blocks and the activations' d come in one load each. */
static inline __attribute__((always_inline)) __m256
KN__X86_NAME(q4k_row_chunk)(const uint8_t *row, const uint8_t *xn, const float *dx,
                            const int16_t *sc, const uint32_t *dd, __m256 lane, const int n) {
    __m256i c[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        c[i] = i < n ? KN__X86_NAME(q4k_row_block)(row + i * KN__Q4_K_BYTES,
                                                   xn + i * KN__X86_Q8_KN_BLOCK,
                                                   sc + i * KN__X86_Q4K_SC)
                     : _mm256_setzero_si256();
    /* per 128-bit lane: the 4 d, then the 4 dmin; then d 0..7 low, dmin 0..7 high */
    const __m256i h = _mm256_permute4x64_epi64(
        _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)dd),
                            _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
                                             0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15)),
        _MM_SHUFFLE(3, 1, 2, 0));
    return KN__X86_NAME(q4k_chunk_fma)(c, _mm256_cvtph_ps(_mm256_castsi256_si128(h)),
                                       _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)),
                                       _mm256_loadu_ps(dx) /* zero past the row */, lane);
}

/* ---- Q4_K's packed copy (kn_simd_x86.h; the AVX2 and AVX-VNNI rows read it) ---------------- */

/* A row's scales and mins unpacked as words before the chunks that read them: per chunk
 * KN__X86_Q4KP_CW words, super-block i's 8 scales at kn__x86_q4kp_woff(i) and its 8 mins 64
 * words further (the order the byte unpacks leave them in). */
#define KN__X86_Q4KP_CW 128
static inline int kn__x86_q4kp_woff(int i) {
    return 32 * (i >> 2) + 16 * (i & 1) + 8 * ((i >> 1) & 1);
}

/* The scales and mins of a packed chunk ch of n super-blocks into w: per half of 4 super-blocks,
 * the low nibbles of 32 bytes and the high bits of 4 dwords (each permuted to the two dwords of
 * its super-block's bytes and shifted by dword into bits 4-5), then widened to words. Lanes of
 * super-blocks from n on hold other bytes, which no kernel reads. */
static inline __attribute__((always_inline)) void
KN__X86_NAME(q4kp_chunk_scales)(const uint8_t *ch, int n, int16_t *w) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    const __m256i hb = _mm256_loadu_si256((const __m256i *)(ch + 12 * n));
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m256i l = _mm256_loadu_si256((const __m256i *)(ch + 4 * n + 32 * h));
        const __m256i hh =
            _mm256_permutevar8x32_epi32(hb, h ? _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7)
                                              : _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
        /* even dwords: groups 0..3 (high bits 0-1: scales, 4-5: mins), odd: 4..7 (2-3, 6-7) */
        const __m256i s = _mm256_or_si256(
            _mm256_and_si256(l, m4),
            _mm256_and_si256(_mm256_sllv_epi32(hh, _mm256_setr_epi32(4, 2, 4, 2, 4, 2, 4, 2)),
                             m30));
        const __m256i m = _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16(l, 4), m4),
            _mm256_and_si256(_mm256_srlv_epi32(hh, _mm256_setr_epi32(0, 2, 0, 2, 0, 2, 0, 2)),
                             m30));
        const __m256i z = _mm256_setzero_si256();
        __m256i *v = (__m256i *)(w + 32 * h);
        _mm256_store_si256(v, _mm256_unpacklo_epi8(s, z));     /* super-blocks 4h, 4h + 2 */
        _mm256_store_si256(v + 1, _mm256_unpackhi_epi8(s, z)); /* 4h + 1, 4h + 3 */
        _mm256_store_si256(v + 4, _mm256_unpacklo_epi8(m, z));
        _mm256_store_si256(v + 5, _mm256_unpackhi_epi8(m, z));
    }
}

/* The scales of a packed row's first nb super-blocks (chunks of 8). */
static inline void KN__X86_NAME(q4kp_scales)(const uint8_t *row, int64_t nb, int16_t *w) {
    for (int64_t b = 0; b < nb; b += 8, row += 8 * KN__Q4_K_BYTES, w += KN__X86_Q4KP_CW)
        KN__X86_NAME(q4kp_chunk_scales)(row, nb - b < 8 ? (int)(nb - b) : 8, w);
}

/* One packed super-block (its codes; pf: where the stream reads now, for the far prefetches)
 * against its block of the token in the packed order (xq: q, then the group sums), its scales and
 * mins unpacked at sw: as q4k_row_block's, the code sums' partials in the even lanes, the mins' in
 * the odd ones (only in the low half: 8 group sums). */
static inline __attribute__((always_inline)) __m256i KN__X86_NAME(q4kp_block)(const uint8_t *codes,
                                                                              const uint8_t *pf,
                                                                              const uint8_t *xq,
                                                                              const int16_t *sw) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    kn__x86_prefetch_far(pf, KN__Q4_K_BYTES);
    const __m256i ms = _mm256_zextsi128_si256(
        _mm_madd_epi16(_mm_load_si128((const __m128i *)(xq + KN__QK_K)),
                       _mm_load_si128((const __m128i *)(sw + KN__X86_Q4KP_CW / 2))));
    __m256i acc[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        __m256i q = _mm256_loadu_si256((const __m256i *)(codes + 32 * j));
        __asm__("" : "+x"(q)); /* loaded once: GCC would load it again as the mask's operand */
        const __m256i p = _mm256_add_epi16(
            _mm256_maddubs_epi16(_mm256_and_si256(q, m4),
                                 _mm256_load_si256((const __m256i *)(xq + 64 * j))),
            _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
                                 _mm256_load_si256((const __m256i *)(xq + 64 * j + 32))));
        int32_t s2; /* the scales of groups 2j (low word) and 2j + 1 */
        memcpy(&s2, sw + 2 * j, 4);
        acc[j % 2] = KN__DPWSSD(acc[j % 2], p, _mm256_set1_epi32(s2));
    }
    const __m256i is = _mm256_add_epi32(acc[0], acc[1]);
    return _mm256_add_epi32(_mm256_unpacklo_epi32(is, ms), _mm256_unpackhi_epi32(is, ms));
}

/* A packed chunk ch of n <= 8 super-blocks against the token (xq: its blocks in the packed order,
 * dx: their d; w: the chunk's unpacked scales), added to the canonical lanes b % 8. */
static inline __attribute__((always_inline)) __m256
KN__X86_NAME(q4kp_chunk)(const uint8_t *ch, const uint8_t *xq, const float *dx, const int16_t *w,
                         __m256 lane, const int n) {
    __m256i c[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        c[i] =
            i < n ? KN__X86_NAME(q4kp_block)(ch + 16 * n + 128 * i, ch + i * KN__Q4_K_BYTES,
                                             xq + i * KN__X86_Q8_KN_BLOCK, w + kn__x86_q4kp_woff(i))
                  : _mm256_setzero_si256();
    __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)ch));
    __m256 dmw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(ch + 2 * n)));
    if (n < 8) { /* the lanes past the chunk read other bytes */
        dw = _mm256_and_ps(dw, kn__x86_live_lanes(n));
        dmw = _mm256_and_ps(dmw, kn__x86_live_lanes(n));
    }
    return KN__X86_NAME(q4k_chunk_fma)(c, dw, dmw, _mm256_loadu_ps(dx), lane);
}

/* A row's first n super-blocks' scales for its chunks (`packed`: a packed row's, in sc only). */
static inline __attribute__((always_inline)) void
KN__X86_NAME(q4k_row_scales)(const uint8_t *row, int64_t n, int16_t *sc, uint32_t *dd,
                             const bool packed) {
    if (packed)
        KN__X86_NAME(q4kp_scales)(row, n, sc);
    else
        KN__X86_NAME(q4k_scales)(row, (int)n, sc, dd);
}

/* The chunk of n super-blocks at row against xn and dx, its scales at super-block p of the copy. */
static inline __attribute__((always_inline)) __m256
KN__X86_NAME(q4k_any_chunk)(const uint8_t *row, const uint8_t *xn, const float *dx,
                            const int16_t *sc, const uint32_t *dd, int64_t p, __m256 lane,
                            const int n, const bool packed) {
    if (packed) return KN__X86_NAME(q4kp_chunk)(row, xn, dx, sc + p / 8 * KN__X86_Q4KP_CW, lane, n);
    return KN__X86_NAME(q4k_row_chunk)(row, xn, dx, sc + p * KN__X86_Q4K_SC, dd + p, lane, n);
}

/* Q4_K x Q8_K straight from the stored row (a few tokens, one at a time): the decoded tile's two
 * exact sums per super-block (codes times q times the group scales; bsums times the mins),
 * computed in registers from the 144 stored bytes, and the two canonical fmas into the block's
 * lane. Decoding a tile first would write and read four times the stored bytes (the scales
 * expanded to vectors) for one use. sc, dd: the row's scales (q4k_scales) when `copied`
 * (rows of up to KN__X86_Q4K_DD super-blocks), else room for them, copied here a part at a time.
 * `packed`: a row of the packed copy (kn_simd_x86.h) against the token's blocks in its order, its
 * scales (q4kp_scales) in sc and no dd. */
static inline __attribute__((always_inline)) float
KN__X86_NAME(dot_q4_K_row)(const uint8_t *row, const uint8_t *x, int64_t k, int16_t *sc,
                           uint32_t *dd, const bool copied, const bool packed) {
    const int64_t nb = k / KN__QK_K;
    const uint8_t *xn = x + (packed ? kn__x86_q8_Kn_qp(k) : kn__x86_q8_Ki_qs(k));
    const float *dx = (const float *)(x + kn__x86_q8_Kn_dx(k));
    __m256 lane = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) { /* whole chunks: constant n, no branches */
        const int64_t p = b % KN__X86_Q4K_DD;
        if (!copied && p == 0) KN__X86_NAME(q4k_row_scales)
        (row + b * KN__Q4_K_BYTES, nb - b < KN__X86_Q4K_DD ? nb - b : KN__X86_Q4K_DD, sc, dd,
         packed);
        lane = KN__X86_NAME(q4k_any_chunk)(row + b * KN__Q4_K_BYTES, xn + b * KN__X86_Q8_KN_BLOCK,
                                           dx + b, sc, dd, p, lane, 8, packed);
    }
    if (b < nb) {
        const int64_t p = b % KN__X86_Q4K_DD;
        if (!copied && p == 0)
            KN__X86_NAME(q4k_row_scales)(row + b * KN__Q4_K_BYTES, nb - b, sc, dd, packed);
        lane = KN__X86_NAME(q4k_any_chunk)(row + b * KN__Q4_K_BYTES, xn + b * KN__X86_Q8_KN_BLOCK,
                                           dx + b, sc, dd, p, lane, (int)(nb - b), packed);
    }
    return kn__x86_tree8(lane);
}

/* ---- row loops: decode a tile of rows, then every token against every row of the tile -------- */

#define KN__X86_ROWS(kind, row_bytes_fn, decode_call, dot_call)                                    \
    static void KN__X86_NAME(rows_##kind)(const kn_mat *W, const kn__act *x, float *Y,             \
                                          int64_t ldy, int64_t n0, int64_t n1, void *scratch) {    \
        const size_t rb = row_bytes_fn;                                                            \
        const int R = kn__x86_tile_rows(rb);                                                       \
        for (int64_t r0 = n0; r0 < n1; r0 += R) {                                                  \
            const int rn = n1 - r0 < R ? (int)(n1 - r0) : R;                                       \
            for (int r = 0; r < rn; r++) {                                                         \
                const uint8_t *src = (const uint8_t *)W->data + (size_t)(r0 + r) * W->row_bytes;   \
                uint8_t *dst = (uint8_t *)scratch + (size_t)r * rb;                                \
                decode_call;                                                                       \
            }                                                                                      \
            for (int64_t t = 0; t < x->T; t++) {                                                   \
                const uint8_t *xt = (const uint8_t *)x->data + (size_t)t * x->stride;              \
                for (int r = 0; r < rn; r++) {                                                     \
                    const uint8_t *dec = (const uint8_t *)scratch + (size_t)r * rb;                \
                    Y[t * ldy + r0 + r] = dot_call;                                                \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }

/* MXFP4 / Q8_0: decode a tile of rows (with `decode`: kn__x86_decode_mxfp4, its packed twin
 * kn__x86_decode_mxfp4p or kn__x86_decode_q8_0), then every token against the tile four rows at a
 * time. */
static void KN__X86_NAME(rows_tile)(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy,
                                    int64_t n0, int64_t n1, void *scratch,
                                    void (*decode)(const uint8_t *, int64_t, void *)) {
    const bool mxfp4 = decode != kn__x86_decode_q8_0;
    const int64_t ng = kn__x86_groups(W->cols);
    const size_t rb = mxfp4 ? kn__x86_mxfp4_row_bytes(W->cols) : kn__x86_q8_0_row_bytes(W->cols);
    const int R = kn__x86_tile_rows_by(rb, 4);
    for (int64_t r0 = n0; r0 < n1; r0 += R) {
        const int rn = n1 - r0 < R ? (int)(n1 - r0) : R;
        for (int r = 0; r < rn; r++) {
            const uint8_t *src = (const uint8_t *)W->data + (size_t)(r0 + r) * W->row_bytes;
            decode(src, W->cols, (uint8_t *)scratch + (size_t)r * rb);
        }
        const int64_t r2 = n1 - (r0 + rn) < R ? n1 : r0 + rn + R; /* the next tile */
        for (int64_t t = 0; t < x->T; t++) {
            const uint8_t *xt = (const uint8_t *)x->data + (size_t)t * x->stride;
            kn__x86_prefetch_rows(W, r0 + rn, r2, t, x->T);
            for (int r = 0; r < rn; r += 4) {
                const uint8_t *w[4];
#pragma GCC unroll 4
                for (int i = 0; i < 4; i++) /* missing rows repeat the first; not stored */
                    w[i] = (const uint8_t *)scratch + (size_t)(r + i < rn ? r + i : r) * rb;
                float out[4];
                if (mxfp4)
                    KN__X86_NAME(dot_tile_mxfp4)(w, xt, ng, out);
                else
                    KN__X86_NAME(dot_tile_q8_0)(w, xt, ng, out);
                for (int i = 0; i < 4 && r + i < rn; i++) Y[t * ldy + r0 + r + i] = out[i];
            }
        }
    }
}

static void KN__X86_NAME(rows_mxfp4)(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy,
                                     int64_t n0, int64_t n1, void *scratch) {
    KN__X86_NAME(rows_tile)(W, x, Y, ldy, n0, n1, scratch, kn__x86_decode_mxfp4);
}

static void KN__X86_NAME(rows_q8_0)(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy,
                                    int64_t n0, int64_t n1, void *scratch) {
    KN__X86_NAME(rows_tile)(W, x, Y, ldy, n0, n1, scratch, kn__x86_decode_q8_0);
}

KN__X86_ROWS(q4_K_tiled, (size_t)(W->cols / KN__QK_K) * sizeof(kn__x86_q4k),
             kn__x86_decode_q4_K(src, W->cols, (kn__x86_q4k *)dst),
             KN__X86_NAME(dot_q4_K)((const kn__x86_q4k *)dec, (const kn__block_q8_K *)xt,
                                    W->cols / KN__QK_K))

/* Q4_K batches up to this many tokens stream the stored rows (each token's sums cost as much as
 * one token's, the row is read once); larger ones decode a tile once for all of them. */
#define KN__X86_Q4K_FEW 16
/* A few tokens (`packed`: W's rows are the packed copy's). */
static inline __attribute__((always_inline)) void
KN__X86_NAME(rows_q4_K_few)(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy, int64_t n0,
                            int64_t n1, const bool packed) {
    /* the row comes from memory for the first token and from L1 for the others; a row of up to
     * KN__X86_Q4K_DD super-blocks has its scales unpacked once for all of them */
    _Alignas(32) int16_t sc[KN__X86_Q4K_DD * KN__X86_Q4K_SC];
    _Alignas(32) uint32_t dd[KN__X86_Q4K_DD];
    const int64_t nb = W->cols / KN__QK_K;
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *row = (const uint8_t *)W->data + (size_t)n * W->row_bytes;
        const uint8_t *x0 = (const uint8_t *)x->data;
        const bool copied = nb <= KN__X86_Q4K_DD;
        if (copied) KN__X86_NAME(q4k_row_scales)(row, nb, sc, dd, packed);
        for (int64_t t = 0; t < x->T; t++)
            Y[t * ldy + n] = KN__X86_NAME(dot_q4_K_row)(row, x0 + (size_t)t * x->stride, W->cols,
                                                        sc, dd, copied, packed);
    }
}

static void KN__X86_NAME(rows_q4_K)(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy,
                                    int64_t n0, int64_t n1, void *scratch) {
    if (x->T > KN__X86_Q4K_FEW)
        KN__X86_NAME(rows_q4_K_tiled)(W, x, Y, ldy, n0, n1, scratch);
    else
        KN__X86_NAME(rows_q4_K_few)(W, x, Y, ldy, n0, n1, false);
}

static void KN__X86_NAME(rows_q6_K)(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy,
                                    int64_t n0, int64_t n1, void *scratch) {
    KN__X86_NAME(rows_q6_K_tiled)(W, x, Y, ldy, n0, n1, scratch);
}

static size_t KN__X86_NAME(scratch_mxfp4)(const kn_mat *W, int64_t T) {
    const size_t rb = kn__x86_mxfp4_row_bytes(W->cols);
    return rb * (size_t)kn__x86_tile_rows_by(rb, 4);
}
static size_t KN__X86_NAME(scratch_q8_0)(const kn_mat *W, int64_t T) {
    const size_t rb = kn__x86_q8_0_row_bytes(W->cols);
    return rb * (size_t)kn__x86_tile_rows_by(rb, 4);
}
static size_t KN__X86_NAME(scratch_q6_K)(const kn_mat *W, int64_t T) {
    const size_t rb = (size_t)(W->cols / KN__QK_K) * sizeof(kn__x86_q6k);
    return rb * (size_t)kn__x86_tile_rows_by(rb, KN__Q6_R);
}
static size_t KN__X86_NAME(scratch_q4_K)(const kn_mat *W, int64_t T) {
    const size_t rb = (size_t)(W->cols / KN__QK_K) * sizeof(kn__x86_q4k);
    return T > KN__X86_Q4K_FEW ? rb * (size_t)kn__x86_tile_rows(rb) : 0;
}

/* ---- this variant's Q8-mode kernel table ----------------------------------------------------- */

#define KN__X86_KERNEL(kind, act)                                                                  \
    static const kn__kernel KN__X86_NAME(k_##kind) = {                                             \
        KN__X86_LABEL "-" #kind "-" #act, kn__x86_##act##_bytes, kn__x86_prep_##act,               \
        KN__X86_NAME(scratch_##kind), KN__X86_NAME(rows_##kind)};
KN__X86_KERNEL(mxfp4, q8_0p)
KN__X86_KERNEL(q8_0, q8_0p)
KN__X86_KERNEL(q6_K, q8_Ki)
KN__X86_KERNEL(q4_K, q8_Kn)

static const kn__kernel *const KN__X86_NAME(int8_kernels)[KN_TYPE_COUNT] = {
    [KN_MXFP4] = &KN__X86_NAME(k_mxfp4),
    [KN_Q8_0] = &KN__X86_NAME(k_q8_0),
    [KN_Q6_K] = &KN__X86_NAME(k_q6_K),
    [KN_Q4_K] = &KN__X86_NAME(k_q4_K),
};
