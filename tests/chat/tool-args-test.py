#!/usr/bin/python3
"""Tool-call arguments as each template expects them, against the reference.

usage: tool-args-test.py LMPIPE RENDER_TEMPLATE.py TEMPLATES_DIR

For every shared template x context, `lmpipe template --tool-args auto`
(lib/chat/args.c: the template is probed, then arguments are given as
objects where it takes them, and reasoning_content as "thinking" where it
reads that) must render what Hugging Face's rendering (render_template.py)
renders from the context converted the way transformers' documentation asks
for: arguments json.loads'ed into dicts for the templates listed in OBJECTS,
left as OpenAI's strings for the others.  Both the same bytes, or both fail.

The lists come from reading the templates: OBJECTS iterate or tojson the
arguments (|items, `is mapping`, |tojson), STRINGS concatenate them into
text and fail on a dict.  For Qwen3-Coder, Qwen3.5 and GLM-4.6, which fail on
OpenAI's string form, the converted contexts with tool calls must render.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chatref import convert, load_reference  # noqa: E402

OBJECTS = {
    "GLM-4.6", "Hermes-3-Llama-3.1-8B-tool_use", "Kimi-K2-Instruct", "Llama-3.1-8B-Instruct",
    "Llama-3.2-3B-Instruct", "Mistral-Nemo-Instruct-2407", "Qwen2.5-7B-Instruct", "Qwen3-0.6B", "Qwen3-Coder",
    "Qwen3.5-4B", "c4ai-command-r7b-12-2024-tool_use", "gemma-4-31B-it", "gpt-oss-120b",
}
# these never write a call's arguments, so either form renders the same
EITHER = {"Phi-3.5-mini-instruct", "SmolLM3-3B", "gemma-3-it", "granite-3.3-2b-instruct"}
STRINGS = {"DeepSeek-R1-Distill-Qwen-32B", "functionary-medium-v3.2", "llama-3-firefunction-v2"}
THINKING = {"gpt-oss-120b"}  # reads an assistant turn's reasoning from message.thinking
MUST_RENDER = {("Qwen3-Coder", "04"), ("Qwen3-Coder", "05"), ("Qwen3.5-4B", "04"), ("Qwen3.5-4B", "05"),
               ("GLM-4.6", "04"), ("GLM-4.6", "05")}


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    lmpipe, ref, tdir = sys.argv[1:4]
    REF = load_reference(ref)
    fails, n, same, both_fail = [], 0, 0, 0
    templates = sorted(glob.glob(os.path.join(tdir, "*.jinja")))
    contexts = sorted(glob.glob(os.path.join(tdir, "contexts", "*.json")))
    names = {os.path.basename(t)[:-6] for t in templates}
    if names != OBJECTS | EITHER | STRINGS:
        fails.append("the shared templates are not the ones listed: %s" % sorted(names ^ (OBJECTS | EITHER | STRINGS)))
    with tempfile.TemporaryDirectory() as tmp:
        for t in templates:
            tname = os.path.basename(t)[:-6]
            for c in contexts:
                cid = os.path.basename(c)[:2]
                name = "%s x %s" % (tname, os.path.basename(c))
                with open(c) as f:
                    ctx = json.load(f)
                conv = os.path.join(tmp, "ctx.json")
                with open(conv, "w") as f:
                    json.dump(convert(ctx, tname in OBJECTS | EITHER, tname in THINKING), f)
                rrc, rout, rerr = REF.run(t, conv)
                p = subprocess.run([lmpipe, "template", "--template", t, "--context", c, "--tool-args", "auto"],
                                   capture_output=True, timeout=60)
                n += 1
                if (tname, cid) in MUST_RENDER and rrc != 0:
                    fails.append("%s: the reference fails on converted arguments: %s" % (name, rerr.strip()))
                if p.returncode != rrc:
                    fails.append("%s: exit %s (reference %s)\n  ours: %s\n  reference: %s" % (
                        name, p.returncode, rrc, p.stderr.decode(errors="replace").strip()[:300], rerr.strip()[:300]))
                elif rrc == 0 and p.stdout != rout:
                    i = 0
                    while i < min(len(p.stdout), len(rout)) and p.stdout[i] == rout[i]:
                        i += 1
                    fails.append("%s: differs at byte %d\n  ours: %r\n  reference: %r" % (
                        name, i, p.stdout[max(0, i - 40):i + 60], rout[max(0, i - 40):i + 60]))
                elif rrc == 0:
                    same += 1
                else:
                    both_fail += 1
    for f in fails:
        print("FAIL", f)
    print("%d renders with --tool-args auto: %d identical to the reference on converted contexts, "
          "%d failing in both, %d differ" % (n, same, both_fail, len(fails)))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
