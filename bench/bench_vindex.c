/* bench/bench_vindex.c — vindex throughput: synth → GGUF, extract, verify and mount, each in MB/s
 * of model bytes, next to the raw single-thread speeds of what bounds them (memcpy, BLAKE2b from
 * libsodium, SHA-256 from OpenSSL as vindex/ uses them; libsodium's SHA-256 for comparison)
 * measured in the same run, so the ratios say how close each step gets.
 *
 * The model is a gpt-oss-shaped synthetic one (hidden 2880, 32 experts of width 2880, MXFP4
 * experts, F16 dense) with --layers layers and a small vocabulary, written under --dir (a fresh
 * temporary directory by default, removed at the end). Prints one JSON object per line.
 * `bench_vindex --help` lists the options. */
#include <openssl/evp.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "vindex/vx_source.h"
#include "vindex/vx_synth.h"
#include "vindex/vx_vindex.h"
#include "util/mw_time.h"

static void die(const char *what, const mw_err *e) {
    fprintf(stderr, "bench_vindex: %s: %s\n", what, e->msg);
    exit(1);
}

/* Best-of-3 MB/s of a hash (or copy) over a 64 MiB buffer. */
static double raw_speed(int kind, uint8_t *buf, uint8_t *dst, size_t n) {
    double best = 0;
    for (int r = 0; r < 3; r++) {
        uint8_t out[64];
        double t0 = mw_now_s();
        unsigned int len;
        if (kind == 0)
            memcpy(dst, buf, n);
        else if (kind == 1)
            crypto_generichash(out, 32, buf, n, NULL, 0);
        else if (kind == 2)
            EVP_Digest(buf, n, out, &len, EVP_sha256(), NULL);
        else
            crypto_hash_sha256(out, buf, n);
        double mbs = (double)n / 1e6 / (mw_now_s() - t0);
        if (mbs > best) best = mbs;
    }
    return best;
}

static uint64_t dir_bytes(const char *dir, const char *const *names, int n) {
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        struct stat st;
        if (stat(p, &st) == 0) total += (uint64_t)st.st_size;
    }
    return total;
}

/* The raw speeds the steps are compared with (MB/s): memcpy, BLAKE2b, SHA-256 (OpenSSL, and
 * libsodium's for comparison). */
typedef struct raw {
    double memcpy, blake2b, sha256, sha256_sodium;
} raw;

static raw bench_raw(void) {
    size_t n = 64u << 20;
    uint8_t *buf = malloc(n), *dst = malloc(n);
    if (!buf || !dst) exit(1);
    for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)(i * 2654435761u >> 13);
    raw r = {raw_speed(0, buf, dst, n), raw_speed(1, buf, dst, n), raw_speed(2, buf, dst, n),
             raw_speed(3, buf, dst, n)};
    free(buf);
    free(dst);
    printf("{\"bench\":\"vindex_raw\",\"cpus\":%ld,\"memcpy_MBps\":%.0f,\"blake2b_MBps\":%.0f,"
           "\"sha256_MBps\":%.0f,\"sha256_libsodium_MBps\":%.0f}\n",
           sysconf(_SC_NPROCESSORS_ONLN), r.memcpy, r.blake2b, r.sha256, r.sha256_sodium);
    fflush(stdout);
    return r;
}

/* synth → GGUF file at gguf. */
static void bench_synth(const char *dir, const char *gguf, int layers) {
    char layers_s[16];
    snprintf(layers_s, sizeof layers_s, "%d", layers);
    const char *args[] = {"arch",     "gpt-oss",   "layers",       layers_s,   "hidden",
                          "2880",     "heads",     "64",           "kv-heads", "8",
                          "head-dim", "64",        "experts",      "32",       "top-k",
                          "4",        "expert-ff", "2880",         "vocab",    "32000",
                          "seed",     "1",         "dense-format", "f16",      NULL};
    mw_err e;
    vx_input *in;
    if (vx_synth_input_kv(args, &in, &e)) die("synth", &e);
    double t0 = mw_now_s();
    if (vx_input_write_gguf(in, gguf, NULL, NULL, &e)) die("synth", &e);
    double t_synth = mw_now_s() - t0;
    vx_input_close(in);
    const char *gn[] = {"model.gguf"};
    double model_mb = (double)dir_bytes(dir, gn, 1) / 1e6;
    printf("{\"bench\":\"vindex_synth\",\"layers\":%d,\"model_MB\":%.1f,\"seconds\":%.2f,"
           "\"MBps\":%.0f}\n",
           layers, model_mb, t_synth, model_mb / t_synth);
    fflush(stdout);
}

/* GGUF → vindex directory at vx; returns what extract wrote. */
static vx_extract_stats bench_extract(const char *gguf, const char *vx, const raw *r) {
    mw_err e;
    vx_input *in;
    if (vx_input_open(gguf, &in, &e)) die("open", &e);
    double t0 = mw_now_s();
    vx_extract_stats st;
    if (vx_extract(in, vx, NULL, &st, &e)) die("extract", &e);
    double t_ext = mw_now_s() - t0;
    vx_input_close(in);
    double vx_mb = (double)(st.dense_bytes + st.expert_bytes) / 1e6;
    printf("{\"bench\":\"vindex_extract\",\"MB\":%.1f,\"seconds\":%.2f,\"MBps\":%.0f,"
           "\"vs_sha256\":%.2f,\"vs_blake2b\":%.2f}\n",
           vx_mb, t_ext, vx_mb / t_ext, vx_mb / t_ext / r->sha256, vx_mb / t_ext / r->blake2b);
    fflush(stdout);
    return st;
}

static void bench_verify(const char *vx, const raw *r) {
    mw_err e;
    double t0 = mw_now_s();
    uint64_t checked;
    if (vx_verify(vx, NULL, NULL, &checked, &e)) die("verify", &e);
    double t_ver = mw_now_s() - t0;
    printf("{\"bench\":\"vindex_verify\",\"MB\":%.1f,\"seconds\":%.2f,\"MBps\":%.0f,"
           "\"vs_sha256\":%.2f}\n",
           (double)checked / 1e6, t_ver, (double)checked / 1e6 / t_ver,
           (double)checked / 1e6 / t_ver / r->sha256);
    fflush(stdout);
}

/* Mounts everything (dense + all extents, BLAKE2b checked), then one layer's experts only. */
static void bench_mount(const char *vx, int layers, const vx_extract_stats *st, const raw *r) {
    mw_err e;
    vx_source *s;
    double t0 = mw_now_s();
    if (vx_source_open(vx, NULL, &s, &e)) die("mount", &e);
    double t_mnt = mw_now_s() - t0;
    vx_source_close(s);
    vx_expert_set set;
    if (vx_expert_set_parse("0:0-31", layers, 32, &set, &e)) die("expert set", &e);
    vx_source_opts so = {.experts = &set, .dense = false, .verify_on_mount = true};
    t0 = mw_now_s();
    if (vx_source_open(vx, &so, &s, &e)) die("mount", &e);
    double t_one = mw_now_s() - t0;
    vx_source_close(s);
    vx_expert_set_free(&set);
    double vx_mb = (double)(st->dense_bytes + st->expert_bytes) / 1e6;
    double layer_mb = (double)st->expert_bytes / (double)layers / 1e6;
    printf("{\"bench\":\"vindex_mount\",\"all_MB\":%.1f,\"all_seconds\":%.2f,\"all_MBps\":%.0f,"
           "\"one_layer_MB\":%.1f,\"one_layer_seconds\":%.3f,\"one_layer_MBps\":%.0f,"
           "\"vs_blake2b\":%.2f}\n",
           vx_mb, t_mnt, vx_mb / t_mnt, layer_mb, t_one, layer_mb / t_one,
           vx_mb / t_mnt / r->blake2b);
}

int main(int argc, char **argv) {
    int layers = 2;
    const char *dir = NULL;
    bool keep = false;
    const bu_opt opt[] = {
        BU_OPT_IN("--layers", BU_INT, &layers, "2", "layers of the synthetic model", 1, 64),
        BU_OPT("--dir", BU_STR, &dir, "DIR", "work here (default: a fresh temporary directory)"),
        BU_OPT("--keep", BU_FLAG, &keep, "", "keep the GGUF file and the vindex"),
    };
    const bu_cli cli = {
        "bench_vindex",
        "vindex throughput: synth to GGUF, extract, verify and mount in MB/s, beside "
        "memcpy, BLAKE2b and\nSHA-256 measured in the same run.",
        NULL,
        NULL,
        opt,
        (int)(sizeof opt / sizeof opt[0])};
    const int status = bu_args(argc, argv, &cli, NULL);
    if (status != BU_RUN) return status;
    if (sodium_init() < 0) return 1;
    char tmpl[] = "/tmp/bench-vindex-XXXXXX";
    if (!dir && !(dir = mkdtemp(tmpl))) return 1;
    const raw r = bench_raw();
    char gguf[4200], vx[4200];
    snprintf(gguf, sizeof gguf, "%s/model.gguf", dir);
    snprintf(vx, sizeof vx, "%s/model.vindex", dir);
    bench_synth(dir, gguf, layers);
    const vx_extract_stats st = bench_extract(gguf, vx, &r);
    bench_verify(vx, &r);
    bench_mount(vx, layers, &st, &r);
    if (!keep) {
        char cmd[4300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s/model.gguf' '%s/model.vindex'", dir, dir);
        if (system(cmd) != 0) fprintf(stderr, "bench_vindex: could not clean %s\n", dir);
        if (dir == tmpl) rmdir(dir);
    }
    return 0;
}
