/* coordinator/main.c — the coordinator program: a table of its subcommands, each with the line
 * the usage shows for it; generate and serve share the option table (co_cli.h), the others parse
 * their own arguments. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "coordinator/co_cli.h"
#include "coordinator/co_generate.h"
#include "coordinator/co_serve.h"
#include "coordinator/co_textcmd.h"
#include "coordinator/co_tmplcmd.h"
#include "vindex/vx_source.h"
#include "wire/wr_curve.h"
#include "util/mw_notify.h"

/* generate and serve: the shared options, checked for the command, then run. */
static int run_model(const char *cmd, int argc, char **argv);

static int generate_main(int argc, char **argv) {
    return run_model("generate", argc, argv);
}

static int serve_main(int argc, char **argv) {
    return run_model("serve", argc, argv);
}

static int keygen_main(int argc, char **argv) {
    return wr_keygen_cli("coordinator", "coordinator", argc, argv);
}

static const struct command {
    const char *name;
    const char *synopsis;              /* after "coordinator NAME " */
    int (*run)(int argc, char **argv); /* argv after the command's name */
} commands[] = {
    {"generate",
     "--model PATH (--prompt TEXT | --chat 'user: TEXT' |\n"
     "                              --messages FILE | --tokens 1,2,3) --max-tokens N [options]",
     generate_main},
    {"serve", "--model PATH [--listen HOST:PORT] [options]", serve_main},
    {"keygen", "[--out PREFIX]  (a CURVE key pair for --curve-secret)", keygen_main},
    {"tokenize", "--model PATH [TEXT | --stdin] [--json] [--special] [--add-bos]",
     co_tokenize_main},
    {"detokenize", "--model PATH [IDS... | --stdin] [--special] [--raw]", co_detokenize_main},
    {"chat-template",
     "--template FILE.jinja --messages FILE.json [--tools FILE.json]\n"
     "                              [--no-generation-prompt] [--bos TEXT] [--eos TEXT] "
     "[--kwargs JSON]",
     co_chat_template_main},
};

#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "%s coordinator %s %s\n", i ? "      " : "usage:", commands[i].name,
                commands[i].synopsis);
    fputc('\n', f);
    co_cli_usage(f);
}

static int run_model(const char *cmd, int argc, char **argv) {
    const bool serve = !strcmp(cmd, "serve");
    vx_catch_sigbus("coordinator");
    co_opts o;
    co_opts_init(&o);
    mw_err err = {{0}};
    int help = 0;
    int rc;
    if (co_cli_parse(argc, argv, &o, &help, &err)) {
        fprintf(stderr, "coordinator %s: %s\n", cmd, err.msg);
        rc = 2;
    } else if (help) {
        usage(stdout);
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

int main(int argc, char **argv) {
    mw_notify_init(); /* before a loopback node is started: it must not speak for this process */
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 2, argv + 2);
    fprintf(stderr, "coordinator: unknown command '%s' (known:", argv[1]);
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(stderr, "%s %s", i ? "," : "", commands[i].name);
    fprintf(stderr, ")\n");
    return 2;
}
