"""What the chat tests share: the reference renderer, and a conversation
converted the way transformers' documentation asks (tool-call arguments as
dicts, a turn's reasoning as "thinking" for templates that read that)."""
import importlib.util
import json


def load_reference(path):
    """render_template.py, imported: its run(template, context) is the contract"""
    spec = importlib.util.spec_from_file_location("render_template", path)
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    return ref


def convert(ctx, objects, thinking=False):
    ctx = json.loads(json.dumps(ctx))
    for m in ctx["messages"]:
        for tc in m.get("tool_calls") or []:
            a = tc["function"].get("arguments")
            if objects and isinstance(a, str):
                try:
                    v = json.loads(a)
                except ValueError:
                    continue
                if isinstance(v, dict):
                    tc["function"]["arguments"] = v
        if thinking and isinstance(m.get("reasoning_content"), str) and "thinking" not in m:
            m["thinking"] = m["reasoning_content"]
    return ctx
