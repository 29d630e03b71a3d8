/* coordinator/co_toolcall_formats.h — the chat formats that carry tool calls, as the tool-call
 * reader's files see them: each one's markers, how a call's body holds its name and arguments,
 * and the text a forced call is written between. Not for other modules. */
#ifndef CO_TOOLCALL_FORMATS_H
#define CO_TOOLCALL_FORMATS_H

#include <stdbool.h>

#define CO__TC_MAX_DROP 4 /* a format's section markers left out of the text */

/* How a call's text between its markers holds the name and the arguments. */
typedef enum co__tc_body {
    CO__TC_JSON, /* {"name": ..., "arguments": ...} */
    CO__TC_DEEPSEEK, /* function<｜tool▁sep｜>NAME\n```json\nARGS\n``` or NAME<｜tool▁sep｜>ARGS */
    CO__TC_KIMI,    /* functions.NAME:IDX<|tool_call_argument_begin|>ARGS */
    CO__TC_HARMONY, /* NAME [<|constrain|>json]<|message|>ARGS */
    CO__TC_K3,      /* NAME" index="N"<|sep|> then a json section, or argument sections */
} co__tc_body;

typedef struct co__tc_format {
    const char *chat;
    const char *open, *close; /* around one call */
    /* a section's markers around the calls: left out of the text */
    const char *drop[CO__TC_MAX_DROP];
    co__tc_body body;
    const char *trailer; /* what may follow the arguments before close (whitespace around) */
    bool close_at_end;   /* the generation's end closes a call (its closing token is a stop) */
    bool parser_writes;  /* the chat parser writes a call's text (its tokens are its structure) */
    bool own_message;    /* a forced call is a message of its own, not in the opened answer */
    const char *specials[8];
    const char *forced_before, *forced_mid, *forced_after; /* before NAME mid ARGS after */
} co__tc_format;

#define DS_CALLS_BEGIN "<｜tool▁calls▁begin｜>"
#define DS_CALLS_END   "<｜tool▁calls▁end｜>"
#define DS_CALL_BEGIN  "<｜tool▁call▁begin｜>"
#define DS_CALL_END    "<｜tool▁call▁end｜>"
#define DS_SEP         "<｜tool▁sep｜>"

#define K3_OPEN  "<|open|>"
#define K3_CLOSE "<|close|>"
#define K3_SEP   "<|sep|>"

#define KIMI_SEC_BEGIN "<|tool_calls_section_begin|>"
#define KIMI_SEC_END   "<|tool_calls_section_end|>"
#define KIMI_BEGIN     "<|tool_call_begin|>"
#define KIMI_END       "<|tool_call_end|>"
#define KIMI_ARGS      "<|tool_call_argument_begin|>"

/* The format of a chat format's name; NULL when it carries no calls. */
const co__tc_format *co__tc_find(const char *chat);

#endif
