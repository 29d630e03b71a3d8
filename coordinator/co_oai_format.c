/* coordinator/co_oai_format.c — response_format checked and its schema compiled
 * (co_oai_format.h). */
#include "coordinator/co_oai_format.h"

#include <stdlib.h>
#include <string.h>

#include "grammar/gr.h"

#define RF "response_format"

/* The schema compiled once to check it (the jobs compile their own from the text). */
static int take_schema(json_t *schema, const char *param, co_oai_req *r, co_oai_error *e) {
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

int co__oai_response_format(json_t *root, co_oai_req *r, co_oai_error *e) {
    json_t *rf = json_object_get(root, RF);
    if (!rf || json_is_null(rf)) return 0;
    json_t *type = json_object_get(rf, "type");
    if (!json_is_object(rf) || !json_is_string(type))
        return co_oai_fail(e, 400, RF, NULL, "'" RF "' must be an object with a string 'type'");
    const char *t = json_string_value(type);
    if (!strcmp(t, "text")) return 0;
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
