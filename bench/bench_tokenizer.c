/* bench/bench_tokenizer.c — tokenizer speed: MB/s of encode and decode on a 100 KB text (mixed
 * English, code, numbers, CJK, Devanagari, emoji, whitespace runs), median of several runs, on the
 * o200k + harmony vocabulary (`make test` builds it into build/tk-o200k) and on any other
 * vocabularies given. Prints one JSON object per vocabulary.
 *
 *   bench_tokenizer [VOCAB.gguf ...]      (default: build/tk-o200k/o200k-harmony.gguf and the
 *                                         llama.cpp vocab fixtures)
 * With MW_TK_TEXT_OUT=FILE the benchmark text is written there too, so the reference tokenizers
 * can be timed on the same bytes (bench/bench_tokenizer_tiktoken.js for js-tiktoken). With
 * MW_LLAMA_TOKENIZE=PATH (llama.cpp's llama-tokenize, built outside the repository) each vocabulary
 * is also tokenized by it, whole process, median of 3; without it that comparison is skipped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "tokenizer/tk.h"

#define TEXT_BYTES (100 * 1024)
#define RUNS       7

static const char *const parts[] = {
    "The quick brown fox jumps over the lazy dog. ",
    "It's what they'll say, isn't it? ",
    "for (int i = 0; i < n; i++) {\n    sum += a[i] * b[i];\n}\n",
    "3.14159 2718281828 1,000,000 ",
    "你好，世界！今天天气很好。",
    "नमस्ते दुनिया, यह एक परीक्षण है। ",
    "สวัสดีครับ ",
    "😀👍🏽 ",
    "    \n\n\t  ",
    "Привет, мир! ",
    "naïve café résumé ",
    "https://example.com/a?b=c&d=e ",
};

static char *make_text(size_t *len) {
    char *t = malloc(TEXT_BYTES + 256);
    size_t n = 0;
    unsigned s = 12345;
    while (n < TEXT_BYTES) {
        s = s * 1103515245u + 12345u;
        const char *p = parts[(s >> 16) % (sizeof parts / sizeof *parts)];
        size_t k = strlen(p);
        memcpy(t + n, p, k);
        n += k;
    }
    t[n] = '\0';
    *len = n;
    return t;
}

/* llama-tokenize on the same vocabulary and text file: whole-process seconds, and the same on an
 * empty file (its load), median of 3 each; NULL when not asked for or failing. */
static const char *llama_tokenize(const char *vocab, const char *text_file, char *buf, size_t n) {
    const char *bin = getenv("MW_LLAMA_TOKENIZE");
    if (!bin || !*bin || !text_file) return NULL;
    double full[3], load[3];
    char cmd[4096];
    for (int r = 0; r < 3; r++) {
        for (int k = 0; k < 2; k++) {
            snprintf(cmd, sizeof cmd, "'%s' -m '%s' -f '%s' --ids --log-disable > /dev/null 2>&1",
                     bin, vocab, k ? "/dev/null" : text_file);
            double a = bu_now();
            if (system(cmd) != 0) return NULL;
            (k ? load : full)[r] = bu_now() - a;
        }
    }
    snprintf(buf, n, "{\"total_s\": %.3f, \"load_s\": %.3f, \"encode_s\": %.3f}",
             bu_median(full, 3), bu_median(load, 3), bu_median(full, 3) - bu_median(load, 3));
    return buf;
}

static void bench(const char *path, const char *text, size_t len, const char *text_file) {
    tk_tokenizer *t;
    mw_err err = {{0}};
    double t0 = bu_now();
    if (tk_load_path(path, &t, &err)) {
        printf("{\"vocab\": \"%s\", \"skipped\": \"%s\"}\n", path, err.msg);
        return;
    }
    double load = bu_now() - t0;
    double enc[RUNS], dec[RUNS];
    size_t n_ids = 0;
    for (int r = 0; r < RUNS; r++) {
        tk_ids ids = {0};
        tk_text out = {0};
        double a = bu_now();
        if (tk_encode(t, text, len, 0, &ids, &err)) {
            printf("{\"vocab\": \"%s\", \"error\": \"%s\"}\n", path, err.msg);
            exit(1);
        }
        double b = bu_now();
        tk_decode(t, ids.v, ids.n, 0, &out, &err);
        double c = bu_now();
        if (out.n != len || memcmp(out.s, text, len)) {
            printf("{\"vocab\": \"%s\", \"error\": \"decode does not give the text back\"}\n",
                   path);
            exit(1);
        }
        enc[r] = b - a;
        dec[r] = c - b;
        n_ids = ids.n;
        tk_ids_free(&ids);
        tk_text_free(&out);
    }
    double mb = (double)len / 1e6, e_med = bu_median(enc, RUNS), d_med = bu_median(dec, RUNS);
    printf("{\"vocab\": \"%s\", \"pre\": \"%s\", \"n_vocab\": %d, \"text_bytes\": %zu, \"tokens\": "
           "%zu, \"load_s\": %.3f, \"encode_ms\": %.2f, \"encode_MBps\": %.2f, \"encode_ms_min\": "
           "%.2f, \"decode_ms\": %.3f, \"decode_MBps\": %.1f}\n",
           path, tk_pre_type(t), tk_n_vocab(t), len, n_ids, load, 1e3 * e_med, mb / e_med,
           1e3 * bu_min(enc, RUNS), 1e3 * d_med, mb / d_med);
    char lb[256];
    const char *ll = llama_tokenize(path, text_file, lb, sizeof lb);
    printf("{\"vocab\": \"%s\", \"llama_tokenize\": %s}\n", path,
           ll ? ll : "\"skipped (set MW_LLAMA_TOKENIZE and MW_TK_TEXT_OUT)\"");
    fflush(stdout);
    tk_free(t);
}

int main(int argc, char **argv) {
    size_t len;
    char *text = make_text(&len);
    const char *dump = getenv("MW_TK_TEXT_OUT");
    if (dump) {
        FILE *f = fopen(dump, "wb");
        if (!f || fwrite(text, 1, len, f) != len || fclose(f)) return 1;
    }
    if (argc > 1) {
        for (int i = 1; i < argc; i++) bench(argv[i], text, len, dump);
    } else {
        bench("build/tk-o200k/o200k-harmony.gguf", text, len, dump);
        bench("tests/fixtures/vocab/ggml-vocab-gpt-2.gguf", text, len, dump);
        bench("tests/fixtures/vocab/ggml-vocab-deepseek-llm.gguf", text, len, dump);
        bench("tests/fixtures/vocab/ggml-vocab-llama-spm.gguf", text, len, dump);
    }
    free(text);
    return 0;
}
