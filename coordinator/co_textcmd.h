/* coordinator/co_textcmd.h — text in, text out on the command line: a prompt's ids from --prompt,
 * --chat or --messages (through the model's tokenizer and chat template), the generated text
 * streamed as it comes, and the `tokenize` / `detokenize` commands. */
#ifndef CO_TEXTCMD_H
#define CO_TEXTCMD_H

#include <stdio.h>

#include "coordinator/co_cli.h"
#include "tokenizer/tk.h"
#include "tokenizer/tk_chat.h"

struct vx_source;

typedef struct co_textcmd {
    tk_tokenizer *tok;
    tk_chat *chat; /* NULL for --prompt */
    tk_chat_parser *parser;
    tk_chat_opts copts;
    tk_stream stream;
    tk_text content, reasoning; /* the current token's text */
    int64_t n_stop;             /* 1 when a stop token ended generation */
} co_textcmd;

/* Loads the tokenizer of src and builds the prompt of o into prompt (appended). */
int co_textcmd_open(co_textcmd *x, const co_opts *o, const struct vx_source *src, tk_ids *prompt,
                    mw_err *err);
/* One generated token: writes its text to out (flushed) and any reasoning to stderr when asked.
 * Returns 1 when the token ends generation (nothing printed), 0 otherwise, -1 on error. */
int co_textcmd_emit(co_textcmd *x, const co_opts *o, int32_t id, FILE *out, mw_err *err);
/* Flushes held text and ends the output with a newline. */
int co_textcmd_finish(co_textcmd *x, const co_opts *o, FILE *out, mw_err *err);
void co_textcmd_close(co_textcmd *x);

/* `coordinator tokenize` / `coordinator detokenize` (argv after the command name); return the
 * process exit status. */
int co_tokenize_main(int argc, char **argv);
int co_detokenize_main(int argc, char **argv);

#endif
