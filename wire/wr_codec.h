/* wire/wr_codec.h — how activation rows travel: element types (f32, f16, bf16), the optional LZ4
 * pass and its 10 % rule, and the `--wire` option that names a codec.
 *
 * Conversions round to nearest even and keep subnormals, signed zeros, Inf and NaN (NaN stays a
 * NaN). f32 values beyond the f16 range become ±Inf: receivers that refuse non-finite rows catch
 * them (wr_first_nonfinite). Routing weights never go through a codec: they travel as f32. */
#ifndef WR_CODEC_H
#define WR_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/mw_err.h"

/* Values are the wire's DType numbers (proto/moewire.proto). */
typedef enum wr_dtype { WR_F32 = 1, WR_F16 = 2, WR_BF16 = 3, WR_DTYPE_END } wr_dtype;

typedef struct wr_codec {
    wr_dtype dtype;
    bool lz4; /* LZ4 each frame where that saves >= 10 % */
} wr_codec;

/* Whether d is a dtype this build speaks. */
bool wr_dtype_valid(int d);
/* Bytes per element (4 or 2); 0 for an invalid dtype. */
size_t wr_dtype_size(wr_dtype d);
/* "f32", "f16", "bf16"; "invalid" otherwise. */
const char *wr_dtype_name(wr_dtype d);

/* Parses "f32", "f16", "bf16", each optionally followed by "+lz4". */
int wr_codec_parse(const char *s, wr_codec *out, mw_err *err);
/* Writes the canonical name ("bf16+lz4") into buf (at least 16 bytes); returns buf. */
char *wr_codec_format(wr_codec c, char *buf, size_t cap);

/* n floats → n elements of d at dst (n * wr_dtype_size(d) bytes, any alignment). */
void wr_encode(wr_dtype d, const float *src, size_t n, void *dst);
/* n elements of d at src (any alignment) → n floats. */
void wr_decode(wr_dtype d, const void *src, size_t n, float *dst);

/* wr_decode, and the index of the first NaN or ±Inf it wrote (n when all are finite): what
 * wr_decode then wr_first_nonfinite on dst return, with the 16-bit types checked as they are
 * decoded instead of in a second pass over the floats. */
size_t wr_decode_checked(wr_dtype d, const void *src, size_t n, float *dst);

/* Index of the first NaN or ±Inf among x[0..n), or n when all are finite. */
size_t wr_first_nonfinite(const float *x, size_t n);

/* The LZ4 rule: a frame is sent compressed only when that saves at least 10 %, i.e. when the
 * compressed length is <= wr_lz4_limit(raw_len). */
size_t wr_lz4_limit(size_t raw_len);
/* Compresses src into dst (cap >= wr_lz4_limit(n)); returns the compressed length, or 0 when the
 * rule says to send the frame raw (including n too small or too large for LZ4). */
size_t wr_lz4_compress(const void *src, size_t n, void *dst, size_t cap);
/* Decompresses exactly raw_len bytes; -1 with err when the data is corrupt or its length differs.
 */
int wr_lz4_decompress(const void *src, size_t n, void *dst, size_t raw_len, mw_err *err);

#endif
