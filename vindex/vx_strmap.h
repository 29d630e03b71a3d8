/* vindex/vx_strmap.h — a string → index hash map (open addressing) for name lookups.
 *
 * Private to vindex/. Keys are borrowed: the caller keeps them alive and unchanged while they are
 * in the map. Lookups stay O(1) however many names an untrusted file declares, so duplicate checks
 * cannot be turned into a quadratic hang. */
#ifndef VX_STRMAP_H
#define VX_STRMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct vx_strmap {
    size_t cap; /* slots, a power of two (0 = empty map) */
    size_t n;
    const char **keys;
    size_t *vals;
} vx_strmap;

void vx_strmap_free(vx_strmap *m);
/* Index stored under key, or -1. */
long vx_strmap_get(const vx_strmap *m, const char *key);
/* Inserts key → val. Returns 0 when inserted, 1 when key was already present (its value is left
 * unchanged), -1 when out of memory. */
int vx_strmap_put(vx_strmap *m, const char *key, size_t val);

#endif
