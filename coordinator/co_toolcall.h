/* coordinator/co_toolcall.h — a chat's tool calls read out of its generated text, per chat format,
 * incrementally: the text that is not a call passes through as content as soon as it cannot be
 * the start of one; a call becomes an OpenAI tool call ({"id", "type": "function", "function":
 * {"name", "arguments"}}).
 *
 * Streamed as OpenAI streams them: once a call's head is read (its name, and the '{' its
 * arguments open with) it is a call, announced by a delta with its index, id, type and name and
 * empty arguments, and its arguments follow as deltas of the text as it arrives, up to where
 * their braces close (outside strings) or the call's closing marker stands. Its arguments are
 * then that text, as the model wrote it, whatever it holds (cut short at the end of the
 * generation, or not JSON: a stream cannot take back what it sent, and the whole response is
 * the same); text between the arguments and the closing marker other than the format's own
 * ("}" for Qwen3, a code fence for DeepSeek) is content. A call whose head is in another shape
 * (Qwen3's arguments as a string, keys in another order) is read whole when it closes, then
 * given in two deltas; one that is then not well formed (arguments not a JSON object, no name,
 * unclosed at the end) is given back as content, never dropped.
 *
 * The formats (the chat format is a fact of the model's family, tokenizer/tk_chat.h; each one
 * that carries calls is declared here, any other is refused with tools):
 *   qwen3        <tool_call>\n{"name": NAME, "arguments": {...}}\n</tool_call>
 *   deepseek-v3
 * <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...} deepseek-r1
 * \n```<｜tool▁call▁end｜><｜tool▁calls▁end｜> (V3.1's NAME<｜tool▁sep｜>{...} read too) kimi-k2
 * <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX
 *                <|tool_call_argument_begin|>{...}<|tool_call_end|><|tool_calls_section_end|>
 *                (the id is functions.NAME:IDX, as Kimi's template renders it back)
 *   harmony      <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>
 *                (<|call|> is a stop token: the generation's end closes the call too; the
 *                harmony parser writes any call's header in this one shape)
 *   kimi-k3      <|open|>tools<|sep|><|open|>call tool="NAME" index="N"<|sep|> then
 *                <|open|>json type="object"<|sep|>{...}<|close|>json<|sep|> or argument sections
 *                <|open|>argument key="K" type="T"<|sep|>VALUE<|close|>argument<|sep|>, then
 *                <|close|>call<|sep|> ... <|close|>tools<|sep|> (the K3 parser writes a tools
 *                section as text; argument sections are read whole when the call closes)
 *
 * The text read is the content with the format's special tokens written as their text (the
 * server's text side renders them for a request with tools, co_toolcall_specials): the markers
 * are matched on text so that one reader serves a vocabulary that has them as tokens and one
 * that spells them (a fixture's), and so that a forced call's grammar, which works on bytes,
 * writes the same text. */
#ifndef CO_TOOLCALL_H
#define CO_TOOLCALL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "coordinator/co_buf.h"

typedef struct co_toolcall co_toolcall;

/* Whether the chat format's tool calls can be read (and a call forced: co_toolcall_forced). */
bool co_toolcall_known(const char *chat_name);
/* The format's special tokens, as text, that a forced call writes (a constrained vocabulary
 * gives them their text; NULL when none or unknown; the list ends with NULL). */
const char *const *co_toolcall_specials(const char *chat_name);
/* Whether the text side keeps those tokens as their text in a request's content (not harmony's,
 * whose parser writes a call's text itself, tokenizer/tk_chat_parse.c). */
bool co_toolcall_keeps_specials(const char *chat_name);
/* Whether a forced call is written inside the answer the prompt opens (thinking off); harmony's
 * is a message of its own on the commentary channel, after the prompt's <|start|>assistant. */
bool co_toolcall_in_answer(const char *chat_name);
/* Whether a function's name can be forced: [A-Za-z0-9_-]{1,64} (so that every format's call
 * text stays unambiguous). */
bool co_toolcall_name_ok(const char *name);
/* The literal text before and after a forced call's arguments for the tool `name` (which must
 * match [A-Za-z0-9_-]{1,64}), written into before / after (cap bytes each). -1: an unknown
 * format, a name that cannot be forced, or too long. */
int co_toolcall_forced(const char *chat_name, const char *name, char *before, char *after,
                       size_t cap);

/* NULL when out of memory or the format is not known. id_seed makes the calls' ids. */
co_toolcall *co_toolcall_new(const char *chat_name, unsigned long long id_seed);
void co_toolcall_free(co_toolcall *p);
/* Feeds generated content; appends plain content to text, each call completed to calls (a JSON
 * array) and, deltas non-NULL, the delta.tool_calls items of what arrived ({"index", "id",
 * "type", "function": {"name", "arguments": ""}} first, then {"index", "function":
 * {"arguments": TEXT}}). -1: out of memory. */
int co_toolcall_feed(co_toolcall *p, const char *s, size_t n, co_buf *text, json_t *calls,
                     json_t *deltas);
/* The end of the generation: whatever is held goes to text (an unannounced unclosed call
 * included, except in a format whose calls end with the generation); an announced call ends. */
int co_toolcall_finish(co_toolcall *p, co_buf *text, json_t *calls, json_t *deltas);

#endif
