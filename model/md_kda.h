/* model/md_kda.h — Kimi Delta Attention (FORMATS.md §8, §9): the short causal convolution of q, k
 * and v, the decay and output gates, and the gated delta rule; and the recurrent state each
 * sequence keeps between passes, beside its KV cache.
 *
 * The delta rule runs in chunks of MD_KDA_CHUNK positions aligned to the sequence's positions
 * (chunk c holds positions c·C .. c·C + C - 1). A chunk's start state S stays fixed while the
 * chunk fills; each position's output and delta are computed from S and the chunk's earlier
 * positions in one fixed order (the WY form of the recurrence), and S advances once the chunk is
 * complete. A position's bits therefore depend only on its sequence's tokens, never on how the
 * positions were split into passes: a prompt as one batch, in pieces, or token by token gives
 * the same bits — the batch invariance continuous batching needs. The state a sequence keeps is
 * S plus its open chunk's entries (key, delta, decay per position) and the convolution's last
 * conv - 1 inputs; each comes in two banks so that a pass writes the new state beside the
 * committed one and a failed pass leaves the sequence as it was. */
#ifndef MD_KDA_H
#define MD_KDA_H

#include <stdint.h>

#include "kernels/kn.h"
#include "model/md_config.h"
#include "model/md_kv.h"
#include "util/mw_err.h"

#define MD_KDA_CHUNK 16

typedef struct md_kda_seq {
    float *mem;    /* every KDA layer's banks; NULL until the sequence first runs */
    uint8_t bank;  /* the committed bank of S and of the chunk entries */
    uint8_t cbank; /* the committed bank of the convolution's inputs */
} md_kda_seq;

/* One sequence's rows in a pass: kv->order[first .. first + n) in position order from base. */
typedef struct md_kda_group {
    int32_t seq;
    int64_t first, n, base;
} md_kda_group;

typedef struct md_kda_state {
    int n_layer, n_kda, n_seq;
    int H, d, K;  /* heads, head width, convolution taps */
    int64_t D;    /* H · d */
    int *slot;    /* per model layer: its index among the KDA layers, -1 for others */
    size_t s_len; /* floats: S of one layer (H × d × d), the chunk entries, the conv inputs */
    size_t e_len, c_len, layer_len;
    md_kda_seq *seqs;
    /* the pass in flight (md_kda_begin .. md_kda_commit) */
    const md_kv *kv;
    md_kda_group *groups;
    int64_t n_groups;
    size_t groups_cap;
    float *scratch; /* per-thread slots of the scan */
    size_t slot_bytes;
    int n_threads;
} md_kda_state;

/* A config without KDA layers gives an empty state (every call a no-op). */
int md_kda_state_init(md_kda_state *st, const md_config *cfg, int n_seq, mw_err *err);
void md_kda_state_free(md_kda_state *st);

/* Starts a pass over the rows kv's pass maps (md_kv_begin first): gives every sequence of the
 * batch its state, resets the state of those that start at position 0, and sizes the scan's
 * scratch for n_threads. */
int md_kda_begin(md_kda_state *st, const md_kv *kv, int n_threads, mw_err *err);
/* Ends the pass successfully: the sequences take the state the pass wrote. Call before
 * md_kv_commit (it reads the sequences' lengths before they grow). */
void md_kda_commit(md_kda_state *st);

/* Bytes of state one sequence holds (both banks of every KDA layer), and all of them now. */
uint64_t md_kda_seq_bytes(const md_config *cfg);
uint64_t md_kda_state_bytes(const md_kda_state *st);

/* The committed delta-rule state of a sequence after its `held` positions on a model layer, as
 * the recurrence would hold it: S[h][i][j] (key index i, value index j), H × d × d floats. */
int md_kda_state_read(const md_kda_state *st, int seq, int64_t held, int layer, float *S,
                      mw_err *err);

/* ---- one layer of a pass ------------------------------------------------------------------- */

/* The causal convolution of the q, k and v projections (T × D each, in place) with the layer's
 * taps (w[0..2]: D × K each, channel-major, tap K - 1 on the current position), then SiLU. The
 * last K - 1 inputs of every sequence go to its other bank. */
void md_kda_conv(md_kda_state *st, int layer, float *const qkv[3], const float *const w[3]);

/* Per head: q and k divided by max(|x|, eps) (T × D each, in place). */
void md_kda_l2norm(float *x, int64_t T, int H, int d, float eps);

/* The per-channel log decay g from f = f_b(f_a h) (T × D, in place): with dt bias b and per-head
 * a = -exp(A_log), g = a · softplus(f + b), or with the lower bound lb, lb · sigmoid(-a · (f + b)).
 */
void md_kda_decay(const md_kda *k, float *f, const float *dt_bias, const float *a, int64_t T);

/* x = sigmoid(x) for n values (beta, the output gate). */
void md_kda_sigmoid(float *x, int64_t n);

/* The delta rule of the pass: out (T × D) = each position's read-out / sqrt(d), from q, k (after
 * the L2 norm), v, the log decay g (T × D) and beta (T × H); the sequences' states advance in
 * their other banks. */
void md_kda_scan(md_kda_state *st, int layer, const float *q, const float *k, const float *v,
                 const float *g, const float *beta, float *out, kn_pool *pool);

/* The read-out's per-head RMSNorm times the norm weight (T × D, in place). */
void md_kda_out_norm(float *o, const float *w, int64_t T, int H, int d, float eps);

#endif
