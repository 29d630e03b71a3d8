/* coordinator/co_admin.h — node lists handed to a serving coordinator over /admin/nodes: queued by
 * the loop thread, applied by the model thread between steps (the remote backend is changed only
 * there), the outcome kept for GET /admin/nodes. */
#ifndef CO_ADMIN_H
#define CO_ADMIN_H

#include <stdbool.h>

#include "util/mw_err.h"

/* The longest node list accepted (the same bound as a --nodes file). */
#define CO_ADMIN_MAX_LIST 65536

typedef struct co_admin co_admin;

co_admin *co_admin_new(void);
void co_admin_free(co_admin *a);
/* Loop thread: queues list (one line of endpoints, surrounding blanks dropped; a list queued
 * before and not taken yet is replaced). Its request number, or -1 with err. */
long long co_admin_queue(co_admin *a, const char *list, mw_err *err);
/* Model thread: the list queued last (the caller frees it) and its number, or NULL. */
char *co_admin_take(co_admin *a, long long *id);
/* Model thread: how request id ended. */
void co_admin_done(co_admin *a, long long id, bool ok, const char *msg);
/* {"queued": N, "applied": M, "ok": bool, "message": "..."}: malloc'd JSON text. */
char *co_admin_state(co_admin *a);

#endif
