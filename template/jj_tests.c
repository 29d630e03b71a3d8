/* template/jj_tests.c — the "is" tests: defined, none, string, mapping, iterable, sequence,
 * number, integer, boolean, true / false, comparisons (eq, ==, lt, ...), in, odd / even,
 * divisibleby, lower / upper, sameas, callable, filter / test; jinja2's meaning for each. */
#include <string.h>

#include "template/jj_internal.h"

static bool is_int(jj__val v) {
    return v.t == JV_INT;
}

static bool cmp_test(jj__rt *r, const char *name, jj__val a, jj__val *args, int n, bool *out) {
    static const struct {
        const char *n;
        int op;
    } C[] = {{"eq", JO_EQ}, {"equalto", JO_EQ},     {"==", JO_EQ}, {"ne", JO_NE}, {"!=", JO_NE},
             {"lt", JO_LT}, {"lessthan", JO_LT},    {"<", JO_LT},  {"le", JO_LE}, {"<=", JO_LE},
             {"gt", JO_GT}, {"greaterthan", JO_GT}, {">", JO_GT},  {"ge", JO_GE}, {">=", JO_GE}};
    for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
        if (strcmp(C[i].n, name)) continue;
        if (n < 1) jj__rfail(r, "test '%s' needs an argument", name);
        if (C[i].op == JO_EQ)
            *out = jj__eq(a, args[0]);
        else if (C[i].op == JO_NE)
            *out = !jj__eq(a, args[0]);
        else {
            int c = jj__cmp(r, a, args[0]);
            *out = C[i].op == JO_LT   ? c < 0
                   : C[i].op == JO_LE ? c <= 0
                   : C[i].op == JO_GT ? c > 0
                                      : c >= 0;
        }
        return true;
    }
    return false;
}

static int64_t int_of(jj__rt *r, jj__val v, const char *test) {
    if (v.t == JV_INT) return v.u.i;
    if (v.t == JV_BOOL) return v.u.b;
    if (v.t == JV_UNDEF) jj__rfail(r, "%s", v.u.s.p ? v.u.s.p : "a value is undefined");
    jj__rfail(r, "test '%s' needs an integer, not %s", test, jj__type_name(v));
}

static bool case_test(jj__rt *r, jj__val v, bool upper) {
    jj__val s = jj__to_str(r, v);
    jj__val c = jj__case(r, s, upper ? 'u' : 'l');
    bool any = false;
    size_t i = 0;
    while (i < s.u.s.n) any |= jj__cp_cased(jj__u8_get(s.u.s.p, s.u.s.n, &i));
    return any && jj__eq(s, c);
}

bool jj__apply_test(jj__rt *r, const char *name, jj__val v, jj__val *args, int n) {
    bool out;
    if (cmp_test(r, name, v, args, n, &out)) return out;
    bool plain_dict = v.t == JV_DICT && !(v.flags & (JF_NS | JF_LOOP));
    if (!strcmp(name, "defined")) return v.t != JV_UNDEF;
    if (!strcmp(name, "undefined")) return v.t == JV_UNDEF;
    if (!strcmp(name, "none")) return v.t == JV_NONE;
    if (!strcmp(name, "boolean")) return v.t == JV_BOOL;
    if (!strcmp(name, "false")) return v.t == JV_BOOL && !v.u.b;
    if (!strcmp(name, "true")) return v.t == JV_BOOL && v.u.b;
    if (!strcmp(name, "integer")) return is_int(v);
    if (!strcmp(name, "float")) return v.t == JV_FLOAT;
    if (!strcmp(name, "number")) return jj__is_num(v);
    if (!strcmp(name, "string")) return v.t == JV_STR;
    if (!strcmp(name, "mapping")) return plain_dict;
    if (!strcmp(name, "iterable"))
        return v.t == JV_STR || v.t == JV_LIST || plain_dict || v.t == JV_UNDEF;
    if (!strcmp(name, "sequence"))
        return v.t == JV_STR || (v.t == JV_LIST && !(v.flags & (JF_GEN | JF_VIEW))) || plain_dict ||
               v.t == JV_UNDEF;
    if (!strcmp(name, "callable"))
        return v.t == JV_FN || v.t == JV_UNDEF; /* Undefined has __call__ */
    if (!strcmp(name, "escaped")) return false;
    if (!strcmp(name, "sameas")) {
        if (n < 1) jj__rfail(r, "test 'sameas' needs an argument");
        if (v.t != args[0].t) return false;
        if (v.t == JV_LIST || v.t == JV_DICT || v.t == JV_FN) return v.u.l == args[0].u.l;
        return jj__eq(v, args[0]);
    }
    if (!strcmp(name, "in")) {
        if (n < 1) jj__rfail(r, "test 'in' needs an argument");
        jj__val hay = args[0];
        if (hay.t == JV_STR) {
            if (v.t != JV_STR) jj__rfail(r, "'in <string>' requires string as left operand");
            return !v.u.s.n ||
                   (v.u.s.n <= hay.u.s.n && memmem(hay.u.s.p, hay.u.s.n, v.u.s.p, v.u.s.n));
        }
        if (hay.t == JV_DICT) return jj__dict_get(hay.u.d, v) != NULL;
        jj__list l = jj__iter(r, hay);
        for (size_t i = 0; i < l.n; i++)
            if (jj__eq(l.v[i], v)) return true;
        return false;
    }
    if (!strcmp(name, "odd") || !strcmp(name, "even") || !strcmp(name, "divisibleby")) {
        jj__val d = jj__int(2);
        if (!strcmp(name, "divisibleby")) {
            if (n < 1) jj__rfail(r, "test 'divisibleby' needs an argument");
            d = args[0];
        }
        if (v.t == JV_FLOAT || d.t == JV_FLOAT) { /* Python's % on floats */
            jj__val m = jj__arith(r, JO_MOD, v, d);
            return name[0] == 'o' ? m.u.f == 1.0 : m.u.f == 0.0;
        }
        int64_t x = int_of(r, v, name), y = int_of(r, d, name);
        if (!y) jj__rfail(r, "integer division or modulo by zero");
        int64_t m = x % y;
        return name[0] == 'o' ? m != 0 : m == 0;
    }
    if (!strcmp(name, "lower")) return case_test(r, v, false);
    if (!strcmp(name, "upper")) return case_test(r, v, true);
    if (!strcmp(name, "filter"))
        return v.t == JV_STR && jj__has_filter(jj__strdup(r->e, v.u.s.p, v.u.s.n));
    if (!strcmp(name, "test"))
        return v.t == JV_STR && jj__has_test(jj__strdup(r->e, v.u.s.p, v.u.s.n));
    jj__rfail(r, "no test named '%s'", name);
}
