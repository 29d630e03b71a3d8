/* tokenizer/tk_bpe.c — byte-level BPE on one pre-tokenized piece.
 *
 * The piece starts as one symbol per byte (each byte's token); the adjacent pair with the lowest
 * rank merges first, ties to the leftmost, until no pair merges. Ranks come from the merges list
 * (a hash map from the pair's ids) or, for tiktoken encodings, from the id of the token the pair
 * forms; there a piece that is a token is taken whole, as tiktoken does. Candidate pairs sit in
 * a binary heap and are checked against the symbols when popped, so a piece of n bytes costs
 * O(n log n). */
#include <string.h>

#include "tokenizer/tk_internal.h"

typedef struct sym {
    int32_t id;
    uint32_t start, len;
    int32_t prev, next;
} sym;

/* Whether symbols l and r may merge, and into what, at which rank. */
static bool pair_rank(const tk_tokenizer *t, const char *p, const sym *l, const sym *r,
                      uint32_t *rank, int32_t *merged) {
    if (l->id < 0 || r->id < 0) return false;
    if (t->tiktoken) {
        int32_t m =
            tk__map_get(&t->by_bytes, t->bytes, t->bytes_off, p + l->start, l->len + r->len);
        if (m < 0) return false;
        *rank = (uint32_t)m;
        *merged = m;
        return true;
    }
    uint32_t rk, mg;
    if (!tk__pairs_get(&t->merges, (uint32_t)l->id, (uint32_t)r->id, &rk, &mg)) return false;
    *rank = rk;
    *merged = (int32_t)mg;
    return true;
}

static void queue(const tk_tokenizer *t, const char *p, sym *s, int32_t l, tk__cand *h,
                  size_t *nh) {
    if (l < 0 || s[l].next < 0) return;
    int32_t r = s[l].next;
    uint32_t rank;
    int32_t merged;
    if (pair_rank(t, p, &s[l], &s[r], &rank, &merged))
        tk__heap_push(
            h, nh,
            (tk__cand){
                .prio = rank, .left = (uint32_t)l, .a = s[l].id, .b = s[r].id, .into = merged});
}

typedef struct piece_ctx {
    const tk_tokenizer *t;
    tk__scratch *s;
    tk_ids *out;
} piece_ctx;

static int bpe_piece(void *vctx, const char *p, size_t n, mw_err *err) {
    piece_ctx *c = vctx;
    const tk_tokenizer *t = c->t;
    if (n == 0) return 0;
    if (t->tiktoken || t->ignore_merges) {
        int32_t whole = tk__map_get(&t->by_bytes, t->bytes, t->bytes_off, p, n);
        if (whole >= 0) return tk_ids_push(c->out, whole) ? mw_errf(err, "out of memory") : 0;
    }
    if (n == 1) {
        int32_t id = t->byte_tok[(unsigned char)p[0]];
        return id >= 0 && tk_ids_push(c->out, id) ? mw_errf(err, "out of memory") : 0;
    }
    if (n > (size_t)INT32_MAX / 4) return mw_errf(err, "a piece of %zu bytes is too long", n);
    sym *s = tk__scratch_work(c->s, n * sizeof *s, 0);
    /* every merge queues at most two pairs: n - 1 initial + 2 per merge */
    tk__cand *h = tk__scratch_work(c->s, 3 * n * sizeof *h, 1);
    if (!s || !h) return mw_errf(err, "out of memory");
    for (size_t i = 0; i < n; i++)
        s[i] = (sym){t->byte_tok[(unsigned char)p[i]], (uint32_t)i, 1, (int32_t)i - 1,
                     i + 1 < n ? (int32_t)i + 1 : -1};
    size_t nh = 0;
    for (size_t i = 0; i + 1 < n; i++) queue(t, p, s, (int32_t)i, h, &nh);
    while (nh) {
        tk__cand k = tk__heap_pop(h, &nh);
        sym *l = &s[k.left];
        if (l->len == 0 || l->id != k.a || l->next < 0) continue;
        sym *r = &s[l->next];
        if (r->id != k.b) continue;
        l->id = k.into;
        l->len += r->len;
        l->next = r->next;
        if (r->next >= 0) s[r->next].prev = (int32_t)k.left;
        r->len = 0;
        queue(t, p, s, l->prev, h, &nh);
        queue(t, p, s, (int32_t)k.left, h, &nh);
    }
    for (int32_t i = 0; i >= 0; i = s[i].next)
        if (s[i].id >= 0 && tk_ids_push(c->out, s[i].id)) return mw_errf(err, "out of memory");
    return 0;
}

int tk__bpe_encode(const tk_tokenizer *t, tk__scratch *s, const char *text, size_t len, tk_ids *out,
                   mw_err *err) {
    piece_ctx c = {t, s, out};
    return tk__pre_split(t, s, text, len, bpe_piece, &c, err);
}
