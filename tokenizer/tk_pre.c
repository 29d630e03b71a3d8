/* tokenizer/tk_pre.c — pre-tokenizers: the regexes that cut text into pieces before BPE, one row
 * per name the models declare (`tokenizer.ggml.pre`), run on PCRE2 (UTF + UCP, JIT-compiled).
 *
 * A pre-tokenizer is a list of regexes applied in turn: each one splits every piece the previous
 * one left into its matches and the gaps between them (both kept), as Hugging Face's Split
 * "isolated" does. Each piece is matched as a subject of its own, so `$` and look-arounds stop at
 * the piece's edges. An unknown name is an error naming it. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tk_internal.h"
#include "util/mw_grow.h"

/* Contractions spelled out in both cases (as tiktoken's reference JavaScript port does) rather
 * than with (?i:), which would also fold U+017F into 's'. */
#define CONTR "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

static const char *const re_gpt2[] = {
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+", NULL};

/* o200k (gpt-4o, gpt-oss) */
static const char *const re_o200k[] = {
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"
    "+" CONTR "?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}"
    "\\p{M}]*" CONTR "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};

static const char *const re_qwen2[] = {
    CONTR
    "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!"
    "\\S)|\\s+",
    NULL};

static const char *const re_deepseek_v3[] = {
    "\\p{N}{1,3}", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
    "[!\"#$%&'()*+,\\-./"
    ":;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
    "| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};

/* DeepSeek LLM: its letter class is an explicit list of cased-letter ranges. */
static const char *const re_deepseek_llm[] = {
    "[\\r\\n]",
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-"
    "\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}"
    "\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}"
    "\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}"
    "\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-"
    "\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}"
    "\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}"
    "\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}"
    "\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-"
    "\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-"
    "\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-"
    "\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-"
    "\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}"
    "-"
    "\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}"
    "\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}"
    "-"
    "\\x{118DF}\\x{1E900}-\\x{1E943}]+",
    "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
    "\\s+$",
    "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+",
    "\\p{N}+",
    NULL};

/* Kimi-K2: o200k's shape with Han runs kept whole and out of the letter classes. */
#define NOHAN(cls) "(?:(?!\\p{Han})[" cls "])"
static const char *const re_kimi_k2[] = {
    "\\p{Han}+|[^\\r\\n\\p{L}\\p{N}]?" NOHAN("\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}") "*" NOHAN(
        "\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}") "+" CONTR
                                       "?|[^\\r\\n\\p{L}\\p{N}]?" NOHAN(
                                           "\\p{Lu}\\p{Lt}"
                                           "\\p{Lm}\\p{Lo}"
                                           "\\p{M}") "+" NOHAN("\\p{Ll}\\p{Lm}\\p{Lo}\\p{"
                                                               "M}") "*" CONTR "?|\\p{N}{1,3}| "
                                                                     "?[^\\s\\p{L}\\p{N}]+["
                                                                     "\\r\\n]*|\\s*[\\r\\n]"
                                                                     "+|\\s+(?!\\S)|\\s+",
    NULL};

static const tk__pre_def pre_table[] = {
    {"gpt-2", re_gpt2, false},
    {"gpt-4o", re_o200k, true},
    {"qwen2", re_qwen2, false},
    {"deepseek-v3", re_deepseek_v3, false},
    {"deepseek-llm", re_deepseek_llm, false},
    {"kimi-k2", re_kimi_k2, true},
};

const tk__pre_def *tk__pre_find(const char *name) {
    for (size_t i = 0; i < sizeof pre_table / sizeof *pre_table; i++)
        if (!strcmp(pre_table[i].name, name)) return &pre_table[i];
    return NULL;
}

static int compile_all(tk_tokenizer *t, const char *name, const char *const *regex, size_t n,
                       mw_err *err) {
    t->re = calloc(n ? n : 1, sizeof *t->re);
    if (!t->re) return mw_errf(err, "out of memory");
    for (size_t i = 0; i < n; i++) {
        int ec;
        PCRE2_SIZE eo;
        pcre2_code *re =
            pcre2_compile((PCRE2_SPTR)regex[i], PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &ec, &eo, NULL);
        if (!re) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(ec, msg, sizeof msg);
            return mw_errf(err, "pre-tokenizer '%s': regex %zu does not compile at offset %zu: %s",
                           name, i, (size_t)eo, (const char *)msg);
        }
        t->re[t->n_re++] = re;
        /* JIT is a speed-up only: where it is unavailable PCRE2 interprets */
        (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    }
    free(t->pre);
    if (!(t->pre = strdup(name))) return mw_errf(err, "out of memory");
    return 0;
}

int tk__set_pre(tk_tokenizer *t, const char *name, const char *what, mw_err *err) {
    const tk__pre_def *d = tk__pre_find(name);
    if (!d) {
        char known[256] = "";
        for (size_t i = 0; i < sizeof pre_table / sizeof *pre_table; i++) {
            strncat(known, i ? ", " : "", sizeof known - strlen(known) - 1);
            strncat(known, pre_table[i].name, sizeof known - strlen(known) - 1);
        }
        return mw_errf(err, "%s: unknown pre-tokenizer type '%s' (known: %s)", what, name, known);
    }
    size_t n = 0;
    while (d->regex[n]) n++;
    t->tiktoken = d->tiktoken;
    return compile_all(t, d->name, d->regex, n, err);
}

int tk__set_pre_regexes(tk_tokenizer *t, const char *name, const char *const *regex, size_t n,
                        mw_err *err) {
    return compile_all(t, name, regex, n, err);
}

/* ---- splitting ----------------------------------------------------------------------------- */

typedef struct range {
    size_t off, len;
} range;

struct tk__scratch {
    pcre2_match_data *md;
    pcre2_match_context *mc;
    pcre2_jit_stack *js;
    range *a, *b;
    size_t cap_a, cap_b;
    /* BPE / SPM work arrays (tk_bpe.c, tk_spm.c) */
    void *work[3];
    size_t work_cap[3];
};

tk__scratch *tk__scratch_new(void) {
    tk__scratch *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->md = pcre2_match_data_create(1, NULL);
    s->mc = pcre2_match_context_create(NULL);
    s->js = pcre2_jit_stack_create(32 * 1024, 16 * 1024 * 1024, NULL);
    if (!s->md || !s->mc || !s->js) {
        tk__scratch_free(s);
        return NULL;
    }
    pcre2_jit_stack_assign(s->mc, NULL, s->js);
    return s;
}

void tk__scratch_free(tk__scratch *s) {
    if (!s) return;
    pcre2_match_data_free(s->md);
    pcre2_match_context_free(s->mc);
    pcre2_jit_stack_free(s->js);
    free(s->a);
    free(s->b);
    for (int i = 0; i < 3; i++) free(s->work[i]);
    free(s);
}

void *tk__scratch_work(tk__scratch *s, size_t bytes, int which) {
    if (bytes > s->work_cap[which] && mw_grow(&s->work[which], &s->work_cap[which], bytes, 1))
        return NULL;
    return s->work[which];
}

static int push(range **v, size_t *n, size_t *cap, size_t off, size_t len) {
    if (*n == *cap && mw_grow((void **)v, cap, *n + 1, sizeof **v)) return -1;
    (*v)[(*n)++] = (range){off, len};
    return 0;
}

int tk__pre_split(const tk_tokenizer *t, tk__scratch *s, const char *text, size_t len,
                  tk__piece_fn fn, void *ctx, mw_err *err) {
    size_t na = 0, nb = 0;
    if (push(&s->a, &na, &s->cap_a, 0, len)) return mw_errf(err, "out of memory");
    for (size_t r = 0; r < t->n_re; r++) {
        nb = 0;
        for (size_t i = 0; i < na; i++) {
            const char *sub = text + s->a[i].off;
            size_t sl = s->a[i].len, at = 0, gap = 0;
            while (at < sl) {
                int rc = pcre2_match(t->re[r], (PCRE2_SPTR)sub, sl, at, PCRE2_NO_UTF_CHECK, s->md,
                                     s->mc);
                if (rc == PCRE2_ERROR_NOMATCH) break;
                if (rc < 0) {
                    PCRE2_UCHAR msg[256];
                    pcre2_get_error_message(rc, msg, sizeof msg);
                    return mw_errf(err, "pre-tokenizer '%s': matching failed: %s", t->pre,
                                   (const char *)msg);
                }
                PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md);
                size_t m0 = ov[0], m1 = ov[1];
                if (m1 == m0) { /* an empty match cuts nothing: step over one character */
                    int k = tk__utf8_len((unsigned char)sub[m0]);
                    at = m0 + (k ? (size_t)k : 1);
                    continue;
                }
                if (m0 > gap && push(&s->b, &nb, &s->cap_b, s->a[i].off + gap, m0 - gap))
                    return mw_errf(err, "out of memory");
                if (push(&s->b, &nb, &s->cap_b, s->a[i].off + m0, m1 - m0))
                    return mw_errf(err, "out of memory");
                at = gap = m1;
            }
            if (gap < sl && push(&s->b, &nb, &s->cap_b, s->a[i].off + gap, sl - gap))
                return mw_errf(err, "out of memory");
        }
        range *tv = s->a;
        s->a = s->b;
        s->b = tv;
        size_t tc = s->cap_a;
        s->cap_a = s->cap_b;
        s->cap_b = tc;
        na = nb;
    }
    for (size_t i = 0; i < na; i++)
        if (fn(ctx, text + s->a[i].off, s->a[i].len, err)) return -1;
    return 0;
}
