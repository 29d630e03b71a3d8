/* model/md_kda_state.c — the recurrent state of the KDA layers: per sequence and layer two banks
 * of the chunk start state S (H × d × d) and of the open chunk's entries, and two banks of the
 * convolution's last inputs; the pass transaction that flips them, and reading S back. */
#include "model/md_kda_state.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kn.h"
#include "util/mw_grow.h"

int md_kda_state_init(md_kda_state *st, const md_config *cfg, int n_seq, mw_err *err) {
    memset(st, 0, sizeof *st);
    st->n_layer = cfg->n_layer;
    st->n_seq = n_seq;
    st->n_kda = cfg->n_kda;
    if (st->n_kda == 0) return 0;
    const md_kda *k = &cfg->kda;
    st->H = k->n_head;
    st->d = k->head_dim;
    st->K = k->conv;
    st->D = (int64_t)st->H * st->d;
    st->s_len = (size_t)st->D * (size_t)st->d;
    st->e_len = (size_t)st->H * MD_KDA_CHUNK * md__kda_entry(st->d);
    st->c_len = 3 * (size_t)(st->K - 1) * (size_t)st->D;
    st->layer_len = 2 * (st->s_len + st->e_len + st->c_len);
    st->slot = malloc((size_t)cfg->n_layer * sizeof *st->slot);
    st->seqs = calloc((size_t)n_seq, sizeof *st->seqs);
    st->hand = calloc(1, sizeof *st->hand);
    if (!st->slot || !st->seqs || !st->hand) {
        md_kda_state_free(st);
        return mw_errf(err, "KDA state: out of memory");
    }
    for (int l = 0, i = 0; l < cfg->n_layer; l++) st->slot[l] = md_layer_is_kda(cfg, l) ? i++ : -1;
    return 0;
}

int md_kda_lane_init(md_kda_state *lane, const md_kda_state *st, mw_err *err) {
    *lane = *st;
    lane->kv = NULL;
    lane->groups = NULL;
    lane->n_groups = 0;
    lane->groups_cap = 0;
    lane->scratch = NULL;
    lane->slot_bytes = 0;
    lane->n_threads = 0;
    lane->own = NULL;
    lane->prev = NULL;
    lane->hand = NULL;
    if (st->n_kda && !(lane->hand = calloc(1, sizeof *lane->hand)))
        return mw_errf(err, "KDA state: out of memory for a micro-batch");
    return 0;
}

void md_kda_lane_free(md_kda_state *lane) {
    free(lane->groups);
    free(lane->scratch);
    free(lane->own);
    free(lane->hand);
    memset(lane, 0, sizeof *lane);
}

void md_kda_lane_link(md_kda_state *lane, const md_kda_state *before) {
    lane->prev = before->hand;
}

void md_kda_state_free(md_kda_state *st) {
    for (int s = 0; st->seqs && s < st->n_seq; s++) free(st->seqs[s].mem);
    free(st->seqs);
    free(st->slot);
    free(st->groups);
    free(st->scratch);
    free(st->own);
    free(st->hand);
    memset(st, 0, sizeof *st);
}

uint64_t md_kda_seq_bytes(const md_config *cfg) {
    if (cfg->n_kda == 0) return 0;
    const md_kda *k = &cfg->kda;
    const uint64_t D = (uint64_t)k->n_head * (uint64_t)k->head_dim;
    const uint64_t per_layer =
        2 * (D * (uint64_t)k->head_dim +
             (uint64_t)k->n_head * MD_KDA_CHUNK * md__kda_entry(k->head_dim) +
             3 * (uint64_t)(k->conv - 1) * D);
    return per_layer * (uint64_t)cfg->n_kda * sizeof(float);
}

uint64_t md_kda_state_bytes(const md_kda_state *st) {
    uint64_t n = 0;
    for (int s = 0; st->n_kda && s < st->n_seq; s++) n += st->seqs[s].mem != NULL;
    return n * (uint64_t)st->layer_len * (uint64_t)st->n_kda * sizeof(float);
}

float *md__kda_s(const md_kda_state *st, int seq, int layer, int bank) {
    float *m = st->seqs[seq].mem + (size_t)st->slot[layer] * st->layer_len;
    return m + (size_t)bank * st->s_len;
}

float *md__kda_e(const md_kda_state *st, int seq, int layer, int bank) {
    float *m = st->seqs[seq].mem + (size_t)st->slot[layer] * st->layer_len + 2 * st->s_len;
    return m + (size_t)bank * st->e_len;
}

float *md__kda_c(const md_kda_state *st, int seq, int layer, int bank) {
    float *m =
        st->seqs[seq].mem + (size_t)st->slot[layer] * st->layer_len + 2 * (st->s_len + st->e_len);
    return m + (size_t)bank * st->c_len;
}

/* A sequence's banks as a place. */
static md_kda_at seq_at(const md_kda_state *st, int seq, int bank, int cbank) {
    float *m = st->seqs[seq].mem;
    return (md_kda_at){{m + (size_t)bank * st->s_len, m + 2 * st->s_len + (size_t)bank * st->e_len,
                        m + 2 * (st->s_len + st->e_len) + (size_t)cbank * st->c_len},
                       {st->layer_len, st->layer_len, st->layer_len}};
}

/* Whether a group's rows complete a chunk (then S and the entries are in its out place). */
static bool completes(const md_kda_group *g) {
    return (g->base + g->n) / MD_KDA_CHUNK > g->base / MD_KDA_CHUNK;
}

/* Where a group's state after its rows lives. */
static md_kda_at after(const md_kda_group *g) {
    const md_kda_at *se = completes(g) ? &g->out : &g->in;
    return (md_kda_at){{se->p[0], se->p[1], g->out.p[2]},
                       {se->stride[0], se->stride[1], g->out.stride[2]}};
}

/* A group that continues its sequence past an earlier lane's rows: it starts from the state that
 * lane's group of it left and writes into this lane's own place (one such group per pass). */
static int continued(md_kda_state *st, md_kda_group *g, mw_err *err) {
    const md_kda_hand *p = st->prev;
    const md_kda_group *from = NULL;
    for (int64_t i = 0; p && i < p->n_groups; i++)
        if (p->groups[i].seq == g->seq && p->groups[i].base + p->groups[i].n == g->base)
            from = &p->groups[i];
    for (const md_kda_group *o = st->groups; st->own && o < g; o++)
        if (o->out.p[0] == st->own) from = NULL;
    if (!from)
        return mw_errf(err, "KDA state: sequence %d starts at %lld past its length", g->seq,
                       (long long)g->base);
    const size_t per = st->s_len + st->e_len + st->c_len;
    if (!st->own && !(st->own = malloc((size_t)st->n_kda * per * sizeof(float))))
        return mw_errf(err, "KDA state: out of memory for a micro-batch's state");
    g->in = after(from);
    g->out = (md_kda_at){{st->own, st->own + st->s_len, st->own + st->s_len + st->e_len},
                         {per, per, per}};
    return 0;
}

/* The batch's sequences in kv's pass map: each one's rows are a run of kv->order. */
static int map_groups(md_kda_state *st, const md_kv *kv, mw_err *err) {
    st->n_groups = 0;
    for (int64_t i = 0; i < kv->T;) {
        const int32_t s = kv->rows[kv->order[i]].seq;
        int64_t j = i;
        while (j < kv->T && kv->rows[kv->order[j]].seq == s) j++;
        if (mw_grow((void **)&st->groups, &st->groups_cap, (size_t)st->n_groups + 1,
                    sizeof *st->groups))
            return mw_errf(err, "KDA state: out of memory");
        st->groups[st->n_groups++] =
            (md_kda_group){.seq = s, .first = i, .n = j - i, .base = kv->rows[kv->order[i]].pos};
        i = j;
    }
    return 0;
}

int md_kda_begin(md_kda_state *st, const md_kv *kv, int n_threads, mw_err *err) {
    st->kv = kv;
    if (st->n_kda == 0) return 0;
    if (map_groups(st, kv, err)) return -1;
    for (int64_t g = 0; g < st->n_groups; g++) {
        md_kda_group *gr = &st->groups[g];
        md_kda_seq *q = &st->seqs[gr->seq];
        if (gr->base > kv->seqs[gr->seq].n) {
            if (continued(st, gr, err)) return -1;
            continue;
        }
        if (!q->mem && !(q->mem = malloc((size_t)st->n_kda * st->layer_len * sizeof(float))))
            return mw_errf(err, "KDA state: out of memory for sequence %d (%llu bytes)",
                           st->groups[g].seq,
                           (unsigned long long)(st->n_kda * st->layer_len * sizeof(float)));
        gr->in = seq_at(st, gr->seq, q->bank, q->cbank);
        gr->out = seq_at(st, gr->seq, q->bank ^ 1, q->cbank ^ 1);
        /* a sequence starting over: its committed state is empty, so S is zero (the chunk
         * entries and the convolution's inputs are never read at position 0) */
        if (st->groups[g].base == 0)
            for (int l = 0; l < st->n_layer; l++)
                if (st->slot[l] >= 0)
                    memset(md__kda_s(st, st->groups[g].seq, l, q->bank), 0,
                           st->s_len * sizeof(float));
    }
    *st->hand = (md_kda_hand){st->groups, st->n_groups};
    if (n_threads < 1) n_threads = 1;
    const size_t need = md__kda_scratch_floats(st->d) * sizeof(float);
    if (need > st->slot_bytes || n_threads > st->n_threads) {
        const int nt = n_threads > st->n_threads ? n_threads : st->n_threads;
        float *s = realloc(st->scratch, kn_slots_bytes(need, nt));
        if (!s) return mw_errf(err, "KDA state: out of memory for the scan's scratch");
        st->scratch = s;
        st->slot_bytes = need;
        st->n_threads = nt;
    }
    return 0;
}

/* A continued group's state after its rows into its sequence's other banks (the earlier lanes
 * have committed: the sequence holds their state, which may be where this one starts from). */
static void take(md_kda_state *st, const md_kda_group *g) {
    md_kda_seq *q = &st->seqs[g->seq];
    const md_kda_at from = after(g), to = seq_at(st, g->seq, q->bank ^ 1, q->cbank ^ 1);
    const size_t len[3] = {st->s_len, st->e_len, st->c_len};
    for (int l = 0; l < st->n_layer; l++)
        for (int w = 0; st->slot[l] >= 0 && w < 3; w++)
            memcpy(md__kda_at(st, &to, w, l), md__kda_at(st, &from, w, l), len[w] * sizeof(float));
    q->bank ^= 1;
    q->cbank ^= 1;
}

void md_kda_commit(md_kda_state *st) {
    for (int64_t g = 0; st->n_kda && g < st->n_groups; g++) {
        const md_kda_group *gr = &st->groups[g];
        md_kda_seq *q = &st->seqs[gr->seq];
        if (gr->out.p[0] == st->own) {
            take(st, gr);
            continue;
        }
        q->cbank ^= 1;
        /* the pass wrote a new chunk start state once it completed a chunk */
        if (completes(gr)) q->bank ^= 1;
    }
    st->n_groups = 0;
}

/* A snapshot: per KDA layer the committed S, chunk entries and convolution inputs. */
uint64_t md_kda_snap_bytes(const md_kda_state *st) {
    return (uint64_t)st->n_kda * (st->s_len + st->e_len + st->c_len) * sizeof(float);
}

int md_kda_snap_read(const md_kda_state *st, int seq, void *dst, mw_err *err) {
    if (!st->n_kda) return 0;
    const md_kda_seq *q = &st->seqs[seq];
    if (!q->mem) return mw_errf(err, "KDA state: sequence %d holds no state", seq);
    float *o = dst;
    for (int l = 0; l < st->n_layer; l++) {
        if (st->slot[l] < 0) continue;
        memcpy(o, md__kda_s(st, seq, l, q->bank), st->s_len * sizeof(float));
        o += st->s_len;
        memcpy(o, md__kda_e(st, seq, l, q->bank), st->e_len * sizeof(float));
        o += st->e_len;
        memcpy(o, md__kda_c(st, seq, l, q->cbank), st->c_len * sizeof(float));
        o += st->c_len;
    }
    return 0;
}

int md_kda_snap_write(md_kda_state *st, int seq, const void *src, mw_err *err) {
    if (!st->n_kda) return 0;
    md_kda_seq *q = &st->seqs[seq];
    if (!q->mem && !(q->mem = malloc((size_t)st->n_kda * st->layer_len * sizeof(float))))
        return mw_errf(err, "KDA state: out of memory for sequence %d", seq);
    const float *in = src;
    for (int l = 0; l < st->n_layer; l++) {
        if (st->slot[l] < 0) continue;
        memcpy(md__kda_s(st, seq, l, q->bank), in, st->s_len * sizeof(float));
        in += st->s_len;
        memcpy(md__kda_e(st, seq, l, q->bank), in, st->e_len * sizeof(float));
        in += st->e_len;
        memcpy(md__kda_c(st, seq, l, q->cbank), in, st->c_len * sizeof(float));
        in += st->c_len;
    }
    return 0;
}
