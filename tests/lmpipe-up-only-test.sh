#!/bin/bash
# `lmpipe up --only`: a deployment split over two "hosts" on one machine.
# Host B runs only engine-svc and sampler-svc (and picks the ring's name for
# both); host A runs only tokenizer-svc and the coordinator, whose config
# names B's pair as engine group "b".  The golden continuation comes out;
# stopping A leaves B's sockets and services alone; stopping B removes
# what B made.  B's engine.kv_* keys reach engine-svc as its --kv-* flags
# (a pool big enough for the seq_id fallback tables the coordinator relies
# on).  Bad --only names, group keys and engine.kv_* values are refused,
# naming them.
# usage: lmpipe-up-only-test.sh LMPIPE SHARED_DIR
set -u
lmpipe=$1
shared=$2
model=$shared/models/stories260K.gguf
fail=0
work=$(mktemp -d /tmp/lmpipe-up-only-test.XXXXXX)
ups=()
trap 'for u in "${ups[@]}"; do kill -KILL $u 2>/dev/null; done; rm -rf "$work"' EXIT
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

cat >"$work/b.conf" <<CONF
model = $model
engine.endpoint = ipc://$work/eng.sock
sampler.endpoint = ipc://$work/samp.sock
threads = 1
engine.kv_block = 32
engine.kv_pool_tokens = 65536
CONF
# A's file also names B's endpoints (one file for every host): A must not
# touch them.
cat >"$work/a.conf" <<CONF
model = $model
engine.endpoint = ipc://$work/eng.sock
sampler.endpoint = ipc://$work/samp.sock
endpoint = ipc://$work/coord.sock
tokenizer.endpoint = ipc://$work/tok.sock
group.b.engine = ipc://$work/eng.sock
group.b.sampler = ipc://$work/samp.sock
CONF

up() { # name config only -> pid in $up_pid
    "$lmpipe" up --config "$2" --only "$3" >"$work/$1.out" 2>"$work/$1.err" &
    up_pid=$!
    ups+=($up_pid)
}
wait_line() { # file pattern
    for _ in $(seq 1 300); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
    return 1
}
children() { ps -o comm= --ppid $1 | sort | tr '\n' ' '; }

up b "$work/b.conf" engine,sampler
b=$up_pid
wait_line "$work/b.out" "^lmpipe up: sampler-svc ready on ipc://$work/samp.sock" &&
    grep -q "^lmpipe up: engine-svc ready on ipc://$work/eng.sock" "$work/b.out" &&
    ok "host B: engine-svc and sampler-svc ready" || bad "host B not ready: $(cat "$work/b.out" "$work/b.err")"
[ "$(children $b)" = "engine-svc sampler-svc " ] && ok "host B runs only engine-svc and sampler-svc" ||
    bad "host B runs: $(children $b)"
shm=$(ps -o args= --ppid $b | sed -n 's/.*engine-svc.*--shm-name \/\([^ ]*\).*/\1/p')
[ -n "$shm" ] && ok "host B's engine got --shm-name /$shm" || bad "no --shm-name: $(ps -o args= --ppid $b)"
# lmpipe up hands each service the run's config and its name, and the
# service reads its own keys (its parameter table): no per-service flags
conf_b=$(ps -o args= --ppid $b | sed -n 's/.*engine-svc --config \([^ ]*\) --service engine.*/\1/p')
[ -n "$conf_b" ] && grep -qx "engine.kv_block = 32" "$conf_b" && grep -qx "engine.kv_pool_tokens = 65536" "$conf_b" &&
    ok "engine-svc got --config $conf_b --service engine, with engine.kv_* in it" ||
    bad "engine args: $(ps -o args= --ppid $b); config: $(cat "$conf_b" 2>&1)"

up a "$work/a.conf" tokenizer,coordinator
a=$up_pid
wait_line "$work/a.out" "^lmpipe up: ready on ipc://$work/coord.sock" && ok "host A ready" ||
    bad "host A not ready: $(cat "$work/a.out" "$work/a.err")"
[ "$(children $a)" = "coordinator tokenizer-svc " ] && ok "host A runs only tokenizer-svc and the coordinator" ||
    bad "host A runs: $(children $a)"
conf_a=$(ps -o args= --ppid $a | sed -n 's/.*coordinator --config \([^ ]*\) --service coordinator.*/\1/p')
[ -n "$conf_a" ] && grep -qx "group.b.engine = ipc://$work/eng.sock" "$conf_a" &&
    grep -qx "group.b.sampler = ipc://$work/samp.sock" "$conf_a" &&
    ok "the coordinator got --config $conf_a --service coordinator, with group.b.* in it" ||
    bad "coordinator args: $(ps -o args= --ppid $a); config: $(cat "$conf_a" 2>&1)"

ids=$(timeout 60 "$lmpipe" generate --endpoint "ipc://$work/coord.sock" --prompt "Lily and Tom went to the park" \
      --temperature 0 --max-tokens 64 --ids)
python3 - "$shared/goldens/stories260K.json" "$ids" <<'PY' && ok "the golden continuation through host A and group b" || fail=1
import json, sys
g = json.load(open(sys.argv[1]))
case = next(c for c in g["cases"] if c["prompt"] == "Lily and Tom went to the park")
if (json.loads(sys.argv[2]) if sys.argv[2] else []) != case["continuation_ids"]:
    print("FAIL: ids differ from the golden: " + sys.argv[2]); sys.exit(1)
PY

# and they took effect: group b's engine pages 32 positions a block, 65536 in all
st=$(timeout 30 "$lmpipe" stats --endpoint "ipc://$work/coord.sock" 2>&1)
echo "$st" | grep -q "^group b kv: blocks .* 2048 total" && ok "group b's KV pool: 2048 blocks of 32 (engine.kv_*)" ||
    bad "group b's KV pool: $st"

# A stops: B's sockets and segment stay, B serves on.
kill -TERM $a
wait $a && ok "host A stopped cleanly" || bad "host A exited $?"
[ -S "$work/eng.sock" ] && [ -S "$work/samp.sock" ] && [ -e "/dev/shm/$shm" ] && kill -0 $b &&
    ok "stopping host A left host B's sockets and ring alone" || bad "host B's files after A stopped: $(ls "$work")"
[ -e "$work/coord.sock" ] || [ -e "$work/tok.sock" ] && bad "host A left its sockets: $(ls "$work")"
kill -TERM $b
wait $b && ok "host B stopped cleanly" || bad "host B exited $?"
[ -e "$work/eng.sock" ] || [ -e "$work/samp.sock" ] || [ -e "/dev/shm/$shm" ] &&
    bad "host B left: $(ls "$work") /dev/shm/$shm"

# Refusals name what is wrong.
out=$("$lmpipe" up --config "$work/b.conf" --only engine,bogus 2>&1); rc=$?
[ $rc = 2 ] && echo "$out" | grep -q "'bogus' is not one of" && ok "--only bogus refused: $out" ||
    bad "--only bogus: status $rc: $out"
printf 'group.b.engin = ipc://x\n' >>"$work/a.conf"
out=$("$lmpipe" up --config "$work/a.conf" --only coordinator 2>&1); rc=$?
[ $rc = 1 ] && echo "$out" | grep -q "group.b.engin" && ok "a misspelt group key refused: $out" ||
    bad "group.b.engin: status $rc: $out"
printf 'model = %s\ngroup.x.engine = ipc://x\n' "$model" >"$work/c.conf"
out=$("$lmpipe" up --config "$work/c.conf" --only coordinator 2>&1); rc=$?
[ $rc = 1 ] && echo "$out" | grep -q "group.x.sampler" && ok "a group without its sampler refused: $out" ||
    bad "group without sampler: status $rc: $out"
printf 'model = %s\nengine.kv_block = -3\n' "$model" >"$work/d.conf"
out=$("$lmpipe" up --config "$work/d.conf" --only engine 2>&1); rc=$?
[ $rc = 1 ] && echo "$out" | grep -q "engine.kv_block: -3" && ok "a bad engine.kv_block refused: $out" ||
    bad "engine.kv_block = -3: status $rc: $out"
exit $fail
