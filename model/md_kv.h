/* model/md_kv.h — the KV cache: per sequence and layer, K rows (n_head_kv·head_dim_k values) and
 * V rows (n_head_kv·head_dim_v) by position. Latent attention (MLA) caches one row per position,
 * [latent c, rope(k_pe)] (kv_lora + rope values), whose first kv_lora values are also the value:
 * no V rows are kept.
 *
 * Rows are kept as f32 (the default), f16 or bf16 (llama.cpp keeps f16 by default: half the bytes
 * per position) and read back converted. md_kv_store rounds the batch's own rows to that type in
 * place, so a row's keys are the same values whether attention reads them from the batch or, in a
 * later pass, from the cache: prefill, decode and any batching still give the same bits.
 *
 * Full-attention layers keep every position (memory grows by doubling up to the context size;
 * on Linux a large buffer grows in place of its pages, with no copy).
 * Sliding-window layers keep only the window: a ring of `ring` positions where position p lives in
 * slot p % ring, so at long contexts they cost a fixed amount whatever the length.
 *
 * KDA layers (md_layer_is_kda) have no cache here: their state is md_kda_state.h's.
 *
 * A pass is a transaction: md_kv_begin .. md_kv_commit. During the pass, attention reads the
 * positions a sequence already held from the cache and the batch's own positions from the batch's
 * K/V buffers (md_kv_iter), so a row sees its keys in position order whatever the batch layout.
 * A batch's part of a sequence starts at its first row's position: a lane (micro-batches) may
 * continue a sequence past positions an earlier lane of the same step stored on the full layers
 * (written, not committed), and reads those from the cache like the committed ones.
 * Ring layers stage the rows that will survive and write them into the ring only at commit; a
 * pass that fails part-way (an expert backend error) leaves every sequence as it was. A lane that
 * continues a sequence past an earlier lane's rows reads that sequence's ring layers from a window
 * of its own, filled at each layer's md_kv_store from the earlier lane's window (or the committed
 * ring) and its staged rows: the earlier lane's rows are visible, the ring still untouched. */
#ifndef MD_KV_H
#define MD_KV_H

#include <stdbool.h>
#include <stdint.h>

#include "model/md_config.h"
#include "model/md_model.h"
#include "util/mw_err.h"

typedef struct md_kv_seq {
    int64_t n;        /* positions held (committed) */
    int64_t cap;      /* positions allocated on full-attention layers */
    int64_t ring_cap; /* positions allocated on ring layers (<= ring) */
    void **k, **v;    /* per layer: rows of kv->type */
    int64_t *rows;    /* per layer: positions allocated in k (2l) and v (2l + 1) */
    int64_t ready;    /* full layers: positions whose pages are in (md_kv_begin's READY_AHEAD) */
} md_kv_seq;

/* What a lane's pass leaves for the next lane of the step (md_kv_lane_link): its staged rows and
 * its window. Heap-held, so it stays where it is while the lanes swap their md_kv structs. */
typedef struct md_kv_hand {
    const md_row *rows;
    const int32_t *keep;
    int64_t n_keep;
    void **stage_k, **stage_v;
    void *win_k, *win_v;
    int32_t win_seq; /* the sequence the window holds, -1 none */
} md_kv_hand;

typedef struct md_kv {
    int n_layer, n_seq;
    int64_t n_ctx;
    int64_t kd, vd;      /* values per position (vd = 0 when the value is the key row's head) */
    kn_type type;        /* of the cached rows: KN_F32, KN_F16 or KN_BF16 */
    size_t esz;          /* bytes per value */
    bool v_in_k;         /* MLA: a position's value is the first head_dim_v floats of its key row */
    int64_t n_swa;       /* the window: keys p - t < n_swa are visible on sliding layers */
    int64_t ring;        /* positions a ring layer keeps; 0 = no ring layers */
    uint8_t *layer_ring; /* n_layer flags: 1 = this layer is a ring */
    uint8_t *layer_none; /* n_layer flags: 1 = no cache (a KDA layer keeps recurrent state) */
    md_kv_seq *seqs;
    /* the pass in flight (md_kv_begin .. md_kv_commit) */
    const md_row *rows;
    int64_t T;
    int32_t *order;     /* T batch rows grouped by sequence, each group in position order */
    int64_t *row_first; /* T: index in order of the first row of row t's sequence */
    int32_t *seq_count; /* n_seq: rows of the sequence in the batch (0 outside a pass) */
    int64_t *seq_first; /* n_seq: its group's start in order (-1 outside a pass) */
    int32_t *keep;      /* batch rows whose K/V stay in the rings (last `ring` of a sequence) */
    size_t order_cap, row_first_cap, keep_rows_cap;
    int64_t n_keep, keep_cap;
    void **stage_k, **stage_v; /* per ring layer: keep_cap staged rows (of type) */
    void *tmp;                 /* one row of type: md_kv_store's rounding */
    /* lanes: the sequence this pass continues past an earlier lane's rows (-1 none), its ring
     * layers' window (ring rows of K and of V, slot = position % ring), what this pass hands on
     * and what the lane before handed (NULL for the first lane and unsplit passes) */
    int32_t win_seq;
    void *win_k, *win_v;
    md_kv_hand *hand;
    const md_kv_hand *prev;
} md_kv;

/* rings: sliding-window layers (cfg->layer_swa) keep min(cfg->n_swa, n_ctx) positions; false
 * keeps every position on every layer. type: KN_F32, KN_F16 or KN_BF16 (else an error). */
int md_kv_init(md_kv *kv, const md_config *cfg, int n_seq, int64_t n_ctx, bool rings, kn_type type,
               mw_err *err);
void md_kv_free(md_kv *kv);

/* Starts a pass over rows that continue their sequences (validated: each sequence's rows are in
 * position order from its length on). Makes room for every position and for the staging; maps the
 * batch. Allocates only when the batch or the sequences outgrow what earlier passes reserved. */
int md_kv_begin(md_kv *kv, const md_row *rows, int64_t T, mw_err *err);
/* Keeps one layer's K (T × kd) and V (T × vd) of the batch: written at their positions on a full
 * layer, staged for the ring on a ring layer. k and v are first rounded in place to the cache's
 * type (v may be k when vd = 0), and must stay valid for this layer's attention (md_kv_iter reads
 * the batch's positions from them). */
void md_kv_store(md_kv *kv, int layer, float *k, float *v);
/* Ends the pass successfully: staged rows go into the rings, sequences grow. A pass that is not
 * committed changes nothing the sequences hold (the next md_kv_begin starts over). */
void md_kv_commit(md_kv *kv);

/* A lane (micro-batches, model/md_forward.c): a second pass in flight at the same time as kv's.
 * The lane shares kv's sequences and layout and has pass state of its own; md_kv_begin/store/
 * commit work on it as on kv. Free it with md_kv_lane_free before kv. */
int md_kv_lane_init(md_kv *lane, const md_kv *kv, mw_err *err);
void md_kv_lane_free(md_kv *lane);
/* Makes `lane` the lane after `before` in a step: a sequence of lane's pass may then start where
 * before's part of it ends (before's rows of a layer are stored before lane's of that layer, and
 * the lanes commit in order). Without it a pass's sequences start at their lengths. */
void md_kv_lane_link(md_kv *lane, const md_kv *before);

/* Sequence lengths: may it drop to n positions? Always for 0 and for full-attention caches; a
 * ring keeps only what the next query needs, so it can step back at most ring - n_swa + 1. */
bool md_kv_can_truncate(const md_kv *kv, int seq, int64_t n);

/* Copies of a sequence's rows, for a prefix cache and for forks: the full-attention layers'
 * rows of positions [pos, pos + n) (md_kv_full_pos_bytes per position, packed per layer, K rows
 * then V rows), and the ring layers' window as it stands at the sequence's length
 * (md_kv_ring_bytes, 0 without rings). A write grows the sequence's buffers as a pass would;
 * md_kv_set_len then makes the written positions the sequence's. */
uint64_t md_kv_full_pos_bytes(const md_kv *kv);
void md_kv_full_read(const md_kv *kv, int seq, int64_t pos, int64_t n, void *dst);
int md_kv_full_write(md_kv *kv, int seq, int64_t pos, int64_t n, const void *src, mw_err *err);
uint64_t md_kv_ring_bytes(const md_kv *kv);
void md_kv_ring_read(const md_kv *kv, int seq, void *dst);
/* The window of a sequence of n positions (as md_kv_ring_read gave it at that length). */
int md_kv_ring_write(md_kv *kv, int seq, int64_t n, const void *src, mw_err *err);
void md_kv_set_len(md_kv *kv, int seq, int64_t n);

/* Allocated bytes (caches and staging). */
uint64_t md_kv_bytes(const md_kv *kv);
/* Bytes one position takes in one layer's cache of this type (its K and V rows, or MLA's one
 * row): what a KV budget is counted in. 0 for a type the cache does not keep. */
uint64_t md_kv_row_bytes(const md_config *cfg, kn_type type);
/* "f32", "f16", "bf16" → the type, -1 for any other name. */
int md_kv_type_from_name(const char *name);

/* The keys and values row t of the pass sees on a layer, from position `from` to its own, in
 * position order: the sequence's cached positions first, then the batch's. */
typedef struct md_kv_iter {
    const uint8_t *ck, *cv; /* the layer's cache of the row's sequence */
    size_t kb, vb;          /* bytes per cached K / V row */
    size_t esz;             /* bytes per cached value */
    /* converts cached values to floats; NULL for f32, read in place */
    void (*to_float)(const void *src, float *dst, int64_t n);
    int64_t slot, wrap;   /* next cache slot; slots wrap to 0 here (ring) */
    int64_t n_cache;      /* cached positions still to visit */
    const float *bk, *bv; /* the batch's K/V of this layer */
    const int32_t *order; /* next batch row, in position order */
    int64_t kd, vd;       /* values per batch row */
} md_kv_iter;

md_kv_iter md_kv_iter_at(const md_kv *kv, int layer, int64_t t, int64_t from, const float *k,
                         const float *v);

/* Values [off, off + n) of the next nb rows of a cache (c, rows of cb bytes) or batch (b, rows of
 * bd values) into rows[0 .. nb): where they are, or converted into conv (nb × n floats) from a
 * cache of another type. */
static inline void md__kv_rows(md_kv_iter *it, const uint8_t *c, size_t cb, const float *b,
                               int64_t bd, int64_t off, int64_t n, int64_t nb, const float **rows,
                               float *conv) {
    int64_t r = 0;
    if (!it->to_float) { /* f32, the default, in a loop of its own that only takes pointers */
        for (; r < nb && it->n_cache > 0; r++, it->n_cache--) {
            rows[r] = (const float *)(const void *)(c + (size_t)it->slot * cb) + off;
            if (++it->slot == it->wrap) it->slot = 0;
        }
    } else {
        for (; r < nb && it->n_cache > 0; r++, it->n_cache--) {
            it->to_float(c + (size_t)it->slot * cb + (size_t)off * it->esz, conv + r * n, n);
            rows[r] = conv + r * n;
            if (++it->slot == it->wrap) it->slot = 0;
        }
    }
    for (; r < nb; r++) rows[r] = b + (int64_t)*it->order++ * bd + off;
}

/* The next nb keys' values [off, off + n) (a KV head's part of their rows) into rows; conv takes
 * nb × n floats when the cache keeps another type than f32 (NULL otherwise). Walk keys and values
 * with separate iterators (or restart). */
static inline void md_kv_iter_keys(md_kv_iter *it, int64_t off, int64_t n, int64_t nb,
                                   const float **rows, float *conv) {
    md__kv_rows(it, it->ck, it->kb, it->bk, it->kd, off, n, nb, rows, conv);
}
static inline void md_kv_iter_values(md_kv_iter *it, int64_t off, int64_t n, int64_t nb,
                                     const float **rows, float *conv) {
    md__kv_rows(it, it->cv, it->vb, it->bv, it->vd, off, n, nb, rows, conv);
}

#endif
