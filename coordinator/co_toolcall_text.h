/* coordinator/co_toolcall_text.h — the small text readers every part of the tool-call reader
 * uses: whitespace, markers, names, whole characters, arguments as JSON, tag attributes. */
#ifndef CO_TOOLCALL_TEXT_H
#define CO_TOOLCALL_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#define CO__TC_MAX_NAME 64 /* bytes of a function's name */

static inline bool co__tc_is_ws(char c) {
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

static inline const char *co__tc_find_in(const char *s, size_t n, const char *m) {
    return memmem(s, n, m, strlen(m));
}

/* s[0..n) without the whitespace around it. */
void co__tc_trim(const char **s, size_t *n);

/* A function's name: printable, no space, at most CO__TC_MAX_NAME bytes. */
bool co__tc_good_name(const char *s, size_t n);

/* s[from..upto) up to its last whole character: the text may have been cut inside one. */
size_t co__tc_whole_chars(const char *s, size_t from, size_t upto);

/* The longest tail of s that is a proper prefix of m (NULL m: none). */
size_t co__tc_partial_tail(const char *s, size_t n, const char *m);

/* The arguments' text as a JSON object's compact text; NULL when it is not one. */
char *co__tc_args_text(const char *s, size_t n);

/* An attribute value as K3 escapes it (&amp; &quot;) back to its text; NULL when malformed. */
char *co__tc_unescape_attr(const char *s, size_t n);

/* The value of attribute `key="..."` in a tag's text, unescaped; NULL when absent. */
char *co__tc_attr_of(const char *tag, size_t n, const char *key);

#endif
