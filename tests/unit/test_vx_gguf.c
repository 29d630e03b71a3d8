/* tests/unit/test_vx_gguf.c — the GGUF reader and writer: the llama.cpp fixtures read exactly as
 * tensor_types.json describes them, hand-built corrupted files each fail with an error naming the
 * file and the fault (never a crash, hang or huge allocation), random corruption never crashes,
 * and the writer round-trips every value type. */
#include "tests/support/mw_test.h"
#include "vindex/vx_gguf.h"
#include "vindex/vx_meta.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a GGUF byte builder (independent of the writer under test) ----------------------------- */

typedef struct gb {
    uint8_t *p;
    size_t n, cap;
} gb;

static void gb_raw(gb *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 256;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void gb_u8(gb *b, uint8_t v) {
    gb_raw(b, &v, 1);
}
static void gb_u32(gb *b, uint32_t v) {
    gb_raw(b, &v, 4);
}
static void gb_u64(gb *b, uint64_t v) {
    gb_raw(b, &v, 8);
}
static void gb_str(gb *b, const char *s) {
    gb_u64(b, strlen(s));
    gb_raw(b, s, strlen(s));
}
static void gb_pad(gb *b, size_t align) {
    while (b->n % align) gb_u8(b, 0);
}

typedef struct tdesc {
    const char *name;
    uint32_t n_dims;
    uint64_t ne[6];
    uint32_t type;
    uint64_t offset;
} tdesc;

/* A file's pieces, each of which a test may replace to build a corrupted variant. */
typedef struct spec {
    const char *magic;
    uint32_t version;
    uint64_t n_tensors_override, n_kv_override; /* 0 = the real count */
    void (*extra_kv)(gb *b, int *n_kv);         /* appends more KVs */
    size_t n_t;
    tdesc t[4];
    uint32_t alignment; /* alignment of the data section (0 = 32) */
    size_t data_bytes;  /* bytes of tensor data written after the header */
} spec;

static void base_kv(gb *b, int *n) {
    gb_str(b, "general.architecture");
    gb_u32(b, 8);
    gb_str(b, "gpt-oss");
    gb_str(b, "gpt-oss.block_count");
    gb_u32(b, 4);
    gb_u32(b, 1);
    *n += 2;
}

static spec valid_spec(void) {
    spec s = {.magic = "GGUF", .version = 3, .n_t = 2, .data_bytes = 256};
    s.t[0] = (tdesc){"a.weight", 2, {8, 2}, 0 /* F32 */, 0};
    s.t[1] = (tdesc){"b.weight", 1, {32}, 1 /* F16 */, 64};
    return s;
}

static void build(const spec *s, gb *b) {
    memset(b, 0, sizeof *b);
    gb_raw(b, s->magic, 4);
    gb_u32(b, s->version);
    gb_u64(b, s->n_tensors_override ? s->n_tensors_override : s->n_t);
    size_t kv_count_at = b->n;
    gb_u64(b, 0);
    int n_kv = 0;
    base_kv(b, &n_kv);
    if (s->extra_kv) s->extra_kv(b, &n_kv);
    uint64_t nkv = s->n_kv_override ? s->n_kv_override : (uint64_t)n_kv;
    memcpy(b->p + kv_count_at, &nkv, 8);
    for (size_t i = 0; i < s->n_t; i++) {
        const tdesc *t = &s->t[i];
        gb_str(b, t->name);
        gb_u32(b, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims && d < 6; d++) gb_u64(b, t->ne[d]);
        gb_u32(b, t->type);
        gb_u64(b, t->offset);
    }
    gb_pad(b, s->alignment ? s->alignment : 32);
    for (size_t i = 0; i < s->data_bytes; i++) gb_u8(b, (uint8_t)(i * 7 + 1));
}

/* Writes bytes to a temp file and opens it; returns the open's result, err filled. */
static int open_bytes(const void *p, size_t n, const char *tag, vx_gguf **g, mw_err *err,
                      char *path, size_t path_len) {
    snprintf(path, path_len, "%s/%s.gguf", mwt_tmp, tag);
    assert_int_equal(mwt_write_file(path, p, n), 0);
    return vx_gguf_open(path, g, err);
}

/* Builds the spec, opens it, and expects failure with a message naming the file and containing
 * `fault`. */
static void expect_fault(const spec *s, const char *tag, const char *fault) {
    gb b;
    build(s, &b);
    vx_gguf *g = NULL;
    mw_err err = {{0}};
    char path[512];
    int rc = open_bytes(b.p, b.n, tag, &g, &err, path, sizeof path);
    free(b.p);
    if (rc == 0) {
        vx_gguf_close(g);
        fail_msg("%s: expected an error containing '%s', but the file opened", tag, fault);
    }
    assert_null(g);
    if (!strstr(err.msg, path) || !strstr(err.msg, fault))
        fail_msg("%s: error '%s' should name %s and contain '%s'", tag, err.msg, path, fault);
}

static void test_valid_base_opens(void **state) {
    (void)state;
    spec s = valid_spec();
    gb b;
    build(&s, &b);
    vx_gguf *g;
    mw_err err;
    char path[512];
    assert_int_equal(open_bytes(b.p, b.n, "valid", &g, &err, path, sizeof path), 0);
    assert_int_equal(vx_gguf_n_tensors(g), 2);
    const vx_tensor *t = vx_gguf_find(g, "b.weight");
    assert_non_null(t);
    assert_int_equal(t->type, KN_F16);
    assert_int_equal(t->nbytes, 64);
    assert_int_equal(t->offset, vx_gguf_data_offset(g) + 64);
    assert_ptr_equal(t->data, vx_gguf_base(g) + t->offset);
    assert_memory_equal(t->data, b.p + t->offset, 64);
    assert_null(vx_gguf_find(g, "nope"));
    vx_gguf_close(g);
    free(b.p);
}

static void test_bad_magic_and_version(void **state) {
    (void)state;
    spec s = valid_spec();
    s.magic = "GGUX";
    expect_fault(&s, "magic", "bad magic");
    s = valid_spec();
    s.version = 1;
    expect_fault(&s, "v1", "unsupported GGUF version 1");
    s.version = 4;
    expect_fault(&s, "v4", "unsupported GGUF version 4");
    s.version = 0x03000000u;
    expect_fault(&s, "bigendian", "big-endian");
    s = valid_spec();
    s.version = 2; /* v2 reads like v3 */
    gb b;
    build(&s, &b);
    vx_gguf *g;
    mw_err err;
    char path[512];
    assert_int_equal(open_bytes(b.p, b.n, "v2", &g, &err, path, sizeof path), 0);
    assert_int_equal(vx_gguf_version(g), 2);
    vx_gguf_close(g);
    free(b.p);
}

static void test_absurd_counts(void **state) {
    (void)state;
    spec s = valid_spec();
    s.n_tensors_override = 1ull << 62;
    expect_fault(&s, "ntensors", "tensor count");
    s = valid_spec();
    s.n_tensors_override = 1000; /* plausible-looking but more than the file holds */
    expect_fault(&s, "ntensors2", "tensor count 1000 cannot fit");
    s = valid_spec();
    s.n_kv_override = UINT64_MAX;
    expect_fault(&s, "nkv", "metadata count");
    s = valid_spec();
    s.n_kv_override = 40; /* reads past the real KVs into the tensor directory */
    gb b;
    build(&s, &b);
    vx_gguf *g = NULL;
    mw_err err;
    char path[512];
    assert_int_equal(open_bytes(b.p, b.n, "nkv2", &g, &err, path, sizeof path), -1);
    assert_non_null(strstr(err.msg, path));
    free(b.p);
}

static void kv_huge_string(gb *b, int *n) {
    gb_str(b, "general.name");
    gb_u32(b, 8);
    gb_u64(b, 1ull << 60);
    (*n)++;
}
static void kv_huge_key(gb *b, int *n) {
    gb_u64(b, 1ull << 40);
    (*n)++;
}
static void kv_huge_u8_array(gb *b, int *n) {
    gb_str(b, "x.arr");
    gb_u32(b, 9);
    gb_u32(b, 0);
    gb_u64(b, 1ull << 61);
    (*n)++;
}
static void kv_huge_str_array(gb *b, int *n) {
    gb_str(b, "tokenizer.ggml.tokens");
    gb_u32(b, 9);
    gb_u32(b, 8);
    gb_u64(b, 1ull << 58);
    (*n)++;
}
static void kv_str_array_bad_elem_len(gb *b, int *n) {
    gb_str(b, "tokenizer.ggml.tokens");
    gb_u32(b, 9);
    gb_u32(b, 8);
    gb_u64(b, 2);
    gb_str(b, "ok");
    gb_u64(b, 1ull << 50);
    (*n)++;
}
static void kv_unknown_type(gb *b, int *n) {
    gb_str(b, "x.weird");
    gb_u32(b, 13);
    gb_u32(b, 0);
    (*n)++;
}
static void kv_unknown_elem(gb *b, int *n) {
    gb_str(b, "x.weird");
    gb_u32(b, 9);
    gb_u32(b, 99);
    gb_u64(b, 1);
    (*n)++;
}
static void kv_deep_nesting(gb *b, int *n) {
    gb_str(b, "x.deep");
    gb_u32(b, 9);
    for (int i = 0; i < 200; i++) {
        gb_u32(b, 9);
        gb_u64(b, 1);
    }
    gb_u32(b, 0);
    gb_u64(b, 0);
    (*n)++;
}
static void kv_duplicate(gb *b, int *n) {
    gb_str(b, "gpt-oss.block_count");
    gb_u32(b, 4);
    gb_u32(b, 2);
    (*n)++;
}
static void kv_empty_key(gb *b, int *n) {
    gb_str(b, "");
    gb_u32(b, 4);
    gb_u32(b, 2);
    (*n)++;
}
static void kv_nul_key(gb *b, int *n) {
    gb_u64(b, 3);
    gb_raw(b, "a\0b", 3);
    gb_u32(b, 4);
    gb_u32(b, 2);
    (*n)++;
}
static void kv_newline_key(gb *b, int *n) {
    gb_str(b, "general.\nname");
    gb_u32(b, 4);
    gb_u32(b, 2);
    (*n)++;
}
static void kv_align3(gb *b, int *n) {
    gb_str(b, "general.alignment");
    gb_u32(b, 4);
    gb_u32(b, 3);
    (*n)++;
}
static void kv_align_str(gb *b, int *n) {
    gb_str(b, "general.alignment");
    gb_u32(b, 8);
    gb_str(b, "32");
    (*n)++;
}
static void kv_align1(gb *b, int *n) {
    gb_str(b, "general.alignment");
    gb_u32(b, 4);
    gb_u32(b, 1);
    (*n)++;
}

static void test_bad_metadata(void **state) {
    (void)state;
    static const struct {
        void (*kv)(gb *, int *);
        const char *tag, *fault;
    } cases[] = {
        {kv_huge_string, "hugestr", "string length 1152921504606846976"},
        {kv_huge_key, "hugekey", "string length 1099511627776"},
        {kv_huge_u8_array, "hugearr", "array of 2305843009213693952 u8 values cannot fit"},
        {kv_huge_str_array, "hugestrarr", "array of 288230376151711744 strings cannot fit"},
        {kv_str_array_bad_elem_len, "badelem", "tokenizer.ggml.tokens"},
        {kv_unknown_type, "vtype", "unknown value type 13"},
        {kv_unknown_elem, "etype", "unknown array element type 99"},
        {kv_deep_nesting, "deep", "nested deeper"},
        {kv_duplicate, "dupkv", "duplicate metadata key 'gpt-oss.block_count'"},
        {kv_empty_key, "emptykey", "key length 0"},
        {kv_nul_key, "nulkey", "NUL byte"},
        {kv_newline_key, "nlkey", "key contains control byte 0x0a"},
        {kv_align3, "align3", "general.alignment 3 is not a power of two"},
        {kv_align_str, "alignstr", "general.alignment' has type str"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        spec s = valid_spec();
        s.extra_kv = cases[i].kv;
        expect_fault(&s, cases[i].tag, cases[i].fault);
    }
}

static void test_bad_tensor_directory(void **state) {
    (void)state;
    spec s = valid_spec();
    s.t[1].offset = 1 << 20;
    expect_fault(&s, "pastend", "extends past the end of the file");
    s = valid_spec();
    s.t[1].offset = 32; /* a.weight is 64 bytes at 0 */
    expect_fault(&s, "overlap", "overlaps tensor 'a.weight'");
    s = valid_spec();
    s.t[1].type = 77;
    expect_fault(&s, "type77", "unknown ggml type id 77");
    s.t[1].type = 4; /* a retired ggml type id */
    expect_fault(&s, "type4", "unknown ggml type id 4");
    s = valid_spec();
    s.t[1].offset = 48;
    expect_fault(&s, "misaligned", "not a multiple of the alignment 32");
    s = valid_spec();
    s.t[0].n_dims = 5;
    s.t[0].ne[2] = s.t[0].ne[3] = s.t[0].ne[4] = 1;
    expect_fault(&s, "ndims5", "has 5 dimensions");
    s = valid_spec();
    s.t[0].n_dims = 0;
    expect_fault(&s, "ndims0", "has 0 dimensions");
    s = valid_spec();
    s.t[0].n_dims = 3;
    s.t[0].ne[1] = 1ull << 40;
    s.t[0].ne[2] = 1ull << 40;
    expect_fault(&s, "overflow", "overflows");
    s = valid_spec();
    s.t[0].ne[1] = 1ull << 63;
    expect_fault(&s, "negne", "out of range");
    s = valid_spec();
    s.t[1].type = 8; /* Q8_0: 32-element blocks */
    s.t[1].ne[0] = 48;
    expect_fault(&s, "blocks", "not a multiple of the q8_0 block size 32");
    s = valid_spec();
    s.t[1].name = "a.weight";
    expect_fault(&s, "dupname", "duplicate tensor name 'a.weight'");
    s = valid_spec();
    s.t[1].name = "";
    expect_fault(&s, "emptyname", "name length 0");
    s = valid_spec();
    s.t[1].name = "b.\x1b[2Jweight";
    expect_fault(&s, "escname", "name contains control byte 0x1b");
    s = valid_spec();
    s.data_bytes = 100; /* b.weight (64 bytes at 64) ends at 128 */
    expect_fault(&s, "shortdata", "extends past the end");
    /* alignment 1 is legal GGUF, but an F32 tensor must still sit on a 4-byte boundary */
    s = valid_spec();
    s.extra_kv = kv_align1;
    s.alignment = 1;
    s.t[1].offset = 65;
    s.t[1].type = 0;
    s.t[1].ne[0] = 4;
    expect_fault(&s, "natural", "misaligned for f32");
}

static void test_tiny_files(void **state) {
    (void)state;
    vx_gguf *g;
    mw_err err;
    char path[512];
    assert_int_equal(open_bytes("", 0, "empty", &g, &err, path, sizeof path), -1);
    assert_non_null(strstr(err.msg, "truncated"));
    assert_int_equal(open_bytes("GGUF\3\0\0\0", 8, "short", &g, &err, path, sizeof path), -1);
    assert_non_null(strstr(err.msg, path));
    assert_int_equal(vx_gguf_open(mwt_tmp, &g, &err), -1); /* a directory */
    assert_non_null(strstr(err.msg, "not a regular file"));
    assert_int_equal(vx_gguf_open("/nonexistent/x.gguf", &g, &err), -1);
    assert_non_null(strstr(err.msg, "/nonexistent/x.gguf"));
}

/* Every prefix of a valid file (with all value types and nested arrays) fails cleanly. */
static void kv_everything(gb *b, int *n) {
    gb_str(b, "x.u8");
    gb_u32(b, 0);
    gb_u8(b, 7);
    gb_str(b, "x.f64");
    gb_u32(b, 12);
    double d = 0.1;
    gb_raw(b, &d, 8);
    gb_str(b, "x.strs");
    gb_u32(b, 9);
    gb_u32(b, 8);
    gb_u64(b, 3);
    gb_str(b, "alpha");
    gb_str(b, "");
    gb_str(b, "gamma");
    gb_str(b, "x.nested");
    gb_u32(b, 9);
    gb_u32(b, 9);
    gb_u64(b, 2);
    gb_u32(b, 8);
    gb_u64(b, 1);
    gb_str(b, "in");
    gb_u32(b, 5);
    gb_u64(b, 2);
    gb_u32(b, 1);
    gb_u32(b, 0xffffffffu);
    *n += 4;
}

static void test_every_truncation_fails(void **state) {
    (void)state;
    spec s = valid_spec();
    s.extra_kv = kv_everything;
    gb b;
    build(&s, &b);
    vx_gguf *g;
    mw_err err;
    char path[512];
    assert_int_equal(open_bytes(b.p, b.n, "full", &g, &err, path, sizeof path), 0);
    long at = vx_meta_find(vx_gguf_meta(g), "x.nested");
    assert_true(at >= 0);
    assert_int_equal(vx_meta_arr_type(vx_gguf_meta(g), (size_t)at), VX_ARR);
    assert_int_equal(vx_meta_arr_len(vx_gguf_meta(g), (size_t)at), 2);
    const char *str;
    size_t len;
    assert_int_equal(vx_meta_arr_str(vx_gguf_meta(g), "x.strs", 2, &str, &len, &err), 1);
    assert_string_equal(str, "gamma");
    assert_int_equal(vx_meta_arr_str(vx_gguf_meta(g), "x.strs", 1, &str, &len, &err), 1);
    assert_int_equal(len, 0);
    vx_gguf_close(g);
    /* the last tensor ends at data offset + 128; every shorter prefix must fail */
    size_t header = (b.n - s.data_bytes);
    for (size_t cut = 0; cut < header + 128; cut++) {
        assert_int_equal(open_bytes(b.p, cut, "cut", &g, &err, path, sizeof path), -1);
        if (!strstr(err.msg, path))
            fail_msg("cut at %zu: error '%s' does not name the file", cut, err.msg);
    }
    free(b.p);
}

/* Random byte corruption of a valid file: opening must succeed or fail cleanly, never crash. */
static void test_random_corruption(void **state) {
    (void)state;
    spec s = valid_spec();
    s.extra_kv = kv_everything;
    gb b;
    build(&s, &b);
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    int failed = 0;
    for (int it = 0; it < 3000; it++) {
        uint8_t *c = malloc(b.n);
        memcpy(c, b.p, b.n);
        int flips = 1 + it % 4;
        for (int f = 0; f < flips; f++) {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            size_t pos = (size_t)(rng % (b.n - s.data_bytes));
            c[pos] = (uint8_t)(rng >> 32);
        }
        vx_gguf *g = NULL;
        mw_err err;
        char path[512];
        if (open_bytes(c, b.n, "rand", &g, &err, path, sizeof path) == 0)
            vx_gguf_close(g);
        else
            failed++;
        free(c);
    }
    assert_true(failed > 0);
    free(b.p);
}

/* ---- the llama.cpp fixtures ---------------------------------------------------------------- */

static vx_vtype vtype_of(const char *upper) {
    static const char *names[] = {"UINT8",  "INT8",    "UINT16", "INT16",  "UINT32",
                                  "INT32",  "FLOAT32", "BOOL",   "STRING", "ARRAY",
                                  "UINT64", "INT64",   "FLOAT64"};
    for (int i = 0; i < VX_VTYPE_COUNT; i++)
        if (!strcmp(upper, names[i])) return (vx_vtype)i;
    return VX_VTYPE_COUNT;
}

static void check_fixture(const char *dir) {
    char path[512], json[512];
    snprintf(path, sizeof path, "%s", mwt_fixture(dir));
    snprintf(json, sizeof json, "%s/tensor_types.json", path);
    strncat(path, "/model.gguf", sizeof path - strlen(path) - 1);
    json_error_t je;
    json_t *root = json_load_file(json, 0, &je);
    assert_non_null(root);
    vx_gguf *g;
    mw_err err;
    if (vx_gguf_open(path, &g, &err) != 0) fail_msg("%s", err.msg);
    const vx_meta *m = vx_gguf_meta(g);
    json_t *meta = json_object_get(root, "metadata");
    const char *key;
    json_t *v;
    size_t n_keys = 0;
    json_object_foreach(meta, key, v) {
        if (!strcmp(key, "GGUF.version")) {
            assert_int_equal(vx_gguf_version(g), json_integer_value(v));
            continue;
        }
        if (!strcmp(key, "GGUF.tensor_count")) {
            assert_int_equal(vx_gguf_n_tensors(g), json_integer_value(v));
            continue;
        }
        if (!strcmp(key, "GGUF.kv_count")) {
            assert_int_equal(vx_meta_count(m), json_integer_value(v));
            continue;
        }
        n_keys++;
        long i = vx_meta_find(m, key);
        if (i < 0) fail_msg("%s: key %s missing", dir, key);
        if (json_is_integer(v)) {
            int64_t x;
            assert_int_equal(vx_meta_get_i64(m, key, &x, &err), 1);
            assert_int_equal(x, json_integer_value(v));
        } else if (json_is_real(v)) {
            double x;
            assert_int_equal(vx_meta_get_f64(m, key, &x, &err), 1);
            if (x != json_real_value(v))
                fail_msg("%s: %s = %.17g, want %.17g", dir, key, x, json_real_value(v));
        } else if (json_is_boolean(v)) {
            bool x;
            assert_int_equal(vx_meta_get_bool(m, key, &x, &err), 1);
            assert_int_equal(x, json_is_true(v));
        } else if (!strncmp(json_string_value(v), "array[", 6)) {
            char et[32];
            unsigned long long n;
            assert_int_equal(sscanf(json_string_value(v), "array[%31[A-Z0-9], %llu]", et, &n), 2);
            assert_int_equal(vx_meta_type(m, (size_t)i), VX_ARR);
            assert_int_equal(vx_meta_arr_type(m, (size_t)i), vtype_of(et));
            assert_int_equal(vx_meta_arr_len(m, (size_t)i), n);
        } else {
            const char *x;
            assert_int_equal(vx_meta_get_str(m, key, &x, &err), 1);
            assert_string_equal(x, json_string_value(v));
        }
    }
    assert_int_equal(n_keys, vx_meta_count(m));
    json_t *tensors = json_object_get(root, "tensors");
    assert_int_equal(json_array_size(tensors), vx_gguf_n_tensors(g));
    size_t idx;
    json_array_foreach(tensors, idx, v) {
        const char *name = json_string_value(json_object_get(v, "name"));
        const vx_tensor *t = vx_gguf_find(g, name);
        if (!t) fail_msg("%s: tensor %s missing", dir, name);
        assert_ptr_equal(t, vx_gguf_tensor(g, idx)); /* directory order kept */
        mwt_check_tensor_entry(v, kn_type_name(t->type), t->n_dims, t->ne, t->nbytes);
        assert_int_equal(t->offset, json_integer_value(json_object_get(v, "data_offset")));
        assert_ptr_equal(t->data, vx_gguf_base(g) + t->offset);
        assert_int_equal((uintptr_t)t->data % 4, 0);
    }
    vx_gguf_close(g);
    json_decref(root);
}

static void test_fixture_gpt_oss(void **state) {
    (void)state;
    check_fixture("llamacpp/gpt-oss-tiny");
}

static void test_fixture_qwen3moe(void **state) {
    (void)state;
    check_fixture("llamacpp/qwen3moe-tiny");
}

/* ---- the writer ---------------------------------------------------------------------------- */

typedef struct fill_ctx {
    uint64_t pos;
    int calls;
} fill_ctx;

static int fill_pattern(void *ctx, void *dst, uint64_t nbytes, mw_err *err) {
    fill_ctx *c = ctx;
    for (uint64_t i = 0; i < nbytes; i++) ((uint8_t *)dst)[i] = (uint8_t)((c->pos + i) * 31 + 5);
    c->pos += nbytes;
    c->calls++;
    return 0;
}

static int fill_fails(void *ctx, void *dst, uint64_t nbytes, mw_err *err) {
    return mw_errf(err, "synthetic failure");
}

/* Every metadata kind, an F32 tensor from memory (data: 64 floats) and a Q8_0 one streamed by a
 * callback, written to path; a duplicate name and a row not a multiple of the block refused. */
static void write_sample(int alignment, const float *data, const char *path) {
    vx_gguf_writer *w = vx_gguf_writer_new((uint32_t)alignment);
    vx_meta *m = vx_gguf_writer_meta(w);
    assert_int_equal(vx_meta_set_str(m, "general.architecture", "qwen3moe", 8), 0);
    assert_int_equal(vx_meta_set_u32(m, "qwen3moe.block_count", 3), 0);
    assert_int_equal(vx_meta_set_i32(m, "x.i32", -5), 0);
    assert_int_equal(vx_meta_set_u64(m, "x.u64", UINT64_MAX), 0);
    assert_int_equal(vx_meta_set_f32(m, "x.f32", 1e-6f), 0);
    assert_int_equal(vx_meta_set_f64(m, "x.f64", -2.5), 0);
    assert_int_equal(vx_meta_set_bool(m, "x.bool", true), 0);
    int16_t i16 = -300;
    assert_int_equal(vx_meta_set_scalar(m, "x.i16", VX_I16, &i16), 0);
    const char *strs[] = {"a", "", "ccc"};
    assert_int_equal(vx_meta_set_arr_str(m, "x.strs", strs, NULL, 3), 0);
    const int32_t ints[] = {1, -2, 3};
    assert_int_equal(vx_meta_set_arr(m, "x.ints", VX_I32, ints, 3), 0);
    mw_err err;
    int64_t ne_a[2] = {16, 4};
    assert_int_equal(vx_gguf_writer_add(w, "a.weight", KN_F32, 2, ne_a, data, &err), 0);
    /* 3 rows of 32 q8_0 weights -> 3 × 34 bytes, streamed */
    fill_ctx fc = {0};
    int64_t ne_b[3] = {32, 3, 1};
    assert_int_equal(
        vx_gguf_writer_add_fill(w, "b.weight", KN_Q8_0, 3, ne_b, fill_pattern, &fc, &err), 0);
    assert_int_equal(vx_gguf_writer_add(w, "a.weight", KN_F32, 2, ne_a, data, &err), -1);
    assert_non_null(strstr(err.msg, "duplicate"));
    int64_t bad[1] = {33};
    assert_int_equal(vx_gguf_writer_add(w, "c.weight", KN_Q8_0, 1, bad, data, &err), -1);
    if (vx_gguf_writer_write(w, path, &err)) fail_msg("%s", err.msg);
    assert_int_equal(fc.pos, 102);
    vx_gguf_writer_free(w);
}

/* The file written by write_sample reads back: alignment, every value, both tensors. */
static void check_sample(int alignment, const float *data, const char *path) {
    mw_err err;
    vx_gguf *g;
    if (vx_gguf_open(path, &g, &err)) fail_msg("%s", err.msg);
    assert_int_equal(vx_gguf_alignment(g), alignment);
    const vx_meta *r = vx_gguf_meta(g);
    int64_t x;
    double d;
    bool bo;
    assert_int_equal(vx_meta_get_i64(r, "qwen3moe.block_count", &x, &err), 1);
    assert_int_equal(x, 3);
    assert_int_equal(vx_meta_get_i64(r, "x.i32", &x, &err), 1);
    assert_int_equal(x, -5);
    assert_int_equal(vx_meta_get_i64(r, "x.u64", &x, &err), -1); /* does not fit */
    assert_int_equal(vx_meta_get_f64(r, "x.u64", &d, &err), 1);
    assert_int_equal(vx_meta_get_f64(r, "x.f32", &d, &err), 1);
    assert_true(d == (double)1e-6f);
    assert_int_equal(vx_meta_get_bool(r, "x.bool", &bo, &err), 1);
    assert_true(bo);
    assert_int_equal(vx_meta_get_i64(r, "x.i16", &x, &err), 1);
    assert_int_equal(x, -300);
    assert_int_equal(vx_meta_arr_i64(r, "x.ints", 1, &x, &err), 1);
    assert_int_equal(x, -2);
    assert_int_equal(vx_meta_arr_i64(r, "x.ints", 3, &x, &err), -1);
    const char *s;
    size_t len;
    assert_int_equal(vx_meta_arr_str(r, "x.strs", 2, &s, &len, &err), 1);
    assert_string_equal(s, "ccc");
    const vx_tensor *a = vx_gguf_find(g, "a.weight"), *b = vx_gguf_find(g, "b.weight");
    assert_memory_equal(a->data, data, sizeof(float) * 64);
    assert_int_equal(b->nbytes, 102);
    assert_int_equal(b->n_dims, 3);
    for (int i = 0; i < 102; i++)
        assert_int_equal(((const uint8_t *)b->data)[i], (uint8_t)(i * 31 + 5));
    assert_int_equal(b->offset % (uint64_t)alignment, 0);
    vx_gguf_close(g);
}

static void test_writer_round_trip(void **state) {
    (void)state;
    float data[64];
    for (int i = 0; i < 64; i++) data[i] = (float)i * 0.5f;
    for (int alignment = 32; alignment <= 64; alignment += 32) {
        char path[512];
        snprintf(path, sizeof path, "%s/written-%d.gguf", mwt_tmp, alignment);
        write_sample(alignment, data, path);
        check_sample(alignment, data, path);
    }
}

/* A failing fill callback fails the write and leaves no file. */
static void test_writer_fill_failure(void **state) {
    (void)state;
    vx_gguf_writer *w = vx_gguf_writer_new(32);
    mw_err err;
    int64_t ne[1] = {8};
    assert_int_equal(vx_gguf_writer_add_fill(w, "z", KN_F32, 1, ne, fill_fails, NULL, &err), 0);
    char path[512];
    snprintf(path, sizeof path, "%s/failed.gguf", mwt_tmp);
    assert_int_equal(vx_gguf_writer_write(w, path, &err), -1);
    assert_non_null(strstr(err.msg, "synthetic failure"));
    assert_non_null(strstr(err.msg, "'z'"));
    vx_gguf_writer_free(w);
    FILE *f = fopen(path, "rb");
    assert_null(f);
}

/* The writer reproduces a fixture's metadata byte for byte (values and order). */
static void test_writer_copies_fixture_metadata(void **state) {
    (void)state;
    mw_err err;
    vx_gguf *g;
    if (vx_gguf_open(mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf"), &g, &err))
        fail_msg("%s", err.msg);
    vx_gguf_writer *w = vx_gguf_writer_new(32);
    const vx_meta *src = vx_gguf_meta(g);
    for (size_t i = 0; i < vx_meta_count(src); i++)
        assert_int_equal(vx_meta_copy_entry(vx_gguf_writer_meta(w), src, i), 0);
    char path[512];
    snprintf(path, sizeof path, "%s/meta-only.gguf", mwt_tmp);
    if (vx_gguf_writer_write(w, path, &err)) fail_msg("%s", err.msg);
    vx_gguf_writer_free(w);
    size_t n;
    uint8_t *bytes = mwt_read_file(path, &n);
    /* same header up to the tensor count; then the metadata section is identical */
    const uint8_t *orig = vx_gguf_base(g);
    assert_memory_equal(bytes, orig, 8);
    assert_memory_equal(bytes + 16, orig + 16, 8);
    size_t kv_end = n;
    while (kv_end > 24 && bytes[kv_end - 1] == 0) kv_end--; /* strip padding */
    assert_memory_equal(bytes + 24, orig + 24, kv_end - 24);
    free(bytes);
    vx_gguf_close(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_base_opens),
        cmocka_unit_test(test_bad_magic_and_version),
        cmocka_unit_test(test_absurd_counts),
        cmocka_unit_test(test_bad_metadata),
        cmocka_unit_test(test_bad_tensor_directory),
        cmocka_unit_test(test_tiny_files),
        cmocka_unit_test(test_every_truncation_fails),
        cmocka_unit_test(test_random_corruption),
        cmocka_unit_test(test_fixture_gpt_oss),
        cmocka_unit_test(test_fixture_qwen3moe),
        cmocka_unit_test(test_writer_round_trip),
        cmocka_unit_test(test_writer_fill_failure),
        cmocka_unit_test(test_writer_copies_fixture_metadata),
    };
    return cmocka_run_group_tests_name("vx_gguf", tests, mwt_tmp_setup, mwt_tmp_teardown);
}
