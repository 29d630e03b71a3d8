/* vindex/vx_mount.c — opening a vindex directory as a source (the mount). */
#include "vindex/vx_source_internal.h"

int vx_source_open_vindex(const char *dir, const vx_source_opts *opts, vx_source **out,
                          mw_err *err) {
    (void)opts;
    *out = NULL;
    return mw_errf(err, "%s: is a directory; mounting vindex directories is not built yet", dir);
}
