#!/usr/bin/env python3
"""The docs check's own test: tests/docs-check.py against the real build
(the real --help texts, the real config reader, the real lmpipe-http) on
small Markdown files that name things that exist, and then on the same
files and on a copy of the real docs with one thing each that does not:
a flag, a config key, an endpoint, a method, a path, a link, an anchor;
and with a --help text and a key list that lack what the docs name (as if
the code had dropped the flag or the key).  Each must fail, naming the
file, the line and the claim; the good ones must pass.

usage: docs-check-test.py SOURCE_DIR BUILD_DIR SHARED_DIR"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK = os.path.join(HERE, "docs-check.py")

GOOD = """# A page

Run `lmpipe generate --endpoint EP --deadline-ms 500` against a pipeline;
coordinator `--kv-blocks` caps the blocks, and `--no-shm` sends rows inline.

    ./build/tools/lmpipe up --config deploy/lmpipe.conf --only engine,sampler \\
        --drain-grace-ms 0
    curl --silent --no-such-curl-flag http://127.0.0.1:8080/health

| key | what |
|---|---|
| `engine.kv_block` | positions per block |
| `run_dir` | the run folder |

Config: `curve.key = PATH`, `group.NAME.engine`, `curve.*`.
The GGUF's `tokenizer.chat_template` is no config key.
Endpoints: `POST /v1/completions`, `GET /health`, `POST /tokenize`, `/detokenize`.
Files: `lib/config.c`, tools/cmd-up.c, `deploy/systemd/*@.service`, `sampler-svc/chain.{h,c}`.
See [the other page](OTHER.md#second-part) and [the readme](../README.md).
llama-server's `--jinja` is llama.cpp's flag.

The end.
"""
OTHER = """# Other

## Second part

text
"""

# (name, text added to docs/PAGE.md, what the failure line must hold)
BAD = [
    ("flag after a command", "Use `lmpipe generate --no-such-flag`.\n",
     "docs/PAGE.md:%d: `lmpipe generate --no-such-flag`: lmpipe generate --help does not list --no-such-flag"),
    ("flag of a service", "Start it with lmpipe-http `--no-such-http-flag`.\n",
     "docs/PAGE.md:%d: `lmpipe-http --no-such-http-flag`"),
    ("flag in a code block", "\n    ./build/tools/lmpipe run --model M --no-such-run-flag\n",
     "`lmpipe run --no-such-run-flag`"),
    ("flag alone", "The `--bogus-flag` option.\n",
     "docs/PAGE.md:%d: `--bogus-flag`: no lmpipe command or service lists --bogus-flag"),
    ("flag of one command, under another", "`lmpipe stats --deadline-ms 5`\n",
     "`lmpipe stats --deadline-ms`: lmpipe stats --help does not list --deadline-ms"),
    ("command", "Run `lmpipe nosuch --model M`.\n",
     "docs/PAGE.md:%d: `lmpipe nosuch --model`: lmpipe --help lists no command nosuch"),
    ("config key", "Set `engine.kv_blok = 16`.\n",
     "docs/PAGE.md:%d: config key `engine.kv_blok`: not a key the services accept"),
    ("config key in a key table", "\n| key | what |\n|---|---|\n| `no_such_key` | x |\n",
     "config key `no_such_key`"),
    ("group field", "`group.NAME.enigne`\n", "config key `group.NAME.enigne`"),
    ("endpoint", "Call `POST /v1/no-such-endpoint`.\n",
     "docs/PAGE.md:%d: POST /v1/no-such-endpoint: lmpipe-http has no route /v1/no-such-endpoint"),
    ("method", "Call `GET /completion`.\n",
     "docs/PAGE.md:%d: GET /completion: lmpipe-http does not take GET on /completion (405)"),
    ("endpoint in a URL", "    curl http://127.0.0.1:8080/v2/nothing\n",
     "/v2/nothing: lmpipe-http has no route /v2/nothing"),
    ("path", "The code is in `lib/no-such-file.c`.\n",
     "docs/PAGE.md:%d: path lib/no-such-file.c: no such file or folder in the source tree"),
    ("path in prose", "See tools/no-such-tool.c for it.\n", "path tools/no-such-tool.c"),
    ("shared path", "The model `../shared/models/no-such.gguf`.\n",
     "path ../shared/models/no-such.gguf: no such file or folder in the shared data"),
    ("link", "See [that](NO-SUCH.md).\n",
     "docs/PAGE.md:%d: link (NO-SUCH.md): docs/NO-SUCH.md does not exist"),
    ("anchor", "See [that](OTHER.md#no-such-part).\n",
     "link (OTHER.md#no-such-part): docs/OTHER.md has no heading with the anchor #no-such-part"),
]


def run(src, build, shared, *extra):
    r = subprocess.run([sys.executable, CHECK, "--source", src, "--build", build, "--shared", shared]
                       + list(extra), capture_output=True, text=True, timeout=600)
    return r.returncode, r.stdout + r.stderr


def fixture(tmp, source, page):
    """A source tree whose README.md and docs/ are ours and whose other
    folders are the real source's (links)."""
    root = os.path.join(tmp, "src")
    if os.path.exists(root):
        shutil.rmtree(root)
    os.makedirs(os.path.join(root, "docs"))
    for name in os.listdir(source):
        if name not in ("docs", "README.md", ".git") and not name.startswith("build"):
            os.symlink(os.path.join(source, name), os.path.join(root, name))
    with open(os.path.join(root, "README.md"), "w") as f:
        f.write("# readme\n\n[docs](docs/PAGE.md)\n")
    with open(os.path.join(root, "docs", "PAGE.md"), "w") as f:
        f.write(page)
    with open(os.path.join(root, "docs", "OTHER.md"), "w") as f:
        f.write(OTHER)
    return root


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    source, build, shared = (os.path.abspath(a) for a in sys.argv[1:])
    fails = 0

    def expect(name, ok, out):
        nonlocal fails
        print(("ok: " if ok else "FAIL: ") + name)
        if not ok:
            fails += 1
            print("  " + out.replace("\n", "\n  ")[-3000:])

    with tempfile.TemporaryDirectory() as tmp:
        root = fixture(tmp, source, GOOD)
        rc, out = run(root, build, shared, "--verbose")
        expect("the good page passes", rc == 0, out)
        # the good page's claims were looked at, not passed over
        for want in ("checked flag: docs/PAGE.md:3: lmpipe generate --deadline-ms",
                     "checked flag: docs/PAGE.md:4: coordinator --kv-blocks",
                     "checked flag: docs/PAGE.md:4: (any) --no-shm",
                     "checked flag: docs/PAGE.md:6: lmpipe up --drain-grace-ms",
                     "checked config key: docs/PAGE.md:12: engine.kv_block",
                     "checked config key: docs/PAGE.md:13: run_dir",
                     "checked config key: docs/PAGE.md:15: group.NAME.engine",
                     "checked endpoint: docs/PAGE.md:17: POST /detokenize",
                     "checked endpoint: docs/PAGE.md:8: GET /health",
                     "checked path: docs/PAGE.md:18: sampler-svc/chain.h",
                     "checked link: docs/PAGE.md:19: OTHER.md#second-part"):
            expect("the good page's claim is checked: " + want, want in out, out)
        for bad in ("--no-such-curl-flag", "tokenizer.chat_template", "--jinja"):
            expect("not taken as lmpipe's: " + bad,
                   not any(bad in l for l in out.splitlines() if l.startswith("checked ")), out)

        n_good = GOOD.count("\n")
        for name, add, want in BAD:
            root = fixture(tmp, source, GOOD + add)
            line = n_good + 1 + (1 if add.startswith("\n") else 0) + (3 if "| key |" in add else 0)
            want = want % line if "%d" in want else want
            rc, out = run(root, build, shared)
            expect("%s: fails naming it" % name, rc == 1 and want in out and out.count("FAIL: ") == 1, out)
            # the same line marked as skipped is left alone
            if "\n" not in add.strip("\n"):
                root = fixture(tmp, source, GOOD + add.rstrip("\n") + " <!-- docs-check: skip -->\n")
                rc, out = run(root, build, shared)
                expect("%s: skipped where marked" % name, rc == 0, out)

        # the code drops a flag or a key: a --help without --deadline-ms, a
        # key list without engine.kv_block
        root = fixture(tmp, source, GOOD)
        real = subprocess.run([os.path.join(build, "tools", "lmpipe"), "generate", "--help"],
                              capture_output=True, text=True).stdout
        fake = os.path.join(tmp, "generate-help.txt")
        with open(fake, "w") as f:
            f.write("\n".join(l for l in real.splitlines() if "--deadline-ms" not in l))
        rc, out = run(root, build, shared, "--help-file", "lmpipe generate=" + fake)
        expect("a --help without the flag fails", rc == 1 and
               "docs/PAGE.md:3: `lmpipe generate --deadline-ms`: lmpipe generate --help does not list" in out, out)
        keys = os.path.join(tmp, "keys.txt")
        with open(keys, "w") as f:
            f.write("run_dir\ncurve.key\ngroup.*.engine\nsupervise.max_restarts\n")
        rc, out = run(root, build, shared, "--keys-file", keys)
        expect("a key list without the key fails", rc == 1 and
               "docs/PAGE.md:12: config key `engine.kv_block`: not a key the services accept" in out
               and out.count("FAIL: ") == 1, out)

        # a copy of the real docs with a flag, a key, an endpoint and a path
        # that do not exist, one line each
        root = os.path.join(tmp, "real")
        os.makedirs(root)
        for name in os.listdir(source):
            if name in ("docs", "README.md"):
                (shutil.copytree if name == "docs" else shutil.copy)(os.path.join(source, name),
                                                                     os.path.join(root, name))
            elif name != ".git" and not name.startswith("build"):
                os.symlink(os.path.join(source, name), os.path.join(root, name))
        rc, out = run(root, build, shared)
        expect("the real docs pass", rc == 0, out)
        deploy = os.path.join(root, "docs", "DEPLOY.md")
        text = open(deploy).read()
        n = text.count("\n")
        with open(deploy, "a") as f:
            f.write("\n`lmpipe up --no-such-up-flag`; `engine.no_such_key = 1`; `POST /v1/no-such`; "
                    "`deploy/no-such.conf`.\n")
        rc, out = run(root, build, shared)
        for want in ("docs/DEPLOY.md:%d: `lmpipe up --no-such-up-flag`" % (n + 2),
                     "docs/DEPLOY.md:%d: config key `engine.no_such_key`" % (n + 2),
                     "docs/DEPLOY.md:%d: POST /v1/no-such" % (n + 2),
                     "docs/DEPLOY.md:%d: path deploy/no-such.conf" % (n + 2)):
            expect("the real docs with a bad line: " + want, rc == 1 and want in out, out)
        expect("the real docs with a bad line: 4 failures", out.count("FAIL: ") == 4, out)

    print("%s" % ("all passed" if not fails else "%d failed" % fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
