/* coordinator/co_toolcall_text.c — the tool-call reader's text readers (co_toolcall_text.h). */
#include "coordinator/co_toolcall_text.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

/* s[0..n) without the whitespace around it. */
void co__tc_trim(const char **s, size_t *n) {
    while (*n && co__tc_is_ws(**s)) (*s)++, (*n)--;
    while (*n && co__tc_is_ws((*s)[*n - 1])) (*n)--;
}

/* A function's name: printable, no space, at most CO__TC_MAX_NAME bytes. */
bool co__tc_good_name(const char *s, size_t n) {
    if (n == 0 || n > CO__TC_MAX_NAME) return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= ' ' || s[i] == '"' || s[i] == '<') return false;
    return true;
}

/* s[from..upto) up to its last whole character: the text may have been cut inside one. */
size_t co__tc_whole_chars(const char *s, size_t from, size_t upto) {
    for (size_t back = 1; back <= 3 && back <= upto - from; back++) {
        const unsigned char b = (unsigned char)s[upto - back];
        if (b < 0x80) break;
        if (b >= 0xc0) { /* a lead byte: its sequence whole or not */
            const size_t len = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : 2;
            if (len > back) upto -= back;
            break;
        }
    }
    return upto;
}

/* The longest tail of s that is a proper prefix of m (NULL m: none). */
size_t co__tc_partial_tail(const char *s, size_t n, const char *m) {
    if (!m) return 0;
    const size_t ml = strlen(m);
    for (size_t k = ml - 1 < n ? ml - 1 : n; k > 0; k--)
        if (!memcmp(s + n - k, m, k)) return k;
    return 0;
}

/* The arguments' text as a JSON object's compact text; NULL when it is not one. */
char *co__tc_args_text(const char *s, size_t n) {
    co__tc_trim(&s, &n);
    json_t *j = json_loadb(s, n, JSON_REJECT_DUPLICATES, NULL);
    char *t = json_is_object(j) ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return t;
}

/* An attribute value as K3 escapes it (&amp; &quot;) back to its text; NULL when malformed. */
char *co__tc_unescape_attr(const char *s, size_t n) {
    char *o = malloc(n + 1);
    size_t k = 0;
    for (size_t i = 0; o && i < n; i++) {
        if (s[i] == '&' && n - i >= 5 && !memcmp(s + i, "&amp;", 5))
            o[k++] = '&', i += 4;
        else if (s[i] == '&' && n - i >= 6 && !memcmp(s + i, "&quot;", 6))
            o[k++] = '"', i += 5;
        else
            o[k++] = s[i];
    }
    if (o) o[k] = '\0';
    return o;
}

/* The value of attribute `key="..."` in a tag's text, unescaped; NULL when absent. */
char *co__tc_attr_of(const char *tag, size_t n, const char *key) {
    char pat[32];
    snprintf(pat, sizeof pat, " %s=\"", key);
    const char *at = co__tc_find_in(tag, n, pat);
    if (!at) return NULL;
    const char *v = at + strlen(pat), *q = memchr(v, '"', (size_t)(tag + n - v));
    return q ? co__tc_unescape_attr(v, (size_t)(q - v)) : NULL;
}
