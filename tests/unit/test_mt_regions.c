/* tests/unit/test_mt_regions.c — the page-aligned regions a Metal backend wraps (metal/
 * mt_regions.c): every range lies inside its region at its offset, regions are page-aligned and
 * within the buffer limit, touching ranges share a region, distant ones do not, and what cannot
 * be covered is refused. Addresses only: nothing is read. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "metal/mt_regions.h"
#include "tests/support/mw_test.h"

#define PAGE ((size_t)16384)

static const void *at(uintptr_t a) {
    return (const void *)a;
}

/* Checks the invariants of a plan. */
static void check_plan(const mt_range *r, size_t n, const mt_region *reg, int n_reg,
                       size_t max_len) {
    for (int k = 0; k < n_reg; k++) {
        assert_int_equal((uintptr_t)reg[k].base % PAGE, 0);
        assert_int_equal(reg[k].len % PAGE, 0);
        assert_true(reg[k].len <= max_len && reg[k].len > 0);
    }
    for (size_t i = 0; i < n; i++) {
        assert_true(r[i].region >= 0 && r[i].region < n_reg);
        const mt_region *g = &reg[r[i].region];
        assert_ptr_equal((const uint8_t *)g->base + r[i].off, r[i].p);
        assert_true(r[i].off + r[i].len <= g->len);
    }
}

static void test_merges_touching_pages(void **state) {
    (void)state;
    const uintptr_t base = (uintptr_t)1 << 32;
    mt_range r[] = {
        {.p = at(base + 3 * PAGE + 100), .len = 5000}, /* listed out of order */
        {.p = at(base + 64), .len = PAGE},             /* pages 0-1 */
        {.p = at(base + PAGE + 200), .len = 2 * PAGE}, /* pages 1-3: touches */
        {.p = at(base + 40 * PAGE), .len = 10},        /* far: its own region */
        {.p = at(base + 40 * PAGE + 8), .len = 2},     /* inside the last one */
    };
    mt_region *reg;
    int n;
    mw_err err;
    assert_int_equal(mt_regions_plan(r, 5, PAGE, (size_t)1 << 30, &reg, &n, &err), 0);
    assert_int_equal(n, 2);
    assert_int_equal(r[0].region, r[1].region);
    assert_int_equal(r[2].region, r[1].region);
    assert_int_equal(r[3].region, r[4].region);
    assert_true(r[3].region != r[0].region);
    assert_int_equal(reg[r[0].region].len, 4 * PAGE);
    check_plan(r, 5, reg, n, (size_t)1 << 30);
    free(reg);
}

static void test_buffer_limit(void **state) {
    (void)state;
    enum { N = 50 };
    mt_range r[N];
    uint64_t s = 99;
    for (int i = 0; i < N; i++) { /* back to back, random lengths of up to 3 pages */
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        r[i].len = 1 + (size_t)(s >> 33) % (3 * PAGE);
        r[i].p = at(((uintptr_t)1 << 33) +
                    (i ? (uintptr_t)r[i - 1].p - ((uintptr_t)1 << 33) + r[i - 1].len : 0));
    }
    mt_region *reg;
    int n;
    mw_err err;
    assert_int_equal(mt_regions_plan(r, N, PAGE, 8 * PAGE, &reg, &n, &err), 0);
    assert_true(n > 1); /* ~75 pages cannot fit one region of 8 */
    check_plan(r, N, reg, n, 8 * PAGE);
    free(reg);
    /* a range longer than the limit is refused, named by its size */
    mt_range big = {.p = at((uintptr_t)1 << 33), .len = 9 * PAGE};
    assert_int_equal(mt_regions_plan(&big, 1, PAGE, 8 * PAGE, &reg, &n, &err), -1);
    assert_non_null(strstr(err.msg, "largest buffer"));
    mt_range empty = {.p = at(4096), .len = 0};
    assert_int_equal(mt_regions_plan(&empty, 1, PAGE, 8 * PAGE, &reg, &n, &err), -1);
    assert_int_equal(mt_regions_plan(r, 1, 3000, 8 * PAGE, &reg, &n, &err), -1); /* not 2^k */
    assert_int_equal(mt_regions_plan(NULL, 0, PAGE, 8 * PAGE, &reg, &n, &err), 0);
    assert_int_equal(n, 0);
    free(reg);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merges_touching_pages),
        cmocka_unit_test(test_buffer_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
