/* model/md_heads.c — per-head matmuls over strided rows: a thread takes a range of heads, gathers
 * a head's T input rows, runs kn_matmul on them inline and scatters the outputs. */
#include "model/md_heads.h"

#include <stdlib.h>
#include <string.h>

void md_heads_ws_free(md_heads_ws *ws) {
    free(ws->buf);
    memset(ws, 0, sizeof *ws);
}

typedef struct job {
    const md_heads *w;
    int n_heads;
    md_strided x, y;
    int64_t T;
    kn_numerics num;
    md_heads_ws *ws;
} job;

static void run(void *arg, int ith, int nth) {
    const job *j = arg;
    const int64_t cols = j->w->m.cols, rows = j->w->m.rows;
    float *xs = kn_slot(j->ws->buf, j->ws->per_thread * sizeof(float), ith);
    float *ys = xs + j->T * cols;
    const int h0 = (int)((int64_t)j->n_heads * ith / nth);
    const int h1 = (int)((int64_t)j->n_heads * (ith + 1) / nth);
    for (int h = h0; h < h1; h++) {
        for (int64_t t = 0; t < j->T; t++)
            memcpy(xs + t * cols, j->x.data + t * j->x.row + h * j->x.head,
                   (size_t)cols * sizeof *xs);
        const kn_mat W = md_head(j->w, h);
        kn_matmul(&W, xs, j->T, ys, j->num, NULL);
        for (int64_t t = 0; t < j->T; t++)
            memcpy(j->y.data + t * j->y.row + h * j->y.head, ys + t * rows,
                   (size_t)rows * sizeof *ys);
    }
}

int md_heads_matmul(const md_heads *w, int n_heads, md_strided x, md_strided y, int64_t T,
                    kn_numerics num, kn_pool *pool, md_heads_ws *ws, mw_err *err) {
    const int nth = kn_pool_size(pool);
    const size_t per = (size_t)(T * (w->m.cols + w->m.rows));
    if (per > ws->per_thread || nth > ws->n_threads) {
        size_t p = per > ws->per_thread ? per : ws->per_thread;
        int n = nth > ws->n_threads ? nth : ws->n_threads;
        float *b = realloc(ws->buf, kn_slots_bytes(p * sizeof *b, n)); /* slots apart */
        if (!b)
            return mw_errf(err, "attention: out of memory for per-head rows of %lld", (long long)T);
        ws->buf = b;
        ws->per_thread = p;
        ws->n_threads = n;
    }
    job j = {w, n_heads, x, y, T, num, ws};
    kn_pool_run(pool, run, &j);
    return 0;
}
