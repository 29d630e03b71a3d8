/* template/jj_value.c — values as Python sees them: construction, truth, equality (1 == 1.0 ==
 * True), ordering, iteration and length. Lists and dicts live in the render's arena; dicts keep
 * insertion order like Python's. */
#include <math.h>
#include <string.h>

#include "template/jj_internal.h"

jj__val jj__undef(const char *hint) {
    jj__val v = {.t = JV_UNDEF};
    v.u.s.p = hint;
    v.u.s.n = hint ? strlen(hint) : 0;
    return v;
}
jj__val jj__none(void) {
    return (jj__val){.t = JV_NONE};
}
jj__val jj__bool(bool b) {
    return (jj__val){.t = JV_BOOL, .u.b = b};
}
jj__val jj__int(int64_t i) {
    return (jj__val){.t = JV_INT, .u.i = i};
}
jj__val jj__float(double f) {
    return (jj__val){.t = JV_FLOAT, .u.f = f};
}
jj__val jj__str(const char *p, size_t n) {
    jj__val v = {.t = JV_STR};
    v.u.s.p = p ? p : ""; /* an empty buffer has no storage yet */
    v.u.s.n = n;
    return v;
}
jj__val jj__cstr(const char *s) {
    return jj__str(s, strlen(s));
}

jj__val jj__list_new(jj__rt *r, size_t cap) {
    jj__list *l = jj__alloc(r->e, sizeof *l);
    if (cap) {
        if (cap > (size_t)1 << 28) jj__rfail(r, "list too long");
        l->v = jj__alloc(r->e, cap * sizeof *l->v);
        l->cap = cap;
    }
    return (jj__val){.t = JV_LIST, .u.l = l};
}

jj__val jj__dict_new(jj__rt *r, size_t cap) {
    jj__dict *d = jj__alloc(r->e, sizeof *d);
    if (cap) {
        if (cap > (size_t)1 << 28) jj__rfail(r, "dict too large");
        d->k = jj__alloc(r->e, cap * sizeof *d->k);
        d->v = jj__alloc(r->e, cap * sizeof *d->v);
        d->cap = cap;
    }
    return (jj__val){.t = JV_DICT, .u.d = d};
}

void jj__list_push(jj__rt *r, jj__list *l, jj__val v) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        jj__val *p = jj__alloc(r->e, cap * sizeof *p);
        if (l->n) memcpy(p, l->v, l->n * sizeof *p);
        l->v = p;
        l->cap = cap;
    }
    l->v[l->n++] = v;
}

static bool key_eq(jj__val a, jj__val b) {
    if (a.t == JV_STR && b.t == JV_STR)
        return a.u.s.n == b.u.s.n && !memcmp(a.u.s.p, b.u.s.p, a.u.s.n);
    return jj__eq(a, b);
}

jj__val *jj__dict_get(const jj__dict *d, jj__val k) {
    for (size_t i = 0; i < d->n; i++)
        if (key_eq(d->k[i], k)) return &d->v[i];
    return NULL;
}

jj__val *jj__dict_gets(const jj__dict *d, const char *key) {
    return jj__dict_get(d, jj__cstr(key));
}

void jj__dict_set(jj__rt *r, jj__dict *d, jj__val k, jj__val v) {
    jj__val *old = jj__dict_get(d, k);
    if (old) {
        *old = v;
        return;
    }
    jj__dict_append(r, d, k, v);
}

void jj__dict_append(jj__rt *r, jj__dict *d, jj__val k, jj__val v) {
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        jj__val *nk = jj__alloc(r->e, cap * sizeof *nk), *nv = jj__alloc(r->e, cap * sizeof *nv);
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof *nk);
            memcpy(nv, d->v, d->n * sizeof *nv);
        }
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n++] = v;
}

jj__val jj__fn_new(jj__rt *r, const char *name, jj__builtin fn, jj__val self) {
    jj__fn *f = jj__alloc(r->e, sizeof *f);
    f->name = name;
    f->fn = fn;
    f->self = self;
    return (jj__val){.t = JV_FN, .u.fn = f};
}

const char *jj__type_name(jj__val v) {
    switch (v.t) {
    case JV_UNDEF:
        return "Undefined";
    case JV_NONE:
        return "NoneType";
    case JV_BOOL:
        return "bool";
    case JV_INT:
        return "int";
    case JV_FLOAT:
        return "float";
    case JV_STR:
        return "str";
    case JV_LIST:
        return v.flags & JF_GEN ? "generator" : v.flags & JF_TUPLE ? "tuple" : "list";
    case JV_DICT:
        return v.flags & JF_NS ? "Namespace" : v.flags & JF_LOOP ? "LoopContext" : "dict";
    default:
        return "function";
    }
}

bool jj__truthy(jj__val v) {
    switch (v.t) {
    case JV_UNDEF:
    case JV_NONE:
        return false;
    case JV_BOOL:
        return v.u.b;
    case JV_INT:
        return v.u.i != 0;
    case JV_FLOAT:
        return v.u.f != 0;
    case JV_STR:
        return v.u.s.n != 0;
    case JV_LIST:
        return (v.flags & JF_GEN) || v.u.l->n != 0;
    case JV_DICT:
        return (v.flags & (JF_NS | JF_LOOP)) || v.u.d->n != 0;
    default:
        return true;
    }
}

bool jj__is_num(jj__val v) {
    return v.t == JV_BOOL || v.t == JV_INT || v.t == JV_FLOAT;
}

double jj__num(jj__val v) {
    return v.t == JV_FLOAT ? v.u.f : v.t == JV_INT ? (double)v.u.i : v.t == JV_BOOL ? v.u.b : 0;
}

static int64_t ival(jj__val v) {
    return v.t == JV_INT ? v.u.i : v.u.b;
}

static bool eq(jj__val a, jj__val b, int depth);

/* Values nested deeper than JJ__MAX_NEST compare unequal (the render cannot be stopped here). */
bool jj__eq(jj__val a, jj__val b) {
    return eq(a, b, 0);
}

static bool eq(jj__val a, jj__val b, int depth) {
    if (depth > JJ__MAX_NEST) return false;
    if (jj__is_num(a) && jj__is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT) return ival(a) == ival(b);
        return jj__num(a) == jj__num(b);
    }
    if (a.t != b.t) return false;
    switch (a.t) {
    case JV_UNDEF:
    case JV_NONE:
        return true;
    case JV_STR:
        return a.u.s.n == b.u.s.n && !memcmp(a.u.s.p, b.u.s.p, a.u.s.n);
    case JV_LIST:
        if ((a.flags & (JF_TUPLE | JF_GEN)) != (b.flags & (JF_TUPLE | JF_GEN))) return false;
        if (a.flags & JF_GEN) return a.u.l == b.u.l;
        if (a.u.l->n != b.u.l->n) return false;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!eq(a.u.l->v[i], b.u.l->v[i], depth + 1)) return false;
        return true;
    case JV_DICT:
        if ((a.flags | b.flags) & (JF_NS | JF_LOOP)) return a.u.d == b.u.d;
        if (a.u.d->n != b.u.d->n) return false;
        for (size_t i = 0; i < a.u.d->n; i++) {
            jj__val *o = jj__dict_get(b.u.d, a.u.d->k[i]);
            if (!o || !eq(a.u.d->v[i], *o, depth + 1)) return false;
        }
        return true;
    default:
        return a.u.fn == b.u.fn;
    }
}

static int cmp(jj__rt *r, jj__val a, jj__val b);

int jj__cmp(jj__rt *r, jj__val a, jj__val b) {
    jj__nest_in(r);
    int c = cmp(r, a, b);
    r->nest--;
    return c;
}

static int cmp(jj__rt *r, jj__val a, jj__val b) {
    if (jj__is_num(a) && jj__is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT) return (ival(a) > ival(b)) - (ival(a) < ival(b));
        double x = jj__num(a), y = jj__num(b);
        return (x > y) - (x < y);
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
        int c = n ? memcmp(a.u.s.p, b.u.s.p, n) : 0;
        if (c) return c < 0 ? -1 : 1;
        return (a.u.s.n > b.u.s.n) - (a.u.s.n < b.u.s.n);
    }
    if (a.t == JV_LIST && b.t == JV_LIST && !((a.flags | b.flags) & JF_GEN) &&
        (a.flags & JF_TUPLE) == (b.flags & JF_TUPLE)) {
        size_t n = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
        for (size_t i = 0; i < n; i++) {
            if (jj__eq(a.u.l->v[i], b.u.l->v[i])) continue;
            return jj__cmp(r, a.u.l->v[i], b.u.l->v[i]);
        }
        return (a.u.l->n > b.u.l->n) - (a.u.l->n < b.u.l->n);
    }
    if (a.t == JV_UNDEF || b.t == JV_UNDEF)
        jj__rfail(r, "%s",
                  a.t == JV_UNDEF && a.u.s.p   ? a.u.s.p
                  : b.t == JV_UNDEF && b.u.s.p ? b.u.s.p
                                               : "a value is undefined");
    jj__rfail(r, "'<' not supported between instances of '%s' and '%s'", jj__type_name(a),
              jj__type_name(b));
}

jj__list jj__iter(jj__rt *r, jj__val v) {
    switch (v.t) {
    case JV_UNDEF:
        return (jj__list){0};
    case JV_LIST:
        if (v.flags & JF_GEN) { /* iterating a generator consumes it, as in Python */
            if (!v.u.l->n) return (jj__list){0};
            jj__list rest = {.v = v.u.l->v + v.u.l->next, .n = v.u.l->n - v.u.l->next};
            v.u.l->next = v.u.l->n;
            return rest;
        }
        return *v.u.l;
    case JV_DICT:
        if (v.flags & (JF_NS | JF_LOOP)) break;
        return (jj__list){.v = v.u.d->k, .n = v.u.d->n, .cap = v.u.d->n};
    case JV_STR: {
        jj__list l = {0};
        const char *s = v.u.s.p;
        size_t i = 0;
        while (i < v.u.s.n) {
            size_t st = i;
            jj__u8_get(s, v.u.s.n, &i);
            jj__list_push(r, &l, jj__str(s + st, i - st));
        }
        return l;
    }
    default:
        break;
    }
    jj__rfail(r, "'%s' object is not iterable", jj__type_name(v));
}

int64_t jj__len(jj__rt *r, jj__val v) {
    switch (v.t) {
    case JV_UNDEF:
        return 0;
    case JV_STR:
        return (int64_t)jj__u8_len(v.u.s.p, v.u.s.n);
    case JV_LIST:
        if (v.flags & JF_GEN) break;
        return (int64_t)v.u.l->n;
    case JV_DICT:
        if (v.flags & (JF_NS | JF_LOOP)) break;
        return (int64_t)v.u.d->n;
    default:
        break;
    }
    jj__rfail(r, "object of type '%s' has no len()", jj__type_name(v));
}
