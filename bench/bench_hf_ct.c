/* bench/bench_hf_ct.c — extract speed of a Hugging Face checkpoint whose routed experts are
 * compressed-tensors MXFP4 (weight_packed + weight_scale per expert, as Kimi K3 ships them): GB/s
 * of vindex bytes written, beside extracting the same model from a GGUF (its experts already in
 * ggml's MXFP4 blocks) and one thread's SHA-256 (OpenSSL), which extract computes over every byte,
 * both measured in the same run.
 *
 * The checkpoint is written here, one safetensors file under --dir: a Kimi Linear config whose
 * experts have Kimi K3's shape (input width 3584, K3's latent width; expert FF 3072), --experts
 * per layer and --layers KDA layers with small attention; bytes are pseudo-random (extract moves
 * bits, it does not look at values). `bench_hf_ct --help` lists the options. */
#include <jansson.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "vindex/vx_input.h"
#include "vindex/vx_synth.h"
#include "vindex/vx_vindex.h"

#define HID  3584 /* K3's expert input width (routed_expert_hidden_size) */
#define FF   3072 /* K3's moe_intermediate_size */
#define VOC  512
#define KH   4  /* KDA heads */
#define KD   64 /* KDA head size */
#define KDIM (KH * KD)

typedef struct tensor {
    char name[160];
    const char *dtype;
    int n;
    int64_t shape[4];
    uint64_t bytes;
} tensor;

typedef struct plan {
    tensor *t;
    size_t n, cap;
    uint64_t expert_bytes;
} plan;

/* Appends a tensor named by fmt (printf) of n dimensions, esz_num / esz_den bytes an element. */
static void add(plan *p, const char *dtype, int esz_num, int esz_den, int n, const int64_t *sh,
                const char *fmt, ...) {
    if (p->n == p->cap &&
        !(p->t = realloc(p->t, (p->cap = p->cap ? 2 * p->cap : 256) * sizeof *p->t)))
        exit(1);
    tensor *t = &p->t[p->n++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    t->dtype = dtype, t->n = n;
    uint64_t e = 1;
    for (int i = 0; i < n; i++) t->shape[i] = sh[i], e *= (uint64_t)sh[i];
    t->bytes = e * (uint64_t)esz_num / (uint64_t)esz_den;
}

#define BF16(name, n, ...)                                                                         \
    add(p, "BF16", 2, 1, n, (int64_t[]){__VA_ARGS__}, "model.layers.%d.%s", l, name)

static void kda_layer(plan *p, int l) {
    BF16("input_layernorm.weight", 1, HID);
    BF16("post_attention_layernorm.weight", 1, HID);
    static const char *const qkv = "qkv";
    for (int i = 0; i < 3; i++) {
        char proj[64], conv[64];
        snprintf(proj, sizeof proj, "self_attn.%c_proj.weight", qkv[i]);
        snprintf(conv, sizeof conv, "self_attn.%c_conv1d.weight", qkv[i]);
        BF16(proj, 2, KDIM, HID);
        BF16(conv, 3, KDIM, 1, 4);
    }
    BF16("self_attn.f_a_proj.weight", 2, KD, HID);
    BF16("self_attn.f_b_proj.weight", 2, KDIM, KD);
    BF16("self_attn.g_a_proj.weight", 2, KD, HID);
    BF16("self_attn.g_b_proj.weight", 2, KDIM, KD);
    BF16("self_attn.dt_bias", 1, KDIM);
    BF16("self_attn.b_proj.weight", 2, KH, HID);
    BF16("self_attn.o_norm.weight", 1, KD);
    BF16("self_attn.o_proj.weight", 2, HID, KDIM);
    add(p, "F32", 4, 1, 4, (int64_t[]){1, 1, KH, 1}, "model.layers.%d.self_attn.A_log", l);
}

static void moe_layer(plan *p, int l, int experts) {
    BF16("block_sparse_moe.gate.weight", 2, experts, HID);
    add(p, "F32", 4, 1, 1, (int64_t[]){experts},
        "model.layers.%d.block_sparse_moe.gate.e_score_correction_bias", l);
    static const char *const w[] = {"w1", "w3", "w2"};
    for (int e = 0; e < experts; e++)
        for (int k = 0; k < 3; k++) {
            const int64_t rows = k < 2 ? FF : HID, cols = k < 2 ? HID : FF;
            add(p, "U8", 1, 1, 2, (int64_t[]){rows, cols / 2},
                "model.layers.%d.block_sparse_moe.experts.%d.%s.weight_packed", l, e, w[k]);
            add(p, "U8", 1, 1, 2, (int64_t[]){rows, cols / 32},
                "model.layers.%d.block_sparse_moe.experts.%d.%s.weight_scale", l, e, w[k]);
            p->expert_bytes += (uint64_t)(rows * cols / 2 + rows * cols / 32);
        }
}

static void global(plan *p) {
    add(p, "BF16", 2, 1, 2, (int64_t[]){VOC, HID}, "model.embed_tokens.weight");
    add(p, "BF16", 2, 1, 1, (int64_t[]){HID}, "model.norm.weight");
    add(p, "BF16", 2, 1, 2, (int64_t[]){VOC, HID}, "lm_head.weight");
}

/* The safetensors file: header, then every tensor's pseudo-random bytes (scales near 2^0, so
 * the file is what a real one looks like to anything that reads values). */
static uint64_t write_st(const char *path, const plan *p) {
    json_t *h = json_object();
    uint64_t off = 0;
    for (size_t i = 0; i < p->n; i++) {
        json_t *shape = json_array();
        for (int k = 0; k < p->t[i].n; k++)
            json_array_append_new(shape, json_integer(p->t[i].shape[k]));
        json_object_set_new(h, p->t[i].name,
                            json_pack("{s:s, s:o, s:[I, I]}", "dtype", p->t[i].dtype, "shape",
                                      shape, "data_offsets", (json_int_t)off,
                                      (json_int_t)(off + p->t[i].bytes)));
        off += p->t[i].bytes;
    }
    char *text = json_dumps(h, JSON_COMPACT);
    size_t n = strlen(text), pad = (8 - n % 8) % 8;
    FILE *f = fopen(path, "wb");
    uint64_t hl = n + pad;
    if (!f || fwrite(&hl, 8, 1, f) != 1 || fwrite(text, 1, n, f) != n) exit(1);
    for (size_t i = 0; i < pad; i++) fputc(' ', f);
    static uint8_t buf[1 << 20];
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < p->n; i++) {
        const bool scale = strstr(p->t[i].name, "weight_scale") != NULL;
        for (uint64_t left = p->t[i].bytes; left;) {
            size_t k = left < sizeof buf ? (size_t)left : sizeof buf;
            for (size_t j = 0; j < k; j++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                buf[j] = scale ? (uint8_t)(120 + x % 15) : (uint8_t)x;
            }
            if (fwrite(buf, 1, k, f) != k) exit(1);
            left -= k;
        }
    }
    fclose(f);
    free(text);
    json_decref(h);
    return 8 + hl + off;
}

static void write_config(const char *dir, int layers, int experts) {
    char p[4200];
    snprintf(p, sizeof p, "%s/config.json", dir);
    json_t *kda = json_array();
    for (int l = 1; l <= layers; l++) json_array_append_new(kda, json_integer(l));
    json_t *c = json_pack(
        "{s:s, s:[s], s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, "
        "s:i, s:n, s:s, s:b, s:s, s:b, s:{s:[], s:o, s:i, s:i, s:i}, "
        "s:{s:s, s:s, s:{s:{s:[s], s:{s:i, s:s, s:i, s:s, s:b, s:b}, s:n, s:n}}, s:s}}",
        "model_type", "kimi_linear", "architectures", "KimiLinearForCausalLM", "num_hidden_layers",
        layers, "max_position_embeddings", 4096, "hidden_size", HID, "intermediate_size", FF,
        "moe_intermediate_size", FF, "num_attention_heads", KH, "rms_norm_eps", 1e-5, "num_experts",
        experts, "num_experts_per_token", 4, "vocab_size", VOC, "kv_lora_rank", 64,
        "qk_nope_head_dim", 32, "qk_rope_head_dim", 16, "v_head_dim", 32, "first_k_dense_replace",
        0, "num_shared_experts", 0, "q_lora_rank", "hidden_act", "silu", "moe_renormalize", 1,
        "moe_router_activation_func", "sigmoid", "mla_use_nope", 1, "linear_attn_config",
        "full_attn_layers", "kda_layers", kda, "num_heads", KH, "head_dim", KD,
        "short_conv_kernel_size", 4, "quantization_config", "quant_method", "compressed-tensors",
        "format", "mxfp4-pack-quantized", "config_groups", "group_0", "targets", "Linear",
        "weights", "num_bits", 4, "type", "float", "group_size", 32, "strategy", "group",
        "symmetric", 1, "dynamic", 0, "input_activations", "output_activations",
        "quantization_status", "compressed");
    if (!c || json_dump_file(c, p, 0)) exit(1);
    json_decref(c);
}

static double sha256_mbps(void) {
    size_t n = 64u << 20;
    uint8_t *buf = malloc(n), out[64];
    unsigned len;
    for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)(i * 2654435761u >> 13);
    double best = 0;
    for (int r = 0; r < 3; r++) {
        double t0 = bu_now();
        EVP_Digest(buf, n, out, &len, EVP_sha256(), NULL);
        double v = (double)n / 1e6 / (bu_now() - t0);
        if (v > best) best = v;
    }
    free(buf);
    return best;
}

/* vx_input_open + vx_extract of src into out, in seconds */
static double timed_extract(const char *src, const char *out, vx_extract_stats *s) {
    mw_err e;
    vx_input *in;
    double t0 = bu_now();
    if (vx_input_open(src, &in, &e) || vx_extract(in, out, NULL, s, &e)) {
        fprintf(stderr, "bench_hf_ct: %s: %s\n", src, e.msg);
        exit(1);
    }
    const double secs = bu_now() - t0;
    vx_input_close(in);
    return secs;
}

int main(int argc, char **argv) {
    int layers = 2, experts = 16;
    const char *dir = NULL;
    const bu_opt opt[] = {
        BU_OPT_IN("--layers", BU_INT, &layers, "2", "MoE layers (KDA attention)", 1, 93),
        BU_OPT_IN("--experts", BU_INT, &experts, "16", "routed experts per layer", 4, 896),
        BU_OPT("--dir", BU_STR, &dir, "DIR", "work here (default: a fresh temporary directory)"),
    };
    const bu_cli cli = {"bench_hf_ct",
                        "extract speed of a checkpoint with compressed-tensors MXFP4 experts of "
                        "Kimi K3's shape,\nin GB/s beside SHA-256 measured in the same run.",
                        NULL,
                        NULL,
                        opt,
                        (int)(sizeof opt / sizeof opt[0])};
    const int status = bu_args(argc, argv, &cli, NULL);
    if (status != BU_RUN) return status;
    if (sodium_init() < 0) return 1;
    char tmpl[] = "/tmp/bench-hf-ct-XXXXXX", ck[4200], vx[4200], st[4300];
    if (!dir && !(dir = mkdtemp(tmpl))) return 1;
    snprintf(ck, sizeof ck, "%s/ckpt", dir);
    snprintf(vx, sizeof vx, "%s/model.vindex", dir);
    snprintf(st, sizeof st, "%s/model.safetensors", ck);
    if (mkdir(ck, 0755) && access(ck, F_OK)) return 1;
    plan p = {0};
    global(&p);
    for (int l = 0; l < layers; l++) kda_layer(&p, l), moe_layer(&p, l, experts);
    const double sha = sha256_mbps();
    const uint64_t file = write_st(st, &p);
    write_config(ck, layers, experts);
    vx_extract_stats s;
    const double secs = timed_extract(ck, vx, &s);
    /* the same model as a GGUF (its MXFP4 experts already in ggml's blocks), extracted the same
     * way: the route the checkpoint would otherwise take after a conversion */
    char gguf[4300], gvx[4300];
    snprintf(gguf, sizeof gguf, "%s/model.gguf", dir);
    snprintf(gvx, sizeof gvx, "%s/gguf.vindex", dir);
    mw_err e;
    vx_input *in;
    if (vx_input_open(ck, &in, &e) || vx_input_write_gguf(in, gguf, NULL, NULL, &e)) {
        fprintf(stderr, "bench_hf_ct: %s\n", e.msg);
        return 1;
    }
    vx_input_close(in);
    vx_extract_stats gs;
    const double gsecs = timed_extract(gguf, gvx, &gs);
    const double gb = (double)(s.dense_bytes + s.expert_bytes) / 1e9;
    printf("{\"bench\":\"hf_ct_extract\",\"layers\":%d,\"experts\":%d,\"checkpoint_GB\":%.3f,"
           "\"packed_expert_GB\":%.3f,\"vindex_GB\":%.3f,\"seconds\":%.2f,\"GBps\":%.3f,"
           "\"gguf_seconds\":%.2f,\"gguf_GBps\":%.3f,\"sha256_GBps\":%.3f,\"vs_sha256\":%.2f}\n",
           layers, experts, (double)file / 1e9, (double)p.expert_bytes / 1e9, gb, secs, gb / secs,
           gsecs, gb / gsecs, sha / 1e3, gb / secs / (sha / 1e3));
    printf("| %d × %d experts (%.2f GB) | %.2f GB/s (%.2f s) | %.2f GB/s (%.2f s) | %.2f× | "
           "%.2f× SHA-256 (%.2f GB/s) |\n",
           layers, experts, gb, gb / secs, secs, gb / gsecs, gsecs, gsecs / secs,
           gb / secs / (sha / 1e3), sha / 1e3);
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s' '%s' '%s'", ck, vx, gguf, gvx);
    if (system(cmd) != 0) fprintf(stderr, "bench_hf_ct: could not clean %s\n", dir);
    if (dir == tmpl) rmdir(dir);
    free(p.t);
    return 0;
}
