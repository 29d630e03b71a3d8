/* bench/ggml/ggml_mm.c — ggml's matmul on the shapes bench_kernels measures, so that the kernel
 * benchmark can put ggml's time beside ours from the same run (bench_kernels --ggml-mm). Built
 * only on request against a ggml the user names (`make ggml-mm GGML_INC=DIR GGML_LIB=DIR`): the
 * headers and shared libraries of a ggml or llama.cpp build; nothing of ggml is in this
 * repository.
 *
 * Like the llama.cpp CPU backend, it puts the weights in the CPU_REPACK buffer type where that
 * takes the matrix type on this CPU (the layout ggml chooses; --plain keeps them in a plain
 * buffer; the JSON says which), and it times what
 * bench_kernels times: one matmul per call (a graph of one ggml_mul_mat), rotating over more
 * matrices than the last-level cache holds so that the weights come from memory; best and median
 * over the calls within the time budget. One JSON line per (T, threads).
 *
 *   ggml_mm --type mxfp4|q6_K|q8_0 --rows R --cols C [--tokens 1,4,16,64] [--threads 1,2]
 *           [--mats N] [--seconds S] [--plain] */
#include "bench/bench_util.h"

#include <ggml-alloc.h>
#include <ggml-backend.h>
#include <ggml-cpu.h>
#include <ggml.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct opts {
    enum ggml_type type;
    int64_t rows, cols;
    int tokens[8], n_tokens, threads[4], n_threads, mats;
    double seconds;
    bool plain;
} opts;

static int parse(int argc, char **argv, opts *o) {
    *o = (opts){.type = GGML_TYPE_COUNT,
                .tokens = {1, 4, 16, 64},
                .n_tokens = 4,
                .threads = {1, 2},
                .n_threads = 2,
                .seconds = 0.5};
    const char *type = NULL;
    int rows = 0, cols = 0;
    const bu_opt opt[] = {
        BU_OPT("--type", BU_STR, &type, "mxfp4|q6_K|q8_0", "the weights' ggml type (required)"),
        BU_OPT_IN("--rows", BU_INT, &rows, "R", "rows of the matrix (required)", 1, 1 << 24),
        BU_OPT_IN("--cols", BU_INT, &cols, "C", "columns, a multiple of the block (required)", 1,
                  1 << 24),
        BU_OPT_INTS("--tokens", o->tokens, &o->n_tokens, 8, "1,4,16,64", "token counts", 1, 4096),
        BU_OPT_INTS("--threads", o->threads, &o->n_threads, 4, "1,2", "thread counts", 1, 4096),
        BU_OPT_IN("--mats", BU_INT, &o->mats, "N", "matrices rotated over (required)", 1, 4096),
        BU_OPT_IN("--seconds", BU_NUM, &o->seconds, "0.5", "time budget per case", 0.001, 3600),
        BU_OPT("--plain", BU_FLAG, &o->plain, "", "a plain CPU buffer instead of CPU_REPACK"),
    };
    const bu_cli cli = {"ggml_mm",
                        "ggml's matmul on one shape, timed as bench_kernels times ours: one JSON "
                        "line per (T, threads).",
                        NULL,
                        NULL,
                        opt,
                        (int)(sizeof opt / sizeof opt[0])};
    const int rc = bu_args(argc, argv, &cli, NULL);
    if (rc != BU_RUN) return rc;
    for (int t = 0; type && t < GGML_TYPE_COUNT; t++)
        if (ggml_type_name((enum ggml_type)t) && !strcmp(ggml_type_name(t), type))
            o->type = (enum ggml_type)t;
    o->rows = rows, o->cols = cols;
    if (o->type == GGML_TYPE_COUNT || !rows || !cols || cols % ggml_blck_size(o->type) || !o->mats)
        return fprintf(stderr, "ggml_mm: bad or missing --type/--rows/--cols/--mats\n"), 2;
    return BU_RUN;
}

/* The CPU device's CPU_REPACK buffer type when it takes this matmul (as llama.cpp's loader asks:
 * a weight in a dummy buffer of that type, and whether the device supports the op), or NULL. */
static ggml_backend_buffer_type_t repack_buft(const opts *o) {
    ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    ggml_backend_reg_t reg = dev ? ggml_backend_dev_backend_reg(dev) : NULL;
    ggml_backend_dev_get_extra_bufts_t get =
        reg ? (ggml_backend_dev_get_extra_bufts_t)ggml_backend_reg_get_proc_address(
                  reg, "ggml_backend_dev_get_extra_bufts")
            : NULL;
    ggml_backend_buffer_type_t found = NULL;
    for (ggml_backend_buffer_type_t *b = get ? get(dev) : NULL; b && *b && !found; b++)
        if (!strcmp(ggml_backend_buft_name(*b), "CPU_REPACK")) found = *b;
    if (!found) return NULL;
    struct ggml_init_params ip = {3 * ggml_tensor_overhead(), NULL, true};
    struct ggml_context *ctx = ggml_init(ip);
    struct ggml_tensor *w = ggml_new_tensor_2d(ctx, o->type, o->cols, o->rows);
    struct ggml_tensor *op =
        ggml_mul_mat(ctx, w, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, o->cols, 64));
    w->buffer = ggml_backend_buft_alloc_buffer(found, 0);
    const bool ok = ggml_backend_dev_supports_op(dev, op);
    ggml_backend_buffer_free(w->buffer);
    ggml_free(ctx);
    return ok ? found : NULL;
}

/* o->mats copies of one quantized random matrix in the chosen buffer type. */
static ggml_backend_buffer_t make_weights(const opts *o, struct ggml_context **wctx,
                                          struct ggml_tensor **W, const char **buft_name) {
    struct ggml_init_params ip = {(size_t)o->mats * ggml_tensor_overhead() + 1024, NULL, true};
    *wctx = ggml_init(ip);
    for (int i = 0; i < o->mats; i++) W[i] = ggml_new_tensor_2d(*wctx, o->type, o->cols, o->rows);
    ggml_backend_buffer_type_t buft = o->plain ? NULL : repack_buft(o);
    if (!buft) buft = ggml_backend_cpu_buffer_type();
    *buft_name = ggml_backend_buft_name(buft);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(*wctx, buft);
    const size_t n = (size_t)(o->rows * o->cols), bytes = ggml_row_size(o->type, o->cols) * o->rows;
    float *src = malloc(n * sizeof *src);
    void *q = malloc(bytes);
    if (!buf || !src || !q) return fprintf(stderr, "ggml_mm: out of memory\n"), NULL;
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        src[i] = (float)((double)(s >> 11) * 0x1p-53 - 0.5);
    }
    ggml_quantize_chunk(o->type, src, q, 0, o->rows, o->cols, NULL);
    for (int i = 0; i < o->mats; i++) ggml_backend_tensor_set(W[i], q, 0, bytes);
    free(src);
    free(q);
    return buf;
}

/* Times matmuls by T tokens on each thread count, one graph per matrix, evaluated in rotation (as
 * bench_kernels calls its matrices); prints a JSON line per thread count. */
static void time_tokens(const opts *o, ggml_backend_t be, struct ggml_tensor **W, int T,
                        const char *buft_name) {
    const size_t per = ggml_tensor_overhead() + ggml_graph_overhead_custom(4, false);
    struct ggml_init_params ip = {(size_t)(o->mats + 1) * per + 4096, NULL, true};
    struct ggml_context *ctx = ggml_init(ip);
    struct ggml_tensor *X = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, o->cols, T);
    struct ggml_cgraph **gf = calloc((size_t)o->mats, sizeof *gf);
    for (int i = 0; i < o->mats; i++) {
        gf[i] = ggml_new_graph_custom(ctx, 4, false);
        ggml_build_forward_expand(gf[i], ggml_mul_mat(ctx, W[i], X));
    }
    /* every result its own memory: no allocator between evaluations */
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, be);
    float *x = malloc((size_t)(o->cols * T) * sizeof *x);
    for (int64_t i = 0; i < o->cols * T; i++) x[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
    ggml_backend_tensor_set(X, x, 0, ggml_nbytes(X));
    for (int ti = 0; ti < o->n_threads; ti++) {
        enum { MAXCALLS = 20000 };
        static double dt[MAXCALLS];
        ggml_backend_cpu_set_n_threads(be, o->threads[ti]);
        ggml_backend_graph_compute(be, gf[0]); /* warm-up */
        int n = 0;
        for (double start = bu_now();
             n < MAXCALLS && (n < o->mats || bu_now() - start < o->seconds); n++) {
            const double t0 = bu_now();
            ggml_backend_graph_compute(be, gf[n % o->mats]);
            dt[n] = bu_now() - t0;
        }
        const double best = bu_min(dt, n), median = bu_median(dt, n);
        printf("{\"bench\":\"ggml_mm\",\"type\":\"%s\",\"rows\":%lld,\"cols\":%lld,\"T\":%d,"
               "\"threads\":%d,\"buffer\":\"%s\",\"mats\":%d,\"calls\":%d,\"best_us\":%.2f,"
               "\"median_us\":%.2f}\n",
               ggml_type_name(o->type), (long long)o->rows, (long long)o->cols, T, o->threads[ti],
               buft_name, o->mats, n, best * 1e6, median * 1e6);
        fflush(stdout);
    }
    free(x);
    free(gf);
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
}

int main(int argc, char **argv) {
    opts o;
    const int status = parse(argc, argv, &o);
    if (status != BU_RUN) return status;
    ggml_backend_t be = ggml_backend_cpu_init();
    struct ggml_tensor **W = calloc((size_t)o.mats, sizeof *W);
    struct ggml_context *wctx = NULL;
    const char *buft_name = "";
    ggml_backend_buffer_t buf = be && W ? make_weights(&o, &wctx, W, &buft_name) : NULL;
    if (!buf) return 1;
    for (int i = 0; i < o.n_tokens; i++) time_tokens(&o, be, W, o.tokens[i], buft_name);
    ggml_backend_buffer_free(buf);
    ggml_free(wctx);
    free(W);
    ggml_backend_free(be);
    return 0;
}
