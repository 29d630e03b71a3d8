/* tests/fuzz/fuzz_extract.c — `vindex extract` on arbitrary GGUF bytes: a file the reader accepts
 * goes through planning and writing (dense.bin, the expert files, the manifest), which must end
 * in a vindex that reads back, or an error with nothing left behind. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "tests/fuzz/fz.h"
#include "vindex/vx_input.h"
#include "vindex/vx_manifest.h"
#include "vindex/vx_vindex.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fz_file("in.gguf", data, size);
    vx_input *in;
    mw_err e;
    if (vx_input_open(path, &in, &e) != 0) return 0;
    char out[600];
    snprintf(out, sizeof out, "%s/out.vindex", fz_dir());
    int rc = vx_extract(in, out, NULL, NULL, &e);
    vx_input_close(in);
    if (rc == 0) {
        vx_manifest m;
        if (vx_manifest_read(out, &m, &e) != 0) { /* we wrote it */
            fprintf(stderr, "extracted, but the manifest does not read back: %s\n", e.msg);
            __builtin_trap();
        }
        vx_manifest_free(&m);
    } else if (access(out, F_OK) == 0) {
        __builtin_trap(); /* a failed extract left something behind */
    }
    static const char *const keep[] = {"in.gguf", NULL};
    fz_clean(keep);
    return 0;
}
