/* coordinator/co_pcache.h — the prompt (prefix) cache of `serve`: what sequences computed, kept by
 * blocks of CO_PCACHE_BLOCK tokens after they leave their slot, so that a request whose tokens
 * begin with a prefix computed before (the previous turns of a conversation, a shared system
 * prompt) starts from it instead of recomputing it.
 *
 * A block is named by a hash chained over the tokens of every block up to it (the same tokens at
 * the same positions after the same prefix) and holds its positions' rows of the full-attention
 * layers. Models with sliding-window or KDA layers also need the window and the recurrent state
 * as they stood at the prefix's end: a block that a sequence's step ended on keeps that snapshot,
 * and only such blocks are points a sequence can be restored at (the scheduler ends prompt steps
 * on block boundaries to make them). Blocks are evicted least recently used, leaves first (a block
 * some other block continues stays while it does), within a byte budget.
 *
 * Restoring never changes a result: the rows and states are the bits the sequence would compute
 * again (md_model.h's copies), and the last prompt position is always computed for its logits.
 * Model thread only. */
#ifndef CO_PCACHE_H
#define CO_PCACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "coordinator/co_metrics.h"
#include "model/md_model.h"
#include "util/mw_err.h"

#define CO_PCACHE_BLOCK 32 /* tokens per block (a multiple of the KDA chunk) */

typedef struct co_pcache co_pcache;
typedef struct co_pcache_blk co_pcache_blk;

/* A sequence's place in the chain: the blocks of it the cache holds (the last one pinned). */
typedef struct co_pcache_cursor {
    int64_t blocks;
    co_pcache_blk *last;
    bool stopped; /* a block could not be kept: no later block can be chained */
} co_pcache_cursor;

typedef co_prefix_cache_stats co_pcache_stats;

/* budget: bytes the cache may hold (> 0). */
int co_pcache_new(md_ctx *ctx, uint64_t budget, co_pcache **out, mw_err *err);
void co_pcache_free(co_pcache *pc);
/* Whether restore points need snapshots (then prompt steps should end on block boundaries). */
bool co_pcache_snapshots(const co_pcache *pc);

/* Restores into the empty sequence seq the longest cached prefix of toks[0..n) that leaves at
 * least the last position to compute; returns its length (0: none) and sets the cursor there. */
int64_t co_pcache_restore(co_pcache *pc, int seq, const int32_t *toks, int64_t n,
                          co_pcache_cursor *cur);
/* seq holds toks[0..len): keeps its whole blocks past the cursor (with a snapshot when len ends
 * one). A block that cannot be kept stops the cursor; nothing fails. */
void co_pcache_save(co_pcache *pc, int seq, const int32_t *toks, int64_t len,
                    co_pcache_cursor *cur);
/* The sequence is done with the cache (unpins its last block). */
void co_pcache_release(co_pcache *pc, co_pcache_cursor *cur);

co_pcache_stats co_pcache_get_stats(const co_pcache *pc);

#endif
