/* kernels/matmul.c — kn_matmul and the machinery it shares with kn_expert_run: activation
 * preparation, scratch memory, and splitting rows (never the K reduction) across the pool. Rows
 * are handed out in chunks from an atomic counter, so a slow or late thread only takes fewer
 * chunks; since every row is computed whole by one thread in the canonical order, the result is
 * the same whichever thread takes which chunk. */
#include "kernels/kn_internal.h"
#include "util/mw_err.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

/* Below this many multiply-adds a job runs on the caller alone: waking a worker costs more. */
#define KN_MIN_PARALLEL_MACS (256 * 1024)
#define KN_CHUNKS_PER_THREAD 8
#define KN_CHUNK_ALIGN       8 /* rows; SIMD kernels tile rows in groups that divide this */

int kn_mat_check(const kn_mat *W, const char *what, mw_err *err) {
    const kn_type_traits *tr = W ? kn_traits(W->type) : NULL;
    if (!what) what = "matrix";
    if (!W) return mw_errf(err, "%s: missing", what);
    if (!tr) return mw_errf(err, "%s: unknown ggml type id %d", what, (int)W->type);
    if (!tr->can_compute)
        return mw_errf(err, "%s: type %s has no kernels in this build", what, tr->name);
    if (W->rows < 0 || W->cols <= 0)
        return mw_errf(err, "%s: bad shape %lld x %lld", what, (long long)W->rows,
                       (long long)W->cols);
    if (W->cols % tr->blck_size)
        return mw_errf(err, "%s: %lld columns is not a multiple of %s's block of %d", what,
                       (long long)W->cols, tr->name, tr->blck_size);
    if (W->row_bytes < kn_row_size(W->type, W->cols))
        return mw_errf(err, "%s: row stride %zu is below the %zu bytes of a %s row", what,
                       W->row_bytes, kn_row_size(W->type, W->cols), tr->name);
    if (W->rows > 0 && !W->data) return mw_errf(err, "%s: no data", what);
    return 0;
}

void kn_check_mat(const kn_mat *W, const char *what) {
    mw_err err;
    if (kn_mat_check(W, what, &err) != 0) {
        fprintf(stderr, "moewire kernels: %s\n", err.msg);
        abort();
    }
}

void kn_mat_row(const kn_mat *W, int64_t r, float *dst) {
    kn_check_mat(W, "kn_mat_row");
    if (r < 0 || r >= W->rows) {
        fprintf(stderr, "moewire kernels: kn_mat_row: row %lld of %lld\n", (long long)r,
                (long long)W->rows);
        abort();
    }
    kn_traits(W->type)->to_float((const uint8_t *)W->data + (size_t)r * W->row_bytes, dst, W->cols);
}

/* ---- jobs ------------------------------------------------------------------------------------ */

typedef struct job {
    kn_part *parts;
    int nparts;
    int64_t chunk_rows[4];
    int64_t first_chunk[5]; /* prefix sums of each part's chunk count */
    atomic_llong next;
    uint8_t *scratch;
    size_t per_thread;
} job;

static size_t thread_scratch(const kn_part *parts, int nparts) {
    size_t m = 0;
    for (int i = 0; i < nparts; i++) {
        const kn_kernel *k = parts[i].kern;
        size_t s = k->scratch_bytes ? k->scratch_bytes(parts[i].W, parts[i].x.T) : 0;
        if (s > m) m = s;
    }
    return kn_align64(m);
}

size_t kn_parts_scratch(const kn_part *parts, int nparts, int nth) {
    return thread_scratch(parts, nparts) * (size_t)nth;
}

int kn_parts_threads(const kn_part *parts, int nparts, kn_pool *pool) {
    double macs = 0;
    for (int i = 0; i < nparts; i++)
        macs += (double)parts[i].W->rows * (double)parts[i].W->cols * (double)parts[i].x.T;
    const int n = kn_pool_size(pool);
    if (n <= 1 || macs < KN_MIN_PARALLEL_MACS) return 1;
    return n;
}

static void job_task(void *arg, int ith, int nth) {
    job *j = arg;
    (void)nth;
    void *scratch = j->scratch + (size_t)ith * j->per_thread;
    const int64_t total = j->first_chunk[j->nparts];
    for (;;) {
        const int64_t c = atomic_fetch_add(&j->next, 1);
        if (c >= total) return;
        int p = 0;
        while (c >= j->first_chunk[p + 1]) p++;
        const kn_part *pt = &j->parts[p];
        const int64_t n0 = (c - j->first_chunk[p]) * j->chunk_rows[p];
        const int64_t n1 =
            n0 + j->chunk_rows[p] < pt->W->rows ? n0 + j->chunk_rows[p] : pt->W->rows;
        pt->kern->rows(pt->W, &pt->x, pt->Y, pt->ldy, n0, n1, scratch);
    }
}

void kn_run_parts(kn_part *parts, int nparts, kn_pool *pool, void *scratch) {
    const int nth = kn_parts_threads(parts, nparts, pool);
    job j = {.parts = parts, .nparts = nparts, .scratch = scratch};
    j.per_thread = thread_scratch(parts, nparts);
    j.first_chunk[0] = 0;
    for (int i = 0; i < nparts; i++) {
        const int64_t rows = parts[i].W->rows;
        int64_t c = nth == 1
                        ? rows
                        : (rows + nth * KN_CHUNKS_PER_THREAD - 1) / (nth * KN_CHUNKS_PER_THREAD);
        c = (c + KN_CHUNK_ALIGN - 1) / KN_CHUNK_ALIGN * KN_CHUNK_ALIGN;
        j.chunk_rows[i] = c > 0 ? c : KN_CHUNK_ALIGN;
        j.first_chunk[i + 1] = j.first_chunk[i] + (rows + j.chunk_rows[i] - 1) / j.chunk_rows[i];
    }
    atomic_init(&j.next, 0);
    kn_pool_run_locked(pool, job_task, &j, nth);
}

/* ---- activation preparation ------------------------------------------------------------------ */

typedef struct prep_job {
    const kn_kernel *kern;
    const float *X;
    int64_t K, T;
    uint8_t *dst;
    size_t stride;
} prep_job;

static void prep_task(void *arg, int ith, int nth) {
    prep_job *p = arg;
    for (int64_t t = ith; t < p->T; t += nth)
        p->kern->act_prep(p->X + t * p->K, p->dst + (size_t)t * p->stride, p->K);
}

/* Bytes of one prepared row (0: the kernel reads raw floats). */
static size_t act_stride(const kn_kernel *k, int64_t K) {
    return k->act_prep ? kn_align64(k->act_bytes(K)) : 0;
}

/* Prepares T rows of X (row stride K floats) for kernel k into dst; sets *x. */
static void prepare(const kn_kernel *k, const float *X, int64_t K, int64_t T, uint8_t *dst,
                    kn_pool *pool, kn_act *x) {
    x->T = T;
    if (!k->act_prep) {
        x->data = X;
        x->stride = (size_t)K * sizeof(float);
        return;
    }
    prep_job p = {k, X, K, T, dst, act_stride(k, K)};
    const int nth = T >= 8 && (double)T * (double)K >= 32768 ? kn_pool_size(pool) : 1;
    kn_pool_run_locked(pool, prep_task, &p, nth < T ? nth : (int)T);
    x->data = dst;
    x->stride = p.stride;
}

size_t kn_act_scratch(const kn_kernel *k, int64_t K, int64_t T) {
    return act_stride(k, K) * (size_t)T;
}

void kn_act_prepare(const kn_kernel *k, const float *X, int64_t K, int64_t T, void *dst,
                    kn_pool *pool, kn_act *x) {
    prepare(k, X, K, T, dst, pool, x);
}

/* ---- kn_matmul ------------------------------------------------------------------------------- */

void kn_matmul(const kn_mat *W, const float *X, int64_t T, float *Y, kn_numerics num,
               kn_pool *caller_pool) {
    kn_check_mat(W, "kn_matmul");
    if (T <= 0 || W->rows == 0) return;
    kn_part part = {.W = W, .kern = kn_kernel_for(W->type, num), .Y = Y, .ldy = W->rows};
    part.x.T = T;
    kn_pool *pool = kn_pool_acquire(caller_pool);
    const int nth = kn_parts_threads(&part, 1, pool);
    const size_t act = kn_act_scratch(part.kern, W->cols, T);
    void *tmp;
    uint8_t *buf = kn_pool_scratch(pool, act + kn_parts_scratch(&part, 1, nth), &tmp);
    if (!buf) {
        fprintf(stderr, "moewire kernels: out of memory for a %lld x %lld matmul at T=%lld\n",
                (long long)W->rows, (long long)W->cols, (long long)T);
        abort();
    }
    prepare(part.kern, X, W->cols, T, buf, pool, &part.x);
    kn_run_parts(&part, 1, pool, buf + act);
    kn_pool_release(pool);
    free(tmp);
}
