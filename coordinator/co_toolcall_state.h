/* coordinator/co_toolcall_state.h — the tool-call reader's state, and a call under way made,
 * announced and given in deltas. Not for other modules. */
#ifndef CO_TOOLCALL_STATE_H
#define CO_TOOLCALL_STATE_H

#include <jansson.h>

#include "coordinator/co_buf.h"
#include "coordinator/co_toolcall_formats.h"
#include "coordinator/co_toolcall_text.h"

struct co_toolcall {
    const co__tc_format *f;
    bool in_call;
    co_buf held; /* outside a call: a tail that may open one; inside: the call's text */
    unsigned long long seed;
    int n_calls; /* calls given (announced or whole): the next one's index */
    /* the call under way once its head (the name, the arguments' '{') is read: announced */
    json_t *cur; /* {"id", "type", "function": {"name", "arguments"}}, arguments still "" */
    size_t args_start, scanned, sent, args_end; /* offsets in held */
    bool args_done, in_str, esc;
    int depth;
    /* Kimi K3's argument sections, given as the JSON object they make as they arrive (k3_args'
     * text, fragment by fragment): the call is announced at its first section that reads */
    bool k3, k3_whole; /* sections ahead; the first one did not read: read whole at the close */
    int k3_in;         /* 0 between sections, 1 in a string's value, 2 in another type's */
    int k3_keys_n;     /* keys given */
    size_t k3_sec;     /* offset in held of the section under way */
    char k3_name[CO__TC_MAX_NAME + 1];
    char *k3_key, *k3_type;
    json_t *k3_keys; /* the keys given: a repeated one ends the arguments */
    co_buf args_out; /* the arguments as given; sent counts into it */
};

/* A call object {"id", "type", "function": {"name", "arguments"}}; its id id, or one made of the
 * seed and the call's index when id is NULL. */
json_t *co__tc_new_call(struct co_toolcall *p, const char *id, const char *name, const char *args);

/* d appended to deltas (NULL deltas: dropped); -1 when d is NULL or memory runs out. */
int co__tc_add_delta(json_t *deltas, json_t *d);

/* The head read: the call is given its id and name now (a first delta). */
int co__tc_announce(struct co_toolcall *p, const char *nm, size_t nl, const char *id, size_t il,
                    size_t args, json_t *deltas);

#endif
