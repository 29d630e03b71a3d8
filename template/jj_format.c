/* template/jj_format.c — Python's str.format for templates ('<x{}>'.format(v), '{0} {name}',
 * '{:>8}', '{:.2f}', '{!r}', '{{' and '}}'): fields by position, number or keyword, with a
 * format spec of fill, alignment, zero padding, width, precision and type. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/jj_internal.h"

typedef struct spec {
    char fill, align, type;
    bool zero;
    int width, prec; /* -1: none */
} spec;

static spec parse_spec(jj__rt *r, const char *s, size_t n) {
    spec f = {.fill = ' ', .width = -1, .prec = -1};
    size_t i = 0;
    if (n >= 2 && strchr("<>^=", s[1]))
        f.fill = s[0], f.align = s[1], i = 2;
    else if (n >= 1 && strchr("<>^=", s[0]))
        f.align = s[0], i = 1;
    if (i < n && s[i] == '0') f.zero = true, i++;
    if (i < n && jj__digit(s[i])) {
        f.width = 0;
        while (i < n && jj__digit(s[i]) && f.width < 100000)
            f.width = f.width * 10 + (s[i++] - '0');
    }
    if (i < n && s[i] == '.') {
        f.prec = 0;
        i++;
        while (i < n && jj__digit(s[i]) && f.prec < 1000) f.prec = f.prec * 10 + (s[i++] - '0');
    }
    if (i < n) f.type = s[i++];
    if (i != n) jj__rfail(r, "format: unsupported format spec '%.*s'", (int)n, s);
    return f;
}

static void pad(jj__rt *r, jj__buf *out, const char *t, size_t n, spec f, bool number) {
    size_t len = jj__u8_len(t, n);
    size_t w = f.width > 0 && (size_t)f.width > len ? (size_t)f.width - len : 0;
    char align = f.align ? f.align : number ? '>' : '<';
    char fill = f.zero && !f.align ? '0' : f.fill;
    size_t left = align == '>' ? w : align == '^' ? w / 2 : 0;
    for (size_t k = 0; k < left; k++) jj__buf_put(r->e, out, &fill, 1);
    jj__buf_put(r->e, out, t, n);
    for (size_t k = left; k < w; k++) jj__buf_put(r->e, out, &fill, 1);
}

static void format_value(jj__rt *r, jj__buf *out, jj__val v, spec f, char conv) {
    char t[512];
    if (conv == 'r' || (!f.type && !jj__is_num(v)) || f.type == 's') {
        jj__buf b = {0};
        if (conv == 'r')
            jj__repr(r, &b, v);
        else
            jj__str_of(r, &b, v);
        size_t n = b.n;
        if (f.prec >= 0) n = jj__u8_off(b.p ? b.p : "", b.n, (size_t)f.prec);
        pad(r, out, b.p ? b.p : "", n, f, false);
        return;
    }
    if (!jj__is_num(v))
        jj__rfail(r, "format: '%c' needs a number, not %s", f.type, jj__type_name(v));
    if (!f.type) {
        jj__val s = jj__to_str(r, v);
        pad(r, out, s.u.s.p, s.u.s.n, f, true);
        return;
    }
    if (strchr("dxXob", f.type)) {
        if (v.t == JV_FLOAT) jj__rfail(r, "format: '%c' needs an integer", f.type);
        int64_t i = v.t == JV_INT ? v.u.i : v.u.b;
        if (f.type == 'd' || f.type == 'b')
            snprintf(t, sizeof t, "%" PRId64, i);
        else
            snprintf(t, sizeof t,
                     f.type == 'x'   ? "%" PRIx64
                     : f.type == 'X' ? "%" PRIX64
                                     : "%" PRIo64,
                     i);
    } else if (strchr("fFeEgG%", f.type)) {
        double d = jj__num(v) * (f.type == '%' ? 100 : 1);
        char fmt[16];
        snprintf(fmt, sizeof fmt, "%%.%d%c", f.prec >= 0 ? f.prec : 6,
                 f.type == '%' ? 'f' : f.type);
        snprintf(t, sizeof t, fmt, d);
        if (f.type == '%') strncat(t, "%", sizeof t - strlen(t) - 1);
    } else {
        jj__rfail(r, "format: unknown format code '%c'", f.type);
    }
    pad(r, out, t, strlen(t), f, true);
}

jj__val jj__str_format(jj__rt *r, jj__val fmt, jj__val *a, int n, const char **kwn, jj__val *kwv,
                       int nkw) {
    jj__buf out = {0};
    jj__buf_put(r->e, &out, "", 0);
    const char *s = fmt.u.s.p;
    size_t len = fmt.u.s.n;
    int auto_idx = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == '}') {
            if (i + 1 < len && s[i + 1] == '}')
                i++;
            else
                jj__rfail(r, "format: single '}' encountered");
            jj__buf_put(r->e, &out, "}", 1);
            continue;
        }
        if (c != '{') {
            jj__buf_put(r->e, &out, &c, 1);
            continue;
        }
        if (i + 1 < len && s[i + 1] == '{') {
            jj__buf_put(r->e, &out, "{", 1);
            i++;
            continue;
        }
        const char *end = memchr(s + i, '}', len - i);
        if (!end) jj__rfail(r, "format: single '{' encountered");
        const char *field = s + i + 1;
        size_t fn = (size_t)(end - field);
        const char *colon = memchr(field, ':', fn), *bang = memchr(field, '!', fn);
        size_t name_n = bang && (!colon || bang < colon) ? (size_t)(bang - field)
                        : colon                          ? (size_t)(colon - field)
                                                         : fn;
        char conv = bang && (!colon || bang < colon) && bang + 1 < field + fn ? bang[1] : 0;
        spec f = colon ? parse_spec(r, colon + 1, (size_t)(field + fn - colon - 1))
                       : (spec){.fill = ' ', .width = -1, .prec = -1};
        jj__val v;
        if (!name_n) {
            if (auto_idx >= n) jj__rfail(r, "format: replacement index %d out of range", auto_idx);
            v = a[auto_idx++];
        } else if (jj__digit(field[0])) {
            int k = atoi(field);
            if (k >= n) jj__rfail(r, "format: replacement index %d out of range", k);
            v = a[k];
        } else {
            int k = 0;
            while (k < nkw && (strlen(kwn[k]) != name_n || memcmp(kwn[k], field, name_n))) k++;
            if (k == nkw) jj__rfail(r, "format: no argument '%.*s'", (int)name_n, field);
            v = kwv[k];
        }
        format_value(r, &out, v, f, conv);
        i = (size_t)(end - s);
    }
    return jj__str(out.p, out.n);
}
