/* tokenizer/tk_hf.c — a tokenizer from a Hugging Face `tokenizer.json` (+ `tokenizer_config.json`).
 *
 * Byte-level BPE as the model families we serve ship it: model type BPE with vocab and merges,
 * added tokens (special → control, others user-defined), and a pre-tokenizer made of Split
 * regexes, Digits and ByteLevel steps, run with the file's own regexes on PCRE2. The chat
 * template, BOS/EOS and add_bos_token come from tokenizer_config.json. Anything else (another
 * model type, a normalizer that changes text, an unknown pre-tokenizer step) is an error naming
 * it. The files are untrusted: the JSON is bounded before jansson builds it. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tokenizer/tk_internal.h"
#include "vindex/vx_json.h"

#define MAX_JSON  (1ull << 30)
#define MAX_STEPS 16

static const char *const gpt2_regex =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* o200k's pattern as Hugging Face's gpt-oss tokenizer.json spells it: such a file is a tiktoken
 * encoding, and gets the table's gpt-4o pre-tokenizer (tiktoken's ranks) like its GGUF does. */
static const char *const o200k_hf =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}"
    "\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}"
    "\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

json_t *tk__read_json(const char *path, mw_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return mw_errf(err, "%s: cannot open", path), NULL;
    struct stat st;
    if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > MAX_JSON) {
        fclose(f);
        return mw_errf(err, "%s: not a regular file of at most 1 GiB", path), NULL;
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    if (!buf || fread(buf, 1, n, f) != n) {
        free(buf);
        fclose(f);
        return mw_errf(err, "%s: read failed", path), NULL;
    }
    fclose(f);
    const vx_json_limits lim = {
        .max_depth = 32, .bytes_per_object = 8, .bytes_per_array = 4, .bytes_per_item = 2};
    json_t *j = vx_json_parse(buf, n, path, &lim, err);
    free(buf);
    return j;
}

/* The pre-tokenizer's regexes, in order. */
typedef struct steps {
    const char *re[MAX_STEPS];
    size_t n;
} steps;

static int pre_step(const json_t *p, steps *st, const char *what, mw_err *err) {
    const char *type = json_string_value(json_object_get(p, "type"));
    if (!type) return mw_errf(err, "%s: a pre-tokenizer step has no type", what);
    if (st->n >= MAX_STEPS)
        return mw_errf(err, "%s: more than %d pre-tokenizer steps", what, MAX_STEPS);
    if (!strcmp(type, "Sequence")) {
        const json_t *list = json_object_get(p, "pretokenizers");
        if (!json_is_array(list)) return mw_errf(err, "%s: Sequence without pretokenizers", what);
        for (size_t i = 0; i < json_array_size(list); i++)
            if (pre_step(json_array_get(list, i), st, what, err)) return -1;
        return 0;
    }
    if (!strcmp(type, "ByteLevel")) {
        if (json_is_true(json_object_get(p, "add_prefix_space")))
            return mw_errf(err, "%s: ByteLevel with add_prefix_space is not supported", what);
        const json_t *ur = json_object_get(p, "use_regex");
        if (!ur || json_is_true(ur)) st->re[st->n++] = gpt2_regex;
        return 0;
    }
    if (!strcmp(type, "Split")) {
        const json_t *pat = json_object_get(p, "pattern");
        const char *re = json_string_value(json_object_get(pat, "Regex"));
        const char *behavior = json_string_value(json_object_get(p, "behavior"));
        if (!re) return mw_errf(err, "%s: Split without a Regex pattern", what);
        if (json_is_true(json_object_get(p, "invert")) ||
            (behavior && strcmp(behavior, "Isolated")))
            return mw_errf(err, "%s: Split behaviour '%s' is not supported (Isolated is)", what,
                           behavior ? behavior : "inverted");
        st->re[st->n++] = re;
        return 0;
    }
    if (!strcmp(type, "Digits")) {
        st->re[st->n++] =
            json_is_true(json_object_get(p, "individual_digits")) ? "\\p{N}" : "\\p{N}+";
        return 0;
    }
    return mw_errf(err, "%s: unknown pre-tokenizer step '%s'", what, type);
}

static int check_normalizer(const json_t *n, const char *what, mw_err *err) {
    if (!n || json_is_null(n)) return 0;
    const char *type = json_string_value(json_object_get(n, "type"));
    /* NFC leaves the text our callers send (already composed) unchanged; llama.cpp ignores it too
     */
    if (type && !strcmp(type, "NFC")) return 0;
    return mw_errf(err, "%s: unknown normalizer '%s'", what, type ? type : "?");
}

/* "a b" or ["a", "b"] */
static int merge_parts(const json_t *m, const char **a, size_t *al, const char **b, size_t *bl) {
    if (json_is_string(m)) {
        const char *s = json_string_value(m);
        size_t len = json_string_length(m);
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        if (!sp) return -1;
        *a = s, *al = (size_t)(sp - s), *b = sp + 1, *bl = len - *al - 1;
        return 0;
    }
    if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
        json_is_string(json_array_get(m, 1))) {
        *a = json_string_value(json_array_get(m, 0)),
        *al = json_string_length(json_array_get(m, 0));
        *b = json_string_value(json_array_get(m, 1)),
        *bl = json_string_length(json_array_get(m, 1));
        return 0;
    }
    return -1;
}

static const char *token_content(const json_t *v) {
    if (json_is_string(v)) return json_string_value(v);
    return json_string_value(json_object_get(v, "content"));
}

int tk__apply_config(tk_tokenizer *t, const char *cfg_path, mw_err *err) {
    struct stat st;
    if (stat(cfg_path, &st)) return 0;
    json_t *c = tk__read_json(cfg_path, err);
    if (!c) return -1;
    int rc = 0;
    const json_t *tmpl = json_object_get(c, "chat_template");
    const char *text = json_string_value(tmpl);
    if (json_is_array(tmpl)) /* [{"name": "default", "template": ...}, ...] */
        for (size_t i = 0; i < json_array_size(tmpl) && !text; i++) {
            const json_t *e = json_array_get(tmpl, i);
            const char *name = json_string_value(json_object_get(e, "name"));
            if (name && !strcmp(name, "default"))
                text = json_string_value(json_object_get(e, "template"));
        }
    if (text && !(t->chat_template = strdup(text))) rc = mw_errf(err, "out of memory");
    const char *bos = token_content(json_object_get(c, "bos_token"));
    const char *eos = token_content(json_object_get(c, "eos_token"));
    if (bos && (t->bos = tk_find(t, bos, strlen(bos))) < 0)
        rc = mw_errf(err, "%s: bos_token '%s' is not in the vocabulary", cfg_path, bos);
    if (eos && (t->eos = tk_find(t, eos, strlen(eos))) < 0)
        rc = mw_errf(err, "%s: eos_token '%s' is not in the vocabulary", cfg_path, eos);
    if (json_is_boolean(json_object_get(c, "add_bos_token")))
        t->add_bos = json_is_true(json_object_get(c, "add_bos_token"));
    if (json_is_boolean(json_object_get(c, "add_eos_token")))
        t->add_eos = json_is_true(json_object_get(c, "add_eos_token"));
    json_decref(c);
    return rc;
}

#define MAX_TEMPLATE (1u << 20)

int tk__chat_template_file(tk_tokenizer *t, const char *dir, mw_err *err) {
    if (t->chat_template) return 0;
    char path[4200];
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    struct stat st;
    if (stat(path, &st)) return 0;
    FILE *f = fopen(path, "rb");
    if (!f || fstat(fileno(f), &st) || !S_ISREG(st.st_mode) || st.st_size > MAX_TEMPLATE) {
        if (f) fclose(f);
        return mw_errf(err, "%s: not a regular file of at most 1 MiB", path);
    }
    char *s = malloc((size_t)st.st_size + 1);
    size_t n = s ? fread(s, 1, (size_t)st.st_size, f) : 0;
    fclose(f);
    if (!s || n != (size_t)st.st_size) {
        free(s);
        return mw_errf(err, "%s: read failed", path);
    }
    s[n] = '\0';
    if (strlen(s) != n) {
        free(s);
        return mw_errf(err, "%s: holds a NUL byte", path);
    }
    t->chat_template = s;
    return 0;
}

/* The model section's shape: BPE without byte fallback, a normalizer that keeps the text, a vocab
 * object and a merges array. */
static int check_model(const json_t *j, const char *what, mw_err *err) {
    const json_t *model = json_object_get(j, "model");
    const char *mtype = json_string_value(json_object_get(model, "type"));
    if (!mtype || strcmp(mtype, "BPE"))
        return mw_errf(err, "%s: unknown tokenizer model type '%s' (known: BPE)", what,
                       mtype ? mtype : "?");
    if (json_is_true(json_object_get(model, "byte_fallback")))
        return mw_errf(err,
                       "%s: BPE with byte_fallback (SentencePiece-style) is not supported from "
                       "tokenizer.json; use the GGUF",
                       what);
    if (check_normalizer(json_object_get(j, "normalizer"), what, err)) return -1;
    if (!json_is_object(json_object_get(model, "vocab")) ||
        !json_is_array(json_object_get(model, "merges")))
        return mw_errf(err, "%s: model.vocab must be an object and model.merges an array", what);
    return 0;
}

/* The vocabulary's size: one past the largest id of the vocab and the added tokens; -1 with err
 * set for an id out of range or an empty vocabulary. */
static json_int_t vocab_size(const json_t *vocab, const json_t *added, const char *what,
                             mw_err *err) {
    json_int_t max_id = -1;
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)vocab, key, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) >= TK_MAX_VOCAB)
            return mw_errf(err, "%s: vocab entry '%.40s' has no valid id", what, key), -1;
        if (json_integer_value(v) > max_id) max_id = json_integer_value(v);
    }
    for (size_t i = 0; json_is_array(added) && i < json_array_size(added); i++) {
        json_int_t id = json_integer_value(json_object_get(json_array_get(added, i), "id"));
        if (id < 0 || id >= TK_MAX_VOCAB)
            return mw_errf(err, "%s: added token %zu has no valid id", what, i), -1;
        if (id > max_id) max_id = id;
    }
    if (max_id < 0) return mw_errf(err, "%s: empty vocabulary", what), -1;
    return max_id + 1;
}

/* Added tokens first: they override a vocab entry of the same id. */
static int set_tokens(tk_tokenizer *t, const json_t *vocab, const json_t *added, const char *what,
                      mw_err *err) {
    int rc = 0;
    for (size_t i = 0; rc == 0 && json_is_array(added) && i < json_array_size(added); i++) {
        const json_t *a = json_array_get(added, i);
        const json_t *c = json_object_get(a, "content");
        if (!json_is_string(c)) return mw_errf(err, "%s: added token %zu has no content", what, i);
        rc = tk__set_token(t, (int32_t)json_integer_value(json_object_get(a, "id")),
                           json_string_value(c), json_string_length(c),
                           json_is_true(json_object_get(a, "special")) ? TK_T_CONTROL : TK_T_USER,
                           0, err);
    }
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)vocab, key, v) {
        if (rc) break;
        int32_t id = (int32_t)json_integer_value(v);
        size_t len = strlen(key); /* jansson keys are NUL-terminated; vocab keys hold no NUL */
        mw_err e2;
        if (tk__set_token(t, id, key, len, TK_T_NORMAL, 0, &e2)) {
            /* an id taken by an added token keeps the added token */
            if (!strstr(e2.msg, "given twice")) rc = mw_errf(err, "%s", e2.msg);
        }
    }
    return rc;
}

/* The pre-tokenizer's regexes; o200k's own pattern alone is the table's gpt-4o pre-tokenizer. */
static int set_pretokenizer(tk_tokenizer *t, const json_t *pre, const char *what, mw_err *err) {
    steps st = {.n = 0};
    if (!pre || json_is_null(pre)) return mw_errf(err, "%s: no pre_tokenizer", what);
    if (pre_step(pre, &st, what, err)) return -1;
    if (st.n == 0) return mw_errf(err, "%s: the pre-tokenizer splits nothing", what);
    if (st.n == 1 && !strcmp(st.re[0], o200k_hf)) return tk__set_pre(t, "gpt-4o", what, err);
    return tk__set_pre_regexes(t, "tokenizer.json", st.re, st.n, err);
}

/* Merges in rank order. */
static int add_merges(tk_tokenizer *t, const json_t *merges, const char *what, mw_err *err) {
    for (size_t i = 0; i < json_array_size(merges); i++) {
        const char *a, *b;
        size_t al, bl;
        if (merge_parts(json_array_get(merges, i), &a, &al, &b, &bl))
            return mw_errf(err, "%s: merge %zu is malformed", what, i);
        if (tk__add_merge(t, a, al, b, bl, (uint32_t)i, err)) return -1;
    }
    return 0;
}

static int build(const json_t *j, const char *what, tk_tokenizer **out, mw_err *err) {
    if (check_model(j, what, err)) return -1;
    const json_t *model = json_object_get(j, "model");
    const json_t *vocab = json_object_get(model, "vocab"),
                 *merges = json_object_get(model, "merges");
    const json_t *added = json_object_get(j, "added_tokens");
    json_int_t n_vocab = vocab_size(vocab, added, what, err);
    if (n_vocab < 0) return -1;
    tk_tokenizer *t = tk__new(TK_BPE, (int32_t)n_vocab);
    if (!t) return mw_errf(err, "out of memory");
    int rc = set_tokens(t, vocab, added, what, err);
    if (!rc) rc = tk__finish(t, what, err);
    if (!rc) rc = set_pretokenizer(t, json_object_get(j, "pre_tokenizer"), what, err);
    t->ignore_merges = json_is_true(json_object_get(model, "ignore_merges"));
    if (!rc) rc = add_merges(t, merges, what, err);
    if (rc) {
        tk_free(t);
        return -1;
    }
    *out = t;
    return 0;
}

int tk_load_hf(const char *path, const char *arch, tk_tokenizer **out, mw_err *err) {
    *out = NULL;
    char file[4096], dir[4096];
    struct stat st;
    if (stat(path, &st)) return mw_errf(err, "%s: no such file or directory", path);
    if (S_ISDIR(st.st_mode)) {
        snprintf(dir, sizeof dir, "%s", path);
        snprintf(file, sizeof file, "%s/tokenizer.json", path);
    } else {
        snprintf(file, sizeof file, "%s", path);
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = '\0';
        else
            snprintf(dir, sizeof dir, ".");
    }
    json_t *j = tk__read_json(file, err);
    if (!j) return -1;
    tk_tokenizer *t = NULL;
    int rc = build(j, file, &t, err);
    json_decref(j);
    if (rc) return -1;
    char cfg[4200];
    snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", dir);
    if (tk__apply_config(t, cfg, err) || tk__chat_template_file(t, dir, err) ||
        (arch && (free(t->arch), !(t->arch = strdup(arch))) && mw_errf(err, "out of memory")) ||
        tk__add_eog(t, t->eos) || tk__ready(t, file, err)) {
        tk_free(t);
        return -1;
    }
    *out = t;
    return 0;
}
