/* tests/unit/test_vx_topology.c — the topology file: the example topologies of deploy/ load, and
 * every malformed piece (an unknown key, a bad name, endpoint, number, platform or key, a host
 * beyond this machine without a key, names used twice, a host without a link, a bad replication
 * policy) is refused with a message naming it. */
#include "tests/support/mw_test.h"
#include "vindex/vx_topology.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *write_topo(const char *text) {
    static char path[4200];
    snprintf(path, sizeof path, "%s/t.json", mwt_tmp);
    assert_int_equal(mwt_write_file(path, text, strlen(text)), 0);
    return path;
}

#define KEY "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
#define HOST(name, ep, extra)                                                                      \
    "{\"name\":\"" name "\",\"endpoint\":\"" ep "\",\"memory_gib\":4,\"read_gbs\":20,"             \
    "\"cores\":2,\"platform\":\"linux-x86_64\"" extra "}"
#define DOC(hosts, rest)                                                                           \
    "{\"format\":\"moewire-topology\",\"version\":1,\"name\":\"t\",\"model\":{\"path\":\"m\"},"    \
    "\"hosts\":[" hosts "],\"coordinators\":[{\"name\":\"c\",\"address\":\"127.0.0.1\","           \
    "\"listen\":\"127.0.0.1:8080\"}]" rest "}"
#define H1    HOST("a", "tcp://127.0.0.1:5000", "")
#define LINKS ",\"links\":[{\"from\":\"*\",\"to\":\"*\",\"rtt_us\":50,\"gbit\":10}]"

static void load_ok(const char *text, vx_topology *t) {
    mw_err err;
    if (vx_topology_load(write_topo(text), t, &err)) fail_msg("%s", err.msg);
}

static void load_bad(const char *text, const char *fault) {
    vx_topology t;
    mw_err err = {{0}};
    if (vx_topology_load(write_topo(text), &t, &err) == 0) {
        vx_topology_free(&t);
        fail_msg("loaded, expected '%s': %s", fault, text);
    }
    if (!strstr(err.msg, fault)) fail_msg("error '%s' lacks '%s'", err.msg, fault);
}

static void test_examples_load(void **state) {
    (void)state;
    const char *files[] = {"deploy/topologies/loopback.json", "deploy/topologies/lab-8.json"};
    for (int i = 0; i < 2; i++) {
        vx_topology t;
        mw_err err;
        if (vx_topology_load(mwt_repo_path(files[i]), &t, &err)) fail_msg("%s", err.msg);
        assert_true(t.n_hosts >= 4);
        assert_int_equal(strlen(t.sha256), 64);
        vx_topology_free(&t);
    }
}

static void test_defaults_and_links(void **state) {
    (void)state;
    vx_topology t;
    load_ok(DOC(HOST("a", "tcp://127.0.0.1:5000", "") "," HOST("b", "tcp://10.0.0.2:5000",
                                                               ",\"curve_public_key\":\"" KEY "\""),
                ",\"links\":[{\"from\":\"*\",\"to\":\"*\",\"rtt_us\":50,\"gbit\":10},"
                "{\"from\":\"b\",\"to\":\"c\",\"rtt_us\":400,\"gbit\":1}]"),
            &t);
    assert_int_equal(t.n_hosts, 2);
    assert_true(t.hosts[0].link.rtt_us == 50);
    assert_true(t.hosts[1].link.rtt_us == 400); /* the named pair beats the wildcard */
    assert_true(t.hosts[0].memory_bytes == 4.0 * (1 << 30));
    assert_string_equal(t.wire, "f16");
    assert_string_equal(t.hosts[1].vindex, "m"); /* model.path when the host names none */
    assert_int_equal(t.min_owners, 1);
    assert_int_equal(t.max_owners, 2);
    assert_true(vx_topo_is_local(&t.hosts[0]));
    assert_false(vx_topo_is_local(&t.hosts[1]));
    vx_topology_free(&t);
}

static void test_malformed_is_refused(void **state) {
    (void)state;
    load_bad("{\"format\":\"x\",\"version\":1}", "not a moewire topology");
    load_bad(DOC("{\"name\":\"a\"}", LINKS), "\"endpoint\"");
    load_bad(DOC(HOST("a", "tcp://127.0.0.1:5000", ",\"memroy_gib\":1"), LINKS),
             "unknown key \"memroy_gib\"");
    load_bad(DOC(HOST("a/b", "tcp://127.0.0.1:5000", ""), LINKS), "\"name\" must be");
    load_bad(DOC(HOST("a", "tcp://127.0.0.1", ""), LINKS), "tcp://HOST:PORT");
    load_bad(DOC(HOST("a", "tcp://127.0.0.1:5000,tcp://x:1", ""), LINKS), "tcp://HOST:PORT");
    load_bad(DOC(HOST("a", "tcp://10.0.0.1:5000", ""), LINKS), "needs a \"curve_public_key\"");
    load_bad(DOC(HOST("a", "tcp://10.0.0.1:5000", ",\"curve_public_key\":\"short\""), LINKS),
             "40-character Z85");
    load_bad(DOC("{\"name\":\"a\",\"endpoint\":\"tcp://127.0.0.1:1\",\"memory_gib\":-1,"
                 "\"read_gbs\":1,\"cores\":1,\"platform\":\"linux-x86_64\"}",
                 LINKS),
             "\"memory_gib\" must be");
    load_bad(DOC("{\"name\":\"a\",\"endpoint\":\"tcp://127.0.0.1:1\",\"memory_gib\":1,"
                 "\"read_gbs\":1,\"cores\":1,\"platform\":\"windows\"}",
                 LINKS),
             "platform 'windows' is not one of");
    load_bad(DOC("{\"name\":\"a\",\"endpoint\":\"tcp://127.0.0.1:1\",\"memory_gib\":1,"
                 "\"read_gbs\":1,\"cores\":1.5,\"platform\":\"linux-x86_64\"}",
                 LINKS),
             "\"cores\" must be an integer");
    load_bad(DOC(HOST("c", "tcp://127.0.0.1:5000", ""), LINKS), "used twice");
    load_bad(
        DOC(HOST("a", "tcp://127.0.0.1:5000", "") "," HOST("b", "tcp://127.0.0.1:5000", ""), LINKS),
        "share the endpoint");
    load_bad(DOC(H1, ",\"links\":[]"), "no link between coordinator c and host a");
    load_bad(DOC(H1, ",\"links\":[{\"from\":\"zz\",\"to\":\"*\",\"rtt_us\":1,\"gbit\":1}]"),
             "must name hosts or coordinators");
    load_bad(DOC(H1, LINKS ",\"replication\":{\"min_owners\":2}"), "replication");
    load_bad(DOC(H1, LINKS ",\"replication\":{\"replica_memory\":1.5}"), "replication");
    load_bad(DOC(H1, LINKS ",\"extra\":1"), "unknown key \"extra\"");
    load_bad("{\"format\":", "not valid JSON");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_examples_load),
        cmocka_unit_test(test_defaults_and_links),
        cmocka_unit_test(test_malformed_is_refused),
    };
    return cmocka_run_group_tests(tests, mwt_tmp_setup, mwt_tmp_teardown);
}
