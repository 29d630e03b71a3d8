/* kernels/kn_matmul.c — kn_matmul and the machinery it shares with kn_expert_run: activation
 * preparation, scratch memory, and splitting rows (never the K reduction) across the pool. Rows
 * are handed out in chunks from an atomic counter, so a slow or late thread only takes fewer
 * chunks (a job whose parts have different row counts is handed out from both ends); since every
 * row is computed whole by one thread in the canonical order, the result is the same whichever
 * thread takes which chunk. */
#include "kernels/kn_internal.h"
#include "util/mw_err.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const numerics_names[KN_NUM_COUNT] = {[KN_NUM_F32] = "f32", [KN_NUM_Q8] = "q8"};

const char *kn_numerics_name(kn_numerics num) {
    return (unsigned)num < KN_NUM_COUNT ? numerics_names[num] : "unknown";
}

int kn_numerics_from_name(const char *name) {
    for (int i = 0; name && i < KN_NUM_COUNT; i++)
        if (!strcmp(numerics_names[i], name)) return i;
    return -1;
}

/* Below this many multiply-adds a job runs on the caller alone: waking a worker costs more. */
#define KN_MIN_PARALLEL_MACS (256 * 1024)
#define KN_CHUNKS_PER_THREAD 8
#define KN_CHUNK_ALIGN       24 /* rows; SIMD kernels tile rows in groups that divide this (4, 6, 8) */
/* A chunk reads at most about this many weight bytes, so a tall matrix (an LM head of 100 MB) ends
 * with the threads finishing within a fraction of a millisecond of each other. */
#define KN_CHUNK_BYTES (512 * 1024)
/* Chunks before a job's tail are bigger: a chunk's start waits for its stream's prefetches to get
 * ahead, and the prefetches past its last row fetch lines that another thread's chunk has already
 * read. The tail (as many bytes as this many big chunks per thread) is cut small, so the threads
 * still finish together. */
#define KN_BIG_CHUNK_BYTES (1024 * 1024)
#define KN_TAIL_BIG_CHUNKS 2

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
    if (tr->planar && W->row_bytes != kn_row_size(W->type, W->cols))
        return mw_errf(err, "%s: a %s matrix is one whole: row stride %zu is not %zu", what,
                       tr->name, W->row_bytes, kn_row_size(W->type, W->cols));
    if (W->rows > 0 && !W->data) return mw_errf(err, "%s: no data", what);
    return 0;
}

void kn__check_mat(const kn_mat *W, const char *what) {
    mw_err err;
    if (kn_mat_check(W, what, &err) != 0) {
        fprintf(stderr, "moewire kernels: %s\n", err.msg);
        abort();
    }
}

void kn_mat_row(const kn_mat *W, int64_t r, float *dst) {
    kn__check_mat(W, "kn_mat_row");
    if (r < 0 || r >= W->rows) {
        fprintf(stderr, "moewire kernels: kn_mat_row: row %lld of %lld\n", (long long)r,
                (long long)W->rows);
        abort();
    }
    if (kn_traits(W->type)->planar) {
        kn__planar_row(W, r, dst);
        return;
    }
    kn_traits(W->type)->to_float((const uint8_t *)W->data + (size_t)r * W->row_bytes, dst, W->cols);
}

/* ---- jobs ------------------------------------------------------------------------------------ */

typedef struct job {
    kn__part *parts;
    int nparts;
    int64_t total; /* chunks of all parts */
    /* chunks claimed from the front (low 32 bits) and, when two_ended, from the back (high) */
    _Atomic uint64_t claimed;
    bool two_ended;
    uint8_t *scratch;
    size_t per_thread;
} job;

/* The scratch bytes one thread of the job needs. */
static size_t thread_scratch(const kn__part *parts, int nparts) {
    size_t m = 0;
    for (int i = 0; i < nparts; i++) {
        const kn__kernel *k = parts[i].kern;
        size_t s = k->scratch_bytes ? k->scratch_bytes(parts[i].W, parts[i].x.T) : 0;
        if (s > m) m = s;
    }
    return kn__align64(m);
}

size_t kn__parts_scratch(const kn__part *parts, int nparts, int nth) {
    return kn_slots_bytes(thread_scratch(parts, nparts), nth);
}

int kn__parts_threads(const kn__part *parts, int nparts, kn_pool *pool) {
    double macs = 0;
    for (int i = 0; i < nparts; i++)
        macs += (double)parts[i].W->rows * (double)parts[i].W->cols * (double)parts[i].x.T;
    const int n = kn_pool_size(pool);
    if (n <= 1 || macs < KN_MIN_PARALLEL_MACS) return 1;
    return n;
}

static int64_t align_rows(int64_t n) {
    return (n + KN_CHUNK_ALIGN - 1) / KN_CHUNK_ALIGN * KN_CHUNK_ALIGN;
}

/* y[i] += b[i] for i < n. Eight independent adds per step, which the compiler turns into vector
 * adds on any x86-64 (each element's sum is the same bits at any width). The experts' biases
 * pass here for every row of a batch, so one element at a time would be a visible share of a
 * serving step. */
static void add_bias(float *restrict y, const float *restrict b, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        y[i] += b[i], y[i + 1] += b[i + 1], y[i + 2] += b[i + 2], y[i + 3] += b[i + 3];
        y[i + 4] += b[i + 4], y[i + 5] += b[i + 5], y[i + 6] += b[i + 6], y[i + 7] += b[i + 7];
    }
    for (; i < n; i++) y[i] += b[i];
}

/* The next chunk for a thread taking from the front or the back; -1 when none is left. */
static int64_t claim(job *j, bool back) {
    if (!j->two_ended) {
        const uint64_t v = atomic_fetch_add(&j->claimed, 1);
        return (int64_t)v < j->total ? (int64_t)v : -1;
    }
    uint64_t v = atomic_load(&j->claimed), nv;
    int64_t c;
    do {
        const int64_t f = (int64_t)(v & 0xffffffffu), b = (int64_t)(v >> 32);
        if (f + b >= j->total) return -1;
        c = back ? j->total - 1 - b : f;
        nv = back ? v + ((uint64_t)1 << 32) : v + 1;
    } while (!atomic_compare_exchange_weak(&j->claimed, &v, nv));
    return c;
}

/* The part holding chunk c (parts in chunk order). */
static int part_of(const job *j, int64_t c) {
    int lo = 0, hi = j->nparts - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (j->parts[mid].first_chunk <= c)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

static void job_task(void *arg, int ith, int nth) {
    job *j = arg;
    (void)nth;
    void *scratch = kn_slot(j->scratch, j->per_thread, ith);
    for (;;) {
        const int64_t c = claim(j, ith % 2 == 1);
        if (c < 0) return;
        const kn__part *pt = &j->parts[part_of(j, c)];
        const int64_t i = c - pt->first_chunk;
        int64_t n0, n1;
        if (i < pt->n_big) {
            n0 = i * pt->big_rows;
            n1 = n0 + pt->big_rows < pt->split ? n0 + pt->big_rows : pt->split;
        } else {
            n0 = pt->split + (i - pt->n_big) * pt->chunk_rows;
            n1 = n0 + pt->chunk_rows < pt->W->rows ? n0 + pt->chunk_rows : pt->W->rows;
        }
        pt->kern->rows(pt->W, &pt->x, pt->Y, pt->ldy, n0, n1, scratch);
        if (pt->bias) /* while the chunk's outputs are in cache, on every thread */
            for (int64_t t = 0; t < pt->x.T; t++)
                add_bias(pt->Y + t * pt->ldy + n0, pt->bias + n0, n1 - n0);
    }
}

#define KN_SORTED_PARTS 64 /* parts sorted on the stack; more are sorted in a heap copy */

static int by_rows(const void *a, const void *b) {
    const int64_t x = ((const kn__part *)a)->x.T, y = ((const kn__part *)b)->x.T;
    return x < y ? -1 : x > y;
}

void kn__run_parts(kn__part *parts, int nparts, kn_pool *pool, void *scratch) {
    const int nth = kn__parts_threads(parts, nparts, pool);
    job j = {.parts = parts, .nparts = nparts, .scratch = scratch};
    /* Parts with different row counts (the experts of a batch): sorted by rows, the odd threads
     * take chunks from the end. A few rows' chunks stream memory while many rows' compute, so one
     * thread streaming and another computing use both at once, where two threads on the same
     * part would wait for the same one. */
    kn__part small[KN_SORTED_PARTS], *sorted = NULL;
    bool mixed = false;
    for (int i = 1; i < nparts; i++) mixed |= parts[i].x.T != parts[0].x.T;
    if (mixed && nth > 1)
        sorted = nparts <= KN_SORTED_PARTS ? small : malloc((size_t)nparts * sizeof *parts);
    if (sorted) { /* without memory for the copy, the chunks go in order from the front */
        memcpy(sorted, parts, (size_t)nparts * sizeof *parts);
        qsort(sorted, (size_t)nparts, sizeof *sorted, by_rows);
        j.parts = parts = sorted;
        j.two_ended = true;
    }
    j.per_thread = thread_scratch(parts, nparts);
    /* the job's last bytes (its tail) go in small chunks, those before in big ones */
    double tail = nth > 1 ? (double)KN_TAIL_BIG_CHUNKS * nth * KN_BIG_CHUNK_BYTES : INFINITY;
    for (int i = nparts - 1; i >= 0; i--) {
        kn__part *pt = &parts[i];
        const int64_t rows = pt->W->rows;
        const double rb = (double)pt->W->row_bytes;
        int64_t c = nth == 1
                        ? rows
                        : (rows + nth * KN_CHUNKS_PER_THREAD - 1) / (nth * KN_CHUNKS_PER_THREAD);
        const int64_t cap = (int64_t)(KN_CHUNK_BYTES / (rb + 1));
        if (nth > 1 && c > cap) c = cap;
        pt->chunk_rows = c > 0 ? align_rows(c) : KN_CHUNK_ALIGN;
        /* rows [split, rows) are in the tail: whole small chunks, split aligned */
        int64_t split = 0;
        if (tail < rows * rb) {
            split = rows - (int64_t)(tail / rb) - 1;
            split = split > 0 ? split / KN_CHUNK_ALIGN * KN_CHUNK_ALIGN : 0;
        }
        tail = tail > (rows - split) * rb ? tail - (rows - split) * rb : 0;
        pt->split = split;
        pt->big_rows = align_rows((int64_t)(KN_BIG_CHUNK_BYTES / (rb + 1)));
        if (pt->big_rows < pt->chunk_rows) pt->big_rows = pt->chunk_rows;
        pt->n_big = (split + pt->big_rows - 1) / pt->big_rows;
    }
    for (int i = 0; i < nparts; i++) {
        kn__part *pt = &parts[i];
        pt->first_chunk = j.total;
        j.total += pt->n_big + (pt->W->rows - pt->split + pt->chunk_rows - 1) / pt->chunk_rows;
    }
    atomic_init(&j.claimed, 0);
    kn__pool_run_locked(pool, job_task, &j, nth);
    if (sorted != small) free(sorted);
}

/* ---- activation preparation ------------------------------------------------------------------ */

/* Bytes of one prepared row (0: the kernel reads raw floats). */
static size_t act_stride(const kn__kernel *k, int64_t K) {
    return k->act_prep ? kn__align64(k->act_bytes(K)) : 0;
}

size_t kn__act_scratch(const kn__kernel *k, int64_t K, int64_t T) {
    return act_stride(k, K) * (size_t)T;
}

typedef struct prep_job {
    const kn__prep *preps;
    int n;
    int64_t total; /* rows to prepare, of all preparations */
} prep_job;

/* Rows a preparation contributes to the job (none when its kernel reads raw floats). */
static int64_t prep_rows(const kn__prep *p) {
    return p->k->act_prep ? p->T : 0;
}

/* Job row r is row r - (rows of the preparations before it) of the one it falls in. */
static void prep_task(void *arg, int ith, int nth) {
    const prep_job *j = arg;
    int i = 0;
    int64_t base = 0;
    for (int64_t r = ith; r < j->total; r += nth) {
        while (r - base >= prep_rows(&j->preps[i])) base += prep_rows(&j->preps[i++]);
        const kn__prep *p = &j->preps[i];
        const int64_t t = r - base;
        p->k->act_prep(p->X + t * p->K, (uint8_t *)p->dst + (size_t)t * p->x->stride, p->K);
    }
}

void kn__act_prepare_many(const kn__prep *preps, int n, kn_pool *pool) {
    prep_job j = {preps, n, 0};
    double work = 0;
    for (int i = 0; i < n; i++) {
        const kn__prep *p = &preps[i];
        const bool raw = !p->k->act_prep;
        p->x->T = p->T;
        p->x->data = raw ? (const void *)p->X : p->dst;
        p->x->stride = raw ? (size_t)p->K * sizeof(float) : act_stride(p->k, p->K);
        j.total += prep_rows(p);
        work += (double)prep_rows(p) * (double)p->K;
    }
    if (j.total == 0) return;
    const int nth = j.total >= 8 && work >= 32768 ? kn_pool_size(pool) : 1;
    kn__pool_run_locked(pool, prep_task, &j, nth < j.total ? nth : (int)j.total);
}

void kn__act_prepare(const kn__kernel *k, const float *X, int64_t K, int64_t T, void *dst,
                     kn_pool *pool, kn__act *x) {
    const kn__prep p = {k, X, K, T, dst, x};
    kn__act_prepare_many(&p, 1, pool);
}

/* ---- kn_matmul ------------------------------------------------------------------------------- */

/* The matrices of one kn_matmul_many call: a small call lives on the stack. */
#define KN_MANY_SMALL 4
typedef struct many {
    kn__part *parts;
    kn__prep *preps; /* one per distinct preparation */
    kn__act *acts;   /* aligned with preps */
    int *prep_of;    /* per matrix: index into preps */
    void *heap;
} many;

static void many_init(many *m, int n, kn__part *p, kn__prep *q, kn__act *a, int *w) {
    m->heap = NULL;
    if (n <= KN_MANY_SMALL) {
        *m = (many){p, q, a, w, NULL};
        return;
    }
    m->heap = malloc((size_t)n * (sizeof *p + sizeof *q + sizeof *a + sizeof *w));
    if (!m->heap) {
        fprintf(stderr, "moewire kernels: out of memory for %d matmuls\n", n);
        abort();
    }
    m->parts = m->heap;
    m->preps = (kn__prep *)(m->parts + n);
    m->acts = (kn__act *)(m->preps + n);
    m->prep_of = (int *)(m->acts + n);
}

void kn_matmul_many(const kn_mat *const *W, float *const *Y, int n, const float *X, int64_t T,
                    kn_numerics num, kn_pool *caller_pool) {
    if (n <= 0 || T <= 0) return;
    kn__part p_small[KN_MANY_SMALL];
    kn__prep q_small[KN_MANY_SMALL];
    kn__act a_small[KN_MANY_SMALL];
    int w_small[KN_MANY_SMALL];
    many m;
    many_init(&m, n, p_small, q_small, a_small, w_small);
    const int64_t K = W[0]->cols;
    int np = 0;
    size_t act = 0;
    for (int i = 0; i < n; i++) {
        kn__check_mat(W[i], "kn_matmul");
        if (W[i]->cols != K) {
            fprintf(stderr, "moewire kernels: kn_matmul_many: matrices of %lld and %lld columns\n",
                    (long long)K, (long long)W[i]->cols);
            abort();
        }
        const kn__kernel *k = kn__kernel_for(W[i]->type, num);
        m.parts[i] = (kn__part){.W = W[i], .kern = k, .Y = Y[i], .ldy = W[i]->rows};
        m.parts[i].x.T = T;
        /* matrices whose kernels prepare activations alike share one preparation; dst holds the
         * offset into the scratch until the scratch exists */
        int s = 0;
        while (s < np && m.preps[s].k->act_prep != k->act_prep) s++;
        if (s == np) {
            m.preps[np++] = (kn__prep){k, X, K, T, (void *)(uintptr_t)act, &m.acts[s]};
            act += kn__act_scratch(k, K, T);
        }
        m.prep_of[i] = s;
    }
    kn_pool *pool = kn__pool_acquire(caller_pool);
    const int nth = kn__parts_threads(m.parts, n, pool);
    void *tmp;
    uint8_t *buf = kn__pool_scratch(pool, act + kn__parts_scratch(m.parts, n, nth), &tmp);
    if (!buf) {
        fprintf(stderr, "moewire kernels: out of memory for a %lld x %lld matmul at T=%lld\n",
                (long long)W[0]->rows, (long long)K, (long long)T);
        abort();
    }
    for (int s = 0; s < np; s++) m.preps[s].dst = buf + (uintptr_t)m.preps[s].dst;
    kn__act_prepare_many(m.preps, np, pool);
    for (int i = 0; i < n; i++) m.parts[i].x = m.acts[m.prep_of[i]];
    kn__run_parts(m.parts, n, pool, buf + act);
    kn__pool_release(pool);
    free(tmp);
    free(m.heap);
}

void kn_matmul(const kn_mat *W, const float *X, int64_t T, float *Y, kn_numerics num,
               kn_pool *caller_pool) {
    kn__check_mat(W, "kn_matmul");
    if (T <= 0 || W->rows == 0) return;
    kn_matmul_many(&W, &Y, 1, X, T, num, caller_pool);
}

size_t kn_pack_bytes(const kn_mat *W) {
    const kn__packer *p = kn__packer_for(W->type);
    return p && W->rows > 0 && W->data ? p->bytes(W) : 0;
}

bool kn_pack_replaces(const kn_mat *W) {
    const kn__packer *p = kn__packer_for(W->type);
    return p && p->every_t && kn_pack_bytes(W) > 0;
}

void kn_pack(kn_mat *W, void *dst) {
    const kn__packer *p = kn__packer_for(W->type);
    if (!p || !dst || kn_pack_bytes(W) == 0) return;
    p->pack(W, dst);
    W->packed = dst;
}
