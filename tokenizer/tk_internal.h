/* tokenizer/tk_internal.h — the tokenizer's private structures, shared by its files.
 *
 * Token texts are kept twice: as stored (the GGUF / tokenizer.json string, used to match special
 * tokens and for tk_find) and as the bytes they stand for (byte-level BPE texts decoded from
 * GPT-2's byte-to-character mapping, SentencePiece texts as stored). Lookups by bytes and merges
 * by id pair go through open-addressing hash maps, so a rank lookup is O(1). */
#ifndef TK_INTERNAL_H
#define TK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tk.h"

/* GGUF token types (tokenizer.ggml.token_type). */
enum {
    TK_T_UNDEFINED = 0,
    TK_T_NORMAL = 1,
    TK_T_UNKNOWN = 2,
    TK_T_CONTROL = 3,
    TK_T_USER = 4,
    TK_T_UNUSED = 5,
    TK_T_BYTE = 6,
};

typedef enum tk__kind { TK_BPE, TK_SPM } tk__kind;

/* Limits on what an untrusted file may declare. */
#define TK_MAX_VOCAB     (1 << 22)
#define TK_MAX_TOKEN_LEN 4096
#define TK_MAX_MERGES    (1 << 23)

/* bytes → id (keys point into the tokenizer's blobs). */
typedef struct tk__map {
    size_t cap;     /* power of two, 0 = empty */
    uint32_t *slot; /* id + 1, 0 = empty */
} tk__map;

/* (left id, right id) → (rank, merged id). */
typedef struct tk__pairs {
    size_t cap, n;
    uint64_t *key; /* (a << 32 | b) + 1, 0 = empty */
    uint32_t *rank, *merged;
} tk__pairs;

/* A pre-tokenizer: regexes applied in turn, each splitting every piece the previous one left
 * into matches and the gaps between them. */
typedef struct tk__pre_def {
    const char *name;
    const char *const *regex; /* NULL-terminated */
    /* tiktoken encodings (o200k, Kimi's): a piece that is a token is that token, and a pair
     * merges by the rank of the token it forms (its id); merges in the file are not needed. */
    bool tiktoken;
} tk__pre_def;

const tk__pre_def *tk__pre_find(const char *name);

struct tk_tokenizer {
    tk__kind kind;
    char model[16];
    char *pre;  /* pre-tokenizer name ("" for llama) */
    char *arch; /* general.architecture or "" */
    char *chat_template;
    int32_t n;
    /* stored texts */
    char *text;
    uint64_t *text_off; /* n + 1 offsets */
    /* bytes */
    char *bytes;
    uint64_t *bytes_off; /* n + 1 offsets */
    uint8_t *type;
    float *score;     /* llama only */
    tk__map by_bytes; /* normal/byte/user tokens by their bytes (BPE), stored text (SPM) */
    tk__map by_text;  /* every token by its stored text */
    tk__pairs merges;
    bool tiktoken; /* ranks are the ids of the tokens pairs form (and pieces are looked up whole) */
    bool ignore_merges; /* a piece that is a token is that token (tokenizer.json ignore_merges) */
    int32_t byte_tok[256]; /* the token of each single byte (BPE: its byte-level character; SPM:
                              <0xXX>), -1 when absent */
    int32_t *special;      /* tokens matched before pre-tokenization, longest text first */
    size_t n_special;
    int32_t *eog;
    size_t n_eog;
    int32_t bos, eos, unk;
    bool add_bos, add_eos, add_space_prefix;
    /* pre-tokenizer */
    pcre2_code **re;
    size_t n_re;
};

/* ---- vocabulary building (tk_vocab.c) ----------------------------------------------------- */
/* A tokenizer with n empty tokens; texts are added with tk__set_token, then tk__finish packs them
 * and builds the maps, byte table and special list; merges follow (they need the maps), then
 * tk__ready checks the whole. */
tk_tokenizer *tk__new(tk__kind kind, int32_t n);
int tk__set_token(tk_tokenizer *t, int32_t id, const char *text, size_t len, int type, float score,
                  mw_err *err);
int tk__finish(tk_tokenizer *t, const char *what, mw_err *err);
/* After merges and the pre-tokenizer: checks the tokenizer is complete and consistent. */
int tk__ready(tk_tokenizer *t, const char *what, mw_err *err);
/* Adds merge "left right" (stored texts) with the given rank; merges whose parts or result are
 * not tokens are skipped (returns 0). */
int tk__add_merge(tk_tokenizer *t, const char *left, size_t llen, const char *right, size_t rlen,
                  uint32_t rank, mw_err *err);
int tk__set_pre(tk_tokenizer *t, const char *name, const char *what, mw_err *err);
/* Compiles extra regexes (tokenizer.json's own Split patterns) for a pre-tokenizer not in the
 * table. */
int tk__set_pre_regexes(tk_tokenizer *t, const char *name, const char *const *regex, size_t n,
                        mw_err *err);
int tk__add_eog(tk_tokenizer *t, int32_t id);

static inline const char *tk__text(const tk_tokenizer *t, int32_t id, size_t *len) {
    *len = (size_t)(t->text_off[id + 1] - t->text_off[id]);
    return t->text + t->text_off[id];
}
static inline const char *tk__bytes(const tk_tokenizer *t, int32_t id, size_t *len) {
    *len = (size_t)(t->bytes_off[id + 1] - t->bytes_off[id]);
    return t->bytes + t->bytes_off[id];
}

/* ---- Hugging Face files (tk_hf.c) ---------------------------------------------------------- */
struct json_t;
/* An untrusted JSON file (a regular file of at most 1 GiB), its size bounded before jansson. */
struct json_t *tk__read_json(const char *path, mw_err *err);
/* tokenizer_config.json when present: chat_template, bos_token / eos_token (texts of tokens the
 * vocabulary must hold), add_bos_token, add_eos_token. */
int tk__apply_config(tk_tokenizer *t, const char *cfg_path, mw_err *err);
/* The template of DIR/chat_template.jinja, when the tokenizer has none yet and the file exists. */
int tk__chat_template_file(tk_tokenizer *t, const char *dir, mw_err *err);

/* ---- maps (tk_map.c) ---------------------------------------------------------------------- */
uint64_t tk__hash(const void *p, size_t n);
/* by_bytes / by_text lookups: keyed by (blob, offsets) of t. */
int32_t tk__map_get(const tk__map *m, const char *blob, const uint64_t *off, const void *key,
                    size_t len);
/* Returns 0 inserted, 1 already present (kept), -1 out of memory. */
int tk__map_put(tk__map *m, const char *blob, const uint64_t *off, int32_t id, size_t n_total);
void tk__map_free(tk__map *m);
int tk__pairs_put(tk__pairs *p, uint32_t a, uint32_t b, uint32_t rank, uint32_t merged);
bool tk__pairs_get(const tk__pairs *p, uint32_t a, uint32_t b, uint32_t *rank, uint32_t *merged);
void tk__pairs_free(tk__pairs *p);

/* ---- the merge loop (tk_merge.c) ----------------------------------------------------------- */
/* A symbol of a piece: bytes [start, start + len) of it, the token they are (-1 none), its
 * neighbours (-1 none). A symbol merged into its left neighbour has length 0. */
typedef struct tk__sym {
    int32_t id;
    uint32_t start, len;
    int32_t prev, next;
} tk__sym;
/* Whether symbols l and r (bytes in p) may merge; if so, into which token and with which
 * priority (lower merges first: a BPE rank, minus a SentencePiece score). */
typedef bool (*tk__rank_fn)(const tk_tokenizer *t, const char *p, const tk__sym *l,
                            const tk__sym *r, double *prio, int32_t *into);
/* Bytes of work area tk__merge needs for n symbols. */
size_t tk__merge_work(size_t n);
/* Merges the n linked symbols s (the first is s[0]) while any pair ranks, best first, ties to
 * the leftmost. */
void tk__merge(const tk_tokenizer *t, const char *p, tk__sym *s, size_t n, tk__rank_fn rank,
               void *work);

/* ---- UTF-8 and the byte-level alphabet (tk_utf8.c) ---------------------------------------- */
/* Length of the valid UTF-8 prefix of s (== n when all valid). */
size_t tk__utf8_valid_prefix(const char *s, size_t n);
/* Bytes of the character starting with lead byte c (1-4), 0 for a byte that cannot start one. */
int tk__utf8_len(unsigned char c);
int tk__utf8_put(uint32_t cp, char out[4]);
/* GPT-2's byte-level mapping: the character standing for byte b, and back (-1 when cp stands
 * for no byte). */
uint32_t tk__byte_char(uint8_t b);
int tk__char_byte(uint32_t cp);
/* Decodes a byte-level text into bytes (out must hold len bytes); -1 when a character is not in
 * the alphabet. */
long tk__unbyte(const char *s, size_t len, char *out);

/* ---- decoding (tk_decode.c) ---------------------------------------------------------------- */
/* Appends n raw bytes to the stream as a token's bytes would be (held across calls until each
 * character completes); -1 when out of memory. */
int tk__stream_feed(tk_stream *s, const void *p, size_t n, tk_text *out);

/* ---- the models (tk_bpe.c, tk_spm.c, tk_pre.c) -------------------------------------------- */
typedef struct tk__scratch tk__scratch;
tk__scratch *tk__scratch_new(void);
void tk__scratch_free(tk__scratch *s);
/* A work area of at least `bytes` bytes, kept with the scratch (which = 0, 1 or 2: three areas). */
void *tk__scratch_work(tk__scratch *s, size_t bytes, int which);
/* Splits text into pieces and BPE-encodes each; appends to out. */
int tk__bpe_encode(const tk_tokenizer *t, tk__scratch *s, const char *text, size_t len, tk_ids *out,
                   mw_err *err);
int tk__spm_encode(const tk_tokenizer *t, tk__scratch *s, const char *text, size_t len,
                   bool prefix_space, tk_ids *out, mw_err *err);
/* Pre-tokenizer: calls fn on every piece, in order. */
typedef int (*tk__piece_fn)(void *ctx, const char *p, size_t n, mw_err *err);
int tk__pre_split(const tk_tokenizer *t, tk__scratch *s, const char *text, size_t len,
                  tk__piece_fn fn, void *ctx, mw_err *err);

#endif
