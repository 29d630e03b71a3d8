/* tokenizer/tk_vocab.c — building a tokenizer's vocabulary: token texts and types, the bytes each
 * token stands for, the lookup maps, byte tokens, the special-token list (longest first), merges,
 * and the accessors of the public header.
 *
 * Loaders (tk_gguf.c, tk_hf.c) create a tokenizer with tk__new, set every token, add merges, name
 * the pre-tokenizer and call tk__finish; everything derived is built there, once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tk_internal.h"
#include "util/mw_grow.h"

/* Texts are collected per token first (loaders may set them in any order), then packed. */
typedef struct pending {
    char **text;
    uint32_t *len;
} pending;

tk_tokenizer *tk__new(tk__kind kind, int32_t n) {
    if (n <= 0 || n > TK_MAX_VOCAB) return NULL;
    tk_tokenizer *t = calloc(1, sizeof *t);
    pending *p = calloc(1, sizeof *p);
    if (!t || !p) goto fail;
    t->kind = kind;
    snprintf(t->model, sizeof t->model, "%s", kind == TK_BPE ? "gpt2" : "llama");
    t->n = n;
    t->bos = t->eos = t->unk = -1;
    t->type = calloc((size_t)n, 1);
    t->score = calloc((size_t)n, sizeof *t->score);
    p->text = calloc((size_t)n, sizeof *p->text);
    p->len = calloc((size_t)n, sizeof *p->len);
    t->pre = strdup("");
    t->arch = strdup("");
    if (!t->type || !t->score || !p->text || !p->len || !t->pre || !t->arch) goto fail;
    t->text = (char *)p; /* parked here until tk__finish packs the texts */
    return t;
fail:
    if (p) {
        free(p->text);
        free(p->len);
        free(p);
    }
    if (t) {
        t->text = NULL;
        tk_free(t);
    }
    return NULL;
}

static pending *pend(tk_tokenizer *t) {
    return t->text_off ? NULL : (pending *)t->text;
}

int tk__set_token(tk_tokenizer *t, int32_t id, const char *text, size_t len, int type, float score,
                  mw_err *err) {
    pending *p = pend(t);
    if (!p || id < 0 || id >= t->n) return mw_errf(err, "token id %d is out of range", id);
    if (len > TK_MAX_TOKEN_LEN)
        return mw_errf(err, "token %d is %zu bytes long (at most %d)", id, len, TK_MAX_TOKEN_LEN);
    if (p->text[id]) return mw_errf(err, "token id %d is given twice", id);
    if (!(p->text[id] = malloc(len + 1))) return mw_errf(err, "out of memory");
    memcpy(p->text[id], text, len);
    p->text[id][len] = '\0';
    p->len[id] = (uint32_t)len;
    t->type[id] = (uint8_t)(type >= 0 && type <= TK_T_BYTE ? type : TK_T_UNDEFINED);
    t->score[id] = score;
    return 0;
}

int tk__add_eog(tk_tokenizer *t, int32_t id) {
    if (id < 0 || id >= t->n) return 0;
    for (size_t i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) return 0;
    int32_t *e = realloc(t->eog, (t->n_eog + 1) * sizeof *e);
    if (!e) return -1;
    t->eog = e;
    t->eog[t->n_eog++] = id;
    return 0;
}

/* "<0x41>" → 0x41, -1 otherwise. */
static int hex_byte(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                       : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* The bytes token id stands for, written to out (room for len bytes); returns their count. */
static size_t token_bytes(const tk_tokenizer *t, int32_t id, const char *s, size_t len, char *out) {
    int ty = t->type[id];
    int hb = ty == TK_T_BYTE ? hex_byte(s, len) : -1;
    if (hb >= 0) {
        out[0] = (char)hb;
        return 1;
    }
    if (ty == TK_T_NORMAL || ty == TK_T_UNDEFINED || ty == TK_T_BYTE) {
        if (t->kind == TK_BPE) {
            long k = tk__unbyte(s, len, out);
            if (k >= 0) return (size_t)k;
        } else { /* SentencePiece: ▁ (U+2581) is a space */
            size_t o = 0;
            for (size_t i = 0; i < len; i++) {
                if (i + 3 <= len && !memcmp(s + i, "\xe2\x96\x81", 3)) {
                    out[o++] = ' ';
                    i += 2;
                } else {
                    out[o++] = s[i];
                }
            }
            return o;
        }
    }
    memcpy(out, s, len);
    return len;
}

static int pack(tk_tokenizer *t, pending *p, mw_err *err) {
    uint64_t total = 0;
    for (int32_t i = 0; i < t->n; i++) {
        if (!p->text[i]) return mw_errf(err, "token id %d has no text", i);
        total += p->len[i];
    }
    t->text = malloc(total + 1);
    t->bytes = malloc(total + 1);
    t->text_off = malloc(((size_t)t->n + 1) * sizeof *t->text_off);
    t->bytes_off = malloc(((size_t)t->n + 1) * sizeof *t->bytes_off);
    if (!t->text || !t->bytes || !t->text_off || !t->bytes_off)
        return mw_errf(err, "out of memory");
    uint64_t o = 0, b = 0;
    for (int32_t i = 0; i < t->n; i++) {
        t->text_off[i] = o;
        memcpy(t->text + o, p->text[i], p->len[i]);
        o += p->len[i];
        t->bytes_off[i] = b;
        b += token_bytes(t, i, p->text[i], p->len[i], t->bytes + b);
    }
    t->text_off[t->n] = o;
    t->bytes_off[t->n] = b;
    t->text[o] = t->bytes[b] = '\0';
    return 0;
}

static void free_pending(pending *p, int32_t n) {
    if (!p) return;
    for (int32_t i = 0; i < n; i++) free(p->text[i]);
    free(p->text);
    free(p->len);
    free(p);
}

static bool is_special_type(int ty) {
    return ty == TK_T_CONTROL || ty == TK_T_USER || ty == TK_T_UNKNOWN;
}

/* Special tokens sort by text length, longest first, then by id. */
typedef struct len_id {
    uint64_t len;
    int32_t id;
} len_id;

static int by_len_desc(const void *a, const void *b) {
    const len_id *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

int tk__finish(tk_tokenizer *t, const char *what, mw_err *err) {
    pending *p = pend(t);
    if (!p) return mw_errf(err, "%s: tokenizer built twice", what);
    t->text = NULL;
    int rc = pack(t, p, err);
    free_pending(p, t->n);
    if (rc) return mw_err_wrap(err, "%s", what);
    for (int32_t i = 0; i < t->n; i++) {
        if (tk__map_put(&t->by_text, t->text, t->text_off, i, (size_t)t->n) < 0)
            return mw_errf(err, "out of memory");
        int ty = t->type[i];
        bool lookup =
            t->kind == TK_SPM || ty == TK_T_NORMAL || ty == TK_T_UNDEFINED || ty == TK_T_BYTE;
        if (lookup &&
            tk__map_put(&t->by_bytes, t->kind == TK_SPM ? t->text : t->bytes,
                        t->kind == TK_SPM ? t->text_off : t->bytes_off, i, (size_t)t->n) < 0)
            return mw_errf(err, "out of memory");
    }
    for (int b = 0; b < 256; b++) {
        if (t->kind == TK_BPE) {
            char c = (char)b;
            t->byte_tok[b] = tk__map_get(&t->by_bytes, t->bytes, t->bytes_off, &c, 1);
        } else {
            char h[8];
            snprintf(h, sizeof h, "<0x%02X>", b);
            t->byte_tok[b] = tk__map_get(&t->by_text, t->text, t->text_off, h, 6);
        }
    }
    size_t ns = 0;
    for (int32_t i = 0; i < t->n; i++)
        ns += is_special_type(t->type[i]) && t->text_off[i + 1] > t->text_off[i];
    t->special = malloc((ns ? ns : 1) * sizeof *t->special);
    if (!t->special) return mw_errf(err, "out of memory");
    len_id *order = malloc((ns ? ns : 1) * sizeof *order);
    if (!order) return mw_errf(err, "out of memory");
    for (int32_t i = 0; i < t->n; i++)
        if (is_special_type(t->type[i]) && t->text_off[i + 1] > t->text_off[i])
            order[t->n_special++] = (len_id){t->text_off[i + 1] - t->text_off[i], i};
    qsort(order, t->n_special, sizeof *order, by_len_desc);
    for (size_t i = 0; i < t->n_special; i++) t->special[i] = order[i].id;
    free(order);
    return 0;
}

int tk__ready(tk_tokenizer *t, const char *what, mw_err *err) {
    if (t->kind == TK_BPE && !t->re)
        return mw_errf(err, "%s: byte-level BPE tokenizer without a pre-tokenizer", what);
    if (t->kind == TK_BPE && !t->tiktoken && t->merges.n == 0)
        return mw_errf(err, "%s: byte-level BPE tokenizer (pre-tokenizer '%s') without merges",
                       what, t->pre);
    const int32_t ids[] = {t->bos, t->eos, t->unk};
    for (size_t i = 0; i < 3; i++)
        if (ids[i] >= t->n)
            return mw_errf(err, "%s: special token id %d is out of range (%d tokens)", what, ids[i],
                           t->n);
    if (t->add_bos && t->bos < 0)
        return mw_errf(err, "%s: the model asks for a BOS token but declares none", what);
    return 0;
}

int tk__add_merge(tk_tokenizer *t, const char *l, size_t ll, const char *r, size_t rl,
                  uint32_t rank, mw_err *err) {
    /* called after tk__finish: texts are packed and the maps built */
    int32_t a = tk__map_get(&t->by_text, t->text, t->text_off, l, ll);
    int32_t b = tk__map_get(&t->by_text, t->text, t->text_off, r, rl);
    if (a < 0 || b < 0) return 0;
    size_t la, lb;
    const char *ba = tk__bytes(t, a, &la), *bb = tk__bytes(t, b, &lb);
    char buf[2 * TK_MAX_TOKEN_LEN];
    memcpy(buf, ba, la);
    memcpy(buf + la, bb, lb);
    int32_t m =
        t->kind == TK_BPE ? tk__map_get(&t->by_bytes, t->bytes, t->bytes_off, buf, la + lb) : -1;
    if (m < 0) return 0;
    if (tk__pairs_put(&t->merges, (uint32_t)a, (uint32_t)b, rank, (uint32_t)m) < 0)
        return mw_errf(err, "out of memory");
    return 0;
}

void tk_free(tk_tokenizer *t) {
    if (!t) return;
    if (!t->text_off) free_pending((pending *)t->text, t->n), t->text = NULL;
    free(t->text);
    free(t->text_off);
    free(t->bytes);
    free(t->bytes_off);
    free(t->type);
    free(t->score);
    tk__map_free(&t->by_bytes);
    tk__map_free(&t->by_text);
    tk__pairs_free(&t->merges);
    free(t->special);
    free(t->eog);
    for (size_t i = 0; i < t->n_re; i++) pcre2_code_free(t->re[i]);
    free(t->re);
    free(t->pre);
    free(t->arch);
    free(t->chat_template);
    free(t);
}

/* ---- accessors ----------------------------------------------------------------------------- */

int32_t tk_n_vocab(const tk_tokenizer *t) {
    return t->n;
}
const char *tk_model_type(const tk_tokenizer *t) {
    return t->model;
}
const char *tk_pre_type(const tk_tokenizer *t) {
    return t->pre;
}
const char *tk_arch(const tk_tokenizer *t) {
    return t->arch;
}
const char *tk_chat_template_text(const tk_tokenizer *t) {
    return t->chat_template;
}
int32_t tk_bos(const tk_tokenizer *t) {
    return t->bos;
}
int32_t tk_eos(const tk_tokenizer *t) {
    return t->eos;
}
bool tk_add_bos(const tk_tokenizer *t) {
    return t->add_bos;
}

int32_t tk_find(const tk_tokenizer *t, const char *s, size_t len) {
    return tk__map_get(&t->by_text, t->text, t->text_off, s, len);
}

bool tk_is_control(const tk_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n && (t->type[id] == TK_T_CONTROL || t->type[id] == TK_T_UNKNOWN);
}

bool tk_is_eog(const tk_tokenizer *t, int32_t id) {
    for (size_t i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) return true;
    return false;
}

void tk_ids_free(tk_ids *ids) {
    free(ids->v);
    *ids = (tk_ids){0};
}

int tk_ids_push(tk_ids *ids, int32_t id) {
    if (ids->n == ids->cap && mw_grow((void **)&ids->v, &ids->cap, ids->n + 1, sizeof *ids->v))
        return -1;
    ids->v[ids->n++] = id;
    return 0;
}

void tk_text_free(tk_text *b) {
    free(b->s);
    *b = (tk_text){0};
}

int tk_text_add(tk_text *b, const void *p, size_t n) {
    if (b->n + n + 1 > b->cap && mw_grow((void **)&b->s, &b->cap, b->n + n + 1, 1)) return -1;
    if (n) memcpy(b->s + b->n, p, n);
    b->n += n;
    b->s[b->n] = '\0';
    return 0;
}
