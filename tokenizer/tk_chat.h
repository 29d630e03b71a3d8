/* tokenizer/tk_chat.h — chat templates: messages in, prompt tokens out; generated tokens in,
 * visible text and reasoning out.
 *
 * The formats moewire knows are rendered by code, not by a Jinja engine: harmony (gpt-oss:
 * system / developer / user / assistant, channels final / analysis / commentary), ChatML (and
 * Qwen3's variant with its thinking switch), DeepSeek-V3 (and R1's thinking variant), Kimi-K2 and
 * Kimi K3 (tagged sections: thinking, response, tool declarations, calls and results).
 * The format is chosen by name (--chat-template), else by recognising the model's
 * tokenizer.chat_template text, else by the model's family when its vocabulary has the format's
 * special tokens; anything else is an error that names what was found. Message text is encoded
 * without special-token parsing, so a user cannot inject control tokens. */
#ifndef TK_CHAT_H
#define TK_CHAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tk.h"
#include "util/mw_err.h"

/* A tool call an assistant message made (the formats with tool sections render it: Kimi K3). */
typedef struct tk_tool_call {
    const char *id;        /* the call's id, or NULL */
    const char *name;      /* the function's name */
    const char *arguments; /* a JSON object's text when args_object, else the text as given */
    bool args_object;
} tk_tool_call;

typedef struct tk_msg {
    const char *role;         /* "system", "developer", "user", "assistant", "tool" */
    const char *content;      /* UTF-8; NULL = "" */
    const char *channel;      /* harmony: the assistant message's channel (NULL = "final") */
    const char *reasoning;    /* an assistant message's reasoning (analysis / <think>), or NULL */
    const char *name;         /* the author's name; a tool message's tool (NULL: none) */
    const char *tool_call_id; /* a tool message: the call it answers, or NULL */
    const tk_tool_call *tool_calls; /* an assistant message's calls */
    size_t n_tool_calls;
} tk_msg;

/* A list of messages owning its strings (from an OpenAI-style JSON message list). */
typedef struct tk_msgs {
    tk_msg *v;
    size_t n;
    char **owned;
    size_t n_owned;
} tk_msgs;

/* Parses an OpenAI message list ([{"role": ..., "content": "..." | [{"type": "text", "text":
 * ...}], "reasoning_content": ..., "name": ..., "tool_call_id": ..., "tool_calls": [{"id": ...,
 * "function": {"name": ..., "arguments": "..." | {...}}}]}, ...] or {"messages": [...]}). */
int tk_msgs_parse(const char *json, size_t len, tk_msgs *out, mw_err *err);
/* The same from a list (or {"messages": [...]}) already parsed with jansson (a server request). */
struct json_t;
int tk_msgs_from_json(const struct json_t *list, tk_msgs *out, mw_err *err);
/* Appends one message (strings copied). */
int tk_msgs_add(tk_msgs *m, const char *role, const char *content, mw_err *err);
void tk_msgs_free(tk_msgs *m);

typedef struct tk_chat tk_chat;

/* Chooses the chat format for tokenizer t: `name` when given (one of tk_chat_names), else the
 * model's template as recognised, else its family's format when the vocabulary holds that
 * format's tokens. The tokenizer must outlive the chat. */
int tk_chat_open(const tk_tokenizer *t, const char *name, tk_chat **out, mw_err *err);
void tk_chat_free(tk_chat *c);
const char *tk_chat_name(const tk_chat *c);
/* "harmony, chatml, qwen3, deepseek-v3, deepseek-r1, kimi-k2, kimi-k3" */
const char *tk_chat_known(void);
/* The chat_template_kwargs name of the boolean that turns the family's thinking on or off in its
 * own template (Qwen3's enable_thinking, Kimi K3's thinking), NULL when the family has none. */
const char *tk_chat_thinking_kwarg(const tk_chat *c);
/* The special tokens the format needs that the vocabulary lacks (their text is then encoded as
 * plain text), comma-separated; "" when none are missing. */
const char *tk_chat_missing(const tk_chat *c);

typedef struct tk_chat_opts {
    bool add_generation_prompt;   /* open the assistant's turn at the end */
    int thinking;                 /* qwen3, kimi-k3: -1 the model's default (on), 0 off, 1 on */
    const char *reasoning_effort; /* harmony: "low", "medium" (NULL), "high"; Kimi K3's
                                     thinking_effort: "low", "high", "max" (NULL) */
    const char *tools;            /* the tools the model may call: a JSON array's text, or NULL */
    const char *date;             /* harmony: "YYYY-MM-DD" (NULL = today, UTC) */
    /* The generation prompt opens the answer itself, with no reasoning before it (thinking off,
     * harmony's final channel opened, R1's block closed): the output is held to a format from
     * its first token. */
    bool answer_open;
} tk_chat_opts;

/* Appends the prompt for msgs[0..n) to out. Unknown roles are errors. */
int tk_chat_render(const tk_chat *c, const tk_msg *msgs, size_t n, const tk_chat_opts *o,
                   tk_ids *out, mw_err *err);
/* Whether generating id ends the assistant's turn: the format's stop tokens (harmony <|return|>
 * and <|call|>, ChatML <|im_end|>, ...) and the model's end-of-generation tokens. */
bool tk_chat_is_stop(const tk_chat *c, int32_t id);

/* Splits generated tokens into what the user sees (content) and the reasoning: harmony's final
 * channel and commentary preambles (no recipient) are content, analysis and tool calls are
 * reasoning, text with no header is content; <think>...</think> is reasoning for the formats
 * that think. Incremental: each push appends complete UTF-8 only. */
typedef struct tk_chat_parser tk_chat_parser;
/* o must be what the prompt was rendered with (whether thinking was opened in the prompt). */
int tk_chat_parser_new(const tk_chat *c, const tk_chat_opts *o, tk_chat_parser **out, mw_err *err);
void tk_chat_parser_free(tk_chat_parser *p);
/* Feeds one generated token. Returns 1 when it is a stop token (nothing appended), 0 otherwise,
 * -1 with err (an id out of range). */
int tk_chat_parser_push(tk_chat_parser *p, int32_t id, tk_text *content, tk_text *reasoning,
                        mw_err *err);
/* Flushes held text at the end of generation, after a stop token too (harmony text still held
 * as a possible header is shown then). */
int tk_chat_parser_finish(tk_chat_parser *p, tk_text *content, tk_text *reasoning, mw_err *err);

#endif
