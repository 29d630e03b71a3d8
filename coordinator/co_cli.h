/* coordinator/co_cli.h — the coordinator's command-line options: one table of options (name,
 * argument, help, setter) and one parser, so every subcommand and backend extends the same
 * table. */
#ifndef CO_CLI_H
#define CO_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "coordinator/co_backend.h"
#include "kernels/kn.h"
#include "model/md_sampler.h"
#include "tokenizer/tk_chat.h"
#include "util/mw_err.h"
#include "wire/wr_codec.h"

typedef struct co_opts {
    const char *model; /* GGUF file or vindex directory */
    int32_t *tokens;   /* prompt ids (malloc'ed) */
    int64_t n_tokens;
    /* text in, text out (coordinator/co_text.h): exactly one of tokens, prompt, chat, messages */
    const char *prompt;             /* plain text; special-token text is parsed */
    tk_msgs chat;                   /* --chat "role: text" messages, in order */
    const char *messages;           /* --messages FILE.json (an OpenAI message list) */
    const char *chat_template;      /* --chat-template NAME */
    const char *chat_template_file; /* serve --chat-template-file FILE.jinja */
    int thinking;                   /* --think on|off: 1 / 0, -1 the model's default */
    bool show_reasoning;            /* --reasoning: stream the reasoning to stderr */
    int64_t max_tokens;             /* tokens to generate */
    const char *logits_out;
    const char *experts; /* expert backend name (co_backend.h) */
    kn_numerics numerics;
    md_sampler_opts sampling; /* --temperature (0 = greedy), --top-p, --top-k, --min-p, the
                                 penalties, --seed */
    int threads;
    int64_t n_ctx;     /* 0 = prompt + max-tokens */
    kn_type kv_type;   /* the KV cache's rows: f32 (default), f16 or bf16 */
    int micro_batches; /* --micro-batches: 0 = auto, else fixed (md_ctx_params) */
    bool pin; /* copy streamed weights onto huge pages (md_model_pin_dense, local experts) */
    const char *trace_routing; /* routing trace file (coordinator/co_trace.h), NULL: none */
    /* remote experts (coordinator/co_backend.h) */
    const char *nodes;         /* comma-separated node endpoints */
    char *nodes_buf;           /* --nodes @FILE: the file's text, which nodes points into */
    const char *nodes_file;    /* that FILE (serve reads it again on SIGHUP), or NULL */
    const char *topology_file; /* --topology: the nodes are its hosts (read again on SIGHUP) */
    int loopback;              /* start this many local expert nodes */
    int node_threads;          /* threads per loopback node */
    bool node_affinity;        /* loopback nodes bind their threads to CPUs (co_loopback_opts) */
    bool exact;                /* exact mode: per-assignment replies reduced in selection order */
    wr_codec wire;             /* row codec on the wire */
    int deadline_ms;           /* per layer */
    const char *curve_secret;  /* the coordinator's CURVE key pair file */
    bool curve;                /* loopback nodes on CURVE, with keys made for the run */
    int down_ms;               /* a node silent this long is down (0: 750) */
    bool on_missing_skip;      /* --on-missing skip */
    int replicas;              /* loopback: owners per expert (default 1) */
    /* serve (coordinator/co_serve.h) */
    const char *listen;     /* "host:port" */
    const char *ready_file; /* written with the server's URL once it accepts requests */
    const char *served_name;
    int max_seqs;              /* KV slots (0: from --kv-mb, else the default) */
    int64_t kv_mb;             /* KV budget in MiB (0: none) */
    int chunk;                 /* prompt rows per step */
    int64_t cache_mb;          /* prompt cache budget in MiB (0: off) */
    int max_queue;             /* requests waiting for a slot */
    int64_t max_body;          /* request body bytes */
    int64_t max_head;          /* request line and headers */
    int max_headers;           /* header lines */
    int64_t max_held;          /* request bytes every connection together holds */
    int max_conns;             /* connections at once */
    int idle_timeout_ms;       /* a kept-alive connection with no next request */
    int64_t max_unsent;        /* a stream's bytes its client has not taken */
    int stall_timeout_ms;      /* a stream held back this long is cancelled */
    int max_messages;          /* chat messages of a request */
    int max_logit_bias;        /* logit_bias entries of a request */
    int64_t max_prompt_tokens; /* prompt tokens of a request, every prompt together */
    int request_timeout_ms;    /* a request must arrive within this */
    int grace_ms;              /* SIGTERM: time for in-flight requests */
    const char *cors;          /* --cors-origins policy (co_cors.h; NULL: "*") */
    const char *api_key;       /* --api-key (NULL: none) */
    const char *api_key_file;  /* --api-key-file (NULL: none) */
} co_opts;

typedef struct co_option {
    const char *name; /* "--model" */
    const char *arg;  /* argument name for help, NULL for a flag */
    const char *help;
    int (*set)(co_opts *o, const char *val, mw_err *err);
} co_option;

/* Defaults: local experts, q8 numerics, greedy, top-p 1, seed 0, one thread per CPU. */
void co_opts_init(co_opts *o);
void co_opts_free(co_opts *o);

/* Parses argv[0..argc) (after the subcommand) into o. Unknown options, missing or malformed
 * values are errors naming the option. "-h"/"--help" sets *help. */
int co_cli_parse(int argc, char **argv, co_opts *o, int *help, mw_err *err);
/* Checks what `generate` needs (model, one prompt form, max-tokens). */
int co_cli_check_generate(const co_opts *o, mw_err *err);
/* Checks what `serve` needs (model; no prompt options). */
int co_cli_check_serve(const co_opts *o, mw_err *err);
/* What generate and serve do, and the options they take (the program prints the commands). */
void co_cli_usage(FILE *f);
/* The expert backend's options out of the command line's. */
co_backend_opts co_cli_backend_opts(const co_opts *o);
/* Reads a --nodes file (one line of at most 1 MiB): *list points into *buf (replaced), white
 * space around it dropped. */
int co_cli_read_nodes(const char *path, char **buf, const char **list, mw_err *err);

#endif
