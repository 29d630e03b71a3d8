/* coordinator/co_auth.h — API keys for the HTTP API (`serve --api-key`, `--api-key-file`,
 * $MOEWIRE_API_KEY), as vLLM and llama.cpp's server take them: with any key set, every /v1/
 * request must carry `Authorization: Bearer KEY` with one of them (401 otherwise); /health,
 * /metrics and CORS preflights stay open. Keys are kept as BLAKE2b hashes and a presented token is
 * hashed and compared with each in constant time, so neither a key's bytes nor its length leak
 * through timing. */
#ifndef CO_AUTH_H
#define CO_AUTH_H

#include <stdbool.h>

#include "util/mw_err.h"

#define CO_AUTH_KEY_MAX  256 /* bytes of a key */
#define CO_AUTH_MAX_KEYS 64

typedef struct co_auth co_auth;

/* Checks one key: 1..CO_AUTH_KEY_MAX visible ASCII characters (a bearer token has no blanks). */
int co_auth_key_check(const char *key, const char *what, mw_err *err);

/* The keys of `key` (one, or NULL), the file `key_file` (one key per line; blank lines and lines
 * starting with '#' skipped; NULL: none) and, when both are NULL, `env_key` (NULL or "": none).
 * *out is NULL when no key is set (the API is open). A malformed key or file is an error naming
 * it (never its bytes). */
int co_auth_new(const char *key, const char *key_file, const char *env_key, co_auth **out,
                mw_err *err);
void co_auth_free(co_auth *a);
int co_auth_count(const co_auth *a);

/* Does this Authorization header value ("" when absent) present one of the keys? NULL a: open. */
bool co_auth_ok(const co_auth *a, const char *authorization);

#endif
