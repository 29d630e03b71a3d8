/* grammar/gr_internal.h — the compiled grammar's nodes, shared by the schema compiler
 * (gr_schema.c) and the automaton (gr_match.c). */
#ifndef GR_INTERNAL_H
#define GR_INTERNAL_H

#include <stdint.h>

#include "grammar/gr.h"

typedef enum gr_kind {
    GR_ANY,      /* any JSON value */
    GR_OBJECT,   /* props, or (none) any keys with `extra` values */
    GR_ARRAY,    /* items */
    GR_STRING,   /* any string */
    GR_NUMBER,   /* any number */
    GR_INTEGER,  /* an integer */
    GR_LITERALS, /* one of the texts (enum, const, true, false, null) */
    GR_ANYOF,    /* the alternative whose first bytes hold the value's first byte */
    GR_REF,      /* a $ref not resolved yet (compilation only) */
} gr_kind;

/* A string pattern's automaton (gr_regex.c): a state is a set of positions, bit GR_RE_START
 * the start; symbols are ASCII characters and GR_RE_NONASCII (any other character). */
#define GR_RE_POS      63
#define GR_RE_START    63
#define GR_RE_NONASCII 128
typedef struct gr_regex {
    int n;
    uint64_t cls[GR_RE_POS][2]; /* the ASCII characters each position takes */
    bool nonascii[GR_RE_POS];   /* and whether it takes the others */
    uint64_t follow[GR_RE_POS], first, last;
    uint16_t dist[GR_RE_POS]; /* the fewest characters after a position to an accepting state */
    bool nullable;
} gr_regex;
/* why: the reason a pattern is refused (naming the construct). */
int gr_regex_compile(const char *pat, size_t len, gr_regex **out, char *why, size_t cap);
/* The state after character c (ASCII or GR_RE_NONASCII); 0: refused. */
uint64_t gr_regex_step(const gr_regex *re, uint64_t st, int c);
bool gr_regex_accepts(const gr_regex *re, uint64_t st);
/* The fewest characters after state st to an accepting state. */
uint32_t gr_regex_need(const gr_regex *re, uint64_t st);

typedef struct gr_node {
    gr_kind kind;
    /* object */
    int n_props;
    char **pname; /* the key as it appears inside the quotes (JSON-escaped) */
    size_t *plen;
    int *pval;
    uint64_t required;
    int extra; /* no props: the values' node; -1: no keys at all */
    /* array */
    int items;
    uint32_t min_items, max_items;
    /* literals: JSON texts, compact */
    int n_lit;
    char **lit;
    size_t *llen;
    /* anyOf */
    int n_alt;
    int *alt;
    /* string: characters (an escape is one), and a pattern (NULL: none) */
    uint32_t min_len, max_len;
    gr_regex *re;
    uint8_t first[32]; /* bytes a value of this node may start with */
} gr_node;

/* One alternative of the output: literal text, a value, literal text. */
typedef struct gr_branch {
    int root;
    char prefix[GR_MAX_AFFIX + 1], suffix[GR_MAX_AFFIX + 1];
    uint16_t plen, slen;
} gr_branch;

struct gr_grammar {
    gr_node *v;
    int n, cap;
    int root;                               /* the value being compiled (the last branch's) */
    int any, any_object, any_array, string; /* shared nodes of "any value" */
    gr_branch br[GR_MAX_BRANCHES];
    int n_br;
};

#endif
