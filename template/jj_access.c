/* template/jj_access.c — attribute and item access with the sandbox's rules (attributes first,
 * then items; names starting with '_' and mutating methods are unsafe), and jinja2's attribute
 * paths ("a.b.0") as map, select and sort take them. */
#include <string.h>

#include "template/jj_internal.h"

static jj__val undef_fmt(jj__rt *r, const char *fmt, const char *a, size_t an, const char *b) {
    jj__buf h = {0};
    jj__buf_printf(r->e, &h, fmt, (int)(an > 80 ? 80 : an), a, b);
    return jj__undef(h.p);
}

static const char *const UNSAFE[] = {"append",
                                     "extend",
                                     "insert",
                                     "pop",
                                     "remove",
                                     "clear",
                                     "sort",
                                     "reverse",
                                     "update",
                                     "setdefault",
                                     "popitem",
                                     "add",
                                     "discard",
                                     "difference_update",
                                     "intersection_update",
                                     NULL};

jj__val jj__getattr(jj__rt *r, jj__val obj, const char *name, size_t n) {
    if (obj.t == JV_UNDEF) jj__rfail(r, "%s", obj.u.s.p ? obj.u.s.p : "a value is undefined");
    if (n && name[0] == '_')
        return undef_fmt(r, "access to attribute '%.*s' of '%s' object is unsafe.", name, n,
                         jj__type_name(obj));
    if (obj.t == JV_DICT && (obj.flags & (JF_NS | JF_LOOP))) {
        jj__val *v = jj__dict_get(obj.u.d, jj__str(name, n));
        if (v) return *v;
        return undef_fmt(r, "'%.*s' is undefined", name, n, "");
    }
    if (obj.t == JV_STR || obj.t == JV_LIST || obj.t == JV_DICT) {
        for (int k = 0; UNSAFE[k]; k++)
            if (obj.t != JV_STR && strlen(UNSAFE[k]) == n && !memcmp(UNSAFE[k], name, n))
                return undef_fmt(r, "access to attribute '%.*s' of '%s' object is unsafe.", name, n,
                                 jj__type_name(obj));
        bool found = false;
        jj__val m = jj__method(r, obj, name, n, &found);
        if (found) return m;
    }
    if (obj.t == JV_DICT) {
        jj__val *v = jj__dict_get(obj.u.d, jj__str(name, n));
        if (v) return *v;
    }
    jj__buf h = {0};
    jj__buf_printf(r->e, &h, "'%s object' has no attribute '%.*s'", jj__type_name(obj),
                   (int)(n > 80 ? 80 : n), name);
    return jj__undef(h.p);
}

bool jj__int_index(jj__val k, int64_t *i) {
    if (k.t == JV_INT)
        *i = k.u.i;
    else if (k.t == JV_BOOL)
        *i = k.u.b;
    else
        return false;
    return true;
}

jj__val jj__getitem(jj__rt *r, jj__val obj, jj__val key) {
    if (obj.t == JV_UNDEF) jj__rfail(r, "%s", obj.u.s.p ? obj.u.s.p : "a value is undefined");
    int64_t i;
    if (obj.t == JV_DICT && !(obj.flags & (JF_NS | JF_LOOP))) {
        if (key.t != JV_LIST && key.t != JV_DICT) {
            jj__val *v = jj__dict_get(obj.u.d, key);
            if (v) return *v;
        }
    } else if (obj.t == JV_LIST && !(obj.flags & (JF_GEN | JF_VIEW)) && jj__int_index(key, &i)) {
        int64_t n = (int64_t)obj.u.l->n;
        if (i < 0) i += n;
        if (i >= 0 && i < n) return obj.u.l->v[i];
        return jj__undef("list index out of range");
    } else if (obj.t == JV_STR && jj__int_index(key, &i)) {
        int64_t n = (int64_t)jj__u8_len(obj.u.s.p, obj.u.s.n);
        if (i < 0) i += n;
        if (i >= 0 && i < n) {
            size_t a = jj__u8_off(obj.u.s.p, obj.u.s.n, (size_t)i);
            size_t b = jj__u8_off(obj.u.s.p, obj.u.s.n, (size_t)i + 1);
            return jj__str(obj.u.s.p + a, b - a);
        }
        return jj__undef("string index out of range");
    }
    if (key.t == JV_STR && obj.t != JV_DICT) return jj__getattr(r, obj, key.u.s.p, key.u.s.n);
    if (key.t == JV_STR && obj.t == JV_DICT) {
        bool found = false;
        jj__val m = jj__method(r, obj, key.u.s.p, key.u.s.n, &found);
        if (found) return m;
    }
    return jj__undef("no such item");
}

/* jinja2's make_attrgetter: "a.b.0" looked up item by item */
jj__val jj__attr_path(jj__rt *r, jj__val v, jj__val path) {
    if (path.t == JV_INT) return jj__getitem(r, v, path);
    if (path.t != JV_STR) jj__rfail(r, "attribute must be a string or an integer");
    const char *p = path.u.s.p, *end = p + path.u.s.n;
    while (p <= end) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        if (!dot) dot = end;
        size_t k = (size_t)(dot - p);
        bool digits = k > 0;
        int64_t num = 0;
        for (size_t i = 0; i < k; i++) {
            if (p[i] < '0' || p[i] > '9' || num > 100000000)
                digits = false;
            else
                num = num * 10 + (p[i] - '0');
        }
        v = jj__getitem(r, v, digits ? jj__int(num) : jj__str(p, k));
        p = dot + 1;
    }
    return v;
}
