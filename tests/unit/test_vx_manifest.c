/* tests/unit/test_vx_manifest.c — manifest.json as untrusted input: every kind of bad statement
 * (bad JSON, wrong format or version, offsets past the end, overlaps, misalignment, absurd counts,
 * unknown types, unsafe file names, tampered metadata, missing or resized files) is refused with
 * an error saying what is wrong; and metadata of every GGUF value type survives the JSON form
 * exactly. */
#include "tests/support/mw_test.h"
#include "vindex/vx_gguf_internal.h"
#include "vindex/vx_manifest.h"
#include "vindex/vx_meta_internal.h"
#include "vindex/vx_source.h"
#include "vindex/vx_synth.h"
#include "vindex/vx_vindex.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char base[512];

/* The group's directory holds a small extracted vindex every test copies. */
static int setup(void **state) {
    if (mwt_tmp_setup(state)) return -1;
    snprintf(base, sizeof base, "%s/base", mwt_tmp);
    const char *args[] = {"arch",  "qwen3moe", "layers", "2",     "hidden", "256",       "heads",
                          "2",     "experts",  "4",      "top-k", "2",      "expert-ff", "256",
                          "vocab", "300",      "seed",   "5",     NULL};
    mw_err err;
    vx_input *in = NULL;
    int rc = vx_synth_input_kv(args, &in, &err);
    if (rc == 0) rc = vx_extract(in, base, NULL, NULL, &err);
    vx_input_close(in);
    if (rc) {
        fprintf(stderr, "%s\n", err.msg);
        mwt_tmp_teardown(state);
    }
    return rc;
}

/* A fresh copy of the base vindex; returns its path (static buffer). */
static const char *copy_base(const char *tag) {
    static char dir[600];
    snprintf(dir, sizeof dir, "%s/%s", mwt_tmp, tag);
    mwt_rmrf(dir);
    assert_int_equal(mkdir(dir, 0755), 0);
    DIR *d = opendir(base);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char from[1024], to[1024];
        snprintf(from, sizeof from, "%s/%s", base, e->d_name);
        snprintf(to, sizeof to, "%s/%s", dir, e->d_name);
        size_t n;
        void *p = mwt_read_file(from, &n);
        assert_non_null(p);
        assert_int_equal(mwt_write_file(to, p, n), 0);
        free(p);
    }
    closedir(d);
    return dir;
}

static json_t *load_manifest(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    assert_non_null(j);
    return j;
}

static void save_manifest(const char *dir, json_t *j) {
    char path[1024];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    assert_int_equal(json_dump_file(j, path, JSON_INDENT(1)), 0);
    json_decref(j);
}

/* The manifest must be refused by read, mount and verify alike, with `fault` in the message. */
static void expect_refused(const char *dir, const char *tag, const char *fault) {
    vx_manifest m;
    mw_err err = {{0}};
    if (vx_manifest_read(dir, &m, &err) == 0) {
        vx_manifest_free(&m);
        fail_msg("%s: manifest accepted, expected '%s'", tag, fault);
    }
    if (!strstr(err.msg, fault)) fail_msg("%s: error '%s' lacks '%s'", tag, err.msg, fault);
    vx_source *s;
    assert_int_equal(vx_source_open(dir, NULL, &s, &err), -1);
    assert_int_equal(vx_verify(dir, NULL, NULL, NULL, &err), -1);
}

#define LAYER0    json_array_get(json_object_get(j, "moe_layers"), 0)
#define EXT(i)    json_array_get(json_object_get(LAYER0, "extents"), i)
#define TENSOR(i) json_array_get(json_object_get(j, "tensors"), i)
#define META(i)   json_array_get(json_object_get(j, "metadata"), i)

typedef void (*mutate_fn)(json_t *j);

static void m_format(json_t *j) {
    json_object_set_new(j, "format", json_string("gguf"));
}
static void m_version(json_t *j) {
    json_object_set_new(j, "version", json_integer(2));
}
static void m_ext_past_end(json_t *j) {
    json_object_set_new(EXT(1), "offset", json_integer(1ll << 40));
}
static void m_ext_overlap(json_t *j) {
    json_object_set(EXT(1), "offset", json_object_get(EXT(0), "offset"));
}
static void m_ext_misaligned(json_t *j) {
    json_object_set_new(EXT(1), "offset",
                        json_integer(json_integer_value(json_object_get(EXT(1), "offset")) + 8));
}
static void m_ext_expert_range(json_t *j) {
    json_object_set_new(EXT(3), "expert", json_integer(99));
}
static void m_ext_order(json_t *j) {
    json_object_set_new(EXT(1), "expert", json_integer(0));
}
static void m_too_many_ext(json_t *j) {
    json_t *ext = json_object_get(LAYER0, "extents");
    for (int i = 0; i < 5000; i++) json_array_append(ext, json_array_get(ext, 0));
}
static void m_absurd_experts(json_t *j) {
    json_object_set_new(j, "experts", json_integer(1ll << 40));
}
static void m_dense_past_end(json_t *j) {
    json_object_set_new(TENSOR(1), "offset", json_integer(1ll << 33));
}
static void m_dense_overlap(json_t *j) {
    json_object_set(TENSOR(1), "offset", json_object_get(TENSOR(0), "offset"));
}
static void m_nbytes(json_t *j) {
    json_object_set_new(TENSOR(2), "nbytes", json_integer(12));
}
static void m_type(json_t *j) {
    json_object_set_new(TENSOR(2), "type", json_string("q9_X"));
}
static void m_neg_ne(json_t *j) {
    json_array_set_new(json_object_get(TENSOR(2), "ne"), 0, json_integer(-4));
}
static void m_dup_tensor(json_t *j) {
    json_object_set(TENSOR(1), "name", json_object_get(TENSOR(0), "name"));
}
static void m_unsafe_carried(json_t *j) {
    json_array_append_new(json_object_get(json_object_get(j, "files"), "carried"),
                          json_pack("{s:s,s:i,s:s,s:s}", "name", "../../etc/passwd", "size", 1,
                                    "blake2b", "00", "sha256", "00"));
}
static void m_layer_file(json_t *j) {
    json_object_set_new(LAYER0, "file", json_string("../experts-000.bin"));
}
static void m_tampered_meta(json_t *j) {
    for (size_t i = 0; i < json_array_size(json_object_get(j, "metadata")); i++)
        if (!strcmp(json_string_value(json_object_get(META(i), "key")), "qwen3moe.context_length"))
            json_object_set_new(META(i), "value", json_integer(1234));
}
static void m_meta_range(json_t *j) {
    for (size_t i = 0; i < json_array_size(json_object_get(j, "metadata")); i++)
        if (!strcmp(json_string_value(json_object_get(META(i), "key")), "qwen3moe.context_length"))
            json_object_set_new(META(i), "value", json_integer(-1));
}
static void m_meta_type(json_t *j) {
    json_object_set_new(META(0), "type", json_string("u128"));
}
static void m_meta_deep(json_t *j) {
    json_t *v = json_pack("{s:s,s:[]}", "elem", "u8", "value");
    for (int i = 0; i < 20; i++) v = json_pack("{s:s,s:[o]}", "elem", "arr", "value", v);
    json_array_append_new(json_object_get(j, "metadata"),
                          json_pack("{s:s,s:s,s:s,s:o}", "key", "x.deep", "type", "arr", "elem",
                                    "arr", "value", json_object_get(v, "value")));
    json_incref(json_object_get(v, "value"));
    json_decref(v);
}
static void m_holds(json_t *j) {
    json_object_set_new(j, "holds", json_string("0:0"));
}
static void m_part_offset(json_t *j) {
    json_object_set_new(json_array_get(json_object_get(LAYER0, "parts"), 1), "offset",
                        json_integer(64));
}
static void m_part_tensor(json_t *j) {
    json_object_set_new(json_array_get(json_object_get(LAYER0, "parts"), 0), "tensor",
                        json_string("blk.9.ffn_gate_exps.weight"));
}
static void m_layer_range(json_t *j) {
    json_object_set_new(LAYER0, "layer", json_integer(7));
}
static void m_dense_flag(json_t *j) {
    json_object_set_new(j, "dense", json_false());
}
static void m_no_provenance(json_t *j) {
    json_object_del(j, "provenance");
}

static void test_bad_manifests_are_refused(void **state) {
    (void)state;
    static const struct {
        mutate_fn fn;
        const char *tag, *fault;
    } cases[] = {
        {m_format, "format", "not a moewire-vindex manifest"},
        {m_version, "version", "unsupported format version"},
        {m_ext_past_end, "ext_past_end", "extends past the end of experts-000.bin"},
        {m_ext_overlap, "ext_overlap", "overlap"},
        {m_ext_misaligned, "ext_misaligned", "not 64-aligned"},
        {m_ext_expert_range, "ext_range", "'expert' = 99 is out of range"},
        {m_ext_order, "ext_order", "ascending order"},
        {m_too_many_ext, "too_many_ext", "extents for 4 experts"},
        {m_absurd_experts, "absurd", "'experts' = 1099511627776 is out of range"},
        {m_dense_past_end, "dense_past_end", "extends past the end of dense.bin"},
        {m_dense_overlap, "dense_overlap", "overlap in dense.bin"},
        {m_nbytes, "nbytes", "nbytes 12, but its type and shape make"},
        {m_type, "type", "unknown type"},
        {m_neg_ne, "neg_ne", "non-negative"},
        {m_dup_tensor, "dup", "listed twice"},
        {m_unsafe_carried, "unsafe", "unsafe file name '../../etc/passwd'"},
        {m_layer_file, "layer_file", "file must be 'experts-000.bin'"},
        {m_tampered_meta, "tampered", "does not match the metadata and tensor table"},
        {m_meta_range, "meta_range", "value -1 out of range for u32"},
        {m_meta_type, "meta_type", "unknown value type"},
        {m_meta_deep, "meta_deep", "nested too deeply"},
        {m_holds, "holds", "'holds' (0:0) disagrees"},
        {m_part_offset, "part_offset", "the layout puts it at"},
        {m_part_tensor, "part_tensor", "unknown tensor 'blk.9.ffn_gate_exps.weight'"},
        {m_layer_range, "layer_range", "'layer' = 7 is out of range"},
        {m_dense_flag, "dense_flag", "'dense' says false but files.dense is present"},
        {m_no_provenance, "provenance", "'provenance' must be an object"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *dir = copy_base(cases[i].tag);
        json_t *j = load_manifest(dir);
        cases[i].fn(j);
        save_manifest(dir, j);
        expect_refused(dir, cases[i].tag, cases[i].fault);
    }
}

static void test_bad_files_are_refused(void **state) {
    (void)state;
    const char *dir = copy_base("badjson");
    char path[1024];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    assert_int_equal(mwt_write_file(path, "{\"format\": \"moewire-vindex\", ", 30), 0);
    expect_refused(dir, "badjson", "bad JSON");
    assert_int_equal(mwt_write_file(path, "{\"a\": 1, \"a\": 2}", 16), 0);
    expect_refused(dir, "dupkey", "bad JSON");
    unlink(path);
    expect_refused(dir, "nomanifest", "not a vindex");
    dir = copy_base("missing");
    snprintf(path, sizeof path, "%s/experts-001.bin", dir);
    unlink(path);
    expect_refused(dir, "missing", "experts-001.bin: missing");
    dir = copy_base("resized");
    snprintf(path, sizeof path, "%s/experts-001.bin", dir);
    assert_int_equal(truncate(path, 1000), 0);
    expect_refused(dir, "resized", "experts-001.bin: size 1000, but the manifest says");
    dir = copy_base("dense_resized");
    snprintf(path, sizeof path, "%s/dense.bin", dir);
    assert_int_equal(truncate(path, 64), 0);
    expect_refused(dir, "dense_resized", "dense.bin: size 64");
    /* the untouched copy is fine */
    dir = copy_base("fine");
    mw_err err;
    assert_int_equal(vx_verify(dir, NULL, NULL, NULL, &err), 0);
}

/* Random byte corruption of manifest.json: every outcome is a clean accept or a clean refusal. */
static void test_random_manifest_corruption(void **state) {
    (void)state;
    const char *dir = copy_base("random");
    char path[1024];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    size_t n;
    char *orig = mwt_read_file(path, &n);
    assert_non_null(orig);
    uint64_t rng = 0x853c49e6748fea9bull;
    int refused = 0;
    for (int it = 0; it < 300; it++) {
        char *c = malloc(n);
        memcpy(c, orig, n);
        for (int f = 0; f < 1 + it % 3; f++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            /* digits and quotes matter most: bias the damage towards them */
            size_t pos = (size_t)(rng >> 33) % n;
            static const char subst[] = "0123456789\"-:,[]{}a";
            c[pos] = subst[(rng >> 20) % (sizeof subst - 1)];
        }
        assert_int_equal(mwt_write_file(path, c, n), 0);
        vx_manifest m;
        mw_err err;
        if (vx_manifest_read(dir, &m, &err) == 0)
            vx_manifest_free(&m);
        else
            refused++;
        free(c);
    }
    assert_true(refused > 0);
    assert_int_equal(mwt_write_file(path, orig, n), 0);
    free(orig);
}

/* ---- metadata JSON ------------------------------------------------------------------------- */

static void encode(const vx_meta *m, vx__buf *b) {
    memset(b, 0, sizeof *b);
    for (size_t i = 0; i < vx_meta_count(m); i++)
        vx__gguf_put_kv(b, vx_meta_key(m, i), vx__meta_val(m, i));
}

static void test_metadata_json_round_trip(void **state) {
    (void)state;
    vx_meta *m = vx_meta_new();
    uint8_t u8 = 255;
    int8_t i8 = -128;
    uint16_t u16 = 65535;
    int16_t i16 = -32768;
    int64_t i64 = INT64_MIN;
    vx_meta_set_scalar(m, "a.u8", VX_U8, &u8);
    vx_meta_set_scalar(m, "a.i8", VX_I8, &i8);
    vx_meta_set_scalar(m, "a.u16", VX_U16, &u16);
    vx_meta_set_scalar(m, "a.i16", VX_I16, &i16);
    vx_meta_set_u32(m, "a.u32", UINT32_MAX);
    vx_meta_set_i32(m, "a.i32", INT32_MIN);
    vx_meta_set_u64(m, "a.u64", UINT64_MAX);
    vx_meta_set_scalar(m, "a.i64", VX_I64, &i64);
    vx_meta_set_f32(m, "a.f32", 9.999999747378752e-06f);
    vx_meta_set_f32(m, "a.f32nan", NAN);
    vx_meta_set_f64(m, "a.f64inf", -INFINITY);
    vx_meta_set_f64(m, "a.f64", 0.1);
    vx_meta_set_bool(m, "a.bool", true);
    vx_meta_set_str(m, "a.str", "h\0i", 3);
    vx_meta_set_str(m, "a.bad_utf8", "\xff\xfe", 2);
    const char *strs[] = {"Ġthe", "\xc3\x28", ""};
    vx_meta_set_arr_str(m, "a.strs", strs, NULL, 3);
    const float fs[3] = {1.5f, INFINITY, -0.0f};
    vx_meta_set_arr(m, "a.fs", VX_F32, fs, 3);
    const uint64_t us[2] = {0, UINT64_MAX};
    vx_meta_set_arr(m, "a.us", VX_U64, us, 2);
    vx_meta_set_arr(m, "a.empty", VX_I32, NULL, 0);
    /* a nested array of string arrays, built as GGUF would give it */
    vx_meta *tmpm = vx_meta_new();
    vx_meta_set_arr_str(tmpm, "x", strs, NULL, 2);
    vx__val inner0, inner1;
    vx__val_copy(&inner0, vx__meta_val(tmpm, 0));
    vx__val_copy(&inner1, vx__meta_val(tmpm, 0));
    vx__val nested = {.type = VX_ARR};
    nested.u.arr.elem = VX_ARR;
    nested.u.arr.n = 2;
    nested.u.arr.data = malloc(2 * sizeof(vx__val));
    ((vx__val *)nested.u.arr.data)[0] = inner0;
    ((vx__val *)nested.u.arr.data)[1] = inner1;
    assert_int_equal(vx__meta_put(m, "a.nested", 8, &nested, true), 0);
    vx_meta_free(tmpm);

    json_t *j = vx_meta_to_json(m);
    assert_non_null(j);
    char *txt = json_dumps(j, JSON_REAL_PRECISION(17));
    json_decref(j);
    json_error_t je;
    j = json_loads(txt, JSON_ALLOW_NUL, &je);
    assert_non_null(j);
    free(txt);
    vx_meta *back = vx_meta_new();
    mw_err err;
    if (vx_meta_from_json(j, back, &err)) fail_msg("%s", err.msg);
    json_decref(j);
    vx__buf a, b;
    encode(m, &a);
    encode(back, &b);
    assert_int_equal(a.n, b.n);
    assert_memory_equal(a.p, b.p, a.n);
    vx__buf_free(&a);
    vx__buf_free(&b);
    vx_meta_free(m);
    vx_meta_free(back);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_manifests_are_refused),
        cmocka_unit_test(test_bad_files_are_refused),
        cmocka_unit_test(test_random_manifest_corruption),
        cmocka_unit_test(test_metadata_json_round_trip),
    };
    return cmocka_run_group_tests_name("vx_manifest", tests, setup, mwt_tmp_teardown);
}
