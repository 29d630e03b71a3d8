/* template/jj_arith.c — + - * / // % ** with Python's rules: int stays int (overflow is an
 * error, not a wrap), / is always float, // and % floor toward minus infinity, str and list
 * concatenate and repeat, and str % args formats printf-style. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "template/jj_internal.h"

#define MAX_REPEAT (64u << 20)

static const char *OPNAME[] = {"", "+", "-", "*", "/", "//", "%", "**"};

_Noreturn static void bad_operands(jj__rt *r, int op, jj__val a, jj__val b) {
    if (a.t == JV_UNDEF || b.t == JV_UNDEF) {
        jj__val u = a.t == JV_UNDEF ? a : b;
        jj__rfail(r, "%s", u.u.s.p ? u.u.s.p : "a value is undefined");
    }
    jj__rfail(r, "unsupported operand type(s) for %s: '%s' and '%s'", OPNAME[op], jj__type_name(a),
              jj__type_name(b));
}

static jj__val repeat(jj__rt *r, jj__val s, int64_t k) {
    if (k <= 0) {
        if (s.t == JV_STR) return jj__str("", 0);
        jj__val l = jj__list_new(r, 0);
        l.flags = s.flags & JF_TUPLE;
        return l;
    }
    size_t unit = s.t == JV_STR ? s.u.s.n : s.u.l->n;
    if (unit && (uint64_t)k > MAX_REPEAT / unit) jj__rfail(r, "repetition too long");
    if (s.t == JV_STR) {
        jj__buf b = {0};
        jj__buf_put(r->e, &b, "", 0);
        for (int64_t i = 0; i < k; i++) jj__buf_put(r->e, &b, s.u.s.p, s.u.s.n);
        return jj__str(b.p, b.n);
    }
    jj__val l = jj__list_new(r, unit * (size_t)k);
    l.flags = s.flags & JF_TUPLE;
    for (int64_t i = 0; i < k; i++)
        for (size_t j = 0; j < unit; j++) jj__list_push(r, l.u.l, s.u.l->v[j]);
    return l;
}

static int64_t ival(jj__val v) {
    return v.t == JV_INT ? v.u.i : v.u.b;
}

static jj__val int_op(jj__rt *r, int op, int64_t x, int64_t y) {
    int64_t z;
    switch (op) {
    case JO_ADD:
        if (__builtin_add_overflow(x, y, &z)) break;
        return jj__int(z);
    case JO_SUB:
        if (__builtin_sub_overflow(x, y, &z)) break;
        return jj__int(z);
    case JO_MUL:
        if (__builtin_mul_overflow(x, y, &z)) break;
        return jj__int(z);
    case JO_DIV:
        if (!y) jj__rfail(r, "division by zero");
        return jj__float((double)x / (double)y);
    case JO_FLOORDIV:
    case JO_MOD: {
        if (!y) jj__rfail(r, "integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) break;
        int64_t q = x / y, m = x % y;
        if (m && ((m < 0) != (y < 0))) q--, m += y;
        return jj__int(op == JO_MOD ? m : q);
    }
    case JO_POW: {
        if (y < 0 && !x) jj__rfail(r, "0.0 cannot be raised to a negative power");
        if (y < 0) return jj__float(pow((double)x, (double)y));
        int64_t acc = 1, base = x;
        while (y) {
            if ((y & 1) && __builtin_mul_overflow(acc, base, &acc))
                jj__rfail(r, "integer overflow");
            y >>= 1;
            if (y && __builtin_mul_overflow(base, base, &base)) jj__rfail(r, "integer overflow");
        }
        return jj__int(acc);
    }
    }
    jj__rfail(r, "integer overflow");
}

static jj__val float_op(jj__rt *r, int op, double x, double y) {
    switch (op) {
    case JO_ADD:
        return jj__float(x + y);
    case JO_SUB:
        return jj__float(x - y);
    case JO_MUL:
        return jj__float(x * y);
    case JO_DIV:
        if (y == 0) jj__rfail(r, "float division by zero");
        return jj__float(x / y);
    case JO_FLOORDIV:
    case JO_MOD: {
        if (y == 0) jj__rfail(r, "float modulo");
        double m = fmod(x, y), div = (x - m) / y;
        if (m != 0 && ((y < 0) != (m < 0))) {
            m += y;
            div -= 1.0;
        }
        if (op == JO_MOD) return jj__float(m != 0 ? m : copysign(0.0, y));
        double fd = floor(div);
        if (div - fd > 0.5) fd += 1.0;
        return jj__float(fd);
    }
    default:
        if (x == 0 && y < 0) jj__rfail(r, "0.0 cannot be raised to a negative power");
        return jj__float(pow(x, y));
    }
}

jj__val jj__arith(jj__rt *r, int op, jj__val a, jj__val b) {
    if (jj__is_num(a) && jj__is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT) return int_op(r, op, ival(a), ival(b));
        return float_op(r, op, jj__num(a), jj__num(b));
    }
    if (op == JO_ADD && a.t == JV_STR && b.t == JV_STR) {
        bool safe = (a.flags | b.flags) & JF_SAFE; /* Markup + str escapes the str */
        if (safe) {
            a = jj__escape(r, a);
            b = jj__escape(r, b);
        }
        jj__buf s = {0};
        jj__buf_put(r->e, &s, "", 0);
        jj__buf_put(r->e, &s, a.u.s.p, a.u.s.n);
        jj__buf_put(r->e, &s, b.u.s.p, b.u.s.n);
        jj__val v = jj__str(s.p, s.n);
        v.flags = safe ? JF_SAFE : 0;
        return v;
    }
    if (op == JO_ADD && a.t == JV_LIST && b.t == JV_LIST && !((a.flags | b.flags) & JF_GEN) &&
        (a.flags & JF_TUPLE) == (b.flags & JF_TUPLE)) {
        jj__val l = jj__list_new(r, a.u.l->n + b.u.l->n);
        l.flags = a.flags & JF_TUPLE;
        for (size_t i = 0; i < a.u.l->n; i++) jj__list_push(r, l.u.l, a.u.l->v[i]);
        for (size_t i = 0; i < b.u.l->n; i++) jj__list_push(r, l.u.l, b.u.l->v[i]);
        return l;
    }
    if (op == JO_MUL) {
        bool seq_a = a.t == JV_STR || (a.t == JV_LIST && !(a.flags & JF_GEN));
        bool seq_b = b.t == JV_STR || (b.t == JV_LIST && !(b.flags & JF_GEN));
        if (seq_a && (b.t == JV_INT || b.t == JV_BOOL)) return repeat(r, a, ival(b));
        if (seq_b && (a.t == JV_INT || a.t == JV_BOOL)) return repeat(r, b, ival(a));
    }
    if (op == JO_MOD && a.t == JV_STR) return jj__format_percent(r, a, b);
    bad_operands(r, op, a, b);
}

/* str % args: %s %r %d %i %f %x %% with flags, width and precision; a tuple gives several. */
static void format_one(jj__rt *r, jj__buf *out, char conv, const char *spec, jj__val v) {
    char f[40], t[128];
    if (conv == 's' || conv == 'r') {
        jj__buf s = {0};
        if (conv == 's')
            jj__str_of(r, &s, v);
        else
            jj__repr(r, &s, v);
        jj__buf_put(r->e, out, s.p ? s.p : "", s.n);
        return;
    }
    if (!jj__is_num(v))
        jj__rfail(r, "%%%c format: a real number is required, not %s", conv, jj__type_name(v));
    if (conv == 'd' || conv == 'i' || conv == 'x' || conv == 'X' || conv == 'o') {
        int64_t i = v.t == JV_FLOAT ? (int64_t)v.u.f : ival(v);
        snprintf(f, sizeof f, "%%%s" PRId64, spec);
        if (conv != 'd' && conv != 'i') snprintf(f, sizeof f, "%%%sl%c", spec, conv);
        snprintf(t, sizeof t, f, i);
    } else {
        snprintf(f, sizeof f, "%%%s%c", spec, conv);
        snprintf(t, sizeof t, f, jj__num(v));
    }
    jj__buf_puts(r->e, out, t);
}

jj__val jj__format_percent(jj__rt *r, jj__val fmt, jj__val args) {
    jj__list l = {0};
    if (args.t == JV_LIST && (args.flags & JF_TUPLE))
        l = *args.u.l;
    else
        l = (jj__list){.v = &args, .n = 1};
    size_t used = 0;
    jj__buf out = {0};
    jj__buf_put(r->e, &out, "", 0);
    const char *s = fmt.u.s.p;
    size_t n = fmt.u.s.n;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            jj__buf_put(r->e, &out, s + i, 1);
            continue;
        }
        size_t st = ++i;
        while (i < n && strchr("-+ #0123456789.", s[i]) && i - st < 20) i++;
        if (i >= n) jj__rfail(r, "incomplete format");
        char conv = s[i];
        if (conv == '%') {
            jj__buf_put(r->e, &out, "%", 1);
            continue;
        }
        if (!strchr("srdixXofeEgG", conv)) jj__rfail(r, "unsupported format character '%c'", conv);
        if (used >= l.n) jj__rfail(r, "not enough arguments for format string");
        char spec[24];
        snprintf(spec, sizeof spec, "%.*s", (int)(i - st), s + st);
        format_one(r, &out, conv, spec, l.v[used++]);
    }
    /* a list or dict argument is taken as a mapping by Python: unused, it is no error */
    bool mapping = (args.t == JV_LIST && !(args.flags & JF_TUPLE)) || args.t == JV_DICT;
    if (used < l.n && !(mapping && !used))
        jj__rfail(r, "not all arguments converted during string formatting");
    return jj__str(out.p, out.n);
}
