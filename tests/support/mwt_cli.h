/* tests/support/mwt_cli.h — the project's programs as the command-line tests run them: a run
 * whose failure shows the program's stderr, a small synthetic model written by `vindex synth`,
 * and `coordinator generate` on a prompt, instead of a copy of each in every test. */
#ifndef MWT_CLI_H
#define MWT_CLI_H

/* mwt_run with stdout to *out and stderr to *err (each when given); when err is not taken and the
 * program fails, its stderr is printed with the exit status. Returns the exit status. */
int mwt_run_shown(char *const *argv, char **out, char **err, int timeout_ms);

/* `vindex synth OPTS... --format vindex OUT` (opts NULL-terminated). Returns its exit status; its
 * stderr is printed when it fails. */
int mwt_synth(const char *out, const char *const *opts);

/* The shape of a small gpt-oss model: 4 attention and 2 KV heads of 64, a vocabulary of 300. */
typedef struct mwt_gpt_oss {
    int layers, hidden, experts, top_k, expert_ff, seed;
} mwt_gpt_oss;
/* mwt_synth of that shape; extra (NULL-terminated, may be NULL) adds synth options. */
int mwt_synth_gpt_oss(const char *out, mwt_gpt_oss shape, const char *const *extra);

/* How a test runs `coordinator generate`: the same prompt and length every time, and a bound. */
typedef struct mwt_gen {
    const char *prompt;     /* --tokens */
    const char *max_tokens; /* --max-tokens */
    int timeout_ms;
} mwt_gen;
/* `coordinator generate --model MODEL --tokens PROMPT --max-tokens MAX_TOKENS --numerics NUMERICS
 * --threads 1 [--logits-out LOGITS] EXTRA...` (logits NULL: none; extra NULL-terminated, may be
 * NULL), run as mwt_run_shown runs it (its stderr to *err when err is given). Returns the exit
 * status. */
int mwt_generate(const mwt_gen *how, const char *model, const char *numerics, const char *logits,
                 const char *const *extra, char **err);

#endif
