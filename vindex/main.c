/* vindex/main.c — the vindex program: extract, inspect, verify, slice, synth. */
#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: vindex extract|inspect|verify|slice|synth ...\n");
}

int main(int argc, char **argv) {
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        usage(stdout);
        return 0;
    }
    usage(stderr);
    return 2;
}
