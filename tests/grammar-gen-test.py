#!/usr/bin/env python3
"""Soundness against the reference: random outputs taken through the masks
of MaskBench schemas (a fixed subset of the shared half) and of
sampler-svc/grammar/testdata/schema-cases.json, each complete one validated
with Python's jsonschema (format checking on) under the drafts MaskBench
checked it with: the one $schema names, else draft 7 and 2020-12 both.

    grammar-gen-test.py GRAMMAR_GEN SHARED_DIR BUILD_DIR CASES.json [FILES] [PER]

Exit 77 without the jsonschema module."""
import hashlib
import json
import os
import subprocess
import sys
import tarfile

try:
    import jsonschema
except ImportError:
    print("python3-jsonschema is not installed", file=sys.stderr)
    sys.exit(77)


def validators(schema):
    if isinstance(schema, dict) and isinstance(schema.get("$schema"), str):
        classes = [jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)]
    else:
        classes = [jsonschema.Draft7Validator, jsonschema.Draft202012Validator]
    return [c(schema, format_checker=c.FORMAT_CHECKER) for c in classes]


def main():
    gen, shared, build, cases = sys.argv[1:5]
    nfiles = int(sys.argv[5]) if len(sys.argv) > 5 else 60
    per = int(sys.argv[6]) if len(sys.argv) > 6 else 8
    tar = os.path.join(shared, "maskbench", "maskbench.tar.xz")
    folder = os.path.join(build, "maskbench")
    if not os.path.exists(os.path.join(folder, ".extracted")):
        with tarfile.open(tar) as t:
            t.extractall(build)
        open(os.path.join(folder, ".extracted"), "w").close()
    names = sorted((n for n in os.listdir(folder) if n.endswith(".json")),
                   key=lambda n: hashlib.sha256(("gen" + n).encode()).hexdigest())
    schemas = [(n, json.load(open(os.path.join(folder, n)))["schema"]) for n in names[:nfiles]]
    schemas += [(c["name"], c["schema"]) for c in json.load(open(cases))]
    vocab = os.path.join(shared, "vocab", "ggml-vocab-llama3.gguf")
    work = os.path.join(build, "grammar-gen")
    os.makedirs(work, exist_ok=True)
    bad = done = total = refused = 0
    for i, (name, schema) in enumerate(schemas):
        path = os.path.join(work, "schema.json")
        with open(path, "w") as f:
            json.dump(schema, f)
        out = subprocess.run([gen, vocab, path, str(per), str(i + 1)], capture_output=True, timeout=600)
        if out.returncode:
            print(f"{name}: grammar_gen failed: {out.stderr.decode(errors='replace')}")
            bad += 1
            continue
        vs = None
        for line in out.stdout.decode(errors="replace").split("\n"):
            if not line:
                continue
            r = json.loads(line)
            if r.get("refused"):
                refused += 1
                break
            total += 1
            if not r["done"]:
                continue
            done += 1
            try:
                value = json.loads(r["text"], parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
            except ValueError as e:
                print(f"{name}: not JSON ({e}): {r['text'][:200]!r}")
                bad += 1
                continue
            vs = vs or validators(schema)
            for v in vs:
                errs = list(v.iter_errors(value))
                if errs:
                    print(f"{name}: invalid under {type(v).__name__}: {errs[0].message[:200]}: {r['text'][:300]!r}")
                    bad += 1
                    break
    print(f"{len(schemas)} schemas ({refused} refused), {total} outputs, {done} complete, {bad} invalid")
    if done < total // 3:
        print("too few outputs completed to mean anything")
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
