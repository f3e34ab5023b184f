#!/usr/bin/env python3
"""The expectations of testdata/schema-cases.json, checked against the
reference: Python's jsonschema with format checking, under the draft the
schema's $schema names, else draft 7 and 2020-12 both (as MaskBench).  Each
"valid" text must parse as JSON and validate; each "invalid" one must fail
to parse or fail to validate; each "stricter" one is valid, and the engine
refuses it on purpose (duplicate keys, lone surrogates: see docs/SAMPLER.md).
grammar_test then holds the engine to the same file.  Exit 77 (skipped) without the jsonschema module."""
import json
import sys

try:
    import jsonschema
except ImportError:
    print("python3-jsonschema is not installed", file=sys.stderr)
    sys.exit(77)


def valid(schema, text):
    try:
        value = json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    except ValueError:
        return False
    if isinstance(schema.get("$schema"), str):
        classes = [jsonschema.validators.validator_for(schema)]
    else:
        classes = [jsonschema.Draft7Validator, jsonschema.Draft202012Validator]
    return all(c(schema, format_checker=c.FORMAT_CHECKER).is_valid(value) for c in classes)


def main():
    cases = json.load(open(sys.argv[1], encoding="utf-8"))
    bad = 0
    for c in cases:
        for want, key in ((True, "valid"), (False, "invalid"), (True, "stricter")):
            for text in c.get(key, []):
                if valid(c["schema"], text) != want:
                    print(f"{c['name']}: {text!r} is listed as {key}, the validator disagrees")
                    bad += 1
    n = sum(len(c.get(k, [])) for c in cases for k in ("valid", "invalid", "stricter"))
    print(f"{n} texts, {bad} disagreements")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
