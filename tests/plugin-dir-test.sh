#!/bin/bash
# sampler-svc's plugin folder over the wire (`lmpipe sampler load`), tried
# as an attacker would with test-marker.so, whose constructor creates the
# file named by LP_TEST_PLUGIN_MARKER: without --plugin-dir every load is
# refused; with one, a library outside it, a symlink out of it and one in a
# world-writable subfolder are refused and the marker never appears; the
# one inside loads (and the marker appears).  A world-writable
# --plugin-dir stops the service at start with a clear error.  Then
# `lmpipe up --config` passes sampler.plugin_dir and max_queued_per_client
# to the services it starts.
# usage: plugin-dir-test.sh BUILD_DIR SHARED_DIR
set -u
build=$1
shared=$2
model=$shared/models/stories260K.gguf
lmpipe=$build/tools/lmpipe
run=$(mktemp -d /tmp/lmpipe-plugin-dir-test.XXXXXX)
# the plugin folders in the build tree (a checkout under /tmp passes too: a
# root-owned sticky directory above a plugin folder is trusted, docs/SECURITY.md)
work=$build/tests/plugin-dir-test
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM $p 2>/dev/null; done
    for p in "${pids[@]}"; do wait $p 2>/dev/null; done
    rm -rf "$run" "$work"
}
trap cleanup EXIT
export LMPIPE_PARENT_PID=$$ # die with this script
fail=0

rm -rf "$work"
mkdir -p "$work/plugins/shared" "$work/outside"
chmod 0755 "$work" "$work/plugins" "$work/outside"
chmod 0777 "$work/plugins/shared"
for d in "$work/plugins" "$work/plugins/shared" "$work/outside"; do
    install -m 0755 "$build/sampler-svc/test-marker.so" "$d/marker.so"
done
ln -s "$work/outside/marker.so" "$work/plugins/link.so"
export LP_TEST_PLUGIN_MARKER=$work/constructor-ran

start() { # name, args...
    local name=$1; shift
    "$build/sampler-svc/sampler-svc" --model "$model" --endpoint "ipc://$run/$name" "$@" 2>"$run/$name.log" &
    pids+=($!)
}
# refused LABEL ENDPOINT PATH WHY: the load fails naming WHY, nothing was opened
refused() {
    local out
    out=$(timeout 30 "$lmpipe" sampler --endpoint "$2" load "$3" 2>&1) &&
        { echo "FAIL: $1: loaded: $out"; fail=1; return; }
    echo "$out" | grep -qF -- "$4" || { echo "FAIL: $1: no '$4' in: $out"; fail=1; return; }
    [ -e "$LP_TEST_PLUGIN_MARKER" ] && { echo "FAIL: $1: the library was opened"; fail=1; return; }
    echo "ok: $1 refused, nothing opened"
}

start none
start dir --plugin-dir "$work/plugins"
"$build/sampler-svc/sampler-svc" --model "$model" --endpoint "ipc://$run/bad" \
    --plugin-dir "$work/plugins/shared" 2>"$run/bad.log"
status=$?
[ $status -ne 0 ] && grep -q "plugin-dir: plugin folder .*shared is writable by others" "$run/bad.log" &&
    echo "ok: a world-writable --plugin-dir stops the service: $(cat "$run/bad.log")" ||
    { echo "FAIL: world-writable --plugin-dir: status $status, $(cat "$run/bad.log")"; fail=1; }

refused "no --plugin-dir" "ipc://$run/none" "$work/plugins/marker.so" "--plugin-dir DIR"
refused "outside the folder" "ipc://$run/dir" "$work/outside/marker.so" "outside the plugin folder"
refused "'..' out of the folder" "ipc://$run/dir" "../outside/marker.so" "outside the plugin folder"
refused "a symlink out of the folder" "ipc://$run/dir" "link.so" "outside the plugin folder"
refused "a world-writable subfolder" "ipc://$run/dir" "shared/marker.so" "shared is writable by others"

out=$(timeout 30 "$lmpipe" sampler --endpoint "ipc://$run/dir" load marker.so 2>&1)
if echo "$out" | grep -q '"name":"marker"' && [ -e "$LP_TEST_PLUGIN_MARKER" ]; then
    echo "ok: a plugin inside the folder loads"
else
    echo "FAIL: the plugin inside the folder: $out"; fail=1
fi

# lmpipe up: the config keys reach sampler-svc and the coordinator
rm -f "$LP_TEST_PLUGIN_MARKER"
mkdir -m 0700 "$run/up"
cat >"$run/up.conf" <<CONF
model = $model
run_dir = $run/up
sampler.plugin_dir = $work/plugins
max_queued_per_client = 3
CONF
"$lmpipe" up --config "$run/up.conf" >"$run/up.out" 2>"$run/up.err" &
up=$!
pids+=($up)
for _ in $(seq 1 300); do
    grep -q "ready on" "$run/up.out" 2>/dev/null && break
    kill -0 $up 2>/dev/null || break
    sleep 0.1
done
args=$(ps -o args= --ppid $up)
# each service gets the run's config and its name, and reads its own keys
echo "$args" | grep -q -- "sampler-svc --config $run/up/lmpipe.conf --service sampler" &&
    echo "$args" | grep -q -- "coordinator --config $run/up/lmpipe.conf --service coordinator" &&
    grep -qx "sampler.plugin_dir = $work/plugins" "$run/up/lmpipe.conf" &&
    grep -qx "max_queued_per_client = 3" "$run/up/lmpipe.conf" &&
    echo "ok: lmpipe up passes sampler.plugin_dir and max_queued_per_client (in the run's config)" ||
    { echo "FAIL: lmpipe up's services: $args $(cat "$run/up.err" "$run/up/lmpipe.conf")"; fail=1; }
out=$(timeout 30 "$lmpipe" sampler --endpoint "ipc://$run/up/sampler.sock" load marker.so 2>&1)
echo "$out" | grep -q '"name":"marker"' && [ -e "$LP_TEST_PLUGIN_MARKER" ] &&
    echo "ok: a plugin loads from sampler.plugin_dir under lmpipe up" ||
    { echo "FAIL: load under lmpipe up: $out"; fail=1; }
exit $fail
