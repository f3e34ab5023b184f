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


def formats(schema):
    """Every "format" value in a schema."""
    if isinstance(schema, dict):
        out = {schema["format"]} if isinstance(schema.get("format"), str) else set()
        for v in schema.values():
            out |= formats(v)
        return out
    if isinstance(schema, list):
        return set().union(*(formats(v) for v in schema)) if schema else set()
    return set()


def main():
    cases = json.load(open(sys.argv[1], encoding="utf-8"))
    # Older jsonschema releases (Debian 12's 4.10) check fewer formats
    # (date-time needs a module Debian does not ship): an invalid text that
    # only such a format rejects cannot be judged by them.
    checked = set(jsonschema.Draft7Validator.FORMAT_CHECKER.checkers)
    bad = unjudged = 0
    for c in cases:
        unchecked = formats(c["schema"]) - checked
        for want, key in ((True, "valid"), (False, "invalid"), (True, "stricter")):
            for text in c.get(key, []):
                if valid(c["schema"], text) != want:
                    if key == "invalid" and unchecked:
                        unjudged += 1
                        continue
                    print(f"{c['name']}: {text!r} is listed as {key}, the validator disagrees")
                    bad += 1
    n = sum(len(c.get(k, [])) for c in cases for k in ("valid", "invalid", "stricter"))
    note = f" ({unjudged} invalid texts not judged: this jsonschema does not check their format)" if unjudged else ""
    print(f"{n} texts, {bad} disagreements{note}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
