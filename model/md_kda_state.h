/* model/md_kda_state.h — the recurrent state the KDA layers keep per sequence, beside its KV cache
 * (see md_kda.h for the arithmetic): per layer the chunk start state S, the open chunk's entries
 * and the convolution's last inputs, each in two banks; the pass transaction that flips them. */
#ifndef MD_KDA_STATE_H
#define MD_KDA_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "model/md_config.h"
#include "model/md_kv.h"
#include "util/mw_err.h"

#define MD_KDA_CHUNK 16

typedef struct md_kda_seq {
    float *mem;    /* every KDA layer's banks; NULL until the sequence first runs */
    uint8_t bank;  /* the committed bank of S and of the chunk entries */
    uint8_t cbank; /* the committed bank of the convolution's inputs */
} md_kda_seq;

/* Where a state lives: per KDA layer i, S at p[0] + i·stride[0], the chunk entries at p[1] +
 * i·stride[1], the convolution's inputs at p[2] + i·stride[2]. */
typedef struct md_kda_at {
    float *p[3];
    size_t stride[3];
} md_kda_at;

/* One sequence's rows in a pass: kv->order[first .. first + n) in position order from base; the
 * state it starts from and where it writes the new one (S and entries only when it completes a
 * chunk; the first open chunk's entries are appended to the start state's). */
typedef struct md_kda_group {
    int32_t seq;
    int64_t first, n, base;
    md_kda_at in, out;
} md_kda_group;

/* What a lane's pass leaves for the next lane of the step (md_kda_lane_link): its groups. Heap-
 * held, so it stays put while the lanes swap their structs. */
typedef struct md_kda_hand {
    const md_kda_group *groups;
    int64_t n_groups;
} md_kda_hand;

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
    /* lanes: the state written by a sequence this pass continues past an earlier lane's rows
     * (every KDA layer's S, entries and convolution inputs; the sequence takes it at commit),
     * what this pass hands on and what the lane before handed (NULL: first lane, or unsplit) */
    float *own;
    md_kda_hand *hand;
    const md_kda_hand *prev;
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

/* A lane (micro-batches): a second pass beside st's, sharing st's sequences, with pass state of
 * its own; free it before st. A lane linked after `before` may continue a sequence where
 * before's part of it ends: it starts from the state before's pass wrote (before's KDA of a layer
 * runs before lane's), writes its own beside it, and its commit (after before's) copies that
 * into the sequence's other banks. The committed banks stay untouched until the commits. */
int md_kda_lane_init(md_kda_state *lane, const md_kda_state *st, mw_err *err);
void md_kda_lane_free(md_kda_state *lane);
void md_kda_lane_link(md_kda_state *lane, const md_kda_state *before);
/* A copy of a sequence's committed state as it stands (md_kda_snap_bytes; 0 without KDA layers),
 * and that copy made a sequence's state again: with its rows' length restored, the sequence goes
 * on as the one it was taken from would have. */
uint64_t md_kda_snap_bytes(const md_kda_state *st);
int md_kda_snap_read(const md_kda_state *st, int seq, void *dst, mw_err *err);
int md_kda_snap_write(md_kda_state *st, int seq, const void *src, mw_err *err);

/* Bytes of state one sequence holds (both banks of every KDA layer), and all of them now. */
uint64_t md_kda_seq_bytes(const md_config *cfg);
uint64_t md_kda_state_bytes(const md_kda_state *st);

/* ---- shared with md_kda.c, the arithmetic -------------------------------------------------- */

/* One position's entry of an open chunk, per head: its key, its delta and its per-channel decay
 * factor exp(g), d floats each. */
static inline size_t md__kda_entry(int d) {
    return 3 * (size_t)d;
}

/* Floats of one thread's scan scratch for heads of width d: the row pointers (S's rows, the
 * chain's, the deltas': d + 2C pointers, two floats each at most), then the chain, the decays, the
 * vectors S0^T reads and what it returns (6 C × d), the dot products and a fold column (2C), and
 * a little slack. md_kda.c's ws_at lays them out. */
static inline size_t md__kda_scratch_floats(int d) {
    return 2 * ((size_t)d + 2 * MD_KDA_CHUNK) + 6 * (size_t)MD_KDA_CHUNK * (size_t)d +
           2 * MD_KDA_CHUNK + 16;
}

/* Layer `layer`'s bank `bank` of a sequence: S (H × d × d), the chunk entries (H × C entries),
 * the convolution's inputs (q, k, v blocks of K - 1 positions × D, oldest first). */
float *md__kda_s(const md_kda_state *st, int seq, int layer, int bank);
float *md__kda_e(const md_kda_state *st, int seq, int layer, int bank);
float *md__kda_c(const md_kda_state *st, int seq, int layer, int bank);
/* Part w (0 S, 1 entries, 2 convolution inputs) of layer `layer` in a state's place. */
static inline float *md__kda_at(const md_kda_state *st, const md_kda_at *at, int w, int layer) {
    return at->p[w] + (size_t)st->slot[layer] * at->stride[w];
}

#endif
