/* tests/unit/test_md_forward.c — the forward pass against llama.cpp's captured intermediates
 * (every quantity of every layer present in intermediates.bin, so a failure names the first layer
 * and quantity that drifts), prefill against token-by-token decode (also with the weights pinned on
 * huge pages), several sequences in one batch against separate runs, and batch validation
 * errors. */
#include "tests/support/mw_test.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/mwt_capture.h"
#include "tests/support/mwt_model.h"

#include "model/md_local.h"
#include "model/md_model.h"

#define N_TOK 40

typedef struct fixture {
    const char *name;
    vx_source *src;
    md_model *model;
    md_expert_backend *experts;
    int32_t tokens[N_TOK];
} fixture;

#ifdef __linux__
/* Pages of [a, a + n pages) mapped in this process (/proc/self/pagemap's present bit). */
static size_t pages_present(uintptr_t a, size_t n) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const int fd = open("/proc/self/pagemap", O_RDONLY);
    assert_true(fd >= 0);
    size_t present = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t ent = 0;
        const off_t at = (off_t)((a / page + i) * sizeof ent);
        assert_int_equal(pread(fd, &ent, sizeof ent, at), (ssize_t)sizeof ent);
        present += ent >> 63;
    }
    close(fd);
    return present;
}
#endif

static void open_fixture(fixture *f, const char *name) {
    const mwt_model m = mwt_model_fixture(name);
    *f = (fixture){.name = name, .src = m.src, .model = m.model, .experts = m.experts};
    mwt_model_tokens(name, f->tokens, N_TOK);
}

static void close_fixture(fixture *f) {
    mwt_model_close(&(mwt_model){f->src, f->model, f->experts});
}

static md_ctx *new_ctx(fixture *f, kn_numerics num, int n_seq, kn_pool *pool) {
    md_ctx_params p = {
        .numerics = num, .pool = pool, .experts = f->experts, .n_seq = n_seq, .n_ctx = 128};
    md_ctx *c;
    mw_err e;
    if (md_ctx_new(f->model, &p, &c, &e)) fail_msg("%s", e.msg);
    return c;
}

/* ---- intermediates ----------------------------------------------------------------------------
 */

/* llama.cpp's tensor name (and op) → our probe; -2 for quantities inside the fused expert
 * kernel (checked by the kernels' own fixtures) or views we do not reproduce, -1 for an unknown
 * name. `q_seen` counts the layer's earlier "q" matmuls: deepseek2's graph names the query latent
 * and the full query both "q". */
static int probe_of(const char *base, const char *op, const md_config *cfg, int q_seen) {
    static const struct {
        const char *name;
        md_probe p;
    } map[] = {
        {"attn_norm", MD_PROBE_ATTN_NORM},
        {"Qcur_normed", MD_PROBE_Q_NORMED},
        {"Kcur_normed", MD_PROBE_K_NORMED},
        {"Qcur", MD_PROBE_Q_ROPE},
        {"Kcur", MD_PROBE_K_ROPE},
        {"q_nope_absorbed", MD_PROBE_Q_ABSORBED},
        {"kv_cmpr_pe", MD_PROBE_KV_CMPR_PE},
        {"kqv", MD_PROBE_KQV},
        {"kqv_mla", MD_PROBE_KQV_MLA},
        {"kqv_out", MD_PROBE_KQV_OUT},
        {"attn_out", MD_PROBE_ATTN_OUT},
        {"ffn_inp", MD_PROBE_FFN_INP},
        {"attn_post_norm", MD_PROBE_FFN_NORM},
        {"ffn_norm", MD_PROBE_FFN_NORM},
        {"ffn_swiglu", MD_PROBE_FFN_SWIGLU},
        {"ffn_moe_logits", MD_PROBE_ROUTER_LOGITS},
        {"ffn_moe_probs", MD_PROBE_ROUTER_SCORES},
        {"ffn_moe_probs_biased", MD_PROBE_ROUTER_BIASED},
        {"ffn_moe_group_topk", MD_PROBE_GROUP_TOPK},
        {"ffn_moe_probs_masked", MD_PROBE_ROUTER_MASKED},
        {"ffn_moe_topk", MD_PROBE_TOPK},
        {"ffn_moe_weights", MD_PROBE_WEIGHTS_SEL},
        {"ffn_moe_weights_softmax", MD_PROBE_WEIGHTS},
        {"ffn_moe_weights_norm", MD_PROBE_WEIGHTS_NORM},
        {"ffn_moe_weights_scaled", MD_PROBE_WEIGHTS},
        {"ffn_moe_out", MD_PROBE_MOE_OUT},
        {"ffn_shexp", MD_PROBE_SHEXP},
        {"ffn_out", MD_PROBE_FFN_OUT},
        {"l_out", MD_PROBE_L_OUT},
        {"result_norm", MD_PROBE_RESULT_NORM},
    };
    if (!strcmp(base, "Vcur")) /* MUL_MAT is before the bias, ADD after */
        return !strcmp(op, "ADD") || !cfg->qkv_bias ? MD_PROBE_V : -2;
    if (!strcmp(base, "q")) {
        if (!strcmp(op, "MUL")) return MD_PROBE_Q_A_NORM;
        return cfg->mla.q_lora && q_seen == 0 ? MD_PROBE_Q_A : MD_PROBE_Q;
    }
    /* after RoPE / the norm; the views before them are not reproduced */
    if (!strcmp(base, "q_pe") || !strcmp(base, "k_pe"))
        return strcmp(op, "ROPE") ? -2 : !strcmp(base, "q_pe") ? MD_PROBE_Q_PE : MD_PROBE_K_PE;
    if (!strcmp(base, "kv_cmpr")) return strcmp(op, "MUL") ? -2 : MD_PROBE_KV_CMPR;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(base, map[i].name)) return map[i].p;
    if (!strncmp(base, "ffn_moe_", 8)) return -2; /* gate, up, biased, swiglu, down */
    return -1;
}

/* llama.cpp keeps these [head][token][...]; the observer sees [token][head][...]. */
static bool head_major(md_probe p) {
    return p == MD_PROBE_Q_ABSORBED || p == MD_PROBE_KQV || p == MD_PROBE_KQV_MLA;
}

/* Tolerances: the first layers' attention agrees to a few 1e-6; later residuals carry the
 * activation-rounding noise of every expert before them. */
static double tolerance(md_probe p) {
    switch (p) {
    case MD_PROBE_TOPK:
    case MD_PROBE_GROUP_TOPK:
        return 0;
    case MD_PROBE_WEIGHTS_SEL:
    case MD_PROBE_WEIGHTS_NORM:
    case MD_PROBE_WEIGHTS:
        return 1e-5;
    default:
        return 1e-4;
    }
}

/* max |a - b|, equal values (the -inf of masked scores included) counting 0, NaN infinite. */
static double max_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        if (a[i] == b[i]) continue;
        double d = fabs((double)a[i] - (double)b[i]);
        if (isnan(d)) return INFINITY;
        if (d > m) m = d;
    }
    return m;
}

static void check_intermediates(const char *name) {
    fixture f;
    open_fixture(&f, name);
    char rel[128];
    snprintf(rel, sizeof rel, "llamacpp/%s/intermediates.bin", name);
    size_t bin_len;
    unsigned char *bin = mwt_read_file(mwt_fixture(rel), &bin_len);
    snprintf(rel, sizeof rel, "llamacpp/%s/intermediates.json", name);
    json_error_t je;
    json_t *index = json_load_file(mwt_fixture(rel), 0, &je);
    assert_non_null(bin);
    if (!index) fail_msg("%s: %s", rel, je.text);

    mwt_capture cap = {0};
    md_ctx *c = new_ctx(&f, KN_NUM_Q8, 1, NULL);
    mw_err e;
    /* a longer batch first, unobserved and forgotten: the observer then attaches to a context
     * that has the rows already and gets its buffers on their own */
    md_row warm[2 * N_TOK];
    for (int i = 0; i < 2 * N_TOK; i++) warm[i] = (md_row){0, i, f.tokens[i % N_TOK], 0};
    if (md_forward(c, warm, 2 * N_TOK, NULL, &e) || md_seq_truncate(c, 0, 0, &e))
        fail_msg("%s", e.msg);
    md_ctx_set_observer(c, mwt_capture_observer, &cap);
    md_row rows[N_TOK];
    for (int i = 0; i < N_TOK; i++) rows[i] = (md_row){0, i, f.tokens[i], 1};
    float *logits = malloc((size_t)N_TOK * f.model->cfg.n_vocab * sizeof(float));
    if (md_forward(c, rows, N_TOK, logits, &e)) fail_msg("%s", e.msg);

    size_t i;
    json_t *ent;
    int compared = 0, q_seen[MWT_MAX_LAYERS + 1] = {0};
    json_array_foreach(index, i, ent) {
        const char *tname = json_string_value(json_object_get(ent, "name"));
        const char *op = json_string_value(json_object_get(ent, "op"));
        size_t off = (size_t)json_integer_value(json_object_get(ent, "offset"));
        size_t nbytes = (size_t)json_integer_value(json_object_get(ent, "nbytes"));
        assert_true(off + nbytes <= bin_len);
        char base[64];
        const int layer = mwt_split_name(tname, base, sizeof base);
        int l = layer < 0 ? MWT_MAX_LAYERS : layer;
        assert_true(l <= MWT_MAX_LAYERS);
        int p = probe_of(base, op, &f.model->cfg, q_seen[l]);
        if (!strcmp(base, "q") && strcmp(op, "MUL")) q_seen[l]++;
        if (p == -1) fail_msg("%s: intermediate '%s' has no counterpart", name, tname);
        if (p == -2) continue;
        const size_t n = nbytes / 4;
        if (!cap.data[l][p] || (size_t)cap.n[l][p] != n)
            fail_msg("%s: '%s' (%s): layer %d was not observed with %zu values", name, tname,
                     md_probe_name(p), layer, n);
        float *ref = mwt_intermediate(ent, bin + off, n,
                                      head_major((md_probe)p) ? MWT_HEAD_MAJOR : MWT_ROWS);
        double d = max_diff(cap.data[l][p], ref, n);
        printf("    %-8s %-28s layer %2d  max |diff| %.3g\n", name, tname, layer, d);
        if (d > tolerance((md_probe)p))
            fail_msg("%s: first drift at layer %d, quantity %s (%s): max |diff| %.3g > %.3g", name,
                     layer, base, md_probe_name(p), d, tolerance((md_probe)p));
        free(ref);
        compared++;
    }
    assert_true(compared >= 30);
    mwt_capture_free(&cap);
    free(logits);
    json_decref(index);
    free(bin);
    md_ctx_free(c);
    close_fixture(&f);
}

static void test_intermediates_gptoss(void **state) {
    (void)state;
    check_intermediates("gpt-oss-tiny");
}

static void test_intermediates_qwen3moe(void **state) {
    (void)state;
    check_intermediates("qwen3moe-tiny");
}

static void test_intermediates_deepseek2(void **state) {
    (void)state;
    check_intermediates("deepseek2-tiny");
}

/* ---- prefill against decode --------------------------------------------------------------------
 */

static float *run_prefill(fixture *f, kn_numerics num, kn_pool *pool) {
    const int64_t V = f->model->cfg.n_vocab;
    float *out = malloc((size_t)(N_TOK * V) * sizeof(float));
    md_ctx *c = new_ctx(f, num, 1, pool);
    md_row rows[N_TOK];
    for (int i = 0; i < N_TOK; i++) rows[i] = (md_row){0, i, f->tokens[i], 1};
    mw_err e;
    if (md_forward(c, rows, N_TOK, out, &e)) fail_msg("%s", e.msg);
    md_ctx_free(c);
    return out;
}

static float *run_decode(fixture *f, kn_numerics num, kn_pool *pool) {
    const int64_t V = f->model->cfg.n_vocab;
    float *out = malloc((size_t)(N_TOK * V) * sizeof(float));
    md_ctx *c = new_ctx(f, num, 1, pool);
    mw_err e;
    for (int i = 0; i < N_TOK; i++) {
        md_row r = {0, i, f->tokens[i], 1};
        if (md_forward(c, &r, 1, out + i * V, &e)) fail_msg("%s", e.msg);
    }
    assert_int_equal(md_seq_len(c, 0), N_TOK);
    md_ctx_free(c);
    return out;
}

static void check_prefill_decode(const char *name) {
    fixture f;
    open_fixture(&f, name);
    const size_t n = (size_t)N_TOK * f.model->cfg.n_vocab;
    kn_pool *pool = kn_pool_create(2);
    for (int num = KN_NUM_F32; num <= KN_NUM_Q8; num++) {
        float *a = run_prefill(&f, (kn_numerics)num, NULL);
        float *b = run_decode(&f, (kn_numerics)num, pool);
        double d = mwt_max_abs_diff(a, b, n);
        printf("    %s %s: prefill (1 thread) vs decode (2 threads) max |diff| %.3g\n", name,
               kn_numerics_name(num), d);
        /* batch-invariant kernels and per-row attention: the same bits */
        assert_true(d == 0);
        free(a);
        free(b);
    }
    /* the dense matrices and the experts copied onto huge pages compute the same bits */
    float *a = run_prefill(&f, KN_NUM_Q8, NULL);
    mw_err e;
#ifdef __linux__
    /* the embedding's pages unmapped (its rows are read from the file again on a fault) ... */
    const kn_mat *emb = &f.model->tok_embd;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const uintptr_t e0 = (uintptr_t)emb->data & ~(uintptr_t)(page - 1);
    const size_t elen = (uintptr_t)emb->data + (size_t)emb->rows * emb->row_bytes - e0,
                 epages = (elen + page - 1) / page;
    assert_int_equal(madvise((void *)e0, elen, MADV_DONTNEED), 0);
    assert_true(pages_present(e0, epages) < epages);
#endif
    if (md_model_pin_dense(f.model, &e) || md_local_backend_pin(f.experts, &e))
        fail_msg("%s", e.msg);
#ifdef __linux__
    /* ... mapped in by pinning: a token's first use will not fault mid-step */
    assert_int_equal(pages_present(e0, epages), epages);
#endif
    const uint8_t *pin = f.model->pin.buf, *q = f.model->layers[0].wq.data;
    assert_true(q >= pin && q < pin + md_model_pinned_bytes(f.model));
    assert_true((const uint8_t *)f.model->output.data >= pin);
    assert_true(f.model->output.data != f.model->tok_embd.data); /* the embedding stays a view */
    assert_true(md_local_backend_pinned_bytes(f.experts) > 0);
    float *b = run_decode(&f, KN_NUM_Q8, pool);
    assert_true(mwt_max_abs_diff(a, b, n) == 0);
    free(a);
    free(b);
    kn_pool_destroy(pool);
    close_fixture(&f);
}

static void test_prefill_equals_decode_gptoss(void **state) {
    (void)state;
    check_prefill_decode("gpt-oss-tiny");
}

static void test_prefill_equals_decode_qwen3moe(void **state) {
    (void)state;
    check_prefill_decode("qwen3moe-tiny");
}

static void test_prefill_equals_decode_deepseek2(void **state) {
    (void)state;
    check_prefill_decode("deepseek2-tiny");
}

/* Two sequences interleaved in one batch, then continued together, equal separate runs. */
static void test_sequences_share_a_batch(void **state) {
    (void)state;
    fixture f;
    open_fixture(&f, "gpt-oss-tiny");
    const int64_t V = f.model->cfg.n_vocab;
    enum { A = 30, B = 12 }; /* both longer than the window of 8 */
    int32_t ta[A], tb[B];
    for (int i = 0; i < A; i++) ta[i] = f.tokens[i];
    for (int i = 0; i < B; i++) tb[i] = f.tokens[N_TOK - 1 - i];
    /* separate: each sequence alone */
    float *ref_a = malloc((size_t)(A * V) * sizeof(float)), *ref_b = malloc((size_t)(B * V) * 4);
    mw_err e;
    for (int s = 0; s < 2; s++) {
        md_ctx *c = new_ctx(&f, KN_NUM_Q8, 1, NULL);
        int n = s ? B : A;
        md_row rows[A];
        for (int i = 0; i < n; i++) rows[i] = (md_row){0, i, s ? tb[i] : ta[i], 1};
        if (md_forward(c, rows, n, s ? ref_b : ref_a, &e)) fail_msg("%s", e.msg);
        md_ctx_free(c);
    }
    /* together: first 20 of A with all of B interleaved, then A's last 10 one per step */
    md_ctx *c = new_ctx(&f, KN_NUM_Q8, 2, NULL);
    md_row rows[A + B];
    int64_t nr = 0, ia = 0, ib = 0;
    int32_t where[A + B];
    while (ia < 20 || ib < B) {
        if (ib < B && (ib <= ia / 2 || ia >= 20)) {
            where[nr] = (int32_t)(1000 + ib);
            rows[nr++] = (md_row){1, (int32_t)ib, tb[ib], 1}, ib++;
        } else {
            where[nr] = (int32_t)ia;
            rows[nr++] = (md_row){0, (int32_t)ia, ta[ia], 1}, ia++;
        }
    }
    float *out = malloc((size_t)(nr * V) * sizeof(float));
    if (md_forward(c, rows, nr, out, &e)) fail_msg("%s", e.msg);
    for (int64_t r = 0; r < nr; r++) {
        const float *ref = where[r] >= 1000 ? ref_b + (where[r] - 1000) * V : ref_a + where[r] * V;
        assert_memory_equal(out + r * V, ref, (size_t)V * sizeof(float));
    }
    for (; ia < A; ia++) {
        md_row r = {0, (int32_t)ia, ta[ia], 1};
        if (md_forward(c, &r, 1, out, &e)) fail_msg("%s", e.msg);
        assert_memory_equal(out, ref_a + ia * V, (size_t)V * sizeof(float));
    }
    assert_int_equal(md_seq_len(c, 0), A);
    assert_int_equal(md_seq_len(c, 1), B);
    /* a truncated sequence recomputes the same rows: one step back with the sliding layers' rings,
     * further only when they keep every position */
    assert_int_equal(md_seq_truncate(c, 0, 25, &e), -1);
    assert_int_equal(md_seq_len(c, 0), A);
    if (md_seq_truncate(c, 0, A - 1, &e)) fail_msg("%s", e.msg);
    md_row r = {0, A - 1, ta[A - 1], 1};
    if (md_forward(c, &r, 1, out, &e)) fail_msg("%s", e.msg);
    assert_memory_equal(out, ref_a + (A - 1) * V, (size_t)V * sizeof(float));
    md_ctx_free(c);
    md_ctx_params full = {
        .numerics = KN_NUM_Q8, .experts = f.experts, .n_seq = 1, .n_ctx = 128, .swa_full = true};
    if (md_ctx_new(f.model, &full, &c, &e)) fail_msg("%s", e.msg);
    md_row ra[A];
    for (int i = 0; i < A; i++) ra[i] = (md_row){0, i, ta[i], 0};
    if (md_forward(c, ra, A, NULL, &e) || md_seq_truncate(c, 0, 25, &e)) fail_msg("%s", e.msg);
    r = (md_row){0, 25, ta[25], 1};
    if (md_forward(c, &r, 1, out, &e)) fail_msg("%s", e.msg);
    assert_memory_equal(out, ref_a + 25 * V, (size_t)V * sizeof(float));
    free(out);
    free(ref_a);
    free(ref_b);
    md_ctx_free(c);
    close_fixture(&f);
}

static void test_bad_batches(void **state) {
    (void)state;
    fixture f;
    open_fixture(&f, "qwen3moe-tiny");
    md_ctx *c = new_ctx(&f, KN_NUM_F32, 2, NULL);
    float logits[512];
    mw_err e;
    md_row r = {0, 0, 512, 1};
    assert_int_equal(md_forward(c, &r, 1, logits, &e), -1);
    assert_non_null(strstr(e.msg, "token id 512"));
    r = (md_row){0, 3, 1, 1};
    assert_int_equal(md_forward(c, &r, 1, logits, &e), -1);
    assert_non_null(strstr(e.msg, "continues at position 0"));
    r = (md_row){2, 0, 1, 1};
    assert_int_equal(md_forward(c, &r, 1, logits, &e), -1);
    assert_non_null(strstr(e.msg, "sequence 2"));
    r = (md_row){0, 0, -1, 1};
    assert_int_equal(md_forward(c, &r, 1, logits, &e), -1);
    const md_row two[2] = {{1, 1, 5, 0}, {1, 0, 5, 0}}; /* out of order */
    assert_int_equal(md_forward(c, two, 2, NULL, &e), -1);
    assert_int_equal(md_forward(c, two, 0, NULL, &e), -1);
    /* nothing was committed by the failed calls */
    assert_int_equal(md_seq_len(c, 0), 0);
    assert_int_equal(md_seq_len(c, 1), 0);
    /* a context of 4 positions fills up */
    md_ctx_free(c);
    md_ctx_params p = {.numerics = KN_NUM_F32, .experts = f.experts, .n_ctx = 4};
    assert_int_equal(md_ctx_new(f.model, &p, &c, &e), 0);
    md_row four[5];
    for (int i = 0; i < 5; i++) four[i] = (md_row){0, i, 7, 0};
    assert_int_equal(md_forward(c, four, 4, NULL, &e), 0);
    assert_int_equal(md_forward(c, four + 4, 1, NULL, &e), -1);
    assert_non_null(strstr(e.msg, "full"));
    md_ctx_free(c);
    close_fixture(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_intermediates_gptoss),
        cmocka_unit_test(test_intermediates_qwen3moe),
        cmocka_unit_test(test_intermediates_deepseek2),
        cmocka_unit_test(test_prefill_equals_decode_gptoss),
        cmocka_unit_test(test_prefill_equals_decode_qwen3moe),
        cmocka_unit_test(test_prefill_equals_decode_deepseek2),
        cmocka_unit_test(test_sequences_share_a_batch),
        cmocka_unit_test(test_bad_batches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
