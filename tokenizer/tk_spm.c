/* tokenizer/tk_spm.c — SentencePiece-style encoding (`llama` vocabularies: scores, byte fallback).
 *
 * Spaces become ▁ (U+2581) and, where the model asks for it, a ▁ is put in front of the text.
 * Every character starts as a symbol; the adjacent pair whose concatenation is a token with the
 * highest score merges first (ties to the leftmost), until none does. A symbol left that is not a
 * token is spelled with byte tokens <0xXX>, or the unknown token when the vocabulary has none. */
#include <string.h>

#include "tokenizer/tk_internal.h"

typedef struct sym {
    uint32_t start, len;
    int32_t prev, next;
} sym;

static int32_t lookup(const tk_tokenizer *t, const char *p, size_t n) {
    return tk__map_get(&t->by_bytes, t->text, t->text_off, p, n);
}

static void queue(const tk_tokenizer *t, const char *p, const sym *s, int32_t l, tk__cand *h,
                  size_t *nh) {
    if (l < 0 || s[l].next < 0) return;
    const sym *r = &s[s[l].next];
    int32_t id = lookup(t, p + s[l].start, s[l].len + r->len);
    if (id >= 0)
        tk__heap_push(h, nh,
                      (tk__cand){.prio = -(double)t->score[id],
                                 .left = (uint32_t)l,
                                 .size = s[l].len + r->len});
}

int tk__spm_encode(const tk_tokenizer *t, tk__scratch *sc, const char *text, size_t len,
                   bool prefix_space, tk_ids *out, mw_err *err) {
    size_t cap = 3 * (len + 1);
    char *p = tk__scratch_work(sc, cap, 2);
    if (!p) return mw_errf(err, "out of memory");
    size_t n = 0;
    if (prefix_space) memcpy(p, "\xe2\x96\x81", 3), n = 3;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(p + n, "\xe2\x96\x81", 3);
            n += 3;
        } else {
            p[n++] = text[i];
        }
    }
    if (n == 0) return 0;
    sym *s = tk__scratch_work(sc, n * sizeof *s, 0);
    tk__cand *h = tk__scratch_work(sc, 3 * n * sizeof *h, 1);
    if (!s || !h) return mw_errf(err, "out of memory");
    size_t ns = 0;
    for (size_t i = 0; i < n;) {
        int k = tk__utf8_len((unsigned char)p[i]);
        size_t kl = k && i + (size_t)k <= n ? (size_t)k : 1;
        s[ns] = (sym){(uint32_t)i, (uint32_t)kl, (int32_t)ns - 1, -1};
        if (ns) s[ns - 1].next = (int32_t)ns;
        ns++;
        i += kl;
    }
    size_t nh = 0;
    for (size_t i = 0; i + 1 < ns; i++) queue(t, p, s, (int32_t)i, h, &nh);
    while (nh) {
        tk__cand c = tk__heap_pop(h, &nh);
        sym *l = &s[c.left];
        if (l->len == 0 || l->next < 0) continue;
        sym *r = &s[l->next];
        if (r->len == 0 || l->len + r->len != c.size) continue;
        l->len += r->len;
        l->next = r->next;
        if (r->next >= 0) s[r->next].prev = (int32_t)c.left;
        r->len = 0;
        queue(t, p, s, l->prev, h, &nh);
        queue(t, p, s, (int32_t)c.left, h, &nh);
    }
    for (int32_t i = 0; i >= 0; i = s[i].next) {
        int32_t id = lookup(t, p + s[i].start, s[i].len);
        if (id >= 0) {
            if (tk_ids_push(out, id)) return mw_errf(err, "out of memory");
            continue;
        }
        for (uint32_t k = 0; k < s[i].len; k++) {
            int32_t b = t->byte_tok[(unsigned char)p[s[i].start + k]];
            if (b < 0) b = t->unk;
            if (b >= 0 && tk_ids_push(out, b)) return mw_errf(err, "out of memory");
        }
    }
    return 0;
}
