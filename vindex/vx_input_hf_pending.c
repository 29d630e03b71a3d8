/* vindex/vx_input_hf_pending.c — TEMPORARY: keeps the library linking until the safetensors input
 * (vindex/vx_hf*.c, another helper's) lands on main; that change deletes this file. */
#include "vindex/vx_input.h"

int vx_input_open_hf(const char *dir, vx_input **out, mw_err *err) {
    *out = NULL;
    return mw_errf(err, "%s: safetensors input not built yet", dir);
}
