#!/usr/bin/env python3
"""tests/jinja_random.py — generates tests/fixtures/templates/engine_random.json: random Jinja
expressions over a fixed context (operators, filters, tests, methods, conditionals) with what
python3-jinja2 renders for each in transformers' environment (null: it fails). test_jj renders
them with moewire's engine. usage: jinja_random.py SEED COUNT (writes rand.json here)."""
import json, random, sys, importlib.util
import os
spec = importlib.util.spec_from_file_location("ref", os.path.join(os.path.dirname(os.path.abspath(__file__)), "jinja_ref.py")); ref = importlib.util.module_from_spec(spec); spec.loader.exec_module(ref)
env = ref.environment()
random.seed(int(sys.argv[1]))
CTX = {"s": " Hello, World! ", "u": "ñandú ÉCOLE straße Ωμέγα", "n": 7, "m": -3, "f": 2.5, "g": -0.125, "z": 0, "t": True, "no": None,
       "l": [3, 1, 2], "ls": ["b", "A", "c", "a"], "e": [], "d": {"x": 1, "y": "two", "z": [1, 2]},
       "msgs": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f", "arguments": {"k": "v"}}}]}, {"role": "tool", "content": "42"}]}
atoms = ["s", "u", "n", "m", "f", "g", "z", "t", "no", "l", "ls", "e", "d", "msgs", "undef", "'str'", "''", "0", "1", "-1", "2.0", "1e3", "[1, 'a']", "(1, 2)", "{'a': 1}", "true", "none", "msgs[0]", "d.x", "d['y']", "msgs[1].tool_calls[0].function", "l[0]", "s[1:5]", "u[::-1]", "ls[-1]"]
binops = ["+", "-", "*", "/", "//", "%", "**", "~", "==", "!=", "<", ">", "<=", ">=", "in", "not in", "and", "or"]
filters = ["length", "count", "upper", "lower", "title", "capitalize", "trim", "string", "int", "float", "abs", "first", "last", "list", "sort", "unique|list", "reverse|list", "join", "join(', ')", "tojson", "tojson(indent=2)", "default('D')", "default('D', true)", "items|list", "dictsort", "sum", "min", "max", "round", "round(1)", "e", "safe", "indent(2)", "center(20)", "wordcount", "replace('l', 'L')", "map('string')|list", "select|list", "reject|list", "map('upper')|join", "selectattr('role')|list", "map(attribute='role')|list", "batch(2)|list", "first|string", "string|length", "list|length"]
tests = ["defined", "undefined", "none", "string", "number", "integer", "float", "mapping", "iterable", "sequence", "true", "false", "boolean", "odd", "even", "divisibleby 2", "lower", "upper", "callable", "eq 7", "in l", "sameas none"]
methods = ["strip()", "lstrip()", "rstrip()", "split()", "split(',')", "split(' ', 1)", "rsplit(' ', 1)", "upper()", "lower()", "title()", "capitalize()", "startswith('H')", "endswith(('!', ' '))", "replace('o', '0')", "find('o')", "rfind('o')", "count('l')", "isdigit()", "isalpha()", "isspace()", "isupper()", "islower()", "splitlines()", "items()", "keys()", "values()", "get('x')", "get('q', 5)", "index(1)", "format(1, 2)", "strip('! ')", "join(['a','b'])"]
def expr(depth=0):
    r = random.random()
    if depth > 2 or r < 0.3: return random.choice(atoms)
    if r < 0.5: return "(%s %s %s)" % (expr(depth+1), random.choice(binops), expr(depth+1))
    if r < 0.65: return "%s|%s" % (expr(depth+1), random.choice(filters))
    if r < 0.75: return "(%s is %s%s)" % (expr(depth+1), random.choice(["", "not "]), random.choice(tests))
    if r < 0.88: return "%s.%s" % (random.choice(atoms), random.choice(methods))
    if r < 0.94: return "(%s if %s else %s)" % (expr(depth+1), expr(depth+1), expr(depth+1))
    return "(not %s)" % expr(depth+1)
out = []
for i in range(int(sys.argv[2])):
    t = "{{ %s }}" % expr()
    try:
        import copy
        v = env.from_string(t).render(**copy.deepcopy(CTX))
        if "object at 0x" in v or "generator object" in v or "<built-in" in v or "<bound" in v: continue
        out.append({"t": t, "out": v})
    except Exception as ex:
        out.append({"t": t, "out": None})
json.dump({"ctx": CTX, "cases": out}, open("rand.json", "w"), ensure_ascii=False)
print(len(out), sum(c["out"] is None for c in out))
