/* coordinator/co_auth.c — the API keys of co_auth.h: reading them (an option, a file, the
 * environment), and checking a request's bearer token against their hashes with libsodium. */
#include "coordinator/co_auth.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define FILE_MAX (64 * 1024) /* bytes of a key file */

struct co_auth {
    int n;
    unsigned char hash[CO_AUTH_MAX_KEYS][crypto_generichash_BYTES];
};

int co_auth_key_check(const char *key, const char *what, mw_err *err) {
    const size_t n = strlen(key);
    if (n == 0 || n > CO_AUTH_KEY_MAX)
        return mw_errf(err, "%s: a key has 1 to %d characters", what, CO_AUTH_KEY_MAX);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)key[i] <= ' ' || (unsigned char)key[i] >= 0x7f)
            return mw_errf(err, "%s: a key is visible ASCII characters, without blanks", what);
    return 0;
}

static void hash_of(const char *s, size_t n, unsigned char *out) {
    crypto_generichash(out, crypto_generichash_BYTES, (const unsigned char *)s, n, NULL, 0);
}

static int add_key(co_auth *a, const char *key, const char *what, mw_err *err) {
    if (co_auth_key_check(key, what, err)) return -1;
    if (a->n == CO_AUTH_MAX_KEYS)
        return mw_errf(err, "%s: more than %d keys", what, CO_AUTH_MAX_KEYS);
    hash_of(key, strlen(key), a->hash[a->n++]);
    return 0;
}

static int add_file(co_auth *a, const char *path, mw_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return mw_errf(err, "--api-key-file %s: %s", path, strerror(errno));
    char *buf = malloc(FILE_MAX + 1);
    size_t len = buf ? fread(buf, 1, FILE_MAX + 1, f) : 0;
    const bool bad = ferror(f);
    fclose(f);
    if (!buf) return mw_errf(err, "out of memory");
    if (bad || len > FILE_MAX) {
        free(buf);
        return mw_errf(err, "--api-key-file %s: %s", path,
                       bad ? "cannot be read" : "larger than 64 KiB");
    }
    buf[len] = 0;
    int rc = 0, lines = 0, before = a->n;
    for (char *line = buf, *next; line && !rc; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        lines++;
        size_t n = strlen(line);
        while (n && (line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t'))
            line[--n] = 0;
        while (*line == ' ' || *line == '\t') line++;
        if (!*line || *line == '#') continue;
        char what[64];
        snprintf(what, sizeof what, "--api-key-file line %d", lines);
        rc = add_key(a, line, what, err);
    }
    sodium_memzero(buf, len);
    free(buf);
    if (!rc && a->n == before) rc = mw_errf(err, "--api-key-file %s: no key in it", path);
    return rc;
}

void co_auth_free(co_auth *a) {
    if (!a) return;
    sodium_memzero(a, sizeof *a);
    free(a);
}

int co_auth_new(const char *key, const char *key_file, const char *env_key, co_auth **out,
                mw_err *err) {
    *out = NULL;
    if (!key && !key_file && (!env_key || !*env_key)) return 0;
    if (sodium_init() < 0) return mw_errf(err, "libsodium failed to initialise");
    co_auth *a = calloc(1, sizeof *a);
    if (!a) return mw_errf(err, "out of memory");
    int rc = 0;
    if (key) rc = add_key(a, key, "--api-key", err);
    if (!rc && key_file) rc = add_file(a, key_file, err);
    if (!rc && !key && !key_file) rc = add_key(a, env_key, "$MOEWIRE_API_KEY", err);
    if (rc) {
        co_auth_free(a);
        return -1;
    }
    *out = a;
    return 0;
}

int co_auth_count(const co_auth *a) {
    return a ? a->n : 0;
}

bool co_auth_ok(const co_auth *a, const char *authorization) {
    if (!a) return true;
    if (!authorization || strncasecmp(authorization, "Bearer ", 7)) return false;
    const char *tok = authorization + 7;
    while (*tok == ' ') tok++;
    size_t n = strlen(tok);
    while (n && tok[n - 1] == ' ') n--;
    if (n == 0) return false;
    unsigned char h[crypto_generichash_BYTES];
    hash_of(tok, n, h);
    int match = 0;
    for (int i = 0; i < a->n; i++) /* every key compared: the time does not say which matched */
        match |= sodium_memcmp(h, a->hash[i], sizeof h) == 0;
    return match != 0;
}
