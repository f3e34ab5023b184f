#!/usr/bin/env python3
"""The docs hold the tables the code has: docs/HTTP.md's and docs/NATS.md's
request field tables are `lmpipe schema --markdown http|nats` (the request
schema, lib/request-schema.c), and docs/DEPLOY.md's config keys are
`lmpipe schema --markdown config` (every service's parameter table), each
between its markers:

    <!-- lmpipe schema --markdown http: begin -->
    ...
    <!-- lmpipe schema --markdown http: end -->

A table that drifted fails, showing the first lines that differ.  With
--write the docs are rewritten from the code instead.

usage: schema-docs-test.py LMPIPE SOURCE_DIR [--write]"""
import difflib
import os
import subprocess
import sys


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    lmpipe, src = sys.argv[1], sys.argv[2]
    write = len(sys.argv) == 4 and sys.argv[3] == "--write"
    fail = 0
    for doc, what in (("HTTP.md", "http"), ("NATS.md", "nats"), ("DEPLOY.md", "config")):
        want = subprocess.run([lmpipe, "schema", "--markdown", what], check=True, capture_output=True,
                              text=True).stdout
        path = os.path.join(src, "docs", doc)
        text = open(path, encoding="utf-8").read()
        begin = "<!-- lmpipe schema --markdown %s: begin -->\n" % what
        end = "<!-- lmpipe schema --markdown %s: end -->" % what
        i, j = text.find(begin), text.find(end)
        if i < 0 or j < i:
            print("FAIL: docs/%s has no block between '%s' and '%s'" % (doc, begin.strip(), end))
            fail = 1
            continue
        have = text[i + len(begin):j]
        if have.strip("\n") == want.strip("\n"):
            print("ok: docs/%s holds `lmpipe schema --markdown %s` (%d lines)" % (doc, what, want.count("\n")))
            continue
        if write:
            open(path, "w", encoding="utf-8").write(text[:i + len(begin)] + want.strip("\n") + "\n" + text[j:])
            print("wrote docs/%s" % doc)
            continue
        diff = list(difflib.unified_diff(have.strip("\n").splitlines(), want.strip("\n").splitlines(),
                                         "docs/" + doc, "lmpipe schema --markdown " + what, lineterm="", n=0))
        print("FAIL: docs/%s differs from `lmpipe schema --markdown %s` (run tests/schema-docs-test.py "
              "LMPIPE SOURCE --write):\n  %s" % (doc, what, "\n  ".join(diff[:20])))
        fail = 1
    return fail


if __name__ == "__main__":
    sys.exit(main())
