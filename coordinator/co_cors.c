/* coordinator/co_cors.c — the CORS policy of co_cors.h: parsing --cors-origins, matching a
 * request's Origin against it, and the header lines of answers and preflights. Origins reach the
 * answer's headers only after they matched the policy and passed the character check below, so a
 * client cannot inject header lines through them. */
#include "coordinator/co_cors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ORIGIN_MAX  255
#define ORIGINS_MAX 64
#define MAX_AGE_S   600 /* seconds a browser may reuse a preflight's answer */

typedef enum cors_mode { CORS_ANY, CORS_LOCALHOST, CORS_NONE, CORS_LIST } cors_mode;

struct co_cors {
    cors_mode mode;
    int n;
    char *origins[ORIGINS_MAX];
};

/* The host of "scheme://host[:port]" as [*host, *host + *len), or false when origin is not of
 * that shape (http or https, a non-empty host, digits after a colon, nothing after). */
static bool split_origin(const char *origin, const char **host, size_t *len) {
    const char *p;
    if (!strncasecmp(origin, "http://", 7))
        p = origin + 7;
    else if (!strncasecmp(origin, "https://", 8))
        p = origin + 8;
    else
        return false;
    const char *end = p;
    if (*end == '[') { /* an IPv6 literal */
        end = strchr(end, ']');
        if (!end) return false;
        end++;
    } else {
        while (*end && *end != ':') {
            const char ch = *end;
            if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '-' || ch == '.'))
                return false;
            end++;
        }
    }
    if (end == p) return false;
    *host = p;
    *len = (size_t)(end - p);
    if (*end == ':') {
        const char *port = ++end;
        while (*end >= '0' && *end <= '9') end++;
        if (end == port || end - port > 5) return false;
    }
    return *end == 0;
}

/* Characters an origin may carry into a header line. */
static bool origin_chars_ok(const char *s) {
    if (!*s || strlen(s) > ORIGIN_MAX) return false;
    for (; *s; s++)
        if ((unsigned char)*s <= ' ' || (unsigned char)*s >= 0x7f) return false;
    return true;
}

static bool is_localhost(const char *origin) {
    const char *host;
    size_t n;
    if (!split_origin(origin, &host, &n)) return false;
    static const char *const names[] = {"localhost", "127.0.0.1", "[::1]"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (n == strlen(names[i]) && !strncasecmp(host, names[i], n)) return true;
    return false;
}

void co_cors_free(co_cors *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) free(c->origins[i]);
    free(c);
}

int co_cors_new(const char *spec, co_cors **out, mw_err *err) {
    *out = NULL;
    co_cors *c = calloc(1, sizeof *c);
    if (!c) return mw_errf(err, "out of memory");
    if (!spec || !strcmp(spec, "*")) {
        c->mode = CORS_ANY;
    } else if (!strcmp(spec, "localhost")) {
        c->mode = CORS_LOCALHOST;
    } else if (!strcmp(spec, "none")) {
        c->mode = CORS_NONE;
    } else {
        c->mode = CORS_LIST;
        const char *p = spec;
        while (*p) {
            const char *comma = strchr(p, ',');
            size_t len = comma ? (size_t)(comma - p) : strlen(p);
            while (len && (*p == ' ' || *p == '\t')) p++, len--;
            while (len && (p[len - 1] == ' ' || p[len - 1] == '\t')) len--;
            if (len && p[len - 1] == '/') len--; /* browsers send origins without the slash */
            char one[ORIGIN_MAX + 1];
            const char *host;
            size_t hn;
            if (len == 0 || len > ORIGIN_MAX ||
                (memcpy(one, p, len), one[len] = 0, !split_origin(one, &host, &hn)) ||
                !origin_chars_ok(one)) {
                co_cors_free(c);
                return mw_errf(err,
                               "--cors-origins: '%.*s' is not an origin like https://host[:port] "
                               "(or use *, localhost or none)",
                               (int)(len > 80 ? 80 : len), p);
            }
            if (c->n == ORIGINS_MAX) {
                co_cors_free(c);
                return mw_errf(err, "--cors-origins: more than %d origins", ORIGINS_MAX);
            }
            if (!(c->origins[c->n] = strdup(one))) {
                co_cors_free(c);
                return mw_errf(err, "out of memory");
            }
            c->n++;
            p = comma ? comma + 1 : p + len;
        }
        if (c->n == 0) {
            co_cors_free(c);
            return mw_errf(err, "--cors-origins: no origin given (use *, localhost or none)");
        }
    }
    *out = c;
    return 0;
}

bool co_cors_allowed(const co_cors *c, const char *origin) {
    if (!c || !origin || !*origin) return false;
    switch (c->mode) {
    case CORS_ANY:
        return true;
    case CORS_LOCALHOST:
        return origin_chars_ok(origin) && is_localhost(origin);
    case CORS_LIST:
        for (int i = 0; i < c->n; i++)
            if (!strcasecmp(origin, c->origins[i])) return true;
        return false;
    default:
        return false;
    }
}

/* Appends the line "name: value" at buf + n; returns the new length, or cap when it does not fit.
 */
static size_t put(char *buf, size_t cap, size_t n, const char *name, const char *value) {
    if (n >= cap) return n;
    int k = snprintf(buf + n, cap - n, "%s: %s\r\n", name, value);
    if (k < 0 || (size_t)k >= cap - n) { /* never a partial line */
        buf[n] = 0;
        return cap;
    }
    return n + (size_t)k;
}

size_t co_cors_headers(const co_cors *c, const char *origin, char *buf, size_t cap) {
    if (!cap) return 0;
    buf[0] = 0;
    if (!c || c->mode == CORS_NONE) return 0;
    size_t n = 0;
    if (c->mode == CORS_ANY) {
        if (origin && *origin) n = put(buf, cap, n, "Access-Control-Allow-Origin", "*");
    } else { /* the answer depends on the Origin: caches must keep them apart */
        if (co_cors_allowed(c, origin)) n = put(buf, cap, n, "Access-Control-Allow-Origin", origin);
        n = put(buf, cap, n, "Vary", "Origin");
    }
    return n < cap ? n : strlen(buf);
}

/* A list of header names (token characters, commas and blanks) short enough to echo. */
static bool header_list_ok(const char *s) {
    if (!s || !*s || strlen(s) > 512) return false;
    for (; *s; s++) {
        const unsigned char ch = (unsigned char)*s;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              strchr("!#$%&'*+-.^_`|~, \t", ch)))
            return false;
    }
    return true;
}

size_t co_cors_preflight_headers(const char *methods, const char *req_headers, char *buf,
                                 size_t cap) {
    if (!cap) return 0;
    buf[0] = 0;
    size_t n = put(buf, cap, 0, "Access-Control-Allow-Methods", methods);
    n = put(buf, cap, n, "Access-Control-Allow-Headers",
            header_list_ok(req_headers)
                ? req_headers
                : "Authorization, Content-Type, OpenAI-Organization, OpenAI-Project");
    char age[16];
    snprintf(age, sizeof age, "%d", MAX_AGE_S);
    n = put(buf, cap, n, "Access-Control-Max-Age", age);
    return n < cap ? n : strlen(buf);
}
