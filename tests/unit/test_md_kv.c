/* tests/unit/test_md_kv.c — the sliding-window layers' rings against full caches on gpt-oss-tiny
 * (window 8, layers 0 and 2 slide) over 120 positions, far past the window: one batch, token by
 * token, chunks of mixed sizes (shorter than, equal to and longer than the window, so rows and
 * commits straddle the ring's wrap at every phase), two sequences interleaved — every logit the
 * same bits as the full-cache run. The rings keep only the window (memory bounded, not growing
 * while decoding), and a pass that fails part-way leaves the sequence as it was. */
#include "tests/support/mw_test.h"
#include "tests/support/mwt_model.h"

#include <stdlib.h>
#include <string.h>

#include "model/md_local.h"
#include "model/md_model.h"

#define N   120
#define CTX 128

static vx_source *src;
static md_model *model;
static md_expert_backend *experts;
static int32_t tokens[2][N];
static int64_t V;

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
                       .swa_full = full};
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

static void test_rings_match_full_caches(void **state) {
    (void)state;
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

    /* K and V of one position: 2 KV heads of 64, floats */
    const uint64_t row = 2 * (2 * 64) * sizeof(float);
    printf("    KV bytes at %d positions: full %llu, rings %llu (token by token %llu)\n", N,
           (unsigned long long)b_full, (unsigned long long)b_ring, (unsigned long long)b_tok);
    assert_int_equal(b_full, 4 * CTX * row);
    /* two full layers of 128, two rings of 8 and their staging (at most 8 rows each) */
    assert_true(b_ring <= (2 * CTX + 2 * (8 + 8)) * row);
    assert_true(b_tok <= (2 * CTX + 2 * (8 + 1)) * row);
    free(ref);
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rings_match_full_caches),
        cmocka_unit_test(test_two_sequences_interleaved),
        cmocka_unit_test(test_failed_pass_changes_nothing),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
