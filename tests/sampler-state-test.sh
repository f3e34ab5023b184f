#!/bin/bash
# sampler-svc --state-file: the strategy store survives a SIGKILL.  A swap,
# a plugin load, another swap and a rollback; the sampler is killed and
# started again with the same flags, and `lmpipe sampler get` shows the
# same params, plugins and version, a rollback still goes back, and the
# next change gets the next version (versions never go backwards).  A
# plugin that is refused at the restart (now writable by others) is
# reported in the log and left out, under a new version.  A state file
# that is not one stops the service with an error naming it; a change
# that cannot be saved fails and changes nothing.
# usage: sampler-state-test.sh BUILD_DIR SHARED_DIR
set -u
build=$1
shared=$2
model=$shared/models/stories260K.gguf
lmpipe=$build/tools/lmpipe
svc=$build/sampler-svc/sampler-svc
run=$(mktemp -d /tmp/lmpipe-sampler-state-test.XXXXXX)
# the plugin folder in the build tree (a checkout under /tmp passes too: a
# root-owned sticky directory above a plugin folder is trusted, docs/SECURITY.md)
work=$build/tests/sampler-state-test
pid=
cleanup() {
    [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$run" "$work"
}
trap cleanup EXIT
export LMPIPE_PARENT_PID=$$ # die with this script
export LMPIPE_LOG=info      # the restore line
fail=0
ok() { echo "ok: $1"; }
bad() { echo "FAIL: $1"; fail=1; }

rm -rf "$work"
mkdir -p "$work/plugins"
chmod 0755 "$work" "$work/plugins"
install -m 0755 "$build/sampler-svc/mask-tokens.so" "$work/plugins/mask-tokens.so"
state=$work/sampler-state.json
ep=ipc://$run/sampler.sock

start() { # log name; the flags are the same every time
    "$svc" --model "$model" --endpoint "$ep" --plugin-dir "$work/plugins" \
        --state-file "$state" 2>"$run/$1.log" &
    pid=$!
}
kill9() {
    kill -KILL "$pid" && wait "$pid" 2>/dev/null
    pid=
}
ctl() { timeout 30 "$lmpipe" sampler --endpoint "$ep" "$@" 2>&1; }
# the strategy part of a reply: from "version" on ("changed" is per op)
strategy() { sed 's/.*"version"/"version"/'; }

start first
ctl set '{"top_k":7,"temperature":0.5}' >/dev/null || bad "set: $(ctl get)"
ctl load mask-tokens.so '5,9' >/dev/null || bad "load"
ctl set '{"min_p":0.2,"samplers":["plugin:mask-tokens","top_k","min_p","temperature"]}' \
    >/dev/null || bad "set with the plugin step"
ctl set '{"top_p":0.5}' >/dev/null || bad "set top_p"
ctl rollback >/dev/null || bad "rollback"
before=$(ctl get | strategy)
echo "$before" | grep -q '"version":6' || bad "the version before the kill: $before"
echo "$before" | grep -q '"name":"mask-tokens".*"config":"5,9"' || bad "plugin: $before"
[ -f "$state" ] && [ "$(stat -c %a "$state")" = 600 ] || bad "state file missing or not 0600"
ls "$work"/sampler-state.json.tmp.* >/dev/null 2>&1 && bad "a temp file was left behind"

kill9
start second
after=$(ctl get | strategy)
[ "$after" = "$before" ] && ok "after SIGKILL and restart: the same params, plugins and version" ||
    bad "after restart: $after, before: $before"
grep -q "strategy version 6 and 3 earlier ones restored" "$run/second.log" ||
    bad "no restore line: $(cat "$run/second.log")"
# the history came back too: rollback gives the strategy of version 3 (the
# load, before min_p 0.2)
rb=$(ctl rollback)
echo "$rb" | grep -q '"changed":7' && echo "$rb" | grep -q '"name":"mask-tokens"' &&
    echo "$rb" | grep -q '"min_p":0.05' && ok "rollback after the restart: $(echo "$rb" | cut -c1-60)" ||
    bad "rollback after the restart: $rb"
next=$(ctl set '{"top_k":3}')
echo "$next" | grep -q '"changed":8' && ok "the next change is version 8" || bad "next change: $next"

# a plugin refused at the restart: reported, left out, a new version
kill9
chmod 0666 "$work/plugins/mask-tokens.so"
start third
got=$(ctl get | strategy)
if grep -q 'plugin "mask-tokens" .* is not reloaded.*writable by others' "$run/third.log" &&
    grep -q "version 8 came back without a plugin: it is version 9 now" "$run/third.log" &&
    echo "$got" | grep -q '"version":9' && echo "$got" | grep -q '"plugins":\[\]' &&
    ! echo "$got" | grep -q 'plugin:'; then
    ok "a refused plugin is reported and left out: $(grep -o 'plugin "mask.*' "$run/third.log" | head -1)"
else
    bad "refused plugin: $got; log: $(cat "$run/third.log")"
fi
chmod 0755 "$work/plugins/mask-tokens.so"

# a change that cannot be saved fails and changes nothing (a folder where
# the temp file goes: permissions would not stop root)
mkdir "$state.tmp.$pid"
out=$(ctl set '{"top_k":11}')
now=$(ctl get | strategy)
rmdir "$state.tmp.$pid"
echo "$out" | grep -q "state file" && [ "$now" = "$got" ] &&
    ok "an unsaved change is refused: $(echo "$out" | grep -o 'state file[^"]*' | head -1)" ||
    bad "unsaved change: $out; now $now"
kill9

# DRY breakers of multi-byte characters survive a restart: a text breaker
# over 40 bytes is cut before the character that crosses the limit (it was
# cut inside one, written as invalid UTF-8, and the restarted sampler
# refused its own state file)
start utf8
brk=$(printf '\xe2\x82\xac%.0s' $(seq 1 14)) # 14 x U+20AC: 42 bytes
out=$(ctl set "{\"dry_multiplier\":0.8,\"dry_sequence_breakers\":[\"$brk\",\"\u00fc\",\"\\n\"]}")
before=$(ctl get | strategy)
kill9
start utf8-again
after=$(ctl get | strategy)
want=$(printf '\xe2\x82\xac%.0s' $(seq 1 13)) # 39 bytes: whole characters
if echo "$out" | grep -q '"ok":true' && [ -n "$after" ] && [ "$after" = "$before" ] &&
    echo "$after" | grep -qF "\"dry_sequence_breakers\":[\"$want\",\"$(printf '\xc3\xbc')\",\"\\n\"]" &&
    python3 -c 'import json,sys; json.load(open(sys.argv[1], encoding="utf-8"))' "$state"; then
    ok "multi-byte DRY breakers: cut at a character (39 of 42 bytes), saved, and the sampler restarts with them"
else
    bad "multi-byte breakers: set $out; before $before; after $after; log $(cat "$run/utf8-again.log")"
fi
kill9

# not a state file: the service stops, naming the file
echo '{"lmpipe_sampler_state":1,"next_version":1}' >"$state"
timeout 10 "$svc" --model "$model" --endpoint "$ep" --plugin-dir "$work/plugins" --state-file "$state" \
    2>"$run/badfile.log"
status=$?
[ $status -ne 0 ] && grep -q "state-file: state file $state: next_version" "$run/badfile.log" &&
    ok "a bad state file stops the service: $(cat "$run/badfile.log")" ||
    bad "bad state file: status $status, $(cat "$run/badfile.log")"

# lmpipe up: sampler-svc gets RUN_DIR/sampler-state.json (a stale one from an
# earlier run is dropped first), or sampler.state_file; its own is removed
# at the end, a configured one is kept
up_run() { # CONF_EXTRA: start lmpipe up, set a strategy, stop it
    mkdir -m 0700 -p "$run/up"
    echo "stale" >"$run/up/sampler-state.json"
    printf 'model = %s\nrun_dir = %s\n%s\n' "$model" "$run/up" "$1" >"$run/up.conf"
    "$lmpipe" up --config "$run/up.conf" >"$run/up.out" 2>"$run/up.err" &
    pid=$!
    for _ in $(seq 1 300); do
        grep -q "ready on" "$run/up.out" 2>/dev/null && break
        kill -0 $pid 2>/dev/null || break
        sleep 0.1
    done
    args=$(ps -o args= --ppid $pid)
    setout=$(timeout 30 "$lmpipe" sampler --endpoint "ipc://$run/up/sampler.sock" set '{"top_k":5}' 2>&1)
    kill -TERM $pid
    wait $pid 2>/dev/null
    pid=
}
up_run ""
echo "$args" | grep -q -- "sampler-svc .*--state-file $run/up/sampler-state.json" &&
    echo "$setout" | grep -q '"changed":2' && [ ! -e "$run/up/sampler-state.json" ] &&
    ok "lmpipe up: RUN_DIR/sampler-state.json, a stale one dropped, removed at the end" ||
    bad "lmpipe up's state file: $args; $setout; $(ls "$run/up"); $(cat "$run/up.err")"
up_run "sampler.state_file = $work/kept.json"
echo "$args" | grep -q -- "sampler-svc .*--state-file $work/kept.json" &&
    grep -q '"top_k":5' "$work/kept.json" &&
    ok "lmpipe up: sampler.state_file is passed on and kept" ||
    bad "sampler.state_file: $args; $setout; $(cat "$run/up.err")"
exit $fail
