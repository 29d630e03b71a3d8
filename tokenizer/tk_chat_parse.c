/* tokenizer/tk_chat_parse.c — the generated side of a chat: what the user sees and what is
 * reasoning, split incrementally as tokens arrive.
 *
 * Harmony is parsed on token ids: <|start|> opens a header, <|channel|> names the channel,
 * <|message|> starts its text, <|end|> closes it; the final channel is content, and so is a
 * commentary preamble (no recipient); analysis and tool calls are reasoning; header text is shown
 * to no one. Output that is not in that shape is
 * shown rather than lost, as openai-harmony's non-strict parser keeps a message whose header never
 * ends: header text that cannot be the start of a header (a model that answers straight away with
 * text, a random-weight model) opens a message with no header, which is content, and so does a
 * header still unfinished when generation ends. With tools (tk_chat_opts.tools), a call of a
 * function (a commentary message to=functions.NAME) is content instead, written as the text
 * <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>ARGS<|call|> whatever
 * shape its header had, for the server's tool-call reader. The thinking formats are parsed on the
 * decoded text: what lies between <think> and </think> is reasoning (a tag split across tokens is
 * held until it is complete). Kimi K3's tagged sections are read on token ids (tk_chat_k3.c). Text
 * goes through one UTF-8-safe stream per destination. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tk_chat.h"
#include "tokenizer/tk_chat_internal.h"
#include "tokenizer/tk_internal.h"

int tk__chat_parse_kind(const tk_chat *c);
const tk_tokenizer *tk__chat_tokenizer(const tk_chat *c);

enum { PLAIN, HARMONY, THINK, K3 };
/* harmony: in a header before <|channel|>, after it, in a message's text */
enum { H_HEADER, H_CHANNEL, H_MESSAGE };
/* the longest header text: role, channel, recipient ("to=functions.NAME") and content type */
#define MAX_HEADER 256

struct tk_chat_parser {
    const tk_chat *c;
    const tk_tokenizer *t;
    int kind;
    tk_stream stream;
    /* harmony */
    int state;
    bool role_written; /* H_HEADER: the role is written already (the prompt's <|start|>assistant) */
    bool foreign;      /* the header names a role other than the assistant's */
    bool recipient;    /* the header names a recipient (" to=functions.f"): a tool call */
    bool final;        /* the current message is shown: final channel, or no header */
    tk_text head;      /* the header text since <|start|>, <|end|> or <|channel|> */
    bool tools;        /* function calls are content (the request has tools) */
    bool call;         /* the current message is such a call */
    char to[80];       /* the recipient named before <|channel|>, or "" */
    int32_t start, channel, message, end, constrain;
    /* think tags */
    bool in_think, skip_nl;
    tk_text pending;
    /* Kimi K3's sections; text goes through one stream per destination */
    tk__k3_parse k3;
    tk_stream k3_reasoning;
};

int tk_chat_parser_new(const tk_chat *c, const tk_chat_opts *o, tk_chat_parser **out, mw_err *err) {
    tk_chat_parser *p = calloc(1, sizeof *p);
    if (!p) return mw_errf(err, "out of memory");
    p->c = c;
    p->t = tk__chat_tokenizer(c);
    p->kind = tk__chat_parse_kind(c);
    tk_stream_init(&p->stream, p->t, 0);
    p->state = H_HEADER;
    /* the prompt ends with <|start|>assistant (or, without a generation prompt, an <|end|>) */
    p->role_written = !o || o->add_generation_prompt;
    p->tools = o && o->tools;
    p->start = tk_find(p->t, "<|start|>", 9);
    p->channel = tk_find(p->t, "<|channel|>", 11);
    p->message = tk_find(p->t, "<|message|>", 11);
    p->end = tk_find(p->t, "<|end|>", 7);
    p->constrain = tk_find(p->t, "<|constrain|>", 13);
    tk_chat_opts eff = o ? *o : (tk_chat_opts){.add_generation_prompt = true, .thinking = -1};
    if (eff.answer_open) eff.thinking = 0;
    tk__k3_parse_init(&p->k3, p->t, &eff);
    tk_stream_init(&p->k3_reasoning, p->t, 0);
    /* DeepSeek-R1's prompt opens the reasoning block itself */
    p->in_think = p->kind == THINK && !strcmp(tk_chat_name(c), "deepseek-r1") &&
                  (!o || o->add_generation_prompt) && !eff.answer_open;
    /* harmony's final channel opened by the prompt: the text is the answer from the start */
    if (eff.answer_open && eff.add_generation_prompt && p->kind == HARMONY) {
        p->state = H_MESSAGE;
        p->final = true;
    }
    *out = p;
    return 0;
}

void tk_chat_parser_free(tk_chat_parser *p) {
    if (!p) return;
    tk_text_free(&p->head);
    tk_text_free(&p->pending);
    tk__k3_parse_free(&p->k3);
    free(p);
}

static int add(tk_text *dst, const char *s, size_t n, mw_err *err) {
    return tk_text_add(dst, s, n) ? mw_errf(err, "out of memory") : 0;
}

/* Moves what can be told apart from pending into content / reasoning; keeps a tail that may be
 * the start of the tag looked for. */
static int think_scan(tk_chat_parser *p, tk_text *content, tk_text *reasoning, bool final,
                      mw_err *err) {
    if (!p->pending.n) return 0; /* nothing yet: a half character held by the decoder, a bare end */
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

/* ---- harmony ------------------------------------------------------------------------------ */

static bool printable(char c) {
    return c > ' ' && c < 0x7f;
}

/* Bytes of the word at the start of h[0..n): printable ASCII up to a space or '<'. */
static size_t word_len(const char *h, size_t n) {
    size_t k = 0;
    while (k < n && printable(h[k]) && h[k] != '<') k++;
    return k;
}

/* Whether the header text read so far could still be the start of a header. Before <|channel|>:
 * [ROLE] [to=RECIPIENT [TYPE]], the role only when the prompt has not written it; after it:
 * CHANNEL [to=RECIPIENT] [TYPE]. Words are printable ASCII, one space apart. */
static bool header_possible(const tk_chat_parser *p) {
    const char *h = p->head.s;
    size_t n = p->head.n, i = 0;
    if (n > MAX_HEADER) return false;
    if (p->state == H_CHANNEL || !p->role_written) { /* the channel's or the role's name */
        while (i < n && printable(h[i])) i++;
        if (i == 0 && n) return false;
    }
    for (int words = 1; i < n; words++) {
        if (h[i] != ' ' || words > 2) return false;
        size_t w = ++i;
        while (i < n && printable(h[i])) i++;
        if (i < n && (i == w || h[i] != ' ')) return false;
        /* before the channel the first word is a recipient: "to=..." (so far, or whole) */
        size_t len = i - w;
        if (p->state == H_HEADER && words == 1 &&
            (i < n ? len < 3 || memcmp(h + w, "to=", 3) : memcmp(h + w, "to=", len < 3 ? len : 3)))
            return false;
    }
    return true;
}

/* Whether the header before <|channel|> names a role other than the assistant's. */
static bool foreign_role(const tk_chat_parser *p) {
    size_t k = p->role_written ? 0 : word_len(p->head.s, p->head.n);
    return k && !(k == 9 && !memcmp(p->head.s, "assistant", 9));
}

/* Whether a word of h[0..n) is a recipient ("to=..."). */
static bool has_recipient(const char *h, size_t n) {
    for (size_t i = 0; i + 3 <= n; i++)
        if ((i == 0 || h[i - 1] == ' ') && !memcmp(h + i, "to=", 3)) return true;
    return false;
}

/* The function a header h[0..n) calls ("to=functions.NAME"), copied into out (cap bytes);
 * false when it calls none. */
static bool function_of(const char *h, size_t n, char *out, size_t cap) {
    for (size_t i = 0; i + 13 <= n; i++)
        if ((i == 0 || h[i - 1] == ' ') && !memcmp(h + i, "to=functions.", 13)) {
            const size_t k = word_len(h + i + 13, n - i - 13);
            if (!k || k >= cap) return false;
            memcpy(out, h + i + 13, k);
            out[k] = '\0';
            return true;
        }
    return false;
}

/* Whether the message whose header after <|channel|> is h[0..n) is shown: the final channel (or
 * none named), and commentary with no recipient (a preamble, which harmony means for the user);
 * analysis and tool calls are not. */
static bool shown_channel(const tk_chat_parser *p, const char *h, size_t n) {
    size_t k = word_len(h, n);
    if (p->foreign) return false;
    if (k == 0 || (k == 5 && !memcmp(h, "final", 5))) return true;
    return k == 10 && !memcmp(h, "commentary", 10) && !p->recipient && !has_recipient(h, n);
}

static tk_text *dest(tk_chat_parser *p, tk_text *content, tk_text *reasoning) {
    return p->final ? content : reasoning;
}

static void open_message(tk_chat_parser *p, bool final) {
    p->final = final;
    p->state = H_MESSAGE;
    p->head.n = 0;
    tk_stream_init(&p->stream, p->t, 0);
}

/* The header read so far is not one, or generation ended inside it: a message opens on the
 * channel it names (after <|channel|>) or with no header, and the rest of the header text (past
 * the channel's name, or an "assistant" role, and one space) is the message's first text. */
static int header_as_text(tk_chat_parser *p, tk_text *content, tk_text *reasoning, mw_err *err) {
    tk_text h = p->head;
    size_t skip = 0;
    bool final = true;
    if (p->state == H_CHANNEL) {
        skip = word_len(h.s, h.n);
        final = shown_channel(p, h.s, h.n);
    } else if (!p->role_written && !foreign_role(p)) {
        skip = word_len(h.s, h.n);
    }
    if (skip < h.n && h.s[skip] == ' ') skip++;
    open_message(p, final);
    if (tk__stream_feed(&p->stream, h.s + skip, h.n - skip, dest(p, content, reasoning)))
        return mw_errf(err, "out of memory");
    return 0;
}

/* Ends the message or header under way (held header text is shown, see header_as_text). */
static int end_message(tk_chat_parser *p, tk_text *content, tk_text *reasoning, mw_err *err) {
    if (p->state != H_MESSAGE && p->head.n && header_as_text(p, content, reasoning, err)) return -1;
    if (p->state == H_MESSAGE && tk_stream_finish(&p->stream, dest(p, content, reasoning), err))
        return -1;
    if (p->call && add(content, "<|call|>", 8, err)) return -1;
    p->call = false;
    return 0;
}

static int harmony_push(tk_chat_parser *p, int32_t id, tk_text *content, tk_text *reasoning,
                        mw_err *err) {
    if (id == p->start || id == p->end) { /* a message ends; a header (with its role) follows */
        if (end_message(p, content, reasoning, err)) return -1;
        p->state = H_HEADER;
        p->role_written = false;
        p->foreign = p->recipient = false;
        p->to[0] = '\0';
        p->head.n = 0;
        return 0;
    }
    if (id == p->channel) {
        if (p->state == H_MESSAGE) {
            if (end_message(p, content, reasoning, err)) return -1;
            p->foreign = p->recipient = false;
            p->to[0] = '\0';
        } else if (p->state == H_HEADER) {
            p->foreign = foreign_role(p);
            p->recipient = has_recipient(p->head.s, p->head.n);
            if (!function_of(p->head.s, p->head.n, p->to, sizeof p->to)) p->to[0] = '\0';
        }
        p->state = H_CHANNEL;
        p->head.n = 0;
        return 0;
    }
    if (id == p->message) {
        bool final = true; /* a message with no header is shown */
        char fn[sizeof p->to] = "";
        if (p->state == H_MESSAGE) {
            if (tk_stream_finish(&p->stream, dest(p, content, reasoning), err)) return -1;
        } else if (p->state == H_CHANNEL) {
            /* the channel is the header's first word: "analysis", "commentary to=...", "final" */
            final = shown_channel(p, p->head.s, p->head.n);
            if (!p->foreign && !function_of(p->head.s, p->head.n, fn, sizeof fn))
                memcpy(fn, p->to, sizeof fn);
        } else {
            final = !foreign_role(p) && !has_recipient(p->head.s, p->head.n);
            if (!foreign_role(p)) function_of(p->head.s, p->head.n, fn, sizeof fn);
        }
        if (p->tools && fn[0]) { /* a function call: its text, for the tool-call reader */
            if (add(content, "<|channel|>commentary to=functions.", 35, err) ||
                add(content, fn, strlen(fn), err) ||
                add(content, " <|constrain|>json<|message|>", 29, err))
                return -1;
            open_message(p, true);
            p->call = true;
            return 0;
        }
        open_message(p, final);
        return 0;
    }
    if (id == p->constrain) return 0; /* the content type follows in the header */
    if (p->state == H_MESSAGE)
        return tk_stream_push(&p->stream, id, dest(p, content, reasoning), err);
    const char *b;
    size_t n;
    tk_piece(p->t, id, false, &b, &n);
    if (add(&p->head, b, n, err)) return -1;
    return header_possible(p) ? 0 : header_as_text(p, content, reasoning, err);
}

/* ---- every format ---------------------------------------------------------------------------- */

int tk_chat_parser_push(tk_chat_parser *p, int32_t id, tk_text *content, tk_text *reasoning,
                        mw_err *err) {
    if (id < 0 || id >= tk_n_vocab(p->t))
        return mw_errf(err, "token id %d is out of range (the vocabulary has %d)", id,
                       tk_n_vocab(p->t));
    if (tk_chat_is_stop(p->c, id)) return 1;
    if (p->kind == HARMONY) return harmony_push(p, id, content, reasoning, err);
    if (p->kind == PLAIN) return tk_stream_push(&p->stream, id, content, err);
    if (p->kind == K3) {
        bool text, to_reasoning;
        if (tk__k3_parse_push(&p->k3, p->t, id, &text, &to_reasoning, content, err)) return -1;
        if (!text) return 0;
        return to_reasoning ? tk_stream_push(&p->k3_reasoning, id, reasoning, err)
                            : tk_stream_push(&p->stream, id, content, err);
    }
    tk_text chunk = {0};
    int rc = tk_stream_push(&p->stream, id, &chunk, err);
    if (!rc && chunk.n) rc = add(&p->pending, chunk.s, chunk.n, err);
    if (!rc) rc = think_scan(p, content, reasoning, false, err);
    tk_text_free(&chunk);
    return rc;
}

int tk_chat_parser_finish(tk_chat_parser *p, tk_text *content, tk_text *reasoning, mw_err *err) {
    if (p->kind == HARMONY) return end_message(p, content, reasoning, err);
    if (p->kind == PLAIN) return tk_stream_finish(&p->stream, content, err);
    if (p->kind == K3)
        return tk_stream_finish(&p->stream, content, err) ||
                       tk_stream_finish(&p->k3_reasoning, reasoning, err)
                   ? -1
                   : 0;
    tk_text chunk = {0};
    int rc = tk_stream_finish(&p->stream, &chunk, err);
    if (!rc && chunk.n) rc = add(&p->pending, chunk.s, chunk.n, err);
    if (!rc) rc = think_scan(p, content, reasoning, true, err);
    tk_text_free(&chunk);
    return rc;
}
