/* bench/llama/llama_tok.c — llama.cpp's tokenizer on the text and vocabularies bench_tokenizer
 * measures, timed in process as bench_tokenizer times ours (bench_tokenizer --llama-tok). Built
 * only on request against a llama.cpp the user names (`make llama-tok LLAMA_INC=DIR
 * GGML_INC=DIR LLAMA_LIB=DIR`: its include/ and ggml/include/ folders and the folder of its
 * shared libraries); nothing of llama.cpp is in this repository.
 *
 * It loads the vocabulary only (vocab_only, as llama-tokenize does), then encodes the whole text
 * `runs` times with llama_tokenize (no BOS/EOS, special-token text not parsed: what
 * bench_tokenizer asks of ours) and decodes the ids back with llama_detokenize, and prints one
 * JSON line: the medians and the minimum encode time, the number of ids and their FNV-1a hash
 * (bench_tokenizer hashes its own ids the same way to say whether the two agree), and whether the
 * decoded text is the input.
 *
 *   llama_tok VOCAB.gguf TEXT_FILE [RUNS]   (--help says so too) */
#include "bench/bench_util.h"

#include <llama.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TEXT (64u << 20)
#define MAX_RUNS 64

static void quiet(enum ggml_log_level level, const char *text, void *ud) {
    (void)ud;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static char *read_text(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = malloc(MAX_TEXT + 1);
    size_t n = buf ? fread(buf, 1, MAX_TEXT + 1, f) : 0;
    int bad = !buf || ferror(f) || n > MAX_TEXT;
    fclose(f);
    if (bad) return free(buf), NULL;
    *len = n;
    return buf;
}

int main(int argc, char **argv) {
    const bu_cli cli = {"llama_tok",
                        "llama.cpp's tokenizer on bench_tokenizer's text: encode and decode RUNS "
                        "times (7), one JSON line.",
                        "VOCAB.gguf TEXT_FILE [RUNS]",
                        NULL,
                        NULL,
                        0};
    int first = argc;
    const int status = bu_args(argc, argv, &cli, &first);
    if (status != BU_RUN) return status;
    char **arg = argv + first;
    const int n_arg = argc - first;
    if (n_arg < 2 || n_arg > 3) {
        fprintf(stderr, "usage: llama_tok VOCAB.gguf TEXT_FILE [RUNS]\n");
        return 2;
    }
    int runs = n_arg == 3 ? atoi(arg[2]) : 7;
    if (runs < 1 || runs > MAX_RUNS)
        return fprintf(stderr, "llama_tok: RUNS is 1..%d\n", MAX_RUNS), 2;
    size_t len;
    char *text = read_text(arg[1], &len);
    if (!text || len > INT32_MAX / 2)
        return fprintf(stderr, "llama_tok: cannot read %s\n", arg[1]), 1;

    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    double t0 = bu_now();
    struct llama_model *model = llama_model_load_from_file(arg[0], mp);
    double load = bu_now() - t0;
    if (!model) return fprintf(stderr, "llama_tok: llama.cpp cannot load %s\n", arg[0]), 1;
    const struct llama_vocab *vocab = llama_model_get_vocab(model);

    int32_t cap = (int32_t)len + 16, n_ids = 0;
    llama_token *ids = malloc((size_t)cap * sizeof *ids);
    char *out = malloc(4 * len + 64);
    if (!ids || !out) return fprintf(stderr, "llama_tok: out of memory\n"), 1;
    double enc[MAX_RUNS], dec[MAX_RUNS];
    int32_t n_out = 0;
    for (int r = 0; r < runs; r++) {
        double a = bu_now();
        n_ids = llama_tokenize(vocab, text, (int32_t)len, ids, cap, false, false);
        double b = bu_now();
        if (n_ids < 0) return fprintf(stderr, "llama_tok: llama_tokenize failed (%d)\n", n_ids), 1;
        n_out = llama_detokenize(vocab, ids, n_ids, out, (int32_t)(4 * len + 64), false, false);
        double c = bu_now();
        if (n_out < 0) return fprintf(stderr, "llama_tok: llama_detokenize failed\n"), 1;
        enc[r] = b - a;
        dec[r] = c - b;
    }
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a over the ids' little-endian bytes */
    for (int32_t i = 0; i < n_ids; i++)
        for (int k = 0; k < 4; k++)
            h = (h ^ (((uint32_t)ids[i] >> (8 * k)) & 0xff)) * 0x100000001b3ull;
    double mb = (double)len / 1e6, e = bu_median(enc, runs), d = bu_median(dec, runs);
    printf("{\"vocab\": \"%s\", \"text_bytes\": %zu, \"tokens\": %d, \"ids_fnv\": \"%016llx\", "
           "\"load_s\": %.3f, \"encode_ms\": %.2f, \"encode_ms_min\": %.2f, \"encode_MBps\": %.2f, "
           "\"decode_ms\": %.3f, \"decode_MBps\": %.1f, \"decodes_to_text\": %s}\n",
           arg[0], len, n_ids, (unsigned long long)h, load, 1e3 * e, 1e3 * bu_min(enc, runs),
           mb / e, 1e3 * d, mb / d,
           (size_t)n_out == len && !memcmp(out, text, len) ? "true" : "false");
    free(out);
    free(ids);
    free(text);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
