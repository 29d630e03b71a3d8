/* tokenizer/tk_chat_parse.c — the generated side of a chat: what the user sees and what is
 * reasoning, split incrementally as tokens arrive.
 *
 * Harmony is parsed on token ids: <|start|> opens a header, <|channel|> names the channel,
 * <|message|> starts its text, <|end|> closes it; the final channel is content, analysis and
 * commentary are reasoning, header text is shown to no one. The thinking formats are parsed on the
 * decoded text: what lies between <think> and </think> is reasoning (a tag split across tokens is
 * held until it is complete). Text goes through one UTF-8-safe stream per destination. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tk_chat.h"
#include "tokenizer/tk_internal.h"

int tk__chat_parse_kind(const tk_chat *c);
const tk_tokenizer *tk__chat_tokenizer(const tk_chat *c);

enum { PLAIN, HARMONY, THINK };
enum { H_HEADER, H_CHANNEL, H_MESSAGE, H_BETWEEN };

struct tk_chat_parser {
    const tk_chat *c;
    const tk_tokenizer *t;
    int kind;
    tk_stream stream;
    /* harmony */
    int state;
    bool final;     /* the current message's channel is final */
    tk_text header; /* the channel name being read */
    int32_t start, channel, message, end, constrain;
    /* think tags */
    bool in_think, skip_nl;
    tk_text pending;
};

int tk_chat_parser_new(const tk_chat *c, const tk_chat_opts *o, tk_chat_parser **out, mw_err *err) {
    tk_chat_parser *p = calloc(1, sizeof *p);
    if (!p) return mw_errf(err, "out of memory");
    p->c = c;
    p->t = tk__chat_tokenizer(c);
    p->kind = tk__chat_parse_kind(c);
    tk_stream_init(&p->stream, p->t, 0);
    p->state = H_HEADER; /* the prompt ends with <|start|>assistant */
    p->start = tk_find(p->t, "<|start|>", 9);
    p->channel = tk_find(p->t, "<|channel|>", 11);
    p->message = tk_find(p->t, "<|message|>", 11);
    p->end = tk_find(p->t, "<|end|>", 7);
    p->constrain = tk_find(p->t, "<|constrain|>", 13);
    /* DeepSeek-R1's prompt opens the reasoning block itself */
    p->in_think = p->kind == THINK && !strcmp(tk_chat_name(c), "deepseek-r1") &&
                  (!o || o->add_generation_prompt);
    *out = p;
    return 0;
}

void tk_chat_parser_free(tk_chat_parser *p) {
    if (!p) return;
    tk_text_free(&p->header);
    tk_text_free(&p->pending);
    free(p);
}

static int add(tk_text *dst, const char *s, size_t n, mw_err *err) {
    return tk_text_add(dst, s, n) ? mw_errf(err, "out of memory") : 0;
}

/* Moves what can be told apart from pending into content / reasoning; keeps a tail that may be
 * the start of the tag looked for. */
static int think_scan(tk_chat_parser *p, tk_text *content, tk_text *reasoning, bool final,
                      mw_err *err) {
    for (;;) {
        const char *tag = p->in_think ? "</think>" : "<think>";
        size_t tl = strlen(tag), n = p->pending.n;
        char *s = p->pending.s;
        if (p->skip_nl) {
            size_t k = 0;
            while (k < n && s[k] == '\n') k++;
            memmove(s, s + k, n - k);
            n = p->pending.n -= k;
            if (n) p->skip_nl = false;
        }
        char *at = n ? memmem(s, n, tag, tl) : NULL;
        size_t upto = at ? (size_t)(at - s) : n;
        if (!at && !final) /* hold a tail that could still become the tag */
            for (size_t k = tl - 1; k > 0; k--)
                if (k <= n && !memcmp(s + n - k, tag, k)) {
                    upto = n - k;
                    break;
                }
        if (add(p->in_think ? reasoning : content, s, upto, err)) return -1;
        size_t used = at ? upto + tl : upto;
        memmove(s, s + used, n - used);
        p->pending.n = n - used;
        if (p->pending.s) p->pending.s[p->pending.n] = '\0';
        if (!at) return 0;
        p->in_think = !p->in_think;
        if (!p->in_think) p->skip_nl = true;
    }
}

int tk_chat_parser_push(tk_chat_parser *p, int32_t id, tk_text *content, tk_text *reasoning,
                        mw_err *err) {
    if (id < 0 || id >= tk_n_vocab(p->t))
        return mw_errf(err, "token id %d is out of range (the vocabulary has %d)", id,
                       tk_n_vocab(p->t));
    if (tk_chat_is_stop(p->c, id)) return 1;
    if (p->kind == HARMONY) {
        tk_text *dst = p->final ? content : reasoning;
        if (id == p->start && id >= 0) {
            p->state = H_HEADER;
            return 0;
        }
        if (id == p->channel && id >= 0) {
            p->state = H_CHANNEL;
            p->header.n = 0;
            return 0;
        }
        if (id == p->constrain && id >= 0) {
            if (p->state == H_CHANNEL) p->state = H_HEADER;
            return 0;
        }
        if (id == p->message && id >= 0) {
            /* the channel is the header's first word: "analysis", "commentary to=...", "final" */
            const char *h = p->header.s ? p->header.s : "";
            size_t k = strcspn(h, " <");
            p->final = k == 0 || (k == 5 && !strncmp(h, "final", 5));
            p->state = H_MESSAGE;
            tk_stream_init(&p->stream, p->t, 0);
            return 0;
        }
        if (id == p->end && id >= 0) {
            p->state = H_BETWEEN;
            return tk_stream_finish(&p->stream, dst, err);
        }
        if (p->state == H_MESSAGE) return tk_stream_push(&p->stream, id, dst, err);
        if (p->state == H_CHANNEL) {
            const char *b;
            size_t n;
            tk_piece(p->t, id, false, &b, &n);
            return add(&p->header, b, n, err);
        }
        return 0; /* header text (the role, "to=...") */
    }
    if (p->kind == PLAIN) return tk_stream_push(&p->stream, id, content, err);
    tk_text chunk = {0};
    int rc = tk_stream_push(&p->stream, id, &chunk, err);
    if (!rc && chunk.n) rc = add(&p->pending, chunk.s, chunk.n, err);
    if (!rc) rc = think_scan(p, content, reasoning, false, err);
    tk_text_free(&chunk);
    return rc;
}

int tk_chat_parser_finish(tk_chat_parser *p, tk_text *content, tk_text *reasoning, mw_err *err) {
    if (p->kind == HARMONY)
        return tk_stream_finish(&p->stream, p->final ? content : reasoning, err);
    if (p->kind == PLAIN) return tk_stream_finish(&p->stream, content, err);
    tk_text chunk = {0};
    int rc = tk_stream_finish(&p->stream, &chunk, err);
    if (!rc && chunk.n) rc = add(&p->pending, chunk.s, chunk.n, err);
    if (!rc) rc = think_scan(p, content, reasoning, true, err);
    tk_text_free(&chunk);
    return rc;
}
