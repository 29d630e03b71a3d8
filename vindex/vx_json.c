/* vindex/vx_json.c — the structure scan in front of jansson. */
#include "vindex/vx_json.h"

#include <stdbool.h>
#include <stdint.h>

/* Every object or array, and every key or value, is found outside strings: items are bounded by
 * one per ',' ':' '[' '{' plus the root (an empty container is counted once too often, which
 * only errs on the safe side). */
typedef struct scan {
    int depth;
    size_t objects, arrays, items;
} scan;

static void scan_text(const char *text, size_t len, int max_depth, scan *s) {
    int depth = 0;
    bool in_str = false;
    s->depth = 0;
    s->objects = s->arrays = 0;
    s->items = 1;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (in_str) {
            if (c == '\\')
                i++; /* the escaped character cannot end the string */
            else if (c == '"')
                in_str = false;
            continue;
        }
        switch (c) {
        case '"':
            in_str = true;
            break;
        case '{':
        case '[':
            *(c == '{' ? &s->objects : &s->arrays) += 1;
            s->items++;
            if (++depth > s->depth) s->depth = depth;
            if (depth > max_depth) return; /* enough to refuse */
            break;
        case '}':
        case ']':
            depth--;
            break;
        case ',':
        case ':':
            s->items++;
            break;
        }
    }
}

json_t *vx_json_parse(const char *text, size_t len, const char *what, const vx_json_limits *lim,
                      mw_err *err) {
    enum { ALLOWANCE = 256 }; /* small documents may be dense */
    scan s;
    scan_text(text, len, lim->max_depth, &s);
    if (s.depth > lim->max_depth) {
        mw_errf(err, "%s: JSON nested deeper than %d levels", what, lim->max_depth);
        return NULL;
    }
    const struct {
        size_t n, per;
        const char *what;
    } counts[] = {{s.objects, lim->bytes_per_object, "objects"},
                  {s.arrays, lim->bytes_per_array, "arrays"},
                  {s.items, lim->bytes_per_item, "keys and values"}};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        if (counts[i].n > len / counts[i].per + ALLOWANCE) {
            mw_errf(err, "%s: too many JSON %s (%zu) for its size (%zu bytes)", what,
                    counts[i].what, counts[i].n, len);
            return NULL;
        }
    }
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        mw_errf(err, "%s: not valid JSON (%s at line %d, byte %d)", what, je.text, je.line,
                je.position);
    return root;
}
