/* coordinator/main.c — the coordinator program: command-line entry point. */
#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: coordinator generate --model PATH --tokens 1,2,3 --max-tokens N [options]\n");
}

int main(int argc, char **argv) {
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        usage(stdout);
        return 0;
    }
    usage(stderr);
    return 2;
}
