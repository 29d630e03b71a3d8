/* coordinator/main.c — the coordinator program: picks the subcommand and hands it the parsed
 * options. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "coordinator/co_cli.h"
#include "coordinator/co_generate.h"
#include "coordinator/co_serve.h"
#include "coordinator/co_textcmd.h"
#include "vindex/vx_source.h"
#include "wire/wr_curve.h"

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        co_cli_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "keygen"))
        return wr_keygen_cli("coordinator", "coordinator", argc - 2, argv + 2);
    if (!strcmp(argv[1], "tokenize")) return co_tokenize_main(argc - 2, argv + 2);
    if (!strcmp(argv[1], "detokenize")) return co_detokenize_main(argc - 2, argv + 2);
    const bool serve = !strcmp(argv[1], "serve");
    if (strcmp(argv[1], "generate") && !serve) {
        fprintf(stderr,
                "coordinator: unknown command '%s' (known: generate, serve, keygen, tokenize, "
                "detokenize)\n",
                argv[1]);
        return 2;
    }
    vx_catch_sigbus("coordinator");
    const char *cmd = serve ? "serve" : "generate";
    co_opts o;
    co_opts_init(&o);
    mw_err err = {{0}};
    int help = 0;
    int rc;
    if (co_cli_parse(argc - 2, argv + 2, &o, &help, &err)) {
        fprintf(stderr, "coordinator %s: %s\n", cmd, err.msg);
        rc = 2;
    } else if (help) {
        co_cli_usage(stdout);
        rc = 0;
    } else if (serve ? co_cli_check_serve(&o, &err) : co_cli_check_generate(&o, &err)) {
        fprintf(stderr, "coordinator %s: %s\n", cmd, err.msg);
        rc = 2;
    } else {
        rc = serve ? co_serve(&o) : co_generate(&o);
    }
    co_opts_free(&o);
    return rc;
}
