/* vindex/vx_family.c — the family table (see vx_family.h): gpt-oss, qwen3moe, deepseek2,
 * kimi-linear, kimi-k3. */
#include "vindex/vx_family.h"

#include "util/mw_names.h"

const vx_family vx_families[VX_FAMILY_COUNT] = {
    [VX_FAMILY_GPT_OSS] =
        {
            .arch = "gpt-oss",
            .swa = true,
            .swa_period = 2, /* GptOssConfig's layer_types and llama.cpp's default alike */
        },
    [VX_FAMILY_QWEN3MOE] =
        {
            .arch = "qwen3moe",
        },
    /* DeepSeek-V2/V3, Kimi-K2 and relatives */
    [VX_FAMILY_DEEPSEEK2] =
        {
            .arch = "deepseek2",
            .yarn_log_mul = true,
        },
    /* Kimi Linear: KDA (linear attention with a recurrent state) and latent attention layers */
    [VX_FAMILY_KIMI_LINEAR] =
        {
            .arch = "kimi-linear",
        },
    /* Kimi K3: Kimi Linear's stack with attention residuals and a latent MoE */
    [VX_FAMILY_KIMI_K3] =
        {
            .arch = "kimi-k3",
        },
};

const vx_family *vx_family_find(const char *arch) {
    const int i = mw_names_find(arch, MW_NAMES(vx_families, arch));
    return i < 0 ? NULL : &vx_families[i];
}

const char *vx_family_names(void) {
    static char names[256];
    return names[0] ? names : mw_names_join(names, sizeof names, MW_NAMES(vx_families, arch));
}
