/* tests/unit/test_co_auth.c — API keys (co_auth): where they come from (an option, a file, the
 * environment only when neither is given), what a key may be, key files (comments, blanks, CRLF,
 * too many keys, too large, empty), and which Authorization values pass. */
#include "tests/support/mw_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/co_auth.h"

static char *dir;

static int setup(void **st) {
    (void)st;
    dir = mwt_tmpdir("auth");
    return dir ? 0 : -1;
}

static int teardown(void **st) {
    (void)st;
    mwt_rmrf(dir);
    free(dir);
    return 0;
}

static const char *file_with(const char *name, const char *text) {
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    assert_int_equal(mwt_write_file(path, text, strlen(text)), 0);
    return path;
}

static co_auth *make(const char *key, const char *file, const char *env) {
    co_auth *a = NULL;
    mw_err err;
    if (co_auth_new(key, file, env, &a, &err)) fail_msg("%s", err.msg);
    return a;
}

static void refused(const char *key, const char *file, const char *env, const char *needle) {
    co_auth *a = NULL;
    mw_err err;
    assert_int_not_equal(co_auth_new(key, file, env, &a, &err), 0);
    assert_null(a);
    if (!strstr(err.msg, needle)) fail_msg("'%s' not in '%s'", needle, err.msg);
}

static void test_sources(void **st) {
    (void)st;
    assert_null(make(NULL, NULL, NULL)); /* no key: the API is open */
    assert_null(make(NULL, NULL, ""));
    assert_true(co_auth_ok(NULL, ""));
    co_auth *a = make(NULL, NULL, "sk-env");
    assert_int_equal(co_auth_count(a), 1);
    assert_true(co_auth_ok(a, "Bearer sk-env"));
    co_auth_free(a);
    /* an option or a file: the environment is not used */
    a = make("sk-opt", NULL, "sk-env");
    assert_true(co_auth_ok(a, "Bearer sk-opt"));
    assert_false(co_auth_ok(a, "Bearer sk-env"));
    co_auth_free(a);
    const char *f = file_with("k1", "# keys\r\n\r\n  sk-one  \r\nsk-two\n#sk-commented\n");
    a = make("sk-opt", f, "sk-env");
    assert_int_equal(co_auth_count(a), 3);
    assert_true(co_auth_ok(a, "Bearer sk-one"));
    assert_true(co_auth_ok(a, "Bearer sk-two"));
    assert_true(co_auth_ok(a, "Bearer sk-opt"));
    assert_false(co_auth_ok(a, "Bearer #sk-commented"));
    assert_false(co_auth_ok(a, "Bearer sk-env"));
    co_auth_free(a);
}

static void test_bad_keys(void **st) {
    (void)st;
    mw_err err;
    assert_int_equal(co_auth_key_check("sk-~!@#$%^&*()_+", "k", &err), 0);
    refused("", NULL, NULL, "1 to 256");
    refused("sk two", NULL, NULL, "without blanks");
    refused("sk\x01", NULL, NULL, "visible ASCII");
    refused("sk-\xc3\xa9", NULL, NULL, "visible ASCII");
    char longkey[300];
    memset(longkey, 'k', sizeof longkey - 1);
    longkey[sizeof longkey - 1] = 0;
    refused(longkey, NULL, NULL, "1 to 256");
    refused(NULL, NULL, "bad key", "$MOEWIRE_API_KEY");
    refused(NULL, "/nonexistent/keys", NULL, "/nonexistent/keys");
    refused(NULL, file_with("empty", "# nothing\n\n"), NULL, "no key in it");
    refused(NULL, file_with("blank", "sk-a\nsk b\n"), NULL, "line 2");
    char *many = malloc(70 * 16);
    many[0] = 0;
    for (int i = 0; i < 70; i++) sprintf(many + strlen(many), "sk-key-%d\n", i);
    refused(NULL, file_with("many", many), NULL, "more than 64 keys");
    free(many);
    char *big = malloc(70 * 1024 + 1);
    memset(big, '#', 70 * 1024);
    big[70 * 1024] = 0;
    refused(NULL, file_with("big", big), NULL, "larger than 64 KiB");
    free(big);
}

static void test_presented(void **st) {
    (void)st;
    co_auth *a = make("sk-secret", NULL, NULL);
    assert_true(co_auth_ok(a, "Bearer sk-secret"));
    assert_true(co_auth_ok(a, "bearer sk-secret"));
    assert_true(co_auth_ok(a, "Bearer   sk-secret  "));
    assert_false(co_auth_ok(a, ""));
    assert_false(co_auth_ok(a, NULL));
    assert_false(co_auth_ok(a, "Bearer "));
    assert_false(co_auth_ok(a, "sk-secret"));
    assert_false(co_auth_ok(a, "Basic sk-secret"));
    assert_false(co_auth_ok(a, "Bearer sk-secre"));
    assert_false(co_auth_ok(a, "Bearer sk-secretx"));
    assert_false(co_auth_ok(a, "Bearer SK-SECRET"));
    co_auth_free(a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sources),
        cmocka_unit_test(test_bad_keys),
        cmocka_unit_test(test_presented),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
