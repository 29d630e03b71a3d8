/* vindex/vx_json.h — untrusted JSON text (config.json, model.safetensors.index.json, safetensors
 * headers, tokenizer.json, message lists) parsed with jansson after a scan that bounds what
 * jansson would build.
 *
 * jansson builds the whole document before anything can be checked, and an empty object costs it
 * about 240 bytes of heap for 3 bytes of text ("{},"): a hostile 100 MB header would ask for
 * gigabytes. The scan counts the nesting depth, the objects, the arrays and the items (keys and
 * values) of the text, and refuses a document that needs more than its kind of file plausibly
 * does, so the memory jansson takes stays within about ten times the text size.
 *
 * Public: vindex's readers use it, and so does the code above vindex that reads JSON from a file
 * or a user (the tokenizer's tokenizer.json, tokenizer_config.json and OpenAI message lists);
 * each caller states the limits its kind of document plausibly needs. */
#ifndef VX_JSON_H
#define VX_JSON_H

#include <jansson.h>
#include <stddef.h>

#include "util/mw_err.h"

/* Beyond an allowance of 256 of each, a document may hold one object per bytes_per_object bytes
 * of text, one array per bytes_per_array and one key or value per bytes_per_item. */
typedef struct vx_json_limits {
    int max_depth; /* levels of nested objects and arrays */
    size_t bytes_per_object, bytes_per_array, bytes_per_item;
} vx_json_limits;

/* Parses text (len bytes; duplicate keys rejected) as the document `what` names (a path, for
 * messages); NULL with "WHAT: not valid JSON (...)", "WHAT: JSON nested deeper than N levels" or
 * "WHAT: too many JSON objects (N) for its size (L bytes)" (arrays, keys and values alike). */
json_t *vx_json_parse(const char *text, size_t len, const char *what, const vx_json_limits *lim,
                      mw_err *err);

#endif
