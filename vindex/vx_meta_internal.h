/* vindex/vx_meta_internal.h — the value representation behind vx_meta, for the vindex readers and
 * writers that move whole values (GGUF reader/writer, manifest, fingerprint). Not for other
 * modules: they use vindex/vx_meta.h. */
#ifndef VX_META_INTERNAL_H
#define VX_META_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "vindex/vx_meta.h"

/* Deepest array-of-array nesting accepted from a file (GGUF allows nesting; nothing real uses more
 * than one level, and an unbounded depth would let a file overflow the reader's stack). */
#define VX__META_MAX_DEPTH 8

typedef struct vx__val {
    vx_vtype type;
    union {
        uint8_t raw[8]; /* scalars: little-endian bytes as in GGUF, zero padded */
        struct {
            char *s; /* NUL-terminated (the value itself may contain NULs: use len) */
            uint64_t len;
        } str;
        struct {
            vx_vtype elem;
            uint64_t n;
            /* numeric/bool: n * vx__vtype_size(elem) raw bytes;
             * VX_STR: a blob holding the n strings, each followed by a NUL;
             * VX_ARR: n vx__val (each an array). */
            void *data;
            uint64_t *offs; /* VX_STR only: n + 1 offsets into the blob (string i spans
                               [offs[i], offs[i+1] - 1), the NUL excluded) */
        } arr;
    } u;
} vx__val;

/* Bytes of one scalar of type t; 0 for VX_STR, VX_ARR and unknown ids. */
size_t vx__vtype_size(vx_vtype t);
bool vx__vtype_valid(uint32_t t);
void vx__val_free(vx__val *v);
int vx__val_copy(vx__val *dst, const vx__val *src);
/* String i of a VX_STR array. */
static inline const char *vx__val_arr_str(const vx__val *v, uint64_t i, uint64_t *len) {
    if (len) *len = v->u.arr.offs[i + 1] - v->u.arr.offs[i] - 1;
    return (const char *)v->u.arr.data + v->u.arr.offs[i];
}

const vx__val *vx__meta_val(const vx_meta *m, size_t i);
/* Stores v under key[0..key_len) (key must hold no NUL). The table takes v's contents whatever
 * happens. Returns 0 when stored, 1 when the key exists and replace is false (nothing changed),
 * -1 when out of memory. */
int vx__meta_put(vx_meta *m, const char *key, size_t key_len, vx__val *v, bool replace);

#endif
