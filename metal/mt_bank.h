/* metal/mt_bank.h — synthetic expert banks: every layer a block format (or a mix, as quantized
 * GGUF files hold them) and a shape, its experts' weights random values quantized by the format's
 * own quantizer into one page-aligned buffer, as a vindex mapping holds them — a few MXFP4 blocks
 * given the edge exponents 0x00 and 0x01 (subnormal scales). The emulator test and the self-test
 * (expert-node --self-test) run the Metal path and the CPU's on the same banks. */
#ifndef MT_BANK_H
#define MT_BANK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kn.h"
#include "model/md_expert_table.h"
#include "model/md_moe.h"
#include "util/mw_err.h"

typedef struct mt_bank_layer {
    const char *name;
    kn_type gate_up, down;
    int64_t hidden, ff;
    int n_experts;
    int bias;   /* the biases' type, or -1: none */
    bool noise; /* random bytes instead of quantized values: for timing, never for comparing */
} mt_bank_layer;

/* The layers every check runs: each format alone, at widths that are not multiples of 256 where
 * the format allows and with more than 8 blocks per row somewhere (the block lanes wrap), and the
 * mixes of quantized files (Q4_K gate/up with Q6_K down, MXFP4 with Q8_0). */
extern const mt_bank_layer mt_bank_layers[];
extern const int mt_bank_n_layers;

typedef struct mt_bank {
    md_expert_table table; /* layer i holds layers[i]'s experts */
    uint8_t *blob;         /* every matrix */
    size_t blob_len;
} mt_bank;

/* Builds the bank (deterministic for a seed); n_experts of the table is the largest layer's. */
int mt_bank_make(mt_bank *b, const mt_bank_layer *layers, int n_layers, uint64_t seed, mw_err *err);
void mt_bank_free(mt_bank *b);

/* Deterministic test values: the next of a xorshift stream, uniform in [-1, 1). */
float mt_bank_rand(uint64_t *state);

/* T rows of width w for a layer's batch: random, every fifth row large enough to take exp's edge
 * paths in the GLU. */
void mt_bank_rows(float *x, int64_t T, int64_t w, uint64_t *state);
/* Routes T rows to k distinct experts of n (k <= n, n <= 32) with random weights, every seventh
 * row to none, into as (room for T * k); returns the number of assignments. */
int64_t mt_bank_route(md_assignment *as, int64_t T, int k, int n, uint64_t *state);

/* The bank's lookup for md_moe_exec_args (ctx: the bank). */
const kn_expert *mt_bank_lookup(void *ctx, int layer, int expert, mw_err *err);

#endif
