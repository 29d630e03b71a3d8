/* vindex/vx_source_open.c — vx_source_open: a directory is a vindex (vx_mount.c), anything else a
 * GGUF file (vx_source_gguf.c). Above both backings, so neither includes the other. */
#include <sys/stat.h>

#include "vindex/vx_source.h"
#include "vindex/vx_source_internal.h"

int vx_source_open(const char *path, const vx_source_opts *opts, vx_source **out, mw_err *err) {
    *out = NULL;
    struct stat st;
    if (stat(path, &st) != 0) return mw_errf(err, "%s: no such file or directory", path);
    const int rc = S_ISDIR(st.st_mode) ? vx__source_open_vindex(path, opts, out, err)
                                       : vx__source_open_gguf(path, opts, out, err);
    if (rc == 0 && opts) {
        (*out)->progress = opts->progress;
        (*out)->progress_ctx = opts->progress_ctx;
    }
    return rc;
}
