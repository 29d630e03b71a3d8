/* model/md_rope.h — rotary position embedding: angles for a position (plain, linear, YaRN,
 * llama3 bands) and their application to one head, in ggml's float32 arithmetic. */
#ifndef MD_ROPE_H
#define MD_ROPE_H

#include <stdint.h>

#include "model/md_config.h"

/* Fills cs[2i] = cos, cs[2i+1] = sin (magnitude included) of pair i < n_rot/2 at position pos.
 * Computed once per token and shared by every head of that token. Nothing for MD_ROPE_NONE. */
void md_rope_angles(const md_rope *r, int64_t pos, float *cs);

/* The factor deepseek2's attention scale carries (kq_scale = m² / sqrt(d_k)): the rope's original
 * attention factor times 1 + 0.1 · yarn_log_mul · ln(1 / freq_scale) (llama.cpp's mscale). */
float md_rope_attn_mscale(const md_rope *r);

/* Rotates one head vector x (head_dim floats, the first n_rot of them rotated) in place; leaves
 * it as it is for MD_ROPE_NONE. */
void md_rope_apply(const md_rope *r, const float *cs, float *x);

#endif
