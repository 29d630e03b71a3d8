/* tokenizer/tk_merge.c — the merge loop BPE and SentencePiece share, and its candidate heap.
 *
 * A piece is a list of symbols; every adjacent pair the model can merge is a candidate, and the
 * one its model ranks first (lowest priority, ties to the leftmost) merges, until none is left.
 * The models differ only in how a pair is ranked and into what, so that is the one parameter.
 * Candidates sit in a binary heap and are checked against the symbols when popped, so a piece of
 * n symbols costs O(n log n). */
#include "tokenizer/tk_internal.h"

/* A pair that may merge, as it was when queued. */
typedef struct cand {
    double prio;         /* lower merges first */
    uint32_t left;       /* symbol index; ties go to the leftmost */
    uint32_t llen, rlen; /* the two symbols' lengths when queued */
    int32_t into;
} cand;

static bool before(const cand *x, const cand *y) {
    return x->prio < y->prio || (x->prio == y->prio && x->left < y->left);
}

static void heap_push(cand *h, size_t *n, cand c) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!before(&c, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = c;
}

static cand heap_pop(cand *h, size_t *n) {
    cand top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const cand *best = &last;
        if (l < *n && before(&h[l], best)) m = l, best = &h[l];
        if (r < *n && before(&h[r], best)) m = r;
        if (m == i) break;
        h[i] = h[m];
        i = m;
    }
    if (*n) h[i] = last;
    return top;
}

static void queue(const tk_tokenizer *t, const char *p, const tk__sym *s, int32_t l,
                  tk__rank_fn rank, cand *h, size_t *nh) {
    if (l < 0 || s[l].next < 0) return;
    const tk__sym *r = &s[s[l].next];
    double prio;
    int32_t into;
    if (rank(t, p, &s[l], r, &prio, &into))
        heap_push(h, nh, (cand){prio, (uint32_t)l, s[l].len, r->len, into});
}

size_t tk__merge_work(size_t n) {
    /* every merge queues at most two pairs: n - 1 initial + 2 per merge */
    return 3 * n * sizeof(cand);
}

void tk__merge(const tk_tokenizer *t, const char *p, tk__sym *s, size_t n, tk__rank_fn rank,
               void *work) {
    cand *h = work;
    size_t nh = 0;
    for (size_t i = 0; i + 1 < n; i++) queue(t, p, s, (int32_t)i, rank, h, &nh);
    while (nh) {
        cand c = heap_pop(h, &nh);
        tk__sym *l = &s[c.left];
        /* Symbols only grow, and a merged one drops to length 0: a pair whose two lengths are
         * those it was queued with is unchanged since, and its rank still holds. */
        if (l->len != c.llen || l->next < 0) continue;
        tk__sym *r = &s[l->next];
        if (r->len != c.rlen) continue;
        l->id = c.into;
        l->len += r->len;
        l->next = r->next;
        if (r->next >= 0) s[r->next].prev = (int32_t)c.left;
        r->len = 0;
        queue(t, p, s, l->prev, rank, h, &nh);
        queue(t, p, s, (int32_t)c.left, rank, h, &nh);
    }
}
