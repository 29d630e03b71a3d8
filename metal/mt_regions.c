/* metal/mt_regions.c — page-aligned regions over the weights (mt_regions.h): ranges sorted by
 * their first page, each merged into the region before it when its pages touch that region's and
 * the union stays within the longest buffer, else starting a region of its own. */
#include "metal/mt_regions.h"

#include <stdlib.h>

static int cmp_start(const void *a, const void *b) {
    const uintptr_t x = (uintptr_t)(*(const mt_range *const *)a)->p;
    const uintptr_t y = (uintptr_t)(*(const mt_range *const *)b)->p;
    return (x > y) - (x < y);
}

/* -1 with err when range len (already merged or not) cannot be covered. */
static int bad_range(size_t len, size_t max_len, mw_err *err) {
    if (!len) return mw_errf(err, "regions: an empty range");
    return mw_errf(err,
                   "a matrix of %zu bytes spans more than the device's largest buffer (%zu bytes)",
                   len, max_len);
}

int mt_regions_plan(mt_range *r, size_t n, size_t page, size_t max_len, mt_region **out, int *n_out,
                    mw_err *err) {
    *out = NULL;
    *n_out = 0;
    if (!page || (page & (page - 1)) || max_len < page)
        return mw_errf(err, "regions: bad page size %zu or buffer limit %zu", page, max_len);
    mt_range **by = n ? malloc(n * sizeof *by) : NULL;
    mt_region *reg = n ? malloc(n * sizeof *reg) : NULL;
    int k = -1, rc = -1;
    if (n && (!by || !reg)) {
        mw_errf(err, "regions: out of memory for %zu ranges", n);
        goto done;
    }
    for (size_t i = 0; i < n; i++) by[i] = &r[i];
    if (n) qsort(by, n, sizeof *by, cmp_start);
    uintptr_t lo = 0, hi = 0; /* the current region, [lo, hi) */
    for (size_t i = 0; i < n; i++) {
        const uintptr_t a = (uintptr_t)by[i]->p & ~(uintptr_t)(page - 1);
        const uintptr_t end = (uintptr_t)by[i]->p + by[i]->len;
        const uintptr_t b = (end + page - 1) & ~(uintptr_t)(page - 1);
        if (!by[i]->len || end < a || b < end || b - a > max_len) {
            bad_range(by[i]->len, max_len, err);
            goto done;
        }
        if (k < 0 || a > hi || (b > hi ? b : hi) - lo > max_len) {
            reg[++k] = (mt_region){(const void *)a, 0};
            lo = a;
            hi = b;
        } else if (b > hi) {
            hi = b;
        }
        reg[k].len = hi - lo;
        by[i]->region = k;
        by[i]->off = (uintptr_t)by[i]->p - lo;
    }
    rc = 0;
done:
    free(by);
    if (rc) {
        free(reg);
        return -1;
    }
    *out = reg;
    *n_out = k + 1;
    return 0;
}
