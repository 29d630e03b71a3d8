/* vindex/vx_experts.c — routed-expert tensor roles, their shape rules, and kn_expert views. */
#include "vindex/vx_experts.h"

#include <stdio.h>
#include <string.h>

/* One row per role: manifest name, GGUF tensor-name suffix, bias or weight. */
static const struct {
    const char *name;
    const char *suffix;
    bool bias;
} roles[VX_ROLE_COUNT] = {
    [VX_R_GATE] = {"gate", "ffn_gate_exps.weight", false},
    [VX_R_UP] = {"up", "ffn_up_exps.weight", false},
    [VX_R_GATE_UP] = {"gate_up", "ffn_gate_up_exps.weight", false},
    [VX_R_DOWN] = {"down", "ffn_down_exps.weight", false},
    [VX_R_GATE_B] = {"gate_b", "ffn_gate_exps.bias", true},
    [VX_R_UP_B] = {"up_b", "ffn_up_exps.bias", true},
    [VX_R_GATE_UP_B] = {"gate_up_b", "ffn_gate_up_exps.bias", true},
    [VX_R_DOWN_B] = {"down_b", "ffn_down_exps.bias", true},
};

static int meta_count(const vx_meta *m, const char *where, const char *arch, const char *suffix,
                      int64_t max, int64_t *out, mw_err *err) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    *out = 0;
    if (vx_meta_get_i64(m, key, out, err) < 0) return mw_err_wrap(err, "%s", where);
    if (*out < 0 || *out > max)
        return mw_errf(err, "%s: %s = %lld is out of range (0..%lld)", where, key, (long long)*out,
                       (long long)max);
    return 0;
}

int vx_model_shape_read(const vx_meta *m, const char *where, vx_model_shape *out, mw_err *err) {
    memset(out, 0, sizeof *out);
    int rc = vx_meta_get_str(m, "general.architecture", &out->arch, err);
    if (rc < 0) return mw_err_wrap(err, "%s", where);
    if (rc == 0) return mw_errf(err, "%s: no general.architecture in the metadata", where);
    if (strlen(out->arch) == 0 || strlen(out->arch) > 64)
        return mw_errf(err, "%s: general.architecture must be 1..64 characters", where);
    int64_t layers, experts;
    if (meta_count(m, where, out->arch, "block_count", 1 << 20, &layers, err) ||
        meta_count(m, where, out->arch, "expert_count", 1 << 20, &experts, err) ||
        meta_count(m, where, out->arch, "embedding_length", (int64_t)1 << 32, &out->hidden, err))
        return -1;
    out->n_layers = (int)layers;
    out->n_experts = (int)experts;
    int64_t latent;
    if (meta_count(m, where, out->arch, "expert_latent_length", out->hidden, &latent, err))
        return -1;
    out->expert_width = latent > 0 ? latent : out->hidden;
    return 0;
}

const char *vx_role_name(vx_role r) {
    return r < VX_ROLE_COUNT ? roles[r].name : "?";
}
const char *vx_role_suffix(vx_role r) {
    return r < VX_ROLE_COUNT ? roles[r].suffix : "?";
}
bool vx_role_is_bias(vx_role r) {
    return r < VX_ROLE_COUNT && roles[r].bias;
}

int vx_role_from_name(const char *s) {
    for (int r = 0; r < VX_ROLE_COUNT; r++)
        if (!strcmp(s, roles[r].name)) return r;
    return -1;
}

int vx_expert_role(const char *name, int *layer) {
    if (strncmp(name, "blk.", 4) != 0) return -1;
    const char *p = name + 4;
    long l = 0;
    int digits = 0;
    while (*p >= '0' && *p <= '9' && digits < 7) {
        l = l * 10 + (*p++ - '0');
        digits++;
    }
    if (digits == 0 || *p != '.') return -1;
    for (int r = 0; r < VX_ROLE_COUNT; r++) {
        if (!strcmp(p + 1, roles[r].suffix)) {
            *layer = (int)l;
            return r;
        }
    }
    return -1;
}

int vx_layer_set_part(vx_layer_experts *L, vx_role r, kn_type type, int n_dims, const int64_t *ne,
                      int n_experts, const char *name, mw_err *err) {
    vx_part *p = &L->part[r];
    if (p->present) return mw_errf(err, "expert tensor '%s' appears twice", name);
    int want = roles[r].bias ? 2 : 3;
    if (n_dims != want)
        return mw_errf(err, "expert tensor '%s' has %d dimensions, expected %d", name, n_dims,
                       want);
    if (ne[want - 1] != n_experts)
        return mw_errf(err, "expert tensor '%s' holds %lld experts, but the model has %d", name,
                       (long long)ne[want - 1], n_experts);
    p->type = type;
    p->cols = ne[0];
    p->rows = roles[r].bias ? 1 : ne[1];
    p->row_bytes = kn_row_size(type, p->cols);
    if (p->cols <= 0 || p->rows <= 0 || p->row_bytes == 0)
        return mw_errf(err, "expert tensor '%s': %lld × %lld is not a valid %s matrix", name,
                       (long long)p->rows, (long long)p->cols, kn_type_name(type));
    p->slice_bytes = p->row_bytes * (uint64_t)p->rows;
    p->present = true;
    L->present = true;
    return 0;
}

static int shape_error(mw_err *err, int layer, vx_role r, const vx_part *p, int64_t rows,
                       int64_t cols) {
    return mw_errf(err, "layer %d: expert %s is %lld × %lld, expected %lld × %lld", layer,
                   roles[r].suffix, (long long)p->rows, (long long)p->cols, (long long)rows,
                   (long long)cols);
}

static int check_part(const vx_layer_experts *L, int layer, vx_role r, int64_t rows, int64_t cols,
                      mw_err *err) {
    const vx_part *p = &L->part[r];
    if (p->present && (p->rows != rows || p->cols != cols))
        return shape_error(err, layer, r, p, rows, cols);
    return 0;
}

int vx_layer_check(vx_layer_experts *L, int layer, int64_t hidden_expected, mw_err *err) {
    const vx_part *P = L->part;
    if (!L->present) return 0;
    bool fused = P[VX_R_GATE_UP].present;
    if (fused && (P[VX_R_GATE].present || P[VX_R_UP].present))
        return mw_errf(err, "layer %d: both a fused ffn_gate_up_exps and separate gate/up experts",
                       layer);
    if (!fused && (!P[VX_R_GATE].present || !P[VX_R_UP].present))
        return mw_errf(err, "layer %d: expert %s missing", layer,
                       P[VX_R_GATE].present ? "ffn_up_exps.weight" : "ffn_gate_exps.weight");
    if (!P[VX_R_DOWN].present)
        return mw_errf(err, "layer %d: expert ffn_down_exps.weight missing", layer);
    if (P[VX_R_GATE_UP_B].present && (P[VX_R_GATE_B].present || P[VX_R_UP_B].present))
        return mw_errf(err, "layer %d: both a fused ffn_gate_up_exps.bias and separate biases",
                       layer);
    const vx_part *g = fused ? &P[VX_R_GATE_UP] : &P[VX_R_GATE];
    if (fused && g->rows % 2 != 0)
        return mw_errf(err, "layer %d: fused ffn_gate_up_exps has an odd row count %lld", layer,
                       (long long)g->rows);
    int64_t ff = fused ? g->rows / 2 : g->rows, hidden = g->cols;
    if (hidden_expected > 0 && hidden != hidden_expected)
        return mw_errf(err,
                       "layer %d: experts take %lld inputs, but the model's expert width is %lld",
                       layer, (long long)hidden, (long long)hidden_expected);
    if (check_part(L, layer, VX_R_UP, ff, hidden, err) ||
        check_part(L, layer, VX_R_DOWN, hidden, ff, err) ||
        check_part(L, layer, VX_R_GATE_B, 1, ff, err) ||
        check_part(L, layer, VX_R_UP_B, 1, ff, err) ||
        check_part(L, layer, VX_R_GATE_UP_B, 1, 2 * ff, err) ||
        check_part(L, layer, VX_R_DOWN_B, 1, hidden, err))
        return -1;
    if (P[VX_R_GATE_UP_B].present && kn_row_size(P[VX_R_GATE_UP_B].type, ff) == 0)
        return mw_errf(err, "layer %d: fused expert bias cannot be split at %lld in %s", layer,
                       (long long)ff, kn_type_name(P[VX_R_GATE_UP_B].type));
    L->hidden = hidden;
    L->ff = ff;
    return 0;
}

static kn_mat mat(const vx_part *p, int64_t rows, int64_t cols, const uint8_t *data) {
    kn_mat m = {.type = p->type, .rows = rows, .cols = cols, .data = data};
    m.row_bytes = kn_row_size(p->type, cols);
    return m;
}

void vx_layer_view(const vx_layer_experts *L, const uint8_t *const base[VX_ROLE_COUNT],
                   kn_expert *out) {
    const vx_part *P = L->part;
    memset(out, 0, sizeof *out);
    int64_t ff = L->ff, h = L->hidden;
    if (P[VX_R_GATE_UP].present) {
        const vx_part *p = &P[VX_R_GATE_UP];
        out->gate = mat(p, ff, h, base[VX_R_GATE_UP]);
        out->up = mat(p, ff, h, base[VX_R_GATE_UP] + (uint64_t)ff * p->row_bytes);
    } else {
        out->gate = mat(&P[VX_R_GATE], ff, h, base[VX_R_GATE]);
        out->up = mat(&P[VX_R_UP], ff, h, base[VX_R_UP]);
    }
    out->down = mat(&P[VX_R_DOWN], h, ff, base[VX_R_DOWN]);
    if (P[VX_R_GATE_UP_B].present) {
        const vx_part *p = &P[VX_R_GATE_UP_B];
        out->gate_b = mat(p, 1, ff, base[VX_R_GATE_UP_B]);
        out->up_b = mat(p, 1, ff, base[VX_R_GATE_UP_B] + kn_row_size(p->type, ff));
    } else {
        if (P[VX_R_GATE_B].present) out->gate_b = mat(&P[VX_R_GATE_B], 1, ff, base[VX_R_GATE_B]);
        if (P[VX_R_UP_B].present) out->up_b = mat(&P[VX_R_UP_B], 1, ff, base[VX_R_UP_B]);
    }
    if (P[VX_R_DOWN_B].present) out->down_b = mat(&P[VX_R_DOWN_B], 1, h, base[VX_R_DOWN_B]);
}
