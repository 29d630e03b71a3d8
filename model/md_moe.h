/* model/md_moe.h — the MoE step's contract: what the trunk hands to an expert backend, and the one
 * executor that turns routed rows into expert outputs.
 *
 * The in-process backend and the expert node run the same executor (md_moe_exec); a remote
 * backend ships the same md_moe_batch over the wire. Combining is always in a fixed order: for a
 * row, assignments are reduced in selection order (j = 0 .. k-1), never in arrival order. */
#ifndef MD_MOE_H
#define MD_MOE_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/kn.h"
#include "util/mw_err.h"

/* One layer's MoE work for a batch of T rows. */
typedef struct md_moe_batch {
    int layer;
    int64_t T;              /* rows (tokens) */
    int64_t width;          /* the experts' width (md_expert_width): hidden size, or latent */
    const float *x;         /* T × width: the normalized MoE input (projected, for a latent) */
    int k;                  /* experts per row (top-k) */
    const int32_t *experts; /* T × k expert ids, selection order (best first) */
    const float *weights;   /* T × k routing weights, aligned with experts */
    kn_numerics numerics;   /* activation numerics the experts must use (the trunk's setting) */
} md_moe_batch;

/* y[t] = sum_j weights[t][j] * expert_{experts[t][j]}(x[t]), reduced in j order:
 *   acc = 0; for j in 0..k-1: acc = acc + w_j * y_j   (per element, float, no fma)
 * Everyone who combines (local backend, node partial sums, coordinator exact mode) uses
 * md_moe_accumulate so the arithmetic is the same everywhere. */
void md_moe_accumulate(float *acc, const float *y, float w, int64_t width);

/* An expert backend: computes the routed experts' combined output for a batch. */
typedef struct md_expert_backend md_expert_backend;
struct md_expert_backend {
    const char *name; /* "local", "remote" */
    /* out: T × width, overwritten with the combined expert output (not including the residual). */
    int (*run)(md_expert_backend *b, const md_moe_batch *batch, float *out, mw_err *err);
    void (*destroy)(md_expert_backend *b);
    void *impl;
    /* Optional, run in two halves: submit starts the batch and returns once it is on its way (a
     * remote backend: sent to the nodes), wait completes it into out. Between them the caller
     * computes what does not depend on it (the shared experts); the batch and the arrays it
     * points to stay valid and unchanged until wait. Up to in_flight batches (at least one) may be
     * submitted before waiting; wait names which by its batch pointer. A backend without them
     * (NULL) runs the whole batch in md_expert_submit. */
    int (*submit)(md_expert_backend *b, const md_moe_batch *batch, mw_err *err);
    int (*wait)(md_expert_backend *b, const md_moe_batch *batch, float *out, mw_err *err);
    /* Optional: after a run or wait that failed because experts had no live owner, whether batch
     * row `row` needed one of them (false for every row after any other failure), so a caller
     * batching many requests fails only the rows' own and runs the others again. NULL: the
     * backend never fails some rows alone (in-process experts). */
    bool (*row_lost)(const md_expert_backend *b, int64_t row);
    /* Optional: after a forward pass that completed, the (layer, expert) assignments of batch row
     * `row` it left out for want of a live owner (their gate weights renormalised over the rest),
     * so a caller can tell each request how much of its routing was skipped. NULL: never skips. */
    uint32_t (*row_skipped)(const md_expert_backend *b, int64_t row);
    int in_flight; /* batches submit takes before a wait; 0 means 1 */
};

/* Starts a batch: b->submit, or b->run at once (out written now) when the backend has no halves. */
int md_expert_submit(md_expert_backend *b, const md_moe_batch *batch, float *out, mw_err *err);
/* Completes the batch md_expert_submit started (nothing to do for a backend without halves). */
int md_expert_wait(md_expert_backend *b, const md_moe_batch *batch, float *out, mw_err *err);

/* Looks up expert e of a layer; returns NULL (with err) when it is not available. The view is
 * copied at once (the weights it points to must stay mapped for the call), so a lookup may return
 * the same storage every time. */
typedef const kn_expert *(*md_expert_lookup_fn)(void *ctx, int layer, int expert, mw_err *err);

/* One (row, expert, weight) assignment, as an expert node receives them. */
typedef struct md_assignment {
    int32_t row;
    int32_t expert;
    float weight;
} md_assignment;

typedef enum md_moe_output {
    MD_MOE_PARTIAL = 0, /* out: rows × width, out[row] = sum over the row's assignments (in the
                           order given) of weight · y */
    MD_MOE_EXACT = 1    /* out: n_assign × width, out[a] = y for assignment a (unweighted) */
} md_moe_output;

/* Reusable scratch for md_moe_exec (grows to the largest batch seen), so the decode loop does not
 * allocate per call. One per caller thread; NULL in the args means allocate per call. */
typedef struct md_moe_ws md_moe_ws;
md_moe_ws *md_moe_ws_new(void);
void md_moe_ws_free(md_moe_ws *ws);

typedef struct md_moe_exec_args {
    int layer;
    int64_t rows, width;
    const float *x; /* rows × width */
    const md_assignment *assign;
    int64_t n_assign;
    md_moe_output mode;
    const kn_glu *glu;
    kn_numerics numerics;
    kn_pool *pool;
    md_expert_lookup_fn lookup;
    void *lookup_ctx;
    md_moe_ws *ws; /* optional */
} md_moe_exec_args;

/* The executor: groups assignments by expert, gathers each expert's rows, runs kn_expert_run once
 * per expert over all its rows, and writes `out` per mode. Expert weight bytes read (as stored) are
 * added to *weight_bytes when non-NULL. Row/expert indices are validated, and every expert must
 * take rows of `width` (bad ones → -1 + err). */
int md_moe_exec(const md_moe_exec_args *a, float *out, uint64_t *weight_bytes, mw_err *err);

/* The checks md_moe_exec makes of its arguments first (shapes within bounds, rows and weights of
 * every assignment), for another executor of the same contract (metal/mt_exec.c). */
int md_moe_check_args(const md_moe_exec_args *a, mw_err *err);

#endif
