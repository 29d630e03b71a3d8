/* coordinator/co_textcmd.c — see co_textcmd.h. The tokenizer comes from the model being served (a
 * GGUF file's metadata, a vindex's carried tokenizer file) or, for tokenize / detokenize, from any
 * file tk_load_path takes, vocabulary-only GGUFs included. */
#include "coordinator/co_textcmd.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/co_jinja.h"
#include "vindex/vx_json.h"
#include "vindex/vx_source.h"

#define MAX_TEXT (256u << 20)

static int read_all(FILE *f, const char *what, char **out, size_t *len, mw_err *err) {
    tk_text b = {0};
    char buf[65536];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) {
        if (b.n + k > MAX_TEXT) {
            tk_text_free(&b);
            return mw_errf(err, "%s: more than %u bytes", what, MAX_TEXT);
        }
        if (tk_text_add(&b, buf, k)) {
            tk_text_free(&b);
            return mw_errf(err, "out of memory");
        }
    }
    if (ferror(f)) {
        tk_text_free(&b);
        return mw_errf(err, "%s: read failed", what);
    }
    if (tk_text_add(&b, "", 0)) return mw_errf(err, "out of memory");
    *out = b.s;
    *len = b.n;
    return 0;
}

/* The model's own template (co_jinja.h) when it has one and no format is named: 0 rendered, 1 not
 * used (the built-in formats render), -1 error. The reply is parsed by the built-in format the
 * template is recognised as, else read as plain text. */
static int jinja_prompt(co_textcmd *x, const co_opts *o, const char *json, size_t len,
                        const tk_msgs *msgs, tk_ids *prompt, mw_err *err) {
    co_jinja *j = NULL;
    if (co_jinja_open(x->tok, o->chat_template, &j, err)) return -1;
    if (!j) return 1;
    static const vx_json_limits lim = {
        .max_depth = 64, .bytes_per_object = 8, .bytes_per_array = 4, .bytes_per_item = 2};
    json_t *list =
        json ? vx_json_parse(json, len, o->messages, &lim, err) : co_jinja_msgs_json(msgs);
    if (list && json_is_object(list)) {
        json_t *inner = json_incref(json_object_get(list, "messages"));
        json_decref(list);
        list = inner;
    }
    /* the family's format parses the reply, and names the kwarg its template thinks by */
    mw_err cerr = {{0}};
    if (tk_chat_open(x->tok, NULL, &x->chat, &cerr)) x->chat = NULL;
    co_jinja_opts jo = {.thinking = o->thinking,
                        .thinking_kwarg = x->chat ? tk_chat_thinking_kwarg(x->chat) : NULL};
    int rc = list ? co_jinja_prompt(j, list, &jo, prompt, err) : mw_errf(err, "out of memory");
    json_decref(list);
    co_jinja_free(j);
    if (rc) return -1;
    x->copts = (tk_chat_opts){.add_generation_prompt = true, .thinking = o->thinking};
    if (x->chat && tk_chat_parser_new(x->chat, &x->copts, &x->parser, err)) return -1;
    if (!x->chat) tk_stream_init(&x->stream, x->tok, 0);
    return 0;
}

int co_textcmd_open(co_textcmd *x, const co_opts *o, const vx_source *src, tk_ids *prompt,
                    mw_err *err) {
    *x = (co_textcmd){0};
    if (tk_load_source(src, &x->tok, err)) return mw_err_wrap(err, "tokenizer");
    if (o->prompt) {
        unsigned fl = TK_SPECIAL | (tk_add_bos(x->tok) ? TK_ADD_BOS : 0);
        if (tk_encode(x->tok, o->prompt, strlen(o->prompt), fl, prompt, err))
            return mw_err_wrap(err, "--prompt");
        tk_stream_init(&x->stream, x->tok, 0);
        return prompt->n ? 0 : mw_errf(err, "--prompt: the text gives no tokens");
    }
    tk_msgs file = {0};
    const tk_msgs *msgs = &o->chat;
    char *json = NULL;
    size_t len = 0;
    if (o->messages) {
        FILE *f = fopen(o->messages, "rb");
        if (!f) return mw_errf(err, "--messages: cannot open %s: %s", o->messages, strerror(errno));
        int rc = read_all(f, o->messages, &json, &len, err);
        fclose(f);
        if (rc) return -1;
        rc = tk_msgs_parse(json, len, &file, err);
        if (rc) {
            free(json);
            return mw_err_wrap(err, "%s", o->messages);
        }
        msgs = &file;
    }
    int rc = jinja_prompt(x, o, json, len, msgs, prompt, err);
    free(json);
    if (rc <= 0) {
        tk_msgs_free(&file);
        return rc;
    }
    rc = tk_chat_open(x->tok, o->chat_template, &x->chat, err);
    if (!rc && *tk_chat_missing(x->chat))
        fprintf(stderr,
                "coordinator: note: the vocabulary has no %s; the %s template spells them as "
                "plain text\n",
                tk_chat_missing(x->chat), tk_chat_name(x->chat));
    x->copts = (tk_chat_opts){.add_generation_prompt = true, .thinking = o->thinking};
    if (!rc) rc = tk_chat_render(x->chat, msgs->v, msgs->n, &x->copts, prompt, err);
    if (!rc) rc = tk_chat_parser_new(x->chat, &x->copts, &x->parser, err);
    tk_msgs_free(&file);
    return rc;
}

static int put(const tk_text *t, FILE *f) {
    if (t->n && fwrite(t->s, 1, t->n, f) != t->n) return -1;
    return fflush(f);
}

int co_textcmd_emit(co_textcmd *x, const co_opts *o, int32_t id, FILE *out, mw_err *err) {
    x->content.n = x->reasoning.n = 0;
    int rc;
    if (x->chat) {
        rc = tk_chat_parser_push(x->parser, id, &x->content, &x->reasoning, err);
    } else {
        rc = tk_is_eog(x->tok, id) ? 1 : tk_stream_push(&x->stream, id, &x->content, err);
    }
    if (rc == 1) x->n_stop = 1;
    if (rc) return rc;
    if (put(&x->content, out) || (o->show_reasoning && put(&x->reasoning, stderr)))
        return mw_errf(err, "writing the generated text failed");
    return 0;
}

int co_textcmd_finish(co_textcmd *x, const co_opts *o, FILE *out, mw_err *err) {
    x->content.n = x->reasoning.n = 0;
    int rc = x->chat ? tk_chat_parser_finish(x->parser, &x->content, &x->reasoning, err)
                     : tk_stream_finish(&x->stream, &x->content, err);
    if (rc) return -1;
    if (put(&x->content, out) || (o->show_reasoning && put(&x->reasoning, stderr)) ||
        fputc('\n', out) == EOF || fflush(out))
        return mw_errf(err, "writing the generated text failed");
    return 0;
}

void co_textcmd_close(co_textcmd *x) {
    tk_chat_parser_free(x->parser);
    tk_chat_free(x->chat);
    tk_free(x->tok);
    tk_text_free(&x->content);
    tk_text_free(&x->reasoning);
    *x = (co_textcmd){0};
}

/* ---- tokenize / detokenize ------------------------------------------------------------------ */

static void text_usage(FILE *f) {
    fprintf(
        f, "usage: coordinator tokenize --model PATH [TEXT | --stdin] [--json] [--special] "
           "[--add-bos]\n"
           "       coordinator detokenize --model PATH [IDS... | --stdin] [--special] [--raw]\n"
           "\n"
           "PATH is a GGUF file (a full model or a vocabulary-only one), a vindex, a Hugging Face\n"
           "checkpoint directory or a tokenizer.json. tokenize prints the ids on one line,\n"
           "separated by spaces (--json: a JSON array); special-token text becomes its token\n"
           "only with --special, and no BOS is added unless --add-bos. --stdin reads the text\n"
           "byte for byte. detokenize prints the text of the ids given as arguments or on\n"
           "stdin (--stdin), separated by spaces, commas or newlines (tokenize's output, plain\n"
           "or --json), followed by a newline; --raw prints the text's bytes only, so\n"
           "'tokenize ... | detokenize --stdin --raw' gives the text back byte for byte.\n"
           "Control tokens print only with --special.\n");
}

typedef struct text_args {
    const char *model, *text;
    const char **ids; /* detokenize: the IDS arguments (malloc'ed) */
    int n_ids;
    bool in, json, special, bos, raw, help;
} text_args;

static int parse_text_args(int argc, char **argv, bool tokenize, text_args *a, mw_err *err) {
    *a = (text_args){0};
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        if (!strcmp(s, "-h") || !strcmp(s, "--help"))
            a->help = true;
        else if (!strcmp(s, "--model")) {
            if (i + 1 >= argc) return mw_errf(err, "--model needs a value (PATH)");
            a->model = argv[++i];
        } else if (!strncmp(s, "--model=", 8))
            a->model = s + 8;
        else if (!strcmp(s, "--special"))
            a->special = true;
        else if (!strcmp(s, "--stdin"))
            a->in = true;
        else if (tokenize && !strcmp(s, "--json"))
            a->json = true;
        else if (tokenize && !strcmp(s, "--add-bos"))
            a->bos = true;
        else if (!tokenize && !strcmp(s, "--raw"))
            a->raw = true;
        else if (!strncmp(s, "--", 2))
            return mw_errf(err, "unknown option '%s' (see --help)", s);
        else if (!tokenize) {
            if (!a->ids && !(a->ids = malloc((size_t)argc * sizeof *a->ids)))
                return mw_errf(err, "out of memory");
            a->ids[a->n_ids++] = s;
        } else if (a->text)
            return mw_errf(err, "more than one TEXT given (quote the text)");
        else
            a->text = s;
    }
    if (a->help) return 0;
    if (!a->model) return mw_errf(err, "--model is required");
    if (tokenize && !!a->text == a->in) return mw_errf(err, "give either TEXT or --stdin");
    if (!tokenize && !!a->ids == a->in) return mw_errf(err, "give either IDS or --stdin");
    return 0;
}

int co_tokenize_main(int argc, char **argv) {
    text_args a;
    mw_err err = {{0}};
    if (parse_text_args(argc, argv, true, &a, &err)) {
        fprintf(stderr, "coordinator tokenize: %s\n", err.msg);
        return 2;
    }
    if (a.help) return text_usage(stdout), 0;
    tk_tokenizer *t = NULL;
    char *in = NULL;
    size_t len = a.text ? strlen(a.text) : 0;
    tk_ids ids = {0};
    int rc = 1;
    if (tk_load_path(a.model, &t, &err) || (a.in && read_all(stdin, "stdin", &in, &len, &err)) ||
        tk_encode(t, a.in ? in : a.text, len,
                  (a.special ? TK_SPECIAL : 0) | (a.bos ? TK_ADD_BOS : 0), &ids, &err)) {
        fprintf(stderr, "coordinator tokenize: %s\n", err.msg);
    } else {
        if (a.json) putchar('[');
        for (size_t i = 0; i < ids.n; i++)
            printf(a.json ? (i ? ", %d" : "%d") : (i ? " %d" : "%d"), ids.v[i]);
        printf(a.json ? "]\n" : "\n");
        rc = fflush(stdout) ? 1 : 0;
    }
    tk_ids_free(&ids);
    free(in);
    tk_free(t);
    return rc;
}

/* Appends the ids written in s (decimal numbers separated by spaces, commas or newlines; a JSON
 * array's brackets are allowed) to ids. 2 for text that is not an id, 1 for an id outside the
 * vocabulary, each naming it. */
static int parse_ids(const char *s, int32_t n_vocab, tk_ids *ids, mw_err *err) {
    static const char sep[] = ", \t\r\n[]";
    for (const char *p = s; *p;) {
        p += strspn(p, sep);
        if (!*p) break;
        size_t len = strcspn(p, sep);
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end != p + len || *p == '-' || *p == '+') {
            mw_errf(err, "'%.*s' is not a token id", (int)(len > 64 ? 64 : len), p);
            return 2;
        }
        if (errno == ERANGE || v >= n_vocab) {
            mw_errf(err, "token id %.*s is out of range (the vocabulary has %d tokens)",
                    (int)(len > 64 ? 64 : len), p, n_vocab);
            return 1;
        }
        if (tk_ids_push(ids, (int32_t)v)) {
            mw_errf(err, "out of memory");
            return 1;
        }
        p += len;
    }
    return 0;
}

int co_detokenize_main(int argc, char **argv) {
    text_args a;
    mw_err err = {{0}};
    if (parse_text_args(argc, argv, false, &a, &err)) {
        fprintf(stderr, "coordinator detokenize: %s\n", err.msg);
        free(a.ids);
        return 2;
    }
    if (a.help) return free(a.ids), text_usage(stdout), 0;
    tk_tokenizer *t = NULL;
    tk_ids ids = {0};
    tk_text out = {0};
    char *in = NULL;
    size_t len;
    int rc = 1;
    if (tk_load_path(a.model, &t, &err) || (a.in && read_all(stdin, "stdin", &in, &len, &err)))
        goto done;
    rc = 0;
    if (a.in) {
        if (memchr(in, '\0', len)) {
            mw_errf(&err, "stdin: a NUL byte is not a token id");
            rc = 2;
            goto done;
        }
        rc = parse_ids(in, tk_n_vocab(t), &ids, &err);
    }
    for (int i = 0; i < a.n_ids && !rc; i++) rc = parse_ids(a.ids[i], tk_n_vocab(t), &ids, &err);
    if (rc) goto done;
    rc = 1;
    if (tk_decode(t, ids.v, ids.n, a.special ? TK_SPECIAL : 0, &out, &err)) goto done;
    if ((out.n && fwrite(out.s, 1, out.n, stdout) != out.n) || (!a.raw && putchar('\n') == EOF) ||
        fflush(stdout))
        mw_errf(&err, "writing the text failed");
    else
        rc = 0;
done:
    if (rc) fprintf(stderr, "coordinator detokenize: %s\n", err.msg);
    free(a.ids);
    free(in);
    tk_text_free(&out);
    tk_ids_free(&ids);
    tk_free(t);
    return rc;
}
