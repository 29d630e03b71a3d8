/* metal/mt_regions.h — page-aligned regions covering the weights, for a backend to wrap without a
 * copy: a Metal buffer over host memory (newBufferWithBytesNoCopy) must start on a page and span
 * whole pages. Matrices whose pages touch or overlap share a region, so the extents of a vindex
 * file mapped in one piece become a few large buffers, and a GGUF layer's expert tensors one each;
 * no region is longer than the device's largest buffer. Pure arithmetic on addresses: nothing is
 * read or mapped here. */
#ifndef MT_REGIONS_H
#define MT_REGIONS_H

#include <stddef.h>
#include <stdint.h>

#include "metal/mt_backend.h"
#include "util/mw_err.h"

/* A span of bytes to cover (p, len: in), and where it landed (region, off: out). */
typedef struct mt_range {
    const void *p;
    size_t len;
    int region;
    uint64_t off; /* of p from the region's base */
} mt_range;

/* Covers n ranges (len > 0) with regions whose base and length are multiples of `page` (a power
 * of two) and whose length is at most max_len; fills each range's region and offset. *out is
 * malloc'ed (*n_out regions). -1 with err when a range alone needs more than max_len or memory
 * runs out. */
int mt_regions_plan(mt_range *r, size_t n, size_t page, size_t max_len, mt_region **out, int *n_out,
                    mw_err *err);

#endif
