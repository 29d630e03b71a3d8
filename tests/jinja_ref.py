#!/usr/bin/env python3
"""tests/jinja_ref.py — the reference renderer for the Jinja corpus test: renders a chat
template the way transformers' apply_chat_template does (ImmutableSandboxedEnvironment with
trim_blocks, lstrip_blocks and the loopcontrols extension, its tojson override, raise_exception,
strftime_now, a {% generation %} tag) and writes the text to stdout exactly. Exit 1 with the
error on stderr when the template fails.

usage: jinja_ref.py TEMPLATE MESSAGES.json [--tools FILE] [--no-generation-prompt]
                    [--bos TEXT] [--eos TEXT] [--kwargs JSON]
       jinja_ref.py --corpus DIR OUT.json
The second form renders every DIR/*.jinja with every DIR/cases/*.json in each of the VARIANTS
below and writes {"TEMPLATE|CASE|VARIANT": text or null (an error)} to OUT.json, for
tests/integration/test_jinja_corpus.c, which renders the same with moewire's engine.
"""
import json
import sys
from datetime import datetime

import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class Generation(Extension):
    """transformers' AssistantTracker: {% generation %}...{% endgeneration %} renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


# name: (add_generation_prompt, with tools, extra variables); bos/eos are "<s>" and "</s>"
VARIANTS = {
    "gen": (True, False, {}),
    "tools": (True, True, {}),
    "nogen": (False, False, {"enable_thinking": False}),
}


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def corpus(d, out_path):
    import glob
    import os
    env = environment()
    with open(os.path.join(d, "tools.json"), encoding="utf-8") as f:
        tools = json.load(f)
    out = {}
    for t in sorted(glob.glob(os.path.join(d, "*.jinja"))):
        with open(t, encoding="utf-8", newline="") as f:
            source = f.read()
        try:
            tmpl = env.from_string(source)
        except Exception:
            tmpl = None
        for c in sorted(glob.glob(os.path.join(d, "cases", "*.json"))):
            with open(c, encoding="utf-8") as f:
                messages = json.load(f)
            for v, (gen, use_tools, extra) in VARIANTS.items():
                key = "%s|%s|%s" % (os.path.basename(t), os.path.basename(c), v)
                ctx = {"messages": messages, "tools": tools if use_tools else None,
                       "documents": None, "add_generation_prompt": gen,
                       "bos_token": "<s>", "eos_token": "</s>"}
                ctx.update(extra)
                try:
                    out[key] = tmpl.render(**ctx) if tmpl else None
                except Exception:
                    out[key] = None
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)
    return 0


def main(argv):
    if argv and argv[0] == "--corpus":
        return corpus(argv[1], argv[2])
    args = {"tools": None, "gen": True, "bos": None, "eos": None, "kwargs": {}}
    pos = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--no-generation-prompt":
            args["gen"] = False
        elif a in ("--tools", "--bos", "--eos", "--kwargs"):
            i += 1
            args[a[2:]] = argv[i]
        else:
            pos.append(a)
        i += 1
    with open(pos[0], encoding="utf-8", newline="") as f:
        source = f.read()
    with open(pos[1], encoding="utf-8") as f:
        messages = json.load(f)
    if isinstance(messages, dict):
        messages = messages["messages"]
    tools = None
    if args["tools"]:
        with open(args["tools"], encoding="utf-8") as f:
            tools = json.load(f)
    env = environment()
    ctx = {"messages": messages, "tools": tools, "documents": None,
           "add_generation_prompt": args["gen"]}
    if args["bos"] is not None:
        ctx["bos_token"] = args["bos"]
    if args["eos"] is not None:
        ctx["eos_token"] = args["eos"]
    if args["kwargs"]:
        ctx.update(json.loads(args["kwargs"]))
    try:
        out = env.from_string(source).render(**ctx)
    except Exception as e:  # the test only needs to know that it failed
        sys.stderr.write("%s: %s\n" % (type(e).__name__, e))
        return 1
    sys.stdout.buffer.write(out.encode("utf-8", "surrogatepass"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
