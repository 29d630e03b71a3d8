/* tokenizer/tk.h — text ⇄ token ids for the models moewire serves.
 *
 * A tokenizer comes from the model: GGUF `tokenizer.ggml.*` metadata (a full model, a
 * vocabulary-only GGUF, or the tokenizer file a vindex carries), a Hugging Face `tokenizer.json`
 * (+ `tokenizer_config.json`), or a Hugging Face `tiktoken.model` (+ `tokenizer_config.json`). Two
 * model types: byte-level BPE (`gpt2`, with the pre-tokenizer the model names: gpt-4o, qwen2,
 * deepseek-v3, deepseek-llm, kimi-k2, gpt-2, ...; the pre-tokenizer regexes run on PCRE2) and
 * SentencePiece-style (`llama`: scores, byte fallback). An unknown model or pre-tokenizer type is
 * an error naming it.
 *
 * A loaded tokenizer is immutable: encode and decode may run on any number of threads at once.
 * Every call that can fail returns 0 / -1 and fills an mw_err (util/mw_err.h). */
#ifndef TK_H
#define TK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/mw_err.h"

struct vx_meta;
struct vx_source;

typedef struct tk_tokenizer tk_tokenizer;

/* ---- loading ------------------------------------------------------------------------------- */

/* From GGUF-style metadata (tokenizer.ggml.* keys; general.architecture when present). `what`
 * names the origin in errors. */
int tk_load_meta(const struct vx_meta *m, const char *what, tk_tokenizer **out, mw_err *err);
/* From a GGUF file: a full model or a vocabulary-only file. */
int tk_load_gguf(const char *path, tk_tokenizer **out, mw_err *err);
/* From a Hugging Face tokenizer.json (a file, or a directory holding it and, optionally,
 * tokenizer_config.json: chat template, add_bos_token). arch may be NULL. */
int tk_load_hf(const char *path, const char *arch, tk_tokenizer **out, mw_err *err);
/* From a Hugging Face tiktoken tokenizer (Kimi's): a `tiktoken.model` file, or a directory holding
 * it, with tokenizer_config.json (the class, the special tokens) and, optionally, config.json
 * (vocab_size, eos_token_id) and generation_config.json beside it. arch may be NULL. */
int tk_load_tiktoken(const char *path, const char *arch, tk_tokenizer **out, mw_err *err);
/* From an open model source: a vindex's carried tokenizer file (checked against its checksum),
 * else the source's metadata. */
int tk_load_source(const struct vx_source *src, tk_tokenizer **out, mw_err *err);
/* Whatever PATH is: a GGUF file, a vindex or Hugging Face directory, a tokenizer.json or a
 * tiktoken.model. */
int tk_load_path(const char *path, tk_tokenizer **out, mw_err *err);
void tk_free(tk_tokenizer *t);

/* ---- the vocabulary ------------------------------------------------------------------------ */

int32_t tk_n_vocab(const tk_tokenizer *t);
const char *tk_model_type(const tk_tokenizer *t); /* "gpt2" or "llama" */
const char *tk_pre_type(const tk_tokenizer *t);   /* "gpt-4o", ...; "" for llama */
const char *tk_arch(const tk_tokenizer *t);       /* general.architecture, or "" */
/* The model's chat template text (tokenizer.chat_template), or NULL. */
const char *tk_chat_template_text(const tk_tokenizer *t);
int32_t tk_bos(const tk_tokenizer *t); /* -1 when the model has none */
int32_t tk_eos(const tk_tokenizer *t);
bool tk_add_bos(const tk_tokenizer *t); /* the model asks for BOS at the start of a prompt */
/* The id of the token whose text is exactly s (as stored: "<|im_end|>", "<｜User｜>"), or -1. */
int32_t tk_find(const tk_tokenizer *t, const char *s, size_t len);
/* Control / unknown tokens: text only with TK_SPECIAL. */
bool tk_is_control(const tk_tokenizer *t, int32_t id);
/* End-of-generation tokens the model declares (EOS, EOT, <|im_end|>, <|return|>, ...). */
bool tk_is_eog(const tk_tokenizer *t, int32_t id);

/* ---- encoding ------------------------------------------------------------------------------ */

/* A growable id array; zero-initialise, free with tk_ids_free. */
typedef struct tk_ids {
    int32_t *v;
    size_t n, cap;
} tk_ids;
void tk_ids_free(tk_ids *ids);
int tk_ids_push(tk_ids *ids, int32_t id);

enum {
    TK_SPECIAL = 1, /* encode: special-token text becomes its token; decode: print control tokens */
    TK_ADD_BOS = 2, /* encode: prepend BOS (the model must have one) */
};

/* Appends the ids of text[0..len) to out. The text must be valid UTF-8 (an error names the first
 * bad byte's offset). Special tokens are matched first, longest first; user-defined tokens always,
 * control tokens only with TK_SPECIAL. */
int tk_encode(const tk_tokenizer *t, const char *text, size_t len, unsigned flags, tk_ids *out,
              mw_err *err);

/* ---- decoding ------------------------------------------------------------------------------ */

/* A growable byte buffer, NUL-terminated when non-empty; zero-initialise, free with
 * tk_text_free. */
typedef struct tk_text {
    char *s;
    size_t n, cap;
} tk_text;
void tk_text_free(tk_text *b);
int tk_text_add(tk_text *b, const void *p, size_t n);

/* The bytes token id stands for (byte-level tokens as bytes, ▁ as a space for llama); control
 * tokens give "" unless special. May be part of a UTF-8 character. */
int tk_piece(const tk_tokenizer *t, int32_t id, bool special, const char **bytes, size_t *len);

/* Incremental, UTF-8 safe decoding: push tokens one at a time; each push appends only complete
 * characters. A token that ends mid-character is held until the character completes; a byte that
 * cannot start or continue a character becomes U+FFFD, and an incomplete character left at the
 * end becomes U+FFFD only in tk_stream_finish. */
typedef struct tk_stream {
    const tk_tokenizer *t;
    unsigned flags;
    unsigned char held[4];
    int n_held, need; /* bytes held of the current character, and how many it needs */
    bool started;     /* (llama) the leading space of the first piece is dropped */
} tk_stream;
void tk_stream_init(tk_stream *s, const tk_tokenizer *t, unsigned flags);
int tk_stream_push(tk_stream *s, int32_t id, tk_text *out, mw_err *err);
/* Appends U+FFFD for a held incomplete character, and resets. */
int tk_stream_finish(tk_stream *s, tk_text *out, mw_err *err);

/* Decodes n ids at once into out (appended), as the stream would. */
int tk_decode(const tk_tokenizer *t, const int32_t *ids, size_t n, unsigned flags, tk_text *out,
              mw_err *err);

#endif
