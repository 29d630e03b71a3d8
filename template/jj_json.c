/* template/jj_json.c — JSON in and out: the render's context from jansson values, and the tojson
 * filter as transformers defines it (Python's json.dumps with ensure_ascii=False: its separators,
 * its indentation, its float text, non-ASCII kept as is). */
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/jj_internal.h"

#define MAX_JSON_DEPTH 256
#define MAX_JSON_KEYS  4096

jj__val jj__from_json(jj__rt *r, const json_t *j, int depth) {
    if (depth > MAX_JSON_DEPTH) jj__rfail(r, "the context is nested too deeply");
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        /* dict lookups are linear: an object as large as a hostile request could make would
         * make every lookup slow */
        if (json_object_size(j) > MAX_JSON_KEYS)
            jj__rfail(r, "an object in the context has more than %d keys", MAX_JSON_KEYS);
        jj__val d = jj__dict_new(r, json_object_size(j));
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)j, k, v) {
            jj__val key = jj__str(jj__strdup(r->e, k, strlen(k)), strlen(k));
            jj__dict_append(r, d.u.d, key, jj__from_json(r, v, depth + 1));
        }
        return d;
    }
    case JSON_ARRAY: {
        jj__val l = jj__list_new(r, json_array_size(j));
        for (size_t i = 0; i < json_array_size(j); i++)
            jj__list_push(r, l.u.l, jj__from_json(r, json_array_get(j, i), depth + 1));
        return l;
    }
    case JSON_STRING:
        return jj__str(jj__strdup(r->e, json_string_value(j), json_string_length(j)),
                       json_string_length(j));
    case JSON_INTEGER:
        return jj__int(json_integer_value(j));
    case JSON_REAL:
        return jj__float(json_real_value(j));
    case JSON_TRUE:
        return jj__bool(1);
    case JSON_FALSE:
        return jj__bool(0);
    default:
        return jj__none();
    }
}

static void json_str(jj__rt *r, jj__buf *b, const char *s, size_t n) {
    jj__buf_put(r->e, b, "\"", 1);
    size_t st = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        jj__buf_put(r->e, b, s + st, i - st);
        st = i + 1;
        switch (c) {
        case '"':
            jj__buf_puts(r->e, b, "\\\"");
            break;
        case '\\':
            jj__buf_puts(r->e, b, "\\\\");
            break;
        case '\n':
            jj__buf_puts(r->e, b, "\\n");
            break;
        case '\r':
            jj__buf_puts(r->e, b, "\\r");
            break;
        case '\t':
            jj__buf_puts(r->e, b, "\\t");
            break;
        case '\b':
            jj__buf_puts(r->e, b, "\\b");
            break;
        case '\f':
            jj__buf_puts(r->e, b, "\\f");
            break;
        default:
            jj__buf_printf(r->e, b, "\\u%04x", c);
        }
    }
    jj__buf_put(r->e, b, s + st, n - st);
    jj__buf_put(r->e, b, "\"", 1);
}

static void json_float(jj__rt *r, jj__buf *b, double f) {
    if (isnan(f)) {
        jj__buf_puts(r->e, b, "NaN");
    } else if (isinf(f)) {
        jj__buf_puts(r->e, b, f < 0 ? "-Infinity" : "Infinity");
    } else {
        char t[64];
        jj__fmt_float(t, sizeof t, f);
        jj__buf_puts(r->e, b, t);
    }
}

/* A dict key as json.dumps writes it: strings as they are, numbers and constants as text. */
static void json_key(jj__rt *r, jj__buf *b, jj__val k) {
    switch (k.t) {
    case JV_STR:
        json_str(r, b, k.u.s.p, k.u.s.n);
        return;
    case JV_BOOL:
        jj__buf_puts(r->e, b, k.u.b ? "\"true\"" : "\"false\"");
        return;
    case JV_NONE:
        jj__buf_puts(r->e, b, "\"null\"");
        return;
    case JV_INT:
        jj__buf_printf(r->e, b, "\"%" PRId64 "\"", k.u.i);
        return;
    case JV_FLOAT: {
        jj__buf t = {0};
        json_float(r, &t, k.u.f);
        json_str(r, b, t.p, t.n);
        return;
    }
    default:
        jj__rfail(r, "keys must be str, int, float, bool or None, not %s", jj__type_name(k));
    }
}

static void newline(jj__rt *r, jj__buf *b, const char *indent, int level) {
    jj__buf_put(r->e, b, "\n", 1);
    for (int i = 0; i < level; i++) jj__buf_puts(r->e, b, indent);
}

static int key_order(jj__rt *r, const jj__dict *d, size_t *order) {
    size_t n = d->n;
    for (size_t i = 0; i < n; i++) order[i] = i;
    for (size_t i = 1; i < n; i++) /* insertion sort: stable, dicts are small */
        for (size_t j = i; j > 0 && jj__cmp(r, d->k[order[j - 1]], d->k[order[j]]) > 0; j--) {
            size_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    return 0;
}

static void json_container(jj__rt *r, jj__buf *b, jj__val v, const char *indent,
                           const char *item_sep, const char *key_sep, bool sort_keys, int level) {
    bool list = v.t == JV_LIST;
    size_t n = list ? v.u.l->n : v.u.d->n;
    if (!n) {
        jj__buf_puts(r->e, b, list ? "[]" : "{}");
        return;
    }
    if (level > MAX_JSON_DEPTH) jj__rfail(r, "tojson: the value is nested too deeply");
    size_t *order = NULL;
    if (!list && sort_keys) {
        order = jj__alloc(r->e, n * sizeof *order);
        key_order(r, v.u.d, order);
    }
    jj__buf_put(r->e, b, list ? "[" : "{", 1);
    for (size_t i = 0; i < n; i++) {
        if (i) jj__buf_puts(r->e, b, item_sep);
        if (indent) newline(r, b, indent, level + 1);
        if (list) {
            jj__tojson(r, b, v.u.l->v[i], indent, item_sep, key_sep, sort_keys, level + 1);
        } else {
            size_t k = order ? order[i] : i;
            json_key(r, b, v.u.d->k[k]);
            jj__buf_puts(r->e, b, key_sep);
            jj__tojson(r, b, v.u.d->v[k], indent, item_sep, key_sep, sort_keys, level + 1);
        }
    }
    if (indent) newline(r, b, indent, level);
    jj__buf_put(r->e, b, list ? "]" : "}", 1);
}

void jj__tojson(jj__rt *r, jj__buf *b, jj__val v, const char *indent, const char *item_sep,
                const char *key_sep, bool sort_keys, int level) {
    jj__step(r);
    switch (v.t) {
    case JV_NONE:
        jj__buf_puts(r->e, b, "null");
        return;
    case JV_BOOL:
        jj__buf_puts(r->e, b, v.u.b ? "true" : "false");
        return;
    case JV_INT:
        jj__buf_printf(r->e, b, "%" PRId64, v.u.i);
        return;
    case JV_FLOAT:
        json_float(r, b, v.u.f);
        return;
    case JV_STR:
        json_str(r, b, v.u.s.p, v.u.s.n);
        return;
    case JV_LIST:
        if (v.flags & JF_GEN) break;
        json_container(r, b, v, indent, item_sep, key_sep, sort_keys, level);
        return;
    case JV_DICT:
        if (v.flags & (JF_NS | JF_LOOP)) break;
        json_container(r, b, v, indent, item_sep, key_sep, sort_keys, level);
        return;
    default:
        break;
    }
    jj__rfail(r, "Object of type %s is not JSON serializable", jj__type_name(v));
}
