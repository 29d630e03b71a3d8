/* template/jj.h — a Jinja template engine for the subset Hugging Face chat templates use, sandboxed
 * like transformers' ImmutableSandboxedEnvironment (trim_blocks and lstrip_blocks on, the
 * loopcontrols extension, tojson with ensure_ascii off, raise_exception and strftime_now).
 *
 * A template is parsed once and rendered many times, from any number of threads at once. Rendering
 * is bounded (output bytes, memory, steps, macro recursion) and touches no file or environment: the
 * only inputs are the template and the context handed in. Errors name the template's line and
 * column ("line 3 column 14: unexpected 'endfor'"). */
#ifndef JJ_H
#define JJ_H

#include <stddef.h>
#include <stdint.h>

#include "util/mw_err.h"

struct json_t;
typedef struct jj_template jj_template;

typedef struct jj_limits {
    size_t max_output;  /* bytes the render may produce */
    size_t max_memory;  /* bytes of values the render may build */
    uint64_t max_steps; /* expression evaluations and loop iterations */
    int max_depth;      /* nested macro calls */
} jj_limits;

/* The defaults: 16 MiB output, 256 MiB memory, 50 million steps, depth 64. */
jj_limits jj_default_limits(void);

/* Parses src[0..len) (UTF-8; need not be NUL-terminated). */
int jj_parse(const char *src, size_t len, jj_template **out, mw_err *err);
void jj_free(jj_template *t);

/* Renders with the variables of the JSON object ctx (NULL: none). *out is malloc'd and
 * NUL-terminated; *out_len excludes the NUL. lim NULL: the defaults. */
int jj_render(const jj_template *t, const struct json_t *ctx, const jj_limits *lim, char **out,
              size_t *out_len, mw_err *err);

#endif
