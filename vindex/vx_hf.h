/* vindex/vx_hf.h — Hugging Face checkpoints: config.json read into GGUF-style metadata.
 *
 * A family (gpt-oss, qwen3moe, deepseek2) declares every config.json key it knows: the ones mapped
 * to GGUF keys (as llama.cpp's converter writes them), the ones that must hold one value
 * (hidden_act, attention_bias, ...), and the ones that do not affect inference. Anything else — an
 * unknown key, an unsupported value, a missing required key, an unknown model_type — is an error
 * naming the key; nothing is silently defaulted. The checkpoint itself opens through
 * vx_input_open_hf (vindex/vx_input.h). docs/safetensors.md lists the maps. */
#ifndef VX_HF_H
#define VX_HF_H

#include <stddef.h>

#include "util/mw_err.h"
#include "vindex/vx_meta.h"

/* Parses config.json text (len bytes) into meta under GGUF-style keys, general.architecture and
 * general.name (= name) included. `what` names the text in messages (a path). */
int vx_hf_config_parse(const char *text, size_t len, const char *what, const char *name,
                       vx_meta *meta, mw_err *err);

#endif
