/* tests/neon/neon_selftest.c — the kernels' self-test for an aarch64 cross build, run under qemu
 * by tests/neon-check.sh. It needs nothing but libc/libm and kernels/ (no cmocka, no jansson), and
 * prints cmocka-style lines. It checks that the NEON kernels give the scalar reference's bits for
 * every type and mode (T-row batches against T = 1, with and without a 2-thread pool, E8M0 edge
 * bytes; the streaming block kernels at every T to 17, every tail and inf / NaN scales), the
 * fused expert op, and llama.cpp parity on the kernel fixtures (dequantization
 * bit-exact, activation quantization byte-exact, matvec within the tolerances).
 *   neon_selftest [FIXTURE_DIR]   (default tests/fixtures/llamacpp/kernels) */
#include "kernels/kn_internal.h"
#include "tests/unit/kn_test_data.h"
#include "util/mw_err.h"

#include <dirent.h>

static const char *fixture_dir = "tests/fixtures/llamacpp/kernels";
static int failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            failures++;                                                                            \
            return;                                                                                \
        }                                                                                          \
    } while (0)

static void *read_file(const char *name, size_t *len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", fixture_dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = malloc(n > 0 ? (size_t)n : 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    if (p) *len = (size_t)n;
    return p;
}

static void test_neon_is_active(void) {
    CHECK(kn__isa_neon_usable());
    CHECK(kn_isa_active() == KN_ISA_NEON);
    CHECK(strncmp(kn__kernel_for(KN_MXFP4, KN_NUM_Q8)->name, "neon", 4) == 0);
    CHECK(strncmp(kn__kernel_for(KN_Q6_K, KN_NUM_F32)->name, "neon", 4) == 0);
}

/* NEON batches (T = 1, 3, 7, 17; every other with a 2-thread pool) equal scalar T = 1 rows. */
static void test_neon_matches_scalar(void) {
    kt_rng r = {8086};
    static const int64_t Ts[] = {1, 3, 7, 17};
    kn_pool *pool = kn_pool_create(2);
    for (size_t ti = 0; ti < KT_NTYPES; ti++) {
        const kn_type t = kt_compute_types[ti];
        for (int rep = 0; rep < 2; rep++) {
            const int64_t cols =
                rep == 0 && kn_traits(t)->blck_size == 32 ? 2880 : kt_pick_cols(&r, t);
            const int64_t rows = kt_range(&r, 9, 40);
            kn_mat W = kt_weights(&r, t, rows, cols, true);
            float *X = kt_gauss_vec(&r, 17 * cols, 1.0f);
            float *single = malloc(17 * rows * 4), *Y = malloc(17 * rows * 4);
            for (int num = 0; num < 2; num++) {
                kn_isa_force(KN_ISA_SCALAR);
                for (int64_t i = 0; i < 17; i++)
                    kn_matmul(&W, X + i * cols, 1, single + i * rows, (kn_numerics)num, NULL);
                kn_isa_force(KN_ISA_NEON);
                for (size_t k = 0; k < 4; k++) {
                    kn_matmul(&W, X, Ts[k], Y, (kn_numerics)num, k & 1 ? pool : NULL);
                    char what[128];
                    snprintf(what, sizeof what, "neon %s %s %lldx%lld T=%lld", kn_type_name(t),
                             kn_numerics_name(num), (long long)rows, (long long)cols,
                             (long long)Ts[k]);
                    if (!kt_same_bits(what, Y, single, (size_t)(Ts[k] * rows))) {
                        failures++;
                        kn_pool_destroy(pool);
                        return;
                    }
                }
            }
            free((void *)W.data);
            free(X), free(single), free(Y);
        }
    }
    kn_pool_destroy(pool);
}

/* Poisons some blocks' weight scales on odd rows (the even rows stay finite). Row 4k + 1 gets
 * +inf and -inf (so inf * 0 and inf - inf: the default NaN), row 4k + 3 one NaN payload, quiet or
 * signalling (Q4_K: in d on row 8k + 3, in dmin, negated by the kernel, on row 8k + 7); MXFP4,
 * which has no inf or NaN, gets the largest and the subnormal exponents. Two different NaNs meeting
 * in one sum would leave whichever the compiler's operand order picks (it may commute an add), in
 * the reference as anywhere, so a row holds one kind. */
static void poison_scales(kn_mat *W, kt_rng *r) {
    uint8_t *d = (uint8_t *)W->data;
    const int64_t nb = W->cols / kn_traits(W->type)->blck_size;
    const int bs = (int)kn_traits(W->type)->type_size;
    static const uint16_t infs[] = {0x7C00, 0xFC00}, nans[] = {0x7E01, 0x7C01};
    for (int64_t n = 1; n < W->rows; n += 2)
        for (int64_t b = 0; b < nb; b++) {
            if (kt_range(r, 0, 2) != 0) continue;
            uint8_t *blk = d + n * W->row_bytes + b * bs;
            const uint16_t h = (n % 4 == 1 ? infs : nans)[kt_range(r, 0, 1)];
            switch (W->type) {
            case KN_MXFP4:
                blk[0] = (uint8_t)(kt_range(r, 0, 1) ? 0xFF : kt_range(r, 0, 1));
                break;
            case KN_Q8_0:
                kn__wr16(blk, h);
                break;
            case KN_Q6_K:
                kn__wr16(blk + 208, h);
                break;
            case KN_Q4_K:
                kn__wr16(blk + (n % 4 == 1 ? 2 * kt_range(r, 0, 1) : n % 8 == 3 ? 0 : 2), h);
                break;
            default:
                break;
            }
        }
}

/* The streaming block kernels at every T from 1 to 17 (one pass, two and three, split unevenly)
 * and every block count a row can end on: MXFP4 / Q8_0 rows of 1..17 and 90 blocks (a tail group
 * of 1..7 blocks, in the first or second half), K-quant rows of 1..17 super-blocks (a tail chunk
 * of 1..7 after 0, 1 or 2 full ones); odd rows with inf / NaN scales, and no row read past its end
 * (the matrix's last row is checked too). Every result equals the scalar reference's T = 1 bits. */
static void test_neon_stream_shapes(void) {
    kt_rng r = {2026};
    const kn_type types[] = {KN_MXFP4, KN_Q8_0, KN_Q6_K, KN_Q4_K};
    enum { TMAX = 17, ROWS = 9 };
    kn_pool *pool = kn_pool_create(2);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const kn_type t = types[ti];
        const int64_t bs = kn_traits(t)->blck_size;
        static const int64_t nbs[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 15, 16, 17, 90};
        for (size_t ni = 0; ni < sizeof nbs / sizeof nbs[0]; ni++) {
            if (bs == 256 && nbs[ni] > 17) continue;
            const int64_t cols = bs * nbs[ni];
            kn_mat W = kt_weights(&r, t, ROWS, cols, true);
            poison_scales(&W, &r);
            float *X = kt_gauss_vec(&r, TMAX * cols, 1.0f);
            float single[TMAX * ROWS], Y[TMAX * ROWS];
            kn_isa_force(KN_ISA_SCALAR);
            for (int64_t i = 0; i < TMAX; i++)
                kn_matmul(&W, X + i * cols, 1, single + i * ROWS, KN_NUM_Q8, NULL);
            kn_isa_force(KN_ISA_NEON);
            for (int64_t T = 1; T <= TMAX; T++) {
                kn_matmul(&W, X, T, Y, KN_NUM_Q8, T % 2 ? NULL : pool);
                char what[128];
                snprintf(what, sizeof what, "neon stream %s K=%lld T=%lld", kn_type_name(t),
                         (long long)cols, (long long)T);
                if (!kt_same_bits(what, Y, single, (size_t)(T * ROWS))) {
                    failures++;
                    kn_pool_destroy(pool);
                    return;
                }
            }
            free((void *)W.data);
            free(X);
        }
    }
    kn_pool_destroy(pool);
}

static void test_expert_matches_scalar(void) {
    kt_rng r = {99};
    const kn_glu glu = {.kind = KN_GLU_SWIGLU_OAI, .alpha = 1.702f, .limit = 7.0f};
    const kn_type types[] = {KN_MXFP4, KN_Q6_K};
    for (int i = 0; i < 2; i++) {
        const int64_t hidden = types[i] == KN_MXFP4 ? 1440 : 512, ff = 256, T = 5;
        kn_expert e = {0};
        e.gate = kt_random_mat(&r, types[i], ff, hidden, 0.05f);
        e.up = kt_random_mat(&r, types[i], ff, hidden, 0.05f);
        e.down = kt_random_mat(&r, types[i], hidden, ff, 0.05f);
        float *b = kt_gauss_vec(&r, hidden, 0.5f);
        e.down_b = (kn_mat){KN_F32, 1, hidden, hidden * 4, b, NULL};
        float *X = kt_gauss_vec(&r, T * hidden, 1.0f);
        float *Ys = malloc(T * hidden * 4), *Yn = malloc(T * hidden * 4);
        for (int num = 0; num < 2; num++) {
            mw_err err;
            kn_isa_force(KN_ISA_SCALAR);
            CHECK(kn_expert_run(&e, &glu, X, T, Ys, (kn_numerics)num, NULL, &err) == 0);
            kn_isa_force(KN_ISA_NEON);
            CHECK(kn_expert_run(&e, &glu, X, T, Yn, (kn_numerics)num, NULL, &err) == 0);
            CHECK(kt_same_bits("expert", Yn, Ys, (size_t)(T * hidden)));
        }
        free((void *)e.gate.data), free((void *)e.up.data), free((void *)e.down.data);
        free(b), free(X), free(Ys), free(Yn);
    }
}

/* The NEON GLU gives the scalar bits (every kind, SiTU with both up branches): a dense sweep
 * with specials, odd lengths. */
static void test_glu_matches_scalar(void) {
    enum { N = 4099 };
    static float g[N], u[N], want[N], got[N];
    kt_rng r = {17};
    for (int i = 0; i < N; i++) g[i] = (float)(i - N / 2) * 0.06f, u[i] = kt_gauss(&r, 6.0f);
    const float special[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 7.0f, -7.0f, 88.8f, -104.0f};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
        g[7 * i] = special[i], u[7 * i + 3] = special[i];
    const kn_glu glus[] = {{.kind = KN_GLU_SWIGLU},
                           {.kind = KN_GLU_SWIGLU_OAI, .alpha = 1.702f, .limit = 7.0f},
                           {.kind = KN_GLU_SITU, .beta = 4.0f, .lbeta = 2.5f},
                           {.kind = KN_GLU_SITU, .beta = 0.3f, .lbeta = 0.0f}};
    for (size_t k = 0; k < sizeof glus / sizeof glus[0]; k++) {
        kn__glu_apply_ref(&glus[k], g, u, want, N);
        for (int len = N - 3; len <= N; len++) {
            kn_glu_apply(&glus[k], g, u, got, len);
            CHECK(kt_same_bits("glu", got, want, (size_t)len));
        }
    }
}

static void test_fixture_dequant(void) {
    const char *names[] = {"mxfp4", "q6_K"};
    for (int i = 0; i < 2; i++) {
        char fn[128];
        size_t nb, nf;
        snprintf(fn, sizeof fn, "%s_blocks.bin", names[i]);
        uint8_t *blocks = read_file(fn, &nb);
        snprintf(fn, sizeof fn, "%s_dequant.bin", names[i]);
        float *want = read_file(fn, &nf);
        CHECK(blocks && want);
        const kn_type_traits *tr = kn_traits((kn_type)kn_type_from_name(names[i]));
        const size_t n = nb / (size_t)tr->type_size * (size_t)tr->blck_size;
        CHECK(nf == n * sizeof(float));
        float *got = malloc(nf);
        tr->to_float(blocks, got, (int64_t)n);
        CHECK(kt_same_bits(names[i], got, want, n));
        free(got), free(blocks), free(want);
    }
}

/* Every <name>_W.bin with <type>_<rows>x<cols> in its name is a matvec case. */
static void test_fixture_matvec(void) {
    DIR *d = opendir(fixture_dir);
    CHECK(d);
    struct dirent *de;
    int cases = 0;
    while ((de = readdir(d))) {
        const size_t len = strlen(de->d_name);
        if (len < 7 || strcmp(de->d_name + len - 6, "_W.bin") != 0) continue;
        char name[256], type[64];
        snprintf(name, sizeof name, "%.*s", (int)(len - 6), de->d_name);
        const char *dims = strrchr(name, '_');
        long long rows, cols;
        if (!dims || sscanf(dims + 1, "%lldx%lld", &rows, &cols) != 2) continue;
        snprintf(type, sizeof type, "%.*s", (int)(dims - name), name);
        const int t = kn_type_from_name(type);
        CHECK(t >= 0);
        const kn_type act = kn_traits((kn_type)t)->vec_dot_type;
        char fn[512];
        size_t wl, xl, ql, rl, q8l;
        snprintf(fn, sizeof fn, "%s_W.bin", name);
        uint8_t *W = read_file(fn, &wl);
        snprintf(fn, sizeof fn, "%s_x.bin", name);
        float *x = read_file(fn, &xl);
        snprintf(fn, sizeof fn, "%s_x_%s.bin", name, kn_type_name(act));
        uint8_t *xq = read_file(fn, &ql);
        snprintf(fn, sizeof fn, "%s_y_ref.bin", name);
        float *yref = read_file(fn, &rl);
        snprintf(fn, sizeof fn, "%s_y_q8ref.bin", name);
        float *yq8 = read_file(fn, &q8l);
        CHECK(W && x && xq && yref && yq8);
        CHECK(wl == kn_row_size((kn_type)t, cols) * (size_t)rows && ql == kn_row_size(act, cols));
        uint8_t *myq = malloc(ql);
        kn_traits(act)->from_float(x, myq, cols);
        CHECK(memcmp(myq, xq, ql) == 0);
        kn_mat M = {(kn_type)t, rows, cols, kn_row_size((kn_type)t, cols), W, NULL};
        float *y = malloc((size_t)rows * 4);
        kn_matmul(&M, x, 1, y, KN_NUM_F32, NULL);
        const double ef = kt_rel_to_max(y, yref, (size_t)rows);
        kn_matmul(&M, x, 1, y, KN_NUM_Q8, NULL);
        const double eq = kt_rel_to_max(y, yq8, (size_t)rows);
        printf("  %s [neon]: f32 vs y_ref %.2e, q8 vs y_q8ref %.2e\n", name, ef, eq);
        CHECK(ef <= 1e-5 && eq <= 1e-6);
        free(W), free(x), free(xq), free(yref), free(yq8), free(myq), free(y);
        cases++;
    }
    closedir(d);
    CHECK(cases > 0);
}

int main(int argc, char **argv) {
    if (argc > 1) fixture_dir = argv[1];
    static const struct {
        const char *name;
        void (*fn)(void);
    } tests[] = {
        {"test_neon_is_active", test_neon_is_active},
        {"test_neon_matches_scalar", test_neon_matches_scalar},
        {"test_neon_stream_shapes", test_neon_stream_shapes},
        {"test_expert_matches_scalar", test_expert_matches_scalar},
        {"test_glu_matches_scalar", test_glu_matches_scalar},
        {"test_fixture_dequant", test_fixture_dequant},
        {"test_fixture_matvec", test_fixture_matvec},
    };
    const int n = (int)(sizeof tests / sizeof tests[0]);
    int failed = 0;
    printf("[==========] Running %d test(s).\n", n);
    for (int i = 0; i < n; i++) {
        printf("[ RUN      ] %s\n", tests[i].name);
        fflush(stdout);
        const int before = failures;
        kn_isa_force(KN_ISA_NEON);
        tests[i].fn();
        const bool ok = failures == before;
        failed += !ok;
        printf("[  %s ] %s\n", ok ? "     OK" : "FAILED ", tests[i].name);
    }
    printf("[==========] %d test(s) run.\n", n);
    printf("[  PASSED  ] %d test(s).\n", n - failed);
    if (failed) printf("[  FAILED  ] %d test(s).\n", failed);
    return failed ? 1 : 0;
}
