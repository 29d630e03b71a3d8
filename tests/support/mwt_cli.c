/* tests/support/mwt_cli.c — the project's programs run from tests (see mwt_cli.h). */
#include "tests/support/mwt_cli.h"
#include "tests/support/mw_test.h"

#include <stdio.h>
#include <stdlib.h>

enum { MAX_ARGS = 64 };

int mwt_run_shown(char *const *argv, char **out, char **err, int timeout_ms) {
    char *e = NULL;
    int rc = mwt_run(argv, out, &e, timeout_ms);
    if (err)
        *err = e;
    else {
        if (rc) fprintf(stderr, "%s exited %d:\n%s\n", argv[0], rc, e ? e : "");
        free(e);
    }
    return rc;
}

/* Appends the NULL-terminated list (may be NULL) to argv[0..*n), keeping room for the NULL. */
static void append(const char **argv, int *n, const char *const *list) {
    for (int i = 0; list && list[i]; i++) {
        if (*n >= MAX_ARGS - 1) {
            fprintf(stderr, "mwt_cli: a command of more than %d arguments\n", MAX_ARGS - 1);
            abort();
        }
        argv[(*n)++] = list[i];
    }
    argv[*n] = NULL;
}

int mwt_synth(const char *out, const char *const *opts) {
    const char *argv[MAX_ARGS], *head[] = {mwt_bin("vindex"), "synth", NULL},
                                *tail[] = {"--format", "vindex", out, NULL};
    int n = 0;
    append(argv, &n, head);
    append(argv, &n, opts);
    append(argv, &n, tail);
    return mwt_run_shown((char *const *)argv, NULL, NULL, 300000);
}

int mwt_synth_gpt_oss(const char *out, mwt_gpt_oss s, const char *const *extra) {
    char num[6][24];
    const int v[6] = {s.layers, s.hidden, s.experts, s.top_k, s.expert_ff, s.seed};
    for (int i = 0; i < 6; i++) snprintf(num[i], sizeof num[i], "%d", v[i]);
    const char *opts[MAX_ARGS];
    const char *shape[] = {"--arch",    "gpt-oss", "--layers",   num[0], "--hidden",    num[1],
                           "--heads",   "4",       "--kv-heads", "2",    "--head-dim",  "64",
                           "--experts", num[2],    "--top-k",    num[3], "--expert-ff", num[4],
                           "--vocab",   "300",     "--seed",     num[5], NULL};
    int n = 0;
    append(opts, &n, shape);
    append(opts, &n, extra);
    return mwt_synth(out, opts);
}

int mwt_generate(const mwt_gen *how, const char *model, const char *numerics, const char *logits,
                 const char *const *extra, char **err) {
    const char *argv[MAX_ARGS];
    const char *head[] = {mwt_bin("coordinator"),
                          "generate",
                          "--model",
                          model,
                          "--tokens",
                          how->prompt,
                          "--max-tokens",
                          how->max_tokens,
                          "--numerics",
                          numerics,
                          "--threads",
                          "1",
                          NULL};
    const char *lo[] = {"--logits-out", logits, NULL};
    int n = 0;
    append(argv, &n, head);
    if (logits) append(argv, &n, lo);
    append(argv, &n, extra);
    return mwt_run_shown((char *const *)argv, NULL, err, how->timeout_ms);
}
