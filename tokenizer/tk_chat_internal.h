/* tokenizer/tk_chat_internal.h — what the chat files share: the prompt being built (special
 * tokens by id, message text gathered and encoded in one go without special-token parsing) and
 * the renderers and output parser kept in files of their own (Kimi K3's, tk_chat_k3.c). */
#ifndef TK_CHAT_INTERNAL_H
#define TK_CHAT_INTERNAL_H

#include "tokenizer/tk_chat.h"

typedef struct tk__pb {
    const tk_tokenizer *t;
    tk_ids *out;
    tk_text text; /* plain text not yet encoded */
    mw_err *err;
    int rc;
} tk__pb;

/* Encodes the text gathered so far. */
void tk__pb_flush(tk__pb *b);
/* Appends message text (n bytes). */
void tk__pb_txtn(tk__pb *b, const char *s, size_t n);
void tk__pb_txt(tk__pb *b, const char *s);
/* Appends a special token by its text (as plain text when the vocabulary lacks it). */
void tk__pb_special(tk__pb *b, const char *s);
int tk__pb_bad_role(tk__pb *b, const char *fmt, const char *role);

/* Kimi K3 (tk_chat_k3.c): the prompt, and the output parser's state and push. */
void tk__render_kimi_k3(tk__pb *b, const tk_msg *m, size_t n, const tk_chat_opts *o);

/* K3's output: <|open|>TAG ...<|sep|> opens a section, <|close|>TAG<|sep|> ends it; think is
 * reasoning, response is content, tool sections are reasoning, text outside any is content. With
 * tools (tk_chat_opts.tools) a tools section is content, its markers and tags written as text,
 * for the server's tool-call reader. */
#define TK__K3_DEPTH 16
typedef struct tk__k3_parse {
    int32_t open, close, sep;
    int32_t marker; /* -1, or the <|open|> / <|close|> id whose tag text is being read */
    tk_text tag;
    size_t depth;
    uint8_t stack[TK__K3_DEPTH]; /* the open sections' kinds, innermost last */
    bool tools;                  /* tools sections are content, markers and all */
} tk__k3_parse;
void tk__k3_parse_init(tk__k3_parse *k, const tk_tokenizer *t, const tk_chat_opts *o);
/* Feeds one token; *to_reasoning says where text of the current section goes, *text whether the
 * token is text to emit (0: a marker, nothing to emit); a tools section's marker text is
 * appended to raw (the content) as it ends. */
int tk__k3_parse_push(tk__k3_parse *k, const tk_tokenizer *t, int32_t id, bool *text,
                      bool *to_reasoning, tk_text *raw, mw_err *err);
void tk__k3_parse_free(tk__k3_parse *k);

#endif
