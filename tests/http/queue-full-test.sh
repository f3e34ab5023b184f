#!/bin/bash
# A full queue through the HTTP gateway: with one sequence slot and one
# waiting request allowed per client (each API key, or each address without keys, is one client of the
# coordinator), a third request gets 429 with OpenAI's rate_limit_exceeded,
# the two before it finish with 200, and a request after them gets 200 again.
# usage: queue-full-test.sh LMPIPE SHARED_DIR
set -u
lmpipe=$1
shared=$2
model=$shared/models/synth-llama-Q8_0.gguf
work=$(mktemp -d /tmp/lmpipe-queue-full.XXXXXX)
up=
trap '[ -n "$up" ] && kill $up 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
ok() { echo "ok: $*"; }

port=$(python3 "$(dirname "$0")/../free-ports.py") || exit 1
cat >"$work/conf" <<EOF
model = $model
run_dir = $work/run
threads = 1
max_seqs = 1
n_ctx = 4096
max_queued_per_client = 1
http.listen = 127.0.0.1:$port
EOF
"$lmpipe" up --config "$work/conf" >"$work/up.out" 2>"$work/up.err" &
up=$!
base=http://127.0.0.1:$port
for _ in $(seq 1 300); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' $base/health)" = 200 ] && break
    kill -0 $up 2>/dev/null || break
    sleep 0.1
done
[ "$(curl -s -o /dev/null -w '%{http_code}' $base/health)" = 200 ] ||
    { bad "lmpipe up --http never got healthy: $(cat "$work/up.err")"; exit 1; }

req() { # name max_tokens stream
    curl -s -N -o "$work/$1.body" -w '%{http_code}' $base/v1/completions -H 'Content-Type: application/json' \
        -d "{\"prompt\":\"Once upon a time\",\"max_tokens\":$2,\"temperature\":0,\"ignore_eos\":true,\"stream\":$3}" \
        >"$work/$1.code"
}
# 4000 tokens on one thread hold the slot for seconds
req running 4000 true &
a=$!
for _ in $(seq 1 100); do grep -q '^data: ' "$work/running.body" 2>/dev/null && break; sleep 0.05; done
grep -q '^data: ' "$work/running.body" || bad "the first request never streamed a token"
req queued 4 false &
b=$!
sleep 0.5
req refused 4 false
code=$(cat "$work/refused.code")
if [ "$code" = 429 ] && grep -q '"code":"rate_limit_exceeded"' "$work/refused.body" &&
   grep -q 'max_queued_per_client' "$work/refused.body"; then
    ok "a third request with one running and one waiting: 429 rate_limit_exceeded naming the limit"
else
    bad "the third request got $code: $(cat "$work/refused.body")"
fi
wait $a $b
[ "$(cat "$work/running.code")" = 200 ] && grep -q '^data: \[DONE\]' "$work/running.body" &&
    [ "$(cat "$work/queued.code")" = 200 ] &&
    ok "the running and the waiting request finish with 200" ||
    bad "running $(cat "$work/running.code"), waiting $(cat "$work/queued.code"): $(head -c 300 "$work/queued.body")"
req after 4 false
[ "$(cat "$work/after.code")" = 200 ] && ok "a request after them gets 200" ||
    bad "a request after them got $(cat "$work/after.code"): $(cat "$work/after.body")"
n429=$(curl -s $base/metrics | sed -n 's/^lmpipe:http_requests_total{.*code="429"} //p')
[ "${n429%.*}" = 1 ] && ok "/metrics counts the 429" || bad "/metrics: http_requests_total{code=\"429\"} is '$n429'"
exit $fail
