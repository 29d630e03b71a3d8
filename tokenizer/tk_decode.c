/* tokenizer/tk_decode.c — ids to text, one token at a time, never splitting a character.
 *
 * A token's bytes may end inside a UTF-8 character (byte-level BPE and byte-fallback tokens do):
 * the stream holds such bytes until the character completes, so every chunk it hands out is valid
 * UTF-8 on its own. A byte that cannot start or continue a character is replaced by U+FFFD at
 * once; a character still incomplete when the stream finishes becomes U+FFFD then. */
#include <string.h>

#include "tokenizer/tk_internal.h"

#define REPLACEMENT "\xef\xbf\xbd"

int tk_piece(const tk_tokenizer *t, int32_t id, bool special, const char **bytes, size_t *len) {
    if (id < 0 || id >= t->n) return -1;
    if (!special && tk_is_control(t, id)) {
        *bytes = "";
        *len = 0;
        return 0;
    }
    *bytes = tk__bytes(t, id, len);
    return 0;
}

void tk_stream_init(tk_stream *s, const tk_tokenizer *t, unsigned flags) {
    *s = (tk_stream){.t = t, .flags = flags};
}

/* Whether byte c may follow the held bytes of a character (the second byte has narrower ranges
 * for some lead bytes: no overlongs, no surrogates, nothing above U+10FFFF). */
static bool continues(const tk_stream *s, unsigned char c) {
    if ((c & 0xc0) != 0x80) return false;
    if (s->n_held != 1) return true;
    unsigned char l = s->held[0];
    if (l == 0xe0) return c >= 0xa0;
    if (l == 0xed) return c <= 0x9f;
    if (l == 0xf0) return c >= 0x90;
    if (l == 0xf4) return c <= 0x8f;
    return true;
}

static int feed(tk_stream *s, const unsigned char *p, size_t n, tk_text *out) {
    size_t run = 0; /* start of the ASCII / complete run being copied */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = p[i];
        if (s->n_held) {
            if (continues(s, c)) {
                s->held[s->n_held++] = c;
                if (s->n_held == s->need) {
                    if (tk_text_add(out, s->held, (size_t)s->n_held)) return -1;
                    s->n_held = 0;
                }
                run = i + 1;
                continue;
            }
            /* the held character can never complete */
            if (tk_text_add(out, REPLACEMENT, 3)) return -1;
            s->n_held = 0;
            run = i;
        }
        if (c < 0x80) continue;
        int k = tk__utf8_len(c);
        if (tk_text_add(out, p + run, i - run)) return -1;
        if (k == 0) {
            if (tk_text_add(out, REPLACEMENT, 3)) return -1;
        } else {
            s->held[0] = c;
            s->n_held = 1;
            s->need = k;
        }
        run = i + 1;
    }
    if (!s->n_held && tk_text_add(out, p + run, n - run)) return -1;
    return 0;
}

int tk__stream_feed(tk_stream *s, const void *p, size_t n, tk_text *out) {
    return tk_text_add(out, "", 0) || feed(s, p, n, out) ? -1 : 0;
}

int tk_stream_push(tk_stream *s, int32_t id, tk_text *out, mw_err *err) {
    const char *b;
    size_t n;
    if (tk_piece(s->t, id, (s->flags & TK_SPECIAL) != 0, &b, &n))
        return mw_errf(err, "token id %d is out of range (the vocabulary has %d)", id, s->t->n);
    if (!s->started && s->t->kind == TK_SPM && s->t->add_space_prefix && n && b[0] == ' ' &&
        !tk_is_control(s->t, id))
        b++, n--;
    if (n || !tk_is_control(s->t, id)) s->started = true;
    return tk__stream_feed(s, b, n, out) ? mw_errf(err, "out of memory") : 0;
}

int tk_stream_finish(tk_stream *s, tk_text *out, mw_err *err) {
    int rc = 0;
    if (s->n_held && tk_text_add(out, REPLACEMENT, 3)) rc = mw_errf(err, "out of memory");
    s->n_held = 0;
    s->started = false;
    return rc;
}

int tk_decode(const tk_tokenizer *t, const int32_t *ids, size_t n, unsigned flags, tk_text *out,
              mw_err *err) {
    tk_stream s;
    tk_stream_init(&s, t, flags);
    for (size_t i = 0; i < n; i++)
        if (tk_stream_push(&s, ids[i], out, err)) return -1;
    return tk_stream_finish(&s, out, err);
}
