/* grammar/gr_regex.c — a JSON schema's `pattern` (ECMA-262 syntax, the practical subset gr.h
 * names) as a position automaton (Glushkov's: a state is the set of pattern positions last
 * matched, so no epsilon moves and a state fits one 64-bit word) over a string's characters:
 * ASCII characters each, and every other character as one symbol, "not ASCII", which only '.',
 * negated classes and \D \W \S match (a pattern naming a non-ASCII character is refused).
 *
 * The schema's pattern searches (it is not anchored unless it says ^ or $): an unanchored side
 * gets a position that takes any character, repeated. Characters that JSON writes escaped (the
 * quote, the backslash, control characters) are never generated under a pattern, so they are
 * taken out of every class; positions from which no accepting state can be reached are dropped,
 * so a string under way can always be finished. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gr_internal.h"

#define MAX_POS  GR_RE_POS /* positions; bit GR_RE_START is the start state */
#define MAX_NEST 32

typedef struct frag {
    uint64_t first, last;
    bool nullable;
} frag;

typedef struct parser {
    const char *s;
    size_t n, i;
    gr_regex *re;
    int nest;
    char *why;
    size_t cap;
} parser;

static int refuse(parser *p, const char *fmt, const char *what) {
    if (p->why && !p->why[0]) snprintf(p->why, p->cap, fmt, what);
    return -1;
}

static void cls_add(uint64_t *c, unsigned lo, unsigned hi) {
    for (unsigned b = lo; b <= hi && b < 128; b++) c[b >> 6] |= 1ull << (b & 63);
}

/* A new position of class c (two words of ASCII) and nonascii. */
static int new_pos(parser *p, const uint64_t *c, bool nonascii, frag *f) {
    gr_regex *re = p->re;
    if (re->n == MAX_POS)
        return refuse(p, "the pattern is too long (more than %s positions once repeated)", "63");
    const int k = re->n++;
    /* what JSON writes escaped is never generated */
    re->cls[k][0] = c[0] & ~(0xffffffffull | 1ull << '"');
    re->cls[k][1] = c[1] & ~(1ull << ('\\' - 64));
    re->nonascii[k] = nonascii;
    re->follow[k] = 0;
    *f = (frag){1ull << k, 1ull << k, false};
    return 0;
}

static void link(gr_regex *re, uint64_t from, uint64_t to) {
    for (int k = 0; k < MAX_POS; k++)
        if (from >> k & 1) re->follow[k] |= to;
}

static frag concat(gr_regex *re, frag a, frag b) {
    link(re, a.last, b.first);
    return (frag){a.first | (a.nullable ? b.first : 0), b.last | (b.nullable ? a.last : 0),
                  a.nullable && b.nullable};
}

static int alt(parser *p, frag *out);

static int hex(char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* An escape after '\' (inside a class or not): a class into c (nonascii set for \D \W \S), 0;
 * -1 refused. */
static int escape(parser *p, uint64_t *c, bool *nonascii) {
    if (p->i == p->n) return refuse(p, "the pattern ends with %s", "'\\'");
    const char e = p->s[p->i++];
    uint64_t w[2] = {0};
    bool neg = false;
    switch (e) {
    case 'd':
    case 'D':
        cls_add(w, '0', '9');
        neg = e == 'D';
        break;
    case 'w':
    case 'W':
        cls_add(w, 'a', 'z'), cls_add(w, 'A', 'Z'), cls_add(w, '0', '9'), cls_add(w, '_', '_');
        neg = e == 'W';
        break;
    case 's':
    case 'S':
        cls_add(w, ' ', ' '), cls_add(w, '\t', '\r');
        neg = e == 'S';
        break;
    case 'n':
    case 't':
    case 'r':
    case 'f':
    case 'v': {
        const unsigned ch = (unsigned char)"\n\t\r\f\v"[strchr("ntrfv", e) - "ntrfv"];
        cls_add(w, ch, ch);
        break;
    }
    case 'x':
    case 'u': {
        const int digits = e == 'x' ? 2 : 4;
        unsigned v = 0;
        for (int k = 0; k < digits; k++) {
            const int h = p->i < p->n ? hex(p->s[p->i]) : -1;
            if (h < 0)
                return refuse(p, "a malformed %s escape in the pattern", e == 'x' ? "\\x" : "\\u");
            v = v * 16 + (unsigned)h, p->i++;
        }
        if (v >= 128) return refuse(p, "%s: a non-ASCII character in the pattern", "\\x/\\u");
        cls_add(w, v, v);
        break;
    }
    default:
        if (strchr("bBkpPcq0123456789", e) || (unsigned char)e >= 128 || (e >= 'a' && e <= 'z') ||
            (e >= 'A' && e <= 'Z')) {
            char what[4] = {'\\', e, 0};
            return refuse(p,
                          "the pattern's %s (word boundaries, back-references, Unicode "
                          "properties, other escapes) is not supported",
                          what);
        }
        cls_add(w, (unsigned char)e, (unsigned char)e); /* an escaped punctuation character */
    }
    if (neg) {
        w[0] = ~w[0], w[1] = ~w[1];
        *nonascii = true;
    }
    c[0] |= w[0], c[1] |= w[1];
    return 0;
}

/* The one character a class holds (an escape standing for one), or -1. */
static int single(const uint64_t *e, bool nonascii) {
    int one = -1, count = 0;
    for (int b = 0; b < 128; b++)
        if (e[b >> 6] >> (b & 63) & 1) one = b, count++;
    return count == 1 && !nonascii ? one : -1;
}

/* [...] after '[' */
static int klass(parser *p, frag *f) {
    uint64_t c[2] = {0};
    bool neg = false, nonascii = false;
    if (p->i < p->n && p->s[p->i] == '^') neg = true, p->i++;
    bool first = true;
    for (;;) {
        if (p->i == p->n) return refuse(p, "the pattern has an unclosed %s", "'['");
        char ch = p->s[p->i];
        if (ch == ']' && !first) {
            p->i++;
            break;
        }
        first = false;
        p->i++;
        unsigned lo;
        if (ch == '\\') {
            uint64_t e[2] = {0};
            bool ena = false;
            if (escape(p, e, &ena)) return -1;
            nonascii |= ena;
            /* a single character may start a range */
            const int one = single(e, ena);
            if (one < 0) {
                c[0] |= e[0], c[1] |= e[1];
                continue;
            }
            lo = (unsigned)one;
        } else {
            if ((unsigned char)ch >= 128)
                return refuse(p, "%s: a non-ASCII character in the pattern", "a class");
            lo = (unsigned char)ch;
        }
        unsigned hi = lo;
        if (p->i + 1 < p->n && p->s[p->i] == '-' && p->s[p->i + 1] != ']') {
            p->i++;
            char h = p->s[p->i++];
            if (h == '\\') {
                uint64_t e[2] = {0};
                bool ena = false;
                if (escape(p, e, &ena)) return -1;
                const int one = single(e, ena);
                if (one < 0) return refuse(p, "the pattern has a bad %s", "range");
                h = (char)one;
            }
            if ((unsigned char)h >= 128 || (unsigned char)h < lo)
                return refuse(p, "the pattern has a bad %s", "range");
            hi = (unsigned char)h;
        }
        cls_add(c, lo, hi);
    }
    if (neg) {
        c[0] = ~c[0], c[1] = ~c[1];
        nonascii = true;
    }
    return new_pos(p, c, nonascii, f);
}

static int atom(parser *p, frag *f) {
    const char ch = p->s[p->i++];
    uint64_t c[2] = {0};
    bool nonascii = false;
    switch (ch) {
    case '(': {
        if (++p->nest > MAX_NEST) return refuse(p, "the pattern nests %s", "too deep");
        if (p->i + 1 < p->n && p->s[p->i] == '?') {
            if (p->s[p->i + 1] == ':')
                p->i += 2;
            else
                return refuse(p, "the pattern's %s (lookaround, named groups) is not supported",
                              "(?");
        }
        if (alt(p, f)) return -1;
        if (p->i == p->n || p->s[p->i] != ')')
            return refuse(p, "the pattern has an unclosed %s", "'('");
        p->i++;
        p->nest--;
        return 0;
    }
    case '[':
        return klass(p, f);
    case '.':
        c[0] = c[1] = ~0ull;
        c[0] &= ~(1ull << '\n' | 1ull << '\r');
        return new_pos(p, c, true, f);
    case '\\':
        if (escape(p, c, &nonascii)) return -1;
        return new_pos(p, c, nonascii, f);
    case '^':
    case '$':
        return refuse(p, "%s: an anchor only at the pattern's start or end is supported",
                      ch == '^' ? "'^'" : "'$'");
    case '*':
    case '+':
    case '?':
    case '{':
    case ')':
    case ']':
    case '}': {
        char what[4] = {'\'', ch, '\'', 0};
        return refuse(p, "the pattern has %s with nothing before it to apply to", what);
    }
    default:
        if ((unsigned char)ch >= 128)
            return refuse(p, "%s: a non-ASCII character in the pattern", "a literal");
        cls_add(c, (unsigned char)ch, (unsigned char)ch);
        return new_pos(p, c, false, f);
    }
}

/* {m}, {m,}, {m,n} at p->i (after '{'): 1 read, 0 not a quantifier (a literal '{'). */
static int bounds(parser *p, long *m, long *n) {
    size_t i = p->i;
    long a = 0, b = -1;
    bool digits = false;
    while (i < p->n && p->s[i] >= '0' && p->s[i] <= '9' && a <= 1000)
        a = a * 10 + (p->s[i++] - '0'), digits = true;
    if (!digits) return 0;
    if (i < p->n && p->s[i] == ',') {
        i++;
        if (i < p->n && p->s[i] >= '0' && p->s[i] <= '9') {
            b = 0;
            while (i < p->n && p->s[i] >= '0' && p->s[i] <= '9' && b <= 1000)
                b = b * 10 + (p->s[i++] - '0');
        }
    } else {
        b = a;
    }
    if (i == p->n || p->s[i] != '}') return 0;
    p->i = i + 1;
    *m = a, *n = b;
    return 1;
}

/* An atom with its quantifier; a repeated atom is parsed again for each copy (new positions). */
static int repeat(parser *p, frag *f) {
    const size_t at = p->i;
    if (atom(p, f)) return -1;
    const size_t after = p->i;
    if (p->i == p->n) return 0;
    const char q = p->s[p->i];
    long m = 1, n = 1;
    if (q == '*')
        m = 0, n = -1, p->i++;
    else if (q == '+')
        m = 1, n = -1, p->i++;
    else if (q == '?')
        m = 0, n = 1, p->i++;
    else if (q == '{' && (p->i++, bounds(p, &m, &n) || (p->i--, 0)))
        ;
    else
        return 0;
    if (p->i < p->n && p->s[p->i] == '?') p->i++; /* lazy: the same strings */
    if (n >= 0 && m > n) return refuse(p, "the pattern has a bad %s", "{m,n}");
    if (m > MAX_POS || n > MAX_POS)
        return refuse(p, "the pattern repeats %s too many times", "something");
    const size_t end = p->i;
    /* copies: the first is parsed; the others parse the atom's text again */
    frag all = {0, 0, true}, cur = *f;
    const long copies = n < 0 ? (m ? m : 1) : (n ? n : 1);
    for (long k = 0; k < copies; k++) {
        if (k) {
            p->i = at;
            if (atom(p, &cur)) return -1;
        }
        if (n < 0 && k == copies - 1) { /* the last copy repeats */
            link(p->re, cur.last, cur.first);
            if (m == 0) cur.nullable = true;
        } else if (k >= m) {
            cur.nullable = true;
        }
        all = concat(p->re, all, cur);
    }
    if (n == 0) all = (frag){0, 0, true}; /* x{0}: nothing (its positions stay unreachable) */
    (void)after;
    p->i = end;
    *f = all;
    return 0;
}

static int seq(parser *p, frag *f) {
    *f = (frag){0, 0, true};
    while (p->i < p->n && p->s[p->i] != '|' && p->s[p->i] != ')') {
        frag a;
        if (repeat(p, &a)) return -1;
        *f = concat(p->re, *f, a);
    }
    return 0;
}

static int alt(parser *p, frag *out) {
    if (seq(p, out)) return -1;
    while (p->i < p->n && p->s[p->i] == '|') {
        p->i++;
        frag b;
        if (seq(p, &b)) return -1;
        *out = (frag){out->first | b.first, out->last | b.last, out->nullable || b.nullable};
    }
    return 0;
}

/* Whether a top-level '|' stands in s[0..n) (outside groups and classes). */
static bool top_level_alt(const char *s, size_t n) {
    int depth = 0;
    bool in_class = false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\') {
            i++;
            continue;
        }
        if (in_class) {
            in_class = s[i] != ']';
            continue;
        }
        if (s[i] == '[') in_class = true;
        if (s[i] == '(') depth++;
        if (s[i] == ')') depth--;
        if (s[i] == '|' && depth == 0) return true;
    }
    return false;
}

/* An unanchored side: any character, repeated. */
static int any_star(parser *p, frag *f) {
    const uint64_t all[2] = {~0ull, ~0ull};
    if (new_pos(p, all, true, f)) return -1;
    link(p->re, f->last, f->first);
    f->nullable = true;
    return 0;
}

int gr_regex_compile(const char *pat, size_t len, gr_regex **out, char *why, size_t cap) {
    *out = NULL;
    if (why && cap) why[0] = '\0';
    gr_regex *re = calloc(1, sizeof *re);
    if (!re) return snprintf(why, cap, "out of memory"), -1;
    parser p = {.s = pat, .n = len, .re = re, .why = why, .cap = cap};
    const bool start = len && pat[0] == '^';
    bool end = len > (size_t)start && pat[len - 1] == '$';
    size_t slashes = 0; /* an odd number of backslashes before it: a literal $ */
    while (end && slashes + 1 < len && pat[len - 2 - slashes] == '\\') slashes++;
    if (slashes % 2) end = false;
    if (start) p.i = 1;
    if (end) p.n = len - 1;
    frag body, pre = {0, 0, true}, post = {0, 0, true};
    int rc = 0;
    if ((start || end) && top_level_alt(pat + p.i, p.n - p.i))
        rc = refuse(&p, "%s: an anchor beside a top-level '|' (group the alternatives)", "^ or $");
    if (!rc && !start) rc = any_star(&p, &pre);
    if (!rc) rc = alt(&p, &body);
    if (!rc && p.i != p.n) rc = refuse(&p, "the pattern has an unmatched %s", "')'");
    if (!rc && !end) rc = any_star(&p, &post);
    if (rc) {
        free(re);
        return -1;
    }
    frag all = concat(re, concat(re, pre, body), post);
    re->first = all.first;
    re->last = all.last;
    re->nullable = all.nullable;
    /* live positions: a non-empty class, and an accepting state reachable after them */
    uint64_t live = 0;
    for (bool changed = true; changed;) {
        changed = false;
        for (int k = 0; k < re->n; k++) {
            const bool has = re->cls[k][0] || re->cls[k][1] || re->nonascii[k];
            const bool ok = has && ((re->last >> k & 1) || (re->follow[k] & live));
            if (ok && !(live >> k & 1)) live |= 1ull << k, changed = true;
        }
    }
    for (int k = 0; k < re->n; k++) re->follow[k] &= live;
    re->first &= live;
    re->last &= live;
    if (!re->nullable && !re->first) {
        free(re);
        snprintf(why, cap,
                 "the pattern matches no string this server writes (a quote, a backslash and "
                 "control characters are never generated under a pattern)");
        return -1;
    }
    for (int k = 0; k < re->n; k++) re->dist[k] = re->last >> k & 1 ? 0 : UINT16_MAX;
    for (bool changed = true; changed;) {
        changed = false;
        for (int k = 0; k < re->n; k++)
            for (int q = 0; q < re->n; q++)
                if ((re->follow[k] >> q & 1) && re->dist[q] < UINT16_MAX &&
                    re->dist[q] + 1 < re->dist[k])
                    re->dist[k] = (uint16_t)(re->dist[q] + 1), changed = true;
    }
    *out = re;
    return 0;
}

uint64_t gr_regex_step(const gr_regex *re, uint64_t st, int c) {
    uint64_t cand = st >> GR_RE_START & 1 ? re->first : 0;
    for (int k = 0; k < re->n; k++)
        if (st >> k & 1) cand |= re->follow[k];
    uint64_t next = 0;
    for (int k = 0; k < re->n; k++) {
        if (!(cand >> k & 1)) continue;
        const bool in = c == GR_RE_NONASCII ? re->nonascii[k] : re->cls[k][c >> 6] >> (c & 63) & 1;
        if (in) next |= 1ull << k;
    }
    return next;
}

bool gr_regex_accepts(const gr_regex *re, uint64_t st) {
    return (st >> GR_RE_START & 1 ? re->nullable : false) || (st & re->last) != 0;
}

uint32_t gr_regex_need(const gr_regex *re, uint64_t st) {
    uint32_t best = UINT32_MAX;
    if (st >> GR_RE_START & 1) {
        if (re->nullable) return 0;
        for (int k = 0; k < re->n; k++)
            if ((re->first >> k & 1) && re->dist[k] + 1u < best) best = re->dist[k] + 1u;
    }
    for (int k = 0; k < re->n; k++)
        if ((st >> k & 1) && re->dist[k] < best) best = re->dist[k];
    return best;
}
