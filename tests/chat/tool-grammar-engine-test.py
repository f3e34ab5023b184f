#!/usr/bin/python3
"""lib/chat's tool-call grammars compile and run in the grammar engine.

usage: tool-grammar-engine-test.py LMPIPE RENDER_TEMPLATE.py TEMPLATES_DIR VOCAB.gguf

For each template of tool-grammar-test.py, the GBNF that `lmpipe tool-calls
grammar` builds, with each argument rule given by its JSON Schema (`--rule
NAME=SCHEMA`), goes through `lmpipe grammar check` on the Llama 3
vocabulary: the turn Hugging Face's rendering gives for the conversation's
calls (render_template.py, the reference) must pass every token's mask and
end where end of generation is allowed, under tool_choice "required", the
function named, and "auto" from its trigger on.  The engine must refuse
the turn with a function's name changed, with its last byte cut, with an
argument that breaks its function's schema (an enum value or a number's
type: what a recognizer taking any JSON value lets through), and under the
other function named.
"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from chatref import load_reference  # noqa: E402

_spec = importlib.util.spec_from_file_location("tool_grammar", os.path.join(HERE, "tool-grammar-test.py"))
tg = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tg)

# an argument value of the shared conversations, and one its schema refuses
BREAK = {"04": ("2.5", "true"), "05": ("celsius", "kelvin")}


def check(lmpipe, vocab, tmp, lm_args, texts):
    """`lmpipe grammar check` of the grammar built by `lmpipe tool-calls
    grammar LM_ARGS` over texts: the grammar's JSON and one verdict per text"""
    p = subprocess.run([lmpipe, "tool-calls", "grammar"] + lm_args, capture_output=True, timeout=60)
    if p.returncode:
        raise RuntimeError(p.stderr.decode())
    g = json.loads(p.stdout)
    gpath = os.path.join(tmp, "g.gbnf")
    with open(gpath, "w") as f:
        f.write(g["gbnf"])
    cmd = [lmpipe, "grammar", "check", "--vocab", vocab, "--gbnf", gpath]
    for i, r in enumerate(g["refs"]):
        sp = os.path.join(tmp, "rule-%d.json" % i)
        with open(sp, "w") as f:
            json.dump(r["schema"], f)
        cmd += ["--rule", "%s=%s" % (r["rule"], sp)]
    for i, t in enumerate(texts):
        tp = os.path.join(tmp, "text-%d.txt" % i)
        with open(tp, "w") as f:
            f.write(t)
        cmd += ["--text", tp]
    p = subprocess.run(cmd, capture_output=True, timeout=300)
    if p.returncode:
        raise RuntimeError("lmpipe grammar check: %s" % p.stderr.decode())
    line = json.loads(p.stdout)
    if not line["compiled"]:
        return g, line["error"], None
    return g, None, [t["accepted"] for t in line["texts"]]


def main():
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    lmpipe, ref, tdir, vocab = sys.argv[1:5]
    REF = load_reference(ref)
    fails, checked = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for tname, (cid, n_calls, objects) in sorted(tg.CASES.items()):
            t, cpath, ctx, turn, out, prompt = tg.turn_text(REF, tdir, tname, cid, objects, tmp)
            name = "%s x %s" % (tname, cid)
            checked += 1
            extra = ["--prompt", prompt] + ([] if n_calls > 1 else ["--no-parallel"])
            base = ["--template", t, "--tools", cpath]
            first = turn["tool_calls"][0]["function"]["name"]
            other = next(tl["function"]["name"] for tl in ctx["tools"] if tl["function"]["name"] != first)
            old, new = BREAK[cid]
            if old not in out:
                fails.append("%s: the turn has no %r to break: %r" % (name, old, out))
                continue
            texts = [out, out.replace(first, first + "x", 1), out.rstrip()[:-1], out.replace(old, new, 1)]
            g, err, got = check(lmpipe, vocab, tmp, base + ["--tool-choice", '"required"'] + extra, texts)
            if err:
                fails.append("%s: the required grammar does not compile: %s" % (name, err))
                continue
            want = [True, False, False, False]
            for what, gv, wv in zip(["the turn", "a renamed function", "a cut call", "a broken argument"],
                                    got, want):
                if gv != wv:
                    fails.append("%s: required grammar %s %r" % (name, "refuses" if wv else "takes", what))
            for fn, w in ((first, True), (other, False)):
                choice = json.dumps({"type": "function", "function": {"name": fn}})
                _, err, got = check(lmpipe, vocab, tmp, base + ["--tool-choice", choice] + extra, [out])
                if err or got[0] != w:
                    fails.append("%s: the grammar naming %s %s the turn%s" %
                                 (name, fn, "refuses" if w else "takes", ": " + err if err else ""))
            ga, err, _ = check(lmpipe, vocab, tmp, base + ["--tool-choice", '"auto"'] + extra, [])
            if tname.startswith("functionary"):
                lazy = ">>>" + out  # the prompt's ">>>" begins the first call
            else:
                lazy = out[out.find(ga["trigger"]):] if ga["trigger"] and ga["trigger"] in out else None
            if lazy is None or not ga["lazy"]:
                fails.append("%s: not lazy, or no trigger %r in the turn" % (name, ga["trigger"]))
                continue
            _, err, got = check(lmpipe, vocab, tmp, base + ["--tool-choice", '"auto"'] + extra, [lazy])
            if err or not got[0]:
                fails.append("%s: the lazy grammar refuses %r%s" % (name, lazy, ": " + err if err else ""))
    for f in fails:
        print("FAIL", f)
    print("%d templates' tool-call grammars through the grammar engine (required, named, lazy; "
          "renamed, cut and schema-breaking turns refused); %d failures" % (checked, len(fails)))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
