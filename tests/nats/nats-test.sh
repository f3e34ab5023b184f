#!/bin/bash
# Runs one of the NATS bridge's node tests (bridge-test.mjs, drain-test.mjs,
# fault-test.mjs, up-test.mjs) against `lmpipe up` on stories260K: the node script starts
# its own nats-server -js on loopback and the bridge.  Skips (77) only where
# nats-server or the bridge (built where libnats-dev is installed) is absent.
# usage: nats-test.sh LMPIPE LMPIPE_NATS SHARED_DIR SCRIPT.mjs [lmpipe up flags...]
set -u
lmpipe=$1
bridge=$2
shared=$3
script=$4
shift 4
here=$(cd "$(dirname "$0")" && pwd)
command -v nats-server >/dev/null || { echo "SKIP: nats-server is not installed (deploy/setup-debian.sh)"; exit 77; }
[ -x "$bridge" ] || { echo "SKIP: lmpipe-nats was not built (libnats-dev is missing)"; exit 77; }
command -v node >/dev/null || { echo "FAIL: node is not installed (deploy/setup-debian.sh)"; exit 1; }
[ -d "$here/node_modules/nats" ] || { echo "FAIL: $here/node_modules/nats missing: run npm ci in tests/nats (deploy/setup-debian.sh)"; exit 1; }
work=$(mktemp -d /tmp/lmpipe-nats-test.XXXXXX)
up=
trap '[ -n "$up" ] && kill -TERM $up 2>/dev/null && wait $up; rm -rf "$work"' EXIT
model=$shared/models/stories260K.gguf
# up-test.mjs starts its own `lmpipe up --config`.
if [ "$script" != up-test.mjs ]; then
    # the pace plugin's folder (the build tree) is the sampler's plugin folder
    plugins=()
    [ -n "${PACE:-}" ] && plugins=(--plugin-dir "$(dirname "$PACE")")
    "$lmpipe" up --model "$model" --endpoint "ipc://$work/client.sock" "${plugins[@]}" "$@" \
        >"$work/up.out" 2>"$work/up.err" &
    up=$!
    for _ in $(seq 1 300); do
        grep -q "^lmpipe up: ready on" "$work/up.out" && break
        kill -0 $up 2>/dev/null || break
        sleep 0.1
    done
    grep -q "^lmpipe up: ready on" "$work/up.out" || { echo "FAIL: lmpipe up: $(cat "$work/up.out" "$work/up.err")"; exit 1; }
fi
LMPIPE=$lmpipe LMPIPE_NATS=$bridge COORD="ipc://$work/client.sock" MODEL=$model WORK=$work \
    GOLDENS=$shared/goldens timeout 600 node "$here/$script"
rc=$?
# a bridge built with sanitizers reports into its log (an exit by signal or
# a restart would hide it from the node script)
if grep -l "Sanitizer\|runtime error:" "$work"/bridge-*.log 2>/dev/null; then
    echo "FAIL: a sanitizer report in the bridge's log"
    rc=1
fi
if [ $rc -ne 0 ]; then
    for f in "$work"/bridge-*.log; do [ -f "$f" ] && { echo "--- $f"; tail -30 "$f"; }; done
fi
exit $rc
