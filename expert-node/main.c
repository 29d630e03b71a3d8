/* expert-node/main.c — the expert node program: command-line entry point. */
#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: expert-node --vindex DIR --experts SPEC --bind tcp://*:PORT [--threads N]\n");
}

int main(int argc, char **argv) {
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        usage(stdout);
        return 0;
    }
    usage(stderr);
    return 2;
}
