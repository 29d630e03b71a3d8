/* tests/support/mwt_st.c — safetensors writer and synthetic Hugging Face checkpoints for tests. */
#include "tests/support/mwt_st.h"
#include "tests/support/mw_test.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- fixture ------------------------------------------------------------------------------ */

int mwt_fx_setup(void **state) {
    mwt_fx *f = calloc(1, sizeof *f);
    if (!f || mwt_tmp_setup(state)) {
        free(f);
        return -1;
    }
    f->dir = *state;
    snprintf(f->file, sizeof f->file, "%s/t.safetensors", f->dir);
    snprintf(f->ck, sizeof f->ck, "%s/tiny-ckpt", f->dir);
    snprintf(f->out, sizeof f->out, "%s/out.vindex", f->dir);
    *state = f;
    return 0;
}

int mwt_fx_teardown(void **state) {
    mwt_fx *f = *state;
    *state = f->dir;
    free(f);
    return mwt_tmp_teardown(state);
}

/* ---- safetensors writer ------------------------------------------------------------------- */

typedef struct st_item {
    char *name;
    char dtype[16];
    int n_dims;
    int64_t shape[8];
    void *data;
    size_t nbytes;
} st_item;

struct mwt_st {
    st_item *items;
    size_t n, cap;
    json_t *meta;
};

mwt_st *mwt_st_new(void) {
    return calloc(1, sizeof(mwt_st));
}

void mwt_st_free(mwt_st *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n; i++) {
        free(w->items[i].name);
        free(w->items[i].data);
    }
    free(w->items);
    json_decref(w->meta);
    free(w);
}

void mwt_st_add(mwt_st *w, const char *name, const char *dtype, int n_dims, const int64_t *shape,
                const void *data, size_t nbytes) {
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 16;
        w->items = realloc(w->items, w->cap * sizeof *w->items);
    }
    st_item *it = &w->items[w->n++];
    memset(it, 0, sizeof *it);
    it->name = strdup(name);
    snprintf(it->dtype, sizeof it->dtype, "%s", dtype);
    it->n_dims = n_dims;
    if (n_dims) memcpy(it->shape, shape, (size_t)n_dims * sizeof *shape);
    it->data = malloc(nbytes ? nbytes : 1);
    if (nbytes) memcpy(it->data, data, nbytes);
    it->nbytes = nbytes;
}

void mwt_st_meta(mwt_st *w, const char *key, const char *value) {
    if (!w->meta) w->meta = json_object();
    json_object_set_new(w->meta, key, json_string(value));
}

size_t mwt_st_count(const mwt_st *w) {
    return w->n;
}
const char *mwt_st_name(const mwt_st *w, size_t i) {
    return w->items[i].name;
}

int mwt_st_write_raw(const char *path, uint64_t hlen, const char *header, const void *data,
                     size_t nbytes) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    uint8_t len[8];
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)(hlen >> (8 * i));
    size_t hl = strlen(header);
    int ok = fwrite(len, 1, 8, f) == 8 && fwrite(header, 1, hl, f) == hl &&
             (!nbytes || fwrite(data, 1, nbytes, f) == nbytes);
    return fclose(f) == 0 && ok ? 0 : -1;
}

int mwt_st_write(const mwt_st *w, const char *path) {
    json_t *h = json_object();
    if (w->meta) json_object_set(h, "__metadata__", w->meta);
    size_t off = 0;
    for (size_t i = 0; i < w->n; i++) {
        const st_item *it = &w->items[i];
        json_t *shape = json_array();
        for (int d = 0; d < it->n_dims; d++)
            json_array_append_new(shape, json_integer(it->shape[d]));
        json_t *e = json_pack("{s:s, s:o, s:[I, I]}", "dtype", it->dtype, "shape", shape,
                              "data_offsets", (json_int_t)off, (json_int_t)(off + it->nbytes));
        json_object_set_new(h, it->name, e);
        off += it->nbytes;
    }
    char *text = json_dumps(h, JSON_COMPACT);
    json_decref(h);
    size_t hl = strlen(text), padded = (hl + 7) & ~(size_t)7;
    char *hdr = malloc(padded + 1);
    memcpy(hdr, text, hl);
    memset(hdr + hl, ' ', padded - hl); /* the format pads the header to 8 bytes with spaces */
    hdr[padded] = '\0';
    free(text);
    uint8_t *data = malloc(off ? off : 1);
    off = 0;
    for (size_t i = 0; i < w->n; i++) {
        memcpy(data + off, w->items[i].data, w->items[i].nbytes);
        off += w->items[i].nbytes;
    }
    int rc = mwt_st_write_raw(path, padded, hdr, data, off);
    free(hdr);
    free(data);
    return rc;
}

/* ---- values ------------------------------------------------------------------------------- */

static uint64_t next_u64(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float next_f(uint64_t *s) {
    return (float)((double)(next_u64(s) >> 11) / 9007199254740992.0) * 2 - 1;
}

float mwt_bf16(uint16_t v) {
    uint32_t u = (uint32_t)v << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t mwt_bf16_rne(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

float mwt_fp8_e4m3(uint8_t b) {
    int e = (b >> 3) & 15, m = b & 7;
    double v = e == 15 && m == 7 ? NAN : e ? (1 + m / 8.0) * pow(2, e - 7) : m / 8.0 * pow(2, -6);
    return (float)(b & 0x80 ? -v : v);
}

static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

/* Adds a tensor of n pseudo-random values in dtype BF16 or F32 (scaled by `scale`). */
static void add_rand(mwt_st *w, uint64_t *rng, const char *name, const char *dtype, int n_dims,
                     const int64_t *shape, float scale) {
    size_t n = 1;
    for (int i = 0; i < n_dims; i++) n *= (size_t)shape[i];
    bool bf = !strcmp(dtype, "BF16");
    void *buf = malloc(n * (bf ? 2 : 4) + 1);
    for (size_t i = 0; i < n; i++) {
        float v = next_f(rng) * scale;
        if (bf)
            ((uint16_t *)buf)[i] = to_bf16(v);
        else
            ((float *)buf)[i] = v;
    }
    mwt_st_add(w, name, dtype, n_dims, shape, buf, n * (bf ? 2 : 4));
    free(buf);
}

static void add_bytes(mwt_st *w, uint64_t *rng, const char *name, int n_dims, const int64_t *shape,
                      int lo, int span) {
    size_t n = 1;
    for (int i = 0; i < n_dims; i++) n *= (size_t)shape[i];
    uint8_t *buf = malloc(n + 1);
    for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)(lo + (int)(next_u64(rng) % (uint64_t)span));
    mwt_st_add(w, name, "U8", n_dims, shape, buf, n);
    free(buf);
}

/* A matrix [rows, cols] of FP8 e4m3 codes (magnitudes 2^-4 .. 3.75, both signs, subnormals and
 * zeros among them) and its weight_scale_inv: one F32 per block of the given size. */
static void add_fp8(mwt_st *w, uint64_t *rng, const char *name, int64_t rows, int64_t cols,
                    const int *block) {
    uint8_t *q = malloc((size_t)(rows * cols) + 1);
    for (int64_t i = 0; i < rows * cols; i++) {
        uint64_t x = next_u64(rng);
        int e = (int)(x % 7) + 2; /* 2 .. 8; 2 reads as code 0 or a subnormal below */
        q[i] = (uint8_t)((x >> 8 & 0x80) | (e == 2 ? 0 : e) << 3 | (x >> 16 & 7));
    }
    mwt_st_add(w, name, "F8_E4M3", 2, (int64_t[]){rows, cols}, q, (size_t)(rows * cols));
    free(q);
    const int64_t br = (rows + block[0] - 1) / block[0], bc = (cols + block[1] - 1) / block[1];
    float *s = malloc(sizeof(float) * (size_t)(br * bc));
    for (int64_t i = 0; i < br * bc; i++) s[i] = 0.004f + 0.012f * (next_f(rng) + 1) / 2;
    char sn[300];
    snprintf(sn, sizeof sn, "%s_scale_inv", name);
    mwt_st_add(w, sn, "F32", 2, (int64_t[]){br, bc}, s, sizeof(float) * (size_t)(br * bc));
    free(s);
}

/* ---- reference dequantizers --------------------------------------------------------------- */

float mwt_hf_mxfp4_value(const uint8_t *blocks, const uint8_t *scales, int64_t rows, int64_t cols,
                         int64_t m, int64_t r, int64_t k) {
    /* OCP MX FP4 (E2M1): sign, 2 exponent bits, 1 mantissa bit */
    static const float e2m1[16] = {0,     0.5f,  1,  1.5f,  2,  3,  4,  6,
                                   -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
    int64_t groups = cols / 32, g = k / 32, i = k % 32;
    int64_t blk = (m * rows + r) * groups + g;
    uint8_t byte = blocks[blk * 16 + i / 2];
    int code = i % 2 ? byte >> 4 : byte & 15;
    return ldexpf(e2m1[code], (int)scales[blk] - 127);
}

float mwt_ggml_mxfp4_value(const uint8_t *row, int64_t j) {
    static const int8_t kvalues[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    const uint8_t *blk = row + (j / 32) * 17;
    int i = (int)(j % 32);
    int code = i < 16 ? blk[1 + i] & 15 : blk[1 + i - 16] >> 4;
    return ldexpf((float)kvalues[code], (int)blk[0] - 128);
}

/* ---- synthetic checkpoints ---------------------------------------------------------------- */

void mwt_hf_defaults(mwt_hf_opts *o, const char *model_type) {
    memset(o, 0, sizeof *o);
    o->model_type = model_type;
    o->layers = 2;
    o->hidden = 96;
    o->heads = 4;
    o->kv_heads = 2;
    o->head_dim = 16;
    o->experts = 3;
    o->top_k = 2;
    o->ff = 64;
    o->vocab = 40;
    o->sliding_window = 8;
    o->shards = 1;
    o->seed = 7;
    if (!strcmp(model_type, "deepseek_v3") || !strcmp(model_type, "kimi_k2")) {
        /* widths that are not multiples of the FP8 blocks, so edge blocks are partial */
        o->layers = 3, o->hidden = 96, o->heads = 2, o->head_dim = 16, o->rope_dim = 8;
        o->v_dim = 24, o->q_lora = 40, o->kv_lora = 32, o->experts = 8, o->top_k = 2, o->ff = 32;
        o->dense_layers = 1, o->dense_ff = 80, o->shared = 1, o->groups = 4, o->groups_used = 2;
        o->kv_heads = 2, o->fp8 = true, o->fp8_block[0] = 32, o->fp8_block[1] = 48;
    }
}

static json_t *gpt_oss_config(const mwt_hf_opts *o) {
    json_t *lt = json_array();
    for (int i = 0; i < o->layers; i++)
        json_array_append_new(lt, json_string(i % 2 ? "full_attention" : "sliding_attention"));
    json_t *c = json_pack(
        "{s:[s], s:b, s:f, s:i, s:i, s:i, s:s, s:i, s:i, s:f, s:i, s:o, s:i, s:s, s:i, s:i, s:i, "
        "s:i, s:i, s:i, s:b, s:i, s:f, s:{s:f, s:f, s:f, s:i, s:s, s:b}, s:i, s:f, s:i, s:f, s:b, "
        "s:s, s:b, s:i, s:{s:s}}",
        "architectures", "GptOssForCausalLM", "attention_bias", 1, "attention_dropout", 0.0,
        "eos_token_id", o->vocab - 1, "experts_per_token", o->top_k, "head_dim", o->head_dim,
        "hidden_act", "silu", "hidden_size", o->hidden, "initial_context_length", 64,
        "initializer_range", 0.02, "intermediate_size", o->ff, "layer_types", lt,
        "max_position_embeddings", 2048, "model_type", "gpt_oss", "num_attention_heads", o->heads,
        "num_experts_per_tok", o->top_k, "num_hidden_layers", o->layers, "num_key_value_heads",
        o->kv_heads, "num_local_experts", o->experts, "pad_token_id", o->vocab - 2,
        "output_router_logits", 0, "sliding_window", o->sliding_window, "rms_norm_eps", 1e-5,
        "rope_scaling", "beta_fast", 32.0, "beta_slow", 1.0, "factor", 32.0,
        "original_max_position_embeddings", 64, "rope_type", "yarn", "truncate", 0, "rope_theta",
        150000, "router_aux_loss_coef", 0.9, "vocab_size", o->vocab, "swiglu_limit", 7.0,
        "tie_word_embeddings", 0, "transformers_version", "4.55.0", "use_cache", 1, "bos_token_id",
        o->vocab - 3, "quantization_config", "quant_method", "mxfp4");
    if (o->bf16_experts) json_object_del(c, "quantization_config");
    return c;
}

static json_t *qwen3moe_config(const mwt_hf_opts *o) {
    return json_pack(
        "{s:[s], s:b, s:f, s:i, s:i, s:i, s:s, s:i, s:f, s:i, s:i, s:i, s:[], s:s, "
        "s:i, s:b, s:i, s:i, s:i, s:i, s:i, s:b, s:f, s:n, s:f, s:f, s:n, s:b, s:s, "
        "s:b, s:b, s:i, s:i}",
        "architectures", "Qwen3MoeForCausalLM", "attention_bias", 0, "attention_dropout", 0.0,
        "bos_token_id", o->vocab - 3, "decoder_sparse_step", 1, "eos_token_id", o->vocab - 1,
        "hidden_act", "silu", "hidden_size", o->hidden, "initializer_range", 0.02,
        "intermediate_size", 3 * o->ff, "max_position_embeddings", 4096, "max_window_layers",
        o->layers, "mlp_only_layers", "model_type", "qwen3_moe", "moe_intermediate_size", o->ff,
        "norm_topk_prob", 1, "num_attention_heads", o->heads, "num_experts", o->experts,
        "num_experts_per_tok", o->top_k, "num_hidden_layers", o->layers, "num_key_value_heads",
        o->kv_heads, "output_router_logits", 0, "rms_norm_eps", 1e-6, "rope_scaling", "rope_theta",
        1000000.0, "router_aux_loss_coef", 0.001, "sliding_window", "tie_word_embeddings", o->tied,
        "torch_dtype", "bfloat16", "use_cache", 1, "use_sliding_window", 0, "vocab_size", o->vocab,
        "head_dim", o->head_dim);
}

static json_t *deepseek_config(const mwt_hf_opts *o) {
    json_t *c = json_object();
    const struct {
        const char *k;
        int v;
    } ints[] = {{"bos_token_id", 0},
                {"eos_token_id", 1},
                {"first_k_dense_replace", o->dense_layers},
                {"hidden_size", o->hidden},
                {"intermediate_size", o->dense_ff},
                {"kv_lora_rank", o->kv_lora},
                {"max_position_embeddings", 8192},
                {"moe_intermediate_size", o->ff},
                {"moe_layer_freq", 1},
                {"n_group", o->groups},
                {"n_routed_experts", o->experts},
                {"n_shared_experts", o->shared},
                {"num_attention_heads", o->heads},
                {"num_experts_per_tok", o->top_k},
                {"num_hidden_layers", o->layers},
                {"num_key_value_heads", o->heads},
                {"num_nextn_predict_layers", o->mtp_layer ? 1 : 0},
                {"pretraining_tp", 1},
                {"qk_nope_head_dim", o->head_dim},
                {"qk_rope_head_dim", o->rope_dim},
                {"rope_theta", 10000},
                {"topk_group", o->groups_used},
                {"v_head_dim", o->v_dim},
                {"vocab_size", o->vocab}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        json_object_set_new(c, ints[i].k, json_integer(ints[i].v));
    json_object_set_new(c, "architectures", json_pack("[s]", "DeepseekV3ForCausalLM"));
    json_object_set_new(c, "model_type", json_string("deepseek_v3"));
    json_object_set_new(c, "hidden_act", json_string("silu"));
    json_object_set_new(c, "scoring_func", json_string("sigmoid"));
    json_object_set_new(c, "topk_method", json_string("noaux_tc"));
    json_object_set_new(c, "torch_dtype", json_string("bfloat16"));
    json_object_set_new(c, "transformers_version", json_string("4.33.1"));
    json_object_set_new(c, "attention_bias", json_false());
    json_object_set_new(c, "norm_topk_prob", json_true());
    json_object_set_new(c, "seq_aux", json_true());
    json_object_set_new(c, "tie_word_embeddings", json_false());
    json_object_set_new(c, "use_cache", json_true());
    json_object_set_new(c, "attention_dropout", json_real(0.0));
    json_object_set_new(c, "aux_loss_alpha", json_real(0.001));
    json_object_set_new(c, "initializer_range", json_real(0.02));
    json_object_set_new(c, "rms_norm_eps", json_real(1e-6));
    json_object_set_new(c, "routed_scaling_factor", json_real(2.5));
    json_object_set_new(c, "rope_scaling",
                        json_pack("{s:i, s:i, s:f, s:f, s:f, s:i, s:s}", "beta_fast", 32,
                                  "beta_slow", 1, "factor", 40.0, "mscale", 1.0, "mscale_all_dim",
                                  1.0, "original_max_position_embeddings", 4096, "type", "yarn"));
    json_object_set_new(c, "q_lora_rank", o->q_lora ? json_integer(o->q_lora) : json_null());
    if (o->fp8)
        json_object_set_new(c, "quantization_config",
                            json_pack("{s:s, s:s, s:s, s:[i, i]}", "activation_scheme", "dynamic",
                                      "fmt", "e4m3", "quant_method", "fp8", "weight_block_size",
                                      o->fp8_block[0], o->fp8_block[1]));
    return c;
}

/* model.layers.<l>.<s> in the buffer n */
#define P(s) (snprintf(n, sizeof n, "model.layers.%d.%s", l, s), n)

/* The q, k, v and o projections of layer l, with or without biases. */
static void add_attn(mwt_st *w, uint64_t *rng, const mwt_hf_opts *o, int l, bool bias) {
    int64_t H = o->hidden, Q = (int64_t)o->heads * o->head_dim,
            KV = (int64_t)o->kv_heads * o->head_dim;
    static const char *const proj[4] = {"q", "k", "v", "o"};
    char n[256], s[64];
    for (int p = 0; p < 4; p++) {
        int64_t out = p == 0 ? Q : p == 3 ? H : KV, in = p == 3 ? Q : H;
        snprintf(s, sizeof s, "self_attn.%s_proj.weight", proj[p]);
        add_rand(w, rng, P(s), "BF16", 2, (int64_t[]){out, in}, 0.1f);
        snprintf(s, sizeof s, "self_attn.%s_proj.bias", proj[p]);
        if (bias) add_rand(w, rng, P(s), "BF16", 1, (int64_t[]){out}, 0.1f);
    }
}

static void add_gpt_oss(mwt_st *w, uint64_t *rng, const mwt_hf_opts *o) {
    int64_t H = o->hidden, E = o->experts, F = o->ff, V = o->vocab;
    char n[256];
    add_rand(w, rng, "model.embed_tokens.weight", "BF16", 2, (int64_t[]){V, H}, 1);
    for (int l = 0; l < o->layers; l++) {
        add_rand(w, rng, P("input_layernorm.weight"), "F32", 1, (int64_t[]){H}, 1);
        add_attn(w, rng, o, l, true);
        add_rand(w, rng, P("self_attn.sinks"), "BF16", 1, (int64_t[]){o->heads}, 1);
        if (o->inv_freq)
            add_rand(w, rng, P("self_attn.rotary_emb.inv_freq"), "F32", 1,
                     (int64_t[]){o->head_dim / 2}, 1);
        add_rand(w, rng, P("post_attention_layernorm.weight"), "F32", 1, (int64_t[]){H}, 1);
        add_rand(w, rng, P("mlp.router.weight"), "BF16", 2, (int64_t[]){E, H}, 0.1f);
        add_rand(w, rng, P("mlp.router.bias"), "BF16", 1, (int64_t[]){E}, 0.1f);
        if (o->bf16_experts) {
            add_rand(w, rng, P("mlp.experts.gate_up_proj"), "BF16", 3, (int64_t[]){E, H, 2 * F},
                     0.1f);
            add_rand(w, rng, P("mlp.experts.down_proj"), "BF16", 3, (int64_t[]){E, F, H}, 0.1f);
        } else {
            add_bytes(w, rng, P("mlp.experts.gate_up_proj_blocks"), 4,
                      (int64_t[]){E, 2 * F, H / 32, 16}, 0, 256);
            add_bytes(w, rng, P("mlp.experts.gate_up_proj_scales"), 3,
                      (int64_t[]){E, 2 * F, H / 32}, 118, 12);
            add_bytes(w, rng, P("mlp.experts.down_proj_blocks"), 4, (int64_t[]){E, H, F / 32, 16},
                      0, 256);
            add_bytes(w, rng, P("mlp.experts.down_proj_scales"), 3, (int64_t[]){E, H, F / 32}, 118,
                      12);
        }
        add_rand(w, rng, P("mlp.experts.gate_up_proj_bias"), "BF16", 2, (int64_t[]){E, 2 * F},
                 0.1f);
        add_rand(w, rng, P("mlp.experts.down_proj_bias"), "BF16", 2, (int64_t[]){E, H}, 0.1f);
    }
    add_rand(w, rng, "model.norm.weight", "F32", 1, (int64_t[]){H}, 1);
    add_rand(w, rng, "lm_head.weight", "BF16", 2, (int64_t[]){V, H}, 0.1f);
}

static void add_qwen3moe(mwt_st *w, uint64_t *rng, const mwt_hf_opts *o) {
    int64_t H = o->hidden, F = o->ff, V = o->vocab, D = o->head_dim;
    char n[256];
    add_rand(w, rng, "model.embed_tokens.weight", "BF16", 2, (int64_t[]){V, H}, 1);
    for (int l = 0; l < o->layers; l++) {
        add_rand(w, rng, P("input_layernorm.weight"), "BF16", 1, (int64_t[]){H}, 1);
        add_attn(w, rng, o, l, false);
        add_rand(w, rng, P("self_attn.q_norm.weight"), "BF16", 1, (int64_t[]){D}, 1);
        add_rand(w, rng, P("self_attn.k_norm.weight"), "BF16", 1, (int64_t[]){D}, 1);
        if (o->inv_freq)
            add_rand(w, rng, P("self_attn.rotary_emb.inv_freq"), "F32", 1, (int64_t[]){D / 2}, 1);
        add_rand(w, rng, P("post_attention_layernorm.weight"), "BF16", 1, (int64_t[]){H}, 1);
        add_rand(w, rng, P("mlp.gate.weight"), "BF16", 2, (int64_t[]){o->experts, H}, 0.1f);
        /* experts in the order real checkpoints interleave them: per expert gate, up, down */
        for (int e = 0; e < o->experts; e++) {
            char s[128];
            snprintf(s, sizeof s, "mlp.experts.%d.gate_proj.weight", e);
            add_rand(w, rng, P(s), "BF16", 2, (int64_t[]){F, H}, 0.1f);
            snprintf(s, sizeof s, "mlp.experts.%d.up_proj.weight", e);
            add_rand(w, rng, P(s), "BF16", 2, (int64_t[]){F, H}, 0.1f);
            snprintf(s, sizeof s, "mlp.experts.%d.down_proj.weight", e);
            add_rand(w, rng, P(s), "BF16", 2, (int64_t[]){H, F}, 0.1f);
        }
    }
    add_rand(w, rng, "model.norm.weight", "BF16", 1, (int64_t[]){H}, 1);
    if (!o->tied) add_rand(w, rng, "lm_head.weight", "BF16", 2, (int64_t[]){V, H}, 0.1f);
}

/* A DeepSeek matrix [out, in]: FP8 with its scales, or BF16. */
static void add_ds_mat(mwt_st *w, uint64_t *rng, const mwt_hf_opts *o, const char *name,
                       int64_t out, int64_t in) {
    if (o->fp8)
        add_fp8(w, rng, name, out, in, o->fp8_block);
    else
        add_rand(w, rng, name, "BF16", 2, (int64_t[]){out, in}, 1.0f / sqrtf((float)in));
}

static void add_ds_layer(mwt_st *w, uint64_t *rng, const mwt_hf_opts *o, int l) {
    const int64_t H = o->hidden, NH = o->heads, qk = (int64_t)o->head_dim + o->rope_dim;
    const int64_t R = o->kv_lora, F = o->ff;
    char n[256];
    add_rand(w, rng, P("input_layernorm.weight"), "BF16", 1, (int64_t[]){H}, 1);
    if (o->q_lora) {
        add_ds_mat(w, rng, o, P("self_attn.q_a_proj.weight"), o->q_lora, H);
        add_rand(w, rng, P("self_attn.q_a_layernorm.weight"), "BF16", 1, (int64_t[]){o->q_lora}, 1);
        add_ds_mat(w, rng, o, P("self_attn.q_b_proj.weight"), NH * qk, o->q_lora);
    } else {
        add_ds_mat(w, rng, o, P("self_attn.q_proj.weight"), NH * qk, H);
    }
    add_ds_mat(w, rng, o, P("self_attn.kv_a_proj_with_mqa.weight"), R + o->rope_dim, H);
    add_rand(w, rng, P("self_attn.kv_a_layernorm.weight"), "BF16", 1, (int64_t[]){R}, 1);
    add_ds_mat(w, rng, o, P("self_attn.kv_b_proj.weight"), NH * (o->head_dim + o->v_dim), R);
    add_ds_mat(w, rng, o, P("self_attn.o_proj.weight"), H, NH * o->v_dim);
    add_rand(w, rng, P("post_attention_layernorm.weight"), "BF16", 1, (int64_t[]){H}, 1);
    if (l < o->dense_layers) {
        add_ds_mat(w, rng, o, P("mlp.gate_proj.weight"), o->dense_ff, H);
        add_ds_mat(w, rng, o, P("mlp.up_proj.weight"), o->dense_ff, H);
        add_ds_mat(w, rng, o, P("mlp.down_proj.weight"), H, o->dense_ff);
        return;
    }
    add_rand(w, rng, P("mlp.gate.weight"), "BF16", 2, (int64_t[]){o->experts, H}, 0.3f);
    add_rand(w, rng, P("mlp.gate.e_score_correction_bias"), "F32", 1, (int64_t[]){o->experts},
             0.05f);
    for (int e = 0; e < o->experts; e++) {
        char s[128];
        snprintf(s, sizeof s, "mlp.experts.%d.gate_proj.weight", e);
        add_ds_mat(w, rng, o, P(s), F, H);
        snprintf(s, sizeof s, "mlp.experts.%d.up_proj.weight", e);
        add_ds_mat(w, rng, o, P(s), F, H);
        snprintf(s, sizeof s, "mlp.experts.%d.down_proj.weight", e);
        add_ds_mat(w, rng, o, P(s), H, F);
    }
    if (o->shared) {
        add_ds_mat(w, rng, o, P("mlp.shared_experts.gate_proj.weight"), F * o->shared, H);
        add_ds_mat(w, rng, o, P("mlp.shared_experts.up_proj.weight"), F * o->shared, H);
        add_ds_mat(w, rng, o, P("mlp.shared_experts.down_proj.weight"), H, F * o->shared);
    }
}

static void add_deepseek(mwt_st *w, uint64_t *rng, const mwt_hf_opts *o) {
    const int64_t H = o->hidden, V = o->vocab;
    add_rand(w, rng, "model.embed_tokens.weight", "BF16", 2, (int64_t[]){V, H}, 1);
    for (int l = 0; l < o->layers; l++) add_ds_layer(w, rng, o, l);
    if (o->mtp_layer) { /* DeepSeek-V3's multi-token prediction layer: a few of its tensors */
        char n[256];
        const int l = o->layers;
        add_rand(w, rng, P("enorm.weight"), "BF16", 1, (int64_t[]){H}, 1);
        add_ds_mat(w, rng, o, P("eh_proj.weight"), H, 2 * H);
        add_rand(w, rng, P("shared_head.norm.weight"), "BF16", 1, (int64_t[]){H}, 1);
    }
    add_rand(w, rng, "model.norm.weight", "BF16", 1, (int64_t[]){H}, 1);
    add_rand(w, rng, "lm_head.weight", "BF16", 2, (int64_t[]){V, H}, 0.1f);
}

#undef P

static int write_json(const char *dir, const char *name, json_t *j) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int rc = json_dump_file(j, path, JSON_INDENT(2));
    json_decref(j);
    return rc;
}

static int write_text(const char *dir, const char *name, const char *text) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

/* Writes the tensors of w into n shards (contiguous runs in added order) plus the index. */
static int write_shards(const char *dir, const mwt_st *w, int n) {
    char path[4096], fname[64];
    if (n <= 1) {
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        return mwt_st_write(w, path);
    }
    json_t *map = json_object();
    size_t count = mwt_st_count(w);
    int rc = 0;
    for (int s = 0; s < n && !rc; s++) {
        mwt_st *part = mwt_st_new();
        mwt_st_meta(part, "format", "pt");
        snprintf(fname, sizeof fname, "model-%05d-of-%05d.safetensors", s + 1, n);
        for (size_t i = count * (size_t)s / (size_t)n; i < count * (size_t)(s + 1) / (size_t)n;
             i++) {
            const st_item *it = &w->items[i];
            mwt_st_add(part, it->name, it->dtype, it->n_dims, it->shape, it->data, it->nbytes);
            json_object_set_new(map, it->name, json_string(fname));
        }
        snprintf(path, sizeof path, "%s/%s", dir, fname);
        rc = mwt_st_write(part, path);
        mwt_st_free(part);
    }
    json_t *index = json_pack("{s:{s:i}, s:o}", "metadata", "total_size", 0, "weight_map", map);
    return rc ? rc : write_json(dir, "model.safetensors.index.json", index);
}

int mwt_hf_write(const char *dir, const mwt_hf_opts *o) {
    mkdir(dir, 0755);
    bool gpt = !strcmp(o->model_type, "gpt_oss");
    bool ds = !strcmp(o->model_type, "deepseek_v3") || !strcmp(o->model_type, "kimi_k2");
    json_t *cfg = gpt ? gpt_oss_config(o) : ds ? deepseek_config(o) : qwen3moe_config(o);
    if (strcmp(o->model_type, "gpt_oss") && strcmp(o->model_type, "qwen3_moe"))
        json_object_set_new(cfg, "model_type", json_string(o->model_type));
    if (o->config_patch) {
        json_t *patch = json_loads(o->config_patch, 0, NULL);
        if (!patch) return -1;
        const char *k;
        json_t *v;
        json_object_foreach(patch, k, v) {
            if (json_is_null(v))
                json_object_del(cfg, k);
            else
                json_object_set(cfg, k, v);
        }
        json_decref(patch);
    }
    if (write_json(dir, "config.json", cfg)) return -1;
    if (write_json(dir, "generation_config.json",
                   json_pack("{s:i}", "eos_token_id", o->vocab - 1)) ||
        write_json(dir, "tokenizer_config.json", json_pack("{s:s}", "eos_token", "<|end|>")) ||
        write_text(dir, "chat_template.jinja", "{{ messages }}\n"))
        return -1;
    uint64_t rng = o->seed;
    mwt_st *w = mwt_st_new();
    if (gpt)
        add_gpt_oss(w, &rng, o);
    else if (ds)
        add_deepseek(w, &rng, o);
    else
        add_qwen3moe(w, &rng, o);
    if (o->inv_freq) add_rand(w, &rng, "model.rotary_emb.inv_freq", "F32", 1, (int64_t[]){4}, 1);
    if (o->extra_tensor) add_rand(w, &rng, o->extra_tensor, "F32", 1, (int64_t[]){4}, 1);
    int rc = write_shards(dir, w, o->shards);
    mwt_st_free(w);
    return rc;
}
