/* coordinator/co_pcache.c — the prompt cache (co_pcache.h): a hash table of chained blocks, an LRU
 * list, restoring a prefix into a sequence and keeping a sequence's new blocks. */
#include "coordinator/co_pcache.h"

#include <stdlib.h>
#include <string.h>

#define B CO_PCACHE_BLOCK

struct co_pcache_blk {
    uint64_t hash;
    co_pcache_blk *parent;
    co_pcache_blk *hnext;         /* bucket chain */
    co_pcache_blk *newer, *older; /* LRU list */
    int n_children, pins;
    uint64_t bytes; /* accounted: this struct, tokens, rows, snapshot */
    uint8_t *snap;  /* NULL: not a restore point (when snapshots are needed) */
    int32_t toks[B];
    uint8_t rows[]; /* B positions' rows */
};

struct co_pcache {
    md_ctx *ctx;
    uint64_t budget, pos_bytes, snap_bytes;
    co_pcache_blk **buckets;
    size_t n_buckets;
    co_pcache_blk *newest, *oldest;
    co_pcache_stats st;
    uint8_t *scratch; /* a snapshot, read before its block is chosen to hold it */
};

#define SEED 0x84222325cbf29ce4ull

/* The chain's hash after one more block of tokens. */
static uint64_t mix(uint64_t h, const int32_t *t) {
    for (int i = 0; i < B; i++) {
        h ^= (uint32_t)t[i];
        h *= 0x100000001b3ull;
        h ^= h >> 29;
    }
    return h * 0x9E3779B97F4A7C15ull;
}

int co_pcache_new(md_ctx *ctx, uint64_t budget, co_pcache **out, mw_err *err) {
    *out = NULL;
    co_pcache *pc = calloc(1, sizeof *pc);
    if (!pc) return mw_errf(err, "out of memory");
    pc->ctx = ctx;
    pc->budget = budget;
    pc->pos_bytes = md_seq_pos_bytes(ctx);
    pc->snap_bytes = md_seq_snap_bytes(ctx);
    /* about one bucket per block the budget holds */
    const uint64_t per_block = sizeof(co_pcache_blk) + (uint64_t)B * pc->pos_bytes;
    pc->n_buckets = 1024;
    while (pc->n_buckets < (1u << 20) && pc->n_buckets * per_block < budget) pc->n_buckets *= 2;
    pc->buckets = calloc(pc->n_buckets, sizeof *pc->buckets);
    pc->scratch = malloc(pc->snap_bytes + 1);
    if (!pc->buckets || !pc->scratch) {
        co_pcache_free(pc);
        return mw_errf(err, "out of memory");
    }
    pc->st.budget = budget;
    *out = pc;
    return 0;
}

void co_pcache_free(co_pcache *pc) {
    if (!pc) return;
    for (co_pcache_blk *b = pc->newest, *n; b; b = n) {
        n = b->older;
        free(b->snap);
        free(b);
    }
    free(pc->buckets);
    free(pc->scratch);
    free(pc);
}

bool co_pcache_snapshots(const co_pcache *pc) {
    return pc->snap_bytes > 0;
}

co_pcache_stats co_pcache_get_stats(const co_pcache *pc) {
    return pc->st;
}

static co_pcache_blk *find(const co_pcache *pc, uint64_t h, const co_pcache_blk *parent,
                           const int32_t *toks) {
    for (co_pcache_blk *b = pc->buckets[h & (pc->n_buckets - 1)]; b; b = b->hnext)
        if (b->hash == h && b->parent == parent && !memcmp(b->toks, toks, sizeof b->toks)) return b;
    return NULL;
}

static void lru_unlink(co_pcache *pc, co_pcache_blk *b) {
    if (b->newer)
        b->newer->older = b->older;
    else
        pc->newest = b->older;
    if (b->older)
        b->older->newer = b->newer;
    else
        pc->oldest = b->newer;
    b->newer = b->older = NULL;
}

static void touch(co_pcache *pc, co_pcache_blk *b) {
    if (pc->newest == b) return;
    if (b->newer || b->older || pc->oldest == b) lru_unlink(pc, b);
    b->older = pc->newest;
    if (pc->newest) pc->newest->newer = b;
    pc->newest = b;
    if (!pc->oldest) pc->oldest = b;
}

static void evict(co_pcache *pc, co_pcache_blk *b) {
    co_pcache_blk **pp = &pc->buckets[b->hash & (pc->n_buckets - 1)];
    while (*pp != b) pp = &(*pp)->hnext;
    *pp = b->hnext;
    lru_unlink(pc, b);
    if (b->parent) b->parent->n_children--;
    pc->st.bytes -= b->bytes;
    pc->st.blocks--;
    pc->st.evicted_blocks++;
    free(b->snap);
    free(b);
}

/* Evicts least recently used leaves nobody pins until need more bytes fit; false when they do
 * not. */
static bool make_room(co_pcache *pc, uint64_t need) {
    if (need > pc->budget) return false;
    co_pcache_blk *b = pc->oldest;
    while (pc->st.bytes + need > pc->budget && b) {
        co_pcache_blk *newer = b->newer;
        if (!b->n_children && !b->pins) {
            co_pcache_blk *parent = b->parent;
            evict(pc, b);
            /* its parent may have become a leaf older than where the walk is */
            if (parent && !parent->n_children && !parent->pins) newer = pc->oldest;
        }
        b = newer;
    }
    return pc->st.bytes + need <= pc->budget;
}

static void pin(co_pcache_cursor *cur, co_pcache_blk *b) {
    if (b) b->pins++;
    if (cur->last) cur->last->pins--;
    cur->last = b;
}

void co_pcache_release(co_pcache *pc, co_pcache_cursor *cur) {
    (void)pc;
    pin(cur, NULL);
    *cur = (co_pcache_cursor){0};
}

/* Writes the chain ending at last (k blocks) into seq, then its length; false on failure. */
static bool write_chain(co_pcache *pc, int seq, co_pcache_blk *last, int64_t k) {
    mw_err err;
    int64_t i = k;
    for (co_pcache_blk *b = last; b; b = b->parent) {
        i--;
        if (pc->pos_bytes && md_seq_write_rows(pc->ctx, seq, i * B, B, b->rows, &err)) return false;
        touch(pc, b);
    }
    return md_seq_restore(pc->ctx, seq, k * B, pc->snap_bytes ? last->snap : NULL, &err) == 0;
}

int64_t co_pcache_restore(co_pcache *pc, int seq, const int32_t *toks, int64_t n,
                          co_pcache_cursor *cur) {
    *cur = (co_pcache_cursor){0};
    pc->st.lookups++;
    uint64_t h = SEED;
    co_pcache_blk *parent = NULL, *best = NULL;
    int64_t best_k = 0;
    for (int64_t k = 0; (k + 1) * B <= n - 1; k++) {
        h = mix(h, toks + k * B);
        co_pcache_blk *b = find(pc, h, parent, toks + k * B);
        if (!b) break;
        parent = b;
        if (!pc->snap_bytes || b->snap) {
            best = b;
            best_k = k + 1;
        }
    }
    if (!best) return 0;
    if (!write_chain(pc, seq, best, best_k)) {
        mw_err err;
        md_seq_truncate(pc->ctx, seq, 0, &err);
        return 0;
    }
    pin(cur, best);
    cur->blocks = best_k;
    pc->st.hits++;
    pc->st.tokens_reused += (uint64_t)(best_k * B);
    return best_k * B;
}

/* A new block k of seq after parent (its rows read from the sequence), or NULL. */
static co_pcache_blk *add_block(co_pcache *pc, int seq, uint64_t h, co_pcache_blk *parent,
                                const int32_t *toks, int64_t k) {
    const uint64_t bytes = sizeof(co_pcache_blk) + (uint64_t)B * pc->pos_bytes;
    if (!make_room(pc, bytes)) return NULL;
    co_pcache_blk *b = malloc(bytes);
    mw_err err;
    if (!b || (pc->pos_bytes && md_seq_read_rows(pc->ctx, seq, k * B, B, b->rows, &err))) {
        free(b);
        return NULL;
    }
    *b = (co_pcache_blk){.hash = h, .parent = parent, .bytes = bytes};
    memcpy(b->toks, toks, sizeof b->toks);
    if (parent) parent->n_children++;
    co_pcache_blk **bucket = &pc->buckets[h & (pc->n_buckets - 1)];
    b->hnext = *bucket;
    *bucket = b;
    pc->st.bytes += bytes;
    pc->st.blocks++;
    return b;
}

/* The sequence's length ends block b: it keeps the snapshot (unless it has one). */
static void add_snapshot(co_pcache *pc, int seq, co_pcache_blk *b) {
    if (b->snap || !pc->snap_bytes) return;
    mw_err err;
    if (!make_room(pc, pc->snap_bytes) || md_seq_read_snap(pc->ctx, seq, pc->scratch, &err)) return;
    if (!(b->snap = malloc(pc->snap_bytes))) return;
    memcpy(b->snap, pc->scratch, pc->snap_bytes);
    b->bytes += pc->snap_bytes;
    pc->st.bytes += pc->snap_bytes;
}

void co_pcache_save(co_pcache *pc, int seq, const int32_t *toks, int64_t len,
                    co_pcache_cursor *cur) {
    while (!cur->stopped && (cur->blocks + 1) * B <= len) {
        const int64_t k = cur->blocks;
        const uint64_t h = mix(cur->last ? cur->last->hash : SEED, toks + k * B);
        co_pcache_blk *b = find(pc, h, cur->last, toks + k * B);
        if (!b) b = add_block(pc, seq, h, cur->last, toks + k * B, k);
        if (!b) {
            cur->stopped = true;
            return;
        }
        touch(pc, b);
        pin(cur, b);
        cur->blocks++;
        if (len == (k + 1) * B) add_snapshot(pc, seq, b);
    }
}
