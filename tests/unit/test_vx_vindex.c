/* tests/unit/test_vx_vindex.c — the vindex container through the library: extract the llama.cpp
 * fixtures and read them back identical to the GGUF (metadata with types, dense bytes, every
 * expert slice, fingerprint); one flipped byte anywhere in an extent (weights, biases, padding)
 * fails verify and the mount naming that extent while other extents still mount; slices hold
 * exactly their extents; transcoding is recorded; synth round-trips through GGUF. */
#include "tests/support/mw_test.h"
#include "vindex/vx_gguf.h"
#include "vindex/vx_manifest.h"
#include "vindex/vx_source.h"
#include "vindex/vx_synth.h"
#include "vindex/vx_vindex.h"

#include <jansson.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char gpt_dir[512], qwen_dir[512];

static void extract_to(const char *src, const char *dir, const char *transcode) {
    vx_input *in;
    mw_err err;
    if (vx_input_open(src, &in, &err)) fail_msg("%s", err.msg);
    vx_extract_opts o = {.transcode = transcode};
    if (vx_extract(in, dir, &o, NULL, &err)) fail_msg("%s", err.msg);
    vx_input_close(in);
}

/* The group's directory holds both llama.cpp fixtures extracted. */
static int setup(void **state) {
    if (mwt_tmp_setup(state)) return -1;
    snprintf(gpt_dir, sizeof gpt_dir, "%s/gpt-oss", mwt_tmp);
    snprintf(qwen_dir, sizeof qwen_dir, "%s/qwen3moe", mwt_tmp);
    extract_to(mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf"), gpt_dir, NULL);
    extract_to(mwt_fixture("llamacpp/qwen3moe-tiny/model.gguf"), qwen_dir, NULL);
    return 0;
}

static vx_source *open_src(const char *path, const vx_source_opts *o) {
    vx_source *s;
    mw_err err;
    if (vx_source_open(path, o, &s, &err)) fail_msg("%s", err.msg);
    return s;
}

static void assert_mat_equal(const kn_mat *a, const kn_mat *b, const char *what, int l, int e) {
    if (!b->data) {
        assert_null(a->data);
        return;
    }
    if (a->type != b->type || a->rows != b->rows || a->cols != b->cols ||
        a->row_bytes != b->row_bytes)
        fail_msg("%s of (layer %d, expert %d): shape/type differ", what, l, e);
    assert_int_equal((uintptr_t)a->data % 64 == 0 || strstr(what, "up"), 1);
    if (memcmp(a->data, b->data, (size_t)(a->rows * (int64_t)a->row_bytes)) != 0)
        fail_msg("%s of (layer %d, expert %d): bytes differ", what, l, e);
}

/* A vindex source gives the model exactly what the GGUF source gives. */
static void check_same_as_gguf(const char *rel, const char *dir) {
    vx_source *g = open_src(mwt_fixture(rel), NULL), *v = open_src(dir, NULL);
    json_t *mg = vx_meta_to_json(vx_source_meta(g)), *mv = vx_meta_to_json(vx_source_meta(v));
    assert_true(json_equal(mg, mv));
    json_decref(mg);
    json_decref(mv);
    /* what the fingerprint still has to read: the GGUF's every tensor, then nothing; a vindex
     * stores it */
    uint64_t all = 0;
    for (size_t i = 0; i < vx_source_n_tensors(g); i++) all += vx_source_tensor_at(g, i)->nbytes;
    assert_true(all > 0);
    assert_true(vx_source_fingerprint_cost(g) == all);
    assert_true(vx_source_fingerprint_cost(v) == 0);
    assert_string_equal(vx_source_fingerprint(g), vx_source_fingerprint(v));
    assert_true(vx_source_fingerprint_cost(g) == 0);
    assert_string_equal(vx_source_arch(g), vx_source_arch(v));
    assert_int_equal(vx_source_n_tensors(g), vx_source_n_tensors(v));
    for (size_t i = 0; i < vx_source_n_tensors(g); i++) {
        const vx_tensor *t = vx_source_tensor_at(g, i);
        const vx_tensor *d = vx_source_tensor(g, t->name);
        if (!d) continue; /* expert tensor */
        const vx_tensor *w = vx_source_tensor(v, t->name);
        if (!w) fail_msg("%s: dense tensor %s missing from the vindex", dir, t->name);
        assert_int_equal(w->type, t->type);
        assert_int_equal(w->n_dims, t->n_dims);
        assert_memory_equal(w->ne, t->ne, sizeof t->ne);
        assert_int_equal(w->nbytes, t->nbytes);
        assert_int_equal((uintptr_t)w->data % 64, 0);
        assert_memory_equal(w->data, t->data, t->nbytes);
    }
    assert_int_equal(vx_source_n_layers(g), vx_source_n_layers(v));
    for (int l = 0; l < vx_source_n_layers(g); l++) {
        for (int e = 0; e < vx_source_n_experts(g); e++) {
            kn_expert a, b;
            mw_err err;
            assert_true(vx_source_has_expert(v, l, e));
            if (vx_source_expert(v, l, e, &a, &err) || vx_source_expert(g, l, e, &b, &err))
                fail_msg("%s", err.msg);
            assert_mat_equal(&a.gate, &b.gate, "gate", l, e);
            assert_mat_equal(&a.up, &b.up, "up", l, e);
            assert_mat_equal(&a.down, &b.down, "down", l, e);
            assert_mat_equal(&a.gate_b, &b.gate_b, "gate_b", l, e);
            assert_mat_equal(&a.up_b, &b.up_b, "up_b", l, e);
            assert_mat_equal(&a.down_b, &b.down_b, "down_b", l, e);
        }
    }
    vx_source_close(g);
    vx_source_close(v);
}

static void test_fixtures_read_back_identical(void **state) {
    (void)state;
    check_same_as_gguf("llamacpp/gpt-oss-tiny/model.gguf", gpt_dir);
    check_same_as_gguf("llamacpp/qwen3moe-tiny/model.gguf", qwen_dir);
}

/* The vindex lists every tensor of tensor_types.json with its type and shape. */
static void test_tensor_table_matches_fixture(void **state) {
    (void)state;
    const char *pairs[2][2] = {{"llamacpp/gpt-oss-tiny/tensor_types.json", gpt_dir},
                               {"llamacpp/qwen3moe-tiny/tensor_types.json", qwen_dir}};
    for (int p = 0; p < 2; p++) {
        json_error_t je;
        json_t *root = json_load_file(mwt_fixture(pairs[p][0]), 0, &je);
        assert_non_null(root);
        vx_manifest m;
        mw_err err;
        if (vx_manifest_read(pairs[p][1], &m, &err)) fail_msg("%s", err.msg);
        json_t *ts = json_object_get(root, "tensors"), *t;
        size_t i;
        assert_int_equal(json_array_size(ts), m.n_tensors);
        json_array_foreach(ts, i, t) {
            const char *name = json_string_value(json_object_get(t, "name"));
            const vx_mf_tensor *mt = NULL;
            for (size_t k = 0; k < m.n_tensors; k++)
                if (!strcmp(m.tensors[k].name, name)) mt = &m.tensors[k];
            if (!mt) fail_msg("%s missing", name);
            mwt_check_tensor_entry(t, kn_type_name(mt->type), mt->n_dims, mt->ne, mt->nbytes);
        }
        vx_manifest_free(&m);
        json_decref(root);
    }
}

/* ---- checksums against an independent implementation ---------------------------------------- */

/* Whether bytes [off, off + n) of buf hash to the stated SHA-256 and BLAKE2b (libsodium here, so
 * a fault in the OpenSSL path or the parallel hashing shows). */
static void check_hashes(const uint8_t *p, uint64_t n, const uint8_t *sha, const uint8_t *b2,
                         const char *what) {
    uint8_t d[32];
    crypto_hash_sha256(d, p, n);
    if (memcmp(d, sha, 32) != 0) fail_msg("%s: SHA-256 differs from libsodium's", what);
    if (b2) {
        crypto_generichash(d, 32, p, n, NULL, 0);
        if (memcmp(d, b2, 32) != 0) fail_msg("%s: BLAKE2b differs from libsodium's", what);
    }
}

static void check_manifest_hashes(const char *src_rel, const char *dir) {
    vx_manifest m;
    mw_err err;
    if (vx_manifest_read(dir, &m, &err)) fail_msg("%s", err.msg);
    char path[700];
    size_t len;
    snprintf(path, sizeof path, "%s/dense.bin", dir);
    uint8_t *p = mwt_read_file(path, &len);
    assert_non_null(p);
    assert_int_equal(len, m.dense.size);
    check_hashes(p, len, m.dense.sha, m.dense.b2, path);
    free(p);
    for (size_t i = 0; i < m.n_moe; i++) {
        const vx_mf_layer *L = &m.moe[i];
        snprintf(path, sizeof path, "%s/%s", dir, L->file);
        p = mwt_read_file(path, &len);
        assert_non_null(p);
        for (size_t k = 0; k < L->n_ext; k++) {
            assert_true(L->ext[k].offset + L->extent_bytes <= len);
            check_hashes(p + L->ext[k].offset, L->extent_bytes, L->ext[k].sha, L->ext[k].b2, path);
        }
        free(p);
    }
    /* the provenance names the source with its SHA-256 */
    json_t *src = json_array_get(json_object_get(m.provenance, "sources"), 0);
    uint8_t want[32];
    assert_int_equal(vx_unhex(json_string_value(json_object_get(src, "sha256")), want), 0);
    p = mwt_read_file(mwt_fixture(src_rel), &len);
    assert_non_null(p);
    assert_int_equal(json_integer_value(json_object_get(src, "size")), len);
    check_hashes(p, len, want, NULL, src_rel);
    free(p);
    vx_manifest_free(&m);
}

static void test_checksums_match_an_independent_hash(void **state) {
    (void)state;
    check_manifest_hashes("llamacpp/gpt-oss-tiny/model.gguf", gpt_dir);
    check_manifest_hashes("llamacpp/qwen3moe-tiny/model.gguf", qwen_dir);
}

/* ---- corruption ---------------------------------------------------------------------------- */

static void flip(const char *path, uint64_t off) {
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, (long)off, SEEK_SET);
    int c = fgetc(f);
    fseek(f, (long)off, SEEK_SET);
    fputc(c ^ 0x40, f);
    fclose(f);
}

static void expect_verify_fails(const char *dir, const char *what) {
    mw_err err;
    if (vx_verify(dir, NULL, NULL, NULL, &err) == 0) fail_msg("verify passed, expected %s", what);
    if (!strstr(err.msg, what)) fail_msg("verify: '%s' lacks '%s'", err.msg, what);
}

static void test_flipped_byte_in_any_extent_is_caught(void **state) {
    (void)state;
    vx_manifest m;
    mw_err err;
    if (vx_manifest_read(gpt_dir, &m, &err)) fail_msg("%s", err.msg);
    assert_int_equal(vx_verify(gpt_dir, NULL, NULL, NULL, &err), 0);
    /* (layer, expert, role or -1 for the extent's last byte, position within the part) */
    static const struct {
        int layer, expert, role;
        double where; /* fraction into the part */
    } cases[] = {
        {0, 0, VX_R_GATE, 0.0},   {3, 7, VX_R_DOWN, 0.999},  {1, 4, VX_R_UP, 0.5},
        {2, 2, VX_R_GATE_B, 0.3}, {1, 1, VX_R_DOWN_B, 0.99}, {3, 0, VX_R_UP_B, 0.0},
        {2, 5, -1, 0.0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const vx_mf_layer *L = vx_manifest_layer(&m, cases[c].layer);
        const vx_mf_extent *x = vx_manifest_extent(L, cases[c].expert);
        uint64_t at;
        if (cases[c].role >= 0) {
            const vx_part *p = &L->shape.part[cases[c].role];
            at = x->offset + L->part_off[cases[c].role] +
                 (uint64_t)(cases[c].where * (double)(p->slice_bytes - 1));
        } else {
            at = x->offset + L->extent_bytes - 1;
        }
        char path[1024], name[128];
        snprintf(path, sizeof path, "%s/%s", gpt_dir, L->file);
        snprintf(name, sizeof name, "extent (layer %d, expert %d) in %s", cases[c].layer,
                 cases[c].expert, L->file);
        flip(path, at);
        expect_verify_fails(gpt_dir, name);
        /* mounting that extent fails naming it; a set without it still mounts */
        vx_expert_set set;
        char spec[64];
        snprintf(spec, sizeof spec, "%d:%d", cases[c].layer, cases[c].expert);
        assert_int_equal(vx_expert_set_parse(spec, 4, 8, &set, &err), 0);
        vx_source_opts o = {.experts = &set, .dense = false, .verify_on_mount = true};
        vx_source *s;
        assert_int_equal(vx_source_open(gpt_dir, &o, &s, &err), -1);
        if (!strstr(err.msg, name) || !strstr(err.msg, "checksum mismatch"))
            fail_msg("mount error '%s' lacks '%s'", err.msg, name);
        assert_int_equal(vx_source_open(gpt_dir, NULL, &s, &err), -1);
        vx_expert_set_put(&set, cases[c].layer, cases[c].expert, false);
        vx_expert_set_put(&set, cases[c].layer, (cases[c].expert + 1) % 8, true);
        s = open_src(gpt_dir, &o);
        vx_source_close(s);
        vx_expert_set_free(&set);
        flip(path, at);
    }
    assert_int_equal(vx_verify(gpt_dir, NULL, NULL, NULL, &err), 0);
    /* dense.bin: verify and a dense mount fail; an experts-only mount does not read it */
    char dense[1024];
    snprintf(dense, sizeof dense, "%s/dense.bin", gpt_dir);
    flip(dense, m.tensors[3].offset + 5);
    expect_verify_fails(gpt_dir, "dense.bin: checksum mismatch");
    vx_source *s;
    assert_int_equal(vx_source_open(gpt_dir, NULL, &s, &err), -1);
    assert_non_null(strstr(err.msg, "dense.bin: checksum mismatch"));
    vx_source_opts experts_only = {.dense = false, .verify_on_mount = true};
    s = open_src(gpt_dir, &experts_only);
    vx_source_close(s);
    flip(dense, m.tensors[3].offset + 5);
    vx_manifest_free(&m);
}

/* ---- slices -------------------------------------------------------------------------------- */

static void test_slice_mounts_only_its_extents(void **state) {
    (void)state;
    char out[1024], out2[1024];
    snprintf(out, sizeof out, "%s/slice", mwt_tmp);
    mw_err err;
    if (vx_slice(qwen_dir, "1-2:3-5,0:7", out, false, &err)) fail_msg("%s", err.msg);
    assert_int_equal(vx_verify(out, NULL, NULL, NULL, &err), 0);
    vx_source *full = open_src(qwen_dir, NULL);
    vx_source_opts o = {.dense = false, .verify_on_mount = true};
    vx_source *s = open_src(out, &o);
    assert_string_equal(vx_source_fingerprint(s), vx_source_fingerprint(full));
    for (int l = 0; l < 3; l++) {
        for (int e = 0; e < 8; e++) {
            bool want = (l >= 1 && e >= 3 && e <= 5) || (l == 0 && e == 7);
            assert_int_equal(vx_source_has_expert(s, l, e), want);
            kn_expert a, b;
            if (!want) {
                assert_int_equal(vx_source_expert(s, l, e, &a, &err), -1);
                continue;
            }
            assert_int_equal(vx_source_expert(s, l, e, &a, &err), 0);
            assert_int_equal(vx_source_expert(full, l, e, &b, &err), 0);
            assert_mat_equal(&a.gate, &b.gate, "gate", l, e);
            assert_mat_equal(&a.down, &b.down, "down", l, e);
        }
    }
    vx_source_close(s);
    /* it holds no dense tensors: a dense mount is refused */
    assert_int_equal(vx_source_open(out, NULL, &s, &err), -1);
    assert_non_null(strstr(err.msg, "holds no dense tensors"));
    /* asking for an extent it does not hold is refused */
    vx_expert_set set;
    assert_int_equal(vx_expert_set_parse("0:0", 3, 8, &set, &err), 0);
    o.experts = &set;
    assert_int_equal(vx_source_open(out, &o, &s, &err), -1);
    assert_non_null(strstr(err.msg, "(layer 0, expert 0) is not held"));
    vx_expert_set_free(&set);
    /* a slice of the slice, with the dense part from nowhere, fails; without it works */
    snprintf(out2, sizeof out2, "%s/slice2", mwt_tmp);
    assert_int_equal(vx_slice(out, "1:4", out2, true, &err), -1);
    assert_non_null(strstr(err.msg, "no dense tensors"));
    mwt_rmrf(out2);
    if (vx_slice(out, "1:4", out2, false, &err)) fail_msg("%s", err.msg);
    assert_int_equal(vx_slice(out, "0:0", out2, false, &err), -1); /* out2 not empty */
    mwt_rmrf(out2);
    assert_int_equal(vx_slice(out, "0:0", out2, false, &err), -1);
    assert_non_null(strstr(err.msg, "does not hold expert (layer 0, expert 0)"));
    mwt_rmrf(out2);
    /* a slice with the dense part serves the forward pass */
    if (vx_slice(qwen_dir, "all", out2, true, &err)) fail_msg("%s", err.msg);
    s = open_src(out2, NULL);
    assert_non_null(vx_source_tensor(s, "token_embd.weight"));
    vx_source_close(s);
    vx_source_close(full);
    mwt_rmrf(out2);
}

/* ---- transcode ----------------------------------------------------------------------------- */

static void test_transcode_is_recorded(void **state) {
    (void)state;
    char out[1024];
    snprintf(out, sizeof out, "%s/transcoded", mwt_tmp);
    extract_to(mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf"), out, "experts=q6_K,dense=f16");
    vx_manifest m;
    mw_err err;
    if (vx_manifest_read(out, &m, &err)) fail_msg("%s", err.msg);
    json_t *tr = json_object_get(m.provenance, "transcoded");
    /* 12 expert weights + per layer q/k/v/o (4 × 4) + token_embd + output; not the router */
    assert_int_equal(json_array_size(tr), 12 + 16 + 2);
    vx_source *v = open_src(out, NULL),
              *g = open_src(mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf"), NULL);
    assert_string_not_equal(vx_source_fingerprint(v), vx_source_fingerprint(g));
    assert_int_equal(vx_source_tensor(v, "blk.0.ffn_gate_inp.weight")->type, KN_F32);
    assert_int_equal(vx_source_tensor(v, "blk.0.attn_q.weight")->type, KN_F16);
    kn_expert a, b;
    assert_int_equal(vx_source_expert(v, 2, 3, &a, &err), 0);
    assert_int_equal(vx_source_expert(g, 2, 3, &b, &err), 0);
    assert_int_equal(a.up.type, KN_Q6_K);
    assert_int_equal(a.up_b.type, KN_F32); /* biases stay */
    float ra[256], rb[256];
    for (int r = 0; r < 256; r += 37) {
        kn_mat_row(&a.up, r, ra);
        kn_mat_row(&b.up, r, rb);
        double amax = 0;
        for (int k = 0; k < 256; k++) amax = fmax(amax, fabs(rb[k]));
        assert_true(mwt_close("transcoded row", ra, rb, 256, amax / 24, 0) < 0);
    }
    assert_int_equal(vx_verify(out, NULL, NULL, NULL, &err), 0);
    vx_source_close(v);
    vx_source_close(g);
    vx_manifest_free(&m);
    vx_extract_opts bad = {.transcode = "experts=q4_0"};
    vx_input *in;
    assert_int_equal(vx_input_open(mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf"), &in, &err), 0);
    snprintf(out, sizeof out, "%s/transcoded-bad", mwt_tmp);
    assert_int_equal(vx_extract(in, out, &bad, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "no quantizer for q4_0"));
    vx_input_close(in);
}

/* ---- synth --------------------------------------------------------------------------------- */

static vx_input *synth(const char *const *args) {
    mw_err err;
    vx_input *in;
    if (vx_synth_input_kv(args, &in, &err)) fail_msg("%s", err.msg);
    return in;
}

/* Synth written as GGUF then extracted equals synth extracted directly; scales are as designed. */
static void check_synth_round_trip(const char *const *args, const char *tag, kn_type xtype,
                                   int hidden, int ff) {
    char gguf[1024], a[1024], b[1024];
    snprintf(gguf, sizeof gguf, "%s/%s.gguf", mwt_tmp, tag);
    snprintf(a, sizeof a, "%s/%s-direct", mwt_tmp, tag);
    snprintf(b, sizeof b, "%s/%s-via-gguf", mwt_tmp, tag);
    mw_err err;
    vx_input *in = synth(args);
    if (vx_input_write_gguf(in, gguf, NULL, NULL, &err)) fail_msg("%s", err.msg);
    if (vx_extract(in, a, NULL, NULL, &err)) fail_msg("%s", err.msg);
    vx_input_close(in);
    extract_to(gguf, b, NULL);
    vx_source *sa = open_src(a, NULL), *sb = open_src(b, NULL), *sg = open_src(gguf, NULL);
    assert_string_equal(vx_source_fingerprint(sa), vx_source_fingerprint(sb));
    assert_string_equal(vx_source_fingerprint(sa), vx_source_fingerprint(sg));
    kn_expert x;
    assert_int_equal(vx_source_expert(sa, vx_source_n_layers(sa) - 1, 1, &x, &err), 0);
    assert_int_equal(x.gate.type, xtype);
    assert_int_equal(x.gate.cols, hidden);
    assert_int_equal(x.down.cols, ff);
    /* gate rows are uniform with std 1/sqrt(hidden): the quantized rows keep that RMS */
    float *row = malloc(sizeof(float) * (size_t)hidden);
    double ss = 0;
    for (int r = 0; r < ff; r++) {
        kn_mat_row(&x.gate, r, row);
        for (int k = 0; k < hidden; k++) ss += (double)row[k] * row[k];
    }
    double rms = sqrt(ss / ((double)hidden * ff)), want = 1.0 / sqrt((double)hidden);
    if (fabs(rms - want) > 0.15 * want) fail_msg("%s: gate rms %g, want ~%g", tag, rms, want);
    free(row);
    const vx_tensor *norm = vx_source_tensor(sa, "output_norm.weight");
    for (int k = 0; k < hidden; k++) {
        float v = ((const float *)norm->data)[k];
        assert_true(v > 0.94f && v < 1.06f);
    }
    assert_int_equal(vx_verify(a, NULL, NULL, NULL, &err), 0);
    vx_source_close(sa);
    vx_source_close(sb);
    vx_source_close(sg);
}

static void test_synth_gpt_oss_round_trip(void **state) {
    (void)state;
    const char *args[] = {"arch",  "gpt-oss", "layers",         "3",  "hidden",  "320",
                          "heads", "5",       "kv-heads",       "1",  "experts", "6",
                          "top-k", "2",       "expert-ff",      "96", "vocab",   "300",
                          "seed",  "11",      "sliding-window", "4",  NULL};
    check_synth_round_trip(args, "oss", KN_MXFP4, 320, 96);
    vx_input *in = synth(args);
    int64_t v;
    mw_err err;
    const vx_meta *m = in->meta;
    static const char *keys[] = {
        "gpt-oss.rope.scaling.type",    "gpt-oss.attention.sliding_window",
        "gpt-oss.attention.key_length", "gpt-oss.expert_feed_forward_length",
        "tokenizer.ggml.merges",        "gpt-oss.rope.scaling.factor"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        assert_true(vx_meta_find(m, keys[i]) >= 0);
    assert_int_equal(vx_meta_get_i64(m, "gpt-oss.attention.sliding_window", &v, &err), 1);
    assert_int_equal(v, 4);
    assert_non_null(vx_input_find(in, "blk.2.attn_sinks.weight"));
    assert_non_null(vx_input_find(in, "blk.0.ffn_down_exps.bias"));
    assert_int_equal(vx_input_find(in, "blk.1.attn_q.weight")->ne[1], 5 * 64);
    assert_int_equal(vx_input_find(in, "blk.1.attn_k.weight")->ne[1], 64);
    vx_input_close(in);
}

static void test_synth_qwen3moe_round_trip(void **state) {
    (void)state;
    const char *args[] = {"arch",    "qwen3moe", "layers",   "2", "hidden",       "512",
                          "heads",   "4",        "kv-heads", "2", "head-dim",     "48",
                          "experts", "5",        "top-k",    "2", "expert-ff",    "256",
                          "vocab",   "400",      "seed",     "3", "dense-format", "q8_0",
                          NULL};
    check_synth_round_trip(args, "qwen", KN_Q6_K, 512, 256);
    vx_input *in = synth(args);
    assert_non_null(vx_input_find(in, "blk.1.attn_q_norm.weight"));
    assert_int_equal(vx_input_find(in, "blk.1.attn_q_norm.weight")->ne[0], 48);
    assert_int_equal(vx_input_find(in, "blk.0.attn_q.weight")->type, KN_Q8_0);
    assert_null(vx_input_find(in, "blk.0.ffn_gate_exps.bias"));
    vx_input_close(in);
}

static void test_synth_rejects_bad_shapes(void **state) {
    (void)state;
    static const struct {
        const char *key, *val, *fault;
    } cases[] = {
        {"hidden", "300", "hidden = 300 must be a multiple of 32 for mxfp4"},
        {"expert-format", "q6_K", "must be a multiple of 256 for q6_K"},
        {"top-k", "9", "--top-k 9 exceeds --experts 6"},
        {"kv-heads", "2", "must be a multiple of --kv-heads 2"},
        {"vocab", "100", "at least 259 tokens"},
        {"head-dim", "33", "must be even"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        vx_synth_opts o;
        vx_synth_defaults(&o);
        mw_err err;
        const char *base[] = {"arch",  "gpt-oss", "layers", "1",     "hidden", "320",       "heads",
                              "5",     "experts", "6",      "top-k", "2",      "expert-ff", "96",
                              "vocab", "300",     "seed",   "1",     NULL};
        for (int k = 0; base[k]; k += 2)
            assert_int_equal(vx_synth_set(&o, base[k], base[k + 1], &err), 0);
        assert_int_equal(vx_synth_set(&o, cases[i].key, cases[i].val, &err), 0);
        vx_input *in;
        assert_int_equal(vx_synth_input(&o, &in, &err), -1);
        if (!strstr(err.msg, cases[i].fault)) fail_msg("'%s' lacks '%s'", err.msg, cases[i].fault);
    }
    vx_synth_opts o;
    vx_synth_defaults(&o);
    mw_err err;
    assert_int_equal(vx_synth_set(&o, "arch", "llama", &err), -1);
    assert_int_equal(vx_synth_set(&o, "layers", "0", &err), -1);
    assert_int_equal(vx_synth_set(&o, "seed", "-1", &err), -1);
    assert_int_equal(vx_synth_set(&o, "bogus", "1", &err), -1);
    vx_input *in;
    assert_int_equal(vx_synth_input(&o, &in, &err), -1);
    assert_non_null(strstr(err.msg, "--arch is required"));
}

/* ---- extract refusals ---------------------------------------------------------------------- */

static void test_extract_refusals(void **state) {
    (void)state;
    vx_input *in;
    mw_err err;
    assert_int_equal(vx_input_open(mwt_fixture("llamacpp/qwen3moe-tiny/model.gguf"), &in, &err), 0);
    assert_int_equal(vx_extract(in, qwen_dir, NULL, NULL, &err), -1); /* exists, not empty */
    assert_non_null(strstr(err.msg, "not empty"));
    /* --strict refuses unrecognised source tensors */
    const char *unrec[] = {"model.layers.0.weird.weight"};
    in->unrecognised = unrec;
    in->n_unrecognised = 1;
    char out[1024];
    snprintf(out, sizeof out, "%s/strict", mwt_tmp);
    vx_extract_opts strict = {.strict = true};
    assert_int_equal(vx_extract(in, out, &strict, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "model.layers.0.weird.weight"));
    /* without --strict they are recorded in the provenance */
    if (vx_extract(in, out, NULL, NULL, &err)) fail_msg("%s", err.msg);
    in->unrecognised = NULL;
    in->n_unrecognised = 0;
    vx_input_close(in);
    vx_manifest m;
    if (vx_manifest_read(out, &m, &err)) fail_msg("%s", err.msg);
    assert_string_equal(
        json_string_value(json_array_get(json_object_get(m.provenance, "unrecognised"), 0)),
        "model.layers.0.weird.weight");
    vx_manifest_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures_read_back_identical),
        cmocka_unit_test(test_tensor_table_matches_fixture),
        cmocka_unit_test(test_checksums_match_an_independent_hash),
        cmocka_unit_test(test_flipped_byte_in_any_extent_is_caught),
        cmocka_unit_test(test_slice_mounts_only_its_extents),
        cmocka_unit_test(test_transcode_is_recorded),
        cmocka_unit_test(test_synth_gpt_oss_round_trip),
        cmocka_unit_test(test_synth_qwen3moe_round_trip),
        cmocka_unit_test(test_synth_rejects_bad_shapes),
        cmocka_unit_test(test_extract_refusals),
    };
    return cmocka_run_group_tests_name("vx_vindex", tests, setup, mwt_tmp_teardown);
}
