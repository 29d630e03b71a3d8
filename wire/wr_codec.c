/* wire/wr_codec.c — row codecs: one table row per element type, the `--wire` names, the
 * non-finite scan and the LZ4 rule. Bulk conversion uses the AVX2 + F16C converters when the
 * kernels run AVX2 (the same bits either way), otherwise the scalar kernels' conversions. */
#include "wire/wr_codec.h"

#include <lz4.h>
#include <stdio.h>
#include <string.h>

#include "kernels/kn.h"
#include "wire/wr_codec_internal.h"

#if defined(__x86_64__)
#define WR_HAVE_AVX2 1
#else
#define WR_HAVE_AVX2 0
#endif

typedef void (*wr_enc_fn)(const float *src, size_t n, uint8_t *dst);
typedef void (*wr_dec_fn)(const uint8_t *src, size_t n, float *dst);

static void enc_f32(const float *src, size_t n, uint8_t *dst) {
    memcpy(dst, src, n * 4);
}
static void dec_f32(const uint8_t *src, size_t n, float *dst) {
    memcpy(dst, src, n * 4);
}

/* The 16-bit formats' scalar paths: one element at a time through the kernels' conversions. */
static void enc16(const float *src, size_t n, uint8_t *dst, uint16_t (*cvt)(float)) {
    for (size_t i = 0; i < n; i++) {
        uint16_t h = cvt(src[i]);
        memcpy(dst + 2 * i, &h, 2);
    }
}

static void dec16(const uint8_t *src, size_t n, float *dst, float (*cvt)(uint16_t)) {
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, src + 2 * i, 2);
        dst[i] = cvt(h);
    }
}

static void enc_f16(const float *s, size_t n, uint8_t *d) {
    enc16(s, n, d, kn_f32_to_fp16);
}
static void dec_f16(const uint8_t *s, size_t n, float *d) {
    dec16(s, n, d, kn_fp16_to_f32);
}
static void enc_bf16(const float *s, size_t n, uint8_t *d) {
    enc16(s, n, d, kn_f32_to_bf16);
}
static void dec_bf16(const uint8_t *s, size_t n, float *d) {
    dec16(s, n, d, kn_bf16_to_f32);
}

#if !WR_HAVE_AVX2
#define wr__f32_to_f16_avx2  NULL
#define wr__f16_to_f32_avx2  NULL
#define wr__f32_to_bf16_avx2 NULL
#define wr__bf16_to_f32_avx2 NULL
#endif

typedef struct wr_dtype_traits {
    const char *name;
    size_t size;
    wr_enc_fn enc, enc_avx2; /* enc_avx2 NULL: the scalar one is already as fast */
    wr_dec_fn dec, dec_avx2;
} wr_dtype_traits;

static const wr_dtype_traits traits[WR_DTYPE_END] = {
    [WR_F32] = {"f32", 4, enc_f32, NULL, dec_f32, NULL},
    [WR_F16] = {"f16", 2, enc_f16, wr__f32_to_f16_avx2, dec_f16, wr__f16_to_f32_avx2},
    [WR_BF16] = {"bf16", 2, enc_bf16, wr__f32_to_bf16_avx2, dec_bf16, wr__bf16_to_f32_avx2},
};

bool wr_dtype_valid(int d) {
    return d > 0 && d < WR_DTYPE_END && traits[d].name;
}

size_t wr_dtype_size(wr_dtype d) {
    return wr_dtype_valid(d) ? traits[d].size : 0;
}

const char *wr_dtype_name(wr_dtype d) {
    return wr_dtype_valid(d) ? traits[d].name : "invalid";
}

int wr_codec_parse(const char *s, wr_codec *out, mw_err *err) {
    if (!s) return mw_errf(err, "--wire: missing codec (f32, f16 or bf16, optionally +lz4)");
    const char *plus = strchr(s, '+');
    size_t base = plus ? (size_t)(plus - s) : strlen(s);
    bool lz4 = false;
    if (plus) {
        if (strcmp(plus + 1, "lz4") != 0)
            return mw_errf(err, "--wire %s: unknown suffix '%s' (only +lz4)", s, plus + 1);
        lz4 = true;
    }
    for (int d = 1; d < WR_DTYPE_END; d++) {
        if (strlen(traits[d].name) == base && !strncmp(s, traits[d].name, base)) {
            out->dtype = (wr_dtype)d;
            out->lz4 = lz4;
            return 0;
        }
    }
    return mw_errf(err, "--wire %s: unknown codec (f32, f16 or bf16, optionally +lz4)", s);
}

char *wr_codec_format(wr_codec c, char *buf, size_t cap) {
    snprintf(buf, cap, "%s%s", wr_dtype_name(c.dtype), c.lz4 ? "+lz4" : "");
    return buf;
}

static bool use_avx2(void) {
    return WR_HAVE_AVX2 && kn_isa_uses(KN_ISA_AVX2);
}

void wr_encode(wr_dtype d, const float *src, size_t n, void *dst) {
    const wr_dtype_traits *t = &traits[d];
    (use_avx2() && t->enc_avx2 ? t->enc_avx2 : t->enc)(src, n, dst);
}

void wr_decode(wr_dtype d, const void *src, size_t n, float *dst) {
    const wr_dtype_traits *t = &traits[d];
    (use_avx2() && t->dec_avx2 ? t->dec_avx2 : t->dec)(src, n, dst);
}

size_t wr_decode_checked(wr_dtype d, const void *src, size_t n, float *dst) {
#if WR_HAVE_AVX2
    if (use_avx2() && (d == WR_F16 || d == WR_BF16)) {
        const bool any = d == WR_F16 ? wr__f16_to_f32_checked_avx2(src, n, dst)
                                     : wr__bf16_to_f32_checked_avx2(src, n, dst);
        return any ? wr_first_nonfinite(dst, n) : n; /* a bad row is rare: find it in a pass */
    }
#endif
    wr_decode(d, src, n, dst);
    return wr_first_nonfinite(dst, n);
}

size_t wr_first_nonfinite(const float *x, size_t n) {
#if WR_HAVE_AVX2
    /* every received row is scanned: the scalar loop below, which gcc -O2 does not vectorize,
     * cost more than decoding the rows */
    if (use_avx2()) return wr__first_nonfinite_avx2(x, n);
#endif
    /* Branch-free over blocks so the compiler vectorizes the common all-finite case. */
    enum { BLOCK = 64 };
    for (size_t i = 0; i < n; i += BLOCK) {
        size_t m = n - i < BLOCK ? n - i : BLOCK;
        uint32_t bad = 0;
        for (size_t j = 0; j < m; j++) {
            uint32_t b;
            memcpy(&b, x + i + j, 4);
            bad |= (b & 0x7f800000u) == 0x7f800000u;
        }
        if (bad) {
            for (size_t j = 0; j < m; j++) {
                uint32_t b;
                memcpy(&b, x + i + j, 4);
                if ((b & 0x7f800000u) == 0x7f800000u) return i + j;
            }
        }
    }
    return n;
}

size_t wr_lz4_limit(size_t raw_len) {
    return raw_len - (raw_len + 9) / 10;
}

size_t wr_lz4_compress(const void *src, size_t n, void *dst, size_t cap) {
    size_t limit = wr_lz4_limit(n);
    if (n == 0 || n > LZ4_MAX_INPUT_SIZE || limit == 0) return 0;
    if (cap < limit) limit = cap;
    /* With the output capped at the limit, LZ4 gives up (returns 0) as soon as it cannot fit. */
    int c = LZ4_compress_default(src, dst, (int)n, (int)limit);
    return c > 0 ? (size_t)c : 0;
}

int wr_lz4_decompress(const void *src, size_t n, void *dst, size_t raw_len, mw_err *err) {
    if (n == 0 || n > LZ4_MAX_INPUT_SIZE || raw_len > LZ4_MAX_INPUT_SIZE)
        return mw_errf(err, "LZ4 frame of %zu bytes for %zu raw bytes is out of range", n, raw_len);
    int d = LZ4_decompress_safe(src, dst, (int)n, (int)raw_len);
    if (d < 0) return mw_errf(err, "LZ4 data is corrupt (%zu bytes)", n);
    if ((size_t)d != raw_len)
        return mw_errf(err, "LZ4 data decodes to %d bytes, the envelope declares %zu", d, raw_len);
    return 0;
}
