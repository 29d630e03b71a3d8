/* coordinator/co_toolcall_k3.h — Kimi K3's tool-call arguments (one json section, or argument
 * sections of a key, a type and a value each): read whole, and streamed as the JSON object they
 * make as they arrive. Not for other modules. */
#ifndef CO_TOOLCALL_K3_H
#define CO_TOOLCALL_K3_H

#include "coordinator/co_toolcall_state.h"

/* A K3 call's body (NAME" index="N"<|sep|> then its arguments) read whole: its name and its
 * arguments as compact JSON; -1 when it is malformed. */
int co__tc_k3_read(const char *s, size_t n, char **name, char **args);

/* s[0..n) as JSON string text, bare: without its quotes, escaped as jansson writes it, so that
 * the parts add up to k3_args' text; -1 when it is not UTF-8 (or memory runs out). */
int co__tc_put_json_str(co_buf *b, const char *s, size_t n, bool bare);

/* K3 sections are ahead of the call named nm, from args in held: nothing announced yet. */
int co__tc_k3_begin(struct co_toolcall *p, const char *nm, size_t nl, size_t args);

/* K3's argument sections from where it stopped, into args_out as k3_args writes them: a
 * string's value escaped as it arrives, another type's once its section closes (checked against
 * the type, written compact). The call is announced at its first section that reads; when the
 * first does not, the call is left to be read whole at its close; a later one ends the arguments
 * there (what follows goes to the text). The text added goes out as a delta. */
int co__tc_scan_k3(struct co_toolcall *p, json_t *deltas);

#endif
