/* tests/fuzz/fz.c — the harnesses' shared helpers (fz.h). */
#include "tests/fuzz/fz.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256];

static void rm_tree(const char *path) {
    DIR *d = opendir(path);
    if (!d) {
        unlink(path);
        return;
    }
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        rm_tree(p);
    }
    closedir(d);
    rmdir(path);
}

static void remove_dir(void) {
    if (dir[0]) rm_tree(dir);
}

const char *fz_dir(void) {
    if (!dir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/moewire-fuzz-XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(dir)) abort();
        atexit(remove_dir);
    }
    return dir;
}

const char *fz_file(const char *name, const uint8_t *data, size_t size) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", fz_dir(), name);
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f)) abort();
    return path;
}

void fz_clean(const char *const *keep) {
    DIR *d = opendir(fz_dir());
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        bool kept = false;
        for (int i = 0; keep && keep[i] && !kept; i++) kept = !strcmp(e->d_name, keep[i]);
        if (kept) continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        rm_tree(p);
    }
    closedir(d);
}
