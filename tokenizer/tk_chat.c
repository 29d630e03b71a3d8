/* tokenizer/tk_chat.c — the chat formats (one table row each), choosing one for a model, and
 * rendering messages into prompt tokens.
 *
 * A renderer writes special tokens by id and message text as plain text; adjacent plain text is
 * encoded in one go (as the reference tokenizes the rendered string between special tokens),
 * without special-token parsing. A format's special token the vocabulary lacks is encoded as its
 * plain text, and tk_chat_missing says which (the tiny test models have none). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tokenizer/tk_chat.h"
#include "tokenizer/tk_chat_internal.h"
#include "tokenizer/tk_internal.h"

/* ---- the prompt being built ---------------------------------------------------------------- */

typedef tk__pb pb;

void tk__pb_flush(pb *b) {
    if (b->rc || b->text.n == 0) return;
    b->rc = tk_encode(b->t, b->text.s, b->text.n, 0, b->out, b->err);
    b->text.n = 0;
}

void tk__pb_txtn(pb *b, const char *s, size_t n) {
    if (!b->rc && s && tk_text_add(&b->text, s, n)) b->rc = mw_errf(b->err, "out of memory");
}

void tk__pb_txt(pb *b, const char *s) {
    if (s) tk__pb_txtn(b, s, strlen(s));
}

void tk__pb_special(pb *b, const char *s) {
    int32_t id = tk_find(b->t, s, strlen(s));
    if (id < 0) return tk__pb_txt(b, s);
    tk__pb_flush(b);
    if (!b->rc && tk_ids_push(b->out, id)) b->rc = mw_errf(b->err, "out of memory");
}

int tk__pb_bad_role(pb *b, const char *fmt, const char *role) {
    return b->rc = mw_errf(b->err, "chat template %s: unknown message role '%s'", fmt, role);
}

static bool is(const tk_msg *m, const char *role) {
    return m->role && !strcmp(m->role, role);
}
static const char *content(const tk_msg *m) {
    return m->content ? m->content : "";
}

/* The text after a reasoning block the content may start with ("<think>...</think>"). */
static const char *strip_think(const char *s) {
    const char *e = strstr(s, "</think>");
    if (!e || strncmp(s + strspn(s, " \n"), "<think>", 7)) return s;
    e += 8;
    return e + strspn(e, "\n");
}

/* ---- harmony (gpt-oss) --------------------------------------------------------------------- */

static void render_harmony(pb *b, const tk_msg *m, size_t n, const tk_chat_opts *o) {
    char date[16];
    if (o->date) {
        snprintf(date, sizeof date, "%s", o->date);
    } else {
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(date, sizeof date, "%Y-%m-%d", &tm);
    }
    const char *effort = o->reasoning_effort ? o->reasoning_effort : "medium";
    if (strcmp(effort, "low") && strcmp(effort, "medium") && strcmp(effort, "high")) {
        b->rc =
            mw_errf(b->err, "harmony: reasoning effort '%s' is not low, medium or high", effort);
        return;
    }
    tk__pb_special(b, "<|start|>");
    tk__pb_txt(b, "system");
    tk__pb_special(b, "<|message|>");
    tk__pb_txt(b, "You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: "
                  "2024-06\nCurrent date: ");
    tk__pb_txt(b, date);
    tk__pb_txt(b, "\n\nReasoning: ");
    tk__pb_txt(b, effort);
    tk__pb_txt(
        b, "\n\n# Valid channels: analysis, commentary, final. Channel must be included for every "
           "message.");
    tk__pb_special(b, "<|end|>");
    for (size_t i = 0; i < n && !b->rc; i++) {
        if (is(&m[i], "system") || is(&m[i], "developer")) {
            tk__pb_special(b, "<|start|>");
            tk__pb_txt(b, "developer");
            tk__pb_special(b, "<|message|>");
            tk__pb_txt(b, "# Instructions\n\n");
            tk__pb_txt(b, content(&m[i]));
            tk__pb_special(b, "<|end|>");
        } else if (is(&m[i], "user")) {
            tk__pb_special(b, "<|start|>");
            tk__pb_txt(b, "user");
            tk__pb_special(b, "<|message|>");
            tk__pb_txt(b, content(&m[i]));
            tk__pb_special(b, "<|end|>");
        } else if (is(&m[i], "assistant")) {
            if (m[i].reasoning && *m[i].reasoning) {
                tk__pb_special(b, "<|start|>");
                tk__pb_txt(b, "assistant");
                tk__pb_special(b, "<|channel|>");
                tk__pb_txt(b, "analysis");
                tk__pb_special(b, "<|message|>");
                tk__pb_txt(b, m[i].reasoning);
                tk__pb_special(b, "<|end|>");
            }
            tk__pb_special(b, "<|start|>");
            tk__pb_txt(b, "assistant");
            tk__pb_special(b, "<|channel|>");
            tk__pb_txt(b, m[i].channel ? m[i].channel : "final");
            tk__pb_special(b, "<|message|>");
            tk__pb_txt(b, content(&m[i]));
            tk__pb_special(b, "<|end|>");
        } else {
            tk__pb_bad_role(b, "harmony", m[i].role ? m[i].role : "(none)");
        }
    }
    if (o->add_generation_prompt) {
        tk__pb_special(b, "<|start|>");
        tk__pb_txt(b, "assistant");
        if (o->answer_open) {
            tk__pb_special(b, "<|channel|>");
            tk__pb_txt(b, "final");
            tk__pb_special(b, "<|message|>");
        }
    }
}

/* ---- ChatML (Qwen3 adds the thinking switch) ----------------------------------------------- */

static void chatml_turns(pb *b, const tk_msg *m, size_t n, const char *fmt) {
    for (size_t i = 0; i < n && !b->rc; i++) {
        if (!is(&m[i], "system") && !is(&m[i], "user") && !is(&m[i], "assistant")) {
            tk__pb_bad_role(b, fmt, m[i].role ? m[i].role : "(none)");
            return;
        }
        tk__pb_special(b, "<|im_start|>");
        tk__pb_txt(b, m[i].role);
        tk__pb_txt(b, "\n");
        tk__pb_txt(b, is(&m[i], "assistant") ? strip_think(content(&m[i])) : content(&m[i]));
        tk__pb_special(b, "<|im_end|>");
        tk__pb_txt(b, "\n");
    }
}

static void render_chatml(pb *b, const tk_msg *m, size_t n, const tk_chat_opts *o) {
    chatml_turns(b, m, n, "chatml");
    if (o->add_generation_prompt) {
        tk__pb_special(b, "<|im_start|>");
        tk__pb_txt(b, "assistant\n");
    }
}

/* Qwen3's tools (Hermes style): declared in the system message, one JSON line each; calls as
 * <tool_call> JSON; results as <tool_response> blocks of a user turn. */
static void qwen3_tools(pb *b, const tk_msg *m, size_t n, const char *tools) {
    json_t *list = json_loads(tools, JSON_DECODE_ANY, NULL);
    if (!json_is_array(list)) {
        json_decref(list);
        b->rc = mw_errf(b->err, "qwen3: the tools are not a JSON list");
        return;
    }
    tk__pb_special(b, "<|im_start|>");
    tk__pb_txt(b, "system\n");
    if (n > 0 && is(&m[0], "system")) {
        tk__pb_txt(b, content(&m[0]));
        tk__pb_txt(b, "\n\n");
    }
    tk__pb_txt(b, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                  "You are provided with function signatures within <tools></tools> XML tags:\n"
                  "<tools>");
    size_t i;
    json_t *t;
    json_array_foreach(list, i, t) {
        char *js = json_dumps(t, JSON_ENCODE_ANY); /* Python's separators: ", " and ": " */
        tk__pb_txt(b, "\n");
        tk__pb_txt(b, js);
        free(js);
    }
    json_decref(list);
    tk__pb_txt(b, "\n</tools>\n\nFor each function call, return a json object with function name "
                  "and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
                  "<function-name>, \"arguments\": <args-json-object>}\n</tool_call>");
    tk__pb_special(b, "<|im_end|>");
    tk__pb_txt(b, "\n");
}

static void qwen3_calls(pb *b, const tk_msg *m) {
    for (size_t k = 0; k < m->n_tool_calls; k++) {
        const tk_tool_call *c = &m->tool_calls[k];
        if (k > 0 || (m->content && *m->content)) tk__pb_txt(b, "\n");
        tk__pb_txt(b, "<tool_call>\n{\"name\": \"");
        tk__pb_txt(b, c->name);
        tk__pb_txt(b, "\", \"arguments\": ");
        tk__pb_txt(b, c->arguments ? c->arguments : "{}");
        tk__pb_txt(b, "}\n</tool_call>");
    }
}

static void render_qwen3(pb *b, const tk_msg *m, size_t n, const tk_chat_opts *o) {
    size_t i = 0;
    if (o->tools) {
        qwen3_tools(b, m, n, o->tools);
        if (n > 0 && is(&m[0], "system")) i = 1;
    }
    for (; i < n && !b->rc; i++) {
        if (is(&m[i], "tool")) {
            if (i == 0 || !is(&m[i - 1], "tool")) {
                tk__pb_special(b, "<|im_start|>");
                tk__pb_txt(b, "user");
            }
            tk__pb_txt(b, "\n<tool_response>\n");
            tk__pb_txt(b, content(&m[i]));
            tk__pb_txt(b, "\n</tool_response>");
            if (i + 1 == n || !is(&m[i + 1], "tool")) {
                tk__pb_special(b, "<|im_end|>");
                tk__pb_txt(b, "\n");
            }
            continue;
        }
        if (!is(&m[i], "system") && !is(&m[i], "user") && !is(&m[i], "assistant")) {
            tk__pb_bad_role(b, "qwen3", m[i].role ? m[i].role : "(none)");
            return;
        }
        tk__pb_special(b, "<|im_start|>");
        tk__pb_txt(b, m[i].role);
        tk__pb_txt(b, "\n");
        tk__pb_txt(b, is(&m[i], "assistant") ? strip_think(content(&m[i])) : content(&m[i]));
        if (is(&m[i], "assistant")) qwen3_calls(b, &m[i]);
        tk__pb_special(b, "<|im_end|>");
        tk__pb_txt(b, "\n");
    }
    if (o->add_generation_prompt) {
        tk__pb_special(b, "<|im_start|>");
        tk__pb_txt(b, "assistant\n");
        if (o->thinking == 0) tk__pb_txt(b, "<think>\n\n</think>\n\n");
    }
}

/* ---- DeepSeek-V3 / R1 ---------------------------------------------------------------------- */

static void deepseek(pb *b, const tk_msg *m, size_t n, const tk_chat_opts *o, bool r1) {
    const char *fmt = r1 ? "deepseek-r1" : "deepseek-v3";
    if (b->t->bos >= 0) {
        tk__pb_flush(b);
        if (!b->rc && tk_ids_push(b->out, b->t->bos)) b->rc = mw_errf(b->err, "out of memory");
    }
    bool first = true; /* system prompts come first, joined by blank lines */
    for (size_t i = 0; i < n; i++)
        if (is(&m[i], "system")) {
            if (!first) tk__pb_txt(b, "\n\n");
            tk__pb_txt(b, content(&m[i]));
            first = false;
        }
    for (size_t i = 0; i < n && !b->rc; i++) {
        if (is(&m[i], "system")) continue;
        if (is(&m[i], "user")) {
            tk__pb_special(b, "<｜User｜>");
            tk__pb_txt(b, content(&m[i]));
        } else if (is(&m[i], "assistant")) {
            tk__pb_special(b, "<｜Assistant｜>");
            tk__pb_txt(b, strip_think(content(&m[i])));
            tk__pb_special(b, "<｜end▁of▁sentence｜>");
        } else {
            tk__pb_bad_role(b, fmt, m[i].role ? m[i].role : "(none)");
        }
    }
    if (o->add_generation_prompt) {
        tk__pb_special(b, "<｜Assistant｜>");
        if (r1) tk__pb_txt(b, o->answer_open ? "<think>\n\n</think>\n\n" : "<think>\n");
    }
}

static void render_deepseek_v3(pb *b, const tk_msg *m, size_t n, const tk_chat_opts *o) {
    deepseek(b, m, n, o, false);
}
static void render_deepseek_r1(pb *b, const tk_msg *m, size_t n, const tk_chat_opts *o) {
    deepseek(b, m, n, o, true);
}

/* ---- Kimi-K2 ------------------------------------------------------------------------------- */

static void render_kimi_k2(pb *b, const tk_msg *m, size_t n, const tk_chat_opts *o) {
    if (n == 0 || !is(&m[0], "system")) {
        tk__pb_special(b, "<|im_system|>");
        tk__pb_txt(b, "system");
        tk__pb_special(b, "<|im_middle|>");
        tk__pb_txt(b, "You are Kimi, an AI assistant created by Moonshot AI.");
        tk__pb_special(b, "<|im_end|>");
    }
    for (size_t i = 0; i < n && !b->rc; i++) {
        if (is(&m[i], "system"))
            tk__pb_special(b, "<|im_system|>");
        else if (is(&m[i], "user"))
            tk__pb_special(b, "<|im_user|>");
        else if (is(&m[i], "assistant"))
            tk__pb_special(b, "<|im_assistant|>");
        else {
            tk__pb_bad_role(b, "kimi-k2", m[i].role ? m[i].role : "(none)");
            break;
        }
        tk__pb_txt(b, m[i].role);
        tk__pb_special(b, "<|im_middle|>");
        tk__pb_txt(b, content(&m[i]));
        tk__pb_special(b, "<|im_end|>");
    }
    if (o->add_generation_prompt) {
        tk__pb_special(b, "<|im_assistant|>");
        tk__pb_txt(b, "assistant");
        tk__pb_special(b, "<|im_middle|>");
    }
}

/* ---- the table ----------------------------------------------------------------------------- */

typedef enum parse_kind { PARSE_PLAIN, PARSE_HARMONY, PARSE_THINK, PARSE_K3 } parse_kind;

typedef struct chat_format {
    const char *name;
    void (*render)(pb *b, const tk_msg *m, size_t n, const tk_chat_opts *o);
    const char *needs[8]; /* special tokens it writes */
    const char *stops[4]; /* token texts that end the assistant's turn */
    const char *family;   /* the family whose models use it when their file names no template */
    parse_kind parse;
    /* whether a tokenizer.chat_template text is this format (checked in table order) */
    const char *marks[3];
    /* the chat_template_kwargs boolean the family's own template reads to think or not; NULL:
     * its template has no switch */
    const char *thinking_kwarg;
} chat_format;

static const chat_format formats[] = {
    {"harmony",
     render_harmony,
     {"<|start|>", "<|message|>", "<|end|>", "<|channel|>"},
     {"<|return|>", "<|call|>"},
     "gpt-oss",
     PARSE_HARMONY,
     {"<|channel|>", "<|message|>"},
     NULL},
    {"kimi-k3",
     tk__render_kimi_k3,
     {"<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"},
     {"<|end_of_msg|>"},
     "kimi-k3",
     PARSE_K3,
     {"<|open|>", "<|end_of_msg|>"},
     "thinking"},
    {"kimi-k2",
     render_kimi_k2,
     {"<|im_system|>", "<|im_user|>", "<|im_assistant|>", "<|im_middle|>", "<|im_end|>"},
     {"<|im_end|>", "[EOS]"},
     "kimi-linear",
     PARSE_PLAIN,
     {"<|im_middle|>"},
     NULL},
    {"qwen3",
     render_qwen3,
     {"<|im_start|>", "<|im_end|>"},
     {"<|im_end|>", "<|endoftext|>"},
     "qwen3moe",
     PARSE_THINK,
     {"<|im_start|>", "enable_thinking"},
     "enable_thinking"},
    {"chatml",
     render_chatml,
     {"<|im_start|>", "<|im_end|>"},
     {"<|im_end|>", "<|endoftext|>"},
     NULL,
     PARSE_PLAIN,
     {"<|im_start|>"},
     NULL},
    {"deepseek-r1",
     render_deepseek_r1,
     {"<｜User｜>", "<｜Assistant｜>", "<｜end▁of▁sentence｜>"},
     {"<｜end▁of▁sentence｜>"},
     NULL,
     PARSE_THINK,
     {"<｜Assistant｜>", "<think>"},
     NULL},
    {"deepseek-v3",
     render_deepseek_v3,
     {"<｜User｜>", "<｜Assistant｜>", "<｜end▁of▁sentence｜>"},
     {"<｜end▁of▁sentence｜>"},
     "deepseek2",
     PARSE_PLAIN,
     {"<｜Assistant｜>"},
     NULL},
};
#define N_FORMATS (sizeof formats / sizeof *formats)

struct tk_chat {
    const tk_tokenizer *t;
    const chat_format *f;
    int32_t stop[4];
    char missing[256];
};

const char *tk_chat_known(void) {
    return "harmony, chatml, qwen3, deepseek-v3, deepseek-r1, kimi-k2, kimi-k3";
}
const char *tk_chat_name(const tk_chat *c) {
    return c->f->name;
}
const char *tk_chat_thinking_kwarg(const tk_chat *c) {
    return c->f->thinking_kwarg;
}
const char *tk_chat_missing(const tk_chat *c) {
    return c->missing;
}

static bool has_all(const tk_tokenizer *t, const chat_format *f) {
    for (size_t i = 0; i < 8 && f->needs[i]; i++)
        if (tk_find(t, f->needs[i], strlen(f->needs[i])) < 0) return false;
    return true;
}

static const chat_format *recognise(const char *tmpl) {
    for (size_t i = 0; i < N_FORMATS; i++) {
        bool all = true;
        for (size_t k = 0; k < 3 && formats[i].marks[k]; k++)
            all = all && strstr(tmpl, formats[i].marks[k]);
        if (all) return &formats[i];
    }
    return NULL;
}

int tk_chat_open(const tk_tokenizer *t, const char *name, tk_chat **out, mw_err *err) {
    *out = NULL;
    const chat_format *f = NULL;
    const char *tmpl = tk_chat_template_text(t);
    if (name) {
        for (size_t i = 0; i < N_FORMATS && !f; i++)
            if (!strcmp(formats[i].name, name)) f = &formats[i];
        if (!f)
            return mw_errf(err, "unknown chat template '%s' (known: %s)", name, tk_chat_known());
    } else if (tmpl) {
        if (!(f = recognise(tmpl))) {
            char head[48];
            size_t k = 0;
            for (const char *p = tmpl; *p && k + 1 < sizeof head; p++)
                head[k++] = *p == '\n' ? ' ' : *p;
            head[k] = '\0';
            return mw_errf(
                err,
                "the model's chat template is not one moewire knows (it starts '%s...'); "
                "choose one with --chat-template NAME (known: %s)",
                head, tk_chat_known());
        }
    } else {
        for (size_t i = 0; i < N_FORMATS && !f; i++)
            if (formats[i].family && !strcmp(formats[i].family, tk_arch(t)) &&
                has_all(t, &formats[i]))
                f = &formats[i];
        if (!f)
            return mw_errf(err,
                           "the model has no chat template (tokenizer.chat_template) nor its "
                           "family's chat tokens; choose one with --chat-template NAME (known: %s)",
                           tk_chat_known());
    }
    tk_chat *c = calloc(1, sizeof *c);
    if (!c) return mw_errf(err, "out of memory");
    c->t = t;
    c->f = f;
    for (size_t i = 0; i < 4; i++)
        c->stop[i] = f->stops[i] ? tk_find(t, f->stops[i], strlen(f->stops[i])) : -1;
    for (size_t i = 0; i < 8 && f->needs[i]; i++)
        if (tk_find(t, f->needs[i], strlen(f->needs[i])) < 0) {
            size_t l = strlen(c->missing);
            snprintf(c->missing + l, sizeof c->missing - l, "%s%s", l ? ", " : "", f->needs[i]);
        }
    *out = c;
    return 0;
}

void tk_chat_free(tk_chat *c) {
    free(c);
}

int tk_chat_render(const tk_chat *c, const tk_msg *msgs, size_t n, const tk_chat_opts *o,
                   tk_ids *out, mw_err *err) {
    const tk_chat_opts def = {.add_generation_prompt = true, .thinking = -1};
    tk_chat_opts eff = o ? *o : def;
    if (eff.answer_open) eff.thinking = 0; /* the answer first: no reasoning block */
    pb b = {.t = c->t, .out = out, .err = err};
    c->f->render(&b, msgs, n, &eff);
    tk__pb_flush(&b);
    tk_text_free(&b.text);
    return b.rc ? -1 : 0;
}

bool tk_chat_is_stop(const tk_chat *c, int32_t id) {
    for (size_t i = 0; i < 4; i++)
        if (c->stop[i] >= 0 && c->stop[i] == id) return true;
    /* harmony ends a message with <|end|> and goes on: only <|return|> / <|call|> stop it */
    if (c->f->parse == PARSE_HARMONY && tk_find(c->t, "<|end|>", 7) == id) return false;
    return tk_is_eog(c->t, id);
}

/* for tk_chat_parse.c */
int tk__chat_parse_kind(const tk_chat *c);
const tk_tokenizer *tk__chat_tokenizer(const tk_chat *c);
int tk__chat_parse_kind(const tk_chat *c) {
    return (int)c->f->parse;
}
const tk_tokenizer *tk__chat_tokenizer(const tk_chat *c) {
    return c->t;
}
