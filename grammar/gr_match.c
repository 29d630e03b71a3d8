/* grammar/gr_match.c — the automaton: a stack of frames, one per value being written, fed one byte
 * at a time. A value that ends only when a byte that cannot continue it arrives (a number, an
 * enum of numbers where one is a prefix of another) is popped then, and that byte goes to the
 * value around it. */
#include <string.h>

#include "grammar/gr_internal.h"

/* object phases */
enum { O_OPEN, O_FIRST, O_KEY, O_COLON, O_VALUE, O_AFTER, O_NEXT };
/* array phases */
enum { A_OPEN, A_FIRST, A_AFTER, A_NEXT };
/* string phases; aux: continuation bytes still due */
enum { S_OPEN, S_BODY, S_ESC, S_HEX, S_CONT1 };
/* number phases (JSON's grammar) */
enum { N_START, N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };

#define SPACE_USED 1 /* aux of an object / array: the optional space was written */

static void choose(const gr_grammar *g, gr_state *s, int i) {
    s->chosen = true;
    s->br = (uint8_t)i;
    s->cand = 0;
    s->f[0].node = (uint16_t)g->br[i].root;
}

void gr_state_init(const gr_grammar *g, gr_state *s) {
    s->depth = 1;
    s->done = false;
    s->chosen = false;
    s->br = 0;
    s->pre = s->post = 0;
    s->cand = g->n_br == 64 ? ~0ull : (1ull << g->n_br) - 1;
    memset(&s->f[0], 0, sizeof s->f[0]);
    if (g->n_br == 1 && g->br[0].plen == 0) choose(g, s, 0);
}

/* A byte of the prefixes: the alternatives it begins narrow; the one whose prefix it ends is
 * chosen (the prefixes are prefix-free). */
static int prefix_byte(const gr_grammar *g, gr_state *s, uint8_t b) {
    uint64_t next = 0;
    for (int i = 0; i < g->n_br; i++)
        if ((s->cand >> i & 1) && s->pre < g->br[i].plen && (uint8_t)g->br[i].prefix[s->pre] == b)
            next |= 1ull << i;
    if (!next) return -1;
    s->cand = next;
    s->pre++;
    for (int i = 0; i < g->n_br; i++)
        if ((next >> i & 1) && g->br[i].plen == s->pre) choose(g, s, i);
    return 0;
}

static bool in_set(const uint8_t *set, uint8_t b) {
    return set[b >> 3] >> (b & 7) & 1;
}

static bool is_digit(uint8_t b) {
    return b >= '0' && b <= '9';
}

/* The value on top ended: pop it; the frame below moves past its value. */
static void pop(const gr_grammar *g, gr_state *s) {
    s->depth--;
    if (s->depth == 0) {
        s->done = true;
        return;
    }
    gr_frame *p = &s->f[s->depth - 1];
    const gr_node *nd = &g->v[p->node];
    if (nd->kind == GR_OBJECT)
        p->phase = p->phase == O_KEY ? O_COLON : O_AFTER; /* a free key's string, or a value */
    else
        p->phase = A_AFTER, p->n++;
}

static int push(gr_state *s, int node) {
    if (s->depth == GR_MAX_DEPTH) return -1;
    gr_frame *f = &s->f[s->depth++];
    memset(f, 0, sizeof *f);
    f->node = (uint16_t)node;
    return 0;
}

/* 1: the number continues with b; 0: b ends it (when it may end); -1: refused. */
static int number_byte(gr_frame *f, bool integer, uint8_t b) {
    const uint8_t ph = f->phase;
    const bool more = f->n < GR_MAX_NUMBER;
    int next = -1;
    if (ph == N_START)
        next = b == '-' ? N_MINUS : b == '0' ? N_ZERO : is_digit(b) ? N_INT : -1;
    else if (ph == N_MINUS)
        next = b == '0' ? N_ZERO : is_digit(b) ? N_INT : -1;
    else if ((ph == N_ZERO || ph == N_INT) && b == '.' && !integer)
        next = N_DOT;
    else if ((ph == N_ZERO || ph == N_INT || ph == N_FRAC) && (b == 'e' || b == 'E') && !integer)
        next = N_E;
    else if (ph == N_INT && is_digit(b))
        next = N_INT;
    else if ((ph == N_DOT || ph == N_FRAC) && is_digit(b))
        next = N_FRAC;
    else if (ph == N_E && (b == '+' || b == '-'))
        next = N_ESIGN;
    else if ((ph == N_E || ph == N_ESIGN || ph == N_EXP) && is_digit(b))
        next = N_EXP;
    if (next >= 0 && more) {
        f->phase = (uint8_t)next;
        f->n++;
        return 1;
    }
    const bool can_end = ph == N_ZERO || ph == N_INT || ph == N_FRAC || ph == N_EXP;
    return can_end ? 0 : -1;
}

/* The same for a set of literal texts: 1 continues, 0 ends it before b, -1 refused; 2: b
 * completed the only literal left. */
static int literal_byte(const gr_node *nd, gr_frame *f, uint8_t b) {
    uint64_t next = 0, ended = 0;
    for (int i = 0; i < nd->n_lit; i++) {
        if (!(f->cand >> i & 1)) continue;
        if (nd->llen[i] == f->n)
            ended |= 1ull << i;
        else if ((uint8_t)nd->lit[i][f->n] == b)
            next |= 1ull << i;
    }
    if (!next) return ended ? 0 : -1;
    f->cand = next;
    f->n++;
    for (int i = 0; i < nd->n_lit; i++)
        if ((next >> i & 1) && nd->llen[i] != f->n) return 1;
    return 2;
}

static bool literal_may_end(const gr_node *nd, const gr_frame *f) {
    for (int i = 0; i < nd->n_lit; i++)
        if ((f->cand >> i & 1) && nd->llen[i] == f->n) return true;
    return false;
}

/* A string's byte; 1 continues, 2 closed it, -1 refused. UTF-8 is checked as jansson and
 * JavaScript read it (no overlongs, no surrogates), escapes as JSON has them. */
static int string_byte(const gr_node *nd, gr_frame *f, uint8_t b) {
    switch (f->phase) {
    case S_OPEN:
        f->cand = 1ull << GR_RE_START; /* a pattern's state (cand is a string's own) */
        return b == '"' ? (f->phase = S_BODY, 1) : -1;
    case S_BODY:
        /* (seen counts the characters) */
        if (b == '"')
            return f->seen >= nd->min_len && (!nd->re || gr_regex_accepts(nd->re, f->cand)) ? 2
                                                                                            : -1;
        if (f->seen >= nd->max_len) return -1;
        if (nd->re) { /* under a pattern: no escapes; a character other than ASCII at its lead */
            if (b == '\\' || b < 0x20) return -1;
            const uint64_t next = gr_regex_step(nd->re, f->cand, b < 0x80 ? b : GR_RE_NONASCII);
            /* a character only if the pattern can still end within maxLength */
            if (!next || (nd->max_len != UINT32_MAX &&
                          f->seen + 1 + gr_regex_need(nd->re, next) > nd->max_len))
                return -1;
            f->cand = next;
        }
        f->seen++;
        if (b == '\\') return f->phase = S_ESC, 1;
        if (b < 0x20) return -1;
        if (b < 0x80) return 1;
        if (b >= 0xc2 && b <= 0xdf) return f->aux = 1, f->n = b, f->phase = S_CONT1, 1;
        if (b >= 0xe0 && b <= 0xef) return f->aux = 2, f->n = b, f->phase = S_CONT1, 1;
        if (b >= 0xf0 && b <= 0xf4) return f->aux = 3, f->n = b, f->phase = S_CONT1, 1;
        return -1;
    case S_CONT1: {
        if (b < 0x80 || b > 0xbf) return -1;
        const uint32_t lead = f->n;
        if (f->n && ((lead == 0xe0 && b < 0xa0) || (lead == 0xed && b > 0x9f) ||
                     (lead == 0xf0 && b < 0x90) || (lead == 0xf4 && b > 0x8f)))
            return -1;
        f->n = 0; /* only the first continuation byte is restricted */
        if (--f->aux == 0) f->phase = S_BODY;
        return 1;
    }
    case S_ESC:
        if (b == 'u') return f->phase = S_HEX, f->n = 0, f->aux = 0, 1;
        return strchr("\"\\/bfnrt", b) && b ? (f->phase = S_BODY, 1) : -1;
    case S_HEX: {
        const bool hex = is_digit(b) || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F');
        if (!hex) return -1;
        /* \uD800-\uDFFF (surrogates) are refused: a lone one is not text */
        if (f->n == 0) f->aux = b == 'd' || b == 'D';
        if (f->n == 1 && f->aux && !(b >= '0' && b <= '7')) return -1;
        if (++f->n == 4) f->phase = S_BODY, f->aux = 0, f->n = 0;
        return 1;
    }
    }
    return -1;
}

/* The first byte of a value of node k: the frame takes the node's kind (any value and anyOf
 * choose theirs by the byte). */
static int resolve(const gr_grammar *g, gr_frame *f, uint8_t b) {
    for (int guard = 0; guard < 64; guard++) {
        const gr_node *nd = &g->v[f->node];
        if (!in_set(nd->first, b)) return -1;
        if (nd->kind == GR_ANY) {
            f->node = (uint16_t)(b == '{'   ? g->any_object
                                 : b == '[' ? g->any_array
                                 : b == '"' ? g->string
                                            : 0);
            if (f->node) return 0;
            /* numbers and the words: literals of any value are true, false, null */
            f->node = (uint16_t)g->any;
            return 1; /* handled as a scalar below */
        }
        if (nd->kind != GR_ANYOF) return 0;
        int pick = -1;
        for (int i = 0; i < nd->n_alt && pick < 0; i++)
            if (in_set(g->v[nd->alt[i]].first, b)) pick = nd->alt[i];
        f->node = (uint16_t)pick;
    }
    return -1;
}

/* An object's byte. */
static int object_byte(const gr_grammar *g, gr_state *s, gr_frame *f, const gr_node *nd,
                       uint8_t b) {
    const uint64_t all = nd->n_props == 64 ? ~0ull : (1ull << nd->n_props) - 1;
    switch (f->phase) {
    case O_OPEN:
        return b == '{' ? (f->phase = O_FIRST, 0) : -1;
    case O_FIRST:
    case O_NEXT:
        if (f->phase == O_NEXT && b == ' ' && !(f->aux & SPACE_USED))
            return f->aux |= SPACE_USED, 0;
        if (b == '}' && f->phase == O_FIRST && !nd->required) return pop(g, s), 0;
        if (b != '"') return -1;
        f->aux = 0;
        f->phase = O_KEY;
        if (nd->n_props == 0) { /* a free key: a string of its own */
            if (nd->extra < 0 || push(s, g->string)) return -1;
            s->f[s->depth - 1].phase = S_BODY;
            s->f[s->depth - 1].started = 1;
            return 0;
        }
        f->cand = all & ~f->seen;
        f->n = 0;
        return 0;
    case O_KEY: { /* a declared key, matched against the candidates left */
        uint64_t next = 0;
        for (int i = 0; i < nd->n_props; i++) {
            if (!(f->cand >> i & 1)) continue;
            if (b == '"' && nd->plen[i] == f->n) {
                f->seen |= 1ull << i;
                f->n = (uint32_t)i;
                f->phase = O_COLON;
                return 0;
            }
            if (nd->plen[i] > f->n && (uint8_t)nd->pname[i][f->n] == b) next |= 1ull << i;
        }
        if (!next) return -1;
        f->cand = next;
        f->n++;
        return 0;
    }
    case O_COLON:
        return b == ':' ? (f->phase = O_VALUE, f->aux = 0, 0) : -1;
    case O_VALUE:
        if (b == ' ' && !(f->aux & SPACE_USED)) return f->aux |= SPACE_USED, 0;
        if (push(s, nd->n_props ? nd->pval[f->n] : nd->extra)) return -1;
        return 1; /* the child takes b */
    case O_AFTER: {
        const bool more = nd->n_props ? (all & ~f->seen) != 0 : true;
        if (b == ',' && more) return f->phase = O_NEXT, f->aux = 0, 0;
        if (b == '}' && (f->seen & nd->required) == nd->required) return pop(g, s), 0;
        return -1;
    }
    }
    return -1;
}

static int array_byte(const gr_grammar *g, gr_state *s, gr_frame *f, const gr_node *nd, uint8_t b) {
    switch (f->phase) {
    case A_OPEN:
        return b == '[' ? (f->phase = A_FIRST, 0) : -1;
    case A_FIRST:
        if (b == ']') return nd->min_items == 0 ? (pop(g, s), 0) : -1;
        if (nd->max_items == 0 || push(s, nd->items)) return -1;
        return 1;
    case A_AFTER:
        if (b == ',' && f->n < nd->max_items) return f->phase = A_NEXT, f->aux = 0, 0;
        if (b == ']' && f->n >= nd->min_items) return pop(g, s), 0;
        return -1;
    case A_NEXT:
        if (b == ' ' && !(f->aux & SPACE_USED)) return f->aux |= SPACE_USED, 0;
        if (push(s, nd->items)) return -1;
        return 1;
    }
    return -1;
}

/* A scalar's byte (string, number, literals): 0 taken, 1 the value ended before b (b goes to
 * the frame below), -1 refused. */
static int scalar_byte(const gr_grammar *g, gr_state *s, gr_frame *f, const gr_node *nd,
                       uint8_t b) {
    int rc;
    switch (nd->kind) {
    case GR_STRING:
        rc = string_byte(nd, f, b);
        if (rc == 2) pop(g, s);
        return rc < 0 ? -1 : 0;
    case GR_NUMBER:
    case GR_INTEGER:
        rc = number_byte(f, nd->kind == GR_INTEGER, b);
        if (rc == 0) pop(g, s);
        return rc < 0 ? -1 : rc == 0 ? 1 : 0;
    case GR_LITERALS:
        rc = literal_byte(nd, f, b);
        if (rc == 0 || rc == 2) pop(g, s);
        return rc < 0 ? -1 : rc == 0 ? 1 : 0;
    default:
        return -1;
    }
}

/* The words and numbers of an untyped value, seen at their first byte. */
static int any_scalar(const gr_grammar *g, gr_frame *f, uint8_t b) {
    (void)g;
    static const char *const words[] = {"true", "false", "null"};
    if (b == '-' || is_digit(b)) {
        f->phase = N_START;
        f->aux = 1; /* a number of any value */
        return 0;
    }
    for (int i = 0; i < 3; i++)
        if (b == (uint8_t)words[i][0]) {
            f->aux = (uint8_t)(2 + i);
            f->n = 0;
            return 0;
        }
    return -1;
}

static int any_byte(const gr_grammar *g, gr_state *s, gr_frame *f, uint8_t b) {
    static const char *const words[] = {"true", "false", "null"};
    if (f->aux == 1) {
        const int rc = number_byte(f, false, b);
        if (rc == 0) pop(g, s);
        return rc < 0 ? -1 : rc == 0 ? 1 : 0;
    }
    const char *w = words[f->aux - 2];
    if ((uint8_t)w[f->n] != b) return -1;
    if (w[++f->n] == '\0') pop(g, s);
    return 0;
}

int gr_feed(const gr_grammar *g, gr_state *s, uint8_t b) {
    if (!s->chosen) return prefix_byte(g, s, b);
    const gr_branch *br = &g->br[s->br];
    for (int hops = 0; hops <= GR_MAX_DEPTH + 1; hops++) {
        if (s->depth == 0) /* the value is complete: its suffix, then nothing */
            return s->post < br->slen && (uint8_t)br->suffix[s->post] == b ? (s->post++, 0) : -1;
        gr_frame *f = &s->f[s->depth - 1];
        bool fresh = false;
        if (!f->started) {
            f->started = 1;
            const int r = resolve(g, f, b); /* a value's first byte */
            if (r < 0) return -1;
            if (r == 1) { /* an untyped scalar */
                if (any_scalar(g, f, b)) return -1;
                fresh = true;
            }
            if (g->v[f->node].kind == GR_LITERALS && !fresh) {
                f->cand = ~0ull >> (64 - g->v[f->node].n_lit);
                f->n = 0;
            }
        }
        const gr_node *nd = &g->v[f->node];
        int rc;
        if (nd->kind == GR_ANY)
            rc = any_byte(g, s, f, b);
        else if (nd->kind == GR_OBJECT)
            rc = object_byte(g, s, f, nd, b);
        else if (nd->kind == GR_ARRAY)
            rc = array_byte(g, s, f, nd, b);
        else
            rc = scalar_byte(g, s, f, nd, b);
        if (rc <= 0) return rc;
        /* rc 1: b goes on, to a child just pushed or to the frame below a value that ended */
    }
    return -1;
}

bool gr_complete(const gr_grammar *g, const gr_state *s) {
    if (!s->chosen) return false;
    if (s->depth == 0) return s->done && s->post == g->br[s->br].slen;
    if (s->depth != 1 || g->br[s->br].slen) return false;
    const gr_frame *f = &s->f[0];
    const gr_node *nd = &g->v[f->node];
    const bool number_end =
        f->phase == N_ZERO || f->phase == N_INT || f->phase == N_FRAC || f->phase == N_EXP;
    if (nd->kind == GR_NUMBER || nd->kind == GR_INTEGER) return f->n > 0 && number_end;
    if (nd->kind == GR_ANY) return f->aux == 1 && f->n > 0 && number_end;
    if (nd->kind == GR_LITERALS) return f->n > 0 && literal_may_end(nd, f);
    return false;
}

bool gr_accepts(const gr_grammar *g, const char *p, size_t n) {
    gr_state s;
    gr_state_init(g, &s);
    for (size_t i = 0; i < n; i++)
        if (gr_feed(g, &s, (uint8_t)p[i])) return false;
    return gr_complete(g, &s);
}
