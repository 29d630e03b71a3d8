/* model/md_kda_internal.h — what md_kda.c (the arithmetic) and md_kda_state.c (the storage)
 * share: where a sequence's banks are, the chunk entry layout and the scan's scratch. */
#ifndef MD_KDA_INTERNAL_H
#define MD_KDA_INTERNAL_H

#include <stddef.h>

#include "model/md_kda.h"

/* One position's entry of an open chunk, per head: its key, its delta and its per-channel decay
 * factor exp(g), d floats each. */
static inline size_t md__kda_entry(int d) {
    return 3 * (size_t)d;
}

/* Bytes of one thread's scan scratch for heads of width d (floats and the row pointers). */
size_t md__kda_scratch_floats(int d);

/* Layer `layer`'s bank `bank` of a sequence: S (H × d × d), the chunk entries (H × C entries),
 * the convolution's inputs (q, k, v blocks of K - 1 positions × D, oldest first). */
float *md__kda_s(const md_kda_state *st, int seq, int layer, int bank);
float *md__kda_e(const md_kda_state *st, int seq, int layer, int bank);
float *md__kda_c(const md_kda_state *st, int seq, int layer, int bank);

/* One head's state after the first n entries of a chunk that started from S0: out (d × d) =
 * diag(decay so far) S0 + sum over the entries of their decayed key times their delta. */
void md__kda_materialize(int d, const float *S0, const float *E, int n, float *out, float *scratch);

#endif
