/* coordinator/co_oai_error.c — OpenAI's error object: filled by every check of a request
 * (co_oai_error.h), written as {"error": {...}}. */
#include "coordinator/co_oai_error.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The length of the UTF-8 sequence at s (at most n bytes), 0 when it is not one. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    const size_t len = s[0] < 0x80                             ? 1
                       : (s[0] & 0xe0) == 0xc0 && s[0] >= 0xc2 ? 2
                       : (s[0] & 0xf0) == 0xe0                 ? 3
                       : (s[0] & 0xf8) == 0xf0 && s[0] <= 0xf4 ? 4
                                                               : 0;
    if (!len || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    /* overlong forms, surrogates, beyond U+10FFFF */
    if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0) ||
        (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))
        return 0;
    return len;
}

/* Bytes that are not UTF-8 become '?': a message quotes the request (cut to a length, maybe in
 * the middle of a character), and JSON can only carry UTF-8. */
static void utf8_clean(char *s) {
    const size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        const size_t k = utf8_seq((const unsigned char *)s + i, n - i);
        if (k) {
            i += k;
        } else {
            s[i++] = '?';
        }
    }
}

int co_oai_fail(co_oai_error *e, int status, const char *param, const char *code, const char *fmt,
                ...) {
    e->status = status;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    e->code = code;
    e->type = status >= 500 ? "server_error" : "invalid_request_error";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    utf8_clean(e->message);
    utf8_clean(e->param);
    return -1;
}

void co_oai_error_json(const co_oai_error *e, co_buf *out) {
    json_t *err = json_pack("{s:s, s:s, s:o, s:o}", "message", e->message, "type",
                            e->type ? e->type : "invalid_request_error", "param",
                            e->param[0] ? json_string(e->param) : json_null(), "code",
                            e->code ? json_string(e->code) : json_null());
    json_t *root = json_pack("{s:o}", "error", err);
    char *s = root ? json_dumps(root, JSON_COMPACT) : NULL;
    if (s)
        co_buf_puts(out, s);
    else
        co_buf_puts(out, "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\"}}");
    free(s);
    json_decref(root);
}
