/* vindex/vx_meta.h — an ordered table of typed key/value metadata (GGUF's value model).
 *
 * GGUF files, vindex manifests and Hugging Face config.json files all end up as a vx_meta with
 * GGUF-style keys ("gpt-oss.block_count", "tokenizer.ggml.tokens", ...), so the model layer reads
 * every hyperparameter through one path. Values are copied in; the table owns its memory. */
#ifndef VX_META_H
#define VX_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/mw_err.h"

/* GGUF's value type ids. */
typedef enum vx_vtype {
    VX_U8 = 0,
    VX_I8 = 1,
    VX_U16 = 2,
    VX_I16 = 3,
    VX_U32 = 4,
    VX_I32 = 5,
    VX_F32 = 6,
    VX_BOOL = 7,
    VX_STR = 8,
    VX_ARR = 9,
    VX_U64 = 10,
    VX_I64 = 11,
    VX_F64 = 12,
    VX_VTYPE_COUNT
} vx_vtype;

typedef struct vx_meta vx_meta;

vx_meta *vx_meta_new(void);
void vx_meta_free(vx_meta *m);
const char *vx_vtype_name(vx_vtype t);

size_t vx_meta_count(const vx_meta *m);
const char *vx_meta_key(const vx_meta *m, size_t i);
vx_vtype vx_meta_type(const vx_meta *m, size_t i);
/* For arrays: element type and length. */
vx_vtype vx_meta_arr_type(const vx_meta *m, size_t i);
uint64_t vx_meta_arr_len(const vx_meta *m, size_t i);
/* Index of key, or -1. */
long vx_meta_find(const vx_meta *m, const char *key);
/* Elements of a numeric or bool array entry as raw little-endian bytes (n * element size), or NULL
 * for other entries. Valid while m is unchanged. */
const void *vx_meta_arr_raw(const vx_meta *m, size_t i);

/* Typed getters. Return 1 when found and converted, 0 when the key is absent, -1 when present with
 * a type that does not convert (err names the key and both types). Integers convert to i64 when in
 * range; integers and floats convert to f64; bool only from BOOL. */
int vx_meta_get_i64(const vx_meta *m, const char *key, int64_t *out, mw_err *err);
int vx_meta_get_f64(const vx_meta *m, const char *key, double *out, mw_err *err);
int vx_meta_get_bool(const vx_meta *m, const char *key, bool *out, mw_err *err);
/* The string is NUL-terminated and owned by m. */
int vx_meta_get_str(const vx_meta *m, const char *key, const char **out, mw_err *err);
/* Array elements: integer/float/bool arrays through i64/f64, string arrays through str. */
int vx_meta_arr_i64(const vx_meta *m, const char *key, uint64_t idx, int64_t *out, mw_err *err);
int vx_meta_arr_f64(const vx_meta *m, const char *key, uint64_t idx, double *out, mw_err *err);
int vx_meta_arr_str(const vx_meta *m, const char *key, uint64_t idx, const char **out, size_t *len,
                    mw_err *err);

/* Setters (replace an existing key, else append). Return 0 or -1 on allocation failure. */
int vx_meta_set_u32(vx_meta *m, const char *key, uint32_t v);
int vx_meta_set_i32(vx_meta *m, const char *key, int32_t v);
int vx_meta_set_u64(vx_meta *m, const char *key, uint64_t v);
int vx_meta_set_f32(vx_meta *m, const char *key, float v);
int vx_meta_set_f64(vx_meta *m, const char *key, double v);
int vx_meta_set_bool(vx_meta *m, const char *key, bool v);
/* Any scalar type (raw little-endian value bytes); -1 for VX_STR / VX_ARR. */
int vx_meta_set_scalar(vx_meta *m, const char *key, vx_vtype type, const void *raw);
int vx_meta_set_str(vx_meta *m, const char *key, const char *s, size_t len);
/* Numeric or bool array of n elements of type elem (raw little-endian element bytes). */
int vx_meta_set_arr(vx_meta *m, const char *key, vx_vtype elem, const void *data, uint64_t n);
/* String array. */
int vx_meta_set_arr_str(vx_meta *m, const char *key, const char *const *strs, const size_t *lens,
                        uint64_t n);
/* Copies entry i of src into dst (under the same key). */
int vx_meta_copy_entry(vx_meta *dst, const vx_meta *src, size_t i);
/* A new table holding a copy of every entry of src, in order; NULL when out of memory. */
vx_meta *vx_meta_clone(const vx_meta *src);

#endif
