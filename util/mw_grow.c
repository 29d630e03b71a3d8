/* util/mw_grow.c — see mw_grow.h. */
#include "util/mw_grow.h"

#include <stdint.h>
#include <stdlib.h>

int mw_grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    if (elem == 0 || need > SIZE_MAX / 2 / elem) return -1;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}
