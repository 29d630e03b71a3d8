/* tests/fuzz/fuzz_tokenizer.c — the tokenizer on arbitrary input, with real vocabularies (the
 * vocab fixtures: GPT-2 and DeepSeek-LLM byte-level BPE, LLaMA SentencePiece) and a small
 * byte-level vocabulary holding every chat format's special tokens. The first input byte picks
 * what runs and on which vocabulary:
 *  - encode the rest as text, with or without special-token parsing: invalid UTF-8 must be
 *    refused; valid text gets ids inside the vocabulary, and on byte-level BPE decodes back to the
 *    same bytes;
 *  - decode the rest as ids (3 bytes each, some beyond the vocabulary) through the streaming
 *    detokenizer: every push appends valid UTF-8 (a split character held, a bad byte U+FFFD), an
 *    id out of range is an error, and the pushes together equal a one-shot tk_decode;
 *  - run the rest as generated ids (2 bytes each) through a chat output parser (harmony, qwen3 and
 *    deepseek-r1 thinking, chatml, kimi-k2, kimi-k3's sections): content and reasoning stay valid
 *    UTF-8;
 *  - parse the rest as an OpenAI message list and render it in every format.
 * The fixtures are found through $MW_FIXTURES or beside the harness (build/fuzz/ in the tree). */
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/mwt_tk.h"
#include "tokenizer/tk.h"
#include "tokenizer/tk_chat.h"
#include "vindex/vx_meta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { V_GPT2, V_DEEPSEEK, V_SPM, V_CHAT, N_VOCABS };
static tk_tokenizer *vocabs[N_VOCABS];
static const char *const formats[] = {"harmony", "qwen3",   "deepseek-r1", "chatml",
                                      "kimi-k2", "kimi-k3", "deepseek-v3"};
#define N_FORMATS (sizeof formats / sizeof *formats)
static tk_chat *chats[N_FORMATS];

/* The 256 byte tokens and the specials; EOS <|endoftext|>, BOS <｜begin▁of▁sentence｜>. */
static tk_tokenizer *chat_vocab(void) {
    vx_meta *m = mwt_tk_meta(NULL, "gpt2", "gpt-4o", mwt_chat_specials, MWT_N_CHAT_SPECIALS, NULL,
                             0, 256 + 12, 256 + 9, NULL);
    tk_tokenizer *t = NULL;
    mw_err err;
    if (tk_load_meta(m, "fuzz chat vocabulary", &t, &err)) {
        fprintf(stderr, "fuzz_tokenizer: %s\n", err.msg);
        abort();
    }
    vx_meta_free(m);
    return t;
}

static void load(void) {
    char dir[PATH_MAX];
    const char *env = getenv("MW_FIXTURES");
    if (env) {
        snprintf(dir, sizeof dir, "%s/vocab", env);
    } else { /* build/fuzz/fuzz_tokenizer -> tests/fixtures/vocab */
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = '\0';
        for (int up = 0; up < 3; up++) {
            char *slash = strrchr(exe, '/');
            if (slash) *slash = '\0';
        }
        snprintf(dir, sizeof dir, "%s/tests/fixtures/vocab", exe);
    }
    static const char *const files[3] = {"ggml-vocab-gpt-2.gguf", "ggml-vocab-deepseek-llm.gguf",
                                         "ggml-vocab-llama-spm.gguf"};
    for (int i = 0; i < 3; i++) {
        char path[PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        mw_err err;
        if (tk_load_gguf(path, &vocabs[i], &err)) {
            fprintf(stderr, "fuzz_tokenizer: %s (set MW_FIXTURES)\n", err.msg);
            abort();
        }
    }
    vocabs[V_CHAT] = chat_vocab();
    for (size_t f = 0; f < N_FORMATS; f++) {
        mw_err err;
        if (tk_chat_open(vocabs[V_CHAT], formats[f], &chats[f], &err)) {
            fprintf(stderr, "fuzz_tokenizer: %s\n", err.msg);
            abort();
        }
    }
}

/* Strict UTF-8 (no overlong forms, no surrogates, nothing past U+10FFFF), written apart from the
 * tokenizer's own check. */
static bool utf8_ok(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!k || i + k > n) return false;
        uint32_t cp = k == 1 ? c : c & (0x7f >> k);
        for (size_t j = 1; j < k; j++) {
            if ((s[i + j] & 0xc0) != 0x80) return false;
            cp = cp << 6 | (s[i + j] & 0x3f);
        }
        static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < least[k] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
        i += k;
    }
    return true;
}

static void check(bool ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "fuzz_tokenizer: %s\n", what);
        __builtin_trap();
    }
}

static void encode(const tk_tokenizer *t, const uint8_t *text, size_t n, unsigned flags) {
    tk_ids ids = {0};
    mw_err err;
    const bool valid = utf8_ok(text, n);
    const int rc = tk_encode(t, (const char *)text, n, flags, &ids, &err);
    check(rc == 0 || !valid, "valid UTF-8 refused");
    check(rc != 0 || valid, "invalid UTF-8 encoded");
    const int32_t V = tk_n_vocab(t);
    for (size_t i = 0; rc == 0 && i < ids.n; i++) check(ids.v[i] >= 0 && ids.v[i] < V, "id out");
    if (rc == 0 && !strcmp(tk_model_type(t), "gpt2")) { /* byte-level: lossless */
        tk_text back = {0};
        check(tk_decode(t, ids.v, ids.n, flags & TK_SPECIAL, &back, &err) == 0, "decode failed");
        check(back.n == n && (n == 0 || !memcmp(back.s, text, n)), "no round trip");
        tk_text_free(&back);
    }
    tk_ids_free(&ids);
}

static void decode(const tk_tokenizer *t, const uint8_t *p, size_t n, unsigned flags) {
    const int32_t V = tk_n_vocab(t);
    size_t k = n / 3;
    int32_t *ids = malloc((k + 1) * sizeof *ids);
    for (size_t i = 0; i < k; i++)
        ids[i] = (int32_t)(((uint32_t)p[3 * i] | (uint32_t)p[3 * i + 1] << 8 |
                            (uint32_t)p[3 * i + 2] << 16) %
                           (uint32_t)(V + 3));
    tk_stream s;
    tk_stream_init(&s, t, flags);
    tk_text all = {0}, once = {0};
    mw_err err;
    bool failed = false;
    for (size_t i = 0; i < k && !failed; i++) {
        size_t before = all.n;
        int rc = tk_stream_push(&s, ids[i], &all, &err);
        check(rc == 0 || ids[i] >= V, "a valid id refused");
        check(rc != 0 || ids[i] < V, "an id out of range decoded");
        failed = rc != 0;
        check(!all.n || utf8_ok((const unsigned char *)all.s + before, all.n - before),
              "a push not UTF-8");
    }
    if (!failed) {
        check(tk_stream_finish(&s, &all, &err) == 0, "finish failed");
        check(tk_decode(t, ids, k, flags, &once, &err) == 0, "tk_decode failed");
        check(once.n == all.n && (!all.n || !memcmp(once.s, all.s, all.n)), "stream != decode");
        check(utf8_ok((const unsigned char *)all.s, all.n), "decoded text not UTF-8");
    }
    tk_text_free(&all);
    tk_text_free(&once);
    free(ids);
}

static void parse_output(const tk_chat *c, int sel, const uint8_t *p, size_t n) {
    const int32_t V = tk_n_vocab(vocabs[V_CHAT]);
    tk_chat_opts o = {.thinking = sel % 3 - 1, .add_generation_prompt = true};
    tk_chat_parser *ps;
    mw_err err;
    check(tk_chat_parser_new(c, &o, &ps, &err) == 0, "no parser");
    tk_text content = {0}, reasoning = {0};
    bool failed = false;
    for (size_t i = 0; i + 1 < n && !failed; i += 2) {
        int32_t id = (int32_t)(((uint32_t)p[i] | (uint32_t)p[i + 1] << 8) % (uint32_t)(V + 2));
        int rc = tk_chat_parser_push(ps, id, &content, &reasoning, &err);
        check(rc >= 0 || id >= V, "a valid id refused");
        check(rc < 0 || id < V, "an id out of range parsed");
        failed = rc < 0;
    }
    if (!failed) check(tk_chat_parser_finish(ps, &content, &reasoning, &err) == 0, "finish");
    check(utf8_ok((const unsigned char *)content.s, content.n), "content not UTF-8");
    check(utf8_ok((const unsigned char *)reasoning.s, reasoning.n), "reasoning not UTF-8");
    tk_text_free(&content);
    tk_text_free(&reasoning);
    tk_chat_parser_free(ps);
}

static void render(const uint8_t *p, size_t n) {
    tk_msgs m = {0};
    mw_err err;
    if (tk_msgs_parse((const char *)p, n, &m, &err) == 0) {
        for (size_t f = 0; f < N_FORMATS; f++) {
            tk_ids ids = {0};
            tk_chat_opts o = {.add_generation_prompt = f % 2 == 0,
                              .thinking = (int)f % 3 - 1,
                              .date = "2026-12-01"};
            if (tk_chat_render(chats[f], m.v, m.n, &o, &ids, &err) == 0)
                for (size_t i = 0; i < ids.n; i++)
                    check(ids.v[i] >= 0 && ids.v[i] < tk_n_vocab(vocabs[V_CHAT]), "id out");
            tk_ids_free(&ids);
        }
    }
    tk_msgs_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!vocabs[0]) load();
    if (size < 1 || size > 65536) return 0;
    const uint8_t sel = data[0], *p = data + 1;
    const size_t n = size - 1;
    const tk_tokenizer *t = vocabs[(sel >> 3) % N_VOCABS];
    switch (sel & 7) {
    case 0:
    case 1:
        encode(t, p, n, (sel & 1) ? TK_SPECIAL : 0);
        break;
    case 2:
    case 3:
        decode(t, p, n, (sel & 1) ? TK_SPECIAL : 0);
        break;
    case 4:
    case 5:
    case 6:
        parse_output(chats[(sel >> 3) % N_FORMATS], sel >> 5, p, n);
        break;
    default:
        render(p, n);
        break;
    }
    return 0;
}
