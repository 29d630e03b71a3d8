/* template/jj_globals.c — the functions a template can call by name: jinja2's range, dict,
 * namespace, cycler and joiner, and transformers' raise_exception and strftime_now (the local
 * time, as transformers formats it). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "template/jj_internal.h"

#define MAX_RANGE 100000 /* jinja2's sandbox refuses longer ranges */

static int64_t int_arg(jj__rt *r, jj__val v, const char *fn) {
    if (v.t == JV_INT) return v.u.i;
    if (v.t == JV_BOOL) return v.u.b;
    jj__rfail(r, "%s: '%s' object cannot be interpreted as an integer", fn, jj__type_name(v));
}

static jj__val g_range(jj__rt *r, jj__val self, jj__val *a, int n, const char **kwn, jj__val *kwv,
                       int nkw) {
    if (n < 1 || n > 3 || nkw) jj__rfail(r, "range expected 1 to 3 integer arguments");
    int64_t start = 0, stop, step = 1;
    if (n == 1) {
        stop = int_arg(r, a[0], "range");
    } else {
        start = int_arg(r, a[0], "range");
        stop = int_arg(r, a[1], "range");
        if (n == 3) step = int_arg(r, a[2], "range");
    }
    if (!step) jj__rfail(r, "range() arg 3 must not be zero");
    int64_t count = 0;
    if (step > 0 && stop > start) count = (stop - start - 1) / step + 1;
    if (step < 0 && stop < start) count = (start - stop - 1) / (-step) + 1;
    if (count > MAX_RANGE) jj__rfail(r, "range too big, maximum size for range is %d", MAX_RANGE);
    jj__val l = jj__list_new(r, (size_t)count);
    for (int64_t i = 0; i < count; i++) jj__list_push(r, l.u.l, jj__int(start + i * step));
    return l;
}

static jj__val g_dict(jj__rt *r, jj__val self, jj__val *a, int n, const char **kwn, jj__val *kwv,
                      int nkw) {
    jj__val d = jj__dict_new(r, (size_t)nkw);
    if (n > 1) jj__rfail(r, "dict expected at most 1 argument");
    if (n == 1 && a[0].t == JV_DICT)
        for (size_t i = 0; i < a[0].u.d->n; i++)
            jj__dict_set(r, d.u.d, a[0].u.d->k[i], a[0].u.d->v[i]);
    else if (n == 1) {
        jj__list l = jj__iter(r, a[0]);
        for (size_t i = 0; i < l.n; i++) {
            jj__list kv = jj__iter(r, l.v[i]);
            if (kv.n != 2) jj__rfail(r, "dictionary update sequence element has wrong length");
            jj__dict_set(r, d.u.d, kv.v[0], kv.v[1]);
        }
    }
    for (int k = 0; k < nkw; k++) jj__dict_set(r, d.u.d, jj__cstr(kwn[k]), kwv[k]);
    return d;
}

static jj__val g_namespace(jj__rt *r, jj__val self, jj__val *a, int n, const char **kwn,
                           jj__val *kwv, int nkw) {
    jj__val d = g_dict(r, self, a, n, kwn, kwv, nkw);
    d.flags = JF_NS;
    return d;
}

static jj__val g_raise(jj__rt *r, jj__val self, jj__val *a, int n, const char **kwn, jj__val *kwv,
                       int nkw) {
    jj__val m = n ? jj__to_str(r, a[0]) : jj__cstr("");
    jj__rfail(r, "raise_exception: %.*s", (int)(m.u.s.n > 300 ? 300 : m.u.s.n), m.u.s.p);
}

static jj__val g_strftime(jj__rt *r, jj__val self, jj__val *a, int n, const char **kwn,
                          jj__val *kwv, int nkw) {
    if (n != 1 || a[0].t != JV_STR) jj__rfail(r, "strftime_now expects one format string");
    char fmt[256], out[512];
    if (a[0].u.s.n >= sizeof fmt) jj__rfail(r, "strftime_now: format too long");
    memcpy(fmt, a[0].u.s.p, a[0].u.s.n);
    fmt[a[0].u.s.n] = '\0';
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    size_t k = strftime(out, sizeof out, fmt, &tm);
    return jj__str(jj__strdup(r->e, out, k), k);
}

static jj__val joiner_call(jj__rt *r, jj__val self, jj__val *a, int n, const char **kwn,
                           jj__val *kwv, int nkw) {
    jj__val *used = jj__dict_gets(self.u.d, "used");
    if (!used->u.b) {
        used->u.b = 1;
        return jj__str("", 0);
    }
    return *jj__dict_gets(self.u.d, "sep");
}

static jj__val g_joiner(jj__rt *r, jj__val self, jj__val *a, int n, const char **kwn, jj__val *kwv,
                        int nkw) {
    jj__val st = jj__dict_new(r, 2);
    jj__dict_set(r, st.u.d, jj__cstr("sep"), n ? jj__to_str(r, a[0]) : jj__cstr(", "));
    jj__dict_set(r, st.u.d, jj__cstr("used"), jj__bool(0));
    return jj__fn_new(r, "joiner", joiner_call, st);
}

void jj__add_globals(jj__rt *r, jj__scope *g) {
    static const struct {
        const char *name;
        jj__builtin fn;
    } G[] = {{"range", g_range},           {"dict", g_dict},
             {"namespace", g_namespace},   {"raise_exception", g_raise},
             {"strftime_now", g_strftime}, {"joiner", g_joiner}};
    for (size_t i = 0; i < sizeof G / sizeof G[0]; i++)
        jj__scope_set(r, g, G[i].name, jj__fn_new(r, G[i].name, G[i].fn, jj__none()));
}
