#!/usr/bin/env python3
"""Fault injection under `lmpipe up` (docs/PIPELINE.md, "Faults and recovery").

The real binaries on stories260K (or MODEL, a fixture of ../shared/models
with its golden: synth-qwen35-F32, whose recurrent layers rebuild their
state by recompute), supervised by `lmpipe up`.  A round is a
batch of 8 concurrent `lmpipe generate` requests: the three golden prompts
and one more greedy, four seeded (temperature 0.8).  The first round runs
undisturbed and is the reference.  Then, ROUNDS times for each of
tokenizer-svc, engine-svc and sampler-svc (in a shuffled order), a round
runs while that service is SIGKILLed at a random moment of it.  Checks:

  - no request lost: each of the 8 ends, exit status 0, within its timeout;
  - none duplicated: the coordinator counts one finish per request sent;
  - every request's tokens equal the undisturbed round's, and the greedy
    golden prompts give their goldens;
  - the restart counters (lmpipe up's log and the coordinator's
    stage_restarts) equal the kills, stage by stage;
  - a coordinator killed between rounds comes back and takes over the
    services that stayed up (the controller epoch): a round gives the
    undisturbed tokens;
  - a strategy swap made live survives a sampler restart (replayed);
  - while it runs, one segment, the four sockets, the run's config and the
    sampler's state file are all there is of the pipeline's; once it
    stops, no segment, socket or run folder.

usage: fault-test.py LMPIPE SHARED_DIR [ROUNDS_PER_STAGE [MODEL]]
(FAULT_SEED=N repeats a run's kill order and moments.)
"""
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time

lmpipe, shared = sys.argv[1], sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 20
name = sys.argv[4] if len(sys.argv) > 4 else "stories260K"
model = os.path.join(shared, "models", name + ".gguf")
goldens = {c["prompt"]: c["continuation_ids"]
           for c in json.load(open(os.path.join(shared, "goldens", name + ".json")))["cases"]}
seed = int(os.environ.get("FAULT_SEED", random.randrange(1 << 30)))
rng = random.Random(seed)
print(f"fault-test: seed {seed} (FAULT_SEED={seed} repeats it)", flush=True)

failures = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what, flush=True)
    if not cond:
        failures.append(what)


# ---- the requests of a round ----------------------------------------------

golden_prompts = list(goldens)[:3]
requests = []  # (name, greedy, args)
for p in golden_prompts:
    # stories260K's goldens end where the model stops; a fixture's run n_predict tokens
    extra = [] if name == "stories260K" else ["--ignore-eos"]
    requests.append((p, True, ["--prompt", p, "--temperature", "0", "--max-tokens",
                               str(len(goldens[p])), *extra]))
# long enough that a kill at a random moment of a round finds requests in
# flight (a fixture's tiny layers give 160 tokens in a few ms)
n_long = "160" if name == "stories260K" else "1500"
requests.append(("greedy-long", True, ["--prompt", "The cat sat", "--temperature", "0",
                                       "--max-tokens", n_long, "--ignore-eos"]))
for i in range(4):
    requests.append((f"seeded-{i}", False, ["--prompt", f"Once upon a time {i}", "--temperature", "0.8",
                                            "--seed", str(100 + i), "--max-tokens", n_long,
                                            "--ignore-eos"]))


def run_round(ep, kill=None):
    """The 8 requests at once; kill = (stage, delay_s) SIGKILLs that service
    `delay_s` into the round.  Returns [(rc, ids or None, stderr)]."""
    procs = [subprocess.Popen([lmpipe, "generate", "--endpoint", ep, "--ids", *args],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _, _, args in requests]
    if kill:
        time.sleep(kill[1])
        pid = service_pid(kill[0])
        if pid:
            os.kill(pid, signal.SIGKILL)
        else:
            check(False, f"no {kill[0]}-svc to kill")
    out = []
    for p in procs:
        try:
            so, se = p.communicate(timeout=60)
            ids = json.loads(so) if p.returncode == 0 and so.strip() else None
            out.append((p.returncode, ids, se.strip()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            out.append((None, None, "no final event in 60 s"))
    return out


# ---- the pipeline -----------------------------------------------------------

work = tempfile.mkdtemp(prefix="lmpipe-fault-test.")
conf = os.path.join(work, "fault.conf")
with open(conf, "w") as f:
    f.write(f"model = {model}\nthreads = 1\n"
            f"supervise.max_restarts = {3 * rounds + 10}\nsupervise.window_s = 3600\n")
up_err = open(os.path.join(work, "up.err"), "w+")
up = subprocess.Popen([lmpipe, "up", "--config", conf], stdout=subprocess.PIPE, stderr=up_err, text=True,
                      env={**os.environ, "LMPIPE_LOG": "warn"})
ep = None
for line in up.stdout:
    m = re.match(r"lmpipe up: ready on (\S+)", line)
    if m:
        ep = m.group(1)
        break
if not ep:
    up_err.seek(0)
    print("FAIL: lmpipe up did not get ready: " + up_err.read())
    sys.exit(1)
run_dir = os.path.dirname(ep[len("ipc://"):])


def service_pid(stage, wait_s=10.0):
    """The running <stage>-svc (or coordinator) child of lmpipe up (a
    restarted one may take a moment to appear)."""
    deadline = time.time() + wait_s
    while time.time() < deadline:
        try:
            kids = open(f"/proc/{up.pid}/task/{up.pid}/children").read().split()
        except OSError:
            return None
        for k in kids:
            try:
                exe = open(f"/proc/{k}/cmdline", "rb").read().split(b"\0")[0].decode()
            except OSError:
                continue
            if os.path.basename(exe) == (stage if stage == "coordinator" else f"{stage}-svc"):
                return int(k)
        time.sleep(0.01)
    return None


def stats(timeout_ms=10000):
    out = subprocess.run([lmpipe, "stats", "--endpoint", ep, "--timeout", str(timeout_ms)], capture_output=True,
                         text=True, timeout=30).stdout
    restarts = dict((k, int(v)) for k, v in re.findall(r"(\w+) (\d+)", re.search(r"^restarts:([^,]*)", out, re.M).group(1)))
    finished = dict((k, int(v)) for k, v in re.findall(r"(\w+) (\d+)", re.search(r"^finished:(.*)$", out, re.M).group(1)))
    redriven = int(re.search(r"requests re-driven (\d+)", out).group(1))
    return restarts, finished, redriven


def segments():
    return sorted(n for n in os.listdir("/dev/shm") if n.startswith(f"lmpipe-{up.pid}-"))


kills = {"tokenizer": 0, "engine": 0, "sampler": 0}
try:
    ref = run_round(ep)
    check(all(rc == 0 and ids for rc, ids, _ in ref), "the undisturbed round: 8 requests end normally")
    for (name, _, _), (_, ids, _) in zip(requests, ref):
        if name in goldens:
            check(ids == goldens[name], f"undisturbed: '{name}' gives its golden")
    t0 = time.time()
    run_round(ep)
    round_s = time.time() - t0

    order = [s for s in kills for _ in range(rounds)]
    rng.shuffle(order)
    lost, differ_greedy, differ_seeded, golden_bad = [], [], [], []
    t_start = time.time()
    for n, stage in enumerate(order):
        # The coordinator has seen every earlier restart before the next
        # kill: a service killed again before it rejoined would be one
        # restart the coordinator could not see.
        deadline = time.time() + 15
        while stats()[0] != kills and time.time() < deadline:
            time.sleep(0.05)
        delay = rng.uniform(0, round_s)
        got = run_round(ep, (stage, delay))
        kills[stage] += 1
        for (name, greedy, _), (rc, ids, err), (_, want, _) in zip(requests, got, ref):
            tag = f"round {n + 1} ({stage} killed at {delay:.3f} s): {name}"
            if rc != 0 or ids is None:
                lost.append(f"{tag}: status {rc}: {err}")
            elif ids != want:
                (differ_greedy if greedy else differ_seeded).append(f"{tag}: {len(ids)} tokens, differ at "
                    f"{next((i for i, (a, b) in enumerate(zip(ids, want)) if a != b), min(len(ids), len(want)))}")
            if ids is not None and name in goldens and ids != goldens[name]:
                golden_bad.append(tag)
    print(f"fault-test: {len(order)} kills in {time.time() - t_start:.1f} s (a round takes {round_s:.2f} s "
          f"undisturbed)", flush=True)
    for what, items in (("lost", lost), ("greedy differing", differ_greedy), ("seeded differing", differ_seeded)):
        for x in items[:5]:
            print(f"  {what}: {x}")
    n_req = len(requests) * len(order)
    check(not lost, f"no request lost: {n_req - len(lost)} of {n_req} ended normally")
    check(not differ_greedy and not golden_bad,
          f"greedy requests identical to the undisturbed round and the goldens ({len(differ_greedy)} differ)")
    check(not differ_seeded, f"seeded requests identical to the undisturbed round ({len(differ_seeded)} differ; "
          "needs sampler-svc's position-derived draws and SamplerOpen.generated_ids)")

    deadline = time.time() + 15
    while stats()[0] != kills and time.time() < deadline:
        time.sleep(0.05)
    restarts, finished, redriven = stats()
    # a kill that finds no request in flight proves nothing: some must have
    # been re-driven (prefilled again from prompt + tokens so far)
    check(redriven > 0, f"requests re-driven after engine and sampler kills: {redriven}")
    check(restarts == kills, f"the coordinator's stage_restarts {restarts} equal the kills {kills}")
    up_err.seek(0)
    log = up_err.read()
    for stage, k in kills.items():
        said = len(re.findall(rf"lmpipe: {stage}-svc exited .*; restarting it in", log))
        check(said == k, f"lmpipe up restarted {stage}-svc {said} times, once a kill ({k})")
    total = sum(finished.values())
    sent = len(requests) * (len(order) + 2)
    check(total == sent and finished.get("error", 0) == 0,
          f"one finish per request, none an error: {total} finishes for {sent} requests ({finished})")

    # The coordinator killed between rounds: lmpipe up restarts it, and the
    # services, which stayed up, take the new one as their controller (its
    # higher epoch) once the old one's connections are gone.
    os.kill(service_pid("coordinator"), signal.SIGKILL)
    time.sleep(0.2)
    deadline = time.time() + 20
    back = False
    while not back and time.time() < deadline:
        try:
            back = stats(1000)[0] == {"tokenizer": 0, "engine": 0, "sampler": 0}
        except (subprocess.TimeoutExpired, AttributeError):
            time.sleep(0.1)
    got = run_round(ep) if back else []
    check(back and [ids for _, ids, _ in got] == [ids for _, ids, _ in ref],
          "a restarted coordinator takes over the services and a round gives the undisturbed tokens")

    # A strategy swap made live survives a sampler restart: the coordinator
    # replays it to the new sampler, whose store starts from the default.
    def sampler_ctl(ep_, *cmd):
        r = subprocess.run([lmpipe, "sampler", "--endpoint", ep_, *cmd], capture_output=True, text=True,
                           timeout=30)
        try:
            return json.loads(r.stdout)
        except ValueError:
            return {}
    swap = sampler_ctl(ep, "set", '{"top_k": 7, "min_p": 0.25}')
    os.kill(service_pid("sampler"), signal.SIGKILL)
    deadline = time.time() + 15
    while stats()[0].get("sampler") != 1 and time.time() < deadline:
        time.sleep(0.05)
    now = sampler_ctl("ipc://" + os.path.join(run_dir, "sampler.sock"), "get").get("params", {})
    check(swap.get("ok") and now.get("top_k") == 7 and abs(now.get("min_p", 0) - 0.25) < 1e-6,
          f"a live strategy swap survives a sampler restart (top_k {now.get('top_k')}, min_p {now.get('min_p')})")
    segs = segments()
    socks = sorted(os.listdir(run_dir))
    check(len(segs) == 1, f"one ring segment of the pipeline's while it runs: {segs}")
    # sampler-state.json: the sampler's strategy store (docs/SAMPLER.md);
    # lmpipe.conf: the run's config every (re)started service reads
    # (docs/DEPLOY.md); both kept for the run and removed with the folder
    check(socks == ["coordinator.sock", "engine.sock", "lmpipe.conf", "sampler-state.json", "sampler.sock",
                    "tokenizer.sock"],
          f"the run folder holds the four sockets, the run's config and the sampler's state file only: {socks}")
finally:
    up.send_signal(signal.SIGTERM)
    try:
        rc = up.wait(timeout=30)
    except subprocess.TimeoutExpired:
        up.kill()
        rc = up.wait()
check(rc == 0, f"lmpipe up stops cleanly after the kills (status {rc})")
check(not segments(), f"no segment left: {segments()}")
check(not os.path.exists(run_dir), f"no run folder left: {run_dir}")
if failures:
    up_err.seek(0)
    tail = up_err.read().splitlines()[-15:]
    print("lmpipe up's log, last lines:\n  " + "\n  ".join(tail))
subprocess.run(["rm", "-rf", work])
sys.exit(1 if failures else 0)
