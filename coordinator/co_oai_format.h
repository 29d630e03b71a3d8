/* coordinator/co_oai_format.h — the OpenAI request fields that constrain the output:
 * response_format (json_object, json_schema) and, beside it, what the schema compiler refuses.
 * Part of co_oai's parse; kept apart so that co_oai.c stays about the plain fields. */
#ifndef CO_OAI_FORMAT_H
#define CO_OAI_FORMAT_H

#include <jansson.h>

#include "coordinator/co_oai.h"

/* response_format: text (or absent), {"type": "json_object"} (llama-server's "schema" beside it
 * makes it a json_schema), {"type": "json_schema", "json_schema": {"name": ..., "schema": {...},
 * "strict": ...}}. The schema is compiled here, so a feature the grammar does not support is a
 * 400 naming it; r->schema keeps its text for the jobs. */
int co__oai_response_format(json_t *root, co_oai_req *r, co_oai_error *e);

/* tools (a list of {"type": "function", "function": {"name", "description", "parameters"}}),
 * tool_choice ("auto", "none", "required", {"type": "function", "function": {"name": ...}}) and
 * parallel_tool_calls: chat only. With required or a named function the call's schema is built
 * and compiled here ({"name": the name (one of the names), "arguments": the parameters; with
 * several tools under required, any object}): a parameter schema the grammar cannot enforce is a
 * 400 naming the tool. */
int co__oai_tools(json_t *root, co_oai_req *r, co_oai_error *e);

#endif
