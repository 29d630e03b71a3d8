/* vindex/vx_input.c — opening an extract input by what PATH is, and the calls every input shares.
 */
#include "vindex/vx_input.h"

#include <string.h>
#include <sys/stat.h>

int vx_input_open(const char *path, vx_input **out, mw_err *err) {
    *out = NULL;
    struct stat st;
    if (stat(path, &st) != 0) return mw_errf(err, "%s: no such file or directory", path);
    if (S_ISDIR(st.st_mode)) return vx_input_open_hf(path, out, err);
    return vx_input_open_gguf(path, out, err);
}

void vx_input_close(vx_input *in) {
    if (in && in->close) in->close(in);
}

const vx_input_tensor *vx_input_find(const vx_input *in, const char *name) {
    for (size_t i = 0; i < in->n_tensors; i++)
        if (!strcmp(in->tensors[i].name, name)) return &in->tensors[i];
    return NULL;
}
