#!/usr/bin/python3
"""The grammar that forces tool calls matches what the model was trained to write.

usage: tool-grammar-test.py LMPIPE RENDER_TEMPLATE.py TEMPLATES_DIR

For each shared template that writes tool calls, Hugging Face's rendering
(render_template.py) of a shared conversation's tool-call turn, with the
arguments as the template takes them, is the text a model trained on it
writes for those calls.  The grammar `lmpipe tool-calls grammar` builds for
the template, the conversation's tools and tool_choice "required" must
match that text from its first byte to its last, with each function's
arguments rule standing for any JSON value (the grammar engine compiles the
schemas, not this test) and the XML-like formats' own rules for parameter
values; its free-text rules must take exactly the texts without their
closing marker (random texts); it must not match it with a function's name changed, with the
calls' closing marker cut, or (tool_choice naming the other function) at
all.  Under "auto" the lazy grammar must match the same text from its
trigger.  `lmpipe tool-calls parse` must give the turn's calls back.

The GBNF is matched by a small recognizer below (llama.cpp's dialect:
literals, classes, groups, | * + ? {m,n}, rule references).
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chatref import convert, load_reference  # noqa: E402

sys.setrecursionlimit(20000)

# template -> (context, calls it writes, the arguments as objects)
CASES = {
    "Hermes-3-Llama-3.1-8B-tool_use": ("05", 2, True),
    "Qwen2.5-7B-Instruct": ("05", 2, True),
    "Qwen3-0.6B": ("05", 2, True),
    "Qwen3-Coder": ("05", 2, True),
    "Qwen3.5-4B": ("05", 2, True),
    "GLM-4.6": ("05", 2, True),
    "Llama-3.1-8B-Instruct": ("04", 1, True),
    "Llama-3.2-3B-Instruct": ("04", 1, True),
    "Mistral-Nemo-Instruct-2407": ("05", 2, True),
    "gpt-oss-120b": ("05", 1, True),
    "DeepSeek-R1-Distill-Qwen-32B": ("04", 1, False),
    "Kimi-K2-Instruct": ("05", 2, True),
    "functionary-medium-v3.2": ("05", 2, False),
    "c4ai-command-r7b-12-2024-tool_use": ("05", 2, True),
    "llama-3-firefunction-v2": ("05", 2, False),
}
# what a turn's rendering ends with that is not the model's output (longest first)
ENDS = ["<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>",
        "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
        "<|im_end|>\n", "<|im_end|>", "<|eot_id|>", "</s>", "<｜end▁of▁sentence｜>", "<|END_OF_TURN_TOKEN|>"]

JSON_RULES = r'''
json-value ::= json-object | json-array | json-string | json-number | "true" | "false" | "null"
json-object ::= "{" jws ( json-string jws ":" jws json-value jws ( "," jws json-string jws ":" jws json-value jws )* )? "}"
json-array ::= "[" jws ( json-value jws ( "," jws json-value jws )* )? "]"
json-string ::= "\"" ( [^"\\] | "\\" ["\\/bfnrtu] )* "\""
json-number ::= "-"? [0-9]+ ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
jws ::= [ \t\n]*
'''

# ---- a GBNF recognizer -------------------------------------------------------------


class Gbnf:
    def __init__(self, text):
        self.rules = {}
        name = None
        for line in text.split("\n"):
            line = self._strip_comment(line)
            m = re.match(r"\s*([a-zA-Z0-9-]+)\s*::=(.*)$", line)
            if m:
                name = m.group(1)
                self.rules[name] = m.group(2)
            elif line.strip() and name:
                self.rules[name] += " " + line
        self.ast = {k: self._parse(v) for k, v in self.rules.items()}
        self.memo = {}

    @staticmethod
    def _strip_comment(line):
        out, q, i = [], None, 0
        while i < len(line):
            c = line[i]
            if q:
                out.append(c)
                if c == "\\" and i + 1 < len(line):
                    out.append(line[i + 1])
                    i += 1
                elif c == q:
                    q = None
            elif c in "\"[":
                q = '"' if c == '"' else "]"
                out.append(c)
            elif c == "#":
                break
            else:
                out.append(c)
            i += 1
        return "".join(out)

    def _parse(self, s):
        self.s, self.i = s, 0
        node = self._alt()
        self._ws()
        if self.i != len(self.s):
            raise ValueError("GBNF: junk at %r" % self.s[self.i:])
        return node

    def _ws(self):
        while self.i < len(self.s) and self.s[self.i] in " \t\n":
            self.i += 1

    def _alt(self):
        alts = [self._seq()]
        self._ws()
        while self.i < len(self.s) and self.s[self.i] == "|":
            self.i += 1
            alts.append(self._seq())
            self._ws()
        return ("alt", alts) if len(alts) > 1 else alts[0]

    def _seq(self):
        items = []
        while True:
            self._ws()
            if self.i >= len(self.s) or self.s[self.i] in "|)":
                break
            items.append(self._item())
        return ("seq", items)

    def _esc(self):
        c = self.s[self.i]
        self.i += 1
        if c != "\\":
            return c
        c = self.s[self.i]
        self.i += 1
        return {"n": "\n", "t": "\t", "r": "\r"}.get(c, c)

    def _item(self):
        c = self.s[self.i]
        if c == '"':
            self.i += 1
            lit = []
            while self.s[self.i] != '"':
                lit.append(self._esc())
            self.i += 1
            node = ("lit", "".join(lit))
        elif c == "[":
            self.i += 1
            neg = self.s[self.i] == "^"
            if neg:
                self.i += 1
            ranges = []
            while self.s[self.i] != "]":
                a = self._esc()
                b = a
                if self.s[self.i] == "-" and self.s[self.i + 1] != "]":
                    self.i += 1
                    b = self._esc()
                ranges.append((a, b))
            self.i += 1
            node = ("cls", neg, ranges)
        elif c == "(":
            self.i += 1
            node = self._alt()
            self._ws()
            assert self.s[self.i] == ")"
            self.i += 1
        elif c == ".":
            self.i += 1
            node = ("cls", True, [])
        else:
            m = re.match(r"[a-zA-Z0-9-]+", self.s[self.i:])
            self.i += len(m.group(0))
            node = ("ref", m.group(0))
        if self.i < len(self.s) and self.s[self.i] in "*+?":
            q = self.s[self.i]
            self.i += 1
            node = ("rep", node, {"*": 0, "+": 1, "?": 0}[q], 1 if q == "?" else None)
        elif self.i < len(self.s) and self.s[self.i] == "{":
            m = re.match(r"\{(\d+)(,(\d*))?\}", self.s[self.i:])
            self.i += len(m.group(0))
            lo = int(m.group(1))
            hi = lo if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
            node = ("rep", node, lo, hi)
        return node

    def ends(self, node, s, pos):
        """every end of a match of node at s[pos:]"""
        k = node[0]
        if k == "lit":
            return {pos + len(node[1])} if s.startswith(node[1], pos) else set()
        if k == "cls":
            if pos >= len(s):
                return set()
            c = s[pos]
            inside = any(a <= c <= b for a, b in node[2])
            return {pos + 1} if inside != node[1] else set()
        if k == "ref":
            key = (node[1], pos)
            if key not in self.memo:
                self.memo[key] = set()  # no left recursion in these grammars
                self.memo[key] = self.ends(self.ast[node[1]], s, pos)
            return self.memo[key]
        if k == "alt":
            out = set()
            for a in node[1]:
                out |= self.ends(a, s, pos)
            return out
        if k == "seq":
            cur = {pos}
            for it in node[1]:
                nxt = set()
                for p in cur:
                    nxt |= self.ends(it, s, p)
                cur = nxt
                if not cur:
                    break
            return cur
        if k == "rep":
            _, sub, lo, hi = node
            out = {pos} if lo == 0 else set()
            cur, n, seen = {pos}, 0, {pos}
            while cur and (hi is None or n < hi):
                nxt = set()
                for p in cur:
                    nxt |= self.ends(sub, s, p)
                n += 1
                if n >= lo:
                    out |= nxt
                cur = nxt - seen if hi is None else nxt
                seen |= nxt
            return out
        raise ValueError(k)

    def matches(self, s, rule="root"):
        self.memo = {}
        return len(s) in self.ends(("ref", rule), s, 0)


# ---- the test -------------------------------------------------------------------------


def grammar(lmpipe, template, tools, choice, extra=()):
    p = subprocess.run([lmpipe, "tool-calls", "grammar", "--template", template, "--tools", tools,
                        "--tool-choice", choice] + list(extra), capture_output=True, timeout=60)
    if p.returncode:
        raise RuntimeError(p.stderr.decode())
    g = json.loads(p.stdout)
    # the arguments' rules: any JSON value here
    text = g["gbnf"] + JSON_RULES + "".join("%s ::= json-value\n" % r["rule"] for r in g["refs"])
    return g, Gbnf(text)


def free_text_ok(gb, gbnf, rng):
    """the free-text rules (reasoning, XML-like string values) take exactly the
    texts that do not contain their closing marker (nor end in a part of it)"""
    bad = []
    for rule in ("reasoning", "xml-text"):
        m = re.search(rule + r' ("(?:[^"\\]|\\.)*")', gbnf)
        if rule not in gb.ast or not m:
            continue
        lit = json.loads(m.group(1))
        if rule == "xml-text":
            lit = lit.rstrip("\n") or lit
        pieces = [lit[:k] for k in range(1, len(lit) + 1)] + list(lit) + ["x", " ", "é"]
        for _ in range(400):
            s = "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 6)))
            want = lit not in s and not any(s.endswith(lit[:k]) for k in range(1, len(lit)))
            if gb.matches(s, rule) != want:
                bad.append("%s (%r) on %r: %s" % (rule, lit, s, not want))
                break
    return bad


def turn_text(REF, tdir, tname, cid, objects, tmp):
    """the template, context path, context, tool-call turn, the turn's text as
    the model writes it, and the path of the prompt before it"""
    t = os.path.join(tdir, tname + ".jinja")
    cpath = glob.glob(os.path.join(tdir, "contexts", cid + "-*.json"))[0]
    with open(cpath) as f:
        ctx = convert(json.load(f), objects)
    at = next(i for i, m in enumerate(ctx["messages"]) if m.get("tool_calls"))
    turn = ctx["messages"][at]

    def render(n, gen):
        c = dict(ctx, messages=ctx["messages"][:n], add_generation_prompt=gen)
        path = os.path.join(tmp, "ctx.json")
        with open(path, "w") as f:
            json.dump(c, f)
        rc, out, err = REF.run(t, path)
        if rc:
            raise RuntimeError("%s: %s" % (tname, err))
        return out.decode() if isinstance(out, bytes) else out

    before, with_turn = render(at, True), render(at + 1, False)
    common = 0
    while common < min(len(before), len(with_turn)) and before[common] == with_turn[common]:
        common += 1
    if common < len(before):  # not inside a marker both begin
        while common and with_turn[common - 1] not in ">\n ":
            common -= 1
    out = with_turn[common:]
    for e in ENDS:
        if out.endswith(e):
            out = out[:-len(e)]
    prompt = os.path.join(tmp, "prompt.txt")
    with open(prompt, "w") as f:
        f.write(with_turn[:common])
    return t, cpath, ctx, turn, out, prompt


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    lmpipe, ref, tdir = sys.argv[1:4]
    REF = load_reference(ref)
    fails, checked = [], 0
    import random
    rng = random.Random(30)
    with tempfile.TemporaryDirectory() as tmp:
        for tname, (cid, n_calls, objects) in sorted(CASES.items()):
            t, cpath, ctx, turn, out, prompt = turn_text(REF, tdir, tname, cid, objects, tmp)
            name = "%s x %s" % (tname, cid)
            checked += 1
            # the parser gives the calls back
            p = subprocess.run([lmpipe, "tool-calls", "parse", "--template", t, "--prompt", prompt, "--tools", cpath],
                               input=out.encode(), capture_output=True, timeout=60)
            msg = json.loads(p.stdout) if p.returncode == 0 else {}
            got = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in msg.get("tool_calls", [])]
            want = [(c["function"]["name"], c["function"]["arguments"] if isinstance(c["function"]["arguments"], dict)
                     else json.loads(c["function"]["arguments"])) for c in turn["tool_calls"][:n_calls]]
            if got != want:
                fails.append("%s: parsed %s, expected %s" % (name, got, want))
            # required: the whole turn
            extra = ["--prompt", prompt] + ([] if n_calls > 1 else ["--no-parallel"])
            g, gb = grammar(lmpipe, t, cpath, '"required"', extra)
            if not gb.matches(out):
                fails.append("%s: the required grammar does not match %r\n%s" % (name, out, g["gbnf"]))
            fails += ["%s: %s" % (name, b) for b in free_text_ok(gb, g["gbnf"], rng)]
            first = turn["tool_calls"][0]["function"]["name"]
            renamed = out.replace(first, first + "x", 1)
            if gb.matches(renamed):
                fails.append("%s: the grammar matches an unknown function: %r" % (name, renamed))
            cut = out.rstrip()[:-1]
            if gb.matches(cut):
                fails.append("%s: the grammar matches a cut call: %r" % (name, cut))
            # named: only that function
            other = next(tl["function"]["name"] for tl in ctx["tools"] if tl["function"]["name"] != first)
            _, gn = grammar(lmpipe, t, cpath, json.dumps({"type": "function", "function": {"name": first}}), extra)
            if not gn.matches(out):
                fails.append("%s: the grammar naming %s does not match" % (name, first))
            _, go = grammar(lmpipe, t, cpath, json.dumps({"type": "function", "function": {"name": other}}), extra)
            if go.matches(out):
                fails.append("%s: the grammar naming %s matches calls of %s" % (name, other, first))
            # auto: lazily, from the trigger
            ga, gl = grammar(lmpipe, t, cpath, '"auto"', extra)
            at_trigger = out.find(ga["trigger"]) if ga["trigger"] else -1
            if tname.startswith("functionary"):
                lazy_text = ">>>" + out  # the prompt's ">>>" begins the first call
            else:
                lazy_text = out[at_trigger:] if at_trigger >= 0 else None
            if not ga["lazy"] or lazy_text is None or not gl.matches(lazy_text):
                fails.append("%s: the lazy grammar (trigger %r) does not match %r" % (name, ga["trigger"], lazy_text))
    for f in fails:
        print("FAIL", f)
    print("%d template tool-call turns: parsed back, and matched by the required, named and lazy grammars; "
          "%d failures" % (checked, len(fails)))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
