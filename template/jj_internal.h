/* template/jj_internal.h — the engine's shared types: arena, tokens, syntax tree, values and the
 * render state. Errors unwind with longjmp to the entry point (jj_parse / jj_render); everything is
 * allocated in an arena freed at once, so an unwind leaks nothing. */
#ifndef JJ_INTERNAL_H
#define JJ_INTERNAL_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "template/jj.h"

/* ---- arena and failure ---------------------------------------------------------------------- */
typedef struct jj__chunk jj__chunk;
typedef struct jj__env {
    jmp_buf jmp;
    jj__chunk *chunks;
    size_t used, limit; /* bytes allocated, at most limit */
    mw_err *err;
} jj__env;

void *jj__alloc(jj__env *e, size_t n);
char *jj__strdup(jj__env *e, const char *s, size_t n);
void jj__arena_free(jj__env *e);
/* Writes "line L column C: ..." into the error and unwinds. */
_Noreturn void jj__fail(jj__env *e, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A growing byte buffer in the arena (old storage is left behind, bounded by the arena limit). */
typedef struct jj__buf {
    char *p;
    size_t n, cap;
    size_t max; /* 0: no bound beyond the arena's */
} jj__buf;
void jj__buf_put(jj__env *e, jj__buf *b, const char *s, size_t n);
void jj__buf_puts(jj__env *e, jj__buf *b, const char *s);
void jj__buf_printf(jj__env *e, jj__buf *b, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- tokens --------------------------------------------------------------------------------- */
enum {
    JT_EOF,
    JT_DATA,
    JT_VAR_BEGIN,
    JT_VAR_END,
    JT_BLOCK_BEGIN,
    JT_BLOCK_END,
    JT_NAME,
    JT_STRING,
    JT_INT,
    JT_FLOAT,
    JT_OP
};

typedef struct jj__tok {
    int type;
    int line, col;
    const char *p; /* text: data, name, operator, decoded string */
    size_t n;
    int64_t i;
    double f;
} jj__tok;

/* Splits src into tokens with the whitespace rules applied (trim_blocks, lstrip_blocks, -/+). */
jj__tok *jj__lex(jj__env *e, const char *src, size_t len, size_t *n_out);

/* ---- syntax tree ---------------------------------------------------------------------------- */
enum {
    /* statements */
    JN_BODY,        /* kids */
    JN_TEXT,        /* s */
    JN_OUTPUT,      /* a */
    JN_IF,          /* a cond, b then, c else (NULL) */
    JN_FOR,         /* a target, b iterable, c body, d else, e filter */
    JN_SET,         /* a target, b value */
    JN_SETBLOCK,    /* a target, c body, e filter chain (or NULL) */
    JN_MACRO,       /* s name, params in kids (names) with defaults in vals, c body */
    JN_CALLBLOCK,   /* a call expression, params in kids with defaults in vals, c body */
    JN_FILTERBLOCK, /* e filter chain applied to body c */
    JN_WITH,        /* targets in kids, values in vals, c body */
    JN_BREAK,
    JN_CONTINUE,
    /* expressions */
    JN_CONST,   /* v */
    JN_NAME,    /* s */
    JN_TUPLE,   /* kids */
    JN_LIST,    /* kids */
    JN_DICT,    /* kids keys, vals values */
    JN_GETATTR, /* a . s */
    JN_GETITEM, /* a [b] */
    JN_SLICE,   /* a [b:c:d] (each NULL when absent) */
    JN_CALL,    /* a (kids, kwnames=vals) */
    JN_FILTER,  /* a | s (kids, kw) ; a NULL in a filter block */
    JN_TEST,    /* a is [not] s (kids, kw); op = negate */
    JN_BINOP,   /* a op b */
    JN_NEG,
    JN_POS,
    JN_NOT,
    JN_AND,
    JN_OR,
    JN_COMPARE, /* a then ops[i] kids[i] */
    JN_COND,    /* b if a else c */
    JN_CONCAT   /* a ~ b */
};

typedef struct jj__val jj__val;
typedef struct jj__node jj__node;

typedef struct jj__list {
    jj__val *v;
    size_t n, cap;
    size_t next; /* a generator (JF_GEN): the items before next were consumed */
} jj__list;

typedef struct jj__dict {
    jj__val *k, *v;
    size_t n, cap;
} jj__dict;

typedef struct jj__fn jj__fn;

enum { JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT, JV_FN };
/* flags */
/* JF_SAFE: a string that is markupsafe's Markup (from safe / escape): + escapes the other side */
/* JF_KEYS / JF_VALUES / JF_ITEMS: a list that is a dict view (printed as dict_keys([...]) ...) */
enum {
    JF_TUPLE = 1,
    JF_GEN = 2,
    JF_NS = 4,
    JF_LOOP = 8,
    JF_SAFE = 16,
    JF_KEYS = 32,
    JF_VALUES = 64,
    JF_ITEMS = 128
};
#define JF_VIEW (JF_KEYS | JF_VALUES | JF_ITEMS)

struct jj__val {
    uint8_t t, flags;
    union {
        int b;
        int64_t i;
        double f;
        struct {
            const char *p;
            size_t n;
        } s; /* JV_STR; JV_UNDEF: the hint "'x' is undefined" (p may be NULL) */
        jj__list *l;
        jj__dict *d;
        jj__fn *fn;
    } u;
};

struct jj__node {
    int kind, op;
    int line, col;
    jj__node *a, *b, *c, *d, *e;
    jj__node **kids;
    jj__node **vals;
    const char **names; /* keyword argument names (vals) / compare operators */
    int n_kids, n_vals;
    const char *s;
    size_t sn;
    jj__val v;
};

/* Operators (node op). */
enum {
    JO_ADD = 1,
    JO_SUB,
    JO_MUL,
    JO_DIV,
    JO_FLOORDIV,
    JO_MOD,
    JO_POW,
    JO_EQ,
    JO_NE,
    JO_LT,
    JO_LE,
    JO_GT,
    JO_GE,
    JO_IN,
    JO_NOTIN
};

jj__node *jj__parse_tokens(jj__env *e, jj__tok *toks, size_t n);

/* The parser's cursor (shared by the statement and expression parsers). */
typedef struct jj__parser {
    jj__env *e;
    jj__tok *t;
    size_t n, i;
    int depth;
    int loops; /* enclosing for loops (break / continue are allowed inside) */
} jj__parser;

jj__node *jj__node_new(jj__parser *p, int kind, const jj__tok *at);
jj__node *jj__parse_expr(jj__parser *p, bool with_cond);
jj__node *jj__parse_tuple(jj__parser *p, bool simplified, bool with_cond);
jj__node *jj__parse_filter_chain(jj__parser *p, jj__node *input);
void jj__parse_call_args(jj__parser *p, jj__node *call);
_Noreturn void jj__perr(jj__parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool jj__is_name(const jj__tok *t, const char *name);
bool jj__is_op(const jj__tok *t, const char *op);
const jj__tok *jj__cur(jj__parser *p);
const jj__tok *jj__next(jj__parser *p);
const jj__tok *jj__expect_op(jj__parser *p, const char *op);
const jj__tok *jj__expect_name(jj__parser *p, const char *what);
void jj__enter(jj__parser *p);
void jj__push_kid(jj__parser *p, jj__node ***arr, int *count, jj__node *k);
void jj__push_kw(jj__parser *p, jj__node *n, const char *name, jj__node *v);

/* ---- render state --------------------------------------------------------------------------- */
typedef struct jj__scope {
    struct jj__scope *up;
    jj__dict vars;
} jj__scope;

typedef struct jj__rt {
    jj__env *e;
    jj__buf *out;
    size_t max_output;
    uint64_t steps, max_steps;
    int depth, max_depth;
    const jj__node *at; /* the node being evaluated, for error positions */
    jj__scope *globals;
    jj__scope *cur; /* the scope names resolve in */
    int nest;       /* C recursion of evaluation and printing, bounded (JJ__MAX_NEST) */
} jj__rt;

/* Deeper values or expressions than this fail rather than exhaust the stack. */
#define JJ__MAX_NEST 1000
void jj__nest_in(jj__rt *r);

typedef jj__val (*jj__builtin)(jj__rt *r, jj__val self, jj__val *args, int n, const char **kwn,
                               jj__val *kwv, int nkw);

struct jj__fn {
    const char *name;
    jj__builtin fn;        /* builtins and bound methods */
    jj__val self;          /* the bound object */
    const jj__node *macro; /* macros and callers */
    jj__scope *closure;
    jj__val caller; /* a macro called from a call block */
};

/* the render state's failure and bounds (jj_rt.c) */
_Noreturn void jj__rfail(jj__rt *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void jj__step(jj__rt *r);

/* values */
jj__val jj__undef(const char *hint);
jj__val jj__none(void);
jj__val jj__bool(bool b);
jj__val jj__int(int64_t i);
jj__val jj__float(double f);
jj__val jj__str(const char *p, size_t n);
jj__val jj__cstr(const char *s);
jj__val jj__list_new(jj__rt *r, size_t cap);
jj__val jj__dict_new(jj__rt *r, size_t cap);
void jj__list_push(jj__rt *r, jj__list *l, jj__val v);
void jj__dict_set(jj__rt *r, jj__dict *d, jj__val k, jj__val v);
/* A key known to be new (a JSON object's: jansson refuses duplicates). */
void jj__dict_append(jj__rt *r, jj__dict *d, jj__val k, jj__val v);
jj__val *jj__dict_get(const jj__dict *d, jj__val k);
jj__val *jj__dict_gets(const jj__dict *d, const char *key);
jj__val jj__fn_new(jj__rt *r, const char *name, jj__builtin fn, jj__val self);
const char *jj__type_name(jj__val v);
bool jj__truthy(jj__val v);
bool jj__eq(jj__val a, jj__val b);
int jj__cmp(jj__rt *r, jj__val a, jj__val b); /* <0, 0, >0; type errors fail */
bool jj__is_num(jj__val v);
double jj__num(jj__val v);
/* Python str() and repr() appended to b. */
void jj__str_of(jj__rt *r, jj__buf *b, jj__val v);
void jj__repr(jj__rt *r, jj__buf *b, jj__val v);
jj__val jj__to_str(jj__rt *r, jj__val v);
/* markupsafe's escape(): & < > " ' as entities, flagged JF_SAFE (a safe string is kept) */
jj__val jj__escape(jj__rt *r, jj__val v);
void jj__fmt_float(char *out, size_t cap, double f);
/* Items to iterate: list items, dict keys, string characters; undefined: none. */
jj__list jj__iter(jj__rt *r, jj__val v);
int64_t jj__len(jj__rt *r, jj__val v);
/* attribute and item access (jj_access.c) */
jj__val jj__getattr(jj__rt *r, jj__val obj, const char *name, size_t n);
jj__val jj__getitem(jj__rt *r, jj__val obj, jj__val key);
bool jj__int_index(jj__val k, int64_t *i); /* an int or a bool as an index */
/* jinja2's make_attrgetter: path a string "a.b.0" looked up item by item, or an int index */
jj__val jj__attr_path(jj__rt *r, jj__val v, jj__val path);
/* Calls a builtin, a bound method or a macro (jj_eval.c). */
jj__val jj__call(jj__rt *r, jj__val fn, jj__val *args, int n, const char **kwn, jj__val *kwv,
                 int nkw);
/* Python's arithmetic (jj_arith.c): op is JO_ADD .. JO_POW; str % args */
jj__val jj__arith(jj__rt *r, int op, jj__val a, jj__val b);
jj__val jj__format_percent(jj__rt *r, jj__val fmt, jj__val args);
/* str methods shared with filters (jj_methods.c): which 'l', 'r' or 'b' (both); count -1: all */
jj__val jj__strip(jj__rt *r, jj__val s, jj__val chars, char which);
jj__val jj__replace(jj__rt *r, jj__val s, jj__val old, jj__val new, int64_t count);

/* ASCII classes (no locale) */
static inline bool jj__digit(int c) {
    return c >= '0' && c <= '9';
}
static inline bool jj__alpha(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* utf-8 and python string helpers */
size_t jj__u8_len(const char *s, size_t n);           /* code points */
size_t jj__u8_off(const char *s, size_t n, size_t k); /* byte offset of code point k */
uint32_t jj__u8_get(const char *s, size_t n, size_t *i);
void jj__u8_put(jj__env *e, jj__buf *b, uint32_t cp);
bool jj__py_space(uint32_t cp);
size_t jj__space_at(const char *s, size_t n, size_t i); /* length of a space at i, or 0 */
size_t jj__space_before(const char *s, size_t i);       /* length of a space ending at i */

/* letter case (jj_case.c); mode 'u' upper, 'l' lower, 't' str.title(), 'c' capitalize() */
jj__val jj__case(jj__rt *r, jj__val s, char mode);
bool jj__cp_cased(uint32_t c);

/* JSON */
jj__val jj__from_json(jj__rt *r, const struct json_t *j, int depth);
void jj__tojson(jj__rt *r, jj__buf *b, jj__val v, const char *indent, const char *item_sep,
                const char *key_sep, bool sort_keys, int level);

/* libraries: a filter by name (jj_filters.c), over which the single-value and the sequence
 * filters each answer for their own names (*done false: not one of theirs) */
jj__val jj__apply_filter(jj__rt *r, const char *name, jj__val in, jj__val *args, int n,
                         const char **kwn, jj__val *kwv, int nkw);
jj__val jj__value_filter(jj__rt *r, const char *name, jj__val in, jj__val *args, int n,
                         const char **kwn, jj__val *kwv, int nkw, bool *done);
jj__val jj__seq_filter(jj__rt *r, const char *name, jj__val in, jj__val *args, int n,
                       const char **kwn, jj__val *kwv, int nkw, bool *done);
/* A list marked as a generator (JF_GEN), as map, select and reverse give them. */
jj__val jj__gen(jj__val l);
bool jj__apply_test(jj__rt *r, const char *name, jj__val in, jj__val *args, int n);
bool jj__has_test(const char *name);
bool jj__has_filter(const char *name);
jj__val jj__method(jj__rt *r, jj__val obj, const char *name, size_t n, bool *found);
void jj__add_globals(jj__rt *r, jj__scope *g);

/* kwargs lookup for builtins (jj_rt.c): the value of keyword `name` or positional pos, or NULL */
jj__val *jj__arg(jj__val *args, int n, const char **kwn, jj__val *kwv, int nkw, int pos,
                 const char *name);

/* names in scopes (jj_scope.c) */
jj__val jj__scope_get(jj__rt *r, jj__scope *s, const char *name);
void jj__scope_set(jj__rt *r, jj__scope *s, const char *name, jj__val v);

/* evaluation */
jj__val jj__eval(jj__rt *r, const jj__node *n);
/* A filter chain whose innermost input is in (filter blocks, set blocks). */
jj__val jj__filter_value(jj__rt *r, const jj__node *chain, jj__val in);
/* Runs a statement list; returns 0, or JJ__BREAK / JJ__CONTINUE. */
enum { JJ__BREAK = 1, JJ__CONTINUE = 2 };
int jj__exec(jj__rt *r, jj__scope *s, const jj__node *body);
jj__val jj__eval_in(jj__rt *r, jj__scope *s, const jj__node *n);

#endif
