/* vindex/vx_experts.h — which tensors are routed-expert tensors, and how one expert's slice of each
 * becomes a kn_expert. Private to vindex/ (GGUF source, vindex mount, extract, synth).
 *
 * GGUF stores a layer's experts as 3-D weights blk.L.ffn_{gate,up,down}_exps.weight [K, N, E]
 * (expert e = the e-th N × K matrix), optionally one fused blk.L.ffn_gate_up_exps.weight
 * [K, 2N, E] (gate rows first), and 2-D biases blk.L.ffn_*_exps.bias [N, E]. A vindex extent holds
 * expert e's slice of each of these, in the same roles. */
#ifndef VX_EXPERTS_H
#define VX_EXPERTS_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/kn.h"
#include "util/mw_err.h"
#include "vindex/vx_meta.h"

typedef enum vx_role {
    VX_R_GATE = 0,
    VX_R_UP,
    VX_R_GATE_UP,
    VX_R_DOWN,
    VX_R_GATE_B,
    VX_R_UP_B,
    VX_R_GATE_UP_B,
    VX_R_DOWN_B,
    VX_ROLE_COUNT
} vx_role;

/* The model-level numbers every container states in its metadata. */
typedef struct vx_model_shape {
    const char *arch; /* general.architecture (owned by the table) */
    int n_layers;     /* {arch}.block_count (0 when absent) */
    int n_experts;    /* {arch}.expert_count (0 when absent) */
    int64_t hidden;   /* {arch}.embedding_length (0 when absent) */
    /* the routed experts' input and output width: {arch}.expert_latent_length when it is set (a
     * latent MoE, kimi-k3), else hidden */
    int64_t expert_width;
} vx_model_shape;

/* Reads the shape from a metadata table; `where` names the file in messages. */
int vx_model_shape_read(const vx_meta *m, const char *where, vx_model_shape *out, mw_err *err);

/* "gate", "up_b", ... (the role names of the manifest). */
const char *vx_role_name(vx_role r);
int vx_role_from_name(const char *s); /* -1 if unknown */
/* The tensor-name suffix of a role: "ffn_gate_exps.weight", ... */
const char *vx_role_suffix(vx_role r);
bool vx_role_is_bias(vx_role r);

/* If name is "blk.<L>.<role suffix>", returns the role and sets *layer; else -1. */
int vx_expert_role(const char *name, int *layer);

/* One role's per-expert matrix: weights are rows × cols (= GGUF ne[1] × ne[0]); biases are one row
 * of cols (= GGUF ne[0]). */
typedef struct vx_part {
    bool present;
    kn_type type;
    int64_t rows, cols;
    uint64_t row_bytes;
    uint64_t slice_bytes; /* bytes of one expert's slice */
} vx_part;

typedef struct vx_layer_experts {
    bool present;
    int64_t hidden, ff;
    vx_part part[VX_ROLE_COUNT];
} vx_layer_experts;

/* Records a role's tensor shape (GGUF ne, n_dims) for a layer; checks the expert dimension against
 * n_experts. `name` is used in messages. */
int vx_layer_set_part(vx_layer_experts *L, vx_role r, kn_type type, int n_dims, const int64_t *ne,
                      int n_experts, const char *name, mw_err *err);
/* After all parts are set: checks the set of roles and their shapes agree (gate/up/down, fused or
 * not, biases) and fills hidden and ff. hidden_expected <= 0 skips that check. */
int vx_layer_check(vx_layer_experts *L, int layer, int64_t hidden_expected, mw_err *err);
/* Fills a kn_expert from pointers to expert e's slice of each present role. */
void vx_layer_view(const vx_layer_experts *L, const uint8_t *const base[VX_ROLE_COUNT],
                   kn_expert *out);

#endif
