/* template/jj_lex.c — the lexer: text, {{ }}, {% %}, {# #} and {% raw %}, with jinja2's
 * whitespace rules as transformers sets them (trim_blocks: the newline after a block or comment
 * tag goes; lstrip_blocks: spaces and tabs before one on its line go; "-" strips all whitespace on
 * its side, "+" keeps it), newlines normalised to \n and one trailing newline dropped. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "template/jj_internal.h"

typedef struct lexer {
    jj__env *e;
    const char *s;
    size_t n, pos;
    jj__tok *t;
    size_t nt, cap;
    size_t scan;             /* position counting: tokens come in source order */
    int scan_line, scan_col; /* the line, and code points since its start */
    int balance;
    char stack[64];
} lexer;

static void pos_of(lexer *x, size_t at, int *line, int *col) {
    if (at < x->scan) x->scan = 0, x->scan_line = 1, x->scan_col = 0;
    for (; x->scan < at && x->scan < x->n; x->scan++) {
        unsigned char c = (unsigned char)x->s[x->scan];
        if (c == '\n')
            x->scan_line++, x->scan_col = 0;
        else if ((c & 0xC0) != 0x80 && x->scan_col < 1 << 30)
            x->scan_col++;
    }
    *line = x->scan_line;
    *col = x->scan_col + 1;
}

_Noreturn static void lfail(lexer *x, size_t at, const char *msg) {
    int l, c;
    pos_of(x, at, &l, &c);
    jj__fail(x->e, l, c, "%s", msg);
}

static jj__tok *emit(lexer *x, int type, size_t at, const char *p, size_t n) {
    if (x->nt == x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 256;
        jj__tok *t = jj__alloc(x->e, cap * sizeof *t);
        if (x->nt) memcpy(t, x->t, x->nt * sizeof *t);
        x->t = t;
        x->cap = cap;
    }
    jj__tok *t = &x->t[x->nt++];
    memset(t, 0, sizeof *t);
    t->type = type;
    t->p = p;
    t->n = n;
    pos_of(x, at, &t->line, &t->col);
    return t;
}

static bool at(const lexer *x, size_t i, const char *lit) {
    size_t k = strlen(lit);
    return i <= x->n && x->n - i >= k && !memcmp(x->s + i, lit, k);
}

static size_t skip_space(const lexer *x, size_t i) {
    size_t k;
    while ((k = jj__space_at(x->s, x->n, i))) i += k;
    return i;
}

/* Text before a tag: "-" strips all whitespace; lstrip_blocks strips spaces and tabs back to the
 * line's start when nothing else is there (and the line starts here or after a newline). */
static size_t strip_text(const lexer *x, size_t from, size_t to, char sign, bool lstrip,
                         bool line_starting) {
    if (sign == '-') {
        size_t k;
        while (to > from && (k = jj__space_before(x->s, to)) && to - k >= from) to -= k;
        return to;
    }
    if (sign == '+' || !lstrip) return to;
    size_t l = to;
    while (l > from && x->s[l - 1] != '\n') l--;
    if (l == from && !line_starting) return to;
    for (size_t i = l; i < to; i++)
        if (x->s[i] != ' ' && x->s[i] != '\t') return to;
    return l;
}

/* After a block or comment tag's end: "-" strips the whitespace after it, else trim_blocks drops
 * one newline ("+": nothing). */
static size_t after_end(const lexer *x, size_t i, char sign, bool trim) {
    if (sign == '-') return skip_space(x, i);
    if (trim && sign != '+' && i < x->n && x->s[i] == '\n') return i + 1;
    return i;
}

/* {% raw %}: returns the position after its end, or 0 when the tag at i is not raw. */
static size_t lex_raw(lexer *x, size_t i, bool line_starting) {
    size_t j = i + 2;
    if (j < x->n && (x->s[j] == '-' || x->s[j] == '+')) j++;
    j = skip_space(x, j);
    if (!at(x, j, "raw")) return 0;
    j = skip_space(x, j + 3);
    char sign = 0;
    if (at(x, j, "-%}")) sign = '-', j++;
    if (!at(x, j, "%}")) return 0;
    j += 2;
    if (sign == '-') j = skip_space(x, j);
    (void)line_starting;
    for (size_t k = j; k + 1 < x->n; k++) {
        if (x->s[k] != '{' || x->s[k + 1] != '%') continue;
        size_t m = k + 2;
        char bs = 0;
        if (m < x->n && (x->s[m] == '-' || x->s[m] == '+')) bs = x->s[m++];
        m = skip_space(x, m);
        if (!at(x, m, "endraw")) continue;
        m = skip_space(x, m + 6);
        char es = 0;
        if (m < x->n && (x->s[m] == '-' || x->s[m] == '+')) es = x->s[m++];
        if (!at(x, m, "%}")) continue;
        size_t to = strip_text(x, j, k, bs, true, false);
        if (to > j) emit(x, JT_DATA, j, x->s + j, to - j);
        return after_end(x, m + 2, es, true);
    }
    lfail(x, i, "missing end of raw directive");
}

static size_t lex_comment(lexer *x, size_t i, char open_sign) {
    size_t body = i + 2 + (open_sign ? 1 : 0);
    for (size_t k = body; k + 1 < x->n; k++) {
        if (x->s[k] != '#' || x->s[k + 1] != '}') continue;
        char sign = k > body && (x->s[k - 1] == '-' || x->s[k - 1] == '+') ? x->s[k - 1] : 0;
        return after_end(x, k + 2, sign, true);
    }
    lfail(x, i, "missing end of comment tag");
}

size_t jj__lex_string(jj__env *e, const char *s, size_t n, size_t i, jj__buf *out);
size_t jj__lex_number(const char *s, size_t n, size_t i, jj__tok *t);

static const char *const OPS2[] = {"**", "//", "==", "!=", "<=", ">=", NULL};

static size_t lex_op(lexer *x, size_t i) {
    for (int k = 0; OPS2[k]; k++)
        if (at(x, i, OPS2[k])) {
            emit(x, JT_OP, i, OPS2[k], 2);
            return i + 2;
        }
    char c = x->s[i];
    if (!strchr("+-/*%~[](){}=<>.:|,;", c)) lfail(x, i, "unexpected character");
    if (c == '(' || c == '[' || c == '{') {
        if (x->balance >= (int)sizeof x->stack) lfail(x, i, "brackets nested too deeply");
        x->stack[x->balance++] = c == '(' ? ')' : c == '[' ? ']' : '}';
    } else if (c == ')' || c == ']' || c == '}') {
        if (!x->balance) lfail(x, i, "unexpected closing bracket");
        if (x->stack[--x->balance] != c) lfail(x, i, "mismatched closing bracket");
    }
    emit(x, JT_OP, i, x->s + i, 1);
    return i + 1;
}

/* The expression tokens of one tag; returns the position after its end marker. */
static size_t lex_tag(lexer *x, size_t i, bool block, char *end_sign) {
    x->balance = 0;
    for (;;) {
        i = skip_space(x, i);
        if (i >= x->n)
            lfail(x, i,
                  block ? "unexpected end of template: missing '%}'"
                        : "unexpected end of template: missing '}}'");
        if (!x->balance) {
            const char *end = block ? "%}" : "}}";
            char sign = 0;
            size_t j = i;
            if (x->s[j] == '-' || (block && x->s[j] == '+')) sign = x->s[j++];
            if (at(x, j, end)) {
                emit(x, block ? JT_BLOCK_END : JT_VAR_END, i, end, 2);
                *end_sign = sign;
                return j + 2;
            }
        }
        unsigned char c = (unsigned char)x->s[i];
        if (c == '_' || jj__alpha(c)) {
            size_t j = i;
            while (j < x->n && (x->s[j] == '_' || jj__alpha(x->s[j]) || jj__digit(x->s[j]))) j++;
            emit(x, JT_NAME, i, x->s + i, j - i);
            i = j;
        } else if (jj__digit(c)) {
            jj__tok tmp = {0};
            size_t j = jj__lex_number(x->s, x->n, i, &tmp);
            jj__tok *t = emit(x, tmp.type, i, x->s + i, j - i);
            t->i = tmp.i;
            t->f = tmp.f;
            if (tmp.type == JT_EOF) lfail(x, i, "integer literal out of range");
            i = j;
        } else if (c == '\'' || c == '"') {
            jj__buf b = {0};
            size_t j = jj__lex_string(x->e, x->s, x->n, i, &b);
            if (!j) lfail(x, i, "unterminated string");
            emit(x, JT_STRING, i, b.p ? b.p : "", b.n);
            i = j;
        } else {
            i = lex_op(x, i);
        }
    }
}

static const char *normalize(jj__env *e, const char *src, size_t len, size_t *n_out) {
    char *s = jj__alloc(e, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            s[n++] = src[i];
        }
    }
    if (n && s[n - 1] == '\n') n--;
    s[n] = '\0';
    *n_out = n;
    return s;
}

static size_t find_open(const lexer *x, size_t i) {
    for (; i + 1 < x->n; i++) {
        const char *p = memchr(x->s + i, '{', x->n - i - 1);
        if (!p) return x->n;
        i = (size_t)(p - x->s);
        char c = x->s[i + 1];
        if (c == '{' || c == '%' || c == '#') return i;
    }
    return x->n;
}

jj__tok *jj__lex(jj__env *e, const char *src, size_t len, size_t *n_out) {
    lexer x = {.e = e, .scan_line = 1};
    x.s = normalize(e, src, len, &x.n);
    size_t pos = 0;
    bool line_starting = true;
    while (pos < x.n) {
        size_t k = find_open(&x, pos);
        char kind = k < x.n ? x.s[k + 1] : 0;
        char sign = k + 2 < x.n && (x.s[k + 2] == '-' || x.s[k + 2] == '+') ? x.s[k + 2] : 0;
        size_t to = k < x.n ? strip_text(&x, pos, k, sign, kind != '{', line_starting) : k;
        if (to > pos) emit(&x, JT_DATA, pos, x.s + pos, to - pos);
        if (k >= x.n) break;
        size_t next;
        if (kind == '#') {
            next = lex_comment(&x, k, sign);
        } else if (kind == '%' && (next = lex_raw(&x, k, line_starting))) {
        } else {
            bool block = kind == '%';
            emit(&x, block ? JT_BLOCK_BEGIN : JT_VAR_BEGIN, k, x.s + k, 2);
            char es = 0;
            next = lex_tag(&x, k + 2 + (sign ? 1 : 0), block, &es);
            if (es == '-')
                next = skip_space(&x, next);
            else if (block)
                next = after_end(&x, next, es, true);
        }
        line_starting = next > 0 && x.s[next - 1] == '\n';
        pos = next;
    }
    emit(&x, JT_EOF, x.n, "", 0);
    *n_out = x.nt;
    return x.t;
}
