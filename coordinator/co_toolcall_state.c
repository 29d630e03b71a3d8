/* coordinator/co_toolcall_state.c — a call under way: its object, its first delta
 * (co_toolcall_state.h). */
#include "coordinator/co_toolcall_state.h"

#include <stdio.h>

json_t *co__tc_new_call(struct co_toolcall *p, const char *id, const char *name, const char *args) {
    char gen[40];
    snprintf(gen, sizeof gen, "call_%012llx%04x", p->seed & 0xffffffffffffull,
             (unsigned)p->n_calls & 0xffff);
    return json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", id ? id : gen, "type", "function",
                     "function", "name", name, "arguments", args);
}

int co__tc_add_delta(json_t *deltas, json_t *d) {
    if (!deltas) return json_decref(d), 0;
    return !d || json_array_append_new(deltas, d) ? -1 : 0;
}

/* The head read: the call is given its id and name now (a first delta). */
int co__tc_announce(struct co_toolcall *p, const char *nm, size_t nl, const char *id, size_t il,
                    size_t args, json_t *deltas) {
    char name[CO__TC_MAX_NAME + 1], idb[CO__TC_MAX_NAME + 32];
    snprintf(name, sizeof name, "%.*s", (int)nl, nm);
    if (id)
        snprintf(idb, sizeof idb, "%.*s",
                 (int)(il < CO__TC_MAX_NAME + 31 ? il : CO__TC_MAX_NAME + 31), id);
    if (!(p->cur = co__tc_new_call(p, id ? idb : NULL, name, ""))) return -1;
    p->args_start = p->scanned = p->sent = args;
    p->args_done = p->in_str = p->esc = false;
    p->depth = 0;
    json_t *f = json_object_get(p->cur, "function");
    return co__tc_add_delta(deltas,
                            json_pack("{s:i, s:O, s:s, s:{s:O, s:s}}", "index", p->n_calls, "id",
                                      json_object_get(p->cur, "id"), "type", "function", "function",
                                      "name", json_object_get(f, "name"), "arguments", ""));
}
