/* tests/unit/test_co_cors.c — the CORS policy (co_cors): parsing --cors-origins (*, localhost,
 * none, lists; malformed entries refused by name), which origins each allows (look-alike hosts,
 * ports and schemes included), the header lines of answers and preflights, and that nothing a
 * client sends reaches a header line unless it matched the policy and is plain. */
#include "tests/support/mw_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/co_cors.h"

static co_cors *make(const char *spec) {
    co_cors *c = NULL;
    mw_err err;
    if (co_cors_new(spec, &c, &err)) fail_msg("%s: %s", spec ? spec : "(null)", err.msg);
    return c;
}

static void refused(const char *spec, const char *needle) {
    co_cors *c = NULL;
    mw_err err;
    assert_int_not_equal(co_cors_new(spec, &c, &err), 0);
    assert_null(c);
    if (!strstr(err.msg, needle)) fail_msg("'%s' not in '%s'", needle, err.msg);
}

static void test_parse(void **st) {
    (void)st;
    co_cors_free(make(NULL));
    co_cors_free(make("*"));
    co_cors_free(make("localhost"));
    co_cors_free(make("none"));
    co_cors_free(make("https://a.example"));
    co_cors_free(make(" https://a.example/ ,http://127.0.0.1:3000,http://[::1]:8080"));
    refused("ftp://a.example", "'ftp://a.example'");
    refused("https://a.example/path", "'https://a.example/path'");
    refused("https://", "not an origin");
    refused("https://a.example:", "not an origin");
    refused("https://a.example:123456", "not an origin");
    refused("https://a b", "not an origin");
    refused("https://a.example,,https://b.example", "''");
    refused(",", "not an origin");
    refused("", "no origin");
    char many[70 * 24] = "";
    for (int i = 0; i < 70; i++) {
        char one[32];
        snprintf(one, sizeof one, "%shttp://h%d.example", i ? "," : "", i);
        strcat(many, one);
    }
    refused(many, "more than");
}

static void test_allowed(void **st) {
    (void)st;
    co_cors *any = make("*"), *none = make("none"), *local = make("localhost"),
            *list = make("https://chat.example.com, http://127.0.0.1:3000");
    assert_true(co_cors_allowed(any, "http://anything.example"));
    assert_false(co_cors_allowed(any, ""));
    assert_false(co_cors_allowed(none, "http://anything.example"));
    assert_true(co_cors_allowed(local, "http://localhost:5173"));
    assert_true(co_cors_allowed(local, "https://127.0.0.1"));
    assert_true(co_cors_allowed(local, "http://[::1]:8000"));
    assert_false(co_cors_allowed(local, "http://localhost.evil.example"));
    assert_false(co_cors_allowed(local, "http://evil.example/localhost"));
    assert_false(co_cors_allowed(local, "http://127.0.0.1.evil.example"));
    assert_false(co_cors_allowed(local, "null"));
    assert_true(co_cors_allowed(list, "https://chat.example.com"));
    assert_true(co_cors_allowed(list, "HTTPS://CHAT.EXAMPLE.COM"));
    assert_true(co_cors_allowed(list, "http://127.0.0.1:3000"));
    assert_false(co_cors_allowed(list, "http://chat.example.com")); /* another scheme */
    assert_false(co_cors_allowed(list, "https://chat.example.com:8443"));
    assert_false(co_cors_allowed(list, "http://127.0.0.1:30000"));
    assert_false(co_cors_allowed(list, "https://evil.chat.example.com"));
    assert_false(co_cors_allowed(NULL, "https://chat.example.com"));
    co_cors_free(any);
    co_cors_free(none);
    co_cors_free(local);
    co_cors_free(list);
}

static void test_headers(void **st) {
    (void)st;
    co_cors *any = make("*"), *none = make("none"), *local = make("localhost"),
            *list = make("https://chat.example.com");
    char b[512];
    const size_t n = co_cors_headers(any, "http://x.example", b, sizeof b);
    assert_int_equal(n, strlen(b));
    assert_string_equal(b, "Access-Control-Allow-Origin: *\r\n");
    co_cors_headers(any, "", b, sizeof b); /* not a browser page: nothing to say */
    assert_string_equal(b, "");
    co_cors_headers(none, "http://x.example", b, sizeof b);
    assert_string_equal(b, "");
    co_cors_headers(list, "https://chat.example.com", b, sizeof b);
    assert_string_equal(
        b, "Access-Control-Allow-Origin: https://chat.example.com\r\nVary: Origin\r\n");
    co_cors_headers(list, "https://other.example", b, sizeof b); /* refused, still varies */
    assert_string_equal(b, "Vary: Origin\r\n");
    co_cors_headers(list, "", b, sizeof b);
    assert_string_equal(b, "Vary: Origin\r\n");
    /* an origin carrying a header line never gets echoed */
    co_cors_headers(local, "http://localhost\r\nSet-Cookie: a=b", b, sizeof b);
    assert_null(strstr(b, "Set-Cookie"));
    assert_null(strstr(b, "Allow-Origin"));
    /* a buffer too small for a line gets no partial line */
    char tiny[20];
    co_cors_headers(list, "https://chat.example.com", tiny, sizeof tiny);
    assert_string_equal(tiny, "");
    co_cors_free(any);
    co_cors_free(none);
    co_cors_free(local);
    co_cors_free(list);
}

static void test_preflight(void **st) {
    (void)st;
    char b[2048];
    co_cors_preflight_headers("POST, OPTIONS", "authorization, content-type, x-stainless-os", b,
                              sizeof b);
    assert_string_equal(b, "Access-Control-Allow-Methods: POST, OPTIONS\r\n"
                           "Access-Control-Allow-Headers: authorization, content-type, "
                           "x-stainless-os\r\nAccess-Control-Max-Age: 600\r\n");
    const char *fallback = "Access-Control-Allow-Headers: Authorization, Content-Type";
    co_cors_preflight_headers("GET, HEAD, OPTIONS", NULL, b, sizeof b);
    assert_non_null(strstr(b, fallback));
    co_cors_preflight_headers("POST", "x-a\r\nSet-Cookie: a=b", b, sizeof b);
    assert_non_null(strstr(b, fallback));
    assert_null(strstr(b, "Set-Cookie"));
    co_cors_preflight_headers("POST", "x-a; <b>", b, sizeof b);
    assert_non_null(strstr(b, fallback));
    char longlist[700];
    memset(longlist, 'a', sizeof longlist - 1);
    longlist[sizeof longlist - 1] = 0;
    co_cors_preflight_headers("POST", longlist, b, sizeof b);
    assert_non_null(strstr(b, fallback));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_allowed),
        cmocka_unit_test(test_headers),
        cmocka_unit_test(test_preflight),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
