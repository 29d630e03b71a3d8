/* tests/integration/test_cluster.c — `coordinator generate` over real expert-node processes:
 *  - exact mode with the f32 wire gives logits bit-identical to --experts local with 1, 2 and 3
 *    nodes, on the llama.cpp fixture models (GGUF; the Kimi ones with their recurrent states,
 *    K3's latent rows on the wire) and on a synthetic top-4 vindex whose width is not a multiple
 *    of 256; a K3-shaped bank (896 experts, top-16) on 3 nodes, as deepseek2 and as kimi-k3;
 *  - default (partial-sum) mode stays within 1e-5 where its summation order differs (top-4);
 *  - f16 / bf16 wires stay within the tolerances measured for them (docs/benchmarks.md);
 *  - replicas, an unowned expert, another model's node, a node killed mid-generation and a node
 *    that stops answering all end as documented. */
#include "tests/support/mw_test.h"
#include "tests/support/mwt_cli.h"
#include "tests/support/mwt_node.h"
#include "util/mw_time.h"

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROMPT     "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16" /* longer than gpt-oss-tiny's window */
#define PROMPT_LEN 16
#define GEN        "8"

static char *dir;
static char synth[4200];

static const char *gpt_oss(void) {
    return mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf");
}

static const char *qwen(void) {
    return mwt_fixture("llamacpp/qwen3moe-tiny/model.gguf");
}

static int setup(void **state) {
    if (mwt_tmp_setup(state)) return -1;
    dir = mwt_tmp;
    snprintf(synth, sizeof synth, "%s/synth.vindex", dir);
    /* top-4 of 12 experts, width 320: partial sums really differ in order from exact mode */
    mwt_gpt_oss shape = {
        .layers = 3, .hidden = 320, .experts = 12, .top_k = 4, .expert_ff = 288, .seed = 11};
    if (mwt_synth_gpt_oss(synth, shape, NULL)) fail_msg("vindex synth failed");
    return 0;
}

/* Runs `coordinator generate` on model with extra options; logits go to `logits` (when not
 * NULL). Returns the exit status; *err (if given) receives stderr. */
static int generate(const char *model, const char *logits, const char *numerics,
                    const char *const *extra, char **err) {
    static const mwt_gen how = {.prompt = PROMPT, .max_tokens = GEN, .timeout_ms = 300000};
    return mwt_generate(&how, model, numerics, logits, extra, err);
}

static float *read_floats(const char *path, size_t *n) {
    size_t len = 0;
    float *f = mwt_read_file(path, &len);
    assert_non_null(f);
    *n = len / sizeof(float);
    return f;
}

/* Logits with --experts local, the reference every cluster run is compared to (computed once
 * per model and numerics). */
static float *local_logits(const char *model, const char *numerics, size_t *n) {
    unsigned long h = 5381;
    for (const char *c = model; *c; c++) h = h * 33 + (unsigned char)*c;
    char path[4300];
    snprintf(path, sizeof path, "%s/local-%lx-%s.bin", dir, h, numerics);
    if (access(path, R_OK) != 0) assert_int_equal(generate(model, path, numerics, NULL, NULL), 0);
    return read_floats(path, n);
}

static float *cluster_logits(const char *model, const char *numerics, const char *const *extra,
                             size_t *n) {
    char path[4300];
    snprintf(path, sizeof path, "%s/cluster.bin", dir);
    unlink(path);
    assert_int_equal(generate(model, path, numerics, extra, NULL), 0);
    return read_floats(path, n);
}

static void check_exact(const char *model, const char *numerics) {
    size_t n_ref, n;
    float *ref = local_logits(model, numerics, &n_ref);
    static const char *const nodes[] = {"1", "2", "3"};
    for (int k = 0; k < 3; k++) {
        /* 2 nodes also with --pin: dense matrices and the nodes' experts on huge pages; 3 nodes
         * with their threads left unbound (the others are bound to CPUs) */
        const char *extra[] = {"--loopback",
                               nodes[k],
                               "--exact",
                               "--wire",
                               "f32",
                               "--node-affinity",
                               k == 2 ? "off" : "on",
                               k == 1 ? "--pin" : NULL,
                               NULL};
        float *got = cluster_logits(model, numerics, extra, &n);
        assert_int_equal(n, n_ref);
        if (memcmp(got, ref, n * sizeof(float)))
            fail_msg("%s, numerics %s, %s node(s), exact mode: logits differ from local "
                     "(max |diff| %g)",
                     model, numerics, nodes[k], mwt_max_abs_diff(got, ref, n));
        free(got);
    }
    free(ref);
}

static void test_exact_is_bit_identical_gpt_oss(void **state) {
    (void)state;
    check_exact(gpt_oss(), "q8");
}

static void test_exact_is_bit_identical_qwen3moe(void **state) {
    (void)state;
    check_exact(qwen(), "q8");
}

static void test_exact_is_bit_identical_synth_vindex(void **state) {
    (void)state;
    check_exact(synth, "f32");
}

static void test_exact_is_bit_identical_deepseek2(void **state) {
    (void)state;
    check_exact(mwt_fixture("llamacpp/deepseek2-tiny/model.gguf"), "f32");
}

/* KDA layers keep their recurrent state on the coordinator; the prompt fills a chunk and the
 * decode steps open the next. */
static void test_exact_is_bit_identical_kimi_linear(void **state) {
    (void)state;
    check_exact(mwt_fixture("llamacpp/kimi-linear-tiny/model.gguf"), "f32");
    check_exact(mwt_fixture("llamacpp/kimi-linear-tiny/model.gguf"), "q8");
}

/* kimi-k3's latent MoE puts rows of its latent width on the wire, and the nodes return latent
 * sums (SiTU run there, as its GLU policy says). */
static void test_exact_is_bit_identical_kimi_k3(void **state) {
    (void)state;
    check_exact(mwt_fixture("llamacpp/kimi-k3-tiny/model.gguf"), "f32");
    check_exact(mwt_fixture("llamacpp/kimi-k3-tiny/model.gguf"), "q8");
}

/* K3's expert bank with its latent attention, narrowed to fit a test: 896 experts (top-16) of FFN
 * width 64, 2 heads of 32 (a rope part of 16), q and kv latents of 64, hidden 128, 3 layers. */
#define K3_NARROW                                                                                  \
    "--layers", "3", "--hidden", "128", "--heads", "2", "--head-dim", "32", "--rope-dim", "16",    \
        "--q-lora", "64", "--kv-lora", "64", "--experts", "896", "--top-k", "16", "--expert-ff",   \
        "64"

/* A model that `vindex synth OPTS` writes to DIR/name, served by 3 loopback nodes in exact mode:
 * the logits equal the in-process ones bit for bit (what names it in a failure). */
static void synth_over_three_nodes(const char *name, const char *const *opts, const char *what) {
    char model[4300];
    snprintf(model, sizeof model, "%s/%s", dir, name);
    if (mwt_synth(model, opts)) fail_msg("vindex synth failed");
    size_t n_ref, n;
    float *ref = local_logits(model, "q8", &n_ref);
    const char *extra[] = {"--loopback", "3", "--exact", "--wire", "f32", NULL};
    float *got = cluster_logits(model, "q8", extra, &n);
    assert_int_equal(n, n_ref);
    if (memcmp(got, ref, n * sizeof(float)))
        fail_msg("%s over 3 nodes: logits differ from local (max |diff| %g)", what,
                 mwt_max_abs_diff(got, ref, n));
    free(got);
    free(ref);
}

/* A Kimi-K3-shaped expert bank — 896 experts per layer, top-16, one shared expert — with the
 * widths narrowed to fit a test (hidden 128, expert FFN 64, MXFP4; latent attention at 64), served
 * by 3 loopback nodes: the exact mode's logits equal the in-process ones bit for bit. */
static void test_k3_shaped_bank_over_three_nodes(void **state) {
    (void)state;
    const char *opts[] = {"--arch",          "deepseek2", "--shared-experts", "1",
                          "--dense-layers",  "1",         "--dense-ff",       "256",
                          "--expert-format", "mxfp4",     "--vocab",          "300",
                          "--seed",          "896",       K3_NARROW,          NULL};
    synth_over_three_nodes("k3.vindex", opts, "896 experts");
}

/* A kimi-k3 model with K3's bank shape (896 experts, top-16, one shared expert, experts at a latent
 * width: 64 of hidden 128, expert FFN 64, MXFP4), KDA and gated latent attention layers and
 * attention residuals, narrowed to fit a test: 3 loopback nodes give the in-process bits. */
static void test_k3_family_over_three_nodes(void **state) {
    (void)state;
    const char *opts[] = {
        "--arch",          "kimi-k3", "--kda-head-dim",   "32", "--full-attn-every", "3",
        "--expert-latent", "64",      "--attn-res-block", "2",  "--dense-ff",        "256",
        "--vocab",         "300",     "--seed",           "93", K3_NARROW,           NULL};
    synth_over_three_nodes("kimi-k3.vindex", opts, "kimi-k3, 896 experts");
}

static double max_abs(const float *x, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs((double)x[i]) > m) m = fabs((double)x[i]);
    return m;
}

/* Partial sums per node: another summation order, so not bit-identical, but within 1e-5. */
static void test_partial_mode_within_1e5(void **state) {
    (void)state;
    size_t n_ref, n;
    float *ref = local_logits(synth, "f32", &n_ref);
    bool differs = false;
    for (int k = 2; k <= 3; k++) {
        const char *extra[] = {"--loopback", k == 2 ? "2" : "3", NULL};
        float *got = cluster_logits(synth, "f32", extra, &n);
        assert_int_equal(n, n_ref);
        assert_true(mwt_close("partial-mode logits", got, ref, n, 1e-5, 0) < 0);
        differs |= memcmp(got, ref, n * sizeof(float)) != 0;
        free(got);
    }
    /* the fixture really exercises another order (else this test could not fail) */
    assert_true(differs);
    free(ref);
}

/* f16 / bf16 rows on the wire: the prompt's logits within the measured tolerance, relative to
 * the largest logit (docs/benchmarks.md records the measurements; f32 numerics, where the wire
 * rounding is not masked by q8 activation rounding). */
static void check_codec(const char *model, const char *codec, double rel_tol) {
    size_t n_ref, n;
    float *ref = local_logits(model, "f32", &n_ref);
    const char *extra[] = {"--loopback", "2", "--wire", codec, NULL};
    float *got = cluster_logits(model, "f32", extra, &n);
    assert_int_equal(n, n_ref);
    size_t prompt = n / (PROMPT_LEN + atoi(GEN) - 1) * PROMPT_LEN; /* rows not fed by sampling */
    double tol = rel_tol * max_abs(ref, prompt);
    double d = mwt_max_abs_diff(got, ref, prompt);
    if (d > tol) fail_msg("%s over the %s wire: max |diff| %g > %g", model, codec, d, tol);
    assert_true(d > 0); /* the rounding is really there */
    free(got);
    free(ref);
}

static void test_f16_and_bf16_wires_within_tolerance(void **state) {
    (void)state;
    check_codec(synth, "f16", 3e-3);
    check_codec(synth, "bf16+lz4", 2e-2);
    check_codec(gpt_oss(), "bf16", 2e-2);
    check_codec(qwen(), "f16+lz4", 3e-3);
}

/* The report's movement figures against the nodes' own byte counts (each prints what it received,
 * sent and read when it stops): the coordinator's sent bytes are the nodes' received ones, its
 * received bytes their sent ones, and the ratio is both directions over the weight bytes read. */
static void check_movement(const char *log) {
    long long tokens = 0;
    double per_token = 0, sent = 0, received = 0, weights_per_token = 0, ratio = 0;
    const char *hdr = strstr(log, "cluster: "), *wire = strstr(log, "wire bytes/token: "),
               *wb = strstr(log, "expert weight bytes/token: "),
               *mr = strstr(log, "  movement ratio: ");
    assert_true(hdr && wire && wb && mr);
    const char *tok = strstr(hdr, " token(s) through");
    assert_non_null(tok);
    while (tok > hdr && tok[-1] >= '0' && tok[-1] <= '9') tok--;
    assert_int_equal(sscanf(tok, "%lld", &tokens), 1);
    assert_int_equal(sscanf(wire, "wire bytes/token: %lf (sent %lf, received %lf)", &per_token,
                            &sent, &received),
                     3);
    assert_int_equal(sscanf(wb, "expert weight bytes/token: %lf", &weights_per_token), 1);
    assert_int_equal(sscanf(mr, "  movement ratio: %lf", &ratio), 1);
    unsigned long long in = 0, out = 0, read = 0;
    int nodes = 0;
    for (const char *p = log; (p = strstr(p, "expert-node loopback-")); p++) {
        unsigned long long i, o, w;
        const char *q = strstr(p, "; wire in ");
        const char *eol = strchr(p, '\n');
        if (!q || (eol && q > eol)) continue; /* the per-phase line */
        assert_int_equal(
            sscanf(q, "; wire in %llu B, out %llu B; expert weights read %llu B", &i, &o, &w), 3);
        in += i, out += o, read += w, nodes++;
    }
    assert_int_equal(nodes, 2);
    assert_true(tokens > 0 && read > 0);
    const double t = (double)tokens;
    /* per-token figures are printed rounded to whole bytes */
    assert_true(fabs(sent * t - (double)in) <= 0.5 * t);
    assert_true(fabs(received * t - (double)out) <= 0.5 * t);
    assert_true(fabs(per_token * t - (double)(in + out)) <= 0.5 * t);
    assert_true(fabs(weights_per_token * t - (double)read) <= 0.5 * t);
    /* the ratio is printed with 3 significant digits */
    const double want = (double)(in + out) / (double)read;
    if (fabs(ratio - want) > 5e-3 * want)
        fail_msg("movement ratio %.3g in the report, %.6g from the nodes' byte counts", ratio,
                 want);
}

static void test_report(void **state) {
    (void)state;
    const char *extra[] = {"--loopback", "2", "--exact", NULL};
    char *err = NULL;
    assert_int_equal(generate(synth, NULL, "f32", extra, &err), 0);
    static const char *const lines[] = {"cluster: 2 node(s), wire f32, exact mode",
                                        "wire bytes/token:",
                                        "expert weight bytes/token:",
                                        "movement ratio:",
                                        "node 0 (tcp://127.0.0.1:",
                                        "node 1 (tcp://127.0.0.1:",
                                        "round trip per layer",
                                        "per layer (us): split ",
                                        "last reply's wire and wake-ups",
                                        "us/batch, round trip",
                                        "decode:"};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        if (!strstr(err, lines[i])) fail_msg("report lacks '%s':\n%s", lines[i], err);
    /* Loopback nodes default to one thread per online CPU (the busier node of a token must be
     * able to use every core). */
    const char *node0 = strstr(err, "node 0 (tcp://127.0.0.1:");
    assert_non_null(node0);
    char want[64];
    snprintf(want, sizeof want, ", %ld thread(s): ", sysconf(_SC_NPROCESSORS_ONLN));
    const char *eol = strchr(node0, '\n');
    const char *at = strstr(node0, want);
    if (!at || (eol && at > eol)) fail_msg("node 0 does not run %s:\n%s", want, err);
    check_movement(err);
    free(err);
}

/* deepseek2's leading dense layers have no exchange: the report counts the MoE layers only and
 * its per-layer round trips say 'dense' for them (not a 0.0 that reads like a measured time),
 * with a measured time for every MoE layer. deepseek2-tiny: 3 layers, the first dense. */
static void test_report_marks_dense_layers(void **state) {
    (void)state;
    const char *extra[] = {"--loopback", "1", NULL};
    char *err = NULL;
    assert_int_equal(
        generate(mwt_fixture("llamacpp/deepseek2-tiny/model.gguf"), NULL, "f32", extra, &err), 0);
    if (!strstr(err, " token(s) through 2 MoE layers\n"))
        fail_msg("the report does not count 2 MoE layers:\n%s", err);
    const char *line = strstr(err, "round trip per layer (us, mean ");
    assert_non_null(line);
    const char *list = strstr(line, "):");
    assert_non_null(list);
    int l0 = -1, l1 = -1, l2 = -1, used = 0;
    double t1 = 0, t2 = 0;
    char dense[8] = "";
    if (sscanf(list, "): %d:%7[a-z] %d:%lf %d:%lf%n", &l0, dense, &l1, &t1, &l2, &t2, &used) != 6)
        fail_msg("unexpected per-layer round trips:\n%s", line);
    assert_int_equal(l0, 0);
    assert_string_equal(dense, "dense");
    assert_int_equal(l1, 1);
    assert_int_equal(l2, 2);
    assert_true(t1 > 0 && t2 > 0);
    assert_true(list[used] == '\n');
    free(err);
}

/* Processes whose command line holds both strings (loopback nodes of this test's model). */
static int count_processes(const char *a, const char *b) {
    int n = 0;
    DIR *d = opendir("/proc");
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char path[300];
        snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
        size_t len = 0;
        char *c = mwt_read_file(path, &len);
        if (!c) continue;
        for (size_t i = 0; i + 1 < len; i++)
            if (!c[i]) c[i] = ' ';
        n += strstr(c, a) && strstr(c, b);
        free(c);
    }
    if (d) closedir(d);
    return n;
}

/* A run that fails mid-generation (a 1 ms deadline) still stops its loopback nodes. */
static void test_loopback_nodes_stop_on_errors(void **state) {
    (void)state;
    const char *extra[] = {"--loopback", "2", "--deadline-ms", "1", NULL};
    char *err = NULL;
    int rc = generate(synth, NULL, "f32", extra, &err);
    if (rc != 0 && !strstr(err, "deadline")) fail_msg("exit %d: %s", rc, err);
    free(err);
    assert_int_equal(count_processes(synth, "loopback-"), 0);
}

/* ---- nodes started by the test ------------------------------------------------------------ */

typedef mwt_node started;

/* Starts an expert node serving spec of model, with one more option (opt and its value) when opt
 * is not NULL. */
static started start_node_opt(const char *model, const char *spec, int i, const char *opt,
                              const char *val) {
    char tag[32];
    snprintf(tag, sizeof tag, "node-%d", i);
    const char *args[] = {"--experts", spec, opt, val, NULL};
    return mwt_node_up(model, dir, tag, args, 60000);
}

static started start_node(const char *model, const char *spec, int i) {
    return start_node_opt(model, spec, i, NULL, NULL);
}

/* --affinity takes a CPU number or off, --poll-us a number of microseconds; anything else stops
 * the node before it serves. */
static void test_node_rejects_bad_cpu_options(void **state) {
    (void)state;
    static const char *bad[][2] = {{"--affinity", "x"},  {"--affinity", "-1"},
                                   {"--affinity", "2x"}, {"--affinity", ""},
                                   {"--poll-us", "-5"},  {"--poll-us", "soon"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *argv[] = {(char *)mwt_bin("expert-node"),
                        "--vindex",
                        (char *)synth,
                        "--bind",
                        "tcp://127.0.0.1:*",
                        (char *)bad[i][0],
                        (char *)bad[i][1],
                        NULL};
        char *err = NULL;
        assert_int_equal(mwt_run(argv, NULL, &err, 60000), 2);
        if (!strstr(err, bad[i][0])) fail_msg("unexpected: %s", err);
        free(err);
    }
}

static void stop_node(started *s) {
    mwt_node_kill(s);
}

/* The CPUs a thread of process pid may run on ("Cpus_allowed_list" of /proc), for the first
 * thread whose name starts with comm, or the main thread for comm NULL; "" if none. */
static void thread_cpus(pid_t pid, const char *comm, char *out, size_t cap) {
    out[0] = '\0';
    char path[128];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) && !out[0]) {
        if (e->d_name[0] == '.' || (!comm && atol(e->d_name) != (long)pid)) continue;
        char p[300], name[64] = "", line[256];
        snprintf(p, sizeof p, "%s/%s/comm", path, e->d_name);
        FILE *f = fopen(p, "r");
        if (!f) continue;
        if (!fgets(name, sizeof name, f)) name[0] = '\0';
        fclose(f);
        if (comm && strncmp(name, comm, strlen(comm))) continue;
        snprintf(p, sizeof p, "%s/%s/status", path, e->d_name);
        if (!(f = fopen(p, "r"))) continue;
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "Cpus_allowed_list:", 18)) {
                snprintf(out, cap, "%s", line + 18 + strspn(line + 18, " \t"));
                out[strcspn(out, "\n")] = '\0';
            }
        fclose(f);
    }
    closedir(d);
}

static void test_replicas_share_the_work(void **state) {
    (void)state;
    /* bound to CPUs (a first CPU past the machine's wraps) or not: the same numbers */
    started a = start_node_opt(synth, "all", 0, "--affinity", "7"),
            b = start_node_opt(synth, "all", 1, "--affinity", "off");
    /* a's serving thread is bound to one CPU, and its ZeroMQ I/O thread to the same one */
    char main_cpus[128], io_cpus[128];
    thread_cpus(a.pid, NULL, main_cpus, sizeof main_cpus);
    thread_cpus(a.pid, "ZMQbg/IO", io_cpus, sizeof io_cpus);
    if (!main_cpus[0] || strchr(main_cpus, '-') || strchr(main_cpus, ',') ||
        strcmp(main_cpus, io_cpus))
        fail_msg("node bound with --affinity 7: serving thread on CPUs '%s', I/O thread on '%s'",
                 main_cpus, io_cpus);
    char nodes[600];
    snprintf(nodes, sizeof nodes, "%s,%s", a.endpoint, b.endpoint);
    size_t n_ref, n;
    float *ref = local_logits(synth, "f32", &n_ref);
    char path[4300];
    snprintf(path, sizeof path, "%s/replicas.bin", dir);
    const char *extra[] = {"--nodes", nodes, "--exact", NULL};
    char *err = NULL;
    assert_int_equal(generate(synth, path, "f32", extra, &err), 0);
    float *got = read_floats(path, &n);
    assert_int_equal(n, n_ref);
    assert_memory_equal(got, ref, n * sizeof(float));
    /* both replicas served batches */
    assert_null(strstr(err, ": 0 batches"));
    free(err);
    free(got);
    free(ref);
    stop_node(&a);
    stop_node(&b);
}

/* A node whose capacity is below the prompt's rows: the coordinator splits its batches and the
 * result is still bit-identical. */
static void test_batches_beyond_capacity_are_split(void **state) {
    (void)state;
    started a = start_node_opt(synth, "0-2:0-5", 0, "--capacity", "3"),
            b = start_node(synth, "0-2:6-11", 1);
    char nodes[600];
    snprintf(nodes, sizeof nodes, "%s,%s", a.endpoint, b.endpoint);
    size_t n_ref, n;
    float *ref = local_logits(synth, "f32", &n_ref);
    const char *extra[] = {"--nodes", nodes, "--exact", NULL};
    float *got = cluster_logits(synth, "f32", extra, &n);
    assert_int_equal(n, n_ref);
    assert_memory_equal(got, ref, n * sizeof(float));
    free(got);
    free(ref);
    stop_node(&a);
    stop_node(&b);
}

static void test_unowned_experts_are_refused(void **state) {
    (void)state;
    started a = start_node(synth, "0-2:0-9", 0);
    const char *extra[] = {"--nodes", a.endpoint, NULL};
    char *err = NULL;
    assert_int_equal(generate(synth, NULL, "f32", extra, &err), 1);
    if (!strstr(err, "6 experts are owned by no node") || !strstr(err, "0:10-11, 1:10-11, 2:10-11"))
        fail_msg("unexpected error: %s", err);
    free(err);
    stop_node(&a);
}

static void test_another_models_node_is_refused(void **state) {
    (void)state;
    started a = start_node(qwen(), "all", 0);
    const char *extra[] = {"--nodes", a.endpoint, NULL};
    char *err = NULL;
    assert_int_equal(generate(gpt_oss(), NULL, "q8", extra, &err), 1);
    if (!strstr(err, "node 0 (") || !strstr(err, "fingerprint")) fail_msg("unexpected: %s", err);
    free(err);
    stop_node(&a);
}

/* Starts a long generation over two nodes; returns the coordinator's pid. */
static pid_t long_generation(const started *a, const started *b, const char *deadline,
                             const char *log) {
    char nodes[600];
    snprintf(nodes, sizeof nodes, "%s,%s", a->endpoint, b->endpoint);
    char *argv[] = {(char *)mwt_bin("coordinator"),
                    "generate",
                    "--model",
                    (char *)gpt_oss(),
                    "--tokens",
                    PROMPT,
                    "--max-tokens",
                    "20000",
                    "--threads",
                    "1",
                    "--nodes",
                    nodes,
                    "--deadline-ms",
                    (char *)deadline,
                    NULL};
    pid_t pid = mwt_spawn(argv, log);
    assert_true(pid > 0);
    usleep(1500000); /* well into decoding */
    assert_int_equal(mwt_wait(pid, 1), -2);
    return pid;
}

static void test_killed_node_ends_the_run_within_2s(void **state) {
    (void)state;
    started a = start_node(gpt_oss(), "0-3:0-3", 0), b = start_node(gpt_oss(), "0-3:4-7", 1);
    char log[4300];
    snprintf(log, sizeof log, "%s/killed.log", dir);
    pid_t co = long_generation(&a, &b, "60000", log);
    long long t0 = mw_now_ms();
    kill(b.pid, SIGKILL);
    int st = mwt_wait(co, 2000);
    long long dt = mw_now_ms() - t0;
    b.pid = 0;
    if (st == -2) {
        kill(co, SIGKILL);
        mwt_wait(co, 5000);
        fail_msg("the coordinator still runs 2 s after its node was killed");
    }
    char *out = mwt_read_file(log, NULL);
    if (st != 1 || !strstr(out, "node 1 (")) fail_msg("exit %d after %lld ms:\n%s", st, dt, out);
    /* the tokens generated before the failure are printed, and the error says how many */
    const char *line = strstr(out, "tokens: "), *after = strstr(out, "after ");
    long said = after ? strtol(after + 6, NULL, 10) : -1;
    long printed = 0;
    for (const char *p = line; p && *p && *p != '\n'; p++) printed += *p == ' ';
    if (!line || said < 1 || printed != said)
        fail_msg("no partial output (%ld ids printed, %ld said):\n%s", printed, said, out);
    free(out);
    stop_node(&a);
}

static void test_silent_node_misses_the_deadline(void **state) {
    (void)state;
    started a = start_node(gpt_oss(), "0-3:0-3", 0), b = start_node(gpt_oss(), "0-3:4-7", 1);
    char log[4300];
    snprintf(log, sizeof log, "%s/deadline.log", dir);
    pid_t co = long_generation(&a, &b, "500", log);
    kill(a.pid, SIGSTOP); /* alive, connected, silent */
    int st = mwt_wait(co, 5000);
    if (st == -2) {
        kill(co, SIGKILL);
        mwt_wait(co, 5000);
    }
    char *out = mwt_read_file(log, NULL);
    if (st != 1 || !strstr(out, "node 0 (") || !strstr(out, "within the 500 ms deadline"))
        fail_msg("exit %d:\n%s", st, out);
    free(out);
    stop_node(&a);
    stop_node(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_is_bit_identical_gpt_oss),
        cmocka_unit_test(test_exact_is_bit_identical_qwen3moe),
        cmocka_unit_test(test_exact_is_bit_identical_synth_vindex),
        cmocka_unit_test(test_exact_is_bit_identical_deepseek2),
        cmocka_unit_test(test_exact_is_bit_identical_kimi_linear),
        cmocka_unit_test(test_exact_is_bit_identical_kimi_k3),
        cmocka_unit_test(test_k3_shaped_bank_over_three_nodes),
        cmocka_unit_test(test_k3_family_over_three_nodes),
        cmocka_unit_test(test_partial_mode_within_1e5),
        cmocka_unit_test(test_f16_and_bf16_wires_within_tolerance),
        cmocka_unit_test(test_report),
        cmocka_unit_test(test_report_marks_dense_layers),
        cmocka_unit_test(test_loopback_nodes_stop_on_errors),
        cmocka_unit_test(test_node_rejects_bad_cpu_options),
        cmocka_unit_test(test_replicas_share_the_work),
        cmocka_unit_test(test_batches_beyond_capacity_are_split),
        cmocka_unit_test(test_unowned_experts_are_refused),
        cmocka_unit_test(test_another_models_node_is_refused),
        cmocka_unit_test(test_killed_node_ends_the_run_within_2s),
        cmocka_unit_test(test_silent_node_misses_the_deadline),
    };
    return cmocka_run_group_tests_name("cluster", tests, setup, mwt_tmp_teardown);
}
