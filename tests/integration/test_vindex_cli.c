/* tests/integration/test_vindex_cli.c — the `vindex` program end to end: extract, inspect
 * (human and JSON), verify (ok, then a flipped byte named by extent and exit 1), slice, synth in
 * both formats, usage errors (exit 2), crafted GGUF files (an empty dimension, 0 rows of a huge
 * length, a tensor name that is not UTF-8) refused by name, and a failed extract leaving nothing
 * behind. */
#include "tests/support/mw_test.h"

#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Runs `vindex ARGS...` (NULL-terminated); returns the exit status, output in *out / *err. */
static int vindex(char **out, char **err, ...) {
    char *argv[40];
    int n = 0;
    argv[n++] = (char *)mwt_bin("vindex");
    va_list ap;
    va_start(ap, err);
    for (char *a; n < 39 && (a = va_arg(ap, char *));) argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    char *o = NULL, *e = NULL;
    int rc = mwt_run(argv, &o, &e, 120000);
    if (out)
        *out = o;
    else
        free(o);
    if (err)
        *err = e;
    else
        free(e);
    return rc;
}

static json_t *inspect_json(const char *dir) {
    char *out, *err;
    int rc = vindex(&out, &err, "inspect", "--json", dir, NULL);
    if (rc != 0) fail_msg("inspect --json %s: exit %d: %s", dir, rc, err);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    if (!j) fail_msg("inspect --json output is not JSON: %s", je.text);
    free(out);
    free(err);
    return j;
}

static void test_extract_inspect_verify(void **state) {
    (void)state;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/oss", mwt_tmp);
    char *out, *err;
    int rc = vindex(&out, &err, "extract", "--strict",
                    (char *)mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf"), dir, NULL);
    if (rc != 0) fail_msg("extract: exit %d: %s", rc, err);
    assert_non_null(
        strstr(out, "coverage: 79 source tensors: 79 consumed, 0 dropped by rule, 0 unrecognised"));
    assert_string_equal(err, ""); /* no progress bar when stderr is not a terminal */
    free(out);
    free(err);

    rc = vindex(&out, &err, "inspect", dir, NULL);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "gpt-oss: 4 layers, hidden 256, 8 experts"));
    assert_non_null(strstr(out, "holds        0-3:0-7 (32 of 32 extents"));
    assert_non_null(strstr(out, "gpt-oss.rope.scaling.type"));
    free(out);
    free(err);

    json_t *j = inspect_json(dir);
    assert_int_equal(strlen(json_string_value(json_object_get(j, "fingerprint"))), 64);
    assert_int_equal(json_integer_value(json_object_get(j, "layers")), 4);
    assert_int_equal(json_integer_value(json_object_get(j, "extents_held")), 32);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "tensors"), "count")),
                     79);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(j, "metadata"), "tokenizer.ggml.tokens")),
        "[str × 512]");
    json_decref(j);

    rc = vindex(&out, &err, "verify", dir, NULL);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, ": ok ("));
    free(out);
    free(err);

    /* one flipped byte in expert 5 of layer 2 */
    char path[1100];
    snprintf(path, sizeof path, "%s/experts-002.bin", dir);
    size_t n;
    uint8_t *bytes = mwt_read_file(path, &n);
    size_t extent = n / 8, at = 5 * extent + extent / 3;
    bytes[at] ^= 1;
    assert_int_equal(mwt_write_file(path, bytes, n), 0);
    rc = vindex(&out, &err, "verify", dir, NULL);
    assert_int_equal(rc, 1);
    assert_non_null(
        strstr(err, "extent (layer 2, expert 5) in experts-002.bin: checksum mismatch"));
    free(out);
    free(err);
    bytes[at] ^= 1;
    assert_int_equal(mwt_write_file(path, bytes, n), 0);
    free(bytes);
    assert_int_equal(vindex(NULL, NULL, "verify", dir, NULL), 0);

    /* slice */
    char sl[1024];
    snprintf(sl, sizeof sl, "%s/oss-slice", mwt_tmp);
    assert_int_equal(
        vindex(NULL, NULL, "slice", dir, "--experts", "0-1:0-3", sl, "--no-dense", NULL), 0);
    assert_int_equal(vindex(NULL, NULL, "verify", sl, NULL), 0);
    json_t *js = inspect_json(sl), *jf = inspect_json(dir);
    assert_string_equal(json_string_value(json_object_get(js, "holds")), "0-1:0-3");
    assert_false(json_is_true(json_object_get(js, "dense")));
    assert_string_equal(json_string_value(json_object_get(js, "fingerprint")),
                        json_string_value(json_object_get(jf, "fingerprint")));
    json_decref(js);
    json_decref(jf);
    rc = vindex(&out, &err, "slice", dir, "--experts", "0-9:0", sl, NULL);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(err, "layer 9 out of range"));
    free(out);
    free(err);
}

/* A model whose first layers are dense (deepseek2-tiny: layer 0, then two MoE layers of 16
 * experts): "all" names the experts the model has, as the expert node reads it, and inspect counts
 * only the MoE layers' extents. */
static void test_leading_dense_layers(void **state) {
    (void)state;
    char dir[1024], sl[1024];
    snprintf(dir, sizeof dir, "%s/ds", mwt_tmp);
    snprintf(sl, sizeof sl, "%s/ds-all", mwt_tmp);
    char *out, *err;
    assert_int_equal(vindex(NULL, NULL, "extract",
                            (char *)mwt_fixture("llamacpp/deepseek2-tiny/model.gguf"), dir, NULL),
                     0);
    assert_int_equal(vindex(&out, NULL, "inspect", dir, NULL), 0);
    assert_non_null(strstr(out, "holds        1-2:0-15 (32 of 32 extents"));
    free(out);
    int rc = vindex(&out, &err, "slice", dir, "--experts", "all", "--no-dense", sl, NULL);
    if (rc != 0) fail_msg("slice --experts all: exit %d: %s", rc, err);
    free(out);
    free(err);
    json_t *j = inspect_json(sl);
    assert_string_equal(json_string_value(json_object_get(j, "holds")), "1-2:0-15");
    assert_int_equal(json_integer_value(json_object_get(j, "extents_held")), 32);
    assert_int_equal(json_integer_value(json_object_get(j, "extents_total")), 32);
    json_decref(j);
    /* a range over the dense layer names no experts there either */
    snprintf(sl, sizeof sl, "%s/ds-range", mwt_tmp);
    assert_int_equal(vindex(NULL, NULL, "slice", dir, "--experts", "0-1:0-3", sl, NULL), 0);
    j = inspect_json(sl);
    assert_string_equal(json_string_value(json_object_get(j, "holds")), "1:0-3");
    json_decref(j);
    /* but a set with nothing else is an error, not an empty slice */
    snprintf(sl, sizeof sl, "%s/ds-none", mwt_tmp);
    assert_int_equal(vindex(NULL, &err, "slice", dir, "--experts", "0:0-3", sl, NULL), 1);
    assert_non_null(strstr(err, "names no expert"));
    free(err);
}

static void test_synth_both_formats(void **state) {
    (void)state;
    char gguf[1024], vx[1024], vx2[1024];
    snprintf(gguf, sizeof gguf, "%s/q.gguf", mwt_tmp);
    snprintf(vx, sizeof vx, "%s/q-vindex", mwt_tmp);
    snprintf(vx2, sizeof vx2, "%s/q-extracted", mwt_tmp);
#define SYNTH_ARGS                                                                                 \
    "synth", "--arch", "qwen3moe", "--layers", "2", "--hidden", "256", "--heads", "4",             \
        "--kv-heads", "2", "--experts", "4", "--top-k", "2", "--expert-ff", "512", "--vocab",      \
        "300", "--seed", "9"
    assert_int_equal(vindex(NULL, NULL, SYNTH_ARGS, "--format", "gguf", gguf, NULL), 0);
    assert_int_equal(vindex(NULL, NULL, SYNTH_ARGS, "--format", "vindex", vx, NULL), 0);
    assert_int_equal(vindex(NULL, NULL, "extract", gguf, vx2, NULL), 0);
    json_t *a = inspect_json(vx), *b = inspect_json(vx2);
    assert_string_equal(json_string_value(json_object_get(a, "fingerprint")),
                        json_string_value(json_object_get(b, "fingerprint")));
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(a, "provenance"), "input")), "synth");
    json_decref(a);
    json_decref(b);
    assert_int_equal(vindex(NULL, NULL, "verify", vx, NULL), 0);
}

static void test_usage_and_input_errors(void **state) {
    (void)state;
    char *out, *err;
    assert_int_equal(vindex(NULL, NULL, NULL), 2);
    assert_int_equal(vindex(NULL, NULL, "frobnicate", NULL), 2);
    assert_int_equal(vindex(NULL, NULL, "extract", "only-one", NULL), 2);
    assert_int_equal(vindex(NULL, NULL, "verify", NULL), 2);
    assert_int_equal(vindex(NULL, NULL, "--help", NULL), 0);
    int rc = vindex(&out, &err, "synth", "--arch", "gpt-oss", "--format", "gguf", "x.gguf", NULL);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(err, "--layers is required"));
    free(out);
    free(err);
    char bad[1024], dir[1024];
    snprintf(bad, sizeof bad, "%s/bad.gguf", mwt_tmp);
    snprintf(dir, sizeof dir, "%s/never", mwt_tmp);
    assert_int_equal(mwt_write_file(bad,
                                    "GGUF\3\0\0\0\xff\xff\xff\xff\xff\xff\xff\x7f"
                                    "\0\0\0\0\0\0\0\0",
                                    24),
                     0);
    rc = vindex(&out, &err, "extract", bad, dir, NULL);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(err, bad));
    assert_non_null(strstr(err, "tensor count"));
    free(out);
    free(err);
    rc = vindex(&out, &err, "verify", mwt_tmp, NULL);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(err, "not a vindex"));
    free(out);
    free(err);
}

/* ---- crafted inputs ------------------------------------------------------------------------ */

static void put(FILE *f, const void *p, size_t n) {
    assert_int_equal(fwrite(p, 1, n, f), n);
}
static void put_u32(FILE *f, uint32_t v) {
    put(f, &v, 4);
}
static void put_u64(FILE *f, uint64_t v) {
    put(f, &v, 8);
}
static void put_str(FILE *f, const char *s) {
    put_u64(f, strlen(s));
    put(f, s, strlen(s));
}

/* A GGUF v3 file with general.architecture gpt-oss and one f32 tensor `name` of shape
 * {ne0, ne1}. */
static void write_crafted(const char *path, const char *name, uint64_t ne0, uint64_t ne1) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    put(f, "GGUF", 4);
    put_u32(f, 3);
    put_u64(f, 1); /* tensors */
    put_u64(f, 1); /* metadata pairs */
    put_str(f, "general.architecture");
    put_u32(f, 8); /* string */
    put_str(f, "gpt-oss");
    put_str(f, name);
    put_u32(f, 2);
    put_u64(f, ne0);
    put_u64(f, ne1);
    put_u32(f, 0); /* f32 */
    put_u64(f, 0); /* offset */
    long at = ftell(f);
    static const uint8_t zero[128];
    put(f, zero, (size_t)((32 - at % 32) % 32) + 64);
    assert_int_equal(fclose(f), 0);
}

/* Entries of dir whose name starts with prefix. */
static int count_entries(const char *dir, const char *prefix) {
    int n = 0;
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));) n += !strncmp(e->d_name, prefix, strlen(prefix));
    closedir(d);
    return n;
}

static void test_crafted_gguf_refused(void **state) {
    (void)state;
    static const struct {
        const char *name;
        uint64_t ne0, ne1;
        const char *needle;
    } cases[] = {{"blk.0.attn_norm.weight", 0, 4, "zero-sized dimension ne[0]"},
                 {"blk.0.attn_norm.weight", 4, 0, "zero-sized dimension ne[1]"},
                 {"blk.0.attn_norm.weight", 1ull << 60, 0, "zero-sized dimension ne[1]"},
                 /* found by fuzz_extract: the manifest's fingerprint no longer matched */
                 {"\xf4oken_embd.weight", 4, 4, "invalid UTF-8 at byte 0"},
                 {"blk.0.\xed\xa0\x80", 4, 4, "invalid UTF-8 at byte 6"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char gguf[1024], outdir[1024];
        snprintf(gguf, sizeof gguf, "%s/crafted-%zu.gguf", mwt_tmp, i);
        snprintf(outdir, sizeof outdir, "%s/crafted-%zu.vindex", mwt_tmp, i);
        write_crafted(gguf, cases[i].name, cases[i].ne0, cases[i].ne1);
        char *err;
        int rc = vindex(NULL, &err, "extract", gguf, outdir, NULL);
        if (rc != 1 || !strstr(err, cases[i].needle) ||
            (i < 3 && !strstr(err, "blk.0.attn_norm.weight")))
            fail_msg("case %zu: exit %d: %s", i, rc, err);
        free(err);
        assert_int_equal(access(outdir, F_OK), -1);
    }
    assert_int_equal(count_entries(mwt_tmp, "crafted-0.vindex"), 0);
}

/* An extract that fails midway (a file size limit of 1 MiB stops dense.bin, 4 MiB, after its
 * first MiB) removes what it wrote: no OUT, no OUT.partial-* directory. */
static void test_failed_extract_leaves_nothing(void **state) {
    (void)state;
    char outdir[1024], script[4096];
    snprintf(outdir, sizeof outdir, "%s/cut.vindex", mwt_tmp);
    snprintf(script, sizeof script, "trap '' XFSZ; ulimit -f 1024; exec '%s' extract '%s' '%s'",
             mwt_bin("vindex"), mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf"), outdir);
    char *argv[] = {"/bin/bash", "-c", script, NULL};
    char *err = NULL;
    int rc = mwt_run(argv, NULL, &err, 120000);
    if (rc != 1 || !strstr(err, "cut.vindex")) fail_msg("exit %d: %s", rc, err);
    free(err);
    assert_int_equal(access(outdir, F_OK), -1);
    assert_int_equal(count_entries(mwt_tmp, "cut.vindex"), 0);
    /* the same extract without the limit succeeds into the same path */
    rc = vindex(NULL, &err, "extract", (char *)mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf"),
                outdir, NULL);
    if (rc != 0) fail_msg("exit %d: %s", rc, err);
    free(err);
    assert_int_equal(count_entries(mwt_tmp, "cut.vindex"), 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_extract_inspect_verify),
        cmocka_unit_test(test_leading_dense_layers),
        cmocka_unit_test(test_synth_both_formats),
        cmocka_unit_test(test_usage_and_input_errors),
        cmocka_unit_test(test_crafted_gguf_refused),
        cmocka_unit_test(test_failed_extract_leaves_nothing),
    };
    return cmocka_run_group_tests_name("vindex_cli", tests, mwt_tmp_setup, mwt_tmp_teardown);
}
