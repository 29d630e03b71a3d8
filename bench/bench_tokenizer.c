/* bench/bench_tokenizer.c — tokenizer speed: MB/s of encode and decode on a 100 KB text (mixed
 * English, code, numbers, CJK, Devanagari, Thai, emoji, whitespace runs), on the o200k + harmony
 * vocabulary (`make test` builds it into build/tk-o200k, with the merges a converted gpt-oss GGUF
 * carries) and on the llama.cpp vocab fixtures, or on the vocabularies given; beside llama.cpp's
 * tokenizer on the same files and text and js-tiktoken (o200k) when asked.
 * `bench_tokenizer --help` lists the options.
 *
 * Each round times ours (the median of 7 encodes and of 7 decodes, the ids decoded back checked
 * to be the text), then llama.cpp (--llama-tok: the driver `make llama-tok` builds against a
 * llama.cpp the user names, bench/llama/llama_tok.c, which times llama_tokenize and
 * llama_detokenize in process the same way), then js-tiktoken on o200k vocabularies (--tiktoken:
 * the npm folder holding it, bench/bench_tokenizer_tiktoken.js), so that the machine's drift
 * falls on all of them; the rounds' medians are reported with their spread, and the ratios of
 * each round's times. Whether their ids equal ours is said too (llama.cpp's o200k splitter
 * differs from tiktoken's on combining marks, so on this text it does not). One JSON object per
 * vocabulary and a table. With MW_TK_TEXT_OUT=FILE the text is written there as well. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "bench/bench_llama.h"
#include "bench/bench_util.h"
#include "tokenizer/tk.h"

#define TEXT_BYTES (100 * 1024)
#define RUNS       7
#define MAX_ROUNDS 16

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

typedef struct opts {
    const char *llama_tok, *npm;
    int rounds;
} opts;

/* One side's figures for one round (ms), and its ids (count and FNV-1a over the ids' bytes). */
typedef struct side {
    double enc[MAX_ROUNDS], dec[MAX_ROUNDS], load_s;
    long long tokens;
    char fnv[24];
    int n; /* rounds measured */
    char note[256];
} side;

static void fnv_ids(const int32_t *v, size_t n, char *out, size_t len) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 4; k++)
            h = (h ^ (((uint32_t)v[i] >> (8 * k)) & 0xff)) * 0x100000001b3ull;
    snprintf(out, len, "%016llx", (unsigned long long)h);
}

/* Ours: the median of RUNS encodes and decodes. 0, or -1 when the text does not come back. */
static int ours_round(const tk_tokenizer *t, const char *text, size_t len, side *s) {
    double enc[RUNS], dec[RUNS];
    mw_err err = {{0}};
    for (int r = 0; r < RUNS; r++) {
        tk_ids ids = {0};
        tk_text out = {0};
        double a = bu_now();
        int rc = tk_encode(t, text, len, 0, &ids, &err);
        double b = bu_now();
        if (!rc) rc = tk_decode(t, ids.v, ids.n, 0, &out, &err);
        double c = bu_now();
        if (rc || out.n != len || memcmp(out.s, text, len)) {
            snprintf(s->note, sizeof s->note, "%s",
                     rc ? err.msg : "decode does not give the text back");
            return -1;
        }
        enc[r] = 1e3 * (b - a);
        dec[r] = 1e3 * (c - b);
        s->tokens = (long long)ids.n;
        fnv_ids(ids.v, ids.n, s->fnv, sizeof s->fnv);
        tk_ids_free(&ids);
        tk_text_free(&out);
    }
    s->enc[s->n] = bu_median(enc, RUNS);
    s->dec[s->n++] = bu_median(dec, RUNS);
    return 0;
}

/* A reference program's round: runs argv, reads its JSON line. */
static int ref_round(char *const argv[], side *s) {
    char err[512];
    if (!s->n) s->note[0] = '\0'; /* what was said before it ran */
    size_t n;
    char *out = bl_capture(argv, &n, err, sizeof err);
    json_error_t je;
    json_t *j = out ? json_loadb(out, n, 0, &je) : NULL;
    if (!j)
        snprintf(s->note, sizeof s->note, "%s: %s", argv[0], out ? "its output is not JSON" : err);
    free(out);
    if (!j) return -1;
    const json_t *fnv = json_object_get(j, "ids_fnv");
    s->enc[s->n] = json_number_value(json_object_get(j, "encode_ms"));
    s->dec[s->n++] = json_number_value(json_object_get(j, "decode_ms"));
    s->tokens = json_integer_value(json_object_get(j, "tokens"));
    s->load_s = json_number_value(json_object_get(j, "load_s"));
    snprintf(s->fnv, sizeof s->fnv, "%s", json_is_string(fnv) ? json_string_value(fnv) : "");
    if (json_is_false(json_object_get(j, "decodes_to_text")))
        snprintf(s->note, sizeof s->note, "its decode does not give the text back");
    json_decref(j);
    return 0;
}

static double med(const double *v, int n) {
    double c[MAX_ROUNDS];
    memcpy(c, v, (size_t)n * sizeof *v);
    return bu_median(c, n);
}

static double lo(const double *v, int n) {
    double m = v[0];
    for (int i = 1; i < n; i++) m = v[i] < m ? v[i] : m;
    return m;
}

static double hi(const double *v, int n) {
    double m = v[0];
    for (int i = 1; i < n; i++) m = v[i] > m ? v[i] : m;
    return m;
}

/* Rounded for the JSON line (ms to 0.01, ratios to 0.1). */
static json_t *num(double v, double unit) {
    return json_real(unit * (double)(long long)(v / unit + 0.5));
}

/* A side's figures (ms; the range over the rounds) and, for a reference, the ratios of its
 * times to ours round by round and whether its ids are ours. */
static json_t *side_json(const side *s, const side *ours) {
    if (!s->n) return json_string(s->note);
    json_t *j = json_pack("{s:I, s:s, s:o, s:[oo], s:o}", "tokens", (json_int_t)s->tokens,
                          "ids_fnv", s->fnv, "encode_ms", num(med(s->enc, s->n), 1e-2),
                          "encode_ms_range", num(lo(s->enc, s->n), 1e-2),
                          num(hi(s->enc, s->n), 1e-2), "decode_ms", num(med(s->dec, s->n), 1e-3));
    if (s->load_s > 0) json_object_set_new(j, "load_s", num(s->load_s, 1e-3));
    if (s == ours) return j;
    double re[MAX_ROUNDS], rd[MAX_ROUNDS];
    for (int r = 0; r < s->n; r++)
        re[r] = s->enc[r] / ours->enc[r], rd[r] = s->dec[r] / ours->dec[r];
    json_object_set_new(j, "same_ids", json_boolean(!strcmp(s->fnv, ours->fnv)));
    json_object_set_new(j, "encode_vs_ours", num(med(re, s->n), 0.1));
    json_object_set_new(j, "encode_vs_ours_range",
                        json_pack("[oo]", num(lo(re, s->n), 0.1), num(hi(re, s->n), 0.1)));
    json_object_set_new(j, "decode_vs_ours", num(med(rd, s->n), 0.1));
    if (s->note[0]) json_object_set_new(j, "note", json_string(s->note));
    return j;
}

static void print_json(json_t *j) {
    char *line = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    if (line) printf("%s\n", line);
    free(line);
    json_decref(j);
}

static void table_row(const char *vocab, const char *who, const side *s, double mb) {
    if (!s->n) return;
    double e = med(s->enc, s->n), d = med(s->dec, s->n);
    printf("%-44s %-12s %7lld %8.2f (%.2f-%.2f) %8.2f %8.3f %8.1f\n", vocab, who, s->tokens, e,
           lo(s->enc, s->n), hi(s->enc, s->n), mb / (e / 1e3), d, mb / (d / 1e3));
}

static void bench(const char *path, const char *text, size_t len, const char *text_file,
                  const opts *o) {
    tk_tokenizer *t;
    mw_err err = {{0}};
    double t0 = bu_now();
    if (tk_load_path(path, &t, &err)) {
        print_json(
            json_pack("{s:s, s:s, s:s}", "bench", "tokenizer", "vocab", path, "skipped", err.msg));
        return;
    }
    side ours = {.load_s = bu_now() - t0}, llama = {0}, tt = {0};
    bool o200k = !strcmp(tk_pre_type(t), "gpt-4o");
    snprintf(llama.note, sizeof llama.note, "skipped (give --llama-tok PATH: make llama-tok)");
    snprintf(tt.note, sizeof tt.note,
             o200k ? "skipped (give --tiktoken NPM_DIR)" : "not an o200k vocabulary");
    char runs[8];
    snprintf(runs, sizeof runs, "%d", RUNS);
    char *largv[] = {(char *)o->llama_tok, (char *)path, (char *)text_file, runs, NULL};
    char script[] = "bench/bench_tokenizer_tiktoken.js";
    char *targv[] = {"/usr/bin/env", "node", script, (char *)o->npm, (char *)text_file, runs, NULL};
    bool use_llama = o->llama_tok != NULL, use_tt = o->npm && o200k;
    for (int r = 0; r < o->rounds; r++) {
        if (ours_round(t, text, len, &ours)) {
            print_json(json_pack("{s:s, s:s, s:s}", "bench", "tokenizer", "vocab", path, "error",
                                 ours.note));
            exit(1);
        }
        if (use_llama && ref_round(largv, &llama)) use_llama = false;
        if (use_tt && ref_round(targv, &tt)) use_tt = false;
    }
    double mb = (double)len / 1e6;
    json_t *j =
        json_pack("{s:s, s:s, s:s, s:i, s:I, s:i, s:o, s:o}", "bench", "tokenizer", "vocab", path,
                  "pre", tk_pre_type(t), "n_vocab", tk_n_vocab(t), "text_bytes", (json_int_t)len,
                  "rounds", ours.n, "encode_MBps", num(mb / (med(ours.enc, ours.n) / 1e3), 1e-2),
                  "decode_MBps", num(mb / (med(ours.dec, ours.n) / 1e3), 0.1));
    json_t *mine = side_json(&ours, &ours); /* ours' figures at the top level */
    json_object_update(j, mine);
    json_decref(mine);
    json_object_set_new(j, "llama_cpp", side_json(&llama, &ours));
    json_object_set_new(j, "js_tiktoken", side_json(&tt, &ours));
    print_json(j);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    table_row(base, "moewire", &ours, mb);
    table_row(base, "llama.cpp", &llama, mb);
    table_row(base, "js-tiktoken", &tt, mb);
    fflush(stdout);
    tk_free(t);
}

int main(int argc, char **argv) {
    opts o = {.rounds = 3};
    int first = argc;
    const bu_opt opt[] = {
        BU_OPT("--llama-tok", BU_STR, &o.llama_tok, "PATH",
               "llama.cpp's tokenizer driver (make llama-tok), timed beside"),
        BU_OPT("--tiktoken", BU_STR, &o.npm, "NPM_DIR", "the npm folder holding js-tiktoken"),
        BU_OPT_IN("--rounds", BU_INT, &o.rounds, "3", "rounds of the sides in turn", 1, MAX_ROUNDS),
    };
    const bu_cli cli = {
        "bench_tokenizer",
        "Tokenizer encode and decode speed on a 100 KB mixed text, on the given "
        "vocabularies (default:\nbuild/tk-o200k's o200k + harmony and the llama.cpp "
        "vocab fixtures), beside llama.cpp and js-tiktoken.",
        "[VOCAB.gguf ...]",
        "environment:\n  MW_TK_TEXT_OUT=FILE  also write the text there",
        opt,
        (int)(sizeof opt / sizeof opt[0])};
    const int status = bu_args(argc, argv, &cli, &first);
    if (status != BU_RUN) return status;
    size_t len;
    char *text = make_text(&len);
    const char *dump = getenv("MW_TK_TEXT_OUT");
    char tmpl[] = "/tmp/bench_tokenizer-XXXXXX", file[64] = "";
    if (!dump && (o.llama_tok || o.npm)) {
        if (!mkdtemp(tmpl)) return perror("mkdtemp"), 1;
        snprintf(file, sizeof file, "%s/text.txt", tmpl);
    }
    const char *text_file = dump ? dump : file[0] ? file : NULL;
    if (text_file) {
        FILE *f = fopen(text_file, "wb");
        if (!f || fwrite(text, 1, len, f) != len || fclose(f)) return perror(text_file), 1;
    }
    printf("%-44s %-12s %7s %8s %15s %8s %8s %8s\n", "vocabulary", "tokenizer", "tokens", "enc ms",
           "(range)", "enc MB/s", "dec ms", "dec MB/s");
    if (first < argc) {
        for (int i = first; i < argc; i++) bench(argv[i], text, len, text_file, &o);
    } else {
        bench("build/tk-o200k/o200k-harmony-merges.gguf", text, len, text_file, &o);
        bench("tests/fixtures/vocab/ggml-vocab-gpt-2.gguf", text, len, text_file, &o);
        bench("tests/fixtures/vocab/ggml-vocab-deepseek-llm.gguf", text, len, text_file, &o);
        bench("tests/fixtures/vocab/ggml-vocab-llama-spm.gguf", text, len, text_file, &o);
    }
    if (file[0]) {
        unlink(file);
        rmdir(tmpl);
    }
    free(text);
    return 0;
}
