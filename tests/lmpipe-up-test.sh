#!/bin/bash
# `lmpipe up` with the example config: it starts the four services, `lmpipe
# generate` gets a stories260K golden continuation from it, and SIGTERM (then
# SIGINT, then a killed service) leaves nothing behind: no process, no
# shared-memory segment, no socket file, no run folder.
# usage: lmpipe-up-test.sh LMPIPE SHARED_DIR SOURCE_DIR
set -u
lmpipe=$1
shared=$2
src=$3
model=$shared/models/stories260K.gguf
fail=0
work=$(mktemp -d /tmp/lmpipe-up-test.XXXXXX)
trap 'kill -KILL $up 2>/dev/null; rm -rf "$work"' EXIT

start_up() { # extra args...
    rm -f "$work/out" "$work/err" # no stale "ready" line from the last run
    ep=
    "$lmpipe" up --config "$src/deploy/lmpipe.conf" --model "$model" "$@" >"$work/out" 2>"$work/err" &
    up=$!
    for _ in $(seq 1 300); do
        ep=$(sed -n 's/^lmpipe up: ready on //p' "$work/out" 2>/dev/null)
        [ -n "$ep" ] && break
        kill -0 $up 2>/dev/null || break
        sleep 0.1
    done
    [ -n "$ep" ] || { echo "FAIL: lmpipe up did not get ready: $(cat "$work/err")"; fail=1; return 1; }
    kids=$(ps -o pid= --ppid $up | tr -d ' ')
    shm=$(ps -o args= --ppid $up | sed -n 's/.*--shm-name \/\([^ ]*\).*/\1/p')
    dir=${ep#ipc://}
    dir=${dir%/*}
    [ $(echo "$kids" | wc -w) -eq 4 ] || { echo "FAIL: $(echo $kids | wc -w) children, not 4"; fail=1; }
    return 0
}

check_clean() { # what
    for _ in $(seq 1 100); do kill -0 $up 2>/dev/null || break; sleep 0.1; done
    kill -0 $up 2>/dev/null && { echo "FAIL ($1): lmpipe up still runs"; fail=1; }
    for _ in $(seq 1 100); do # the services stop on their own after a killed lmpipe
        alive=0
        for k in $kids; do kill -0 $k 2>/dev/null && alive=1; done
        [ $alive -eq 0 ] && break
        sleep 0.1
    done
    for k in $kids; do
        kill -0 $k 2>/dev/null && { echo "FAIL ($1): service $k still runs"; fail=1; }
    done
    [ -n "$shm" ] && [ -e "/dev/shm/$shm" ] && { echo "FAIL ($1): /dev/shm/$shm left"; fail=1; }
    [ -e "$dir" ] && { echo "FAIL ($1): $dir left: $(ls "$dir")"; fail=1; }
    echo "ok ($1): nothing left behind"
}

# Generate through the running pipeline: the golden greedy continuation.
if start_up; then
    ids=$(timeout 60 "$lmpipe" generate --endpoint "$ep" --prompt "Lily and Tom went to the park" \
          --temperature 0 --max-tokens 64 --ids)
    python3 - "$shared/goldens/stories260K.json" "$ids" <<'PY' || fail=1
import json, sys
g = json.load(open(sys.argv[1]))
case = next(c for c in g["cases"] if c["prompt"] == "Lily and Tom went to the park")
got = json.loads(sys.argv[2]) if sys.argv[2] else []
if got != case["continuation_ids"]:
    print("FAIL: lmpipe generate ids differ from the golden"); sys.exit(1)
print("ok: lmpipe generate gave the golden continuation")
PY
    kill -TERM $up
    check_clean SIGTERM
    wait $up || { echo "FAIL: lmpipe up exited $? after SIGTERM (a service did not stop cleanly)"; fail=1; }
fi

if start_up --no-shm; then
    [ -z "$shm" ] || { echo "FAIL: --no-shm still passed a segment name"; fail=1; }
    kill -INT $up
    check_clean SIGINT
    wait $up || { echo "FAIL: lmpipe up exited $? after SIGINT"; fail=1; }
fi

# A service that dies with supervision off (supervise.max_restarts = 0): lmpipe
# up stops the others and cleans up after it.  (With supervision it restarts
# the service: tests/fault-test.py.)
sed 's/^supervise.max_restarts = .*/supervise.max_restarts = 0/' "$src/deploy/lmpipe.conf" >"$work/nosup.conf"
grep -q "^supervise.max_restarts = 0" "$work/nosup.conf" || { echo "FAIL: no supervise.max_restarts in the example config"; fail=1; }
if start_up --config "$work/nosup.conf"; then
    engine=$(ps -o pid=,args= --ppid $up | awk '/engine-svc/ {print $1}')
    kill -KILL $engine
    check_clean "engine killed"
    wait $up
    [ $? -ne 0 ] || { echo "FAIL: lmpipe up exited 0 after a service died"; fail=1; }
fi

# lmpipe up itself killed (no chance to clean up): the services get SIGTERM
# from the kernel (PR_SET_PDEATHSIG), stop cleanly and remove their ring and
# socket files themselves.
if start_up; then
    kill -KILL $up
    wait $up 2>/dev/null
    check_clean "lmpipe up killed"
fi

# Every endpoint on tcp:// instead of ipc:// (one host: the logits still go
# through shared memory, which the hello decides), without CURVE keys
# (allow_insecure_tcp; tests/curve-test.sh and curve_test.c cover CURVE).
port=$(python3 "$(dirname "$0")/free-ports.py" 4) || exit 1
cat >"$work/tcp.conf" <<CONF
model = $model
endpoint = tcp://127.0.0.1:$port
tokenizer.endpoint = tcp://127.0.0.1:$((port + 1))
engine.endpoint = tcp://127.0.0.1:$((port + 2))
sampler.endpoint = tcp://127.0.0.1:$((port + 3))
threads = 1
allow_insecure_tcp = true
CONF
rm -f "$work/out" "$work/err"
"$lmpipe" up --config "$work/tcp.conf" >"$work/out" 2>"$work/err" &
up=$!
ep=
for _ in $(seq 1 300); do
    ep=$(sed -n 's/^lmpipe up: ready on //p' "$work/out" 2>/dev/null)
    [ -n "$ep" ] && break
    kill -0 $up 2>/dev/null || break
    sleep 0.1
done
if [ "$ep" = "tcp://127.0.0.1:$port" ]; then
    ids=$(timeout 60 "$lmpipe" generate --endpoint "$ep" --prompt "Lily and Tom went to the park" \
          --temperature 0 --max-tokens 64 --ids)
    python3 - "$shared/goldens/stories260K.json" "$ids" <<'PY' || fail=1
import json, sys
g = json.load(open(sys.argv[1]))
case = next(c for c in g["cases"] if c["prompt"] == "Lily and Tom went to the park")
if (json.loads(sys.argv[2]) if sys.argv[2] else []) != case["continuation_ids"]:
    print("FAIL: tcp:// pipeline ids differ from the golden"); sys.exit(1)
print("ok: tcp:// endpoints give the golden continuation")
PY
    kill -TERM $up
    wait $up || { echo "FAIL: lmpipe up (tcp) exited $?"; fail=1; }
else
    echo "FAIL: lmpipe up with tcp:// endpoints did not get ready: $(cat "$work/err")"; fail=1
    kill -KILL $up 2>/dev/null
fi

# A bad config is a clear error.
printf 'model = x\nbogus_key = 1\n' >"$work/bad.conf"
out=$("$lmpipe" up --config "$work/bad.conf" 2>&1)
echo "$out" | grep -q bogus_key || { echo "FAIL: bad config: $out"; fail=1; }
exit $fail
