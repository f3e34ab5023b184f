#!/usr/bin/python3
"""The chat template through the gateway, the coordinator and tokenizer-svc.

For each shared conversation, /apply-template on a model whose GGUF holds
Qwen2.5's template equals what ../shared/tools/render_template.py renders
(Hugging Face's rendering): tools, assistant tool calls with content null,
tool results and extra template variables (chat_template_kwargs) all reach
the template.  The gateway joins text parts into one string, so the
reference gets the same conversation with its parts joined.  Then: a chat
completion with tools runs; a template that raises, one given in the
request that does not parse, and a conversation the edge refuses are all
400s that name the problem.
usage: LMPIPE_HTTP=... LMPIPE_API_KEY=... chat-template-test.py SHARED_DIR
"""
import glob
import json
import os
import sys
import urllib.error
import urllib.request

SHARED = sys.argv[1]
sys.path.insert(0, os.path.join(SHARED, "tools"))
import render_template  # noqa: E402

BASE = os.environ["LMPIPE_HTTP"]
KEY = os.environ["LMPIPE_API_KEY"]
failures = 0


def check(cond, what, detail=None):
    global failures
    if cond:
        print("ok:", what)
    else:
        failures += 1
        print("FAIL:", what, "" if detail is None else ": " + str(detail)[:600])


def post(path, body):
    req = urllib.request.Request(BASE + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def joined(messages):
    out = []
    for m in messages:
        m = dict(m)
        if isinstance(m.get("content"), list):
            m["content"] = "".join(p["text"] for p in m["content"])
        # Qwen 2.5's template takes a tool call's arguments as a mapping
        # (it writes them with tojson): the server gives OpenAI's JSON string
        # to it as the object it holds (docs/TEMPLATES.md, "Arguments into
        # the template"), as vLLM and llama.cpp do
        if m.get("tool_calls"):
            m["tool_calls"] = [dict(c, function=dict(c["function"], arguments=json.loads(c["function"]["arguments"])))
                               if isinstance(c.get("function", {}).get("arguments"), str) else c
                               for c in m["tool_calls"]]
        out.append(m)
    return out


template = open(os.path.join(SHARED, "templates", "Qwen2.5-7B-Instruct.jinja")).read()
for path in sorted(glob.glob(os.path.join(SHARED, "templates", "contexts", "*.json"))):
    ctx = json.load(open(path))
    name = os.path.basename(path)
    kwargs = {k: v for k, v in ctx.items() if k not in ("messages", "tools", "add_generation_prompt",
                                                        "continue_final_message", "__now__", "bos_token", "eos_token")}
    body = {"messages": ctx["messages"]}
    if ctx.get("tools"):
        body["tools"] = ctx["tools"]
    if kwargs:
        body["chat_template_kwargs"] = kwargs
    st, got = post("/apply-template", body)
    # bos_token and eos_token are the model's: stories260K's <s> and </s>,
    # which the shared contexts use as their stand-ins too
    ref = dict(ctx, messages=joined(ctx["messages"]), add_generation_prompt=True, bos_token="<s>", eos_token="</s>")
    ref.pop("__now__", None)
    want = render_template.render(template, ref)
    check(st == 200 and got.get("prompt") == want, "%s: /apply-template renders as Hugging Face does" % name,
          {"status": st, "got": got.get("prompt", got)[:300] if isinstance(got.get("prompt", got), str) else got,
           "want": want[:300]})

# a chat completion whose conversation holds a tool call and its result
ctx = json.load(open(os.path.join(SHARED, "templates", "contexts", "04-tool-call-result.json")))
st, r = post("/v1/chat/completions", {"messages": ctx["messages"], "tools": ctx["tools"], "max_tokens": 4,
                                      "temperature": 0, "chat_template_kwargs": {"enable_thinking": False}})
check(st == 200 and r["choices"][0]["message"]["role"] == "assistant" and r["usage"]["completion_tokens"] == 4,
      "a chat completion with tools, a tool call and its result: 200", r)

# the template's own error, with its line, as a 400
nemo = open(os.path.join(SHARED, "templates", "Mistral-Nemo-Instruct-2407.jinja")).read()
two_users = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
for path, body in [("/v1/chat/completions", {"messages": two_users, "chat_template": nemo, "max_tokens": 2}),
                   ("/apply-template", {"messages": two_users, "chat_template": nemo})]:
    st, r = post(path, body)
    msg = json.dumps(r)
    check(st == 400 and "chat_template: line" in msg and "alternate user/assistant" in msg,
          "%s: a template that raises is a 400 with its message and line" % path, (st, r))
st, r = post("/v1/chat/completions", {"messages": two_users, "chat_template": "{% for m in messages %}", "max_tokens": 2})
check(st == 400 and "chat_template: line 1" in json.dumps(r), "a template that does not parse: 400 naming its line", (st, r))
st, r = post("/v1/chat/completions", {"messages": two_users, "chat_template": "chatmll", "max_tokens": 2})
check(st == 400 and "chatmll" in json.dumps(r), "an unknown family name: 400 naming it", (st, r))
for body, field in [({"messages": [{"role": "user", "content": "x", "nmae": "y"}]}, "messages[0].nmae"),
                    ({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]}, "tools[0].function"),
                    ({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"}, "tool_choice"),
                    ({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"messages": []}},
                     "chat_template_kwargs.messages")]:
    body["max_tokens"] = 2
    st, r = post("/v1/chat/completions", body)
    check(st == 400 and field in json.dumps(r), "refused at the edge, naming %s" % field, (st, r))

print("chat-template-test: %s" % ("all passed" if not failures else "%d failure(s)" % failures))
sys.exit(1 if failures else 0)
