/* tests/unit/test_vx_expert_set.c — parsing of (layer, expert) sets: ranges, lists, "all", JSON
 * shard files, out-of-range and malformed specs, and the canonical text form. */
#include "tests/support/mw_test.h"
#include "vindex/vx_source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void parse_ok(const char *spec, int L, int E, vx_expert_set *s) {
    mw_err err;
    if (vx_expert_set_parse(spec, L, E, s, &err)) fail_msg("'%s': %s", spec, err.msg);
}

static void parse_bad(const char *spec, int L, int E, const char *fault) {
    vx_expert_set s;
    mw_err err = {{0}};
    if (vx_expert_set_parse(spec, L, E, &s, &err) == 0) {
        vx_expert_set_free(&s);
        fail_msg("'%s' parsed, expected an error with '%s'", spec, fault);
    }
    if (!strstr(err.msg, fault)) fail_msg("'%s': error '%s' lacks '%s'", spec, err.msg, fault);
}

static void test_ranges_and_lists(void **state) {
    (void)state;
    vx_expert_set s;
    parse_ok("all", 24, 32, &s);
    assert_int_equal(vx_expert_set_count(&s), 24 * 32);
    vx_expert_set_free(&s);

    parse_ok("0-23:0-15", 24, 32, &s);
    assert_int_equal(vx_expert_set_count(&s), 24 * 16);
    assert_true(vx_expert_set_has(&s, 23, 15));
    assert_false(vx_expert_set_has(&s, 0, 16));
    assert_false(vx_expert_set_has(&s, 24, 0)); /* out of range reads as absent */
    vx_expert_set_free(&s);

    parse_ok(" 0-1 : 3 , 2:* ,5:31", 6, 32, &s);
    assert_true(vx_expert_set_has(&s, 0, 3));
    assert_true(vx_expert_set_has(&s, 1, 3));
    assert_false(vx_expert_set_has(&s, 1, 4));
    for (int e = 0; e < 32; e++) assert_true(vx_expert_set_has(&s, 2, e));
    assert_true(vx_expert_set_has(&s, 5, 31));
    assert_int_equal(vx_expert_set_count(&s), 2 + 32 + 1);
    vx_expert_set_free(&s);

    parse_ok("*:7", 3, 8, &s);
    assert_int_equal(vx_expert_set_count(&s), 3);
    vx_expert_set_free(&s);
}

static void test_errors(void **state) {
    (void)state;
    parse_bad("24:0", 24, 32, "layer 24 out of range (the model has 24 layers)");
    parse_bad("0:32", 24, 32, "expert 32 out of range (the model has 32 experts)");
    parse_bad("0-30:0", 24, 32, "layer 30 out of range");
    parse_bad("3-1:0", 24, 32, "reversed");
    parse_bad("abc", 24, 32, "needs LAYERS:EXPERTS");
    parse_bad("0", 24, 32, "needs LAYERS:EXPERTS");
    parse_bad("", 24, 32, "empty");
    parse_bad("0:1-", 24, 32, "bad expert range '1-'");
    parse_bad("0:-1", 24, 32, "bad expert range");
    parse_bad("99999999999:0", 24, 32, "bad layer range");
    parse_bad("0:1,,2:3", 24, 32, "needs LAYERS:EXPERTS");
    parse_bad("0:*", 24, 0, "no experts");
}

static void write_json(const char *name, const char *text, char *path, size_t n) {
    snprintf(path, n, "%s/%s", mwt_tmp, name);
    assert_int_equal(mwt_write_file(path, text, strlen(text)), 0);
}

static void test_json_shard_files(void **state) {
    (void)state;
    char path[512], arg[520];
    vx_expert_set s;
    write_json("shard.json", "{\"experts\": {\"0\": [0, 1, \"4-5\"], \"2-3\": \"6-7\"}}", path,
               sizeof path);
    parse_ok(path, 4, 8, &s);
    assert_int_equal(vx_expert_set_count(&s), 4 + 2 * 2);
    assert_true(vx_expert_set_has(&s, 0, 5));
    assert_true(vx_expert_set_has(&s, 3, 7));
    assert_false(vx_expert_set_has(&s, 1, 0));
    vx_expert_set_free(&s);

    write_json("spec.txt", "{\"spec\": \"1:2,3:0-1\"}", path, sizeof path);
    snprintf(arg, sizeof arg, "@%s", path);
    parse_ok(arg, 4, 8, &s);
    assert_int_equal(vx_expert_set_count(&s), 3);
    vx_expert_set_free(&s);

    write_json("all.json", "{\"spec\": \"all\"}", path, sizeof path);
    parse_ok(path, 4, 8, &s);
    assert_int_equal(vx_expert_set_count(&s), 32);
    vx_expert_set_free(&s);

    static const struct {
        const char *name, *text, *fault;
    } bad[] = {
        {"bad.json", "{\"experts\": {\"0\": [0, 1", "bad JSON"},
        {"range.json", "{\"experts\": {\"0\": [8]}}", "expert 8 out of range"},
        {"layer.json", "{\"experts\": {\"4\": [0]}}", "layer 4 out of range"},
        {"neg.json", "{\"experts\": {\"0\": [-1]}}", "expert -1 out of range"},
        {"type.json", "{\"experts\": {\"0\": [1.5]}}", "numbers or range strings"},
        {"arr.json", "[1, 2]", "expected"},
        {"both.json", "{\"spec\": \"all\", \"experts\": {}}", "expected"},
        {"dup.json", "{\"experts\": {\"0\": [1], \"0\": [2]}}", "bad JSON"},
        /* found by fuzz_shard: an empty set, whose canonical text "" does not parse */
        {"none.json", "{\"experts\": {}}", "names no experts"},
        {"empty.json", "{\"experts\": {\"0-3\": []}}", "names no experts"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_json(bad[i].name, bad[i].text, path, sizeof path);
        parse_bad(path, 4, 8, bad[i].fault);
    }
    parse_bad("@/nonexistent/shard.json", 4, 8, "/nonexistent/shard.json");
}

static void test_canonical_text(void **state) {
    (void)state;
    static const struct {
        const char *in, *out;
        int L, E;
    } cases[] = {
        {"all", "0-3:0-7", 4, 8},
        {"2:1,0-1:3,2:*", "0-1:3,2:0-7", 3, 8},
        {"0:0,0:2,1:0,1:2,3:5", "0-1:0,0-1:2,3:5", 4, 8},
        {"0:0-1,0:2-3", "0:0-3", 2, 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        vx_expert_set s, t;
        parse_ok(cases[i].in, cases[i].L, cases[i].E, &s);
        char *txt = vx_expert_set_format(&s);
        assert_string_equal(txt, cases[i].out);
        parse_ok(txt, cases[i].L, cases[i].E, &t);
        assert_memory_equal(s.bits, t.bits, (size_t)(cases[i].L * cases[i].E + 7) / 8);
        free(txt);
        vx_expert_set_free(&s);
        vx_expert_set_free(&t);
    }
    vx_expert_set s;
    assert_int_equal(vx_expert_set_init(&s, 3, 4, false), 0);
    char *txt = vx_expert_set_format(&s);
    assert_string_equal(txt, "");
    free(txt);
    vx_expert_set_put(&s, 1, 2, true);
    vx_expert_set_put(&s, 1, 3, true);
    vx_expert_set_put(&s, 1, 3, false);
    assert_int_equal(vx_expert_set_count(&s), 1);
    vx_expert_set_free(&s);
    assert_int_equal(vx_expert_set_init(&s, -1, 4, false), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ranges_and_lists),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_json_shard_files),
        cmocka_unit_test(test_canonical_text),
    };
    return cmocka_run_group_tests_name("vx_expert_set", tests, mwt_tmp_setup, mwt_tmp_teardown);
}
