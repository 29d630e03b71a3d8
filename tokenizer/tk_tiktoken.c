/* tokenizer/tk_tiktoken.c — a tiktoken tokenizer from Hugging Face files, as the Kimi line ships
 * it: `tiktoken.model` (one "base64-bytes rank" line per token, the rank being the id), the
 * special tokens that follow the ranks (tokenizer_config.json's added_tokens_decoder names them;
 * the others are reserved), the tokenizer class tokenizer_config.json's auto_map names (which
 * gives the pre-tokenizer, and whose Python file, when present, must spell that pattern), and the
 * vocabulary size and end-of-turn ids of config.json / generation_config.json.
 *
 * The result is the tokenizer llama.cpp's converter writes into the GGUF (byte-level texts,
 * specials as control tokens, ids the ranks lack up to vocab_size as unused `[PAD<id>]`), so both
 * routes encode alike. The files are untrusted: every length, rank and id is bounded. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tokenizer/tk_internal.h"

#define MAX_MODEL_FILE (256ull << 20) /* Kimi's is under 3 MB */
#define MAX_PY_FILE    (1u << 20)

/* ---- the tokenizer classes ------------------------------------------------------------------ */

/* One row per tiktoken tokenizer class a checkpoint may name. */
struct tt_class {
    const char *auto_map; /* tokenizer_config.json auto_map.AutoTokenizer[0] */
    const char *py;       /* the class's Python file, checked when the checkpoint has it */
    const char *pre;      /* the tk_pre.c row of its pattern */
    int n_special;        /* ids after the ranks that are special tokens */
    const char *reserved; /* printf format of an unnamed special token's text (its id) */
    /* the pattern as the Python file spells it: raw-string parts joined by "|" */
    const char *const *pat;
};

static const char *const kimi_pat[] = {
    "[\\p{Han}]+",
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]*[\\p{Ll}\\p{Lm}\\p{Lo}"
    "\\p{M}&&[^\\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]+[\\p{Ll}\\p{Lm}\\p{Lo}"
    "\\p{M}&&[^\\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    "\\p{N}{1,3}",
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*",
    "\\s*[\\r\\n]+",
    "\\s+(?!\\S)",
    "\\s+",
    NULL};

/* Kimi-K2, Kimi Linear and Kimi K3: 256 reserved special tokens and two more after the ranks */
static const struct tt_class classes[] = {
    {"tokenization_kimi.TikTokenTokenizer", "tokenization_kimi.py", "kimi-k2", 258,
     "<|reserved_token_%d|>", kimi_pat},
};

static const struct tt_class *find_class(const json_t *cfg, const char *what, mw_err *err) {
    const json_t *am = json_object_get(json_object_get(cfg, "auto_map"), "AutoTokenizer");
    const char *name = json_string_value(json_is_array(am) ? json_array_get(am, 0) : am);
    for (size_t i = 0; name && i < sizeof classes / sizeof *classes; i++)
        if (!strcmp(classes[i].auto_map, name)) return &classes[i];
    mw_errf(err,
            "%s: tokenizer class '%s' (auto_map.AutoTokenizer) is not a tiktoken class moewire "
            "knows (known: %s)",
            what, name ? name : "(none)", classes[0].auto_map);
    return NULL;
}

/* The class's Python file, when present, must hold its pattern's parts in order after pat_str:
 * a checkpoint that changed the pattern is refused rather than split the old way. */
static int check_py(const struct tt_class *c, const char *dir, mw_err *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, c->py);
    struct stat st;
    if (stat(path, &st)) return 0;
    FILE *f = fopen(path, "rb");
    if (!f || fstat(fileno(f), &st) || !S_ISREG(st.st_mode) || st.st_size > MAX_PY_FILE) {
        if (f) fclose(f);
        return mw_errf(err, "%s: not a regular file of at most 1 MiB", path);
    }
    char *s = calloc(1, (size_t)st.st_size + 1);
    size_t n = s ? fread(s, 1, (size_t)st.st_size, f) : 0;
    fclose(f);
    if (!s || n != (size_t)st.st_size) {
        free(s);
        return mw_errf(err, "%s: read failed", path);
    }
    const char *at = strstr(s, "pat_str");
    int rc = at ? 0 : mw_errf(err, "%s: no pat_str", path);
    for (size_t i = 0; !rc && c->pat[i]; i++) {
        char quoted[512];
        snprintf(quoted, sizeof quoted, "r\"\"\"%s\"\"\"", c->pat[i]);
        const char *p = strstr(at, quoted);
        if (!p)
            rc = mw_errf(err, "%s: pat_str part %zu is not %s's ('%s')", path, i + 1, c->pre,
                         c->pat[i]);
        else
            at = p + strlen(quoted);
    }
    free(s);
    return rc;
}

/* ---- tiktoken.model ------------------------------------------------------------------------- */

static int b64_value(unsigned char c) {
    return c >= 'A' && c <= 'Z'   ? c - 'A'
           : c >= 'a' && c <= 'z' ? c - 'a' + 26
           : c >= '0' && c <= '9' ? c - '0' + 52
           : c == '+'             ? 62
           : c == '/'             ? 63
                                  : -1;
}

/* Standard base64 with padding; returns the byte count, or -1 when malformed or longer than cap. */
static long b64_decode(const char *s, size_t n, uint8_t *out, size_t cap) {
    if (n == 0 || n % 4) return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            v[k] = s[i + k] == '=' ? (pad++, 0) : b64_value((unsigned char)s[i + k]);
            if (v[k] < 0 || (pad && s[i + k] != '=')) return -1;
        }
        if (pad > 2 || (pad && i + 4 != n)) return -1;
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | v[3];
        if (o + 3 - (size_t)pad > cap) return -1;
        out[o++] = (uint8_t)(w >> 16);
        if (pad < 2) out[o++] = (uint8_t)(w >> 8);
        if (pad < 1) out[o++] = (uint8_t)w;
    }
    return (long)o;
}

/* The ranks: token r's bytes are blob[off[r] .. off[r + 1]). */
typedef struct ranks {
    uint8_t *blob;
    uint64_t *off; /* n + 1 */
    int32_t n;
} ranks;

static void ranks_free(ranks *r) {
    free(r->blob);
    free(r->off);
}

/* One "BASE64 RANK" line: its bytes appended to blob, their start and length in its rank's slot
 * (start -1 = unset; ranks are below n_slots). */
typedef struct slots {
    uint8_t *blob;
    uint64_t used;
    int64_t *start;
    uint32_t *len;
    size_t n;
} slots;

static int parse_line(const char *line, size_t len, size_t lineno, slots *s, const char *what,
                      mw_err *err) {
    const char *sp = memchr(line, ' ', len);
    if (!sp) return mw_errf(err, "%s:%zu: not 'BASE64 RANK'", what, lineno);
    char num[16];
    size_t nl = len - (size_t)(sp + 1 - line);
    if (nl == 0 || nl >= sizeof num) return mw_errf(err, "%s:%zu: bad rank", what, lineno);
    memcpy(num, sp + 1, nl);
    num[nl] = '\0';
    char *end;
    long rank = strtol(num, &end, 10);
    if (*end || num[0] < '0' || num[0] > '9' || rank < 0 || (size_t)rank >= s->n)
        return mw_errf(err, "%s:%zu: rank '%s' is not an integer below the %zu lines", what, lineno,
                       num, s->n);
    if (s->start[rank] >= 0)
        return mw_errf(err, "%s:%zu: rank %ld is given twice", what, lineno, rank);
    long k = b64_decode(line, (size_t)(sp - line), s->blob + s->used, TK_MAX_TOKEN_LEN);
    if (k <= 0)
        return mw_errf(err, "%s:%zu: the token is not base64 of 1 to %d bytes", what, lineno,
                       TK_MAX_TOKEN_LEN);
    s->start[rank] = (int64_t)s->used;
    s->len[rank] = (uint32_t)k;
    s->used += (uint64_t)k;
    return 0;
}

/* Every non-empty line once; the ranks must be 0 .. count-1. */
static int parse_ranks(const char *text, size_t len, const char *what, ranks *r, mw_err *err) {
    slots s = {.n = 1};
    for (size_t i = 0; i < len; i++) s.n += text[i] == '\n';
    if (s.n > TK_MAX_VOCAB) return mw_errf(err, "%s: more than %d lines", what, TK_MAX_VOCAB);
    s.start = malloc(s.n * sizeof *s.start);
    s.len = malloc(s.n * sizeof *s.len);
    s.blob = malloc(len + 1); /* base64 is longer than its bytes */
    int rc = s.start && s.len && s.blob ? 0 : mw_errf(err, "out of memory");
    if (!rc) memset(s.start, 0xff, s.n * sizeof *s.start);
    size_t count = 0, lineno = 0;
    for (size_t at = 0; !rc && at < len;) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t l = nl ? (size_t)(nl - (text + at)) : len - at, next = at + l + 1;
        lineno++;
        if (l && text[at + l - 1] == '\r') l--;
        if (l && !(rc = parse_line(text + at, l, lineno, &s, what, err))) count++;
        at = next;
    }
    if (!rc && count == 0) rc = mw_errf(err, "%s: no tokens", what);
    for (size_t i = 0; !rc && i < count; i++)
        if (s.start[i] < 0)
            rc = mw_errf(err, "%s: the ranks are not 0 .. %zu (rank %zu is missing)", what,
                         count - 1, i);
    if (!rc && (!(r->off = malloc((count + 1) * sizeof *r->off)) ||
                !(r->blob = malloc(s.used ? s.used : 1))))
        rc = mw_errf(err, "out of memory");
    for (size_t i = 0, o = 0; !rc && i < count; i++) {
        memcpy(r->blob + o, s.blob + s.start[i], s.len[i]);
        r->off[i] = (uint64_t)o;
        o += s.len[i];
        r->off[i + 1] = (uint64_t)o;
    }
    if (!rc) r->n = (int32_t)count;
    free(s.start);
    free(s.len);
    free(s.blob);
    return rc;
}

/* ---- building the tokenizer ----------------------------------------------------------------- */

/* The token of rank i as GPT-2's byte-level text (what the GGUF holds). */
static int set_rank(tk_tokenizer *t, const ranks *r, int32_t i, char *buf, mw_err *err) {
    size_t o = 0;
    for (uint64_t k = r->off[i]; k < r->off[i + 1]; k++)
        o += (size_t)tk__utf8_put(tk__byte_char(r->blob[k]), buf + o);
    return tk__set_token(t, i, buf, o, TK_T_NORMAL, 0, err);
}

/* The special token at id: added_tokens_decoder's content, else the class's reserved name. */
static int set_special(tk_tokenizer *t, const struct tt_class *c, const json_t *decoder, int32_t id,
                       const char *what, mw_err *err) {
    char key[16], name[64];
    snprintf(key, sizeof key, "%d", id);
    const json_t *e = json_object_get(decoder, key);
    const json_t *content = json_object_get(e, "content");
    if (e && !json_is_string(content))
        return mw_errf(err, "%s: added_tokens_decoder[\"%s\"] has no content", what, key);
    if (content)
        return tk__set_token(t, id, json_string_value(content), json_string_length(content),
                             TK_T_CONTROL, 0, err);
    snprintf(name, sizeof name, c->reserved, id);
    return tk__set_token(t, id, name, strlen(name), TK_T_CONTROL, 0, err);
}

/* Every added token must sit among the class's special ids (tiktoken has no other kind). */
static int check_decoder(const json_t *decoder, int32_t lo, int32_t hi, const char *what,
                         mw_err *err) {
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)decoder, key, v) {
        char *end;
        long id = strtol(key, &end, 10);
        if (*end || !*key || id < lo || id >= hi)
            return mw_errf(err,
                           "%s: added_tokens_decoder names id '%s', outside the special ids %d .. "
                           "%d after the ranks",
                           what, key, lo, hi - 1);
    }
    return 0;
}

/* An integer or a list of them (config.json / generation_config.json eos_token_id). */
static int add_eog_ids(tk_tokenizer *t, const json_t *v) {
    if (json_is_integer(v)) {
        json_int_t id = json_integer_value(v);
        return id >= 0 && id < t->n && tk__add_eog(t, (int32_t)id);
    }
    for (size_t i = 0; json_is_array(v) && i < json_array_size(v); i++)
        if (add_eog_ids(t, json_array_get(v, i))) return -1;
    return 0;
}

/* config.json (or its text_config): vocab_size; 0 when absent. */
static int read_model_config(const char *dir, json_int_t *vocab, mw_err *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    struct stat st;
    *vocab = 0;
    if (stat(path, &st)) return 0;
    json_t *c = tk__read_json(path, err);
    if (!c) return -1;
    const json_t *v = json_object_get(c, "vocab_size");
    if (!v) v = json_object_get(json_object_get(c, "text_config"), "vocab_size");
    int rc = 0;
    if (v &&
        (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > TK_MAX_VOCAB))
        rc = mw_errf(err, "%s: vocab_size is not an integer in [1, %d]", path, TK_MAX_VOCAB);
    else if (v)
        *vocab = json_integer_value(v);
    json_decref(c);
    return rc;
}

/* The end-of-turn ids the model declares beside the tokenizer's eos (K3 ends a turn with
 * <|end_of_msg|>, not [EOS]). */
static int model_eogs(tk_tokenizer *t, const char *dir, mw_err *err) {
    static const char *const files[] = {"config.json", "generation_config.json"};
    for (size_t i = 0; i < 2; i++) {
        char path[4200];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        if (stat(path, &st)) continue;
        json_t *c = tk__read_json(path, err);
        if (!c) return -1;
        const json_t *v = json_object_get(c, "eos_token_id");
        if (!v) v = json_object_get(json_object_get(c, "text_config"), "eos_token_id");
        int rc = add_eog_ids(t, v) ? mw_errf(err, "out of memory") : 0;
        json_decref(c);
        if (rc) return -1;
    }
    return 0;
}

/* Every token of the vocabulary: ranks, specials, pads up to the model's vocabulary size. */
static int set_all(tk_tokenizer *t, const ranks *r, const struct tt_class *c, const json_t *dec,
                   const char *what, mw_err *err) {
    char *buf = malloc(2 * TK_MAX_TOKEN_LEN + 1);
    int rc = buf ? 0 : mw_errf(err, "out of memory");
    for (int32_t i = 0; !rc && i < t->n; i++) {
        char pad[32];
        if (i < r->n)
            rc = set_rank(t, r, i, buf, err);
        else if (i < r->n + c->n_special)
            rc = set_special(t, c, dec, i, what, err);
        else
            rc = tk__set_token(t, i, pad, (size_t)snprintf(pad, sizeof pad, "[PAD%d]", i),
                               TK_T_UNUSED, 0, err);
    }
    free(buf);
    return rc;
}

/* tiktoken requires one token per byte sequence: a repeated one would make the ranks ambiguous. */
static int check_unique(const tk_tokenizer *t, const ranks *r, const char *what, mw_err *err) {
    for (int32_t i = 0; i < r->n; i++) {
        int32_t j = tk__map_get(&t->by_bytes, t->bytes, t->bytes_off, r->blob + r->off[i],
                                (size_t)(r->off[i + 1] - r->off[i]));
        if (j != i) return mw_errf(err, "%s: rank %d repeats the bytes of rank %d", what, i, j);
    }
    return 0;
}

static int build(const ranks *r, const json_t *cfg, const char *dir, json_int_t vocab,
                 const char *what, tk_tokenizer **out, mw_err *err) {
    const struct tt_class *c = find_class(cfg, what, err);
    if (!c || check_py(c, dir, err)) return -1;
    const json_t *dec = json_object_get(cfg, "added_tokens_decoder");
    if (dec && !json_is_object(dec))
        return mw_errf(err, "%s: added_tokens_decoder is not an object", what);
    if (check_decoder(dec, r->n, r->n + c->n_special, what, err)) return -1;
    int64_t n = vocab ? vocab : (int64_t)r->n + c->n_special;
    if (n < r->n)
        return mw_errf(err, "%s: vocab_size %lld is smaller than the %d ranks", what, (long long)n,
                       r->n);
    if (n > TK_MAX_VOCAB)
        return mw_errf(err, "%s: %lld tokens (at most %d)", what, (long long)n, TK_MAX_VOCAB);
    tk_tokenizer *t = tk__new(TK_BPE, (int32_t)n);
    if (!t) return mw_errf(err, "out of memory");
    int rc = set_all(t, r, c, dec, what, err);
    if (!rc) rc = tk__finish(t, what, err);
    if (!rc) rc = check_unique(t, r, what, err);
    for (int b = 0; !rc && b < 256; b++) /* tiktoken cannot encode a byte that is no token */
        if (t->byte_tok[b] < 0)
            rc = mw_errf(err, "%s: no rank holds the single byte 0x%02x", what, b);
    if (!rc) rc = tk__set_pre(t, c->pre, what, err);
    if (rc) {
        tk_free(t);
        return -1;
    }
    *out = t;
    return 0;
}

/* ---- the entry point ------------------------------------------------------------------------ */

static int split_path(const char *path, char *file, size_t fcap, char *dir, size_t dcap,
                      mw_err *err) {
    struct stat st;
    if (stat(path, &st)) return mw_errf(err, "%s: no such file or directory", path);
    if (S_ISDIR(st.st_mode)) {
        snprintf(dir, dcap, "%s", path);
        snprintf(file, fcap, "%s/tiktoken.model", path);
        return 0;
    }
    snprintf(file, fcap, "%s", path);
    snprintf(dir, dcap, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(dir, dcap, ".");
    return 0;
}

static int load_ranks(const char *file, ranks *r, mw_err *err) {
    FILE *f = fopen(file, "rb");
    struct stat st;
    if (!f) return mw_errf(err, "%s: cannot open", file);
    if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > MAX_MODEL_FILE) {
        fclose(f);
        return mw_errf(err, "%s: not a regular file of at most 256 MiB", file);
    }
    char *text = malloc((size_t)st.st_size + 1);
    size_t n = text ? fread(text, 1, (size_t)st.st_size, f) : 0;
    fclose(f);
    int rc = !text || n != (size_t)st.st_size ? mw_errf(err, "%s: read failed", file)
                                              : parse_ranks(text, n, file, r, err);
    free(text);
    return rc;
}

int tk_load_tiktoken(const char *path, const char *arch, tk_tokenizer **out, mw_err *err) {
    *out = NULL;
    char file[4096], dir[4096], cfg_path[4200];
    if (split_path(path, file, sizeof file, dir, sizeof dir, err)) return -1;
    snprintf(cfg_path, sizeof cfg_path, "%s/tokenizer_config.json", dir);
    ranks r = {0};
    json_int_t vocab = 0;
    json_t *cfg = NULL;
    tk_tokenizer *t = NULL;
    int rc = load_ranks(file, &r, err);
    if (!rc && !(cfg = tk__read_json(cfg_path, err))) rc = -1;
    if (!rc) rc = read_model_config(dir, &vocab, err);
    if (!rc) rc = build(&r, cfg, dir, vocab, cfg_path, &t, err);
    json_decref(cfg);
    ranks_free(&r);
    if (!rc && arch && (free(t->arch), !(t->arch = strdup(arch))))
        rc = mw_errf(err, "out of memory");
    if (!rc) rc = tk__apply_config(t, cfg_path, err);
    if (!rc) rc = tk__chat_template_file(t, dir, err);
    if (!rc && tk__add_eog(t, t->eos)) rc = mw_errf(err, "out of memory");
    if (!rc) rc = model_eogs(t, dir, err);
    if (!rc) rc = tk__ready(t, file, err);
    if (rc) {
        tk_free(t);
        return -1;
    }
    *out = t;
    return 0;
}
