/* coordinator/co_admin.c — the /admin/nodes queue (see co_admin.h): one pending list under a
 * mutex, the last outcome beside it. */
#include "coordinator/co_admin.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct co_admin {
    pthread_mutex_t lock;
    char *pending;
    long long queued, taken, applied;
    bool ok;
    char msg[512];
};

co_admin *co_admin_new(void) {
    co_admin *a = calloc(1, sizeof *a);
    if (a) pthread_mutex_init(&a->lock, NULL);
    return a;
}

void co_admin_free(co_admin *a) {
    if (!a) return;
    pthread_mutex_destroy(&a->lock);
    free(a->pending);
    free(a);
}

long long co_admin_queue(co_admin *a, const char *list, mw_err *err) {
    const char *b = list + strspn(list, " \t\r\n");
    size_t n = strlen(b);
    while (n && strchr(" \t\r\n", b[n - 1])) n--;
    if (!n) return mw_errf(err, "an empty node list (drain every node? stop the server instead)");
    if (n > CO_ADMIN_MAX_LIST)
        return mw_errf(err, "the node list has %zu bytes, at most %d", n, CO_ADMIN_MAX_LIST);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)b[i] < 0x20 || b[i] == 0x7f)
            return mw_errf(err,
                           "the node list is one line of endpoints (a control character at "
                           "byte %zu)",
                           i);
    char *copy = strndup(b, n);
    if (!copy) return mw_errf(err, "out of memory");
    pthread_mutex_lock(&a->lock);
    free(a->pending);
    a->pending = copy;
    const long long id = ++a->queued;
    pthread_mutex_unlock(&a->lock);
    return id;
}

char *co_admin_take(co_admin *a, long long *id) {
    pthread_mutex_lock(&a->lock);
    char *l = a->pending;
    a->pending = NULL;
    *id = a->taken = a->queued;
    pthread_mutex_unlock(&a->lock);
    return l;
}

void co_admin_done(co_admin *a, long long id, bool ok, const char *msg) {
    pthread_mutex_lock(&a->lock);
    a->applied = id;
    a->ok = ok;
    snprintf(a->msg, sizeof a->msg, "%s", msg ? msg : "");
    pthread_mutex_unlock(&a->lock);
}

char *co_admin_state(co_admin *a) {
    pthread_mutex_lock(&a->lock);
    json_t *o = json_pack("{s:I, s:I, s:b, s:s}", "queued", (json_int_t)a->queued, "applied",
                          (json_int_t)a->applied, "ok", a->ok, "message", a->msg);
    pthread_mutex_unlock(&a->lock);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}
