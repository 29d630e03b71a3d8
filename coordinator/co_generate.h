/* coordinator/co_generate.h — `coordinator generate`: prefill a prompt, decode N tokens. */
#ifndef CO_GENERATE_H
#define CO_GENERATE_H

#include "coordinator/co_cli.h"

/* Runs the command; returns the process exit status (0, or 1 with a message on stderr). */
int co_generate(const co_opts *o);

#endif
