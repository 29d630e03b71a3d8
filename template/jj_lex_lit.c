/* template/jj_lex_lit.c — string and number literals inside tags, decoded as jinja2 does (Python's
 * escapes: \n \t \\ \' \" \xhh \uhhhh \Uhhhhhhhh, octal; an unknown escape stays as written;
 * numbers may hold underscores between digits). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "template/jj_internal.h"

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if ((c | 32) >= 'a' && (c | 32) <= 'f') return (c | 32) - 'a' + 10;
    return -1;
}

/* \x, \u, \U: digits hex digits after s[i]; -1 when they are not all there. */
static long hexrun(const char *s, size_t n, size_t i, int digits) {
    long v = 0;
    for (int k = 0; k < digits; k++) {
        if (i + (size_t)k >= n || hexval(s[i + (size_t)k]) < 0) return -1;
        v = v * 16 + hexval(s[i + (size_t)k]);
    }
    return v;
}

static size_t escape(jj__env *e, const char *s, size_t n, size_t i, jj__buf *out) {
    char c = s[i];
    const char *simple = "n\nt\tr\r\\\\'\'\"\"a\ab\bf\fv\v";
    for (const char *p = simple; *p; p += 2)
        if (*p == c) {
            jj__buf_put(e, out, p + 1, 1);
            return i + 1;
        }
    if (c == '\n') return i + 1;
    if (c >= '0' && c <= '7') {
        int v = 0, k = 0;
        while (k < 3 && i < n && s[i] >= '0' && s[i] <= '7') v = v * 8 + (s[i++] - '0'), k++;
        jj__u8_put(e, out, (uint32_t)v);
        return i;
    }
    int digits = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
    if (digits) {
        long v = hexrun(s, n, i + 1, digits);
        if (v < 0 || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
        jj__u8_put(e, out, (uint32_t)v);
        return i + 1 + (size_t)digits;
    }
    jj__buf_put(e, out, "\\", 1);
    jj__buf_put(e, out, &s[i], 1);
    return i + 1;
}

/* Returns the position after the closing quote, or 0 (unterminated or a bad escape). */
size_t jj__lex_string(jj__env *e, const char *s, size_t n, size_t i, jj__buf *out) {
    char q = s[i++];
    jj__buf_put(e, out, "", 0);
    while (i < n) {
        char c = s[i];
        if (c == q) return i + 1;
        if (c == '\\') {
            if (i + 1 >= n) return 0;
            size_t j = escape(e, s, n, i + 1, out);
            if (!j) return 0;
            i = j;
            continue;
        }
        size_t st = i;
        while (i < n && s[i] != q && s[i] != '\\') i++;
        jj__buf_put(e, out, s + st, i - st);
    }
    return 0;
}

static size_t digits(const char *s, size_t n, size_t i) {
    if (i >= n || !jj__digit(s[i])) return i;
    while (i < n) {
        if (jj__digit(s[i]))
            i++;
        else if (s[i] == '_' && i + 1 < n && jj__digit(s[i + 1]))
            i++;
        else
            break;
    }
    return i;
}

/* Sets t->type to JT_INT or JT_FLOAT (JT_EOF: an integer out of range). */
size_t jj__lex_number(const char *s, size_t n, size_t i, jj__tok *t) {
    size_t j = digits(s, n, i);
    bool is_float = false;
    if (j + 1 < n && s[j] == '.' && jj__digit(s[j + 1])) {
        j = digits(s, n, j + 1);
        is_float = true;
    }
    if (j < n && (s[j] | 32) == 'e') {
        size_t k = j + 1;
        if (k < n && (s[k] == '+' || s[k] == '-')) k++;
        size_t m = digits(s, n, k);
        if (m > k) j = m, is_float = true;
    }
    char tmp[128];
    size_t w = 0;
    for (size_t k = i; k < j && w + 1 < sizeof tmp; k++)
        if (s[k] != '_') tmp[w++] = s[k];
    tmp[w] = '\0';
    errno = 0;
    if (is_float) {
        t->type = JT_FLOAT;
        t->f = strtod(tmp, NULL);
    } else {
        t->type = JT_INT;
        t->i = strtoll(tmp, NULL, 10);
        if (errno == ERANGE || j - i >= sizeof tmp) t->type = JT_EOF;
    }
    return j;
}
