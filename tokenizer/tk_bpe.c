/* tokenizer/tk_bpe.c — byte-level BPE on one pre-tokenized piece.
 *
 * The piece starts as one symbol per byte (each byte's token); the adjacent pair with the lowest
 * rank merges first, ties to the leftmost, until no pair merges (tk__merge). Ranks come from the
 * merges list (a hash map from the pair's ids) or, for tiktoken encodings, from the id of the
 * token the pair forms; there a piece that is a token is taken whole, as tiktoken does. */
#include <string.h>

#include "tokenizer/tk_internal.h"

/* Whether symbols l and r may merge, and into what, at which rank. */
static bool pair_rank(const tk_tokenizer *t, const char *p, const tk__sym *l, const tk__sym *r,
                      double *prio, int32_t *into) {
    if (l->id < 0 || r->id < 0) return false;
    if (t->tiktoken) {
        int32_t m =
            tk__map_get(&t->by_bytes, t->bytes, t->bytes_off, p + l->start, l->len + r->len);
        if (m < 0) return false;
        *prio = (uint32_t)m;
        *into = m;
        return true;
    }
    uint32_t rk, mg;
    if (!tk__pairs_get(&t->merges, (uint32_t)l->id, (uint32_t)r->id, &rk, &mg)) return false;
    *prio = rk;
    *into = (int32_t)mg;
    return true;
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
    tk__sym *s = tk__scratch_work(c->s, n * sizeof *s, 0);
    void *work = tk__scratch_work(c->s, tk__merge_work(n), 1);
    if (!s || !work) return mw_errf(err, "out of memory");
    for (size_t i = 0; i < n; i++)
        s[i] = (tk__sym){t->byte_tok[(unsigned char)p[i]], (uint32_t)i, 1, (int32_t)i - 1,
                         i + 1 < n ? (int32_t)i + 1 : -1};
    tk__merge(t, p, s, n, pair_rank, work);
    for (int32_t i = 0; i >= 0; i = s[i].next)
        if (s[i].id >= 0 && tk_ids_push(c->out, s[i].id)) return mw_errf(err, "out of memory");
    return 0;
}

int tk__bpe_encode(const tk_tokenizer *t, tk__scratch *s, const char *text, size_t len, tk_ids *out,
                   mw_err *err) {
    piece_ctx c = {t, s, out};
    return tk__pre_split(t, s, text, len, bpe_piece, &c, err);
}
