#!/usr/bin/env python3
"""The prompts of llama.cpp's goldens through the real `lmpipe tokenize`
(BOS/EOS as the model says, special tokens parsed): the IDs must equal each
case's prompt_ids.

usage: tokenize_golden_test.py LMPIPE SHARED_DIR"""
import json
import os
import subprocess
import sys


def main():
    lmpipe, shared = sys.argv[1], sys.argv[2]
    gdir = os.path.join(shared, "goldens")
    files = sorted(f for f in os.listdir(gdir) if f.endswith(".json"))
    n = failed = 0
    for f in files:
        g = json.load(open(os.path.join(gdir, f), encoding="utf-8"))
        model = os.path.join(shared, "models", g["model"])
        for c in g["cases"]:
            if "prompt" not in c:
                continue
            r = subprocess.run([lmpipe, "tokenize", "--model", model], input=c["prompt"].encode(),
                               capture_output=True, timeout=60)
            got = [int(x) for x in r.stdout.split()]
            n += 1
            if r.returncode or got != c["prompt_ids"]:
                failed += 1
                print(f"FAIL {f} {c['prompt']!r}: want {c['prompt_ids']} got {got} {r.stderr.decode()}")
    print(f"{n - failed}/{n} prompts tokenized as llama.cpp did")
    return 1 if failed or n == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
