/* coordinator/co_serve.h — `coordinator serve`: loads the model and the expert backend as
 * generate does, then answers the OpenAI API on an HTTP listener until SIGTERM or SIGINT, with
 * every request's decoding batched into shared steps (co_sched.h). */
#ifndef CO_SERVE_H
#define CO_SERVE_H

#include "coordinator/co_cli.h"

/* Runs the server; returns the exit status (0 after a signal, 1 when it could not start). */
int co_serve(const co_opts *o);

#endif
