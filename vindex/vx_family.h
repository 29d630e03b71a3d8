/* vindex/vx_family.h — the model families moewire knows: one row per GGUF architecture, with the
 * name and the facts more than one table reads. Every other family table points its rows at a row
 * of this one and holds only its own concern: the model's policies (model/md_family.c), the
 * Hugging Face reader's config keys and tensor rules (vindex/vx_hf_families.c), synth's generator
 * (vindex/vx_synth.c). It lives on the vindex floor because the vindex reads and writes a family's
 * models (extract, synth) below the model layer that runs them; model/ reads it from above.
 *
 * A new family is an entry in vx_family_id, its row here, and one row in each table that needs
 * one; a table it has no row in is named here with the reason (tests/unit/test_vx_family.c fails
 * on a family missing from a table otherwise). */
#ifndef VX_FAMILY_H
#define VX_FAMILY_H

#include <stdbool.h>

typedef enum vx_family_id {
    VX_FAMILY_GPT_OSS,
    VX_FAMILY_QWEN3MOE,
    VX_FAMILY_DEEPSEEK2,
    VX_FAMILY_KIMI_LINEAR,
    VX_FAMILY_KIMI_K3,
    VX_FAMILY_COUNT
} vx_family_id;

typedef struct vx_family {
    const char *arch; /* general.architecture: the metadata keys' prefix, synth's --arch */
    /* Sliding-window attention: some layers see only the last attention.sliding_window positions.
     * swa_period is the layer pattern wherever the model does not state one (a GGUF without
     * attention.sliding_window_pattern, a config.json without layer_types, synth): within each
     * period the last layer sees everything, so 2 means layers 0, 2, 4, ... slide. */
    bool swa;
    int swa_period;
    /* YaRN with DeepSeek's mscale_all_dim, as rope.scaling.yarn_log_multiplier (0.1 times it) */
    bool yarn_log_mul;
    /* The tables a family may lack: why it has no row there; NULL = it has one. (The model's
     * table is not optional: a family is a model moewire runs.) */
    const char *no_hf;    /* vindex/vx_hf_families.c: no Hugging Face checkpoint is read */
    const char *no_synth; /* vindex/vx_synth.c: synth does not generate it */
} vx_family;

extern const vx_family vx_families[VX_FAMILY_COUNT];

/* The row whose arch is `arch`, or NULL. */
const vx_family *vx_family_find(const char *arch);
/* Every family's arch, ", "-separated (for messages). */
const char *vx_family_names(void);

#endif
