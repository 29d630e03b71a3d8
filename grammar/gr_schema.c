/* grammar/gr_schema.c — a JSON schema compiled to the automaton's nodes (gr.h says what a schema
 * may use); every keyword is either handled, an annotation, or refused by name. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gr_internal.h"

#define MAX_NODES 4096 /* a schema's nodes: bounds the work a request's schema can ask */
#define MAX_NEST  64   /* schema nesting while compiling */

typedef struct ref_memo {
    const char *name;
    int node;
} ref_memo;

typedef struct comp {
    gr_grammar *g;
    const json_t *root;
    ref_memo refs[256];
    int n_refs;
    int nest;
    const json_t *pattern_of; /* the schema whose pattern a string node took last */
    mw_err *err;
} comp;

static void set_byte(uint8_t *set, unsigned b) {
    set[b >> 3] |= (uint8_t)(1u << (b & 7));
}
static void set_range(uint8_t *set, unsigned lo, unsigned hi) {
    for (unsigned b = lo; b <= hi; b++) set_byte(set, b);
}

static int new_node(comp *c, gr_kind kind, const char *path) {
    gr_grammar *g = c->g;
    if (g->n == MAX_NODES)
        return mw_errf(c->err, "%s: the schema is too large (more than %d nodes)", path, MAX_NODES);
    if (g->n == g->cap) {
        int cap = g->cap ? g->cap * 2 : 16;
        gr_node *v = realloc(g->v, (size_t)cap * sizeof *v);
        if (!v) return mw_errf(c->err, "out of memory");
        g->v = v;
        g->cap = cap;
    }
    memset(&g->v[g->n], 0, sizeof g->v[g->n]);
    g->v[g->n].kind = kind;
    g->v[g->n].extra = -1;
    g->v[g->n].items = -1;
    g->v[g->n].max_items = UINT32_MAX;
    g->v[g->n].max_len = UINT32_MAX;
    return g->n++;
}

/* A literal's compact JSON text added to node k; -1 when memory runs out or k holds too many. */
static int add_literal(comp *c, int k, const json_t *v, const char *path) {
    gr_node *nd = &c->g->v[k];
    if (nd->n_lit == GR_MAX_PROPS)
        return mw_errf(c->err, "%s: more than %d values in an enum", path, GR_MAX_PROPS);
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!s) return mw_errf(c->err, "out of memory");
    char **lit = realloc(nd->lit, (size_t)(nd->n_lit + 1) * sizeof *lit);
    size_t *llen = lit ? realloc(nd->llen, (size_t)(nd->n_lit + 1) * sizeof *llen) : NULL;
    if (lit) nd->lit = lit;
    if (llen) nd->llen = llen;
    if (!lit || !llen) {
        free(s);
        return mw_errf(c->err, "out of memory");
    }
    nd->lit[nd->n_lit] = s;
    nd->llen[nd->n_lit++] = strlen(s);
    return 0;
}

static int literals(comp *c, const json_t *list, int n, const char *path) {
    const int k = new_node(c, GR_LITERALS, path);
    if (k < 0) return -1;
    for (int i = 0; i < n; i++)
        if (add_literal(c, k, json_array_get(list, (size_t)i), path)) return -1;
    if (c->g->v[k].n_lit == 0) return mw_errf(c->err, "%s: an empty enum matches nothing", path);
    return k;
}

static int literal_text(comp *c, const char *a, const char *b, const char *path) {
    json_t *l = json_pack(b ? "[o, o]" : "[o]", json_loads(a, JSON_DECODE_ANY, NULL),
                          b ? json_loads(b, JSON_DECODE_ANY, NULL) : NULL);
    if (!l) return mw_errf(c->err, "out of memory");
    const int k = literals(c, l, (int)json_array_size(l), path);
    json_decref(l);
    return k;
}

static int compile(comp *c, const json_t *s, const char *path);

static const char *const annotations[] = {"title",    "description", "default",
                                          "examples", "$schema",     "$id",
                                          "$comment", "$defs",       "definitions"};
static const char *const handled[] = {"type",      "properties", "required", "additionalProperties",
                                      "items",     "minItems",   "maxItems", "enum",
                                      "const",     "anyOf",      "$ref",     "minLength",
                                      "maxLength", "pattern"};

static bool listed(const char *k, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(k, list[i])) return true;
    return false;
}

/* Every keyword of s handled or an annotation; else the error names it. */
static int check_keywords(comp *c, const json_t *s, const char *path) {
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)s, k, v) {
        if (listed(k, annotations, sizeof annotations / sizeof *annotations) ||
            listed(k, handled, sizeof handled / sizeof *handled))
            continue;
        return mw_errf(c->err, "%s/%s: the schema keyword '%s' is not supported", path, k, k);
    }
    return 0;
}

static int object_node(comp *c, const json_t *s, const char *path) {
    const json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    const json_t *add = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props))
        return mw_errf(c->err, "%s/properties: must be an object", path);
    if (req && !json_is_array(req)) return mw_errf(c->err, "%s/required: must be a list", path);
    if (add && !json_is_boolean(add) && !json_is_object(add))
        return mw_errf(c->err, "%s/additionalProperties: must be a boolean or a schema", path);
    const size_t np = json_object_size(props);
    if (np > GR_MAX_PROPS)
        return mw_errf(c->err, "%s/properties: more than %d properties", path, GR_MAX_PROPS);
    const int k = new_node(c, GR_OBJECT, path);
    if (k < 0) return -1;
    char sub[512];
    if (np == 0) {
        int extra = -1;
        if (!add || json_is_true(add)) extra = c->g->any;
        if (json_is_object(add)) {
            snprintf(sub, sizeof sub, "%s/additionalProperties", path);
            if ((extra = compile(c, add, sub)) < 0) return -1;
        }
        c->g->v[k].extra = extra;
    } else {
        char **pname = calloc(np, sizeof *pname);
        size_t *plen = calloc(np, sizeof *plen);
        int *pval = calloc(np, sizeof *pval);
        gr_node *nd = &c->g->v[k];
        nd->pname = pname, nd->plen = plen, nd->pval = pval;
        if (!pname || !plen || !pval) return mw_errf(c->err, "out of memory");
        const char *name;
        const json_t *ps;
        json_object_foreach((json_t *)props, name, ps) {
            json_t *js = json_string(name);
            char *q = js ? json_dumps(js, JSON_ENCODE_ANY) : NULL;
            json_decref(js);
            if (!q) return mw_errf(c->err, "out of memory");
            const size_t ql = strlen(q);
            memmove(q, q + 1, ql - 2);
            q[ql - 2] = '\0';
            const int i = c->g->v[k].n_props++;
            c->g->v[k].pname[i] = q;
            c->g->v[k].plen[i] = ql - 2;
            snprintf(sub, sizeof sub, "%s/properties/%s", path, name);
            const int vi = compile(c, ps, sub);
            if (vi < 0) return -1;
            c->g->v[k].pval[i] = vi;
        }
    }
    size_t i;
    const json_t *r;
    json_array_foreach((json_t *)req, i, r) {
        /* jansson iterates an object in insertion order: the order the properties got above */
        int idx = 0, found = -1;
        const char *name;
        const json_t *ps;
        json_object_foreach((json_t *)props, name, ps) {
            if (json_is_string(r) && !strcmp(name, json_string_value(r))) found = idx;
            idx++;
        }
        if (found < 0)
            return mw_errf(c->err, "%s/required/%zu: not one of the properties", path, i);
        c->g->v[k].required |= 1ull << found;
    }
    return k;
}

static int array_node(comp *c, const json_t *s, const char *path) {
    const json_t *items = json_object_get(s, "items");
    const json_t *mn = json_object_get(s, "minItems"), *mx = json_object_get(s, "maxItems");
    if ((mn && (!json_is_integer(mn) || json_integer_value(mn) < 0)) ||
        (mx && (!json_is_integer(mx) || json_integer_value(mx) < 0)))
        return mw_errf(c->err, "%s: minItems and maxItems must be integers >= 0", path);
    if (items && !json_is_object(items) && !json_is_true(items))
        return mw_errf(c->err, "%s/items: must be a schema (tuples are not supported)", path);
    int it = c->g->any;
    if (json_is_object(items)) {
        char sub[512];
        snprintf(sub, sizeof sub, "%s/items", path);
        if ((it = compile(c, items, sub)) < 0) return -1;
    }
    const int k = new_node(c, GR_ARRAY, path);
    if (k < 0) return -1;
    gr_node *nd = &c->g->v[k];
    nd->items = it;
    if (mn)
        nd->min_items =
            json_integer_value(mn) > UINT32_MAX ? UINT32_MAX : (uint32_t)json_integer_value(mn);
    if (mx)
        nd->max_items =
            json_integer_value(mx) > UINT32_MAX ? UINT32_MAX : (uint32_t)json_integer_value(mx);
    if (nd->min_items > nd->max_items)
        return mw_errf(c->err, "%s: minItems is above maxItems", path);
    return k;
}

/* A string, with its length bounds and pattern when the schema gives them. */
static int string_node(comp *c, const json_t *s, const char *path) {
    const json_t *mn = json_object_get(s, "minLength"), *mx = json_object_get(s, "maxLength");
    const json_t *pat = json_object_get(s, "pattern");
    if (!mn && !mx && !pat) return c->g->string;
    gr_regex *re = NULL;
    if (pat) {
        char why[200];
        if (!json_is_string(pat)) return mw_errf(c->err, "%s/pattern: must be a string", path);
        if (gr_regex_compile(json_string_value(pat), json_string_length(pat), &re, why, sizeof why))
            return mw_errf(c->err, "%s/pattern: %s", path, why);
        c->pattern_of = s;
        /* a pattern that must end may be unable to reach minLength: not generated together */
        if (mn) {
            free(re);
            return mw_errf(c->err, "%s/minLength: beside a pattern it is not supported", path);
        }
    }
    if ((mn && (!json_is_integer(mn) || json_integer_value(mn) < 0)) ||
        (mx && (!json_is_integer(mx) || json_integer_value(mx) < 0)))
        return mw_errf(c->err, "%s: minLength and maxLength must be integers >= 0", path);
    const int k = new_node(c, GR_STRING, path);
    if (k < 0) {
        free(re);
        return -1;
    }
    gr_node *nd = &c->g->v[k];
    nd->re = re;
    if (mn) nd->min_len = json_integer_value(mn) > 65536 ? 65536 : (uint32_t)json_integer_value(mn);
    if (mx)
        nd->max_len =
            json_integer_value(mx) > UINT32_MAX ? UINT32_MAX : (uint32_t)json_integer_value(mx);
    if (nd->min_len > nd->max_len) return mw_errf(c->err, "%s: minLength is above maxLength", path);
    return k;
}

static int type_node(comp *c, const json_t *s, const char *t, const char *path) {
    if (!strcmp(t, "object")) return object_node(c, s, path);
    if (!strcmp(t, "array")) return array_node(c, s, path);
    if (!strcmp(t, "string")) return string_node(c, s, path);
    if (!strcmp(t, "number")) return new_node(c, GR_NUMBER, path);
    if (!strcmp(t, "integer")) return new_node(c, GR_INTEGER, path);
    if (!strcmp(t, "boolean")) return literal_text(c, "true", "false", path);
    if (!strcmp(t, "null")) return literal_text(c, "null", NULL, path);
    return mw_errf(c->err, "%s/type: unknown type '%.40s'", path, t);
}

static int anyof_node(comp *c, const json_t *alts, const json_t *types, const json_t *s,
                      const char *path) {
    const json_t *list = alts ? alts : types;
    const size_t n = json_array_size(list);
    if (n == 0 || n > GR_MAX_PROPS)
        return mw_errf(c->err, "%s/%s: must list 1 to %d alternatives", path,
                       alts ? "anyOf" : "type", GR_MAX_PROPS);
    const int k = new_node(c, GR_ANYOF, path);
    if (k < 0) return -1;
    int *alt = calloc(n, sizeof *alt);
    if (!alt) return mw_errf(c->err, "out of memory");
    c->g->v[k].alt = alt;
    for (size_t i = 0; i < n; i++) {
        char sub[512];
        snprintf(sub, sizeof sub, "%s/%s/%zu", path, alts ? "anyOf" : "type", i);
        const json_t *a = json_array_get(list, i);
        int ai;
        if (alts)
            ai = compile(c, a, sub);
        else if (json_is_string(a))
            ai = type_node(c, s, json_string_value(a), sub);
        else
            ai = mw_errf(c->err, "%s: a type must be a string", sub);
        if (ai < 0) return -1;
        c->g->v[k].alt[c->g->v[k].n_alt++] = ai;
    }
    return k;
}

static int ref_node(comp *c, const char *ref, const char *path) {
    const char *name = NULL;
    const json_t *defs = NULL;
    if (!strncmp(ref, "#/$defs/", 8)) {
        name = ref + 8;
        defs = json_object_get(c->root, "$defs");
    } else if (!strncmp(ref, "#/definitions/", 14)) {
        name = ref + 14;
        defs = json_object_get(c->root, "definitions");
    }
    const json_t *target = name ? json_object_get(defs, name) : NULL;
    if (!name && !strcmp(ref, "#")) target = c->root;
    if (!target)
        return mw_errf(c->err, "%s/$ref: '%.80s' is not '#' or a '#/$defs/NAME' of the schema",
                       path, ref);
    for (int i = 0; i < c->n_refs; i++)
        if (!strcmp(c->refs[i].name, ref)) return c->refs[i].node;
    if (c->n_refs == (int)(sizeof c->refs / sizeof *c->refs))
        return mw_errf(c->err, "%s/$ref: too many definitions", path);
    const int k = new_node(c, GR_REF, path);
    if (k < 0) return -1;
    c->refs[c->n_refs++] = (ref_memo){ref, k};
    const int body = compile(c, target, ref);
    if (body < 0) return -1;
    if (body == k) return mw_errf(c->err, "%s/$ref: '%.80s' refers to itself only", path, ref);
    /* A body that is another reference still being compiled (a $ref whose target is only a
     * $ref) is that reference's placeholder: k forwards to it, and the placeholder is left for
     * its own reference to fill. Otherwise the placeholder becomes the body (so recursive
     * references reach it) and the body's slot forwards to it. */
    const bool alias = c->g->v[body].kind == GR_REF;
    if (!alias) c->g->v[k] = c->g->v[body];
    gr_node *b = &c->g->v[alias ? k : body];
    memset(b, 0, sizeof *b);
    b->kind = GR_ANYOF;
    b->alt = malloc(sizeof *b->alt);
    if (!b->alt) return mw_errf(c->err, "out of memory");
    b->alt[0] = alias ? body : k;
    b->n_alt = 1;
    b->extra = b->items = -1;
    return k;
}

static int compile(comp *c, const json_t *s, const char *path) {
    if (json_is_true(s)) return c->g->any;
    if (!json_is_object(s)) return mw_errf(c->err, "%s: a schema must be an object", path);
    if (++c->nest > MAX_NEST) return mw_errf(c->err, "%s: the schema nests too deep", path);
    int k = check_keywords(c, s, path);
    const json_t *type = json_object_get(s, "type"), *en = json_object_get(s, "enum");
    const json_t *cn = json_object_get(s, "const"), *any = json_object_get(s, "anyOf");
    const json_t *ref = json_object_get(s, "$ref");
    if (k < 0) {
    } else if (ref) {
        k = json_is_string(ref) ? ref_node(c, json_string_value(ref), path)
                                : mw_errf(c->err, "%s/$ref: must be a string", path);
    } else if (cn) {
        k = new_node(c, GR_LITERALS, path);
        if (k >= 0 && add_literal(c, k, cn, path)) k = -1;
    } else if (en) {
        k = json_is_array(en) ? literals(c, en, (int)json_array_size(en), path)
                              : mw_errf(c->err, "%s/enum: must be a list", path);
    } else if (any) {
        k = json_is_array(any) && !type ? anyof_node(c, any, NULL, s, path)
                                        : mw_errf(c->err,
                                                  "%s/anyOf: must be a list, without "
                                                  "'type' beside it",
                                                  path);
    } else if (json_is_array(type)) {
        k = anyof_node(c, NULL, type, s, path);
    } else if (json_is_string(type)) {
        k = type_node(c, s, json_string_value(type), path);
    } else if (type) {
        k = mw_errf(c->err, "%s/type: must be a string or a list of strings", path);
    } else if (json_object_get(s, "properties") || json_object_get(s, "additionalProperties")) {
        k = object_node(c, s, path);
    } else if (json_object_get(s, "items")) {
        k = array_node(c, s, path);
    } else {
        k = c->g->any;
    }
    if (k >= 0 && json_object_get(s, "pattern") && c->pattern_of != s)
        k = mw_errf(c->err,
                    "%s/pattern: a pattern is supported on a schema of type string only (not "
                    "beside enum, const, anyOf or $ref, nor with no type)",
                    path);
    c->nest--;
    return k;
}

/* ---- first bytes, and anyOf's alternatives told apart by them ------------------------------- */

static bool first_of(gr_grammar *g, int k) {
    gr_node *nd = &g->v[k];
    uint8_t set[32] = {0};
    switch (nd->kind) {
    case GR_ANY:
        set_byte(set, '{'), set_byte(set, '['), set_byte(set, '"'), set_byte(set, '-');
        set_range(set, '0', '9');
        set_byte(set, 't'), set_byte(set, 'f'), set_byte(set, 'n');
        break;
    case GR_OBJECT:
        set_byte(set, '{');
        break;
    case GR_ARRAY:
        set_byte(set, '[');
        break;
    case GR_STRING:
        set_byte(set, '"');
        break;
    case GR_NUMBER:
    case GR_INTEGER:
        set_byte(set, '-');
        set_range(set, '0', '9');
        break;
    case GR_LITERALS:
        for (int i = 0; i < nd->n_lit; i++) set_byte(set, (uint8_t)nd->lit[i][0]);
        break;
    case GR_ANYOF:
        for (int i = 0; i < nd->n_alt; i++)
            for (int b = 0; b < 32; b++) set[b] |= g->v[nd->alt[i]].first[b];
        break;
    case GR_REF:
        break;
    }
    bool changed = memcmp(set, nd->first, 32) != 0;
    memcpy(nd->first, set, 32);
    return changed;
}

static int check_anyof(gr_grammar *g, mw_err *err) {
    for (int k = 0; k < g->n; k++) {
        const gr_node *nd = &g->v[k];
        if (nd->kind != GR_ANYOF) continue;
        uint8_t seen[32] = {0};
        for (int i = 0; i < nd->n_alt; i++) {
            const uint8_t *f = g->v[nd->alt[i]].first;
            for (int b = 0; b < 32; b++)
                if (seen[b] & f[b])
                    return mw_errf(err,
                                   "anyOf (or a list of types): alternative %d starts like an "
                                   "earlier one (two objects, two arrays, a string and a string "
                                   "enum, ...); only alternatives of different JSON types are "
                                   "supported",
                                   i);
            for (int b = 0; b < 32; b++) seen[b] |= f[b];
        }
    }
    return 0;
}

/* ---- entry ---------------------------------------------------------------------------------- */

void gr_free(gr_grammar *g) {
    if (!g) return;
    for (int k = 0; k < g->n; k++) {
        gr_node *nd = &g->v[k];
        for (int i = 0; i < nd->n_props && nd->pname; i++) free(nd->pname[i]);
        for (int i = 0; i < nd->n_lit; i++) free(nd->lit[i]);
        free(nd->pname), free(nd->plen), free(nd->pval), free(nd->lit), free(nd->llen);
        free(nd->alt);
        free(nd->re);
    }
    free(g->v);
    free(g);
}

/* The shared nodes of "any value", then each alternative's value; first bytes settled. */
static int build(gr_grammar *g, const json_t *const *schemas, int n, mw_err *err) {
    comp c = {.g = g, .err = err};
    g->any = new_node(&c, GR_ANY, "");
    g->any_object = new_node(&c, GR_OBJECT, "");
    g->any_array = new_node(&c, GR_ARRAY, "");
    g->string = new_node(&c, GR_STRING, "");
    if (g->string < 0) return -1;
    g->v[g->any_object].extra = g->any;
    g->v[g->any_array].items = g->any;
    for (int i = 0; i < n; i++) {
        char path[32] = "";
        if (n > 1) snprintf(path, sizeof path, "[%d]", i);
        c.root = schemas[i];
        c.n_refs = 0; /* a schema's $refs are its own */
        g->root = schemas[i] ? compile(&c, schemas[i], path) : g->any_object;
        if (g->root < 0) return -1;
        g->br[i].root = g->root;
    }
    g->n_br = n;
    bool changed = true;
    for (int round = 0; changed && round <= g->n; round++) {
        changed = false;
        for (int k = 0; k < g->n; k++) changed |= first_of(g, k);
    }
    static const uint8_t none[32];
    for (int i = 0; i < n; i++)
        if (!memcmp(g->v[g->br[i].root].first, none, 32))
            return mw_errf(err, "the schema admits no value (references that lead only to each "
                                "other)");
    return check_anyof(g, err);
}

static int set_affix(gr_branch *b, const char *prefix, const char *suffix, mw_err *err) {
    const size_t pl = prefix ? strlen(prefix) : 0, sl = suffix ? strlen(suffix) : 0;
    if (pl > GR_MAX_AFFIX || sl > GR_MAX_AFFIX)
        return mw_errf(err, "a grammar's prefix or suffix over %d bytes", GR_MAX_AFFIX);
    memcpy(b->prefix, prefix ? prefix : "", pl + 1);
    memcpy(b->suffix, suffix ? suffix : "", sl + 1);
    b->plen = (uint16_t)pl;
    b->slen = (uint16_t)sl;
    return 0;
}

int gr_compile_alts(const json_t *const *schemas, const char *const *prefixes,
                    const char *const *suffixes, int n, gr_grammar **out, mw_err *err) {
    *out = NULL;
    if (n < 1 || n > GR_MAX_BRANCHES)
        return mw_errf(err, "1 to %d alternatives, not %d", GR_MAX_BRANCHES, n);
    gr_grammar *g = calloc(1, sizeof *g);
    if (!g) return mw_errf(err, "out of memory");
    int rc = 0;
    for (int i = 0; i < n && !rc; i++)
        rc =
            set_affix(&g->br[i], prefixes ? prefixes[i] : NULL, suffixes ? suffixes[i] : NULL, err);
    /* the prefix picks the alternative: none may begin another */
    for (int i = 0; i < n && !rc; i++)
        for (int j = 0; j < n && !rc; j++)
            if (i != j && g->br[i].plen <= g->br[j].plen &&
                !memcmp(g->br[i].prefix, g->br[j].prefix, g->br[i].plen))
                rc = mw_errf(err, "alternative %d's prefix begins alternative %d's", i, j);
    if (!rc) rc = build(g, schemas, n, err);
    if (rc) {
        gr_free(g);
        return -1;
    }
    *out = g;
    return 0;
}

int gr_compile(const json_t *schema, gr_grammar **out, mw_err *err) {
    return gr_compile_alts(&schema, NULL, NULL, 1, out, err);
}

int gr_compile_text(const char *schema, size_t len, gr_grammar **out, mw_err *err) {
    json_error_t je;
    json_t *s = json_loadb(schema, len, 0, &je);
    if (!s) {
        *out = NULL;
        return mw_errf(err, "the schema is not JSON (line %d: %s)", je.line, je.text);
    }
    const int rc = gr_compile(s, out, err);
    json_decref(s);
    return rc;
}
