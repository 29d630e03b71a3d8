/* coordinator/co_oai_format.h — the OpenAI request fields that constrain the output:
 * response_format (json_object, json_schema) and, beside it, what the schema compiler refuses.
 * Part of co_oai's parse; kept apart so that co_oai.c stays about the plain fields. */
#ifndef CO_OAI_FORMAT_H
#define CO_OAI_FORMAT_H

#include <jansson.h>
#include <stdbool.h>

#include "coordinator/co_oai_error.h"

/* tool_choice */
typedef enum co_oai_tool_choice {
    CO_TOOLS_AUTO = 0, /* the model may call a tool */
    CO_TOOLS_NONE,     /* it may not (the tools are not shown to it) */
    CO_TOOLS_REQUIRED, /* its output is a call of one of them */
    CO_TOOLS_NAMED,    /* its output is a call of the function named */
} co_oai_tool_choice;

/* What the output must be (response_format). */
typedef enum co_oai_format {
    CO_FORMAT_TEXT = 0,
    CO_FORMAT_JSON_OBJECT, /* any JSON object */
    CO_FORMAT_JSON_SCHEMA, /* a value the schema accepts */
} co_oai_format;

/* What a request constrains its output to, as parsed here; co_oai_req holds one (its fmt). */
typedef struct co_oai_fmt {
    co_oai_format format; /* response_format */
    char *schema;         /* owned: json_schema's schema as JSON text, else NULL */
    /* chat: tools */
    char *tools; /* owned: the tools list's JSON text, NULL: none */
    co_oai_tool_choice tool_choice;
    char *call_tools; /* owned: REQUIRED / NAMED: the tools the call may be of, a JSON list's text
                       * of [{"name", "parameters"}] (one when named) */
    bool parallel_tool_calls;
} co_oai_fmt;

/* The rest of the request these checks read: what goes with a constrained output or not. */
typedef struct co_oai_fmt_in {
    bool chat;       /* a chat request (tools are chat only) */
    int n;           /* choices asked */
    bool ignore_eos; /* the output would not end */
} co_oai_fmt_in;

/* response_format: text (or absent), {"type": "json_object"} (llama-server's "schema" beside it
 * makes it a json_schema), {"type": "json_schema", "json_schema": {"name": ..., "schema": {...},
 * "strict": ...}}. The schema is compiled here, so a feature the grammar does not support is a
 * 400 naming it; r->schema keeps its text for the jobs. */
int co__oai_response_format(json_t *root, const co_oai_fmt_in *in, co_oai_fmt *r, co_oai_error *e);

/* tools (a list of {"type": "function", "function": {"name", "description", "parameters"}}),
 * tool_choice ("auto", "none", "required", {"type": "function", "function": {"name": ...}}) and
 * parallel_tool_calls: chat only. With required or a named function the call's schema is built
 * and compiled here ({"name": the name (one of the names), "arguments": the parameters; with
 * several tools under required, any object}): a parameter schema the grammar cannot enforce is a
 * 400 naming the tool. */
int co__oai_tools(json_t *root, const co_oai_fmt_in *in, co_oai_fmt *r, co_oai_error *e);
/* Frees what r owns. */
void co__oai_fmt_free(co_oai_fmt *r);

#endif
