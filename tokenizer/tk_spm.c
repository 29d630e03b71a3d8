/* tokenizer/tk_spm.c — SentencePiece-style encoding (`llama` vocabularies: scores, byte fallback).
 *
 * Spaces become ▁ (U+2581) and, where the model asks for it, a ▁ is put in front of the text.
 * Every character starts as a symbol; the adjacent pair whose concatenation is a token with the
 * highest score merges first (ties to the leftmost), until none does (tk__merge). A symbol left
 * that is not a token is spelled with byte tokens <0xXX>, or the unknown token when the
 * vocabulary has none. */
#include <string.h>

#include "tokenizer/tk_internal.h"

static int32_t lookup(const tk_tokenizer *t, const char *p, size_t n) {
    return tk__map_get(&t->by_bytes, t->text, t->text_off, p, n);
}

/* A pair merges when its concatenation is a token; the higher the token's score, the sooner. */
static bool pair_score(const tk_tokenizer *t, const char *p, const tk__sym *l, const tk__sym *r,
                       double *prio, int32_t *into) {
    int32_t id = lookup(t, p + l->start, l->len + r->len);
    if (id < 0) return false;
    *prio = -(double)t->score[id];
    *into = id;
    return true;
}

/* The text with its spaces as ▁, into the scratch; its length in *n. */
static char *escape_spaces(tk__scratch *sc, const char *text, size_t len, bool prefix_space,
                           size_t *n) {
    char *p = tk__scratch_work(sc, 3 * (len + 1), 2);
    if (!p) return NULL;
    *n = 0;
    if (prefix_space) memcpy(p, "\xe2\x96\x81", 3), *n = 3;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(p + *n, "\xe2\x96\x81", 3);
            *n += 3;
        } else {
            p[(*n)++] = text[i];
        }
    }
    return p;
}

int tk__spm_encode(const tk_tokenizer *t, tk__scratch *sc, const char *text, size_t len,
                   bool prefix_space, tk_ids *out, mw_err *err) {
    size_t n;
    char *p = escape_spaces(sc, text, len, prefix_space, &n);
    if (!p) return mw_errf(err, "out of memory");
    if (n == 0) return 0;
    tk__sym *s = tk__scratch_work(sc, n * sizeof *s, 0);
    void *work = tk__scratch_work(sc, tk__merge_work(n), 1);
    if (!s || !work) return mw_errf(err, "out of memory");
    size_t ns = 0;
    for (size_t i = 0; i < n;) {
        int k = tk__utf8_len((unsigned char)p[i]);
        size_t kl = k && i + (size_t)k <= n ? (size_t)k : 1;
        s[ns] = (tk__sym){lookup(t, p + i, kl), (uint32_t)i, (uint32_t)kl, (int32_t)ns - 1, -1};
        if (ns) s[ns - 1].next = (int32_t)ns;
        ns++;
        i += kl;
    }
    tk__merge(t, p, s, ns, pair_score, work);
    for (int32_t i = 0; i >= 0; i = s[i].next) {
        if (s[i].id >= 0) {
            if (tk_ids_push(out, s[i].id)) return mw_errf(err, "out of memory");
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
