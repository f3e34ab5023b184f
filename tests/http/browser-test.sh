#!/bin/bash
# The web page at / in Debian's headless chromium: `lmpipe up --http` with
# stories260K and an API and admin key, then browser-driver.mjs holds a
# streamed two-turn chat on the page and swaps the sampler strategy from the
# page's panel in the middle of the second reply (see the driver for the
# checks).  The screenshot is kept as BUILD_DIR/meson-logs/http-page.png.
# usage: browser-test.sh LMPIPE SHARED_DIR BUILD_DIR PACE_PLUGIN
set -u
lmpipe=$1
shared=$2
build=$3
pace=$4
here=$(cd "$(dirname "$0")" && pwd)
api_key=page-test-key
admin_key=page-test-admin
shot=$build/meson-logs/http-page.png

# CI installs them through deploy/setup-debian.sh: missing is a failure
for tool in chromium node curl python3; do
    command -v $tool >/dev/null || { echo "FAIL: $tool is not installed (deploy/setup-debian.sh)"; exit 1; }
done
work=$(mktemp -d /tmp/lmpipe-page-test.XXXXXX)
up=
trap '[ -n "$up" ] && kill -TERM $up 2>/dev/null && wait $up; rm -rf "$work"' EXIT

model=$shared/models/stories260K.gguf
port=$(python3 "$(dirname "$0")/../free-ports.py")
"$lmpipe" up --model "$model" --http 127.0.0.1:$port --api-key "$api_key" \
    --admin-key "$admin_key" --plugin-dir "$(dirname "$pace")" >"$work/out" 2>"$work/err" &
up=$!
ready=
for _ in $(seq 1 300); do
    if curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$port/health 2>/dev/null | grep -q 200; then
        ready=1
        break
    fi
    kill -0 $up 2>/dev/null || break
    sleep 0.1
done
[ -n "$ready" ] || { echo "FAIL: the gateway did not get healthy on port $port: $(cat "$work/err")"; exit 1; }

mkdir -p "$(dirname "$shot")"
rm -f "$shot"
node "$here/browser-driver.mjs" http://127.0.0.1:$port/ \
    "$api_key" "$admin_key" "$shot" "$pace"
rc=$?
[ $rc -eq 0 ] && [ ! -s "$shot" ] && { echo "FAIL: no screenshot at $shot"; rc=1; }
[ $rc -eq 0 ] && echo "ok: the page streams, keeps the conversation and shows the swap"
exit $rc
