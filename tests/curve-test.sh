#!/bin/bash
# CURVE from the command line (docs/SECURITY.md): `lmpipe keygen` writes
# BASE.key 0600 and BASE.pub 0644 and refuses to overwrite them; tcp://
# without keys refuses to start (lmpipe up and a service by hand), with
# allow_insecure_tcp it starts and each service warns once; `lmpipe up` with
# curve.key on tcp:// gives the golden continuation to `lmpipe generate`
# with an allowed key and nothing to one without a key, lmpipe-http reaches
# its coordinator, `lmpipe sampler` works for an admin key only; under the default
# ipc:// the run folder is 0700 and the socket files 0600.
# usage: curve-test.sh LMPIPE BUILD_ROOT SHARED_DIR
set -u
lmpipe=$1
build=$2
shared=$3
model=$shared/models/stories260K.gguf
fail=0
work=$(mktemp -d /tmp/curve-test.XXXXXX)
up=
tokA= tokB=
trap '[ -n "$up" ] && kill -KILL $up 2>/dev/null; kill $tokA $tokB 2>/dev/null; rm -rf "$work"' EXIT
prompt="Lily and Tom went to the park"

golden_ids() {
    python3 - "$shared/goldens/stories260K.json" "$prompt" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
print(json.dumps(next(c for c in g["cases"] if c["prompt"] == sys.argv[2])["continuation_ids"]))
PY
}
want=$(golden_ids | tr -d ' ')

# ---- keygen ----
"$lmpipe" keygen -o "$work/host" >"$work/keygen.out" || { echo "FAIL: keygen"; fail=1; }
"$lmpipe" keygen -o "$work/client" >/dev/null || { echo "FAIL: keygen client"; fail=1; }
[ "$(stat -c %a "$work/host.key")" = 600 ] || { echo "FAIL: host.key mode $(stat -c %a "$work/host.key")"; fail=1; }
[ "$(stat -c %a "$work/host.pub")" = 644 ] || { echo "FAIL: host.pub mode $(stat -c %a "$work/host.pub")"; fail=1; }
pub=$(cat "$work/host.pub")
[ ${#pub} -eq 40 ] || { echo "FAIL: host.pub holds '$pub', not 40 characters"; fail=1; }
grep -qxF "public = $pub" "$work/host.key" || { echo "FAIL: host.key lacks 'public = $pub'"; fail=1; }
grep -qE '^secret = .{40}$' "$work/host.key" || { echo "FAIL: host.key lacks a secret line"; fail=1; }
[ "$(cat "$work/keygen.out")" = "$pub" ] || { echo "FAIL: keygen printed $(cat "$work/keygen.out")"; fail=1; }
if out=$("$lmpipe" keygen -o "$work/host" 2>&1); then
    echo "FAIL: keygen overwrote an existing key"; fail=1
else
    echo "$out" | grep -q "host.key" || { echo "FAIL: keygen refusal does not name the file: $out"; fail=1; }
fi
[ "$(cat "$work/host.pub")" = "$pub" ] || { echo "FAIL: the refused keygen changed host.pub"; fail=1; }
echo "ok: keygen modes and format"

port=$(python3 "$(dirname "$0")/free-ports.py" 7) || exit 1
conf() { # extra lines...
    cat <<CONF
model = $model
endpoint = tcp://127.0.0.1:$port
tokenizer.endpoint = tcp://127.0.0.1:$((port + 1))
engine.endpoint = tcp://127.0.0.1:$((port + 2))
sampler.endpoint = tcp://127.0.0.1:$((port + 3))
threads = 1
CONF
    printf '%s\n' "$@"
}

start_up() { # config [lmpipe up arguments...]
    rm -f "$work/out" "$work/err"
    "$lmpipe" up --config "$@" >"$work/out" 2>"$work/err" &
    up=$!
    ep=
    for _ in $(seq 1 300); do
        ep=$(sed -n 's/^lmpipe up: ready on //p' "$work/out" 2>/dev/null)
        [ -n "$ep" ] && break
        kill -0 $up 2>/dev/null || break
        sleep 0.1
    done
    [ -n "$ep" ]
}

stop_up() {
    kill -TERM $up
    wait $up || { echo "FAIL: lmpipe up exited $? after SIGTERM"; fail=1; }
    up=
}

# ---- tcp:// without keys ----
conf >"$work/plain.conf"
if out=$(timeout 30 "$lmpipe" up --config "$work/plain.conf" 2>&1); then
    echo "FAIL: lmpipe up started on tcp:// without keys"; fail=1
else
    echo "$out" | grep -q "allow_insecure_tcp" || { echo "FAIL: unclear refusal: $out"; fail=1; }
fi
if out=$(timeout 30 "$build/tokenizer-svc/tokenizer-svc" --model "$model" \
         --endpoint "tcp://127.0.0.1:$port" 2>&1); then
    echo "FAIL: tokenizer-svc served tcp:// without keys"; fail=1
else
    echo "$out" | grep -q "needs CURVE keys" || { echo "FAIL: unclear tokenizer-svc refusal: $out"; fail=1; }
fi
echo "ok: tcp:// without keys refuses to start"

conf "allow_insecure_tcp = true" >"$work/insecure.conf"
if start_up "$work/insecure.conf"; then
    for svc in coordinator tokenizer-svc engine-svc sampler-svc; do
        n=$(grep -c "^$svc: warn: .*without CURVE keys" "$work/err")
        [ "$n" -eq 1 ] || { echo "FAIL: $svc warned $n times about plain tcp://"; fail=1; }
    done
    got=$(timeout 60 "$lmpipe" generate --endpoint "$ep" --prompt "$prompt" --temperature 0 \
          --max-tokens 64 --ids | tr -d ' ')
    [ "$got" = "$want" ] || { echo "FAIL: insecure tcp:// ids $got"; fail=1; }
    stop_up
    echo "ok: allow_insecure_tcp starts and warns once per service"
else
    echo "FAIL: lmpipe up with allow_insecure_tcp did not get ready: $(cat "$work/err")"; fail=1
fi

# ---- tcp:// with CURVE ----
conf "curve.key = $work/host.key" "curve.allow = $work/client.pub" \
     "http.listen = 127.0.0.1:$((port + 4))" >"$work/curve.conf"
if start_up "$work/curve.conf"; then
    # lmpipe-http reaches the coordinator with this host's key (up to 30 s:
    # the sanitizer build under a loaded CI machine is slow to start).
    for _ in $(seq 1 300); do
        [ "$(curl -s http://127.0.0.1:$((port + 4))/health)" = '{"status":"ok"}' ] && break
        sleep 0.1
    done
    h=$(curl -s http://127.0.0.1:$((port + 4))/health)
    [ "$h" = '{"status":"ok"}' ] || { echo "FAIL: lmpipe-http over CURVE: '$h'; lmpipe up said: $(tail -5 "$work/err")"; fail=1; }
    # lmpipe sampler straight to sampler-svc: the client key is no admin,
    # this host's key is (lmpipe up's default curve.admin).
    samp=tcp://127.0.0.1:$((port + 3))
    if out=$(timeout 30 "$lmpipe" sampler --endpoint "$samp" --curve-key "$work/client.key" \
             --server-key "$work/host.pub" get 2>&1); then
        echo "FAIL: a non-admin key controlled the sampler: $out"; fail=1
    else
        echo "$out" | grep -q "control refused" || { echo "FAIL: non-admin sampler control: $out"; fail=1; }
    fi
    timeout 30 "$lmpipe" sampler --endpoint "$samp" --curve-key "$work/host.key" \
        --server-key "$work/host.pub" get >/dev/null || { echo "FAIL: the admin key could not control the sampler"; fail=1; }
    echo "ok: lmpipe-http over CURVE; lmpipe sampler for admins only"
    grep -q "without CURVE keys" "$work/err" && { echo "FAIL: CURVE pipeline warned about plain tcp"; fail=1; }
    got=$(timeout 60 "$lmpipe" generate --endpoint "$ep" --curve-key "$work/client.key" \
          --server-key "$work/host.pub" --prompt "$prompt" --temperature 0 --max-tokens 64 --ids | tr -d ' ')
    [ "$got" = "$want" ] || { echo "FAIL: CURVE tcp:// ids '$got', want $want"; fail=1; }
    echo "ok: lmpipe generate with an allowed key gets the golden"
    # The server key as Z85 text, as a config value would give it.
    got=$(timeout 60 "$lmpipe" generate --endpoint "$ep" --curve-key "$work/client.key" \
          --server-key "$pub" --prompt "$prompt" --temperature 0 --max-tokens 64 --ids | tr -d ' ')
    [ "$got" = "$want" ] || { echo "FAIL: CURVE tcp:// with a Z85 server key: '$got'"; fail=1; }
    if out=$(timeout 30 "$lmpipe" generate --endpoint "$ep" --prompt "$prompt" --max-tokens 4 2>&1); then
        echo "FAIL: lmpipe generate without a key got an answer: $out"; fail=1
    else
        echo "ok: without a key, no answer ($out)"
    fi
    stop_up
else
    echo "FAIL: lmpipe up with CURVE did not get ready: $(cat "$work/err")"; fail=1
fi

# ---- two tokenizer hosts, a key pair each ----
# The coordinator takes one server key per tokenizer endpoint, in order.
"$lmpipe" keygen -o "$work/tokA" >/dev/null && "$lmpipe" keygen -o "$work/tokB" >/dev/null
tok_svc() { # name port: a tokenizer-svc on its own key pair that accepts this host's key
    "$build/tokenizer-svc/tokenizer-svc" --model "$model" --endpoint "tcp://127.0.0.1:$2" \
        --curve-key "$work/$1.key" --curve-allow "$work/host.pub" \
        --curve-coordinator "$work/host.pub" 2>>"$work/$1.log" &
}
tok_msgs() { # name port
    timeout 10 "$lmpipe" stats --endpoint "tcp://127.0.0.1:$2" --curve-key "$work/host.key" \
        --server-key "$work/$1.pub" | sed -n 's/^messages: \([0-9]*\),.*/\1/p'
}
tok_svc tokA $((port + 5)); tokA=$!
tok_svc tokB $((port + 6)); tokB=$!
two_tok_conf() { # server keys
    cat <<CONF
model = $model
endpoint = tcp://127.0.0.1:$port
tokenizer.endpoint = tcp://127.0.0.1:$((port + 5)),tcp://127.0.0.1:$((port + 6))
tokenizer.server_key = $1
engine.endpoint = tcp://127.0.0.1:$((port + 2))
sampler.endpoint = tcp://127.0.0.1:$((port + 3))
threads = 1
curve.key = $work/host.key
curve.allow = $work/client.pub
CONF
}
two_tok_conf "$work/tokA.pub,$work/tokB.pub,$work/host.pub" >"$work/tok3.conf"
if out=$(timeout 30 "$lmpipe" up --config "$work/tok3.conf" --only coordinator,engine,sampler 2>&1); then
    echo "FAIL: three tokenizer server keys for two endpoints accepted"; fail=1
else
    echo "$out" | grep -q "3 tokenizer server keys for 2 tokenizer endpoints" ||
        { echo "FAIL: unclear refusal of three keys for two tokenizers: $out"; fail=1; }
fi
two_tok_conf "$work/tokA.pub,$work/tokB.pub" >"$work/tok2.conf"
if start_up "$work/tok2.conf" --only coordinator,engine,sampler; then
    a0=$(tok_msgs tokA $((port + 5))); b0=$(tok_msgs tokB $((port + 6)))
    gp=()
    for i in $(seq 1 8); do
        timeout 60 "$lmpipe" generate --endpoint "$ep" --curve-key "$work/client.key" \
            --server-key "$work/host.pub" --prompt "$prompt" --temperature 0 --max-tokens 64 \
            --ids >"$work/two$i" 2>&1 &
        gp+=($!)
    done
    wait "${gp[@]}"
    n=0
    for i in $(seq 1 8); do [ "$(tr -d ' ' <"$work/two$i")" = "$want" ] && n=$((n + 1)); done
    a1=$(tok_msgs tokA $((port + 5))); b1=$(tok_msgs tokB $((port + 6)))
    if [ $n = 8 ] && [ $((${a1:-0} - ${a0:-0})) -ge 2 ] && [ $((${b1:-0} - ${b0:-0})) -ge 2 ]; then
        echo "ok: two tokenizers with a key pair each: 8 goldens, tokenizations spread ($((a1 - a0)) and $((b1 - b0)) messages)"
    else
        echo "FAIL: two keyed tokenizers: $n of 8 goldens; messages $a0->$a1 and $b0->$b1; $(tail -3 "$work/err")"; fail=1
    fi
    stop_up
else
    echo "FAIL: lmpipe up with two keyed tokenizers did not get ready: $(cat "$work/err")"; fail=1
fi
kill -TERM $tokA $tokB 2>/dev/null; wait $tokA $tokB 2>/dev/null

# ---- ipc:// file modes ----
echo "model = $model" >"$work/ipc.conf"
if start_up "$work/ipc.conf"; then
    dir=${ep#ipc://}
    dir=${dir%/*}
    [ "$(stat -c %a "$dir")" = 700 ] || { echo "FAIL: run folder mode $(stat -c %a "$dir")"; fail=1; }
    for s in "$dir"/*.sock; do
        [ "$(stat -c %a "$s")" = 600 ] || { echo "FAIL: $s mode $(stat -c %a "$s")"; fail=1; }
    done
    [ $(ls "$dir"/*.sock | wc -l) -eq 4 ] || { echo "FAIL: $(ls "$dir") in the run folder"; fail=1; }
    stop_up
    echo "ok: ipc:// run folder 0700, sockets 0600"
else
    echo "FAIL: lmpipe up (ipc) did not get ready: $(cat "$work/err")"; fail=1
fi
# A given run_dir that others can enter is made private.
mkdir -m 755 "$work/run"
printf 'model = %s\nrun_dir = %s\n' "$model" "$work/run" >"$work/run.conf"
if start_up "$work/run.conf"; then
    [ "$(stat -c %a "$work/run")" = 700 ] || { echo "FAIL: run_dir left mode $(stat -c %a "$work/run")"; fail=1; }
    for s in "$work/run"/*.sock; do
        [ "$(stat -c %a "$s")" = 600 ] || { echo "FAIL: $s mode $(stat -c %a "$s")"; fail=1; }
    done
    stop_up
    echo "ok: a given run_dir is made 0700"
else
    echo "FAIL: lmpipe up with run_dir did not get ready: $(cat "$work/err")"; fail=1
fi
exit $fail
