/* grammar/gr.h — constrained decoding: a JSON schema (or "any JSON object") compiled to a
 * pushdown automaton over bytes, and per step the set of vocabulary tokens whose bytes the
 * automaton accepts from its current state (a mask over the logits).
 *
 * What a schema may use: type (one or a list), properties + required, additionalProperties
 * (false, true or a schema; with properties given only those keys are generated, which every
 * reading of the schema accepts), items, minItems / maxItems, minLength / maxLength (characters;
 * an escape is one), pattern on a string (gr_regex.c: ECMA syntax, searched unless anchored;
 * ASCII literals, classes [...] [^...] . \d \w \s and their negations, escapes, groups ( ) and
 * (?: ), alternation, ? * + {m} {m,} {m,n} (lazy forms too), ^ and $ at the ends; at most 63
 * positions once repeated; refused by name: back-references, lookaround, word boundaries,
 * Unicode properties, non-ASCII characters in the pattern, anchors inside it, minLength beside
 * it; a string under a pattern is written without escapes, so quotes, backslashes and control
 * characters are not generated), enum, const, anyOf (alternatives that start with different
 * bytes: "a string or null", not "one object or another"), $ref to "#/$defs/NAME" or
 * "#/definitions/NAME" (recursion included), and the annotations title, description, default,
 * examples, $schema, $id, $comment. Anything else (format, minimum, oneOf, allOf, ...) is refused
 * with an error naming the keyword and where it is, never ignored.
 *
 * The generated text is compact JSON: no whitespace except one optional space after ':' and ','
 * (the way tokenizers split "a": 1, "b"), so a model cannot stall in whitespace. Numbers have at
 * most GR_MAX_NUMBER bytes and values nest GR_MAX_DEPTH deep at most.
 *
 * The vocabulary (token byte strings, and which ids end the generation) is held once per model as
 * a trie in depth-first order: the mask walks it carrying the automaton's state down each byte
 * and skips a whole subtree at the first byte refused, so a step costs the surviving prefixes,
 * not vocabulary × token length. A matcher keeps the masks of the states it met last (a string's
 * body is one state however long it runs). */
#ifndef GR_H
#define GR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/mw_err.h"

#define GR_MAX_DEPTH    24  /* nested values */
#define GR_MAX_NUMBER   32  /* bytes of one number */
#define GR_MAX_PROPS    64  /* properties of one object, alternatives of one enum */
#define GR_MAX_BRANCHES 64  /* alternatives of gr_compile_alts */
#define GR_MAX_AFFIX    256 /* bytes of one alternative's prefix or suffix */

struct json_t;
typedef struct gr_grammar gr_grammar;

/* schema NULL: any JSON object (response_format json_object). The error names the unsupported
 * keyword and its place ("/properties/a/pattern"). */
int gr_compile(const struct json_t *schema, gr_grammar **out, mw_err *err);
/* The same from a schema's JSON text. */
int gr_compile_text(const char *schema, size_t len, gr_grammar **out, mw_err *err);
void gr_free(gr_grammar *g);
/* n alternatives (at most GR_MAX_BRANCHES): the output is prefixes[i], a value of schemas[i],
 * suffixes[i] for one i (a forced tool call: the call's text up to its arguments, the tool's
 * parameters, the text that closes the call). The prefix picks the alternative: none may be a
 * prefix of another (nor empty, with n > 1), each at most GR_MAX_AFFIX bytes. A schema's $refs
 * are its own. */
int gr_compile_alts(const struct json_t *const *schemas, const char *const *prefixes,
                    const char *const *suffixes, int n, gr_grammar **out, mw_err *err);

/* ---- bytes ---------------------------------------------------------------------------------- */

/* The automaton's state: a stack of frames, copied by value (small). */
typedef struct gr_frame {
    uint16_t node;
    uint8_t phase, aux;
    uint8_t started; /* the value's first byte came */
    uint32_t n;
    uint64_t seen, cand;
} gr_frame;

typedef struct gr_state {
    uint8_t depth; /* frames in use; 0 with done: the value is complete */
    bool done;
    bool chosen;        /* the alternative is known (its prefix written) */
    uint8_t br;         /* which, once chosen */
    uint16_t pre, post; /* bytes of the alternative's prefix and suffix written */
    uint64_t cand;      /* before: the alternatives whose prefix the bytes so far begin */
    gr_frame f[GR_MAX_DEPTH];
} gr_state;

void gr_state_init(const gr_grammar *g, gr_state *s);
/* Feeds one byte: 0, or -1 when the grammar refuses it (s is then unspecified). */
int gr_feed(const gr_grammar *g, gr_state *s, uint8_t b);
/* Whether the text so far is a complete value (the generation may end here). */
bool gr_complete(const gr_grammar *g, const gr_state *s);
/* Whole text: accepted as a complete value. */
bool gr_accepts(const gr_grammar *g, const char *s, size_t n);

/* ---- tokens --------------------------------------------------------------------------------- */

typedef struct gr_vocab gr_vocab;

/* n tokens: bytes[i] of lens[i] (a length of 0: a token that never matches, such as a control
 * token), and the ids that end a generation (allowed only once the value is complete). */
int gr_vocab_new(const char *const *bytes, const size_t *lens, int32_t n, const int32_t *eos,
                 int n_eos, gr_vocab **out, mw_err *err);
void gr_vocab_free(gr_vocab *v);
int32_t gr_vocab_size(const gr_vocab *v);
/* The token whose bytes are these (not an end id), or -1. */
int32_t gr_vocab_find(const gr_vocab *v, const char *bytes, size_t len);

typedef struct gr_matcher gr_matcher;

int gr_matcher_new(const gr_grammar *g, const gr_vocab *v, gr_matcher **out, mw_err *err);
void gr_matcher_free(gr_matcher *m);
/* The allowed tokens now: a bitset of (n + 63) / 64 words, valid until the next call. */
const uint64_t *gr_matcher_mask(gr_matcher *m);
/* Sets the logits of the tokens not allowed to -inf (n: the row's length, the vocabulary's or
 * more: ids past the vocabulary are refused too). Returns the number of tokens allowed. */
int64_t gr_matcher_apply(gr_matcher *m, float *logits, int64_t n);
/* The token sampled: 0, 1 when it ends the generation (an end id, the value complete), -1 when
 * the grammar refuses it. */
int gr_matcher_accept(gr_matcher *m, int32_t token);
bool gr_matcher_complete(const gr_matcher *m);

#endif
