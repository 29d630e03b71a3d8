#!/usr/bin/env python3
"""tests/jinja_random_ws.py — generates tests/fixtures/templates/engine_whitespace.json: random
nestings of for / if / else / set / raw / comments / output with every whitespace-control marker
({%- -%} {%+ +%} {{- -}} {#- -#}) and surrounding spaces and newlines, with what python3-jinja2
renders in transformers' environment (trim_blocks, lstrip_blocks). usage: SEED COUNT (writes
rand2.json here)."""
import json, random, sys, copy, importlib.util
import os
spec = importlib.util.spec_from_file_location("ref", os.path.join(os.path.dirname(os.path.abspath(__file__)), "jinja_ref.py")); ref = importlib.util.module_from_spec(spec); spec.loader.exec_module(ref)
env = ref.environment()
random.seed(int(sys.argv[1]))
CTX = {"msgs": [{"role": "system", "content": "S"}, {"role": "user", "content": "U1"}, {"role": "assistant", "content": "A1"}, {"role": "user", "content": "U2"}], "flag": True, "n": 3}
ws = ["", " ", "  ", "\n", " \n", "\n  ", "\t", "\n\n", " x ", "\n y\n"]
def tag(body):
    l = random.choice(["{%", "{%-", "{%+", "{%"]); r = random.choice(["%}", "-%}", "%}", "+%}"])
    return random.choice(ws) + l + " " + body + " " + r + random.choice(ws)
def out(e):
    return random.choice(ws) + random.choice(["{{", "{{-"]) + " " + e + " " + random.choice(["}}", "-}}"]) + random.choice(ws)
def comment():
    return random.choice(ws) + random.choice(["{#", "{#-"]) + " c " + random.choice(["#}", "-#}"]) + random.choice(ws)
def block(d=0):
    parts = []
    for _ in range(random.randint(1, 3)):
        r = random.random()
        if d < 2 and r < 0.25:
            parts.append(tag("for m in msgs") + block(d+1) + tag("endfor"))
        elif d < 2 and r < 0.45:
            parts.append(tag("if flag") + block(d+1) + (tag("else") + block(d+1) if random.random() < 0.5 else "") + tag("endif"))
        elif r < 0.55:
            parts.append(tag("set x = n + 1"))
        elif r < 0.65:
            parts.append(comment())
        elif r < 0.72 and d < 2:
            parts.append(tag("raw") + random.choice(ws) + "{{ raw }}" + random.choice(ws) + tag("endraw"))
        else:
            parts.append(out(random.choice(["n", "'t'", "x", "m.role if m is defined else 'q'", "loop.index if loop is defined else 0"])))
    return "".join(parts)
cases = []
for i in range(int(sys.argv[2])):
    t = block() + random.choice(["", "\n", "\n\n", " "])
    try:
        v = env.from_string(t).render(**copy.deepcopy(CTX)); cases.append({"t": t, "out": v})
    except Exception:
        cases.append({"t": t, "out": None})
json.dump({"ctx": CTX, "cases": cases}, open("rand2.json", "w"), ensure_ascii=False)
print(len(cases), sum(c["out"] is None for c in cases))
