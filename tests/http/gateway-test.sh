#!/bin/bash
# lmpipe-http through curl, on real loopback sockets: `lmpipe up --http`
# with API and admin keys, and a second gateway with small limits against
# the same coordinator.  Covers SSE framing and [DONE], greedy output equal
# to `lmpipe run` and to the stories260K goldens, auth, every bad input
# (400/401/404/405/413, malformed HTTP, prompt too long), the header
# timeout against a slow-loris client, the connection limit, /sampler's
# admin key, the idle timeout, --metrics-auth, and that a client that
# disconnects has its generation cancelled and its slot freed
# (num_requests_running back to 0).
# usage: gateway-test.sh LMPIPE LMPIPE_HTTP SHARED_DIR
set -u
lmpipe=$1
gateway=$2
shared=$3
model=$shared/models/stories260K.gguf
KEY=test-key-1
ADMIN=admin-key-1
fail=0
work=$(mktemp -d /tmp/lmpipe-http-test.XXXXXX)
up= gw2= gw3=
trap 'kill $up $gw2 $gw3 2>/dev/null; sleep 0.3; kill -KILL $up $gw2 $gw3 2>/dev/null; rm -rf "$work"' EXIT

for tool in curl python3; do
    command -v $tool >/dev/null || { echo "FAIL: $tool is missing (deploy/setup-debian.sh)"; exit 1; }
done

free_port() {
    python3 "$(dirname "$0")/../free-ports.py"
}
bad() { echo "FAIL: $*"; fail=1; }
ok() { echo "ok: $*"; }

P1=$(free_port)
"$lmpipe" up --model "$model" --http 127.0.0.1:$P1 --api-key $KEY --admin-key $ADMIN \
    >"$work/up.out" 2>"$work/up.err" &
up=$!
U=http://127.0.0.1:$P1
AUTH="Authorization: Bearer $KEY"
for _ in $(seq 1 300); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' $U/health)" = 200 ] && break
    kill -0 $up 2>/dev/null || break
    sleep 0.1
done
[ "$(curl -s $U/health)" = '{"status":"ok"}' ] || { bad "the gateway never got healthy: $(cat "$work/up.err")"; exit 1; }
# The gateway can answer before lmpipe up's own readiness check prints its
# endpoint: wait for the line too.
for _ in $(seq 1 100); do
    ep=$(sed -n 's/^lmpipe up: ready on //p' "$work/up.out")
    [ -n "$ep" ] && break
    sleep 0.1
done
[ -n "$ep" ] || { bad "lmpipe up never said where it is ready: $(cat "$work/up.out" "$work/up.err")"; exit 1; }
ok "lmpipe up --http: /health is 200"

# status BODY_FILE METHOD PATH [curl args...]: prints the HTTP status
status() {
    local out=$1 m=$2 p=$3
    shift 3
    curl -s -o "$out" -w '%{http_code}' -X "$m" "$U$p" "$@"
}
# expect_error FILE STATUS CODE: the body is OpenAI's error JSON
expect_error() {
    python3 - "$@" <<'PY'
import json, sys
f, want_param = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ""
e = json.load(open(f))["error"]
assert isinstance(e["message"], str) and e["message"], e
assert "type" in e and "code" in e and "param" in e, e
if want_param:
    assert e["param"] == want_param, (e["param"], want_param)
    assert want_param in e["message"], e["message"]
PY
}

# ---- an address in use: lmpipe up stops at once, naming it, before any
# "HTTP on" and before any service starts ----
t0=$(date +%s%N)
timeout 30 "$lmpipe" up --model "$model" --http 127.0.0.1:$P1 >"$work/up2.out" 2>"$work/up2.err"
rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $ms -lt 3000 ] &&
   grep -qi "127.0.0.1:$P1: address already in use" "$work/up2.err" && ! grep -q "HTTP on" "$work/up2.out" &&
   ! grep -q "exited" "$work/up2.err"; then
    ok "lmpipe up --http on a port in use: exit $rc after $ms ms, naming the address, nothing started"
else bad "port in use: rc=$rc after $ms ms: $(cat "$work/up2.out" "$work/up2.err")"; fi

# ---- a gateway with nothing behind it: 503 with the reason ----
P0=$(free_port)
"$gateway" --coordinator ipc://$work/nobody.sock --listen 127.0.0.1:$P0 2>/dev/null &
gw3=$!
for _ in $(seq 1 50); do curl -s -o /dev/null http://127.0.0.1:$P0/health && break; sleep 0.1; done
s=$(curl -s -o "$work/h" -w '%{http_code}' http://127.0.0.1:$P0/health)
if [ "$s" = 503 ] && grep -q '"status":"unavailable","reason":"waiting for the coordinator' "$work/h"; then
    ok "/health is 503 with the reason until the coordinator answers"
else bad "/health without a coordinator: $s $(cat "$work/h")"; fi
kill $gw3; gw3=

# ---- auth ----
s=$(status "$work/r" GET /v1/models)
[ "$s" = 401 ] && expect_error "$work/r" && ok "401 without a key" || bad "no key: $s $(cat "$work/r")"
s=$(status "$work/r" GET /v1/models -H "Authorization: Bearer wrong")
[ "$s" = 401 ] && expect_error "$work/r" && ok "401 with a wrong key" || bad "wrong key: $s $(cat "$work/r")"
s=$(status "$work/r" POST /v1/completions -H "Authorization: Bearer wrong" -d '{"prompt":"x"}')
[ "$s" = 401 ] || bad "completions with a wrong key: $s"
s=$(status "$work/r" GET /v1/models -H "$AUTH")
name=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["object"]=="list"; print(d["data"][0]["id"])' "$work/r")
[ "$s" = 200 ] && [ -n "$name" ] && ok "/v1/models with the key: $name" || bad "/v1/models: $s $(cat "$work/r")"
s=$(status "$work/r" GET /metrics)
[ "$s" = 200 ] && ok "/metrics is open without a key" || bad "/metrics without a key: $s"

# ---- greedy output equals `lmpipe run` and the goldens' continuation ids ----
for golden in "$shared"/goldens/stories260K.json "$shared"/goldens/stories260K-from-bos.json; do
    python3 -c 'import json,sys
g = json.load(open(sys.argv[1]))
for c in g["cases"]: print(json.dumps({"prompt": c["prompt"], "n": g["n_predict"], "ids": c["continuation_ids"]}))' "$golden" >"$work/cases"
    while read -r case; do
        prompt=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["prompt"])' "$case")
        n=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["n"])' "$case")
        timeout 60 "$lmpipe" run --model "$model" --prompt "$prompt" --temperature 0 --max-tokens "$n" \
            >"$work/run.txt" 2>/dev/null || bad "lmpipe run '$prompt'"
        body=$(python3 -c 'import json,sys; print(json.dumps({"model": sys.argv[3], "prompt": sys.argv[1],
            "max_tokens": int(sys.argv[2]), "temperature": 0}))' "$prompt" "$n" "$name")
        s1=$(status "$work/c" POST /v1/completions -H "$AUTH" -d "$body")
        s2=$(status "$work/l" POST /completion -H "$AUTH" -d "$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); d["n_predict"]=d.pop("max_tokens"); print(json.dumps(d))' "$body")")
        python3 - "$work/c" "$work/l" "$work/run.txt" "$case" <<'PY' && ok "greedy over HTTP = lmpipe run = golden ids: '$prompt'" || bad "greedy '$prompt' ($s1 $s2)"
import json, sys
c = json.load(open(sys.argv[1])); l = json.load(open(sys.argv[2]))
run = open(sys.argv[3]).read().rstrip("\n")
case = json.loads(sys.argv[4])
text = c["choices"][0]["text"]
assert text.rstrip("\n") == run, (text, run)
assert l["content"] == text, (l["content"], text)
# the golden's continuation, up to an end of text that the golden runs past
want = case["ids"][:len(l["tokens"])]
assert l["tokens"] == want, (l["tokens"], case["ids"])
assert c["usage"]["completion_tokens"] == len(l["tokens"])
assert c["choices"][0]["finish_reason"] in ("stop", "length")
assert "strategy_version" in c and "timings" in l and l["stop"] is True
PY
    done <"$work/cases"
done

# ---- SSE framing with curl -N ----
check_sse() { # FILE KIND: data: lines, blank lines between, [DONE] last
    python3 - "$@" <<'PY'
import json, sys
raw = open(sys.argv[1], "rb").read().decode()
kind = sys.argv[2]
assert raw.endswith("data: [DONE]\n\n"), repr(raw[-80:])
events = raw.split("\n\n")
assert events[-1] == "", "no trailing blank line"
events = events[:-1]
for e in events:
    assert e.startswith("data: ") and "\n" not in e, repr(e)
chunks = [json.loads(e[6:]) for e in events[:-1]]
text, reasons, usage = {}, {}, None
for ch in chunks:
    if not ch["choices"]:
        usage = ch["usage"]
        continue
    assert "strategy_version" in ch
    for c in ch["choices"]:
        i = c["index"]
        if kind == "chat":
            assert ch["object"] == "chat.completion.chunk"
            text[i] = text.get(i, "") + c["delta"].get("content", "")
        else:
            assert ch["object"] == "text_completion"
            text[i] = text.get(i, "") + c["text"]
        if c["finish_reason"]:
            assert i not in reasons
            reasons[i] = c["finish_reason"]
assert usage is not None and usage["completion_tokens"] > 0, "no usage chunk"
assert set(reasons.values()) <= {"stop", "length"} and len(reasons) == len(text), reasons
print(json.dumps(text))
PY
}
curl -sN -H "$AUTH" $U/v1/completions -d '{"prompt":"Once upon a time","max_tokens":24,"temperature":0,
    "stream":true,"stream_options":{"include_usage":true}}' >"$work/sse"
streamed=$(check_sse "$work/sse" completions) && ok "SSE framing, usage chunk and [DONE] (completions)" ||
    bad "SSE completions: $(head -c 600 "$work/sse")"
curl -s -H "$AUTH" $U/v1/completions -d '{"prompt":"Once upon a time","max_tokens":24,"temperature":0}' >"$work/whole"
python3 -c 'import json,sys; assert json.loads(sys.argv[1])["0"] == json.load(open(sys.argv[2]))["choices"][0]["text"]' \
    "$streamed" "$work/whole" && ok "streamed text = the whole response" || bad "streamed != whole"
curl -sN -H "$AUTH" $U/v1/chat/completions -d '{"messages":[{"role":"user","content":"Hi"}],"chat_template":"chatml",
    "max_tokens":8,"n":2,"seed":3,"stream":true,"stream_options":{"include_usage":true}}' >"$work/sse2"
check_sse "$work/sse2" chat >/dev/null && grep -q '"role":"assistant"' "$work/sse2" &&
    grep -q '"index":1' "$work/sse2" && ok "SSE framing (chat, n=2)" || bad "SSE chat: $(head -c 600 "$work/sse2")"

curl -sN -H "$AUTH" $U/v1/completions -d '{"prompt":"Once upon a time","max_tokens":6,"temperature":0,"echo":true,
    "stream":true,"stream_options":{"include_usage":true}}' >"$work/sse3"
curl -s -H "$AUTH" $U/v1/completions -d '{"prompt":"Once upon a time","max_tokens":6,"temperature":0,"echo":true}' >"$work/whole3"
python3 - "$(check_sse "$work/sse3" completions)" "$work/whole3" <<'PY' && ok "echo: the prompt first, streamed and not" || bad "echo"
import json, sys
streamed = json.loads(sys.argv[1])["0"]
whole = json.load(open(sys.argv[2]))["choices"][0]["text"]
assert streamed == whole and whole.startswith("Once upon a time") and len(whole) > 16, (streamed, whole)
PY

# ---- bad input ----
s=$(status "$work/r" POST /v1/completions -H "$AUTH" -d '{"prompt": "x",')
[ "$s" = 400 ] && expect_error "$work/r" && ok "400 for bad JSON" || bad "bad JSON: $s $(cat "$work/r")"
s=$(status "$work/r" POST /v1/completions -H "$AUTH" -d '{"prompt":"x","top_k":-3}')
[ "$s" = 400 ] && expect_error "$work/r" top_k && ok "400 naming top_k" || bad "bad top_k: $s $(cat "$work/r")"
s=$(status "$work/r" POST /v1/chat/completions -H "$AUTH" -d '{"messages":[{"role":"user","content":"x"}],"chat_template":"chatml","min_p":7}')
[ "$s" = 400 ] && expect_error "$work/r" min_p && ok "400 naming min_p (chat)" || bad "bad min_p: $s $(cat "$work/r")"
s=$(status "$work/r" POST /v1/completions -H "$AUTH" -d '{"prompt":"x","max_tokens":"ten"}')
[ "$s" = 400 ] && expect_error "$work/r" max_tokens && ok "400 naming max_tokens" || bad "bad max_tokens: $s"
s=$(status "$work/r" GET /v1/nowhere -H "$AUTH")
[ "$s" = 404 ] && expect_error "$work/r" && ok "404 for an unknown endpoint" || bad "unknown endpoint: $s"
s=$(status "$work/r" POST /v1/completions -H "$AUTH" -d '{"model":"gpt-17","prompt":"x"}')
[ "$s" = 404 ] && expect_error "$work/r" model && ok "404 for an unknown model" || bad "unknown model: $s $(cat "$work/r")"
allow=$(curl -s -D - -o "$work/r" -X GET $U/v1/completions -H "$AUTH" | tr -d '\r' | sed -n 's/^Allow: //p')
s=$(status "$work/r" DELETE /v1/chat/completions -H "$AUTH")
[ "$s" = 405 ] && [ "$allow" = POST ] && expect_error "$work/r" && ok "405 with Allow: POST" || bad "405: $s allow='$allow'"
long=$(python3 -c 'print(" ".join(["Once upon a time there was a dog"] * 400))')
s=$(status "$work/r" POST /v1/completions -H "$AUTH" -d "{\"prompt\":\"$long\",\"max_tokens\":4}")
[ "$s" = 400 ] && grep -q 'context' "$work/r" && expect_error "$work/r" && ok "400 for a prompt longer than the context" ||
    bad "prompt too long: $s $(cat "$work/r")"
s=$(status "$work/r" POST /v1/completions -H "$AUTH" -d '{"prompt":"x","logprobs":2,"echo":true}')
[ "$s" = 400 ] && expect_error "$work/r" echo && ok "400 for echo with logprobs" || bad "echo+logprobs: $s"
# malformed HTTP straight on the socket
resp=$(python3 - $P1 <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"GET / HTTP/1.1\r\nHost x\r\n\r\n")
print(s.recv(4096).decode(errors="replace").split("\r\n")[0])
PY
)
[ "$resp" = "HTTP/1.1 400 Bad Request" ] && ok "400 for malformed HTTP" || bad "malformed HTTP: '$resp'"

# ---- sampler: admin key ----
s=$(status "$work/r" GET /sampler -H "$AUTH")
v0=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$work/r")
[ "$s" = 200 ] && [ -n "$v0" ] && ok "GET /sampler with the API key (version $v0)" || bad "GET /sampler: $s"
s=$(status "$work/r" POST /sampler -H "$AUTH" -d '{"op":"set","params":{"top_k":7}}')
[ "$s" = 401 ] && expect_error "$work/r" && ok "POST /sampler with an API key is 401" || bad "POST /sampler api key: $s"
s=$(status "$work/r" POST /sampler -d '{"op":"set","params":{"top_k":7}}')
[ "$s" = 401 ] || bad "POST /sampler without a key: $s"
s=$(status "$work/r" POST /sampler -H "Authorization: Bearer $ADMIN" -d '{"op":"set","params":{"top_k":7}}')
v1=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["ok"]; print(d["version"])' "$work/r")
[ "$s" = 200 ] && [ "$v1" -gt "$v0" ] && ok "POST /sampler with the admin key: version $v0 -> $v1" || bad "POST /sampler admin: $s $(cat "$work/r")"
s=$(status "$work/r" POST /sampler -H "Authorization: Bearer $ADMIN" -d '{"op":"rollback"}')
[ "$s" = 200 ] || bad "rollback: $s"
# floats come back as typed: the shortest text that reads back to the same float
s=$(status "$work/r" POST /sampler -H "Authorization: Bearer $ADMIN" -d '{"op":"set","params":{"temperature":0.8,"top_p":0.95}}')
[ "$s" = 200 ] || bad "POST /sampler temperature 0.8: $s $(cat "$work/r")"
s=$(status "$work/r" GET /sampler -H "$AUTH")
[ "$s" = 200 ] && grep -Eq '"temperature": ?0\.8[,}]' "$work/r" && grep -Eq '"top_p": ?0\.95[,}]' "$work/r" &&
    ! grep -q '0\.8000000\|0\.9499999' "$work/r" && ok "GET /sampler shows temperature 0.8 and top_p 0.95 as typed" ||
    bad "GET /sampler floats: $s $(cat "$work/r")"
s=$(status "$work/r" POST /sampler -H "Authorization: Bearer $ADMIN" -d '{"op":"rollback"}')
[ "$s" = 200 ] || bad "rollback: $s"

# ---- disconnect cancels the generation and frees the slot ----
metric() { curl -s $U/metrics | sed -n "s/^lmpipe:$1{[^}]*} //p" | head -1; }
cancelled0=$(curl -s $U/metrics | sed -n 's/^lmpipe:request_success_total{.*finished_reason="cancelled"} //p')
curl -sN -H "$AUTH" $U/v1/completions -d '{"prompt":"Once upon a time","max_tokens":1900,"ignore_eos":true,
    "stream":true}' >"$work/long" &
cpid=$!
for _ in $(seq 1 100); do [ -s "$work/long" ] && break; sleep 0.05; done
running=$(metric num_requests_running)
kill $cpid
wait $cpid 2>/dev/null
t0=$(date +%s%N)
for _ in $(seq 1 40); do [ "$(metric num_requests_running)" = 0 ] && break; sleep 0.05; done
t1=$(date +%s%N)
cancelled1=$(curl -s $U/metrics | sed -n 's/^lmpipe:request_success_total{.*finished_reason="cancelled"} //p')
if [ "$running" = 1 ] && [ "$(metric num_requests_running)" = 0 ] && [ "$cancelled1" -gt "$cancelled0" ] &&
   ! grep -q 'DONE' "$work/long"; then
    ok "a disconnected stream is cancelled: running 1 -> 0 in $(( (t1 - t0) / 1000000 )) ms, cancelled $cancelled0 -> $cancelled1"
else
    bad "disconnect: running=$running now=$(metric num_requests_running) cancelled $cancelled0 -> $cancelled1"
fi
curl -s $U/metrics >"$work/m"
python3 - "$work/m" <<'PY' && ok "/metrics: http_requests_total by code counts this test's answers" || bad "http_requests_total: $(grep http_requests "$work/m")"
import re, sys
n = {m.group(1): float(m.group(2)) for m in re.finditer(r'^lmpipe:http_requests_total\{[^}]*code="(\d+)"\} (\S+)$', open(sys.argv[1]).read(), re.M)}
assert n["401"] >= 4 and n["404"] >= 2 and n["405"] >= 2 and n["400"] >= 5 and n["200"] >= 10, n
PY
gen=$(metric generation_tokens_total)
[ "${gen:-0}" -gt 0 ] && ok "generation_tokens_total moved ($gen)" || bad "generation_tokens_total: '$gen'"
grp=$(sed -n 's/^lmpipe:group_requests_total{.*group="default"} //p' "$work/m")
grep -q '^lmpipe:group_ready{.*group="default"} 1$' "$work/m" && [ "${grp:-0}" -gt 0 ] &&
    ok "/metrics: engine group 'default' ready, $grp requests placed on it" ||
    bad "group metrics: $(grep group_ "$work/m" | head -4)"

# ---- a second gateway with small limits, on the same coordinator ----
P2=$(free_port)
"$gateway" --coordinator "$ep" --listen 127.0.0.1:$P2 --max-body 1000 --max-connections 3 \
    --header-timeout-ms 500 --idle-timeout-ms 1000 2>"$work/gw2.err" &
gw2=$!
V=http://127.0.0.1:$P2
for _ in $(seq 1 100); do [ "$(curl -s -o /dev/null -w '%{http_code}' $V/health)" = 200 ] && break; sleep 0.1; done
s=$(curl -s -o "$work/r" -w '%{http_code}' $V/v1/completions -d '{"prompt":"Once upon a time","max_tokens":4,"temperature":0}')
[ "$s" = 200 ] && ok "a second gateway on the same coordinator, open without keys" || bad "second gateway: $s"
s=$(curl -s -o "$work/r" -w '%{http_code}' $V/sampler -d '{"op":"set","params":{"top_k":7}}')
[ "$s" = 403 ] && expect_error "$work/r" && grep -q -- "--admin-key" "$work/r" &&
    ok "POST /sampler on a gateway without --admin-key: 403 saying so" || bad "POST /sampler, no admin key set: $s $(cat "$work/r")"
big=$(python3 -c 'print("{\"prompt\":\"" + "a" * 2000 + "\"}")')
s=$(curl -s -o "$work/r" -w '%{http_code}' $V/v1/completions -d "$big")
[ "$s" = 413 ] && expect_error "$work/r" && ok "413 for a body over --max-body" || bad "413: $s $(cat "$work/r")"
s=$(curl -s -o "$work/r" -w '%{http_code}' -H 'Transfer-Encoding: chunked' $V/v1/completions -d "$big")
[ "$s" = 413 ] && ok "413 for a chunked body over --max-body" || bad "413 chunked: $s"

# slow loris: headers a byte at a time; the header timeout (500 ms) drops it
python3 - $P2 >"$work/loris" 2>&1 <<'PY' &
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
t0 = time.time()
closed = False
try:
    for ch in b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100:
        s.send(bytes([ch]))
        time.sleep(0.1)
        s.settimeout(0.01)
        try:
            if s.recv(1) == b"":
                closed = True
                break
        except socket.timeout:
            pass
except (BrokenPipeError, ConnectionResetError):
    closed = True
print("%s after %.1f s" % ("closed" if closed else "open", time.time() - t0))
PY
loris=$!
sleep 0.2
s=$(curl -s -o /dev/null -w '%{http_code}' $V/v1/completions -d '{"prompt":"Once upon a time","max_tokens":4}')
wait $loris
secs=$(sed -n 's/^closed after \(.*\) s$/\1/p' "$work/loris")
if [ "$s" = 200 ] && ! grep -q '^open' "$work/loris" && [ -n "$secs" ] &&
   python3 -c 'import sys; assert 0.4 <= float(sys.argv[1]) <= 2.0' "$secs"; then
    ok "slow loris dropped by the header timeout after $secs s; another request got 200 meanwhile"
else bad "slow loris: other=$s $(cat "$work/loris")"; fi

# connection limit: 3 connections mid-body hold every place, so a 4th gets
# 503 for an endpoint but still its /health (the reserve); 3 that have
# not finished their headers give way to a new one; room again once closed
python3 - $P2 >"$work/limit" <<'PY'
import socket, sys, time, urllib.request
port = int(sys.argv[1])
def get(path):
    try:
        r = urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5)
        return "%d" % r.status
    except urllib.error.HTTPError as e:
        return "%d %s" % (e.code, e.read().decode())
held = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
for s in held:
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
time.sleep(0.2)
print("4th: " + get("/v1/models"))
print("4th health: " + get("/health"))
for s in held:
    s.close()
time.sleep(0.2)
held = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
for s in held:
    s.sendall(b"GET /v1/mod")
time.sleep(0.2)
print("past headers not in: " + get("/v1/models"))
for s in held:
    s.close()
time.sleep(0.2)
print("after: " + get("/v1/models"))
PY
grep -q '^4th: 503 .*too many connections' "$work/limit" && grep -q '^4th health: 200' "$work/limit" &&
    grep -q '^past headers not in: 200' "$work/limit" && grep -q '^after: 200' "$work/limit" &&
    ok "connection limit: 503 past --max-connections with /health still answered, room for a new request past stalled headers, 200 once they close" ||
    bad "connection limit: $(cat "$work/limit")"

# idle timeout: a kept-alive connection that sends nothing after its answer
# is closed after --idle-timeout-ms (1000 ms)
python3 - $P2 >"$work/idle" 2>&1 <<'PY'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n")
got = b""
while b'{"status":"ok"}' not in got:
    got += s.recv(4096)
t0 = time.time()
s.settimeout(10)
try:
    rest = s.recv(4096)
    print("closed after %.2f s%s" % (time.time() - t0, "" if rest == b"" else " with " + repr(rest)))
except socket.timeout:
    print("open after 10 s")
PY
secs=$(sed -n 's/^closed after \([0-9.]*\) s$/\1/p' "$work/idle")
[ -n "$secs" ] && python3 -c 'import sys; assert 0.8 <= float(sys.argv[1]) <= 3.0' "$secs" &&
    ok "an idle kept-alive connection is closed by the idle timeout after $secs s" || bad "idle timeout: $(cat "$work/idle")"

# --metrics-auth: /health and /metrics need the API key too
P3=$(free_port)
"$gateway" --coordinator "$ep" --listen 127.0.0.1:$P3 --api-key $KEY --metrics-auth 2>"$work/gw3.err" &
gw3=$!
W=http://127.0.0.1:$P3
for _ in $(seq 1 100); do [ "$(curl -s -o /dev/null -w '%{http_code}' -H "$AUTH" $W/health)" = 200 ] && break; sleep 0.1; done
h=$(curl -s -o "$work/r" -w '%{http_code}' $W/health)
m=$(curl -s -o "$work/r2" -w '%{http_code}' $W/metrics)
hk=$(curl -s -o /dev/null -w '%{http_code}' -H "$AUTH" $W/health)
mk=$(curl -s -o "$work/m3" -w '%{http_code}' -H "$AUTH" $W/metrics)
if [ "$h" = 401 ] && [ "$m" = 401 ] && expect_error "$work/r" && expect_error "$work/r2" && [ "$hk" = 200 ] &&
   [ "$mk" = 200 ] && grep -q '^lmpipe:num_requests_running' "$work/m3"; then
    ok "--metrics-auth: /health and /metrics are 401 without the key, 200 with it"
else bad "--metrics-auth: $h $m $hk $mk $(cat "$work/r")"; fi
kill $gw3; wait $gw3 2>/dev/null; gw3=

# the gateways survived all of it (lmpipe up would have restarted its own)
[ "$(curl -s $U/health)" = '{"status":"ok"}' ] && kill -0 $gw2 && ! grep -q 'lmpipe-http exited' "$work/up.err" &&
    ok "both gateways still up" || bad "a gateway died: $(cat "$work/up.err" "$work/gw2.err")"

# a gateway crash does not harm the pipeline: lmpipe up restarts it
gwpid=$(ps -o pid=,comm= --ppid $up | awk '$2 == "lmpipe-http" {print $1}')
kill -KILL $gwpid
for _ in $(seq 1 50); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' $U/health)" = 200 ] && break
    sleep 0.1
done
s=$(curl -s -o "$work/r" -w '%{http_code}' -H "$AUTH" $U/v1/completions -d '{"prompt":"Once upon a time","max_tokens":4}')
s2=$(curl -s -o /dev/null -w '%{http_code}' $V/v1/completions -d '{"prompt":"Once upon a time","max_tokens":4}')
newpid=$(ps -o pid=,comm= --ppid $up | awk '$2 == "lmpipe-http" {print $1}')
if [ -n "$gwpid" ] && [ "$s" = 200 ] && [ "$s2" = 200 ] && kill -0 $up && [ -n "$newpid" ] && [ "$newpid" != "$gwpid" ]; then
    ok "a killed gateway is restarted by lmpipe up; the pipeline and the other gateway go on"
else bad "gateway crash: pid $gwpid -> '$newpid', $s, other $s2"; fi
exit $fail
