/* tests/unit/test_vx_meta.c — the metadata table: typed getters and their conversions, type
 * errors that name the key, replacement keeping order, arrays and copies. */
#include "tests/support/mw_test.h"
#include "vindex/vx_meta.h"

#include <string.h>

static void test_getters_convert_and_refuse(void **state) {
    (void)state;
    vx_meta *m = vx_meta_new();
    mw_err err;
    assert_int_equal(vx_meta_set_u32(m, "a.u32", 4000000000u), 0);
    assert_int_equal(vx_meta_set_f32(m, "a.f32", 0.1f), 0);
    assert_int_equal(vx_meta_set_str(m, "a.str", "yarn", 4), 0);
    assert_int_equal(vx_meta_set_bool(m, "a.bool", false), 0);
    uint8_t u8 = 200;
    assert_int_equal(vx_meta_set_scalar(m, "a.u8", VX_U8, &u8), 0);
    assert_int_equal(vx_meta_set_scalar(m, "a.arr", VX_ARR, &u8), -1);
    int64_t i;
    double d;
    bool b;
    const char *s;
    assert_int_equal(vx_meta_get_i64(m, "a.u32", &i, &err), 1);
    assert_int_equal(i, 4000000000ll);
    assert_int_equal(vx_meta_get_i64(m, "a.u8", &i, &err), 1);
    assert_int_equal(i, 200);
    assert_int_equal(vx_meta_get_f64(m, "a.u32", &d, &err), 1);
    assert_true(d == 4e9);
    assert_int_equal(vx_meta_get_f64(m, "a.f32", &d, &err), 1);
    assert_true(d == (double)0.1f);
    assert_int_equal(vx_meta_get_i64(m, "a.f32", &i, &err), -1);
    assert_string_equal(err.msg, "metadata key 'a.f32' has type f32, expected an integer");
    assert_int_equal(vx_meta_get_bool(m, "a.u8", &b, &err), -1);
    assert_non_null(strstr(err.msg, "'a.u8'"));
    assert_int_equal(vx_meta_get_str(m, "a.bool", &s, &err), -1);
    assert_int_equal(vx_meta_get_str(m, "missing", &s, &err), 0);
    assert_int_equal(vx_meta_get_str(m, "a.str", &s, &err), 1);
    assert_string_equal(s, "yarn");
    /* replacing keeps the position */
    assert_int_equal(vx_meta_set_str(m, "a.u32", "now a string", 12), 0);
    assert_int_equal(vx_meta_count(m), 5);
    assert_string_equal(vx_meta_key(m, 0), "a.u32");
    assert_int_equal(vx_meta_type(m, 0), VX_STR);
    assert_int_equal(vx_meta_find(m, "a.str"), 2);
    assert_int_equal(vx_meta_find(m, "nope"), -1);
    vx_meta_free(m);
}

static void test_arrays_and_copy(void **state) {
    (void)state;
    vx_meta *m = vx_meta_new(), *c = vx_meta_new();
    mw_err err;
    const float f[3] = {1.5f, -2.0f, 3.25f};
    assert_int_equal(vx_meta_set_arr(m, "x.f", VX_F32, f, 3), 0);
    const char *strs[] = {"he\0llo", "w"};
    const size_t lens[] = {6, 1};
    assert_int_equal(vx_meta_set_arr_str(m, "x.s", strs, lens, 2), 0);
    const bool bs[2] = {true, false};
    assert_int_equal(vx_meta_set_arr(m, "x.b", VX_BOOL, bs, 2), 0);
    double d;
    int64_t i;
    const char *s;
    size_t len;
    assert_int_equal(vx_meta_arr_f64(m, "x.f", 2, &d, &err), 1);
    assert_true(d == 3.25);
    assert_int_equal(vx_meta_arr_i64(m, "x.f", 0, &i, &err), -1);
    assert_non_null(strstr(err.msg, "array of f32"));
    assert_int_equal(vx_meta_arr_i64(m, "x.b", 0, &i, &err), 1);
    assert_int_equal(i, 1);
    assert_int_equal(vx_meta_arr_str(m, "x.s", 0, &s, &len, &err), 1);
    assert_int_equal(len, 6); /* embedded NUL kept */
    assert_memory_equal(s, "he\0llo", 6);
    assert_int_equal(vx_meta_arr_str(m, "x.s", 2, &s, &len, &err), -1);
    assert_non_null(strstr(err.msg, "index 2 out of range"));
    assert_int_equal(vx_meta_arr_str(m, "x.f", 0, &s, &len, &err), -1);
    assert_int_equal(vx_meta_arr_f64(m, "nope", 0, &d, &err), 0);
    long at = vx_meta_find(m, "x.f");
    assert_memory_equal(vx_meta_arr_raw(m, (size_t)at), f, sizeof f);
    assert_null(vx_meta_arr_raw(m, (size_t)vx_meta_find(m, "x.s")));
    for (size_t k = 0; k < vx_meta_count(m); k++) assert_int_equal(vx_meta_copy_entry(c, m, k), 0);
    vx_meta_free(m);
    assert_int_equal(vx_meta_arr_str(c, "x.s", 1, &s, &len, &err), 1);
    assert_string_equal(s, "w");
    assert_int_equal(vx_meta_arr_len(c, (size_t)vx_meta_find(c, "x.f")), 3);
    assert_int_equal(vx_meta_arr_type(c, (size_t)vx_meta_find(c, "x.b")), VX_BOOL);
    vx_meta_free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_getters_convert_and_refuse),
        cmocka_unit_test(test_arrays_and_copy),
    };
    return cmocka_run_group_tests_name("vx_meta", tests, NULL, NULL);
}
