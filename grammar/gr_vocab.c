/* grammar/gr_vocab.c — the vocabulary as a trie in depth-first order, and the matcher that walks
 * it for each step's mask (gr.h).
 *
 * A node is a byte at a depth; its subtree is the nodes up to `end`, so a byte the automaton
 * refuses skips every token that starts with that prefix in one move. The automaton's state at
 * each depth of the walk is kept on a stack: a node copies its parent's state and feeds its byte.
 * Masks are cached by state: most steps of a generation repeat a state met before (inside a
 * string, after a comma), and then cost a lookup. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gr_internal.h"

#define MAX_TOKEN_BYTES 1024 /* longer tokens are never allowed (none exist in practice) */
#define CACHE_SLOTS     16

typedef struct tnode {
    uint32_t end;     /* the index after this node's subtree */
    uint32_t tok_off; /* the ids ending here: sorted[tok_off .. tok_off + tok_n) */
    uint16_t tok_n;
    uint16_t depth; /* 1 for a token's first byte */
    uint8_t byte;
} tnode;

typedef struct trie {
    tnode *nodes;
    uint32_t n_nodes;
    int32_t *sorted; /* token ids in the trie's order */
} trie;

struct gr_vocab {
    int32_t n;
    int n_words;
    trie all;          /* every token with bytes */
    trie odd;          /* the tokens not plain: what a string's body must walk */
    uint64_t *plain;   /* tokens that are string text as they stand: whole UTF-8 characters, no
                          quote, backslash or control byte */
    int32_t *by_chars; /* the plain tokens by their characters, fewest first */
    int32_t n_by_chars;
    uint16_t *chars; /* per plain token: its characters */
    uint16_t max_depth;
    uint64_t *eos; /* bitset */
    char *blob;    /* every token's bytes */
    size_t *off, *len;
};

typedef struct entry {
    uint64_t hash;
    uint32_t stamp;
    bool used;
    gr_state key;
    uint64_t *bits;
} entry;

struct gr_matcher {
    const gr_grammar *g;
    const gr_vocab *v;
    gr_state cur;
    gr_state *stack; /* max_depth + 1 */
    entry cache[CACHE_SLOTS];
    uint32_t clock;
};

static void copy_state(gr_state *d, const gr_state *s) {
    d->depth = s->depth;
    d->done = s->done;
    d->chosen = s->chosen;
    d->br = s->br;
    d->pre = s->pre;
    d->post = s->post;
    d->cand = s->cand;
    memcpy(d->f, s->f, (size_t)s->depth * sizeof s->f[0]);
}

/* ---- building ------------------------------------------------------------------------------- */

typedef struct tok_ref {
    const uint8_t *p;
    size_t len;
    int32_t id;
} tok_ref;

static int cmp_tok(const void *pa, const void *pb) {
    const tok_ref *a = pa, *b = pb;
    const size_t n = a->len < b->len ? a->len : b->len;
    const int c = memcmp(a->p, b->p, n);
    if (c) return c;
    if (a->len != b->len) return a->len < b->len ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Nodes for the sorted tokens: each token adds the bytes past its common prefix with the one
 * before; open nodes deeper than that prefix end where the new ones start. */
static int build_trie(trie *tr, uint16_t *max_depth, const tok_ref *t, int32_t nt, mw_err *err) {
    size_t total = 0;
    for (int32_t i = 0; i < nt; i++) total += t[i].len;
    tr->nodes = malloc((total + 1) * sizeof *tr->nodes);
    tr->sorted = malloc(((size_t)nt + 1) * sizeof *tr->sorted);
    uint32_t *open = malloc((MAX_TOKEN_BYTES + 1) * sizeof *open);
    if (!tr->nodes || !tr->sorted || !open) {
        free(open);
        return mw_errf(err, "out of memory");
    }
    size_t prev_len = 0;
    for (int32_t i = 0; i < nt; i++) {
        size_t l = 0;
        if (i > 0)
            while (l < prev_len && l < t[i].len && t[i - 1].p[l] == t[i].p[l]) l++;
        for (size_t d = l + 1; d <= prev_len; d++) tr->nodes[open[d]].end = tr->n_nodes;
        if (i > 0 && l == t[i].len && l == prev_len) { /* the same bytes as the one before */
            tr->nodes[open[l]].tok_n++;
            continue;
        }
        for (size_t d = l + 1; d <= t[i].len; d++) {
            tnode *nd = &tr->nodes[tr->n_nodes];
            *nd = (tnode){.byte = t[i].p[d - 1], .depth = (uint16_t)d};
            if (d == t[i].len) nd->tok_off = (uint32_t)i, nd->tok_n = 1;
            open[d] = tr->n_nodes++;
        }
        if (t[i].len > *max_depth) *max_depth = (uint16_t)t[i].len;
        prev_len = t[i].len;
    }
    for (size_t d = 1; d <= prev_len; d++) tr->nodes[open[d]].end = tr->n_nodes;
    free(open);
    for (int32_t i = 0; i < nt; i++) tr->sorted[i] = t[i].id;
    return 0;
}

typedef struct by_len {
    uint16_t chars;
    int32_t id;
} by_len;

static int cmp_by_len(const void *pa, const void *pb) {
    const by_len *a = pa, *b = pb;
    return a->chars != b->chars ? (a->chars > b->chars ? 1 : -1)
                                : (a->id > b->id) - (a->id < b->id);
}

/* The plain tokens ordered by length in characters: a string with r characters left takes the
 * first ones up to r. */
static int sort_plain(gr_vocab *v, mw_err *err) {
    v->chars = calloc((size_t)v->n, sizeof *v->chars);
    v->by_chars = malloc((size_t)v->n * sizeof *v->by_chars);
    by_len *t = malloc((size_t)v->n * sizeof *t);
    if (!v->chars || !v->by_chars || !t) {
        free(t);
        return mw_errf(err, "out of memory");
    }
    for (int32_t id = 0; id < v->n; id++) {
        if (!(v->plain[id >> 6] >> (id & 63) & 1)) continue;
        size_t c = 0;
        for (size_t i = 0; i < v->len[id]; i++)
            c += ((uint8_t)v->blob[v->off[id] + i] & 0xc0) != 0x80;
        v->chars[id] = (uint16_t)c; /* a token has at most MAX_TOKEN_BYTES */
        t[v->n_by_chars++] = (by_len){v->chars[id], id};
    }
    qsort(t, (size_t)v->n_by_chars, sizeof *t, cmp_by_len);
    for (int32_t i = 0; i < v->n_by_chars; i++) v->by_chars[i] = t[i].id;
    free(t);
    return 0;
}

/* Whether the bytes are string text as they stand (the automaton's string body takes them and
 * is back in its body after, whatever came before). */
static bool plain_text(const uint8_t *p, size_t n) {
    gr_grammar g = {0};
    gr_node nd = {.kind = GR_STRING, .max_len = UINT32_MAX};
    g.v = &nd;
    g.n = 1;
    g.n_br = 1;
    gr_state s = {.depth = 1, .chosen = true};
    s.f[0].phase = 1; /* S_BODY */
    s.f[0].started = 1;
    for (size_t i = 0; i < n; i++)
        if (p[i] == '"' || p[i] == '\\' || gr_feed(&g, &s, p[i])) return false;
    return s.depth == 1 && s.f[0].phase == 1;
}

void gr_vocab_free(gr_vocab *v) {
    if (!v) return;
    free(v->all.nodes);
    free(v->all.sorted);
    free(v->odd.nodes);
    free(v->odd.sorted);
    free(v->plain);
    free(v->by_chars);
    free(v->chars);
    free(v->eos);
    free(v->blob);
    free(v->off);
    free(v->len);
    free(v);
}

int gr_vocab_new(const char *const *bytes, const size_t *lens, int32_t n, const int32_t *eos,
                 int n_eos, gr_vocab **out, mw_err *err) {
    *out = NULL;
    if (n <= 0) return mw_errf(err, "an empty vocabulary");
    gr_vocab *v = calloc(1, sizeof *v);
    if (!v) return mw_errf(err, "out of memory");
    v->n = n;
    v->n_words = (n + 63) / 64;
    v->eos = calloc((size_t)v->n_words, sizeof *v->eos);
    v->off = calloc((size_t)n, sizeof *v->off);
    v->len = calloc((size_t)n, sizeof *v->len);
    tok_ref *t = calloc((size_t)n, sizeof *t);
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) total += lens[i] <= MAX_TOKEN_BYTES ? lens[i] : 0;
    v->blob = malloc(total + 1);
    if (!v->eos || !v->off || !v->len || !t || !v->blob) {
        free(t);
        gr_vocab_free(v);
        return mw_errf(err, "out of memory");
    }
    for (int i = 0; i < n_eos; i++)
        if (eos[i] >= 0 && eos[i] < n) v->eos[eos[i] >> 6] |= 1ull << (eos[i] & 63);
    size_t at = 0;
    int32_t nt = 0;
    for (int32_t i = 0; i < n; i++) {
        const bool is_eos = v->eos[i >> 6] >> (i & 63) & 1;
        if (lens[i] == 0 || lens[i] > MAX_TOKEN_BYTES || is_eos) continue;
        memcpy(v->blob + at, bytes[i], lens[i]);
        v->off[i] = at;
        v->len[i] = lens[i];
        t[nt++] = (tok_ref){(const uint8_t *)v->blob + at, lens[i], i};
        at += lens[i];
    }
    qsort(t, (size_t)nt, sizeof *t, cmp_tok);
    int rc = build_trie(&v->all, &v->max_depth, t, nt, err);
    /* the odd ones keep their order: a sorted list filtered is sorted */
    v->plain = calloc((size_t)v->n_words, sizeof *v->plain);
    int32_t n_odd = 0;
    for (int32_t i = 0; !rc && v->plain && i < nt; i++) {
        if (plain_text(t[i].p, t[i].len))
            v->plain[t[i].id >> 6] |= 1ull << (t[i].id & 63);
        else
            t[n_odd++] = t[i];
    }
    if (!rc && !v->plain) rc = mw_errf(err, "out of memory");
    if (!rc) rc = sort_plain(v, err);
    if (!rc) rc = build_trie(&v->odd, &v->max_depth, t, n_odd, err);
    free(t);
    if (rc) {
        gr_vocab_free(v);
        return -1;
    }
    *out = v;
    return 0;
}

int32_t gr_vocab_size(const gr_vocab *v) {
    return v->n;
}

int32_t gr_vocab_find(const gr_vocab *v, const char *bytes, size_t len) {
    for (int32_t i = 0; len && i < v->n; i++)
        if (v->len[i] == len && !memcmp(v->blob + v->off[i], bytes, len)) return i;
    return -1;
}

/* ---- the matcher ---------------------------------------------------------------------------- */

int gr_matcher_new(const gr_grammar *g, const gr_vocab *v, gr_matcher **out, mw_err *err) {
    *out = NULL;
    gr_matcher *m = calloc(1, sizeof *m);
    if (!m) return mw_errf(err, "out of memory");
    m->g = g;
    m->v = v;
    m->stack = malloc(((size_t)v->max_depth + 1) * sizeof *m->stack);
    if (!m->stack) {
        free(m);
        return mw_errf(err, "out of memory");
    }
    gr_state_init(g, &m->cur);
    *out = m;
    return 0;
}

void gr_matcher_free(gr_matcher *m) {
    if (!m) return;
    for (int i = 0; i < CACHE_SLOTS; i++) free(m->cache[i].bits);
    free(m->stack);
    free(m);
}

static uint64_t state_hash(const gr_state *s) {
    uint64_t h = 1469598103934665603ull ^ s->depth ^ ((uint64_t)s->done << 8) ^
                 ((uint64_t)s->pre << 16) ^ ((uint64_t)s->post << 32) ^ ((uint64_t)s->br << 48) ^
                 ((uint64_t)s->chosen << 56) ^ s->cand * 31;
    const uint8_t *p = (const uint8_t *)s->f;
    for (size_t i = 0; i < (size_t)s->depth * sizeof s->f[0]; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static bool same_state(const gr_state *a, const gr_state *b) {
    return a->depth == b->depth && a->done == b->done && a->pre == b->pre && a->post == b->post &&
           a->chosen == b->chosen && a->br == b->br && a->cand == b->cand &&
           !memcmp(a->f, b->f, (size_t)a->depth * sizeof a->f[0]);
}

/* Every token of tr whose bytes the automaton takes from m->cur, added to bits. */
static void walk_trie(gr_matcher *m, const trie *tr, uint64_t *bits) {
    copy_state(&m->stack[0], &m->cur);
    for (uint32_t i = 0; i < tr->n_nodes;) {
        const tnode *nd = &tr->nodes[i];
        gr_state *s = &m->stack[nd->depth];
        copy_state(s, &m->stack[nd->depth - 1]);
        if (gr_feed(m->g, s, nd->byte)) {
            i = nd->end;
            continue;
        }
        for (uint32_t k = 0; k < nd->tok_n; k++) {
            const int32_t id = tr->sorted[nd->tok_off + k];
            bits[id >> 6] |= 1ull << (id & 63);
        }
        i++;
    }
}

/* In a string's body with no character owed: every plain token whose characters fit is allowed
 * without a walk (all of them when no token can reach the bound), and only the others are
 * walked. -1: not in a string's body, else the characters left (INT64_MAX: no bound in reach). */
static int64_t open_string(const gr_matcher *m) {
    const gr_state *s = &m->cur;
    if (s->depth == 0) return -1;
    const gr_frame *f = &s->f[s->depth - 1];
    const gr_node *nd = &m->g->v[f->node];
    if (nd->kind != GR_STRING || !f->started || f->phase != 1 /* S_BODY */) return -1;
    if (nd->re) return -1; /* a pattern: every token is walked */
    if (nd->max_len == UINT32_MAX || nd->max_len - f->seen > m->v->max_depth) return INT64_MAX;
    return (int64_t)(nd->max_len - f->seen);
}

static void walk(gr_matcher *m, uint64_t *bits) {
    const gr_vocab *v = m->v;
    const int64_t left = open_string(m);
    if (left == INT64_MAX) {
        memcpy(bits, v->plain, (size_t)v->n_words * sizeof *bits);
        walk_trie(m, &v->odd, bits);
    } else if (left >= 0) {
        memset(bits, 0, (size_t)v->n_words * sizeof *bits);
        for (int32_t i = 0; i < v->n_by_chars && v->chars[v->by_chars[i]] <= left; i++)
            bits[v->by_chars[i] >> 6] |= 1ull << (v->by_chars[i] & 63);
        walk_trie(m, &v->odd, bits);
    } else {
        memset(bits, 0, (size_t)v->n_words * sizeof *bits);
        walk_trie(m, &v->all, bits);
    }
    if (gr_complete(m->g, &m->cur))
        for (int w = 0; w < v->n_words; w++) bits[w] |= v->eos[w];
}

/* The cache's key: the state, with a string's length forgotten where no token can reach its
 * bounds (the masks of such states are the same). */
static void cache_key(const gr_matcher *m, gr_state *k) {
    copy_state(k, &m->cur);
    if (k->depth == 0) return;
    gr_frame *f = &k->f[k->depth - 1];
    const gr_node *nd = &m->g->v[f->node];
    /* (under a pattern the characters it still needs count against maxLength: kept) */
    if (nd->kind == GR_STRING && f->seen >= nd->min_len &&
        (nd->max_len == UINT32_MAX || (!nd->re && nd->max_len - f->seen > m->v->max_depth)))
        f->seen = UINT64_MAX;
}

const uint64_t *gr_matcher_mask(gr_matcher *m) {
    gr_state key;
    cache_key(m, &key);
    const uint64_t h = state_hash(&key);
    entry *victim = &m->cache[0];
    m->clock++;
    for (int i = 0; i < CACHE_SLOTS; i++) {
        entry *e = &m->cache[i];
        if (e->used && e->hash == h && same_state(&e->key, &key)) {
            e->stamp = m->clock;
            return e->bits;
        }
        if (!e->used || e->stamp < victim->stamp) victim = e;
        if (!e->used) break;
    }
    if (!victim->bits) victim->bits = malloc((size_t)m->v->n_words * sizeof *victim->bits);
    if (!victim->bits) return NULL;
    walk(m, victim->bits);
    victim->used = true;
    victim->hash = h;
    victim->stamp = m->clock;
    copy_state(&victim->key, &key);
    return victim->bits;
}

int64_t gr_matcher_apply(gr_matcher *m, float *logits, int64_t n) {
    const uint64_t *bits = gr_matcher_mask(m);
    int64_t allowed = 0;
    for (int64_t i = 0; i < n; i += 64) {
        const uint64_t w = bits && i < m->v->n ? bits[i >> 6] : 0;
        const int64_t hi = n - i < 64 ? n - i : 64;
        if (w == ~0ull && hi == 64) {
            allowed += 64;
            continue;
        }
        for (int64_t k = 0; k < hi; k++) {
            const bool ok = i + k < m->v->n && (w >> k & 1);
            if (ok)
                allowed++;
            else
                logits[i + k] = -INFINITY;
        }
    }
    return allowed;
}

int gr_matcher_accept(gr_matcher *m, int32_t token) {
    const gr_vocab *v = m->v;
    if (token < 0 || token >= v->n) return -1;
    if (v->eos[token >> 6] >> (token & 63) & 1) return gr_complete(m->g, &m->cur) ? 1 : -1;
    if (v->len[token] == 0) return -1;
    gr_state s;
    copy_state(&s, &m->cur);
    for (size_t i = 0; i < v->len[token]; i++)
        if (gr_feed(m->g, &s, (uint8_t)v->blob[v->off[token] + i])) return -1;
    copy_state(&m->cur, &s);
    return 0;
}

bool gr_matcher_complete(const gr_matcher *m) {
    return gr_complete(m->g, &m->cur);
}
