/* coordinator/co_toolcall.h — a chat's tool calls read out of its generated text, per chat format
 * (Qwen3's <tool_call>{"name": ..., "arguments": ...}</tool_call>), incrementally: the text that
 * is not a call passes through as content as soon as it cannot be the start of one; a call
 * becomes an OpenAI tool call ({"id", "type": "function", "function": {"name", "arguments"}})
 * when it closes. A call that is not well formed (not JSON, no name, unclosed at the end) is
 * given back as content, never dropped. */
#ifndef CO_TOOLCALL_H
#define CO_TOOLCALL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "coordinator/co_buf.h"

typedef struct co_toolcall co_toolcall;

/* Whether the chat format's tool calls can be read (and a call forced: co_toolcall_markers). */
bool co_toolcall_known(const char *chat_name);
/* The literal text around a forced call's JSON ({"name", "arguments"}) in that format. */
void co_toolcall_markers(const char *chat_name, const char **before, const char **after);

/* NULL when out of memory or the format is not known. id_seed makes the calls' ids. */
co_toolcall *co_toolcall_new(const char *chat_name, unsigned long long id_seed);
void co_toolcall_free(co_toolcall *p);
/* Feeds generated content; appends plain content to text and each call completed to calls (a
 * JSON array). -1: out of memory. */
int co_toolcall_feed(co_toolcall *p, const char *s, size_t n, co_buf *text, json_t *calls);
/* The end of the generation: whatever is held goes to text (an unclosed call included). */
int co_toolcall_finish(co_toolcall *p, co_buf *text, json_t *calls);

#endif
