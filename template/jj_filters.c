/* template/jj_filters.c — the filter table: a filter applied by name, and the filters that apply
 * other filters or tests by name (map, select / reject, selectattr / rejectattr); the filters
 * over single values and over sequences are in jj_filters_value.c and jj_filters_seq.c. */
#include <string.h>

#include "template/jj_internal.h"

static jj__val f_map(jj__rt *r, jj__val in, jj__val *a, int n, const char **kwn, jj__val *kwv,
                     int nkw) {
    jj__list l = jj__truthy(in) ? jj__iter(r, in) : (jj__list){0}; /* jinja2: "if value:" */
    jj__val out = jj__list_new(r, l.n);
    jj__val *attr = jj__arg(a, 0, kwn, kwv, nkw, -1, "attribute");
    jj__val *def = jj__arg(a, 0, kwn, kwv, nkw, -1, "default");
    if (!n && !attr) jj__rfail(r, "map requires a filter name or attribute");
    for (size_t i = 0; i < l.n; i++) {
        jj__step(r);
        jj__val v;
        if (attr) {
            v = jj__attr_path(r, l.v[i], *attr);
            if (v.t == JV_UNDEF && def) v = *def;
        } else {
            if (a[0].t != JV_STR) jj__rfail(r, "map: the filter name must be a string");
            v = jj__apply_filter(r, jj__strdup(r->e, a[0].u.s.p, a[0].u.s.n), l.v[i], a + 1, n - 1,
                                 kwn, kwv, nkw);
        }
        jj__list_push(r, out.u.l, v);
    }
    return jj__gen(out);
}

/* select / reject (attr false) and selectattr / rejectattr (attr true) */
static jj__val f_select(jj__rt *r, jj__val in, jj__val *a, int n, bool attr, bool keep) {
    jj__list l = jj__truthy(in) ? jj__iter(r, in) : (jj__list){0}; /* jinja2: "if value:" */
    jj__val out = jj__list_new(r, 0);
    int ti = attr ? 1 : 0;
    if (attr && n < 1) jj__rfail(r, "selectattr needs an attribute");
    const char *test = NULL;
    if (n > ti) {
        if (a[ti].t != JV_STR) jj__rfail(r, "the test name must be a string");
        test = jj__strdup(r->e, a[ti].u.s.p, a[ti].u.s.n);
    }
    for (size_t i = 0; i < l.n; i++) {
        jj__step(r);
        jj__val v = attr ? jj__attr_path(r, l.v[i], a[0]) : l.v[i];
        bool ok = test ? jj__apply_test(r, test, v, a + ti + 1, n - ti - 1) : jj__truthy(v);
        if (ok == keep) jj__list_push(r, out.u.l, l.v[i]);
    }
    return jj__gen(out);
}

jj__val jj__apply_filter(jj__rt *r, const char *name, jj__val in, jj__val *a, int n,
                         const char **kwn, jj__val *kwv, int nkw) {
    jj__step(r);
    bool done;
    jj__val v = jj__value_filter(r, name, in, a, n, kwn, kwv, nkw, &done);
    if (done) return v;
    if (!strcmp(name, "map")) return f_map(r, in, a, n, kwn, kwv, nkw);
    if (!strcmp(name, "select")) return f_select(r, in, a, n, false, true);
    if (!strcmp(name, "reject")) return f_select(r, in, a, n, false, false);
    if (!strcmp(name, "selectattr")) return f_select(r, in, a, n, true, true);
    if (!strcmp(name, "rejectattr")) return f_select(r, in, a, n, true, false);
    v = jj__seq_filter(r, name, in, a, n, kwn, kwv, nkw, &done);
    if (done) return v;
    jj__rfail(r, "no filter named '%s'", name);
}
