#!/usr/bin/env python3
"""Structured outputs end to end (issue 29): `lmpipe up --http` with a
random-weight model whose vocabulary spells any text (synth-qwen2: Qwen2's
byte-level BPE, padded to 151936 ids), clients nobody here wrote (urllib,
Debian's python3-jsonschema as the judge).

- MaskBench schemas of the shared half through response_format json_schema
  (strict and not), temperature 1, several seeds: every output that ended
  (finish_reason stop) must be JSON that validates; a schema the engine
  refuses must be a 400 naming response_format; at least MIN_SCHEMAS
  schemas must have been generated for.
- GBNF, regex and choice through llama.cpp's fields (grammar, json_schema on
  /completion) and vLLM's (structured_outputs, guided_*), checked with
  Python's re and the choice list.
- max_tokens that cuts a constrained output: finish_reason length.
- A live sampler swap (POST /sampler) while constrained generations run:
  every output still valid; sampler-svc SIGKILLed during constrained
  generations (lmpipe up restarts it, the sessions are reopened with their
  tokens): every finished output valid.

- The npm openai SDK (structured-sdk-test.mjs) and, where nats-server and
  lmpipe-nats are there, the bridge (tests/nats/structured-test.mjs).

usage: structured-test.py LMPIPE LMPIPE_NATS SHARED_DIR BUILD_DIR [MIN_SCHEMAS]
"""
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

try:
    import jsonschema
except ImportError:
    print("python3-jsonschema is not installed (deploy/setup-debian.sh)", file=sys.stderr)
    sys.exit(1)

lmpipe, lmpipe_nats, shared, build = sys.argv[1:5]
MIN_SCHEMAS = int(sys.argv[5]) if len(sys.argv) > 5 else 200
here = os.path.dirname(os.path.abspath(__file__))
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg, flush=True)


def validators(schema):
    if isinstance(schema, dict) and isinstance(schema.get("$schema"), str):
        classes = [jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)]
    else:
        classes = [jsonschema.Draft7Validator, jsonschema.Draft202012Validator]
    return [c(schema, format_checker=c.FORMAT_CHECKER) for c in classes]


def compact(text):
    """No whitespace outside strings."""
    in_str = esc = False
    for ch in text:
        if in_str:
            esc, in_str = (False, True) if esc else (ch == "\\", ch != '"')
        elif ch == '"':
            in_str = True
        elif ch in " \t\r\n":
            return False
    return True


def free_port():
    return int(subprocess.check_output([sys.executable, os.path.join(here, "..", "free-ports.py")]).split()[0])


work = tempfile.mkdtemp(prefix="lmpipe-structured-")
# synth-qwen2 with a chat template added (for chat requests)
MODEL = os.path.join(work, "synth-qwen2-chat.gguf")
subprocess.run([sys.executable, os.path.join(here, "gguf-chat-template.py"),
                os.path.join(shared, "models", "synth-qwen2-Q8_0.gguf"), MODEL], check=True)
port = free_port()
key, admin = "test-key", "admin-key"
base = f"http://127.0.0.1:{port}"
up = subprocess.Popen([lmpipe, "up", "--model", MODEL, "--endpoint", f"ipc://{work}/client.sock",
                       "--http", f"127.0.0.1:{port}", "--api-key", key, "--admin-key", admin],
                      stdout=open(os.path.join(work, "up.out"), "w"),
                      stderr=open(os.path.join(work, "up.err"), "w"))


def stop():
    if up.poll() is None:
        up.send_signal(signal.SIGTERM)
        try:
            up.wait(30)
        except subprocess.TimeoutExpired:
            up.kill()


def post(path, body, auth=key, timeout=120):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {auth}"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


try:
    for _ in range(600):
        try:
            with urllib.request.urlopen(base + "/health", timeout=2) as r:
                if r.status == 200:
                    break
        except Exception:
            pass
        if up.poll() is not None:
            break
        time.sleep(0.1)
    else:
        pass
    if up.poll() is not None:
        print("FAIL: lmpipe up did not start:", open(os.path.join(work, "up.err")).read()[-2000:])
        sys.exit(1)

    # A random-weight model repeats itself and never closes a string.  A
    # bias towards the tokens that close a string (a quote, alone or with a
    # bracket) and, a little less, a container keeps outputs short enough to
    # finish.  It only reorders what the mask allows: inside a string the
    # quote wins, outside it a bracket beats a comma; every other choice is
    # the model's, and whatever the mask lets through is judged by
    # jsonschema.
    bias, bias_llama = {}, {}
    for text, b, bl in (('"', 100, 10000), ('"}', 100, 10000), ('"]', 100, 10000), ('"}}', 100, 10000),
                        ('}', 95, 9000), (']', 95, 9000), ('}]', 95, 9000), ('}}', 95, 9000), (',', 0, 8000)):
        st, tk = post("/tokenize", {"content": text})
        if st == 200 and len(tk["tokens"]) == 1:
            if b:
                bias[str(tk["tokens"][0])] = b
            bias_llama[str(tk["tokens"][0])] = bl

    def complete(body, path="/v1/completions"):
        st, r = post(path, body)
        return st, r

    # ---- MaskBench schemas through response_format ----
    tar = os.path.join(shared, "maskbench", "maskbench.tar.xz")
    folder = os.path.join(build, "maskbench")
    if not os.path.exists(os.path.join(folder, ".extracted")):
        with tarfile.open(tar) as t:
            t.extractall(build)
        open(os.path.join(folder, ".extracted"), "w").close()
    names = sorted((n for n in os.listdir(folder) if n.endswith(".json")),
                   key=lambda n: hashlib.sha256(("e2e" + n).encode()).hexdigest())
    stats = {"schemas_valid": 0, "schemas": 0, "refused": 0, "outputs": 0, "valid": 0, "length": 0}
    lock = threading.Lock()

    def one_schema(i_name):
        i, name = i_name
        schema = json.load(open(os.path.join(folder, name)))["schema"]
        strict = i % 2 == 0
        ok_any = False
        for seed in (1, 2):
            # llama.cpp's /completion: its logit_bias has no [-100, 100] bound
            body = {"prompt": "JSON:", "n_predict": 256, "temperature": 1, "seed": seed * 1000 + i,
                    "logit_bias": bias_llama,
                    "response_format": {"type": "json_schema",
                                        "json_schema": {"name": "s", "schema": schema, "strict": strict}}}
            st, r = complete(body, "/completion")
            if st == 400:
                e = r.get("error", {})
                if e.get("param") != "response_format" or not e.get("message", "").startswith("response_format: "):
                    fail(f"{name}: 400 not naming response_format: {e}")
                with lock:
                    stats["refused"] += 1
                return
            if st != 200:
                fail(f"{name}: status {st}: {r}")
                return
            c = {"text": r["content"], "finish_reason": {"eos": "stop", "limit": "length"}.get(r["stop_type"], r["stop_type"])}
            with lock:
                stats["outputs"] += 1
            if c["finish_reason"] == "length":
                with lock:
                    stats["length"] += 1
                continue
            if c["finish_reason"] != "stop":
                fail(f"{name}: finish_reason {c['finish_reason']}")
                continue
            try:
                value = json.loads(c["text"], parse_constant=lambda x: (_ for _ in ()).throw(ValueError(x)))
            except ValueError as ex:
                fail(f"{name} seed {seed}: not JSON ({ex}): {c['text'][:300]!r}")
                continue
            if strict and not compact(c["text"]):
                fail(f"{name} seed {seed}: strict but not compact: {c['text'][:300]!r}")
            bad = False
            for v in validators(schema):
                errs = list(v.iter_errors(value))
                if errs:
                    fail(f"{name} seed {seed}: invalid ({errs[0].message[:200]}): {c['text'][:300]!r}")
                    bad = True
                    break
            if not bad:
                ok_any = True
                with lock:
                    stats["valid"] += 1
        with lock:
            stats["schemas"] += 1
            stats["schemas_valid"] += ok_any

    t0 = time.time()
    todo = list(enumerate(names))
    pos = 0
    with ThreadPoolExecutor(8) as ex:
        while stats["schemas"] < MIN_SCHEMAS and pos < len(todo):
            batch = todo[pos:pos + 16]
            pos += len(batch)
            list(ex.map(one_schema, batch))
    print(f"maskbench: {stats['schemas']} schemas generated for ({stats['schemas_valid']} with a complete "
          f"output), {stats['refused']} refused (400), "
          f"{stats['outputs']} outputs: {stats['valid']} complete and valid, {stats['length']} cut by max_tokens "
          f"({time.time() - t0:.0f} s)", flush=True)
    if stats["schemas"] < MIN_SCHEMAS:
        fail(f"only {stats['schemas']} schemas generated for (want {MIN_SCHEMAS})")
    # (a random model rarely spells the required keys of an object that
    # also takes any other key: those outputs run to n_predict)
    if stats["valid"] * 10 < stats["outputs"] * 3:
        fail(f"fewer than 30% of the outputs finished: {stats}")

    # ---- GBNF, regex, choice through llama.cpp's and vLLM's names ----
    gbnf = 'root ::= "{" ws "\\"n\\":" ws num ws "}"\nnum ::= [1-9] [0-9]{0,3}\nws ::= [ ]?'
    gbnf_re = re.compile(r'\{ ?"n": ?[1-9][0-9]{0,3} ?\}')
    regex = r"[a-z]{2,6}-[0-9]{2}"
    choices = ["alpha", "beta gamma", "δέλτα"]
    cases = [
        ("/completion", {"grammar": gbnf}, "content", lambda t: gbnf_re.fullmatch(t)),
        ("/v1/completions", {"guided_grammar": gbnf}, "text", lambda t: gbnf_re.fullmatch(t)),
        ("/v1/completions", {"structured_outputs": {"grammar": gbnf}}, "text", lambda t: gbnf_re.fullmatch(t)),
        ("/v1/completions", {"guided_regex": regex}, "text", lambda t: re.fullmatch(regex, t)),
        ("/v1/completions", {"structured_outputs": {"regex": regex}}, "text", lambda t: re.fullmatch(regex, t)),
        ("/v1/completions", {"guided_choice": choices}, "text", lambda t: t in choices),
        ("/v1/completions", {"structured_outputs": {"choice": choices}}, "text", lambda t: t in choices),
        ("/completion", {"json_schema": {"type": "object", "properties": {"a": {"type": "integer"}},
                                         "required": ["a"], "additionalProperties": False}}, "content",
         lambda t: isinstance(json.loads(t), dict) and isinstance(json.loads(t)["a"], int) and len(json.loads(t)) == 1),
        ("/v1/completions", {"guided_json": {"type": "array", "items": {"enum": [1, "x", None]}, "maxItems": 3}}, "text",
         lambda t: all(x in (1, "x", None) for x in json.loads(t)) and len(json.loads(t)) <= 3),
        ("/v1/completions", {"response_format": {"type": "json_object"}}, "text",
         lambda t: isinstance(json.loads(t), dict)),
    ]
    n_ok = 0
    for path, extra, field, check in cases:
        for seed in range(4):
            body = {"prompt": "Answer:", "temperature": 1, "seed": seed, "logit_bias": bias, **extra}
            body["n_predict" if path == "/completion" else "max_tokens"] = 64
            st, r = post(path, body)
            if st != 200:
                fail(f"{path} {list(extra)}: status {st}: {r}")
                break
            text = r[field] if path == "/completion" else r["choices"][0]["text"]
            reason = r.get("stop_type") if path == "/completion" else r["choices"][0]["finish_reason"]
            if path == "/completion":
                if r.get("stop_type") == "limit":
                    continue
            elif reason == "length":
                continue
            try:
                good = check(text)
            except (ValueError, KeyError, TypeError):
                good = False
            if not good:
                fail(f"{path} {json.dumps(extra)[:80]} seed {seed}: {text!r} does not match")
            else:
                n_ok += 1
    print(f"ok: {n_ok} GBNF, regex, choice and schema outputs through llama.cpp's and vLLM's fields match", flush=True)
    if n_ok < len(cases):
        fail(f"only {n_ok} finished outputs over {len(cases)} cases")

    # ---- refusals name the keyword and the field ----
    for path, extra, param, word in [
        ("/v1/chat/completions", {"response_format": {"type": "json_schema", "json_schema": {
            "name": "u", "schema": {"type": "array", "uniqueItems": True}}}}, "response_format", "uniqueItems"),
        ("/completion", {"grammar": "root ::= undefined-rule"}, "grammar", "undefined-rule"),
        ("/v1/completions", {"guided_regex": "(a"}, "guided_regex", ""),
        ("/v1/completions", {"grammar": "root ::= \"a\"", "guided_regex": "a"}, "guided_regex", "one constraint"),
    ]:
        body = {"temperature": 1, "max_tokens": 4, **extra}
        if path == "/v1/chat/completions":
            body["messages"] = [{"role": "user", "content": "hi"}]
        else:
            body["prompt"] = "x"
            if path == "/completion":
                body["n_predict"] = body.pop("max_tokens")
        st, r = post(path, body)
        e = r.get("error", {})
        if st != 400 or e.get("param") != param or word not in e.get("message", ""):
            fail(f"{path} {json.dumps(extra)[:80]}: want 400 naming {param} and {word!r}: {st} {e}")
        else:
            print(f"ok: 400 {e['message'][:120]}", flush=True)

    # ---- max_tokens cuts a constrained output: finish_reason length ----
    st, r = post("/v1/completions", {"prompt": "x", "max_tokens": 3, "temperature": 1, "seed": 5,
                                     "response_format": {"type": "json_schema", "json_schema": {
                                         "name": "l", "schema": {"type": "string", "minLength": 40}}}})
    if st != 200 or r["choices"][0]["finish_reason"] != "length":
        fail(f"a cut constrained output: {st} {r}")
    else:
        print("ok: a constrained output cut by max_tokens ends with finish_reason length", flush=True)

    # ---- a live sampler swap during constrained generations ----
    swap_schema = {"type": "object", "properties": {"k": {"type": "string", "maxLength": 12},
                                                    "v": {"type": "array", "items": {"type": "integer"},
                                                          "maxItems": 4}},
                   "required": ["k", "v"], "additionalProperties": False}
    results = []

    def gen(seed):
        return post("/v1/completions", {"prompt": "JSON:", "max_tokens": 96, "seed": seed, "logit_bias": bias,
                                        "response_format": {"type": "json_schema", "json_schema": {
                                            "name": "w", "schema": swap_schema, "strict": True}}})

    versions = set()
    with ThreadPoolExecutor(8) as ex:
        futs = [ex.submit(gen, s) for s in range(16)]
        for temp in (0.5, 1.5, 1.0):
            time.sleep(0.15)
            st, r = post("/sampler", {"op": "set", "params": {"temperature": temp, "top_k": 50}}, auth=admin)
            if st != 200:
                fail(f"POST /sampler: {st} {r}")
            versions.add(r.get("version"))
        results = [f.result() for f in futs]
    v = validators(swap_schema)[0]
    n_valid = 0
    for st, r in results:
        if st != 200:
            fail(f"swap: {st} {r}")
            continue
        c = r["choices"][0]
        if c["finish_reason"] == "length":
            continue
        try:
            value = json.loads(c["text"])
            errs = list(v.iter_errors(value))
        except ValueError as ex:
            errs = [ex]
        if errs or not compact(c["text"]):
            fail(f"swap: invalid or not compact: {c['text']!r}")
        else:
            n_valid += 1
    print(f"ok: {n_valid} of {len(results)} constrained outputs across {len(versions)} live swaps valid and "
          f"compact (strict)", flush=True)
    if n_valid < 8:
        fail(f"swap: only {n_valid} outputs finished")

    # ---- sampler-svc killed during constrained generations ----
    # lmpipe up starts a new one; the coordinator reopens each session with
    # the tokens generated so far, which the new matcher replays.
    def sampler_pids():
        pids = []
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                cmd = open(f"/proc/{d}/cmdline", "rb").read().split(b"\0")
            except OSError:
                continue
            if cmd and cmd[0].endswith(b"sampler-svc") and any(f"lmpipe-{up.pid}-".encode() in a for a in cmd):
                pids.append(int(d))
        return pids

    def redriven():
        with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
            m = re.search(r"^lmpipe:requests_redriven_total(?:\{[^}]*\})? (\S+)$", r.read().decode(), re.M)
        return float(m.group(1)) if m else -1

    def running():
        with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
            m = re.search(r"^lmpipe:num_requests_running(?:\{[^}]*\})? (\S+)$", r.read().decode(), re.M)
        return float(m.group(1)) if m else 0

    redriven0 = redriven()
    # the sampler is stopped first, so that the generations are surely in
    # flight when it dies: short outputs can end before any fixed wait does
    killed = sampler_pids()
    for pid in killed:
        os.kill(pid, signal.SIGSTOP)
    with ThreadPoolExecutor(8) as ex:
        futs = [ex.submit(gen, 100 + s) for s in range(8)]
        t0 = time.time()
        while time.time() - t0 < 30 and running() < 1:
            time.sleep(0.05)
        time.sleep(0.2)
        for pid in killed:
            os.kill(pid, signal.SIGKILL)
        results = [f.result() for f in futs]
    n_valid = n_err = 0
    for st, r in results:
        if st != 200:
            n_err += 1
            print(f"(after the kill: {st} {str(r)[:200]})")
            continue
        c = r["choices"][0]
        if c["finish_reason"] == "length":
            continue
        try:
            value = json.loads(c["text"])
            errs = list(v.iter_errors(value))
        except ValueError as ex:
            errs = [ex]
        if errs or not compact(c["text"]):
            fail(f"sampler killed: invalid output: {c['text']!r}")
        else:
            n_valid += 1
    if not killed:
        fail("no sampler-svc of this lmpipe up found to kill")
    n_redriven = redriven() - redriven0
    if n_redriven < 1:
        fail(f"the kill re-drove no request (requests_redriven_total went up by {n_redriven})")
    if n_valid < 4:
        fail(f"sampler killed: only {n_valid} of 8 outputs finished valid ({n_err} errors)")
    else:
        print(f"ok: sampler-svc SIGKILLed during 8 constrained generations: {n_redriven:.0f} re-driven, "
              f"{n_valid} finished valid, {n_err} failed, none invalid", flush=True)

    # ---- the npm openai SDK, and NATS ----
    env = {**os.environ, "LMPIPE_HTTP": base, "LMPIPE_API_KEY": key, "BIAS": json.dumps(bias)}
    if subprocess.run(["node", os.path.join(here, "structured-sdk-test.mjs")], env=env, timeout=600).returncode:
        fail("the openai SDK's response_format checks")
    nats_dir = os.path.join(here, "..", "nats")
    if subprocess.run(["sh", "-c", "command -v nats-server"], capture_output=True).returncode == 0 and \
            os.access(lmpipe_nats, os.X_OK):
        env.update({"LMPIPE": lmpipe, "LMPIPE_NATS": lmpipe_nats, "COORD": f"ipc://{work}/client.sock",
                    "MODEL": MODEL, "WORK": work})
        if subprocess.run(["node", os.path.join(nats_dir, "structured-test.mjs")], env=env, timeout=600).returncode:
            fail("structured outputs over NATS")
    else:
        print("(NATS not checked: nats-server or lmpipe-nats is missing)")
finally:
    stop()
    if failures:
        print(open(os.path.join(work, "up.err")).read()[-3000:])
    subprocess.run(["rm", "-rf", work])

if failures:
    print(f"{len(failures)} failures")
    sys.exit(1)
print("structured outputs: all checks passed")
