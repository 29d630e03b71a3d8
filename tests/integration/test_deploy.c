/* tests/integration/test_deploy.c — deploy/: the systemd units pass `systemd-analyze verify`
 * (skipped, saying so, where systemd-analyze is missing), the launchd plist is a valid property
 * list once filled in, `deploy/moewire up` starts a planned loopback fleet that serves, `status`
 * shows it, `drain` takes a host out while the others serve its experts, `down` stops every
 * process it started, and `units` prints each real host's unit or plist. */
#include "tests/support/mw_test.h"
#include "tests/support/mwt_cli.h"
#include "tests/support/mwt_http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *dir;
static char model[4200];

static int run(char *const *argv, char **out, char **err) {
    return mwt_run_shown(argv, out, err, 300000);
}

static int setup(void **state) {
    if (mwt_tmp_setup(state)) return -1;
    dir = mwt_tmp;
    snprintf(model, sizeof model, "%s/m.vindex", dir);
    mwt_gpt_oss shape = {
        .layers = 2, .hidden = 256, .experts = 8, .top_k = 2, .expert_ff = 128, .seed = 9};
    return mwt_synth_gpt_oss(model, shape, NULL) ? -1 : 0;
}

/* A copy of a unit file with its programs' paths pointed at this build's. */
static void copy_unit(const char *name, const char *to) {
    char *text = mwt_read_file(mwt_repo_path(name), NULL);
    assert_non_null(text);
    char bindir[4200];
    snprintf(bindir, sizeof bindir, "%s", mwt_bin("coordinator"));
    *strrchr(bindir, '/') = 0;
    FILE *f = fopen(to, "w");
    for (char *p = text; *p;) {
        char *hit = strstr(p, "/usr/local/bin");
        if (!hit) {
            fputs(p, f);
            break;
        }
        fwrite(p, 1, (size_t)(hit - p), f);
        fputs(bindir, f);
        p = hit + strlen("/usr/local/bin");
    }
    fclose(f);
    free(text);
}

static void test_units_verify(void **state) {
    (void)state;
    const char *sa = !access("/usr/bin/systemd-analyze", X_OK) ? "/usr/bin/systemd-analyze"
                     : !access("/bin/systemd-analyze", X_OK)   ? "/bin/systemd-analyze"
                                                               : NULL;
    if (!sa) {
        print_message("skipped: systemd-analyze is not installed (deploy/deps.sh installs it)\n");
        skip();
    }
    char units[4300], node[4400], inst[4400], coord[4400];
    snprintf(units, sizeof units, "%s/units", dir);
    assert_int_equal(mkdir(units, 0755), 0);
    snprintf(node, sizeof node, "%s/expert-node@.service", units);
    snprintf(inst, sizeof inst, "%s/expert-node@n1.service", units);
    snprintf(coord, sizeof coord, "%s/coordinator.service", units);
    copy_unit("deploy/expert-node@.service", node);
    copy_unit("deploy/coordinator.service", coord);
    assert_int_equal(symlink("expert-node@.service", inst), 0);
    char *const argv[] = {(char *)sa, "verify", inst, coord, NULL};
    char *out = NULL, *err = NULL;
    int rc = run(argv, &out, &err);
    /* every complaint about our files names them: none may be there */
    if (rc != 0 || strstr(err, ".service:"))
        fail_msg("systemd-analyze verify: exit %d\n%s%s", rc, out ? out : "", err ? err : "");
    free(out);
    free(err);
}

/* The plist deploy/moewire fills in for a Mac host parses, with the host's fields in place. */
static void test_plist_parses(void **state) {
    (void)state;
    if (access("/usr/bin/python3", X_OK)) {
        print_message("skipped: python3 is not installed, the plist is not parsed\n");
        skip();
    }
    char plan[4300], bindir[4200], plist[4400];
    snprintf(plan, sizeof plan, "%s/lab-plist", dir);
    snprintf(bindir, sizeof bindir, "%s", mwt_bin("coordinator"));
    *strrchr(bindir, '/') = 0;
    char *const units[] = {(char *)mwt_repo_path("deploy/moewire"),
                           "units",
                           (char *)mwt_repo_path("deploy/topologies/lab-8.json"),
                           "--plan",
                           plan,
                           "--model",
                           model,
                           "--bin",
                           bindir,
                           NULL};
    char *out = NULL;
    assert_int_equal(run(units, &out, NULL), 0);
    const char *a = strstr(out, "<?xml"), *b = a ? strstr(a, "</plist>") : NULL;
    assert_non_null(b); /* mac1's, the first */
    snprintf(plist, sizeof plist, "%s/mac1.plist", dir);
    assert_int_equal(mwt_write_file(plist, a, (size_t)(b - a) + strlen("</plist>")), 0);
    free(out);
    char *const argv[] = {
        "/usr/bin/python3", "-c",
        "import plistlib,sys\n"
        "p=plistlib.load(open(sys.argv[1],'rb'))\n"
        "a=p['ProgramArguments']\n"
        "assert p['Label']=='org.moewire.expert-node.mac1', p['Label']\n"
        "assert a[a.index('--vindex')+1]=='/Users/moewire/models/kimi-k3.vindex'\n"
        "assert a[a.index('--experts')+1]=='@/opt/moewire/shards/mac1.json'\n"
        "assert a[a.index('--bind')+1]=='tcp://*:5555' and a[a.index('--node-id')+1]=='mac1'\n"
        "assert p['KeepAlive'] and p['StandardErrorPath']\n",
        plist, NULL};
    assert_int_equal(run(argv, NULL, NULL), 0);
}

static const char *topology(int ports[5]) {
    static char path[4300];
    snprintf(path, sizeof path, "%s/loop.json", dir);
    char hosts[2048] = "";
    for (int h = 0; h < 4; h++) {
        ports[h] = mwt_free_port();
        char one[400];
        snprintf(one, sizeof one,
                 "%s{\"name\":\"n%d\",\"endpoint\":\"tcp://127.0.0.1:%d\",\"memory_gib\":1,"
                 "\"read_gbs\":10,\"cores\":1,\"platform\":\"linux-x86_64\"}",
                 h ? "," : "", h, ports[h]);
        strcat(hosts, one);
    }
    ports[4] = mwt_free_port();
    char text[4096];
    snprintf(text, sizeof text,
             "{\"format\":\"moewire-topology\",\"version\":1,\"name\":\"loop\","
             "\"model\":{\"path\":\"%s\"},\"hosts\":[%s],"
             "\"coordinators\":[{\"name\":\"c\",\"address\":\"127.0.0.1\","
             "\"listen\":\"127.0.0.1:%d\"}],"
             "\"links\":[{\"from\":\"*\",\"to\":\"*\",\"rtt_us\":30,\"gbit\":40}],"
             "\"replication\":{\"min_owners\":2}}",
             model, hosts, ports[4]);
    assert_int_equal(mwt_write_file(path, text, strlen(text)), 0);
    return path;
}

static int moewire(const char *cmd, const char *topo, const char *plan, char **out) {
    char bindir[4200];
    snprintf(bindir, sizeof bindir, "%s", mwt_bin("coordinator"));
    *strrchr(bindir, '/') = 0;
    char *const argv[] = {(char *)mwt_repo_path("deploy/moewire"),
                          (char *)cmd,
                          (char *)topo,
                          "--plan",
                          (char *)plan,
                          "--bin",
                          bindir,
                          NULL};
    return run(argv, out, NULL);
}

static void test_up_status_down(void **state) {
    (void)state;
    int ports[5];
    const char *topo = topology(ports);
    char plan[4300];
    snprintf(plan, sizeof plan, "%s/plan", dir);
    char *out = NULL;
    assert_int_equal(moewire("up", topo, plan, &out), 0);
    assert_non_null(strstr(out, "c: serving the OpenAI API on http://127.0.0.1:"));
    free(out);
    mwt_resp r;
    assert_int_equal(mwt_http_request(ports[4], "POST", "/v1/completions",
                                      "{\"model\":\"m\",\"prompt\":[1,2,3],\"max_tokens\":4}", &r),
                     0);
    assert_int_equal(r.status, 200);
    mwt_resp_free(&r);
    assert_int_equal(moewire("status", topo, plan, &out), 0);
    for (int h = 0; h < 4; h++) {
        char line[64];
        snprintf(line, sizeof line, "n%d ", h);
        char *at = strstr(out, line);
        if (!at || !strstr(at, "running")) fail_msg("status:\n%s", out);
    }
    assert_non_null(strstr(out, "\"status\":\"ok\""));
    free(out);
    /* every expert has two owners: n3 can leave, the fleet stays whole */
    char bindir[4200];
    snprintf(bindir, sizeof bindir, "%s", mwt_bin("coordinator"));
    *strrchr(bindir, '/') = 0;
    char *const drain[] = {(char *)mwt_repo_path("deploy/moewire"),
                           "drain",
                           (char *)topo,
                           "n3",
                           "--plan",
                           plan,
                           "--bin",
                           bindir,
                           NULL};
    assert_int_equal(run(drain, &out, NULL), 0);
    assert_non_null(strstr(out, "n3: drained"));
    free(out);
    assert_int_equal(mwt_http_request(ports[4], "POST", "/v1/completions",
                                      "{\"model\":\"m\",\"prompt\":[4,5],\"max_tokens\":4}", &r),
                     0);
    assert_int_equal(r.status, 200);
    mwt_resp_free(&r);
    assert_int_equal(moewire("status", topo, plan, &out), 0);
    if (!strstr(out, "\"status\":\"ok\"") || !strstr(out, "\"nodes\":3"))
        fail_msg("status after the drain:\n%s", out);
    free(out);
    assert_int_equal(moewire("down", topo, plan, &out), 0);
    assert_non_null(strstr(out, "c: stopped"));
    assert_non_null(strstr(out, "n2: stopped"));
    free(out);
    assert_int_equal(moewire("status", topo, plan, &out), 0);
    if (strstr(out, " running  ")) fail_msg("after down:\n%s", out); /* the state column */
    assert_non_null(strstr(out, " stopped "));
    assert_non_null(strstr(out, "coordinator: not running here"));
    free(out);
}

static void test_units_for_a_real_fleet(void **state) {
    (void)state;
    char plan[4300];
    snprintf(plan, sizeof plan, "%s/lab", dir);
    char bindir[4200];
    snprintf(bindir, sizeof bindir, "%s", mwt_bin("coordinator"));
    *strrchr(bindir, '/') = 0;
    char *const argv[] = {(char *)mwt_repo_path("deploy/moewire"),
                          "units",
                          (char *)mwt_repo_path("deploy/topologies/lab-8.json"),
                          "--plan",
                          plan,
                          "--model",
                          model,
                          "--bin",
                          bindir,
                          NULL};
    char *out = NULL;
    assert_int_equal(run(argv, &out, NULL), 0);
    for (int i = 1; i <= 5; i++) {
        char want[64];
        snprintf(want, sizeof want, "systemctl enable --now expert-node@epyc%d", i);
        assert_non_null(strstr(out, want));
    }
    for (int i = 1; i <= 3; i++) {
        char want[64];
        snprintf(want, sizeof want, "<string>org.moewire.expert-node.mac%d</string>", i);
        assert_non_null(strstr(out, want));
    }
    assert_non_null(strstr(out, "MOEWIRE_NODES=/etc/moewire/coordinator.nodes"));
    free(out);
    /* the coordinator's node list carries every host's pinned key */
    char nodes[4400];
    snprintf(nodes, sizeof nodes, "%s/coordinator.nodes", plan);
    char *list = mwt_read_file(nodes, NULL);
    assert_non_null(strstr(list, "tcp://10.0.1.23:5555#"));
    free(list);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_units_verify),
        cmocka_unit_test(test_plist_parses),
        cmocka_unit_test(test_up_status_down),
        cmocka_unit_test(test_units_for_a_real_fleet),
    };
    return cmocka_run_group_tests(tests, setup, mwt_tmp_teardown);
}
