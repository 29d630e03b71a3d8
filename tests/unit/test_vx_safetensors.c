/* tests/unit/test_vx_safetensors.c — the safetensors reader: dtypes, shapes, offsets, metadata,
 * sharded sets through the index, and every corruption we can think of giving a clear error. */
#include "tests/support/mw_test.h"
#include "tests/support/mwt_st.h"
#include "kernels/kn.h"
#include "vindex/vx_safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_reads_dtypes_shapes_and_metadata(void **state) {
    mwt_fx *f = *state;
    mwt_st *w = mwt_st_new();
    float a[6] = {1, 2, 3, 4, 5, 6};
    uint16_t b[4] = {0x3f80, 0x4000, 0xbf80, 0x0000};
    uint8_t u[5] = {9, 8, 7, 6, 5};
    int64_t i64[2] = {-1, 1LL << 40};
    uint8_t f8[3] = {1, 2, 3};
    uint8_t f4[2] = {0x21, 0x43}; /* four 4-bit values */
    mwt_st_add(w, "w.f32", "F32", 2, (int64_t[]){2, 3}, a, sizeof a);
    mwt_st_add(w, "b.bf16", "BF16", 1, (int64_t[]){4}, b, sizeof b);
    mwt_st_add(w, "u8", "U8", 3, (int64_t[]){1, 5, 1}, u, sizeof u);
    mwt_st_add(w, "i64", "I64", 1, (int64_t[]){2}, i64, sizeof i64);
    mwt_st_add(w, "scalar", "F8_E4M3", 0, NULL, f8, 1);
    mwt_st_add(w, "empty", "F16", 2, (int64_t[]){0, 7}, NULL, 0);
    mwt_st_add(w, "fp8", "F8_E5M2", 1, (int64_t[]){3}, f8, sizeof f8);
    mwt_st_add(w, "fp4", "F4", 1, (int64_t[]){4}, f4, sizeof f4);
    mwt_st_meta(w, "format", "pt");
    mwt_st_meta(w, "note", "hello");
    assert_int_equal(mwt_st_write(w, f->file), 0);
    mwt_st_free(w);

    mw_err err = {{0}};
    vx_st_file *st;
    assert_int_equal(vx_st_open(f->file, &st, &err), 0);
    assert_int_equal(vx_st_n_tensors(st), 8);
    /* sorted by name */
    for (size_t i = 1; i < vx_st_n_tensors(st); i++)
        assert_true(strcmp(vx_st_tensor_at(st, i - 1)->name, vx_st_tensor_at(st, i)->name) < 0);
    const vx_st_tensor *t = vx_st_find(st, "w.f32");
    assert_non_null(t);
    assert_int_equal(t->dtype, VX_ST_F32);
    assert_int_equal(t->n_dims, 2);
    assert_int_equal(t->shape[0], 2);
    assert_int_equal(t->shape[1], 3);
    assert_int_equal(t->n_elements, 6);
    assert_int_equal(t->nbytes, 24);
    assert_memory_equal(t->data, a, sizeof a);
    t = vx_st_find(st, "b.bf16");
    assert_int_equal(t->dtype, VX_ST_BF16);
    assert_int_equal(vx_st_dtype_kn(t->dtype), KN_BF16);
    assert_memory_equal(t->data, b, sizeof b);
    /* the offset is absolute: the bytes are at that position of the file */
    size_t len;
    uint8_t *raw = mwt_read_file(f->file, &len);
    assert_memory_equal(raw + t->offset, b, sizeof b);
    free(raw);
    t = vx_st_find(st, "u8");
    assert_int_equal(t->n_dims, 3);
    assert_int_equal(vx_st_dtype_kn(t->dtype), -1);
    assert_memory_equal(t->data, u, sizeof u);
    t = vx_st_find(st, "i64");
    assert_memory_equal(t->data, i64, sizeof i64);
    t = vx_st_find(st, "scalar");
    assert_int_equal(t->n_dims, 0);
    assert_int_equal(t->n_elements, 1);
    assert_int_equal(t->nbytes, 1);
    t = vx_st_find(st, "empty");
    assert_int_equal(t->n_elements, 0);
    assert_int_equal(t->nbytes, 0);
    assert_int_equal(vx_st_find(st, "fp4")->nbytes, 2);
    assert_string_equal(vx_st_dtype_name(vx_st_find(st, "fp8")->dtype), "F8_E5M2");
    assert_null(vx_st_find(st, "absent"));
    assert_int_equal(vx_st_n_meta(st), 2);
    assert_string_equal(vx_st_meta_get(st, "note"), "hello");
    assert_string_equal(vx_st_meta_key(st, 0), "format");
    assert_null(vx_st_meta_get(st, "nope"));
    vx_st_close(st);
}

static void test_empty_header_is_a_file_without_tensors(void **state) {
    mwt_fx *f = *state;
    assert_int_equal(mwt_st_write_raw(f->file, 2, "{}", NULL, 0), 0);
    vx_st_file *st;
    mw_err err = {{0}};
    assert_int_equal(vx_st_open(f->file, &st, &err), 0);
    assert_int_equal(vx_st_n_tensors(st), 0);
    vx_st_close(st);
}

/* Writes a file from a header and data, expects vx_st_open to fail with all `needles` in the
 * message (the path is always required). */
static void expect_bad(const mwt_fx *f, uint64_t hlen, const char *header, size_t data_len,
                       const char *const *needles) {
    uint8_t data[64] = {0};
    assert_true(data_len <= sizeof data);
    assert_int_equal(mwt_st_write_raw(f->file, hlen, header, data, data_len), 0);
    vx_st_file *st = (vx_st_file *)1;
    mw_err err = {{0}};
    assert_int_equal(vx_st_open(f->file, &st, &err), -1);
    assert_null(st);
    if (!strstr(err.msg, f->file)) fail_msg("message lacks the path: %s", err.msg);
    for (; *needles; needles++)
        if (!strstr(err.msg, *needles)) fail_msg("message lacks '%s': %s", *needles, err.msg);
}

#define BAD(header, data_len, ...)                                                                 \
    expect_bad(f, strlen(header), header, data_len, (const char *const[]){__VA_ARGS__, NULL})

static void test_corrupted_headers_fail_cleanly(void **state) {
    mwt_fx *f = *state;
    /* shorter than the length field */
    assert_int_equal(mwt_write_file(f->file, "abc", 3), 0);
    vx_st_file *st;
    mw_err err = {{0}};
    assert_int_equal(vx_st_open(f->file, &st, &err), -1);
    assert_non_null(strstr(err.msg, "too short"));
    /* header length past the end of the file (a truncated header) */
    expect_bad(f, 100, "{\"a\":", 0, (const char *const[]){"past the end", NULL});
    /* header length past any sane size */
    expect_bad(f, 1ull << 40, "{}", 0, (const char *const[]){"exceeds", NULL});
    expect_bad(f, UINT64_MAX, "{}", 0, (const char *const[]){"exceeds", NULL});
    BAD("[1, 2]", 0, "not a JSON object");
    BAD("{\"a\": 1", 0, "not valid JSON");
    BAD("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, \"a\": {}}", 4,
        "not valid JSON");
    BAD("{\"__metadata__\": {\"k\": 1}}", 0, "__metadata__", "'k'");
    BAD("{\"__metadata__\": [1]}", 0, "__metadata__");
    BAD("{\"t\": 5}", 0, "'t'", "not a JSON object");
    BAD("{\"t\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", 4, "'t'", "dtype");
    BAD("{\"t\": {\"dtype\": \"F13\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4, "'t'",
        "unknown dtype 'F13'");
    BAD("{\"t\": {\"dtype\": \"F32\", \"data_offsets\": [0, 4]}}", 4, "'t'", "shape");
    BAD("{\"t\": {\"dtype\": \"F32\", \"shape\": [-1], \"data_offsets\": [0, 4]}}", 4, "'t'",
        "shape[0]");
    BAD("{\"t\": {\"dtype\": \"F32\", \"shape\": [1.5], \"data_offsets\": [0, 4]}}", 4, "'t'",
        "shape[0]");
    BAD("{\"t\": {\"dtype\": \"F32\", \"shape\": [1,1,1,1,1,1,1,1,1], \"data_offsets\": [0, 4]}}",
        4, "'t'", "rank 9");
    BAD("{\"t\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296], \"data_offsets\": [0, "
        "4]}}",
        4, "'t'", "overflows");
    BAD("{\"t\": {\"dtype\": \"U8\", \"shape\": [4611686018427387904, 4], \"data_offsets\": [0, "
        "4]}}",
        4, "'t'", "overflows");
    BAD("{\"t\": {\"dtype\": \"F4\", \"shape\": [3], \"data_offsets\": [0, 2]}}", 2, "'t'",
        "whole bytes");
    BAD("{\"t\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0]}}", 4, "'t'",
        "data_offsets");
    BAD("{\"t\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, -4]}}", 4, "'t'",
        "data_offsets");
    BAD("{\"t\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 4]}}", 8, "'t'",
        "out of range");
    /* offsets out of range */
    BAD("{\"t\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 4, "'t'",
        "out of range");
    BAD("{\"t\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [18446744073709551615, "
        "0]}}",
        4, "not valid JSON");
    /* shape/size mismatch */
    BAD("{\"t\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, 8]}}", 8, "'t'",
        "need 12");
    BAD("{\"t\": {\"dtype\": \"BF16\", \"shape\": [2, 2], \"data_offsets\": [0, 4]}}", 8, "'t'",
        "BF16");
    /* overlapping ranges, in either header order */
    BAD("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, \"b\": "
        "{\"dtype\": "
        "\"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}",
        12, "'a'", "'b'", "overlap");
    BAD("{\"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 12]}, \"a\": "
        "{\"dtype\": "
        "\"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}}",
        16, "'a'", "'b'", "overlap");
    /* a tensor inside another, after a third one that ends early */
    BAD("{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}, \"b\": "
        "{\"dtype\": "
        "\"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, \"c\": {\"dtype\": \"F32\", "
        "\"shape\": "
        "[1], \"data_offsets\": [8, 12]}}",
        16, "overlap");
}

static void test_unsorted_adjacent_and_empty_ranges_are_fine(void **state) {
    mwt_fx *f = *state;
    const char *h = "{\"z\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 12]}, "
                    "\"e\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [4, 4]}, "
                    "\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}";
    uint8_t data[16] = {0};
    assert_int_equal(mwt_st_write_raw(f->file, strlen(h), h, data, sizeof data), 0);
    vx_st_file *st;
    mw_err err = {{0}};
    assert_int_equal(vx_st_open(f->file, &st, &err), 0);
    assert_int_equal(vx_st_n_tensors(st), 3);
    vx_st_close(st);
}

static void test_missing_and_non_regular_files(void **state) {
    mwt_fx *f = *state;
    vx_st_file *st;
    mw_err err = {{0}};
    assert_int_equal(vx_st_open("/nonexistent/x.safetensors", &st, &err), -1);
    assert_non_null(strstr(err.msg, "/nonexistent/x.safetensors"));
    assert_int_equal(vx_st_open(f->dir, &st, &err), -1);
    assert_non_null(strstr(err.msg, "not a regular file"));
}

/* A header of `len` bytes: {"t": PREFIX UNIT UNIT ... SUFFIX}, a huge or deep structure where a
 * tensor entry belongs. */
static char *repeat_header(const char *prefix, const char *unit, const char *suffix, size_t n) {
    size_t len = 8 + strlen(prefix) + n * strlen(unit) + strlen(suffix);
    char *h = malloc(len + 1);
    assert_non_null(h);
    size_t k = (size_t)sprintf(h, "{\"t\": %s", prefix);
    for (size_t i = 0; i < n; i++) k += (size_t)sprintf(h + k, "%s", unit);
    sprintf(h + k, "%s}", suffix);
    return h;
}

/* jansson builds a whole document before it can be checked; what it would build is bounded by the
 * size of the text first, so a hostile header fails fast without a huge allocation. */
static void test_header_structure_is_bounded(void **state) {
    mwt_fx *f = *state;
    static const struct {
        const char *prefix, *unit, *suffix;
        size_t n;
        const char *fault;
    } cases[] = {
        {"", "[", "", 100000, "nested deeper than 8 levels"},
        {"[", "{},", "{}]", 1 << 20, "too many JSON objects"},
        {"[", "[],", "[]]", 1 << 20, "too many JSON arrays"},
        {"[", "0,", "0]", 1 << 20, "too many JSON keys and values"},
        {"{", "\"\":0,", "\"\":1}", 1 << 20, "too many JSON keys and values"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *h = repeat_header(cases[i].prefix, cases[i].unit, cases[i].suffix, cases[i].n);
        expect_bad(f, strlen(h), h, 0, (const char *const[]){"header", cases[i].fault, NULL});
        free(h);
    }
    /* brackets and commas inside a (long) name are text, not structure */
    char *name = malloc(100001);
    assert_non_null(name);
    for (size_t i = 0; i < 100000; i++) name[i] = "[{,:}]"[i % 6];
    name[100000] = '\0';
    /* many small tensors with short names are what real headers look like: they open */
    mwt_st *w = mwt_st_new();
    char n[32];
    float v = 1;
    for (int i = 0; i < 5000; i++) {
        snprintf(n, sizeof n, "t%d", i);
        mwt_st_add(w, n, "F32", 1, (int64_t[]){1}, &v, sizeof v);
    }
    mwt_st_add(w, name, "F32", 0, NULL, &v, sizeof v);
    assert_int_equal(mwt_st_write(w, f->file), 0);
    mwt_st_free(w);
    free(name);
    vx_st_file *st;
    mw_err err = {{0}};
    if (vx_st_open(f->file, &st, &err)) fail_msg("%s", err.msg);
    assert_int_equal(vx_st_n_tensors(st), 5001);
    vx_st_close(st);
}

/* Names reach messages, listings and terminals: control characters are refused (and never echoed
 * raw); any other character, '/' and ".." included, is just part of a name. */
static void test_tensor_names(void **state) {
    mwt_fx *f = *state;
    static const struct {
        const char *json_name, *fault;
    } bad[] = {
        {"a\\u001b[31mb", "U+001B at byte 1"},
        {"\\u0007", "U+0007 at byte 0"},
        {"ab\\u007f", "U+007F at byte 2"},
        {"abc\\u009b", "U+009B at byte 3"},
        {"x\\n", "U+000A"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char h[256];
        snprintf(h, sizeof h,
                 "{\"%s\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}",
                 bad[i].json_name);
        expect_bad(f, strlen(h), h, 4,
                   (const char *const[]){"control character", bad[i].fault, NULL});
        vx_st_file *st;
        mw_err err = {{0}};
        assert_int_equal(vx_st_open(f->file, &st, &err), -1);
        for (const char *p = err.msg; *p; p++) assert_true((unsigned char)*p >= 0x20 && *p != 0x7f);
    }
    static const char *const fine[] = {"model/layers/0/w", "../../etc/passwd", "/abs", "\u03a9"};
    mwt_st *w = mwt_st_new();
    float v = 2;
    for (size_t i = 0; i < 4; i++) mwt_st_add(w, fine[i], "F32", 1, (int64_t[]){1}, &v, sizeof v);
    assert_int_equal(mwt_st_write(w, f->file), 0);
    mwt_st_free(w);
    vx_st_file *st;
    mw_err err = {{0}};
    if (vx_st_open(f->file, &st, &err)) fail_msg("%s", err.msg);
    for (size_t i = 0; i < 4; i++) assert_non_null(vx_st_find(st, fine[i]));
    vx_st_close(st);
}

/* ---- sets ----------------------------------------------------------------------------------- */

static void write_part(const char *dir, const char *file, const char *const *names) {
    mwt_st *w = mwt_st_new();
    for (int i = 0; names[i]; i++) {
        float v[2] = {(float)i, (float)strlen(names[i])};
        mwt_st_add(w, names[i], "F32", 1, (int64_t[]){2}, v, sizeof v);
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    assert_int_equal(mwt_st_write(w, path), 0);
    mwt_st_free(w);
}

static void write_index(const char *dir, const char *json) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, VX_ST_INDEX_NAME);
    assert_int_equal(mwt_write_file(path, json, strlen(json)), 0);
}

static void expect_set_error(const char *dir, const char *needle) {
    vx_st_set *s = (vx_st_set *)1;
    mw_err err = {{0}};
    assert_int_equal(vx_st_set_open(dir, &s, &err), -1);
    assert_null(s);
    if (!strstr(err.msg, needle)) fail_msg("message lacks '%s': %s", needle, err.msg);
}

static void test_sharded_set_through_index(void **state) {
    mwt_fx *f = *state;
    write_part(f->dir, "m-1.safetensors", (const char *const[]){"b", "a", NULL});
    write_part(f->dir, "m-2.safetensors", (const char *const[]){"c", NULL});
    write_part(f->dir, "stray.safetensors", (const char *const[]){"a", NULL}); /* not indexed */
    write_index(f->dir, "{\"metadata\": {\"total_size\": 24}, \"weight_map\": {\"a\": "
                        "\"m-1.safetensors\", \"c\": \"m-2.safetensors\", \"b\": "
                        "\"m-1.safetensors\"}}");
    vx_st_set *s;
    mw_err err = {{0}};
    assert_int_equal(vx_st_set_open(f->dir, &s, &err), 0);
    assert_int_equal(vx_st_set_n_files(s), 2);
    assert_string_equal(vx_st_set_file_name(s, 0), "m-1.safetensors");
    assert_string_equal(vx_st_set_file_name(s, 1), "m-2.safetensors");
    assert_int_equal(vx_st_set_n_tensors(s), 3);
    int file = -1;
    const vx_st_tensor *t = vx_st_set_find(s, "c", &file);
    assert_non_null(t);
    assert_int_equal(file, 1);
    assert_int_equal(vx_st_set_lookup(s, "c"), 2);
    assert_string_equal(vx_st_set_tensor_at(s, 0, &file)->name, "a");
    assert_int_equal(file, 0);
    assert_null(vx_st_set_find(s, "d", NULL));
    vx_st_set_close(s);

    static const struct {
        const char *index, *fault;
    } bad[] = {
        /* the index names a file that does not exist */
        {"{\"weight_map\": {\"a\": \"m-1.safetensors\", \"x\": \"m-9.safetensors\"}}",
         "m-9.safetensors"},
        /* a mapped tensor is not in its shard */
        {"{\"weight_map\": {\"a\": \"m-1.safetensors\", \"b\": \"m-1.safetensors\", \"c\": "
         "\"m-1.safetensors\"}}",
         "'c' is mapped to m-1.safetensors"},
        /* a shard tensor the index does not list */
        {"{\"weight_map\": {\"a\": \"m-1.safetensors\", \"c\": \"m-2.safetensors\"}}", "'b'"},
        /* a tensor in two shards: the index maps it to one, the other holds it too */
        {"{\"weight_map\": {\"a\": \"m-1.safetensors\", \"b\": \"m-1.safetensors\", \"c\": "
         "\"m-2.safetensors\", \"x\": \"stray.safetensors\"}}",
         "stray.safetensors"},
        {"{\"weight_map\": {\"a\": \"../m-1.safetensors\"}}", "does not name a file"},
        {"{\"weight_map\": [1]}", "weight_map"},
        {"{\"weight_map\": {}}", "empty"},
        {"{\"weight_map\": {\"a\": \"m-1.safetensors\"}, \"weight_map\": {}}", "not valid JSON"},
        {"[]", "not a JSON object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_index(f->dir, bad[i].index);
        expect_set_error(f->dir, bad[i].fault);
    }
}

static void test_directory_without_index(void **state) {
    mwt_fx *f = *state;
    expect_set_error(f->dir, "no *.safetensors");
    write_part(f->dir, "b.safetensors", (const char *const[]){"y", NULL});
    write_part(f->dir, "a.safetensors", (const char *const[]){"x", "z", NULL});
    vx_st_set *s;
    mw_err err = {{0}};
    assert_int_equal(vx_st_set_open(f->dir, &s, &err), 0);
    assert_int_equal(vx_st_set_n_files(s), 2);
    assert_string_equal(vx_st_set_file_name(s, 0), "a.safetensors");
    int file;
    assert_non_null(vx_st_set_find(s, "y", &file));
    assert_int_equal(file, 1);
    vx_st_set_close(s);
    /* the same tensor in two files */
    write_part(f->dir, "c.safetensors", (const char *const[]){"x", NULL});
    expect_set_error(f->dir, "'x' appears in both a.safetensors and c.safetensors");
    /* a corrupt member names its file */
    char path[4096];
    snprintf(path, sizeof path, "%s/c.safetensors", f->dir);
    assert_int_equal(mwt_st_write_raw(path, 4, "[1] ", NULL, 0), 0);
    expect_set_error(f->dir, "c.safetensors: header is not a JSON object");
}

/* A checkpoint's files must resolve inside its directory — except a hub cache snapshot's links
 * into the repository's blobs/; a FIFO is refused rather than waited on. */
static void test_links_and_special_files(void **state) {
    mwt_fx *f = *state;
    char ck[4200], path[4200], target[4200];
    snprintf(ck, sizeof ck, "%s/ck", f->dir);
    assert_int_equal(mkdir(ck, 0755), 0);
    write_part(f->dir, "outside.safetensors", (const char *const[]){"a", NULL});
    /* a shard linking out of the directory, found by the scan or named by the index */
    snprintf(path, sizeof path, "%s/m.safetensors", ck);
    snprintf(target, sizeof target, "%s/outside.safetensors", f->dir);
    assert_int_equal(symlink(target, path), 0);
    expect_set_error(ck, "outside the checkpoint directory");
    write_index(ck, "{\"weight_map\": {\"a\": \"m.safetensors\"}}");
    expect_set_error(ck, "outside the checkpoint directory");
    /* the same through a relative link, and the index itself linking out */
    unlink(path);
    assert_int_equal(symlink("../outside.safetensors", path), 0);
    expect_set_error(ck, "m.safetensors: resolves to");
    unlink(path);
    write_part(ck, "real.safetensors", (const char *const[]){"a", NULL});
    snprintf(path, sizeof path, "%s/%s", ck, VX_ST_INDEX_NAME);
    unlink(path);
    write_index(f->dir, "{\"weight_map\": {\"a\": \"real.safetensors\"}}");
    snprintf(target, sizeof target, "%s/%s", f->dir, VX_ST_INDEX_NAME);
    assert_int_equal(symlink(target, path), 0);
    expect_set_error(ck, "outside the checkpoint directory");
    /* a dangling index is an error, not a reason to scan the directory instead */
    unlink(path);
    assert_int_equal(symlink("nowhere.json", path), 0);
    expect_set_error(ck, VX_ST_INDEX_NAME);
    unlink(path);
    /* links that stay inside are followed */
    snprintf(path, sizeof path, "%s/link.safetensors", ck);
    assert_int_equal(symlink("real.safetensors", path), 0);
    write_index(ck, "{\"weight_map\": {\"a\": \"link.safetensors\"}}");
    vx_st_set *s;
    mw_err err = {{0}};
    if (vx_st_set_open(ck, &s, &err)) fail_msg("%s", err.msg);
    vx_st_set_close(s);
    /* a FIFO shard fails at once */
    unlink(path);
    assert_int_equal(mkfifo(path, 0644), 0);
    expect_set_error(ck, "link.safetensors: not a regular file");
    vx_st_file *st;
    assert_int_equal(vx_st_open(path, &st, &err), -1);
    assert_non_null(strstr(err.msg, "not a regular file"));
    unlink(path);
    /* a Hugging Face hub cache: snapshots/REV/NAME -> ../../blobs/HASH */
    char repo[4200], blob[4300];
    snprintf(repo, sizeof repo, "%s/models--org--tiny", f->dir);
    snprintf(path, sizeof path, "%s/blobs", repo);
    assert_int_equal(mkdir(repo, 0755), 0);
    assert_int_equal(mkdir(path, 0755), 0);
    write_part(path, "3f2a", (const char *const[]){"a", "b", NULL});
    snprintf(path, sizeof path, "%s/snapshots", repo);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/snapshots/0123abcd", repo);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(blob, sizeof blob, "%s/model.safetensors", path);
    assert_int_equal(symlink("../../blobs/3f2a", blob), 0);
    if (vx_st_set_open(path, &s, &err)) fail_msg("%s", err.msg);
    assert_int_equal(vx_st_set_n_tensors(s), 2);
    vx_st_set_close(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        MWT_FX_TEST(test_reads_dtypes_shapes_and_metadata),
        MWT_FX_TEST(test_empty_header_is_a_file_without_tensors),
        MWT_FX_TEST(test_corrupted_headers_fail_cleanly),
        MWT_FX_TEST(test_unsorted_adjacent_and_empty_ranges_are_fine),
        MWT_FX_TEST(test_missing_and_non_regular_files),
        MWT_FX_TEST(test_header_structure_is_bounded),
        MWT_FX_TEST(test_tensor_names),
        MWT_FX_TEST(test_sharded_set_through_index),
        MWT_FX_TEST(test_directory_without_index),
        MWT_FX_TEST(test_links_and_special_files),
    };
    return cmocka_run_group_tests_name("vx_safetensors", tests, NULL, NULL);
}
