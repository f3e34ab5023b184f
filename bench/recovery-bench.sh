#!/bin/bash
# Recovery time: from the SIGKILL of a service under `lmpipe up` to the
# next token a client gets, p50/p99 per stage (docs/PIPELINE.md, "Faults
# and recovery").
#
# One `lmpipe up` (threads 1) on the model; K kills of each of engine-svc
# and sampler-svc, each during a streaming greedy request (ignore_eos):
# the time from the kill to the first piece after the gap the kill made.
# tokenizer-svc does not stand in a running request's path (the sampler
# gives token text), so its figure is from the kill to the first token of
# a request sent right after it.  Between kills the coordinator has seen
# the restart (its stage_restarts count) and the service has run 0.3 s, so
# that each kill is one failure, not a crash loop (which backs off).
# STAGES="engine sampler tokenizer" picks stages; VERBOSE=1 lists the times.
#
# usage: bench/recovery-bench.sh [-b BUILD] [-k KILLS] [MODEL]
#        (MODEL default ../shared/models/stories260K.gguf)
set -u
build=build kills=20
while getopts "b:k:" o; do
    case $o in
    b) build=$OPTARG ;; k) kills=$OPTARG ;;
    *) sed -n 2,18p "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
model=$(realpath "${1:-../shared/models/stories260K.gguf}")
lmpipe=$(realpath "$build/tools/lmpipe")
exec python3 - "$lmpipe" "$model" "$kills" <<'PY'
import os, re, select, signal, subprocess, sys, tempfile, time

lmpipe, model, kills = sys.argv[1], sys.argv[2], int(sys.argv[3])
work = tempfile.mkdtemp(prefix="lmpipe-recovery-bench.")
conf = os.path.join(work, "up.conf")
open(conf, "w").write(f"model = {model}\nthreads = 1\nsupervise.max_restarts = {3 * kills + 10}\n"
                      "supervise.window_s = 3600\n")
up = subprocess.Popen([lmpipe, "up", "--config", conf], stdout=subprocess.PIPE,
                      stderr=open(os.path.join(work, "up.err"), "w"), text=True,
                      env={**os.environ, "LMPIPE_LOG": "error"})
ep = None
for line in up.stdout:
    m = re.match(r"lmpipe up: ready on (\S+)", line)
    if m:
        ep = m.group(1)
        break
if not ep:
    sys.exit("lmpipe up did not get ready: " + open(os.path.join(work, "up.err")).read())


def pid_of(stage):
    for _ in range(1000):
        for k in open(f"/proc/{up.pid}/task/{up.pid}/children").read().split():
            try:
                exe = open(f"/proc/{k}/cmdline", "rb").read().split(b"\0")[0].decode()
            except OSError:
                continue
            if os.path.basename(exe) == f"{stage}-svc":
                return int(k)
        time.sleep(0.01)
    sys.exit(f"no {stage}-svc")


def restarts():
    out = subprocess.run([lmpipe, "stats", "--endpoint", ep], capture_output=True, text=True).stdout
    return dict((k, int(v)) for k, v in re.findall(r"(\w+) (\d+)", re.search(r"^restarts:([^,]*)", out, re.M).group(1)))


def generate(n):
    return subprocess.Popen([lmpipe, "generate", "--endpoint", ep, "--stream", "--prompt", "Once upon a time",
                             "--temperature", "0", "--ignore-eos", "--max-tokens", str(n)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def pieces(p, until):
    """Arrival times of p's output chunks until it ends or `until`."""
    ts = []
    fd = p.stdout.fileno()
    while time.monotonic() < until:
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            if not os.read(fd, 65536):
                break
            ts.append(time.monotonic())
    return ts


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


seen = restarts()
res = {}
for stage in os.environ.get("STAGES", "engine sampler tokenizer").split():
    res[stage] = []
    for k in range(kills):
        while restarts() != seen:  # the coordinator has seen the last restart
            time.sleep(0.02)
        # One failure, not a crash loop: a service killed within 250 ms of
        # its start is restarted with a growing backoff.
        time.sleep(0.3)
        if stage == "tokenizer":
            os.kill(pid_of(stage), signal.SIGKILL)
            t_kill = time.monotonic()
            p = generate(4)
            ts = pieces(p, t_kill + 30)
        else:
            p = generate(1500)
            ts = pieces(p, time.monotonic() + 0.15)  # streaming by now
            os.kill(pid_of(stage), signal.SIGKILL)
            t_kill = time.monotonic()
            ts = pieces(p, t_kill + 30)
            # Pieces already on their way arrive just after the kill: the
            # recovery ends with the first piece after the longest gap.
            gaps = [(b - a, b) for a, b in zip([t_kill] + ts, ts)]
            ts = [max(gaps)[1]] if gaps else []
        p.kill()
        p.wait()
        seen[stage] += 1
        if ts:
            res[stage].append((ts[0] - t_kill) * 1000)
    if os.environ.get("VERBOSE"): print(sorted(round(x) for x in res[stage]))
    print(f"{stage}: {len(res[stage])} kills, kill -> next token p50 {pct(res[stage], 0.5):.0f} ms, "
          f"p99 {pct(res[stage], 0.99):.0f} ms, max {max(res[stage]):.0f} ms", flush=True)
up.send_signal(signal.SIGTERM)
up.wait()
subprocess.run(["rm", "-rf", work])
PY
