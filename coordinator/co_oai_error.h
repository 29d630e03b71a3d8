/* coordinator/co_oai_error.h — OpenAI's error object (message, type, param, code): what every
 * check of a request fills, naming the field it rejects. */
#ifndef CO_OAI_ERROR_H
#define CO_OAI_ERROR_H

#include "coordinator/co_buf.h"

typedef struct co_oai_error {
    int status;
    char message[512];
    char param[64];   /* "" for none */
    const char *type; /* "invalid_request_error", "server_error", ... */
    const char *code; /* NULL or "model_not_found", "context_length_exceeded", ... */
} co_oai_error;

/* Fills an error; returns -1. */
int co_oai_fail(co_oai_error *e, int status, const char *param, const char *code, const char *fmt,
                ...) __attribute__((format(printf, 5, 6)));
/* {"error": {...}} */
void co_oai_error_json(const co_oai_error *e, co_buf *out);

#endif
