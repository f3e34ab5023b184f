#!/usr/bin/env python3
"""The docs check: what README.md and docs/*.md name exists.

- A flag (`--name`) written after an lmpipe command or a service binary
  (`lmpipe generate --deadline-ms`, `lmpipe-http --listen`, "coordinator
  `--kv-blocks`") is in that command's `--help`; a flag written alone
  (`--no-shm`) is in the `--help` of at least one of them.  Flags after
  another program (curl, meson, nats-server, llama-server, ...) are not
  looked at.
- A config key (`engine.kv_block`, `curve.key = PATH`, a row of a table
  whose first column is "key") is one the services accept: a key of
  `lmpipe schema --config`'s parameter tables where that command exists,
  else one `lmpipe up --config` takes (asked with a probe config, nothing
  started).  NAME, `*` and other upper-case parts stand for any one part.
- A relative link (`[x](PIPELINE.md#faults-and-recovery)`) names a file
  that exists, and a heading of it when it has an anchor; a path of the
  source tree (`lib/params.c`, `deploy/systemd/*@.service`,
  `../shared/models/...`) exists.
- An endpoint (`POST /v1/completions`, `GET /health`, a URL
  `http://HOST:PORT/PATH`) is routed by the gateway: the real lmpipe-http,
  started on a free loopback port with no coordinator, answers that method
  on that path with something other than 404 and 405.

Each failure is one line: FILE:LINE: the claim, and why it fails.  A line
holding `<!-- docs-check: skip -->` is not checked (a flag of llama.cpp's,
an endpoint that lmpipe does not have, named on purpose).

usage: docs-check.py --source DIR --build DIR [--shared DIR] [FILE.md ...]
       docs-check.py --source DIR --help-file CMD=FILE ... --keys-file F
                     [--no-endpoints] [FILE.md ...]   (the unit test's mode)
FILEs default to README.md and docs/*.md of the source."""
import argparse
import fnmatch
import glob
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

# lmpipe's commands; read from `lmpipe --help` when there is a build
LMPIPE_SUBS = ["info", "up", "run", "generate", "tokenize", "detokenize", "template", "tool-calls",
               "sample", "stats", "sampler", "bench", "score", "keygen", "synth"]
# service binary -> its path in the build tree
SERVICES = {"tokenizer-svc": "tokenizer-svc/tokenizer-svc", "engine-svc": "engine-svc/engine-svc",
            "sampler-svc": "sampler-svc/sampler-svc", "coordinator": "coordinator/coordinator",
            "lmpipe-http": "gateway/http/lmpipe-http", "lmpipe-nats": "gateway/nats/lmpipe-nats"}
# Programs whose flags the docs may name and lmpipe does not own.
FOREIGN = {"curl", "meson", "ninja", "nats-server", "nats", "node", "npm", "npx", "llama-server",
           "llama-bench", "llama-cli", "llama-perplexity", "git", "kubectl", "systemd-analyze",
           "systemctl", "journalctl", "python3", "python", "pip", "gcc", "cc", "clang", "cmake",
           "podman", "docker", "buildah", "valgrind", "perf", "taskset", "numactl", "gdb", "bash",
           "sh", "apt-get", "apt", "sudo", "tar", "openssl", "ssh", "nvcc", "nvidia-smi",
           "ncu", "nsys", "compute-sanitizer", "uvicorn", "vllm", "sglang", "sort", "grep",
           "hyperfine", "strace", "ip", "unshare", "nsenter", "wrk", "oha", "ab", "jq", "xxd",
           "env", "timeout", "nice", "chmod", "chown", "mkdir", "install", "cp", "ln", "rm", "cat",
           "ls", "find", "sed", "awk", "head", "tail", "echo", "printf", "kill", "ps", "ulimit",
           "run-long.sh", "run-all.sh", "render_template.py", "llama-tokenize", "tokenize.py",
           "fuzz-http", "fuzz-json", "fuzz-gguf", "fuzz-frames", "fuzz-nats-request",
           "http-bench.mjs", "pytest", "ctest", "objdump", "readelf", "nm", "ldd", "chromium",
           "llama.cpp", "llama-server's", "vLLM", "SGLang", "ollama", "transformers"}
# Top-level folders of the source tree: a word that starts with one of
# them and a slash is a path.
TOP = ("lib", "proto", "tokenizer-svc", "engine-svc", "sampler-svc", "coordinator", "gateway",
       "tools", "tests", "bench", "deploy", "docs", ".ci")
CONFIG_SECTIONS = ("tokenizer", "engine", "sampler", "coordinator", "http", "nats", "curve",
                   "supervise", "group")
# tokenizer.* keys that are a GGUF's metadata, not config
GGUF_KEY = re.compile(r"^(tokenizer\.(ggml\.|chat_template($|\.))|general\.)")
METHODS = ("GET", "POST", "HEAD", "OPTIONS", "PUT", "DELETE", "PATCH")
SKIP_MARK = "<!-- docs-check: skip -->"


class Failures:
    def __init__(self, verbose=False):
        self.lines = []
        self.counts = {}
        self.verbose = verbose

    def checked(self, kind, path, line, claim):
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if self.verbose:
            print("checked %s: %s:%d: %s" % (kind, path, line, claim))

    def add(self, path, line, claim, why):
        self.lines.append((path, line, "%s:%d: %s: %s" % (path, line, claim, why)))


# ---- reading Markdown ------------------------------------------------------

def code_segments(text):
    """(line, code, before) for each piece of code in a Markdown text: a
    line of a fenced or indented block (continued lines joined), or an
    inline code span; `before` is the prose before the span in its line."""
    out = []
    lines = text.split("\n")
    prose = list(lines)
    in_fence = False
    block = None  # (start line, text) of a block line continued with '\'
    prev_blank = True
    in_indented = False
    for i, l in enumerate(lines):
        n = i + 1
        is_fence = l.lstrip().startswith("```")
        indented = l.startswith("    ") and (block is not None or (
            not l.lstrip().startswith(("- ", "* ", "|")) and (prev_blank or in_indented)))
        if is_fence or in_fence or indented:
            prose[i] = ""
            if not is_fence:
                if block:
                    block = (block[0], block[1] + " " + l.strip())
                else:
                    block = (n, l.strip())
                if not block[1].endswith("\\"):
                    out.append((block[0], block[1], ""))
                    block = None
                else:
                    block = (block[0], block[1][:-1])
            else:
                in_fence = not in_fence
        in_indented = indented or (in_indented and not l.strip())
        prev_blank = not l.strip()
    if block:
        out.append((block[0], block[1], ""))
    # inline spans, which may run over a line break (not a blank line)
    joined = "\n".join(prose)
    for m in re.finditer(r"(`+)(.+?)\1", joined, re.S):
        if "\n\n" in m.group(2):
            continue
        start = m.start()
        n = joined.count("\n", 0, start) + 1
        line_start = joined.rfind("\n", 0, start) + 1
        before = joined[line_start:start]
        out.append((n, " ".join(m.group(2).split()), before))
    out.sort(key=lambda s: s[0])
    return out


def anchors(text):
    """GitHub's anchors of a Markdown file's headings."""
    out = set()
    seen = {}
    in_fence = False
    for l in text.split("\n"):
        if l.lstrip().startswith("```"):
            in_fence = not in_fence
        if in_fence or not l.startswith("#"):
            continue
        h = l.lstrip("#").strip().lower()
        a = re.sub(r"[^\w\- ]", "", h).replace(" ", "-")
        k = seen.get(a, 0)
        seen[a] = k + 1
        out.add(a if k == 0 else "%s-%d" % (a, k))
    return out


# ---- what the code has -----------------------------------------------------

def help_flags(text):
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text))


def read_helps(build):
    """command -> the flags of its --help (stdout and stderr)."""
    helps = {}
    lmpipe = os.path.join(build, "tools", "lmpipe")
    r = subprocess.run([lmpipe, "--help"], capture_output=True, text=True, timeout=30)
    listed = re.findall(r"^  ([a-z][a-z-]*)  ", (r.stdout + r.stderr).split("commands:")[-1], re.M)
    if not listed:
        raise RuntimeError("lmpipe --help lists no commands: %s" % (r.stdout + r.stderr)[-300:])
    LMPIPE_SUBS[:] = listed
    cmds = [("lmpipe " + s, [lmpipe, s, "--help"]) for s in LMPIPE_SUBS]
    cmds += [(name, [os.path.join(build, p), "--help"]) for name, p in SERVICES.items()]
    for name, argv in cmds:
        if not os.path.exists(argv[0]):
            MISSING.append(name)  # lmpipe-nats without libnats: its claims are not checked
            continue
        r = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        helps[name] = help_flags(r.stdout + r.stderr)
    return helps


def read_keys_from_schema(lmpipe):
    """The parameter tables' keys, or None where `lmpipe schema --config`
    does not exist."""
    try:
        r = subprocess.run([lmpipe, "schema", "--config"], capture_output=True, text=True, timeout=30)
        tables = json.loads(r.stdout)["tables"]
    except (OSError, ValueError, KeyError, subprocess.SubprocessError):
        return None
    if r.returncode != 0:
        return None
    return {p["key"] for t in tables for p in t["params"] if p.get("key")}


def up_accepts(lmpipe, keys):
    """The keys of `keys` that `lmpipe up --config` takes: a probe config
    with the keys and a last key no one has; `lmpipe up` names the first
    unknown key and starts nothing."""
    sentinel = "zz_docs_check_sentinel"
    todo = list(keys)
    unknown = set()
    with tempfile.TemporaryDirectory() as d:
        conf = os.path.join(d, "probe.conf")
        while todo:
            with open(conf, "w") as f:
                for k in todo:
                    f.write("%s = 1\n" % k)
                f.write("%s = 1\n" % sentinel)
            r = subprocess.run([lmpipe, "up", "--config", conf], capture_output=True, text=True,
                               timeout=60, stdin=subprocess.DEVNULL)
            m = re.search(r"unknown key '([^']*)'", r.stdout + r.stderr)
            if not m:
                raise RuntimeError("lmpipe up --config with a probe config: no 'unknown key' "
                                   "error (status %d): %s" % (r.returncode, (r.stdout + r.stderr)[-300:]))
            if m.group(1) == sentinel:
                break
            unknown.add(m.group(1))
            todo.remove(m.group(1))
    return set(keys) - unknown


# ---- the claims ------------------------------------------------------------

SRC = "."  # the source tree, for the scripts it holds
MISSING = []  # the commands this build lacks


def command_of(word):
    """The command a word starts: an lmpipe command or service, "script:PATH"
    for a script of the source tree (its flags are the ones its text names),
    '' for another program, None for no program."""
    base = os.path.basename(word)
    rel = re.sub(r"^\./", "", word)
    if rel.endswith((".sh", ".py", ".mjs", ".js")) and "/" in rel and \
            os.path.isfile(os.path.join(SRC, rel)):
        return "script:" + rel
    if base == "lmpipe":
        return "lmpipe"
    if base in SERVICES:
        return base
    if base in FOREIGN or base.endswith((".sh", ".py", ".mjs", ".js")):
        return ""
    return None


ENGLISH = {"install", "find", "sort", "head", "tail", "time", "kill", "echo", "nice", "env", "grep",
           "cat", "ls", "cp", "ln", "rm", "ip", "ab", "nm", "sh", "cc", "apt", "git", "timeout",
           "python", "perf", "strace", "transformers", "nats"}


def last_program(text):
    """"" when the last program `text` names is another one than lmpipe's,
    None when it is lmpipe's, False when there is none.  In prose "lmpipe"
    and "coordinator" are names of things more often than commands."""
    words = [re.sub(r"'s$", "", w.strip(".'\"")) for w in re.split(r"[\s`(),;:\[\]]+", text)]
    for i in range(len(words) - 1, -1, -1):
        w = words[i]
        if w in LMPIPE_SUBS and i > 0 and words[i - 1] == "lmpipe":
            return None  # `lmpipe up`
        if not w or w in ENGLISH or w in ("lmpipe", "coordinator"):
            continue
        c = command_of(w)
        if c is not None:
            return c if c == "" or c.startswith("script:") else None
    return False


def flag_claims(seg_text, before, context):
    """(command or None, flag) for each flag a piece of code names.  The
    command is the lmpipe command or service written before the flag, in
    the code or, for an inline span, in the prose just before it; where
    there is none, `context` ("" when the text before last named another
    program, else None)."""
    words = seg_text.replace("[", " ").replace("]", " ").replace("(", " ").replace(")", " ").split()
    cur = None  # None: no command yet; "": another program's flags
    if any(re.match(r"^-D\w+=", w) for w in words):
        return []  # a meson option: `-Dcuda=enabled --buildtype=release`
    # prose just before the span: "coordinator `--kv-blocks`", "(tokenizer-svc `--x`"
    if before:
        tail = re.split(r"[|;:.]\s", before)[-1].split()
        for w in reversed(tail[-2:]):
            w = w.strip("(`,")
            c = command_of(w)
            if c:
                cur = c
                break
    if cur is None:
        cur = context
    out = []
    at_start = True  # where a command can begin: first, after | && || ; or a wrapper
    for i, w in enumerate(words):
        if w in ("|", "&&", "||", ";") or w.endswith(";"):
            cur, at_start = None, True
            continue
        c = command_of(w) if at_start or i == 0 else None
        if at_start and (w in ("sudo", "nice", "env", "timeout", "exec", "time") or
                         (w in ("node", "python3", "bash", "sh") and i + 1 < len(words) and
                          (command_of(words[i + 1]) or "").startswith("script:")) or
                         re.match(r"^[A-Z_][A-Z0-9_]*=", w)):
            continue  # a wrapper or an environment variable: the command follows
        at_start = False
        if c == "lmpipe":
            sub = words[i + 1] if i + 1 < len(words) else ""
            # `lmpipe nosuch --x` names a command lmpipe lacks: checked as one
            cur = "lmpipe " + sub if sub in LMPIPE_SUBS or (
                re.match(r"^[a-z][a-z-]+$", sub) and i + 2 < len(words) and words[i + 2].startswith("--")) \
                else "lmpipe"
            continue
        if c is not None and (i == 0 or not w.startswith("-")):
            cur = c
            continue
        if i == 0 and cur is None and re.match(r"^[a-z][\w.-]*$", w) and len(words) > 1 and \
                words[1].startswith("-") and w not in CONFIG_SECTIONS:
            cur = ""  # some other program: `meson test --suite`
            continue
        for f in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*\*?)", w):
            if w.startswith("--") or w.startswith("`--"):
                out.append((cur, f))
    return out


CONFIG_LINE = re.compile(r"^([a-z_][a-zA-Z0-9_.*-]*)\s*=\s*\S")
DOTTED = re.compile(r"^([a-z_]+(?:\.[A-Za-z0-9_*]+)+)$")


FILE_EXT = ("h", "c", "cu", "yaml", "yml", "conf", "md", "json", "py", "sh", "so", "mjs", "js",
            "gguf", "service", "txt", "jinja", "proto", "html", "bin", "log")


def config_claims(seg_text, in_key_table_first_cell, in_block):
    """Config keys a piece of code names: `section.key` (a section of
    CONFIG_SECTIONS, not a file name or a GGUF key), `key = value` with such
    a key, and bare keys only in a config file's lines (a code block) or
    the first column of a table headed "key"."""
    t = seg_text.strip()
    m = CONFIG_LINE.match(t)
    k = m.group(1) if m else t
    if not re.match(r"^[a-z_][A-Za-z0-9_.*-]*$", k):
        return []
    parts = k.split(".")
    if "" in parts:
        return []
    if len(parts) == 1:
        # a config file's line: `threads = 2`, not `client = OpenAI(...)`
        bare_ok = in_key_table_first_cell or (in_block and re.match(r"^[a-z_]+ = [^\s(){}\[\],]+( #.*)?$", t))
        return [k] if bare_ok and re.match(r"^[a-z_]+$", k) else []
    if parts[0] not in CONFIG_SECTIONS or GGUF_KEY.match(k) or parts[-1] in FILE_EXT:
        return []
    return [k]


def key_matches(claim, known):
    """A documented key against the accepted ones: an upper-case part or
    `*` on either side stands for any one part; `x_*` for any ending."""
    parts = claim.split(".")
    under = parts[-1] == "*"  # tokenizer.*, group.b.*: any key under it
    if under:
        parts = parts[:-1]
    for k in known:
        kp = k.split(".")
        if under and len(kp) > len(parts):
            kp = kp[:len(parts)]
        if len(kp) != len(parts):
            continue
        ok = True
        for a, b in zip(parts, kp):
            if a == b or b == "*" or re.match(r"^[A-Z][A-Z_]*$", a) or a == "*":
                continue
            if "*" in a and fnmatch.fnmatchcase(b, a):
                continue
            ok = False
            break
        if ok:
            return True
    return False


PATH_RE = re.compile(r"(?<![\w./-])((?:\.\./shared|%s)/[A-Za-z0-9_.@*{},/-]*)" %
                     "|".join(re.escape(t) for t in TOP))


def path_claims(text_line):
    out = []
    for m in PATH_RE.finditer(text_line):
        p = m.group(1).rstrip(".,;:)")
        if re.search(r"(-o|--out|--json|>)\s*$", text_line[:m.start()]):
            continue  # what a command writes: `lmpipe keygen -o deploy/k8s/keys/hosta`
        if "{" in p:  # sampler-svc/chain.{h,c}
            pre, rest = p.split("{", 1)
            alts, post = rest.split("}", 1) if "}" in rest else (rest, "")
            out.extend(pre + a + post for a in alts.split(","))
        else:
            out.append(p)
    return out


def path_exists(p, src, shared):
    if p.startswith("../shared"):
        if not shared:
            return True
        full = os.path.join(shared, p[len("../shared/"):])
    else:
        full = os.path.join(src, p)
    # upper-case placeholders (engine-svc/arch/NAME.c) and globs
    pat = re.sub(r"(?<![A-Za-z])[A-Z][A-Z_]{1,}(?![a-z])", "*", full)
    if os.path.exists(full) or os.path.exists(full + ".c") or os.path.exists(full + ".h"):
        return True  # lib/sdnotify (the module), tests/golden-test (built from its .c)
    if "/node_modules/" in full and not os.path.isdir(full.split("/node_modules/")[0] + "/node_modules"):
        return True  # installed by npm ci (deploy/setup-debian.sh), not there yet
    if pat != full and not re.search(r"/[A-Z]+\.md$", full):
        return bool(glob.glob(pat))
    return bool(glob.glob(full)) if "*" in full else False


# ---- the gateway -----------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Gateway:
    """The real lmpipe-http with no coordinator behind it: routes still
    answer (503 without a pipeline), an unknown path 404, a wrong method 405."""

    def __init__(self, binary):
        self.tmp = tempfile.TemporaryDirectory()
        for _ in range(5):
            self.port = free_port()
            self.proc = subprocess.Popen([binary, "--coordinator", "ipc://%s/none.sock" % self.tmp.name,
                                          "--listen", "127.0.0.1:%d" % self.port],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            for _ in range(100):
                if self.proc.poll() is not None:
                    break
                try:
                    socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                    return
                except OSError:
                    time.sleep(0.05)
            self.stop()
        raise RuntimeError("lmpipe-http did not start: %s" % self.proc.stderr.read().decode()[-300:])

    def status(self, method, path):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        body = b"{}" if method in ("POST", "PUT", "PATCH") else None
        c.request(method, path, body=body, headers={"Content-Type": "application/json"})
        s = c.getresponse().status
        c.close()
        return s

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


ENDPOINT_RE = re.compile(r"(?<![\w/])(%s) (/[A-Za-z0-9_./{}-]*)" % "|".join(METHODS))
URL_RE = re.compile(r"https?://(?:127\.0\.0\.1|localhost|HOST|\[::1\]|10\.0\.0\.\d+)(?::[A-Z0-9]+)?(/[A-Za-z0-9_./-]*)")
NOT_ENDPOINT = ("/dev/", "/tmp", "/etc/", "/usr/", "/proc/", "/sys/", "/run/", "/var/", "/home/",
                "/lmpipe-", "/work/", "/opt/", "/root")


def endpoint_claims(segs, line_text):
    """(method or None, path) of a line: `METHOD /path` (a bare `/path`
    span after it in the line takes the same method) and URLs."""
    out = []
    for m in ENDPOINT_RE.finditer(line_text):
        out.append((m.group(1), m.group(2).rstrip(".,;:")))
    if out:
        last = out[-1][0]
        for s in segs:
            if re.match(r"^/[a-z][\w/-]*$", s) and not s.startswith(NOT_ENDPOINT):
                if all(p != s for _, p in out):
                    out.append((last, s))
    for m in URL_RE.finditer(line_text):
        path = m.group(1).rstrip(".,;:")
        if path == "/v1":
            continue  # an OpenAI client's base URL
        if path and path != "/" or line_text[m.end():m.end() + 1] in (" ", "`", "'", '"', ""):
            out.append((None, path or "/"))
    return out


# ---- the check -------------------------------------------------------------

def check_file(path, rel, src, shared, helps, known_keys, gateway, fails, key_claims_out):
    text = open(path, encoding="utf-8").read()
    lines = text.split("\n")
    segs = code_segments(text)
    block_segs = [s for s in segs if s[2] == "" and not lines[s[0] - 1].lstrip().startswith(("`", "|"))
                  and "`" not in lines[s[0] - 1]]
    by_line = {}
    for n, code, before in segs:
        by_line.setdefault(n, []).append((code, before))
    all_flags = set().union(*(v for k, v in helps.items() if not k.startswith("script:")))

    def skipped(n):
        return SKIP_MARK in lines[n - 1]

    # the first cells of tables whose first column is "key"
    key_cells = set()
    in_key_table = False
    for i, l in enumerate(lines):
        cells = [c.strip() for c in l.strip().strip("|").split("|")] if l.strip().startswith("|") else None
        if cells is None:
            in_key_table = False
            continue
        if cells and cells[0].lower() == "key":
            in_key_table = True
            continue
        if in_key_table and not set(cells[0]) <= set("-: "):
            key_cells.add((i + 1, cells[0]))

    # flags
    heads = [i + 1 for i, l in enumerate(lines) if l.startswith("#")]
    for n, code, before in segs:
        if skipped(n):
            continue
        # the program this line or the one before names, else the
        # nearest code block's above in the section
        context = last_program((lines[n - 2] if n > 1 else "") + "\n" + before)
        if context is False:
            heading = max([h for h in heads if h <= n] or [0])
            context = None
            for bn, bcode, bbefore in reversed(block_segs):
                if heading < bn < n:
                    # a script's flags described after its command line
                    words = [w for w in bcode.split()[:2] if w not in ("node", "python3", "bash")]
                    c = command_of(words[0]) if words else None
                    context = c if c and c.startswith("script:") else None
                    break
        for cmd, flag in flag_claims(code, before, context):
            if cmd == "":
                continue
            fails.checked("flag", rel, n, "%s %s" % (cmd or "(any)", flag))
            if flag.endswith("*"):  # --kv-*: some flag of that start
                have = helps.get(cmd, all_flags) if cmd else all_flags
                if not any(f.startswith(flag[:-1]) for f in have):
                    fails.add(rel, n, "`%s`" % flag, "no flag of %s starts with %s" %
                              (cmd or "any lmpipe command or service", flag[:-1]))
                continue
            if cmd and cmd.startswith("script:") and cmd not in helps:
                helps[cmd] = help_flags(open(os.path.join(src, cmd[7:]), encoding="utf-8").read())
            if cmd and cmd in helps:
                if flag not in helps[cmd]:
                    fails.add(rel, n, "`%s %s`" % (cmd.replace("script:", ""), flag),
                              "%s does not name %s" % (cmd[7:], flag) if cmd.startswith("script:")
                              else "%s --help does not list %s" % (cmd, flag))
            elif cmd in MISSING:
                print("unchecked: %s:%d: `%s %s`: this build has no %s" % (rel, n, cmd, flag, cmd))
            elif cmd and cmd.startswith("lmpipe "):
                fails.add(rel, n, "`%s %s`" % (cmd, flag), "lmpipe --help lists no command %s" % cmd[7:])
            elif flag not in all_flags and MISSING:
                print("unchecked: %s:%d: `%s` is in no --help of this build, which lacks %s" %
                      (rel, n, flag, ", ".join(MISSING)))
            elif flag not in all_flags:
                fails.add(rel, n, "`%s`" % flag,
                          "no lmpipe command or service lists %s in its --help (write the command "
                          "before it when it is another program's, or mark the line %s)" % (flag, SKIP_MARK))

    # config keys (checked in main, all at once)
    for n, code, before in segs:
        if skipped(n):
            continue
        first_cell = any(n == ln and ("`%s`" % code) in cell for ln, cell in key_cells)
        for k in config_claims(code, first_cell, before == "" and "`" not in lines[n - 1]):
            key_claims_out.append((rel, n, k))

    # links and paths
    for i, l in enumerate(lines):
        n = i + 1
        if skipped(n):
            continue
        for m in re.finditer(r"\[[^\]]*\]\(([^)\s]+)\)", l):
            target = m.group(1)
            if re.match(r"^[a-z]+:", target) or target.startswith("/"):
                continue
            fails.checked("link", rel, n, target)
            file, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
            if not os.path.exists(full):
                fails.add(rel, n, "link (%s)" % target, "%s does not exist" % os.path.relpath(full, src))
            elif anchor and full.endswith(".md") and anchor not in anchors(open(full, encoding="utf-8").read()):
                fails.add(rel, n, "link (%s)" % target,
                          "%s has no heading with the anchor #%s" % (os.path.relpath(full, src), anchor))
        for p in path_claims(l):
            fails.checked("path", rel, n, p)
            if not path_exists(p, src, shared):
                fails.add(rel, n, "path %s" % p, "no such file or folder in the %s" %
                          ("shared data (%s)" % shared if p.startswith("../shared") else "source tree"))

    # endpoints
    if gateway:
        for i, l in enumerate(lines):
            n = i + 1
            if skipped(n):
                continue
            spans = [c for c, _ in by_line.get(n, [])]
            for method, p in endpoint_claims(spans, l):
                if p.startswith(NOT_ENDPOINT) or re.search(r"[A-Z{]", p):
                    continue
                probe = method or "GET"
                fails.checked("endpoint", rel, n, "%s %s" % (probe, p))
                s = gateway.status(probe, p)
                if s == 404:
                    fails.add(rel, n, "%s%s" % (method + " " if method else "", p),
                              "lmpipe-http has no route %s (%s %s answered 404)" % (p, probe, p))
                elif s == 405 and method:
                    fails.add(rel, n, "%s %s" % (method, p),
                              "lmpipe-http does not take %s on %s (405)" % (method, p))


def main():
    ap = argparse.ArgumentParser(usage=__doc__)
    ap.add_argument("--source", required=True)
    ap.add_argument("--build")
    ap.add_argument("--shared")
    ap.add_argument("--help-file", action="append", default=[], metavar="CMD=FILE",
                    help="a command's --help text from a file instead of the build")
    ap.add_argument("--keys-file", help="the accepted config keys, one a line, instead of the build")
    ap.add_argument("--no-endpoints", action="store_true")
    ap.add_argument("--gateway", help="lmpipe-http to probe (default: the build's)")
    ap.add_argument("--verbose", action="store_true", help="print every claim checked")
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    src = os.path.abspath(a.source)
    global SRC
    SRC = src
    files = a.files or [os.path.join(src, "README.md")] + sorted(glob.glob(os.path.join(src, "docs", "*.md")))

    helps = read_helps(a.build) if a.build else {}
    for hf in a.help_file:
        cmd, _, f = hf.partition("=")
        helps[cmd] = help_flags(open(f, encoding="utf-8").read())
    lmpipe = os.path.join(a.build, "tools", "lmpipe") if a.build else None
    if a.keys_file:
        known = {l.strip() for l in open(a.keys_file) if l.strip()}
        key_source = a.keys_file
    elif lmpipe:
        known = read_keys_from_schema(lmpipe)
        key_source = "lmpipe schema --config"
    else:
        known = set()
        key_source = None
    gw_bin = a.gateway or (os.path.join(a.build, SERVICES["lmpipe-http"]) if a.build else None)
    gateway = Gateway(gw_bin) if gw_bin and not a.no_endpoints else None

    fails = Failures(a.verbose)
    key_claims = []
    try:
        for f in files:
            rel = os.path.relpath(f, src)
            check_file(f, rel, src, a.shared, helps, known, gateway, fails, key_claims)
    finally:
        if gateway:
            gateway.stop()

    # config keys: one probe of lmpipe up for all where there is no table
    if known is None:
        key_source = "lmpipe up --config"
        known = up_accepts(lmpipe, sorted({k for _, _, k in key_claims if not re.search(r"[A-Z*]", k)}))
        wild = [k for _, _, k in key_claims if re.search(r"[A-Z*]", k)]
        # group.NAME.engine and engine.kv_*: probe one instance of each
        for k in set(wild):
            inst = ".".join("docs" if re.match(r"^[A-Z][A-Z_]*$", p) else p for p in k.split("."))
            if "*" in inst:
                continue  # checked below against the keys the probe took
            if up_accepts(lmpipe, [inst]):
                known.add(k)
    for rel, n, k in key_claims:
        fails.checked("config key", rel, n, k)
        if k in known or key_matches(k, known):
            continue
        fails.add(rel, n, "config key `%s`" % k, "not a key the services accept (%s)" % key_source)

    for _, _, l in sorted(fails.lines):
        print("FAIL: " + l)
    checked = "%d files; %s checked; --help of %s; config keys from %s" % (
        len(files), ", ".join("%d %ss" % (v, k) for k, v in sorted(fails.counts.items())),
        ", ".join(sorted(helps)) or "none", key_source)
    print("%s: %s" % ("docs check failed, %d claims" % len(fails.lines) if fails.lines else "ok", checked))
    return 1 if fails.lines else 0


if __name__ == "__main__":
    sys.exit(main())
