/* tokenizer/tk_encode.c — text to ids: special tokens first, then the model on the text between
 * them.
 *
 * Special tokens (user-defined ones always, control ones when asked) are found leftmost-longest
 * in the raw text, as Hugging Face matches added tokens; the fragments between them go through
 * the pre-tokenizer and BPE, or SentencePiece. The text must be valid UTF-8: the regexes run in
 * UTF mode, and a bad byte is the caller's error, named by its offset. */
#include <string.h>

#include "tokenizer/tk_internal.h"

/* The special token that starts at text[i], longest first; -1 when none. */
static int32_t special_at(const tk_tokenizer *t, const char *text, size_t len, size_t i,
                          bool control) {
    for (size_t k = 0; k < t->n_special; k++) {
        int32_t id = t->special[k];
        if (!control && t->type[id] != TK_T_USER) continue;
        size_t sl;
        const char *s = tk__text(t, id, &sl);
        if (sl <= len - i && s[0] == text[i] && !memcmp(s, text + i, sl)) return id;
    }
    return -1;
}

/* Text between special tokens (or the text's ends). SentencePiece puts its space prefix on every
 * such fragment: each one starts the text or follows a special token. */
static int fragment(const tk_tokenizer *t, tk__scratch *s, const char *p, size_t n, tk_ids *out,
                    mw_err *err) {
    if (n == 0) return 0;
    if (t->kind == TK_BPE) return tk__bpe_encode(t, s, p, n, out, err);
    return tk__spm_encode(t, s, p, n, t->add_space_prefix, out, err);
}

int tk_encode(const tk_tokenizer *t, const char *text, size_t len, unsigned flags, tk_ids *out,
              mw_err *err) {
    size_t ok = tk__utf8_valid_prefix(text, len);
    if (ok != len)
        return mw_errf(err, "the text is not valid UTF-8: byte 0x%02x at offset %zu",
                       (unsigned char)text[ok], ok);
    if ((flags & TK_ADD_BOS)) {
        if (t->bos < 0) return mw_errf(err, "the model has no BOS token to add");
        if (tk_ids_push(out, t->bos)) return mw_errf(err, "out of memory");
    }
    tk__scratch *s = tk__scratch_new();
    if (!s) return mw_errf(err, "out of memory");
    /* first bytes of the special tokens that may match, to skip most positions at once */
    bool first[256] = {false};
    bool control = (flags & TK_SPECIAL) != 0, any = false;
    for (size_t k = 0; k < t->n_special; k++) {
        int32_t id = t->special[k];
        if (!control && t->type[id] != TK_T_USER) continue;
        size_t sl;
        first[(unsigned char)tk__text(t, id, &sl)[0]] = any = true;
    }
    int rc = 0;
    size_t from = 0;
    for (size_t i = 0; any && i < len && rc == 0; i++) {
        if (!first[(unsigned char)text[i]]) continue;
        int32_t id = special_at(t, text, len, i, control);
        if (id < 0) continue;
        rc = fragment(t, s, text + from, i - from, out, err);
        if (rc == 0 && tk_ids_push(out, id)) rc = mw_errf(err, "out of memory");
        size_t sl;
        tk__text(t, id, &sl);
        from = i + sl;
        i = from - 1;
    }
    if (rc == 0) rc = fragment(t, s, text + from, len - from, out, err);
    tk__scratch_free(s);
    return rc;
}
