/* coordinator/co_trace.h — `--trace-routing FILE` for generate and serve: a routing-trace writer
 * (vindex/vx_trace.h) for the loaded model, attached to a forward context as its route sink, so
 * the in-process and the remote expert backends are traced alike. */
#ifndef CO_TRACE_H
#define CO_TRACE_H

#include <stdio.h>

#include "model/md_model.h"
#include "util/mw_err.h"
#include "vindex/vx_source.h"

typedef struct co_trace co_trace;

/* Creates the trace file for src's model (a GGUF source's fingerprint is computed here when not
 * yet known: it reads every tensor once, and says so on stderr). */
int co_trace_open(const char *path, const vx_source *src, const md_model *m, co_trace **out,
                  mw_err *err);
/* Makes ctx's forward passes write to the trace (until co_trace_close). */
void co_trace_attach(co_trace *t, md_ctx *ctx);
/* Finishes the file and prints one line about it on `report` (may be NULL); frees t (NULL is
 * fine). -1 when the file could not be completed. */
int co_trace_close(co_trace *t, FILE *report, mw_err *err);

#endif
