#!/bin/bash
# The request schema at both doors (tests/nats/probe-test.mjs says what it
# checks): `lmpipe up --config` with http.listen and http.cors_origins on
# stories260K, and, where nats-server and lmpipe-nats are there, a
# nats-server and the bridge started by the script.  Without them the NATS
# half is skipped, the HTTP half still runs.
# usage: probe-test.sh LMPIPE LMPIPE_NATS SHARED_DIR
set -u
lmpipe=$1
bridge=$2
shared=$3
here=$(cd "$(dirname "$0")" && pwd)
nats_dir=$here/../nats
command -v node >/dev/null || { echo "FAIL: node is not installed (deploy/setup-debian.sh)"; exit 1; }
nats_ok=0
if command -v nats-server >/dev/null && [ -x "$bridge" ]; then
    [ -d "$nats_dir/node_modules/nats" ] ||
        { echo "FAIL: $nats_dir/node_modules/nats missing: run npm ci in tests/nats (deploy/setup-debian.sh)"; exit 1; }
    nats_ok=1
fi
work=$(mktemp -d /tmp/lmpipe-probe-test.XXXXXX)
up=
trap '[ -n "$up" ] && kill -TERM $up 2>/dev/null && wait $up; rm -rf "$work"' EXIT
port=$(python3 "$here/../free-ports.py")
model=$shared/models/stories260K.gguf
cat >"$work/lmpipe.conf" <<CONF
model = $model
endpoint = ipc://$work/client.sock
http.listen = 127.0.0.1:$port
http.cors_origins = https://app.example, https://other.example
CONF
"$lmpipe" up --config "$work/lmpipe.conf" >"$work/up.out" 2>"$work/up.err" &
up=$!
base=http://127.0.0.1:$port
for _ in $(seq 1 300); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$base/health")" = 200 ] && break
    kill -0 $up 2>/dev/null || break
    sleep 0.1
done
[ "$(curl -s -o /dev/null -w '%{http_code}' "$base/health")" = 200 ] ||
    { echo "FAIL: lmpipe up did not get healthy on $base: $(cat "$work/up.out" "$work/up.err")"; exit 1; }
LMPIPE_HTTP=$base LMPIPE=$lmpipe LMPIPE_NATS=$bridge COORD="ipc://$work/client.sock" MODEL=$model WORK=$work \
    NATS_OK=$nats_ok timeout 900 node "$nats_dir/probe-test.mjs"
rc=$?
if grep -l "Sanitizer\|runtime error:" "$work"/bridge-*.log 2>/dev/null; then
    echo "FAIL: a sanitizer report in the bridge's log"
    rc=1
fi
exit $rc
