#!/usr/bin/python3
"""Every template x context renders as the reference renders it.

usage: template-test.py LMPIPE RENDER_TEMPLATE.py TEMPLATES_DIR [CASES_DIR]

For each *.jinja in TEMPLATES_DIR and each contexts/*.json, run the reference
(render_template.py's run(), Hugging Face's rendering with Debian's
python3-jinja2, imported rather than started 1000 times)
and `lmpipe template`; they must agree: the same bytes on stdout with exit
status 0, or both exit 1.  CASES_DIR holds more templates (small ones, each
exercising a construct) rendered with its own contexts/*.json the same way.
A crash, a hang (60 s) or any other exit status is a failure.
"""
import glob
import importlib.util
import os
import subprocess
import sys

REF = None  # render_template.py, imported: its run() is the command's whole contract


def run(cmd):
    try:
        p = subprocess.run(cmd, capture_output=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "timeout", b"", b""
    return p.returncode, p.stdout, p.stderr


def check_dir(lmpipe, ref, tdir, cdir, fails, counts):
    templates = sorted(glob.glob(os.path.join(tdir, "*.jinja")))
    contexts = sorted(glob.glob(os.path.join(cdir, "*.json")))
    if not templates or not contexts:
        fails.append("%s: no templates or no contexts" % tdir)
        return
    for t in templates:
        for c in contexts:
            name = "%s x %s" % (os.path.basename(t), os.path.basename(c))
            rrc, rout, rerr = REF.run(t, c)
            rerr = rerr.encode()
            if rrc not in (0, 1):
                fails.append("%s: the reference exited %s: %s" % (name, rrc, rerr.decode(errors="replace")))
                continue
            mrc, mout, merr = run([lmpipe, "template", "--template", t, "--context", c])
            counts[0] += 1
            if mrc != rrc:
                fails.append("%s: exit %s (reference %s)\n  ours: %s\n  reference: %s" % (
                    name, mrc, rrc, merr.decode(errors="replace").strip()[:300],
                    rerr.decode(errors="replace").strip()[:300]))
            elif rrc == 0 and mout != rout:
                i = 0
                while i < min(len(mout), len(rout)) and mout[i] == rout[i]:
                    i += 1
                fails.append("%s: output differs at byte %d of %d (reference %d)\n  ours: %r\n  reference: %r" % (
                    name, i, len(mout), len(rout), mout[max(0, i - 40):i + 60], rout[max(0, i - 40):i + 60]))
            elif rrc == 1 and not merr.strip():
                fails.append("%s: failed without a message" % name)
            else:
                counts[1 + (rrc == 1)] += 1


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    lmpipe, ref, tdir = sys.argv[1:4]
    global REF
    spec = importlib.util.spec_from_file_location("render_template", ref)
    REF = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(REF)
    fails, counts = [], [0, 0, 0]
    check_dir(lmpipe, ref, tdir, os.path.join(tdir, "contexts"), fails, counts)
    for cases in sys.argv[4:]:
        check_dir(lmpipe, ref, cases, os.path.join(cases, "contexts"), fails, counts)
    for f in fails:
        print("FAIL", f)
    print("%d renders: %d identical, %d failing in both, %d differ" % (counts[0], counts[1], counts[2], len(fails)))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
