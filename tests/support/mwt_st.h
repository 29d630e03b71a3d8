/* tests/support/mwt_st.h — writing safetensors files and small synthetic Hugging Face checkpoints
 * (gpt-oss with native MXFP4 or BF16 experts, qwen3moe with per-expert tensors, DeepSeek-V3 with
 * FP8 e4m3 block-scaled or BF16 weights), single-file or sharded through
 * model.safetensors.index.json, for the reader and extract tests. */
#ifndef MWT_ST_H
#define MWT_ST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The cmocka fixture of the safetensors/HF tests: a fresh temporary directory and paths in it
 * (*state is an mwt_fx *; everything is removed afterwards). */
typedef struct mwt_fx {
    char *dir;
    char file[4096]; /* dir/t.safetensors */
    char ck[4096];   /* dir/tiny-ckpt: a checkpoint directory */
    char out[4096];  /* dir/out.vindex */
} mwt_fx;

int mwt_fx_setup(void **state);
int mwt_fx_teardown(void **state);
#define MWT_FX_TEST(t) cmocka_unit_test_setup_teardown(t, mwt_fx_setup, mwt_fx_teardown)

/* A safetensors file under construction; tensors are laid out in the order added. */
typedef struct mwt_st mwt_st;

mwt_st *mwt_st_new(void);
void mwt_st_free(mwt_st *w);
/* Copies data (nbytes). shape is slowest-first as in the header. */
void mwt_st_add(mwt_st *w, const char *name, const char *dtype, int n_dims, const int64_t *shape,
                const void *data, size_t nbytes);
void mwt_st_meta(mwt_st *w, const char *key, const char *value);
size_t mwt_st_count(const mwt_st *w);
const char *mwt_st_name(const mwt_st *w, size_t i);
/* Writes the file; returns 0 or -1. */
int mwt_st_write(const mwt_st *w, const char *path);
/* Writes an 8-byte length (hlen, which may lie), the header text and data as given. */
int mwt_st_write_raw(const char *path, uint64_t hlen, const char *header, const void *data,
                     size_t nbytes);

/* A synthetic checkpoint. Values are pseudo-random from seed, distinct per expert and row. */
typedef struct mwt_hf_opts {
    const char *model_type; /* "gpt_oss", "qwen3_moe", "deepseek_v3" (or "kimi_k2") */
    int layers, hidden, heads, kv_heads, head_dim, experts, top_k, ff, vocab;
    int sliding_window;
    int shards;               /* 1: model.safetensors; N > 1: N shards and an index */
    bool bf16_experts;        /* gpt-oss: unquantized [E, in, out] experts instead of MXFP4 */
    bool inv_freq;            /* add rotary_emb.inv_freq tensors (dropped by rule) */
    bool tied;                /* qwen3moe: tie_word_embeddings, no lm_head.weight */
    const char *extra_tensor; /* name of an extra F32 [4] tensor, or NULL */
    const char *config_patch; /* JSON object merged into config.json (null values delete keys) */
    uint64_t seed;
    /* deepseek_v3 (head_dim is qk_nope_head_dim) */
    int q_lora, kv_lora, rope_dim, v_dim; /* q_lora 0: one q_proj */
    int dense_layers, dense_ff, shared, groups, groups_used;
    bool fp8;         /* FP8 e4m3 matrices with weight_scale_inv blocks (else BF16) */
    int fp8_block[2]; /* weight_block_size */
    bool mtp_layer;   /* one num_nextn_predict_layers layer of tensors after the last */
} mwt_hf_opts;

/* Fills o with a small valid shape for the family (hidden 96: not a multiple of 256). */
void mwt_hf_defaults(mwt_hf_opts *o, const char *model_type);
/* Writes config.json, tokenizer files and the safetensors into dir (created if missing). */
int mwt_hf_write(const char *dir, const mwt_hf_opts *o);

/* Independent reference: the float value of element (row r, column k) of an HF MXFP4 tensor
 * stored as blocks [.., rows, G, 16] / scales [.., rows, G], matrix m. */
float mwt_hf_mxfp4_value(const uint8_t *blocks, const uint8_t *scales, int64_t rows, int64_t cols,
                         int64_t m, int64_t r, int64_t k);
/* The float value of element j of a ggml block_mxfp4 row (FORMATS.md §1). */
float mwt_ggml_mxfp4_value(const uint8_t *row, int64_t j);
float mwt_bf16(uint16_t v);
/* Round to bf16, nearest even (the test's own). */
uint16_t mwt_bf16_rne(float f);
/* FP8 e4m3 (no infinities; 0x7F / 0xFF NaN) by the format's definition. */
float mwt_fp8_e4m3(uint8_t b);

#endif
