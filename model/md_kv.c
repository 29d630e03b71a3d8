/* model/md_kv.c — KV cache storage: growth of the full-attention layers, the rings of the
 * sliding-window layers, and the pass transaction (batch map, staging, commit). */
#include "model/md_kv.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/mw_grow.h"
#include "util/mw_platform.h"

static int grow(void **p, int64_t rows, size_t row_bytes) {
    void *q = realloc(*p, (size_t)rows * row_bytes);
    if (!q) return -1;
    *p = q;
    return 0;
}

/* A sequence's cache of a layer doubles as it grows. One of at least MAP_BYTES is a mapping of
 * its own, which Linux's mremap grows without copying (mw_map_grow); its new pages come in as
 * positions are written, a few per step. realloc would copy it and touch every page at once, so the
 * decode step in which many sequences cross a doubling together would stall on the copies, and
 * longer with every doubling. Smaller buffers use realloc. */
#define MAP_BYTES ((size_t)1 << 17)

static bool mapped(size_t bytes) {
    return bytes >= MAP_BYTES;
}

static int cache_grow(void **p, int64_t old_rows, int64_t rows, size_t row_bytes) {
    const size_t bytes = (size_t)rows * row_bytes;
    if (!mapped(bytes)) return grow(p, rows, row_bytes);
    const size_t old = (size_t)old_rows * row_bytes;
    void *q;
    if (mapped(old)) {
        q = mw_map_grow(*p, old, bytes);
    } else {
        q = mw_map_grow(NULL, 0, bytes);
        if (q && old) memcpy(q, *p, old);
        if (q) free(*p);
    }
    if (!q) return -1;
    *p = q;
    return 0;
}

static void cache_free(void *p, int64_t rows, size_t row_bytes) {
    const size_t bytes = (size_t)rows * row_bytes;
    if (p && mapped(bytes)) {
        munmap(p, bytes);
        return;
    }
    free(p);
}

/* The types a cache may keep, and their names. */
static const struct {
    const char *name;
    kn_type type;
} kv_types[] = {{"f32", KN_F32}, {"f16", KN_F16}, {"bf16", KN_BF16}};

int md_kv_type_from_name(const char *name) {
    for (size_t i = 0; name && i < sizeof kv_types / sizeof kv_types[0]; i++)
        if (!strcmp(kv_types[i].name, name)) return (int)kv_types[i].type;
    return -1;
}

static size_t type_size(kn_type t) {
    for (size_t i = 0; i < sizeof kv_types / sizeof kv_types[0]; i++)
        if (kv_types[i].type == t) return kn_row_size(t, 1);
    return 0;
}

uint64_t md_kv_row_bytes(const md_config *cfg, kn_type type) {
    const int64_t kd = (int64_t)cfg->n_head_kv * cfg->head_dim_k;
    const int64_t vd = cfg->attn == MD_ATTN_MLA ? 0 : (int64_t)cfg->n_head_kv * cfg->head_dim_v;
    return (uint64_t)(kd + vd) * type_size(type);
}

int md_kv_init(md_kv *kv, const md_config *cfg, int n_seq, int64_t n_ctx, bool rings, kn_type type,
               mw_err *err) {
    memset(kv, 0, sizeof *kv);
    if (!(kv->esz = type_size(type)))
        return mw_errf(err, "KV cache: type %s is not one it keeps (f32, f16, bf16)",
                       kn_type_name(type));
    kv->type = type;
    kv->n_layer = cfg->n_layer;
    kv->n_seq = n_seq;
    kv->n_ctx = n_ctx;
    kv->kd = (int64_t)cfg->n_head_kv * cfg->head_dim_k;
    kv->v_in_k = cfg->attn == MD_ATTN_MLA;
    kv->vd = kv->v_in_k ? 0 : (int64_t)cfg->n_head_kv * cfg->head_dim_v;
    kv->n_swa = cfg->n_swa;
    kv->layer_ring = calloc((size_t)kv->n_layer, 1);
    kv->layer_none = calloc((size_t)kv->n_layer, 1);
    kv->stage_k = calloc((size_t)kv->n_layer, sizeof(void *));
    kv->stage_v = calloc((size_t)kv->n_layer, sizeof(void *));
    kv->tmp = malloc((size_t)(kv->kd > kv->vd ? kv->kd : kv->vd) * kv->esz);
    kv->seqs = calloc((size_t)n_seq, sizeof *kv->seqs);
    kv->seq_count = calloc((size_t)n_seq, sizeof *kv->seq_count);
    kv->seq_first = malloc((size_t)n_seq * sizeof *kv->seq_first);
    kv->hand = calloc(1, sizeof *kv->hand);
    kv->win_seq = -1;
    if (!kv->layer_ring || !kv->layer_none || !kv->stage_k || !kv->stage_v || !kv->seqs ||
        !kv->seq_count || !kv->seq_first || !kv->tmp || !kv->hand)
        goto oom;
    for (int l = 0; l < kv->n_layer; l++) kv->layer_none[l] = md_layer_is_kda(cfg, l);
    for (int s = 0; s < n_seq; s++) kv->seq_first[s] = -1;
    if (rings && cfg->n_swa > 0) {
        kv->ring = cfg->n_swa < n_ctx ? cfg->n_swa : n_ctx;
        bool any = false;
        for (int l = 0; l < kv->n_layer; l++) any |= (kv->layer_ring[l] = cfg->layer_swa[l]) != 0;
        if (!any) kv->ring = 0;
    }
    for (int s = 0; s < n_seq; s++) {
        kv->seqs[s].k = calloc((size_t)kv->n_layer, sizeof(void *));
        kv->seqs[s].v = calloc((size_t)kv->n_layer, sizeof(void *));
        kv->seqs[s].rows = calloc((size_t)kv->n_layer * 2, sizeof(int64_t));
        if (!kv->seqs[s].k || !kv->seqs[s].v || !kv->seqs[s].rows) goto oom;
    }
    return 0;
oom:
    md_kv_free(kv);
    return mw_errf(err, "KV cache: out of memory");
}

int md_kv_lane_init(md_kv *lane, const md_kv *kv, mw_err *err) {
    *lane = *kv;
    lane->rows = NULL;
    lane->T = lane->n_keep = lane->keep_cap = 0;
    lane->order = lane->keep = NULL;
    lane->row_first = NULL;
    lane->order_cap = lane->row_first_cap = lane->keep_rows_cap = 0;
    lane->stage_k = calloc((size_t)kv->n_layer, sizeof(void *));
    lane->stage_v = calloc((size_t)kv->n_layer, sizeof(void *));
    lane->tmp = malloc((size_t)(kv->kd > kv->vd ? kv->kd : kv->vd) * kv->esz);
    lane->seq_count = calloc((size_t)kv->n_seq, sizeof *lane->seq_count);
    lane->seq_first = malloc((size_t)kv->n_seq * sizeof *lane->seq_first);
    lane->hand = calloc(1, sizeof *lane->hand);
    lane->win_k = lane->win_v = NULL;
    lane->win_seq = -1;
    lane->prev = NULL;
    if (!lane->stage_k || !lane->stage_v || !lane->tmp || !lane->seq_count || !lane->seq_first ||
        !lane->hand) {
        md_kv_lane_free(lane);
        return mw_errf(err, "KV cache: out of memory for a micro-batch");
    }
    for (int s = 0; s < kv->n_seq; s++) lane->seq_first[s] = -1;
    return 0;
}

void md_kv_lane_free(md_kv *lane) {
    for (int l = 0; l < lane->n_layer; l++) {
        if (lane->stage_k) free(lane->stage_k[l]);
        if (lane->stage_v) free(lane->stage_v[l]);
    }
    free(lane->stage_k);
    free(lane->stage_v);
    free(lane->seq_count);
    free(lane->seq_first);
    free(lane->order);
    free(lane->row_first);
    free(lane->keep);
    free(lane->tmp);
    free(lane->hand);
    free(lane->win_k);
    free(lane->win_v);
    memset(lane, 0, sizeof *lane);
}

void md_kv_lane_link(md_kv *lane, const md_kv *before) {
    lane->prev = before->hand;
}

void md_kv_free(md_kv *kv) {
    for (int s = 0; kv->seqs && s < kv->n_seq; s++) {
        const md_kv_seq *q = &kv->seqs[s];
        for (int l = 0; q->rows && l < kv->n_layer; l++) {
            if (q->k) cache_free(q->k[l], q->rows[2 * l], (size_t)kv->kd * kv->esz);
            if (q->v) cache_free(q->v[l], q->rows[2 * l + 1], (size_t)kv->vd * kv->esz);
        }
        free(q->rows);
        free(kv->seqs[s].k);
        free(kv->seqs[s].v);
    }
    for (int l = 0; l < kv->n_layer; l++) {
        if (kv->stage_k) free(kv->stage_k[l]);
        if (kv->stage_v) free(kv->stage_v[l]);
    }
    free(kv->stage_k);
    free(kv->stage_v);
    free(kv->seqs);
    free(kv->layer_ring);
    free(kv->layer_none);
    free(kv->seq_count);
    free(kv->seq_first);
    free(kv->order);
    free(kv->row_first);
    free(kv->keep);
    free(kv->tmp);
    free(kv->hand);
    free(kv->win_k);
    free(kv->win_v);
    memset(kv, 0, sizeof *kv);
}

/* Room for positions [0, need) of a sequence: full layers double up to the context, rings grow
 * with them up to their size (a ring is indexed by position until it first wraps). */
static int grow_seq(md_kv *kv, md_kv_seq *s, int64_t need, mw_err *err) {
    int64_t cap = s->cap ? s->cap : 64;
    while (cap < need) cap *= 2;
    if (cap > kv->n_ctx) cap = kv->n_ctx;
    const int64_t ring_cap = kv->ring && cap > kv->ring ? kv->ring : cap;
    for (int l = 0; l < kv->n_layer; l++) {
        const bool ring = kv->layer_ring[l];
        const int64_t rows = kv->layer_none[l] ? 0 : ring ? ring_cap : cap;
        int64_t *hk = &s->rows[2 * l], *hv = &s->rows[2 * l + 1];
        if (*hk != rows) {
            if (cache_grow(&s->k[l], *hk, rows, (size_t)kv->kd * kv->esz)) goto oom;
            *hk = rows;
        }
        if (kv->vd && *hv != rows) {
            if (cache_grow(&s->v[l], *hv, rows, (size_t)kv->vd * kv->esz)) goto oom;
            *hv = rows;
        }
    }
    s->cap = cap;
    s->ring_cap = ring_cap;
    return 0;
oom:
    return mw_errf(err, "KV cache: out of memory for %lld positions", (long long)cap);
}

static int grow_batch(md_kv *kv, int64_t T, mw_err *err) {
    const size_t n = (size_t)T;
    if (mw_grow((void **)&kv->order, &kv->order_cap, n, sizeof *kv->order) ||
        mw_grow((void **)&kv->row_first, &kv->row_first_cap, n, sizeof *kv->row_first) ||
        mw_grow((void **)&kv->keep, &kv->keep_rows_cap, n, sizeof *kv->keep))
        return mw_errf(err, "KV cache: out of memory for a batch of %lld rows", (long long)T);
    return 0;
}

static int grow_stage(md_kv *kv, int64_t n, mw_err *err) {
    if (n <= kv->keep_cap) return 0;
    int64_t cap = kv->keep_cap ? kv->keep_cap : 1;
    while (cap < n) cap *= 2;
    for (int l = 0; l < kv->n_layer; l++)
        if (kv->layer_ring[l] && (grow(&kv->stage_k[l], cap, (size_t)kv->kd * kv->esz) ||
                                  (kv->vd && grow(&kv->stage_v[l], cap, (size_t)kv->vd * kv->esz))))
            return mw_errf(err, "KV cache: out of memory staging %lld rows", (long long)n);
    kv->keep_cap = cap;
    return 0;
}

/* The sequence the pass continues past an earlier lane's rows, if any (a batch's part of a
 * sequence starts beyond the sequence's length), and room for its window when there are rings.
 * Reads the T rows' grouping in kv->order. */
static int find_window(md_kv *kv, int64_t T, mw_err *err) {
    kv->win_seq = -1;
    for (int64_t i = 0; i < T; i++) {
        const md_row *r = &kv->rows[kv->order[i]];
        if (i > 0 && kv->rows[kv->order[i - 1]].seq == r->seq) continue;
        if (r->pos <= kv->seqs[r->seq].n) continue;
        if (kv->win_seq >= 0 || !kv->prev)
            return mw_errf(err, "KV cache: sequence %d starts at %d past its length %lld", r->seq,
                           r->pos, (long long)kv->seqs[r->seq].n);
        kv->win_seq = r->seq;
    }
    if (kv->win_seq < 0 || !kv->ring || kv->win_k) return 0;
    kv->win_k = malloc((size_t)kv->ring * (size_t)kv->kd * kv->esz);
    kv->win_v = kv->vd ? malloc((size_t)kv->ring * (size_t)kv->vd * kv->esz) : NULL;
    if (!kv->win_k || (kv->vd && !kv->win_v))
        return mw_errf(err, "KV cache: out of memory for a micro-batch's window");
    return 0;
}

/* Positions of a full layer's mapping whose pages come in at a time, ahead of the rows written
 * into them. A page that comes in by a fault of the first write to it costs a trap per page (on a
 * VM several times what faulting a run of pages in at once costs), and a decode step writes a new
 * page of every sequence's full layers every few steps; a bounded stretch keeps a sequence that
 * crosses a doubling from taking in the whole new half at once. */
#define READY_AHEAD 64

/* Pages of rows [from, to) of a mapped buffer of `rows` rows in now (advice: an older kernel, or
 * a buffer on the heap, leaves them to the writes). */
static void populate(void *buf, int64_t rows, size_t row_bytes, int64_t from, int64_t to) {
#ifdef MADV_POPULATE_WRITE
    if (!buf || !mapped((size_t)rows * row_bytes)) return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = ((uintptr_t)buf + (uintptr_t)from * row_bytes) & ~(page - 1);
    const uintptr_t e = (uintptr_t)buf + (uintptr_t)to * row_bytes;
    if (e > a) madvise((void *)a, e - a, MADV_POPULATE_WRITE);
#else
    (void)buf, (void)rows, (void)row_bytes, (void)from, (void)to;
#endif
}

/* The full layers' pages of a sequence from position pos on, READY_AHEAD positions at a time. */
static void make_ready(md_kv *kv, md_kv_seq *s, int64_t pos) {
    if (pos < s->ready) return;
    const int64_t to = pos + READY_AHEAD < s->cap ? pos + READY_AHEAD : s->cap;
    for (int l = 0; l < kv->n_layer; l++) {
        if (kv->layer_ring[l] || kv->layer_none[l]) continue;
        populate(s->k[l], s->rows[2 * l], (size_t)kv->kd * kv->esz, pos, to);
        if (kv->vd) populate(s->v[l], s->rows[2 * l + 1], (size_t)kv->vd * kv->esz, pos, to);
    }
    s->ready = to;
}

int md_kv_begin(md_kv *kv, const md_row *rows, int64_t T, mw_err *err) {
    kv->T = 0;
    kv->rows = rows;
    if (grow_batch(kv, T, err)) return -1;
    /* group the rows by sequence (groups in order of first appearance), each group by position */
    for (int64_t t = 0; t < T; t++) kv->seq_count[rows[t].seq]++;
    int64_t next = 0;
    for (int64_t t = 0; t < T; t++) {
        const int s = rows[t].seq;
        if (kv->seq_first[s] < 0) {
            /* its first row holds its lowest position (rows continue their sequences in order):
             * the group's start in order, whose position is the group's base */
            kv->order[next] = (int32_t)t;
            kv->seq_first[s] = next;
            next += kv->seq_count[s];
        }
    }
    kv->n_keep = 0;
    for (int64_t t = 0; t < T; t++) {
        const int s = rows[t].seq;
        const int64_t base = rows[kv->order[kv->seq_first[s]]].pos, pos = rows[t].pos;
        kv->row_first[t] = kv->seq_first[s];
        kv->order[kv->seq_first[s] + pos - base] = (int32_t)t;
        /* a ring keeps the last `ring` positions of the sequence */
        if (kv->ring && pos > base + kv->seq_count[s] - 1 - kv->ring)
            kv->keep[kv->n_keep++] = (int32_t)t;
    }
    for (int64_t t = 0; t < T; t++) {
        kv->seq_count[rows[t].seq] = 0;
        kv->seq_first[rows[t].seq] = -1;
    }
    for (int64_t t = 0; t < T; t++) {
        md_kv_seq *s = &kv->seqs[rows[t].seq];
        if (rows[t].pos >= s->cap && grow_seq(kv, s, (int64_t)rows[t].pos + 1, err)) return -1;
        make_ready(kv, s, rows[t].pos);
    }
    if (grow_stage(kv, kv->n_keep, err) || find_window(kv, T, err)) return -1;
    *kv->hand = (md_kv_hand){kv->rows,    kv->keep,  kv->n_keep, kv->stage_k,
                             kv->stage_v, kv->win_k, kv->win_v,  kv->win_seq};
    kv->T = T;
    return 0;
}

/* Rounds T rows of width values to the cache's type in place (nothing to do for f32). */
static void round_rows(const md_kv *kv, float *x, int64_t T, int64_t width) {
    if (kv->type == KN_F32) return;
    const kn_type_traits *tr = kn_traits(kv->type);
    for (int64_t t = 0; t < T; t++) {
        tr->from_float(x + t * width, kv->tmp, width);
        tr->to_float(kv->tmp, x + t * width, width);
    }
}

/* One row of width values into the cache's type at dst (exact: the row is rounded already). */
static void put_row(const md_kv *kv, void *dst, const float *src, int64_t width) {
    if (kv->type == KN_F32)
        memcpy(dst, src, (size_t)width * sizeof(float));
    else
        kn_traits(kv->type)->from_float(src, dst, width);
}

/* The window of a ring layer for the sequence the pass continues: the lane before's window of it
 * (or the committed ring), with that lane's staged rows of it in their slots. */
static void fill_window(md_kv *kv, int layer) {
    const size_t kb = (size_t)kv->kd * kv->esz, vb = (size_t)kv->vd * kv->esz;
    const int32_t s = kv->win_seq;
    const md_kv_hand *p = kv->prev;
    const md_kv_seq *q = &kv->seqs[s];
    if (p->win_seq == s) {
        memcpy(kv->win_k, p->win_k, (size_t)kv->ring * kb);
        if (vb) memcpy(kv->win_v, p->win_v, (size_t)kv->ring * vb);
    } else {
        memcpy(kv->win_k, q->k[layer], (size_t)q->rows[2 * layer] * kb);
        if (vb) memcpy(kv->win_v, q->v[layer], (size_t)q->rows[2 * layer + 1] * vb);
    }
    for (int64_t j = 0; j < p->n_keep; j++) {
        const md_row *r = &p->rows[p->keep[j]];
        if (r->seq != s) continue;
        const size_t slot = (size_t)(r->pos % kv->ring);
        memcpy((uint8_t *)kv->win_k + slot * kb, (const uint8_t *)p->stage_k[layer] + j * kb, kb);
        if (vb)
            memcpy((uint8_t *)kv->win_v + slot * vb, (const uint8_t *)p->stage_v[layer] + j * vb,
                   vb);
    }
}

void md_kv_store(md_kv *kv, int layer, float *k, float *v) {
    const size_t kb = (size_t)kv->kd * kv->esz, vb = (size_t)kv->vd * kv->esz;
    round_rows(kv, k, kv->T, kv->kd);
    if (vb) round_rows(kv, v, kv->T, kv->vd);
    if (kv->layer_ring[layer]) {
        if (kv->win_seq >= 0) fill_window(kv, layer);
        for (int64_t j = 0; j < kv->n_keep; j++) {
            const int64_t t = kv->keep[j];
            put_row(kv, (uint8_t *)kv->stage_k[layer] + j * kb, k + t * kv->kd, kv->kd);
            if (vb) put_row(kv, (uint8_t *)kv->stage_v[layer] + j * vb, v + t * kv->vd, kv->vd);
        }
        return;
    }
    /* positions past the sequences' lengths: invisible until the commit */
    for (int64_t t = 0; t < kv->T; t++) {
        const md_kv_seq *s = &kv->seqs[kv->rows[t].seq];
        const int64_t pos = kv->rows[t].pos;
        put_row(kv, (uint8_t *)s->k[layer] + pos * kb, k + t * kv->kd, kv->kd);
        if (vb) put_row(kv, (uint8_t *)s->v[layer] + pos * vb, v + t * kv->vd, kv->vd);
    }
}

void md_kv_commit(md_kv *kv) {
    const size_t kb = (size_t)kv->kd * kv->esz, vb = (size_t)kv->vd * kv->esz;
    for (int l = 0; l < kv->n_layer; l++) {
        if (!kv->layer_ring[l]) continue;
        for (int64_t j = 0; j < kv->n_keep; j++) {
            const md_row *row = &kv->rows[kv->keep[j]];
            const md_kv_seq *s = &kv->seqs[row->seq];
            const int64_t slot = row->pos % kv->ring;
            memcpy((uint8_t *)s->k[l] + slot * kb, (const uint8_t *)kv->stage_k[l] + j * kb, kb);
            if (vb)
                memcpy((uint8_t *)s->v[l] + slot * vb, (const uint8_t *)kv->stage_v[l] + j * vb,
                       vb);
        }
    }
    for (int64_t t = 0; t < kv->T; t++) {
        md_kv_seq *s = &kv->seqs[kv->rows[t].seq];
        if (kv->rows[t].pos + 1 > s->n) s->n = kv->rows[t].pos + 1;
    }
    kv->T = 0;
}

bool md_kv_can_truncate(const md_kv *kv, int seq, int64_t n) {
    const int64_t held = kv->seqs[seq].n;
    if (n == 0 || n >= held || kv->ring == 0 || held <= kv->ring) return true;
    /* the ring holds [held - ring, held); the next query at n needs [n - n_swa + 1, n) */
    int64_t need = n - kv->n_swa + 1;
    if (need < 0) need = 0;
    return need >= held - kv->ring;
}

uint64_t md_kv_bytes(const md_kv *kv) {
    const uint64_t row = (uint64_t)(kv->kd + kv->vd) * kv->esz;
    uint64_t total = 0;
    for (int s = 0; s < kv->n_seq; s++)
        for (int l = 0; l < kv->n_layer; l++)
            if (!kv->layer_none[l])
                total +=
                    (uint64_t)(kv->layer_ring[l] ? kv->seqs[s].ring_cap : kv->seqs[s].cap) * row;
    for (int l = 0; l < kv->n_layer; l++)
        if (kv->layer_ring[l]) total += (uint64_t)kv->keep_cap * row;
    return total;
}

md_kv_iter md_kv_iter_at(const md_kv *kv, int layer, int64_t t, int64_t from, const float *k,
                         const float *v) {
    const md_row *row = &kv->rows[t];
    const md_kv_seq *s = &kv->seqs[row->seq];
    /* the batch holds the sequence from its first row's position on; earlier positions are
     * read from the cache (a lane's may be an earlier lane's of the same step, not committed) */
    const int64_t base = kv->rows[kv->order[kv->row_first[t]]].pos;
    const bool ring = kv->layer_ring[layer];
    const bool win = ring && row->seq == kv->win_seq;
    const size_t kb = (size_t)kv->kd * kv->esz;
    const void *ck = win ? kv->win_k : s->k[layer], *cv = win ? kv->win_v : s->v[layer];
    md_kv_iter it = {
        .ck = ck,
        .cv = kv->v_in_k ? ck : cv,
        .kb = kb,
        .vb = kv->v_in_k ? kb : (size_t)kv->vd * kv->esz,
        .esz = kv->esz,
        .to_float = kv->type == KN_F32 ? NULL : kn_traits(kv->type)->to_float,
        .slot = ring ? from % kv->ring : from,
        .wrap = ring ? kv->ring : -1,
        .n_cache = base > from ? base - from : 0,
        .bk = k,
        .bv = kv->v_in_k ? k : v,
        .order = kv->order + kv->row_first[t] + (from > base ? from - base : 0),
        .kd = kv->kd,
        .vd = kv->v_in_k ? kv->kd : kv->vd,
    };
    return it;
}

/* ---- copies of a sequence's rows (prefix cache, forks) ----------------------------------------
 */

static bool full_layer(const md_kv *kv, int l) {
    return !kv->layer_none[l] && !kv->layer_ring[l];
}

uint64_t md_kv_full_pos_bytes(const md_kv *kv) {
    uint64_t b = 0;
    for (int l = 0; l < kv->n_layer; l++)
        if (full_layer(kv, l)) b += (uint64_t)(kv->kd + kv->vd) * kv->esz;
    return b;
}

/* Walks the full layers' rows [pos, pos + n) of a sequence and a packed copy (per layer its K
 * rows, then its V rows): to = true copies into the sequence. */
static void full_rows(md_kv *kv, int seq, int64_t pos, int64_t n, uint8_t *buf, bool to) {
    const size_t kb = (size_t)kv->kd * kv->esz, vb = (size_t)kv->vd * kv->esz;
    md_kv_seq *s = &kv->seqs[seq];
    for (int l = 0; l < kv->n_layer; l++) {
        if (!full_layer(kv, l)) continue;
        uint8_t *k = (uint8_t *)s->k[l] + (size_t)pos * kb;
        to ? memcpy(k, buf, (size_t)n * kb) : memcpy(buf, k, (size_t)n * kb);
        buf += (size_t)n * kb;
        if (!vb) continue;
        uint8_t *v = (uint8_t *)s->v[l] + (size_t)pos * vb;
        to ? memcpy(v, buf, (size_t)n * vb) : memcpy(buf, v, (size_t)n * vb);
        buf += (size_t)n * vb;
    }
}

void md_kv_full_read(const md_kv *kv, int seq, int64_t pos, int64_t n, void *dst) {
    full_rows((md_kv *)kv, seq, pos, n, dst, false);
}

int md_kv_full_write(md_kv *kv, int seq, int64_t pos, int64_t n, const void *src, mw_err *err) {
    md_kv_seq *s = &kv->seqs[seq];
    if (pos + n > s->cap && grow_seq(kv, s, pos + n, err)) return -1;
    full_rows(kv, seq, pos, n, (uint8_t *)src, true);
    return 0;
}

uint64_t md_kv_ring_bytes(const md_kv *kv) {
    uint64_t b = 0;
    for (int l = 0; kv->ring && l < kv->n_layer; l++)
        if (kv->layer_ring[l]) b += (uint64_t)kv->ring * (uint64_t)(kv->kd + kv->vd) * kv->esz;
    return b;
}

/* The ring layers' window of a sequence of n positions, [max(0, n - ring), n), and a copy of it
 * in position order (per layer its K rows, then its V rows; sized for a whole ring). */
static void ring_rows(md_kv *kv, int seq, int64_t n, uint8_t *buf, bool to) {
    const size_t kb = (size_t)kv->kd * kv->esz, vb = (size_t)kv->vd * kv->esz;
    const int64_t lo = n > kv->ring ? n - kv->ring : 0;
    md_kv_seq *s = &kv->seqs[seq];
    for (int l = 0; l < kv->n_layer; l++) {
        if (!kv->layer_ring[l]) continue;
        for (int64_t p = lo; p < n; p++) {
            uint8_t *k = (uint8_t *)s->k[l] + (size_t)(p % kv->ring) * kb;
            uint8_t *b = buf + (size_t)(p - lo) * kb;
            to ? memcpy(k, b, kb) : memcpy(b, k, kb);
        }
        buf += (size_t)kv->ring * kb;
        if (!vb) continue;
        for (int64_t p = lo; p < n; p++) {
            uint8_t *v = (uint8_t *)s->v[l] + (size_t)(p % kv->ring) * vb;
            uint8_t *b = buf + (size_t)(p - lo) * vb;
            to ? memcpy(v, b, vb) : memcpy(b, v, vb);
        }
        buf += (size_t)kv->ring * vb;
    }
}

void md_kv_ring_read(const md_kv *kv, int seq, void *dst) {
    if (kv->ring) ring_rows((md_kv *)kv, seq, kv->seqs[seq].n, dst, false);
}

int md_kv_ring_write(md_kv *kv, int seq, int64_t n, const void *src, mw_err *err) {
    md_kv_seq *s = &kv->seqs[seq];
    if (n > s->cap && grow_seq(kv, s, n, err)) return -1;
    if (kv->ring) ring_rows(kv, seq, n, (uint8_t *)src, true);
    return 0;
}

void md_kv_set_len(md_kv *kv, int seq, int64_t n) {
    kv->seqs[seq].n = n;
}
