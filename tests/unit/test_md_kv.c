/* tests/unit/test_md_kv.c — the sliding-window layers' rings against full caches on gpt-oss-tiny
 * (window 8, layers 0 and 2 slide) over 120 positions, far past the window: one batch, token by
 * token, chunks of mixed sizes (shorter than, equal to and longer than the window, so rows and
 * commits straddle the ring's wrap at every phase), two sequences interleaved — every logit the
 * same bits as the full-cache run. The rings keep only the window (memory bounded, not growing
 * while decoding), and a pass that fails part-way leaves the sequence as it was. The same holds
 * with an f16 cache, in half the bytes. On deepseek2-tiny's latent cache, f16 and bf16 keep prefill
 * = decode bit for bit, halve the bytes per position and move the logits a little from f32's,
 * toward llama.cpp's defaults run (which keeps an f16 cache). */
#include "tests/support/mw_test.h"
#include "tests/support/mwt_model.h"

#include <stdlib.h>
#include <string.h>

#include "model/md_kv.h"
#include "model/md_local.h"
#include "model/md_model.h"

#define N   120
#define CTX 128

static vx_source *src;
static md_model *model;
static md_expert_backend *experts;
static int32_t tokens[2][N];
static int64_t V;
static kn_type kv_type = KN_F32; /* of the contexts ctx() makes */

static int setup(void **state) {
    (void)state;
    mw_err e;
    if (vx_source_open(mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf"), NULL, &src, &e) ||
        md_model_load(src, &model, &e) ||
        md_local_backend_new(src, &model->cfg, NULL, &experts, &e))
        fail_msg("%s", e.msg);
    V = model->cfg.n_vocab;
    uint64_t x = 12345;
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < N; i++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            tokens[s][i] = (int32_t)((x >> 33) % (uint64_t)V);
        }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    experts->destroy(experts);
    md_model_free(model);
    vx_source_close(src);
    return 0;
}

static md_ctx *ctx(bool full, int n_seq, kn_pool *pool, md_expert_backend *be) {
    md_ctx_params p = {.numerics = KN_NUM_Q8,
                       .pool = pool,
                       .experts = be ? be : experts,
                       .n_seq = n_seq,
                       .n_ctx = CTX,
                       .swa_full = full,
                       .kv_type = kv_type};
    md_ctx *c;
    mw_err e;
    if (md_ctx_new(model, &p, &c, &e)) fail_msg("%s", e.msg);
    return c;
}

/* Runs positions [from, from + n) of sequence s (tokens[tok]) as one batch; logits to out. */
static void pass(md_ctx *c, int s, int tok, int from, int n, float *out) {
    md_row rows[N];
    for (int i = 0; i < n; i++) rows[i] = (md_row){s, from + i, tokens[tok][from + i], 1};
    mw_err e;
    if (md_forward(c, rows, n, out + (int64_t)from * V, &e)) fail_msg("%s", e.msg);
}

/* Sequence 0 in chunks (sizes cycled from `chunks`, 0-terminated); returns N × V logits. */
static float *run(bool full, const int *chunks, kn_pool *pool, uint64_t *bytes) {
    md_ctx *c = ctx(full, 1, pool, NULL);
    float *out = malloc((size_t)(N * V) * sizeof(float));
    uint64_t mid = 0;
    for (int pos = 0, i = 0; pos < N; i = chunks[i + 1] ? i + 1 : 0) {
        int n = chunks[i] < N - pos ? chunks[i] : N - pos;
        pass(c, 0, 0, pos, n, out);
        pos += n;
        if (pos > 64 && !mid) mid = md_ctx_kv_bytes(c);
    }
    assert_int_equal(md_seq_len(c, 0), N);
    *bytes = md_ctx_kv_bytes(c);
    /* past 64 positions the caches hold their final size: decoding on does not allocate */
    if (chunks[0] == 1 && !chunks[1]) assert_int_equal(mid, *bytes);
    md_ctx_free(c);
    return out;
}

static void rings_match_full_caches(void) {
    const size_t n = (size_t)(N * V) * sizeof(float);
    static const int one_batch[] = {N, 0}, by_token[] = {1, 0};
    static const int mixed[] = {1, 7, 8, 9, 3, 17, 2, 16, 5, 0};
    uint64_t b_full, b_ring;
    float *ref = run(true, one_batch, NULL, &b_full);
    float *a = run(false, one_batch, NULL, &b_ring);
    assert_memory_equal(a, ref, n);
    free(a);
    kn_pool *pool = kn_pool_create(2);
    uint64_t b_tok;
    a = run(false, by_token, pool, &b_tok);
    assert_memory_equal(a, ref, n);
    free(a);
    a = run(false, mixed, NULL, &b_ring);
    assert_memory_equal(a, ref, n);
    free(a);
    kn_pool_destroy(pool);

    /* K and V of one position: 2 KV heads of 64, of the cache's type */
    const uint64_t row = 2 * (2 * 64) * (kv_type == KN_F32 ? 4 : 2);
    assert_int_equal(md_kv_row_bytes(&model->cfg, kv_type), row);
    printf("    %s KV bytes at %d positions: full %llu, rings %llu (token by token %llu)\n",
           kn_type_name(kv_type), N, (unsigned long long)b_full, (unsigned long long)b_ring,
           (unsigned long long)b_tok);
    assert_int_equal(b_full, 4 * CTX * row);
    /* two full layers of 128, two rings of 8 and their staging (at most 8 rows each) */
    assert_true(b_ring <= (2 * CTX + 2 * (8 + 8)) * row);
    assert_true(b_tok <= (2 * CTX + 2 * (8 + 1)) * row);
    free(ref);
}

static void test_rings_match_full_caches(void **state) {
    (void)state;
    rings_match_full_caches();
    kv_type = KN_F16;
    rings_match_full_caches();
    kv_type = KN_F32;
}

/* Two sequences in the same batches, in chunks that interleave them, against separate full runs. */
static void test_two_sequences_interleaved(void **state) {
    (void)state;
    float *ref[2];
    for (int s = 0; s < 2; s++) {
        md_ctx *c = ctx(true, 1, NULL, NULL);
        ref[s] = malloc((size_t)(N * V) * sizeof(float));
        pass(c, 0, s, 0, N, ref[s]);
        md_ctx_free(c);
    }
    md_ctx *c = ctx(false, 2, NULL, NULL);
    float *out = malloc((size_t)(2 * N * V) * sizeof(float));
    md_row rows[2 * N];
    int64_t where[2 * N];
    int pos[2] = {0, 0}, step = 0;
    mw_err e;
    while (pos[0] < N || pos[1] < N) {
        /* sequence 0 advances 1..11 rows, sequence 1 3..9, their rows alternating in the batch */
        int want[2] = {1 + step * 5 % 11, 3 + step * 7 % 7};
        int T = 0;
        for (int k = 0; k < 11; k++)
            for (int s = 0; s < 2; s++)
                if (k < want[s] && pos[s] < N) {
                    where[T] = (int64_t)s * N + pos[s];
                    rows[T++] = (md_row){s, pos[s], tokens[s][pos[s]], 1};
                    pos[s]++;
                }
        if (md_forward(c, rows, T, out, &e)) fail_msg("%s", e.msg);
        for (int t = 0; t < T; t++)
            assert_memory_equal(out + (int64_t)t * V, ref[where[t] / N] + (where[t] % N) * V,
                                (size_t)V * sizeof(float));
        step++;
    }
    md_ctx_free(c);
    free(out);
    free(ref[0]);
    free(ref[1]);
}

/* A pass that fails after the rings' layers ran leaves the sequence as it was: the retry gives
 * the same bits as an undisturbed run. */
static void test_failed_pass_changes_nothing(void **state) {
    (void)state;
    float *ref = malloc((size_t)(N * V) * sizeof(float));
    md_ctx *c = ctx(true, 1, NULL, NULL);
    pass(c, 0, 0, 0, N, ref);
    md_ctx_free(c);

    mwt_flaky f;
    mwt_flaky_init(&f, experts);
    c = ctx(false, 1, NULL, &f.b);
    float *out = malloc((size_t)(N * V) * sizeof(float));
    mw_err e;
    int pos = 0;
    static const int chunks[] = {20, 9, 1, 1, 30, 8, 51};
    for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
        md_row rows[N];
        for (int j = 0; j < chunks[i]; j++) rows[j] = (md_row){0, pos + j, tokens[0][pos + j], 1};
        f.fail_layer = 3; /* after both sliding layers (0 and 2) stored their rows */
        assert_int_equal(md_forward(c, rows, chunks[i], out + (int64_t)pos * V, &e), -1);
        assert_int_equal(md_seq_len(c, 0), pos);
        if (md_forward(c, rows, chunks[i], out + (int64_t)pos * V, &e)) fail_msg("%s", e.msg);
        pos += chunks[i];
    }
    assert_int_equal(pos, N);
    assert_memory_equal(out, ref, (size_t)(N * V) * sizeof(float));
    md_ctx_free(c);
    free(out);
    free(ref);
}

/* ---- deepseek2's latent cache in f16 / bf16 ---------------------------------------------------
 */

#define DS_TOK 40

typedef struct ds_fixture {
    vx_source *src;
    md_model *m;
    md_expert_backend *be;
    int32_t tok[DS_TOK];
    int64_t nv;
} ds_fixture;

/* The fixture's prompt through deepseek2-tiny with a cache of `type`, as one batch or token by
 * token; *bytes gets the cache's size. */
static float *ds_logits(const ds_fixture *f, kn_numerics num, kn_type type, bool by_token,
                        uint64_t *bytes) {
    md_ctx_params p = {
        .numerics = num, .experts = f->be, .n_seq = 1, .n_ctx = 128, .kv_type = type};
    md_ctx *c;
    mw_err e;
    if (md_ctx_new(f->m, &p, &c, &e)) fail_msg("%s", e.msg);
    float *out = malloc((size_t)(DS_TOK * f->nv) * sizeof(float));
    md_row rows[DS_TOK];
    for (int i = 0; i < DS_TOK; i++) rows[i] = (md_row){0, i, f->tok[i], 1};
    for (int i = 0; i < DS_TOK; i += by_token ? 1 : DS_TOK)
        if (md_forward(c, rows + i, by_token ? 1 : DS_TOK, out + i * f->nv, &e))
            fail_msg("%s", e.msg);
    if (bytes) *bytes = md_ctx_kv_bytes(c);
    md_ctx_free(c);
    return out;
}

/* Positions whose argmax agrees. */
static int argmax_agree(const float *a, const float *b, int64_t nv) {
    int agree = 0;
    for (int t = 0; t < DS_TOK; t++) {
        int64_t ia = 0, ib = 0;
        for (int64_t i = 1; i < nv; i++) {
            if (a[t * nv + i] > a[t * nv + ia]) ia = i;
            if (b[t * nv + i] > b[t * nv + ib]) ib = i;
        }
        agree += ia == ib;
    }
    return agree;
}

/* f32 numerics: an f16 or bf16 latent cache keeps prefill = decode bit for bit, takes half the
 * bytes per position, and moves the logits by its rounding (f16 a little; bf16, with 8 bits of
 * mantissa, more). */
static void ds_types_against_f32(const ds_fixture *f) {
    const size_t n = (size_t)(DS_TOK * f->nv);
    uint64_t b32, b16;
    float *l32 = ds_logits(f, KN_NUM_F32, KN_F32, false, &b32);
    /* one latent row per position: kv_lora + rope values */
    assert_int_equal(md_kv_row_bytes(&f->m->cfg, KN_F32), (uint64_t)f->m->cfg.head_dim_k * 4);
    const kn_type types[] = {KN_F16, KN_BF16};
    const double bound[] = {1e-2, 2.0};
    for (int ti = 0; ti < 2; ti++) {
        float *pre = ds_logits(f, KN_NUM_F32, types[ti], false, &b16);
        float *dec = ds_logits(f, KN_NUM_F32, types[ti], true, NULL);
        if (memcmp(pre, dec, n * sizeof(float)))
            fail_msg("%s cache: prefill and decode differ", kn_type_name(types[ti]));
        assert_int_equal(b16 * 2, b32);
        assert_int_equal(md_kv_row_bytes(&f->m->cfg, types[ti]) * 2,
                         md_kv_row_bytes(&f->m->cfg, KN_F32));
        const double d = mwt_max_abs_diff(pre, l32, n);
        const int agree = argmax_agree(pre, l32, f->nv);
        printf("    deepseek2-tiny f32 numerics, %s cache: %llu bytes (f32 %llu); max |logits - "
               "the f32 cache's| %.3g, argmax agrees at %d/%d\n",
               kn_type_name(types[ti]), (unsigned long long)b16, (unsigned long long)b32, d, agree,
               DS_TOK);
        assert_true(d > 0 && d <= bound[ti]);
        assert_true(agree >= DS_TOK - 2);
        free(pre);
        free(dec);
    }
    free(l32);
}

/* q8 numerics, the quantized model as llama.cpp's defaults run computed it (an f16 cache, flash
 * attention, repacked weights): the f16 cache is no farther from that run than the f32 cache,
 * and its argmax agrees with it at least as often. */
static void ds_f16_against_llamacpp_defaults(const ds_fixture *f) {
    const size_t n = (size_t)(DS_TOK * f->nv);
    size_t nd;
    float *def =
        mwt_read_file(mwt_fixture("llamacpp/deepseek2-tiny/logits_prefill_defaults.bin"), &nd);
    assert_int_equal(nd, n * sizeof(float));
    float *l32 = ds_logits(f, KN_NUM_Q8, KN_F32, false, NULL);
    float *l16 = ds_logits(f, KN_NUM_Q8, KN_F16, false, NULL);
    const double d32 = mwt_max_abs_diff(l32, def, n), d16 = mwt_max_abs_diff(l16, def, n);
    const int a32 = argmax_agree(l32, def, f->nv), a16 = argmax_agree(l16, def, f->nv);
    printf("    deepseek2-tiny q8 against llama.cpp's defaults run: f32 cache max |diff| %.3g, "
           "argmax %d/%d; f16 cache %.3g, argmax %d/%d (f16 - f32 cache: %.3g)\n",
           d32, a32, DS_TOK, d16, a16, DS_TOK, mwt_max_abs_diff(l16, l32, n));
    assert_true(d16 <= d32 + 1e-2);
    assert_true(a16 >= a32);
    free(l32);
    free(l16);
    free(def);
}

static void test_deepseek2_latent_cache_types(void **state) {
    (void)state;
    ds_fixture f;
    mw_err e;
    if (vx_source_open(mwt_fixture("llamacpp/deepseek2-tiny/model.gguf"), NULL, &f.src, &e) ||
        md_model_load(f.src, &f.m, &e) || md_local_backend_new(f.src, &f.m->cfg, NULL, &f.be, &e))
        fail_msg("%s", e.msg);
    f.nv = f.m->cfg.n_vocab;
    char *txt = mwt_read_file(mwt_fixture("llamacpp/deepseek2-tiny/tokens.txt"), NULL);
    char *q = txt;
    for (int i = 0; i < DS_TOK; i++) f.tok[i] = (int32_t)strtol(q, &q, 10);
    free(txt);
    ds_types_against_f32(&f);
    ds_f16_against_llamacpp_defaults(&f);
    f.be->destroy(f.be);
    md_model_free(f.m);
    vx_source_close(f.src);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rings_match_full_caches),
        cmocka_unit_test(test_two_sequences_interleaved),
        cmocka_unit_test(test_failed_pass_changes_nothing),
        cmocka_unit_test(test_deepseek2_latent_cache_types),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
