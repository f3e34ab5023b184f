#!/usr/bin/env python3
"""Poison pills under `lmpipe up` (issue #26, docs/PIPELINE.md "Faults and
recovery"), through the HTTP gateway on real sockets.

  crash  the test-poison plugin's apply crashes (SIGSEGV) once a sequence
         has 40 tokens: one long request triggers it while 100 short ones
         are served; the sampler restarts on the last strategy without the
         plugin (log, sampler_plugin_fallbacks_total), the long request is
         re-driven and finishes, lmpipe up stays up
  hang   the same with an apply that never returns: the watchdog
         (--plugin-timeout-ms, 2 s) restarts the sampler the same way
  twice  sampler-svc SIGKILLed twice while two long requests run: the one
         in flight both times fails with "crashed the sampler twice" and is
         not re-driven; the other (held back as a suspect) finishes, and so
         does a request sent after

usage: poison-test.py LMPIPE SHARED_DIR PLUGIN_SO PART
"""
import concurrent.futures
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

lmpipe, shared, plugin_so, part = sys.argv[1:5]
KEY, ADMIN = "poison-key", "poison-admin"
failed = False


def bad(msg):
    global failed
    failed = True
    print("FAIL: " + msg, flush=True)


def ok(msg):
    print("ok: " + msg, flush=True)


here = os.path.dirname(os.path.abspath(__file__))
port = int(subprocess.check_output([sys.executable, os.path.join(here, "free-ports.py")]).split()[0])
work = tempfile.mkdtemp(prefix="lmpipe-poison-")
model = os.path.join(shared, "models", "stories260K.gguf" if part != "twice" else "synth-llama-Q8_0.gguf")
conf = os.path.join(work, "conf")
with open(conf, "w") as f:
    f.write("model = %s\nrun_dir = %s/run\nsampler.plugin_dir = %s\nhttp.listen = 127.0.0.1:%d\n"
            "http.api_key = %s\nhttp.admin_key = %s\n" % (model, work, os.path.dirname(plugin_so), port, KEY, ADMIN))
    if part == "twice":
        f.write("threads = 1\nn_ctx = 4096\n")
up_err = open(os.path.join(work, "up.err"), "w")
up = subprocess.Popen([lmpipe, "up", "--config", conf], stdout=subprocess.DEVNULL, stderr=up_err)


def call(method, path, body=None, key=KEY, timeout=60):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=json.dumps(body) if body is not None else None,
                  headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def metric(name):
    st, body = call("GET", "/metrics")
    m = re.search(r"^lmpipe:%s\{[^}]*\} (\S+)$" % name, body.decode(), re.M)
    return float(m.group(1)) if m else None


def sampler_pid():
    out = subprocess.run(["ps", "-o", "pid=,comm=", "--ppid", str(up.pid)], capture_output=True, text=True).stdout
    for line in out.splitlines():
        pid, comm = line.split()
        if comm == "sampler-svc":
            return int(pid)
    return None


def wait_healthy(secs=60):
    t0 = time.time()
    while time.time() - t0 < secs:
        try:
            if call("GET", "/health")[0] == 200:
                return True
        except OSError:
            pass
        if up.poll() is not None:
            return False
        time.sleep(0.1)
    return False


def stream(body, events):
    """A streamed completion; events gets ('tok', n) and finally ('end', status, last line)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    c.request("POST", "/v1/completions", body=json.dumps(dict(body, stream=True)),
              headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    r = c.getresponse()
    n, last = 0, ""
    if r.status != 200:
        events.append(("end", r.status, r.read().decode()))
        return
    while True:
        line = r.readline()
        if not line:
            break
        line = line.decode().strip()
        if line.startswith("data: ") and line != "data: [DONE]":
            last = line
            if '"text"' in line:
                n += 1
                events.append(("tok", n))
    c.close()
    events.append(("end", 200, last))


def short_requests(n, results):
    def one(i):
        prompt = ["Once upon a time", "Lily and Tom", "One day", "The cat"][i % 4]
        st, body = call("POST", "/v1/completions", {"prompt": prompt, "max_tokens": 8, "temperature": 0})
        return st
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        results.extend(ex.map(one, range(n)))


def part_plugin(mode):
    v0 = json.loads(call("GET", "/sampler")[1])["version"]
    st, body = call("POST", "/sampler", {"op": "load", "path": os.path.basename(plugin_so), "config": mode + ":40"},
                    key=ADMIN)
    v1 = json.loads(body).get("version") if st == 200 else None
    if st != 200:
        bad("loading test-poison: %s %s" % (st, body[:300]))
        return
    # warm: a short request goes through the plugin untouched
    st, body = call("POST", "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0})
    (ok if st == 200 else bad)("with test-poison (%s:40) loaded as version %s, a short request is served: %s"
                              % (mode, v1, st))
    pid0 = sampler_pid()
    shorts = []
    t_short = threading.Thread(target=short_requests, args=(100, shorts))
    long_res = {}

    def long_one():
        long_res["r"] = call("POST", "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 80,
                                                         "ignore_eos": True, "temperature": 0}, timeout=120)
    t_long = threading.Thread(target=long_one)
    t0 = time.time()
    t_long.start()
    t_short.start()
    t_long.join(120)
    t_short.join(120)
    dt = time.time() - t0
    st, body = long_res.get("r", (None, b""))
    usage = json.loads(body).get("usage", {}) if st == 200 else {}
    if st == 200 and usage.get("completion_tokens") == 80:
        ok("the request that set the plugin off finished on the strategy without it (80 tokens)")
    else:
        bad("the triggering request: %s %s" % (st, body[:300]))
    if len(shorts) == 100 and all(s == 200 for s in shorts):
        ok("100 other requests served meanwhile, all 200 (%.1f s in all)" % dt)
    else:
        bad("other requests: %d done, statuses %s" % (len(shorts), sorted(set(shorts))))
    pid1 = sampler_pid()
    info = json.loads(call("GET", "/sampler")[1])
    plugins = json.dumps(info)
    fb = metric("sampler_plugin_fallbacks_total")
    restarts = subprocess.run(["grep", "-c", "sampler-svc exited", os.path.join(work, "up.err")],
                              capture_output=True, text=True).stdout.strip()
    log = open(os.path.join(work, "up.err")).read()
    said = re.search(r"the last run %s inside plugin test-poison \(apply\) on strategy version (\d+); serving now "
                     r"on the last strategy without it, as version (\d+)" % ("hung" if mode == "hang" else "died"), log)
    if pid0 and pid1 and pid0 != pid1 and "test-poison" not in plugins and fb == 1 and said and \
            int(said.group(1)) == v1 and restarts == "1":
        ok("sampler-svc restarted once, on version %s without test-poison (from version %s), said so in the log "
           "and sampler_plugin_fallbacks_total = %g" % (said.group(2), said.group(1), fb))
    else:
        bad("fallback: pid %s -> %s, strategy %s, fallbacks %s, restarts %s, log: %s"
            % (pid0, pid1, plugins[:300], fb, restarts, log[-1500:]))
    if mode == "hang":
        (ok if "has not returned in 2000 ms" in log else bad)("the watchdog named the plugin and its budget")
    (ok if up.poll() is None and call("GET", "/health")[0] == 200 else bad)("lmpipe up still up and healthy")


def part_twice():
    a_ev, b_ev = [], []
    body = {"prompt": "Once upon a time", "max_tokens": 3000, "ignore_eos": True, "temperature": 0}
    ta = threading.Thread(target=stream, args=(body, a_ev))
    tb = threading.Thread(target=stream, args=(body, b_ev))
    ta.start()
    tb.start()

    def tokens(ev):
        return max([e[1] for e in ev if e[0] == "tok"] or [0])

    def wait_tokens(evs, more, secs=60):
        base = [tokens(e) for e in evs]
        t0 = time.time()
        while time.time() - t0 < secs:
            if all(tokens(e) >= b + more for e, b in zip(evs, base)):
                return True
            time.sleep(0.05)
        return False

    if not wait_tokens([a_ev, b_ev], 5):
        bad("the two long requests never streamed")
        return
    os.kill(sampler_pid(), signal.SIGKILL)  # both in flight: both suspects
    time.sleep(0.5)
    t0 = time.time()
    while time.time() - t0 < 60 and not (sampler_pid() and call("GET", "/health")[1].find(b'"ok"') >= 0):
        time.sleep(0.1)
    # one suspect runs again; the other waits for it
    base = (tokens(a_ev), tokens(b_ev))
    t0 = time.time()
    while time.time() - t0 < 60 and tokens(a_ev) == base[0] and tokens(b_ev) == base[1]:
        time.sleep(0.05)
    time.sleep(0.3)
    moving = [tokens(a_ev) > base[0], tokens(b_ev) > base[1]]
    if moving.count(True) == 1:
        ok("after the first crash the two suspects run one at a time")
    else:
        bad("suspects after the first crash: moving %s" % moving)
    os.kill(sampler_pid(), signal.SIGKILL)
    ta.join(300)
    tb.join(300)
    ends = [a_ev[-1], b_ev[-1]]
    poisoned = [e for e in ends if "crashed the sampler twice" in e[2]]
    finished = [e for e in ends if e[1] == 200 and '"finish_reason":"length"' in e[2]]
    if len(poisoned) == 1 and len(finished) == 1:
        ok("the request in flight at both deaths ended with %s; the other finished" %
           json.loads(poisoned[0][2][6:])["error"]["message"])
    else:
        bad("after the second crash: %s" % [e[2][:200] for e in ends])
    st, _ = call("POST", "/v1/completions", {"prompt": "Lily", "max_tokens": 8, "temperature": 0})
    n = metric("requests_poisoned_total")
    (ok if st == 200 and n == 1 else bad)("a request after it is served (%s); requests_poisoned_total = %s" % (st, n))
    (ok if up.poll() is None else bad)("lmpipe up still up")


try:
    if not wait_healthy():
        bad("lmpipe up never got healthy: " + open(os.path.join(work, "up.err")).read()[-2000:])
    else:
        {"crash": lambda: part_plugin("crash"), "hang": lambda: part_plugin("hang"), "twice": part_twice}[part]()
except Exception as e:
    import traceback
    traceback.print_exc()
    bad("the test itself failed: %r" % e)
finally:
    up.terminate()
    try:
        up.wait(20)
    except subprocess.TimeoutExpired:
        up.kill()
    log = open(os.path.join(work, "up.err")).read()
    if "AddressSanitizer" in log or "runtime error" in log:
        bad("a sanitizer report: " + log[-2000:])
    subprocess.call(["rm", "-rf", work])
sys.exit(1 if failed else 0)
