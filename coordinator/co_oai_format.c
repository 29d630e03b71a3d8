/* coordinator/co_oai_format.c — response_format checked and its schema compiled
 * (co_oai_format.h). */
#include "coordinator/co_oai_format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/co_toolcall.h"
#include "grammar/gr.h"

#define RF "response_format"

/* The schema compiled once to check it (the jobs compile their own from the text). */
static int take_schema(json_t *schema, const char *param, co_oai_fmt *r, co_oai_error *e) {
    if (!json_is_object(schema) && !json_is_true(schema))
        return co_oai_fail(e, 400, param, NULL, "'%s' must be a JSON schema (an object)", param);
    gr_grammar *g = NULL;
    mw_err err = {{0}};
    if (gr_compile(schema, &g, &err))
        return co_oai_fail(e, 400, param, NULL, "'%s' cannot be enforced: %s", param, err.msg);
    gr_free(g);
    r->schema = json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!r->schema) return co_oai_fail(e, 500, param, NULL, "out of memory");
    r->format = CO_FORMAT_JSON_SCHEMA;
    return 0;
}

int co__oai_response_format(json_t *root, const co_oai_fmt_in *in, co_oai_fmt *r, co_oai_error *e) {
    json_t *rf = json_object_get(root, RF);
    if (!rf || json_is_null(rf)) return 0;
    json_t *type = json_object_get(rf, "type");
    if (!json_is_object(rf) || !json_is_string(type))
        return co_oai_fail(e, 400, RF, NULL, "'" RF "' must be an object with a string 'type'");
    const char *t = json_string_value(type);
    if (!strcmp(t, "text")) return 0;
    if (in->n > 1)
        return co_oai_fail(e, 400, "n", NULL, "'n' above 1 cannot go with a JSON response_format");
    if (in->ignore_eos) /* the value complete, only an end token fits: it must end the output */
        return co_oai_fail(e, 400, "ignore_eos", NULL,
                           "'ignore_eos' cannot go with a JSON response_format");
    if (!strcmp(t, "json_object")) {
        json_t *schema = json_object_get(rf, "schema");
        if (schema && !json_is_null(schema)) return take_schema(schema, RF ".schema", r, e);
        r->format = CO_FORMAT_JSON_OBJECT;
        return 0;
    }
    if (strcmp(t, "json_schema"))
        return co_oai_fail(e, 400, RF, NULL,
                           "'" RF "' type '%.40s' is not supported (text, json_object or "
                           "json_schema)",
                           t);
    json_t *js = json_object_get(rf, "json_schema");
    if (!json_is_object(js))
        return co_oai_fail(e, 400, RF ".json_schema", NULL,
                           "'" RF ".json_schema' must be an object holding 'name' and 'schema'");
    json_t *name = json_object_get(js, "name"), *strict = json_object_get(js, "strict");
    if (name && !json_is_string(name))
        return co_oai_fail(e, 400, RF ".json_schema.name", NULL,
                           "'" RF ".json_schema.name' must be a string");
    if (strict && !json_is_null(strict) && !json_is_boolean(strict))
        return co_oai_fail(e, 400, RF ".json_schema.strict", NULL,
                           "'" RF ".json_schema.strict' must be a boolean");
    json_t *schema = json_object_get(js, "schema");
    if (!schema || json_is_null(schema)) /* OpenAI: no schema, any JSON object */
        return r->format = CO_FORMAT_JSON_OBJECT, 0;
    /* strict or not, the output is held to the schema: a schema is never half enforced */
    return take_schema(schema, RF ".json_schema.schema", r, e);
}

/* ---- tools ---------------------------------------------------------------------------------- */

#define MAX_TOOLS 128

/* tools[i] checked: a function with a name of [A-Za-z0-9_-] (1 to 64) and, when given, object
 * parameters. */
static int check_tool(json_t *t, size_t i, co_oai_error *e) {
    char param[48];
    snprintf(param, sizeof param, "tools[%zu]", i);
    json_t *type = json_object_get(t, "type"), *f = json_object_get(t, "function");
    if (!json_is_object(t) || !json_is_string(type) ||
        strcmp(json_string_value(type), "function") || !json_is_object(f))
        return co_oai_fail(e, 400, param, NULL,
                           "'%s' must be {\"type\": \"function\", \"function\": {...}}", param);
    json_t *name = json_object_get(f, "name"), *ps = json_object_get(f, "parameters");
    const char *n = json_is_string(name) ? json_string_value(name) : "";
    size_t len = strlen(n);
    bool ok = len > 0 && len <= 64;
    for (size_t k = 0; ok && k < len; k++)
        ok = (n[k] >= 'a' && n[k] <= 'z') || (n[k] >= 'A' && n[k] <= 'Z') ||
             (n[k] >= '0' && n[k] <= '9') || n[k] == '_' || n[k] == '-';
    if (!ok)
        return co_oai_fail(e, 400, param, NULL,
                           "'%s.function.name' must be 1 to 64 letters, digits, '_' or '-'", param);
    if (ps && !json_is_null(ps) && !json_is_object(ps))
        return co_oai_fail(e, 400, param, NULL, "'%s.function.parameters' must be an object",
                           param);
    return 0;
}

static json_t *tool_named(json_t *tools, const char *name, size_t *at) {
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *f = json_object_get(t, "function");
        if (!strcmp(json_string_value(json_object_get(f, "name")), name)) {
            *at = i;
            return f;
        }
    }
    return NULL;
}

/* The tools a forced call may be of: [{"name", "parameters"}], the named one or all. */
static json_t *call_tools(json_t *tools, json_t *one) {
    json_t *list = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *f = json_object_get(t, "function");
        if (one && f != one) continue;
        json_t *ps = json_object_get(f, "parameters");
        ps = json_is_object(ps) ? json_incref(ps) : json_pack("{s:s}", "type", "object");
        json_t *e = json_pack("{s:O, s:o}", "name", json_object_get(f, "name"), "parameters", ps);
        if (!list || !e || json_array_append_new(list, e)) {
            json_decref(list);
            return NULL;
        }
    }
    return list;
}

static int parse_choice(json_t *root, json_t *tools, co_oai_fmt *r, json_t **one, co_oai_error *e) {
    json_t *tc = json_object_get(root, "tool_choice");
    *one = NULL;
    r->tool_choice = CO_TOOLS_AUTO;
    if (!tc || json_is_null(tc)) return 0;
    const char *s = json_is_string(tc) ? json_string_value(tc) : NULL;
    if (s && !strcmp(s, "auto")) return 0;
    if (s && !strcmp(s, "none")) return r->tool_choice = CO_TOOLS_NONE, 0;
    if (s && !strcmp(s, "required")) return r->tool_choice = CO_TOOLS_REQUIRED, 0;
    json_t *f = json_object_get(tc, "function");
    json_t *name = json_object_get(f, "name");
    if (!json_is_object(tc) || !json_is_string(name))
        return co_oai_fail(e, 400, "tool_choice", NULL,
                           "'tool_choice' must be \"auto\", \"none\", \"required\" or "
                           "{\"type\": \"function\", \"function\": {\"name\": ...}}");
    size_t at;
    if (!(*one = tool_named(tools, json_string_value(name), &at)))
        return co_oai_fail(e, 400, "tool_choice", NULL,
                           "'tool_choice' names '%.64s', which is not one of the tools",
                           json_string_value(name));
    r->tool_choice = CO_TOOLS_NAMED;
    return 0;
}

int co__oai_tools(json_t *root, const co_oai_fmt_in *in, co_oai_fmt *r, co_oai_error *e) {
    r->parallel_tool_calls = true;
    json_t *tools = json_object_get(root, "tools");
    json_t *tc = json_object_get(root, "tool_choice");
    json_t *ptc = json_object_get(root, "parallel_tool_calls");
    if (ptc && !json_is_null(ptc) && !json_is_boolean(ptc))
        return co_oai_fail(e, 400, "parallel_tool_calls", NULL,
                           "'parallel_tool_calls' must be a boolean");
    if (json_is_boolean(ptc)) r->parallel_tool_calls = json_is_true(ptc);
    if (!tools || json_is_null(tools) || (json_is_array(tools) && !json_array_size(tools))) {
        if (tc && !json_is_null(tc) &&
            !(json_is_string(tc) &&
              (!strcmp(json_string_value(tc), "none") || !strcmp(json_string_value(tc), "auto"))))
            return co_oai_fail(e, 400, "tool_choice", NULL, "'tool_choice' needs 'tools'");
        return 0;
    }
    if (!in->chat) return co_oai_fail(e, 400, "tools", NULL, "'tools' is for chat completions");
    if (!json_is_array(tools) || json_array_size(tools) > MAX_TOOLS)
        return co_oai_fail(e, 400, "tools", NULL, "'tools' must be a list of at most %d tools",
                           MAX_TOOLS);
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) if (check_tool(t, i, e)) return -1;
    json_t *one;
    if (parse_choice(root, tools, r, &one, e)) return -1;
    if (r->format != CO_FORMAT_TEXT && r->tool_choice >= CO_TOOLS_REQUIRED)
        return co_oai_fail(e, 400, "tool_choice", NULL,
                           "a required tool call and a response_format cannot both hold");
    if (r->tool_choice == CO_TOOLS_NONE) return 0; /* the tools are not shown */
    if (!(r->tools = json_dumps(tools, JSON_COMPACT)))
        return co_oai_fail(e, 500, "tools", NULL, "out of memory");
    if (r->tool_choice == CO_TOOLS_AUTO) return 0;
    if (in->n > 1)
        return co_oai_fail(e, 400, "n", NULL, "'n' above 1 cannot go with a required tool call");
    if (in->ignore_eos)
        return co_oai_fail(e, 400, "ignore_eos", NULL,
                           "'ignore_eos' cannot go with a required tool call");
    json_t *ct = call_tools(tools, one);
    if (!ct) return co_oai_fail(e, 500, "tools", NULL, "out of memory");
    if (json_array_size(ct) > GR_MAX_BRANCHES) {
        json_decref(ct);
        return co_oai_fail(e, 400, "tools", NULL,
                           "tool_choice required forces a call of one of at most %d tools",
                           GR_MAX_BRANCHES);
    }
    /* each tool's parameters must be enforceable, and its name writable in any call syntax */
    json_array_foreach(ct, i, t) {
        const char *name = json_string_value(json_object_get(t, "name"));
        gr_grammar *g = NULL;
        mw_err err = {{0}};
        const int rc = gr_compile(json_object_get(t, "parameters"), &g, &err);
        gr_free(g);
        if (!rc && !co_toolcall_name_ok(name))
            mw_errf(&err, "its name is not 1 to 64 letters, digits, '_' and '-'");
        if (err.msg[0]) {
            json_decref(ct);
            return co_oai_fail(e, 400, "tools", NULL,
                               "the call of tool %.64s cannot be enforced (tool_choice %s): %s",
                               name, r->tool_choice == CO_TOOLS_NAMED ? "named" : "required",
                               err.msg);
        }
    }
    r->call_tools = json_dumps(ct, JSON_COMPACT);
    json_decref(ct);
    return r->call_tools ? 0 : co_oai_fail(e, 500, "tools", NULL, "out of memory");
}

void co__oai_fmt_free(co_oai_fmt *r) {
    free(r->schema);
    free(r->tools);
    free(r->call_tools);
    r->schema = r->tools = r->call_tools = NULL;
}
