#!/usr/bin/env python3
"""MaskBench, a fixed subset of the shared half, through `lmpipe grammar
maskbench` (golden: the instances' valid flags come from Python's and Rust's
jsonschema validators).  Every compiled schema must accept each valid text
and reject each invalid one, compact and indented; a schema may be refused
only with a message naming what is not supported (docs/SAMPLER.md lists
the refusals); at least 90% of the subset must compile.

    grammar-maskbench-test.py LMPIPE SHARED_DIR BUILD_DIR [EVERY]

The tarball is extracted under BUILD_DIR (never into the source tree); the
subset is every EVERY-th file (default 10) in the order of the sha256 of
their names."""
import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile

# what a refusal may name: keywords (unsupported: "kw" ...) or a limit
REFUSABLE = re.compile(
    r'^(unsupported: "(not [A-Za-z$]+|oneOf|anyOf|uniqueItems|contains|dependencies|dependentSchemas|'
    r'unevaluatedProperties|unevaluatedItems|\$dynamicRef|\$recursiveRef|format|multipleOf|propertyNames|'
    r'patternProperties|minProperties|if|\$ref|\$schema|not|minimum/maximum)"'
    r'|"pattern" .*(not supported|too large|too complex)'
    r'|schema too complex|schema nested too deep|.*automaton too large|.*grammar too large'
    r'|schema: no value satisfies it)')


def extract(shared, build):
    tar = os.path.join(shared, "maskbench", "maskbench.tar.xz")
    dest = os.path.join(build, "maskbench")
    stamp = os.path.join(dest, ".extracted")
    if not os.path.exists(stamp):
        with tarfile.open(tar) as t:
            t.extractall(build)
        open(stamp, "w").close()
    return dest


def main():
    lmpipe, shared, build = sys.argv[1:4]
    every = int(sys.argv[4]) if len(sys.argv) > 4 else 10
    folder = extract(shared, build)
    names = sorted((n for n in os.listdir(folder) if n.endswith(".json")),
                   key=lambda n: hashlib.sha256(n.encode()).hexdigest())
    subset = [os.path.join(folder, n) for n in names[::every]]
    vocab = os.path.join(shared, "vocab", "ggml-vocab-llama3.gguf")
    out = subprocess.run([lmpipe, "grammar", "maskbench", "--vocab", vocab] + subset,
                         capture_output=True, text=True, timeout=1500)
    if out.returncode:
        print(out.stderr)
        return 1
    lines = [json.loads(l) for l in out.stdout.splitlines()]
    bad = 0
    compiled = 0
    for d in lines:
        name = os.path.basename(d["file"])
        if not d["compiled"]:
            if not REFUSABLE.match(d["error"] or ""):
                print(f"{name}: refused without naming an unsupported feature: {d['error']}")
                bad += 1
            continue
        compiled += 1
        for i, t in enumerate(d["texts"]):
            if t["accepted"] != t["valid"]:
                kind = "valid text refused" if t["valid"] else "INVALID TEXT ACCEPTED"
                print(f"{name}: test {i // 2} ({'indented' if i % 2 else 'compact'}): {kind} (token {t['rejected_at']})")
                bad += 1
    print(f"{len(lines)} files, {compiled} compiled, {bad} problems")
    if len(lines) != len(subset):
        print("not every file gave a line")
        return 1
    if compiled < 0.9 * len(lines):
        print("under 90% compiled")
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
