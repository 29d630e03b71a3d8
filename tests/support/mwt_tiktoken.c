/* tests/support/mwt_tiktoken.c — see mwt_tiktoken.h. */
#include "tests/support/mwt_tiktoken.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/mw_test.h"
#include "tests/support/mwt_tk.h"
#include "vindex/vx_meta.h"

const mwt_kimi_special mwt_kimi_specials[MWT_KIMI_N_SPECIALS] = {
    {0, "[BOS]"},
    {1, "[EOS]"},
    {2, "<|im_end|>"},
    {3, "<|im_user|>"},
    {4, "<|im_assistant|>"},
    {6, "<|start_header_id|>"},
    {7, "<|end_header_id|>"},
    {9, "[EOT]"},
    {10, "<|im_system|>"},
    {17, "<|im_middle|>"},
    {20, "<|open|>"},
    {21, "<|close|>"},
    {22, "<|sep|>"},
    {23, "<|end_of_msg|>"},
};

#define N_SPECIAL 258 /* tokenization_kimi.py: 256 reserved and two more */

void mwt_ranks_add(mwt_ranks *r, const void *bytes, size_t len) {
    if ((r->n & (r->n - 1)) == 0) { /* a power of two (or 0): double the room */
        size_t cap = r->n ? 2 * (size_t)r->n : 1;
        r->b = realloc(r->b, cap * sizeof *r->b);
        r->len = realloc(r->len, cap * sizeof *r->len);
    }
    r->b[r->n] = malloc(len ? len : 1);
    memcpy(r->b[r->n], bytes, len);
    r->len[r->n++] = len;
}

void mwt_ranks_free(mwt_ranks *r) {
    for (int32_t i = 0; i < r->n; i++) free(r->b[i]);
    free(r->b);
    free(r->len);
    *r = (mwt_ranks){0};
}

/* ---- training ---------------------------------------------------------------------------------
 */

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The most frequent adjacent pair of seq (-1 separates words), ties to the smallest key. */
static uint64_t best_pair(const int32_t *seq, size_t n, uint64_t *keys) {
    size_t k = 0;
    for (size_t i = 0; i + 1 < n; i++)
        if (seq[i] >= 0 && seq[i + 1] >= 0)
            keys[k++] = (uint64_t)seq[i] << 32 | (uint32_t)seq[i + 1];
    qsort(keys, k, sizeof *keys, cmp_u64);
    uint64_t best = UINT64_MAX;
    size_t best_n = 1;
    for (size_t i = 0; i < k;) {
        size_t j = i;
        while (j < k && keys[j] == keys[i]) j++;
        if (j - i > best_n) best_n = j - i, best = keys[i];
        i = j;
    }
    return best;
}

void mwt_ranks_train(mwt_ranks *r, const char *text, int n_merges) {
    int32_t rank_of[256];
    for (int i = 0; i < 256; i++) { /* 167 is odd: a permutation of the bytes */
        unsigned char b = (unsigned char)((i * 167 + 13) & 255);
        rank_of[b] = r->n;
        mwt_ranks_add(r, &b, 1);
    }
    size_t len = strlen(text), n = 0;
    int32_t *seq = malloc((2 * len + 1) * sizeof *seq);
    uint64_t *keys = malloc((2 * len + 1) * sizeof *keys);
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ' && i) seq[n++] = -1; /* a word starts at each space */
        seq[n++] = rank_of[(unsigned char)text[i]];
    }
    for (int m = 0; m < n_merges; m++) {
        uint64_t p = best_pair(seq, n, keys);
        if (p == UINT64_MAX) break;
        int32_t a = (int32_t)(p >> 32), b = (int32_t)(uint32_t)p;
        unsigned char buf[4096];
        memcpy(buf, r->b[a], r->len[a]);
        memcpy(buf + r->len[a], r->b[b], r->len[b]);
        int32_t id = r->n;
        mwt_ranks_add(r, buf, r->len[a] + r->len[b]);
        size_t o = 0;
        for (size_t i = 0; i < n; i++) {
            if (i + 1 < n && seq[i] == a && seq[i + 1] == b) {
                seq[o++] = id;
                i++;
            } else
                seq[o++] = seq[i];
        }
        n = o;
    }
    free(seq);
    free(keys);
}

/* ---- the Hugging Face files -------------------------------------------------------------------
 */

static void b64(const unsigned char *p, size_t n, FILE *f) {
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        uint32_t w = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        fputc(a[w >> 18 & 63], f);
        fputc(a[w >> 12 & 63], f);
        fputc(i + 1 < n ? a[w >> 6 & 63] : '=', f);
        fputc(i + 2 < n ? a[w & 63] : '=', f);
    }
}

static const char *const kimi_py =
    "import tiktoken\n\nclass TikTokenTokenizer(PreTrainedTokenizer):\n"
    "    num_reserved_special_tokens = 256\n\n    pat_str = \"|\".join(\n        [\n"
    "            r\"\"\"[\\p{Han}]+\"\"\",\n"
    "            r\"\"\"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]*"
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?\"\"\",\n"
    "            r\"\"\"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]+"
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?\"\"\",\n"
    "            r\"\"\"\\p{N}{1,3}\"\"\",\n"
    "            r\"\"\" ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*\"\"\",\n"
    "            r\"\"\"\\s*[\\r\\n]+\"\"\",\n"
    "            r\"\"\"\\s+(?!\\S)\"\"\",\n"
    "            r\"\"\"\\s+\"\"\",\n        ]\n    )\n";

/* tiktoken.model, tokenizer_config.json (specials[i] at id base + k[i]) and the class's file */
static int write_files(const char *dir, const mwt_ranks *r, const char *const *text, const int *k,
                       int n) {
    char p[4200];
    snprintf(p, sizeof p, "%s/tiktoken.model", dir);
    FILE *f = fopen(p, "wb");
    if (!f) return -1;
    for (int32_t i = 0; i < r->n; i++) {
        b64(r->b[i], r->len[i], f);
        fprintf(f, " %d\n", i);
    }
    fclose(f);
    snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
    if (!(f = fopen(p, "wb"))) return -1;
    fprintf(f, "{\"auto_map\": {\"AutoTokenizer\": [\"tokenization_kimi.TikTokenTokenizer\", "
               "null]},\n \"tokenizer_class\": \"TikTokenTokenizer\",\n \"bos_token\": \"[BOS]\", "
               "\"eos_token\": \"[EOS]\",\n \"added_tokens_decoder\": {");
    for (int i = 0; i < n; i++)
        fprintf(f, "%s\"%d\": {\"content\": \"%s\", \"special\": true}", i ? ", " : "", r->n + k[i],
                text[i]);
    fprintf(f, "}}\n");
    fclose(f);
    snprintf(p, sizeof p, "%s/tokenization_kimi.py", dir);
    return mwt_write_file(p, kimi_py, strlen(kimi_py));
}

int mwt_kimi_write_hf(const char *dir, const mwt_ranks *r, const char *config_json) {
    const char *text[MWT_KIMI_N_SPECIALS];
    int k[MWT_KIMI_N_SPECIALS];
    for (int i = 0; i < MWT_KIMI_N_SPECIALS; i++)
        text[i] = mwt_kimi_specials[i].text, k[i] = mwt_kimi_specials[i].k;
    if (write_files(dir, r, text, k, MWT_KIMI_N_SPECIALS)) return -1;
    if (!config_json) return 0;
    char p[4200];
    snprintf(p, sizeof p, "%s/config.json", dir);
    return mwt_write_file(p, config_json, strlen(config_json));
}

int mwt_tiktoken_write(const char *dir, const mwt_ranks *r, const char *const *specials, int n) {
    int k[64];
    for (int i = 0; i < n && i < 64; i++) k[i] = i;
    return write_files(dir, r, specials, k, n < 64 ? n : 64);
}

/* ---- the GGUF keys ----------------------------------------------------------------------------
 */

/* bytes → rank, open addressing */
typedef struct rmap {
    const mwt_ranks *r;
    int32_t *slot;
    size_t cap;
} rmap;

static uint64_t fnv(const unsigned char *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static int32_t rmap_get(const rmap *m, const unsigned char *p, size_t n) {
    for (size_t i = fnv(p, n) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        int32_t id = m->slot[i];
        if (id < 0) return -1;
        if (m->r->len[id] == n && !memcmp(m->r->b[id], p, n)) return id;
    }
}

static void rmap_init(rmap *m, const mwt_ranks *r) {
    m->r = r;
    for (m->cap = 16; m->cap < 2 * (size_t)r->n; m->cap *= 2) {
    }
    m->slot = malloc(m->cap * sizeof *m->slot);
    memset(m->slot, 0xff, m->cap * sizeof *m->slot);
    for (int32_t id = 0; id < r->n; id++) {
        size_t i = fnv(r->b[id], r->len[id]) & (m->cap - 1);
        while (m->slot[i] >= 0) i = (i + 1) & (m->cap - 1);
        m->slot[i] = id;
    }
}

/* llama.cpp's converter: BPE over the token's bytes with the ranks below its own; when two parts
 * are left, they are its merge. Returns the split point, or 0. */
static size_t merge_split(const rmap *m, int32_t tok) {
    const mwt_ranks *r = m->r;
    size_t n = r->len[tok], cut[4097], k = n; /* parts: [cut[i], cut[i + 1]) */
    for (size_t i = 0; i <= n; i++) cut[i] = i;
    for (;;) {
        int32_t best = -1;
        size_t at = 0;
        for (size_t i = 0; i + 2 <= k; i++) {
            int32_t id = rmap_get(m, r->b[tok] + cut[i], cut[i + 2] - cut[i]);
            if (id >= 0 && (best < 0 || id < best)) best = id, at = i;
        }
        if (best < 0 || best >= tok) break;
        memmove(cut + at + 1, cut + at + 2, (k - at - 1) * sizeof *cut);
        k--;
    }
    return k == 2 ? cut[1] : 0;
}

/* byte-level text of bytes p[0..n) into out; returns its length */
static size_t bytelevel(const unsigned char *p, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) o += mwt_byte_char(p[i], out + o);
    return o;
}

static void add_merges(vx_meta *meta, const mwt_ranks *r) {
    rmap m;
    rmap_init(&m, r);
    char **mg = calloc((size_t)r->n, sizeof *mg);
    size_t *ml = calloc((size_t)r->n, sizeof *ml), nm = 0;
    for (int32_t i = 0; i < r->n; i++) {
        size_t cut = r->len[i] > 1 ? merge_split(&m, i) : 0;
        if (!cut) continue;
        mg[nm] = malloc(4 * r->len[i] + 2);
        size_t o = bytelevel(r->b[i], cut, mg[nm]);
        mg[nm][o++] = ' ';
        o += bytelevel(r->b[i] + cut, r->len[i] - cut, mg[nm] + o);
        ml[nm++] = o;
    }
    vx_meta_set_arr_str(meta, "tokenizer.ggml.merges", (const char *const *)mg, ml, nm);
    for (size_t i = 0; i < nm; i++) free(mg[i]);
    free(mg);
    free(ml);
    free(m.slot);
}

vx_meta *mwt_kimi_gguf_meta(const mwt_ranks *r, int64_t vocab_size, int32_t eos, bool merges) {
    char **tok = calloc((size_t)vocab_size, sizeof *tok);
    size_t *len = calloc((size_t)vocab_size, sizeof *len);
    int32_t *type = calloc((size_t)vocab_size, sizeof *type);
    for (int64_t i = 0; i < vocab_size; i++) {
        tok[i] = malloc(i < r->n ? 2 * r->len[i] + 1 : 64);
        if (i < r->n) {
            len[i] = bytelevel(r->b[i], r->len[i], tok[i]), type[i] = 1;
            continue;
        }
        const char *name = NULL;
        for (int k = 0; k < MWT_KIMI_N_SPECIALS; k++)
            if (r->n + mwt_kimi_specials[k].k == i) name = mwt_kimi_specials[k].text;
        if (i >= r->n + N_SPECIAL)
            len[i] = (size_t)snprintf(tok[i], 64, "[PAD%lld]", (long long)i), type[i] = 5;
        else if (name)
            len[i] = (size_t)snprintf(tok[i], 64, "%s", name), type[i] = 3;
        else
            len[i] = (size_t)snprintf(tok[i], 64, "<|reserved_token_%lld|>", (long long)i),
            type[i] = 3;
    }
    vx_meta *m = vx_meta_new();
    vx_meta_set_str(m, "general.architecture", "kimi-linear", 11);
    vx_meta_set_str(m, "tokenizer.ggml.model", "gpt2", 4);
    vx_meta_set_str(m, "tokenizer.ggml.pre", "kimi-k2", 7);
    vx_meta_set_arr_str(m, "tokenizer.ggml.tokens", (const char *const *)tok, len,
                        (uint64_t)vocab_size);
    vx_meta_set_arr(m, "tokenizer.ggml.token_type", VX_I32, type, (uint64_t)vocab_size);
    if (merges) add_merges(m, r);
    int32_t bos = r->n;
    vx_meta_set_scalar(m, "tokenizer.ggml.bos_token_id", VX_I32, &bos);
    vx_meta_set_scalar(m, "tokenizer.ggml.eos_token_id", VX_I32, &eos);
    for (int64_t i = 0; i < vocab_size; i++) free(tok[i]);
    free(tok);
    free(len);
    free(type);
    return m;
}
