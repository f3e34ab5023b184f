#!/bin/bash
# A client always learns how its request ended (issue #19), with the real
# binaries:
#   1. the coordinator SIGKILLed mid-generation: `lmpipe generate` exits
#      within a few seconds with status 4 and says so; the HTTP gateway's
#      streaming client (curl) gets an error, not a hang; /health says
#      unavailable; once a pipeline is back on the same endpoints, a new
#      request through the same gateway succeeds, a request held up ends at
#      its deadline_ms, and /health says "degraded" while a stage is down.
#   2. SIGTERM to lmpipe up during a generation: the client gets its final
#      event ("shutting down") within the grace period; a new request during
#      the drain is refused ("draining"); with the default grace a running
#      request finishes.
#   3. SIGKILL of the engine and of lmpipe up: the next lmpipe up start
#      removes the stale segment and run folder, and leaves a live owner's
#      look-alikes alone.
# A generation is held "long" by stopping (SIGSTOP) the engine.  engine-svc
# blocked on the ring is engine_stop_test.c.
# usage: survive-test.sh BUILD_DIR SHARED_DIR
set -u
build=$1
shared=$2
lmpipe=$build/tools/lmpipe
model=$shared/models/stories260K.gguf
dir=$(mktemp -d /tmp/lmpipe-survive-test.XXXXXX)
pids=()
stopped=()
cleanup() {
    for p in "${stopped[@]}"; do kill -CONT $p 2>/dev/null; done
    for p in "${pids[@]}"; do kill -KILL $p 2>/dev/null; done
    for p in "${pids[@]}"; do wait $p 2>/dev/null; done
    rm -rf "$dir" "${decoy_dir:-}"
    [ -n "${decoy_seg:-}" ] && rm -f "/dev/shm/$decoy_seg"
}
trap cleanup EXIT
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
now_ms() { date +%s%3N; }

start() { # log, binary, args...: prints nothing, appends the pid
    local log=$1; shift
    "$@" 2>>"$dir/$log" &
    pids+=($!)
}
free_port() {
    python3 "$(dirname "$0")/free-ports.py"
}
health() { curl -s -o "$dir/health.body" -w '%{http_code}' "http://127.0.0.1:$port/health"; }
wait_health() { # want_code want_status_word seconds
    for _ in $(seq 1 $(($3 * 10))); do
        [ "$(health)" = "$1" ] && grep -q "\"status\":\"$2\"" "$dir/health.body" && return 0
        sleep 0.1
    done
    return 1
}

# ---- 1: the coordinator killed mid-generation ---------------------------------------
services() { # the three services on fixed endpoints; sets tok eng samp
    start tok.log "$build/tokenizer-svc/tokenizer-svc" --model "$model" --endpoint "ipc://$dir/tok"
    tok=${pids[-1]}
    start eng.log "$build/engine-svc/engine-svc" --model "$model" --endpoint "ipc://$dir/eng" --threads 1
    eng=${pids[-1]}
    start samp.log "$build/sampler-svc/sampler-svc" --model "$model" --endpoint "ipc://$dir/samp"
    samp=${pids[-1]}
}
coordinator() {
    start coord.log "$build/coordinator/coordinator" --endpoint "ipc://$dir/coord" \
        --tokenizer "ipc://$dir/tok" --engine "ipc://$dir/eng" --sampler "ipc://$dir/samp"
    coord=${pids[-1]}
}
services
coordinator
port=$(free_port)
start http.log "$build/gateway/http/lmpipe-http" --coordinator "ipc://$dir/coord" --listen "127.0.0.1:$port"
http=${pids[-1]}
wait_health 200 ok 30 || bad "the gateway did not get healthy: $(cat "$dir/health.body" "$dir/http.log")"

kill -STOP $eng
stopped+=($eng)
t0=$(now_ms)
timeout 20 "$lmpipe" generate --endpoint "ipc://$dir/coord" --prompt "Once upon a time" --max-tokens 100 \
    >"$dir/gen.out" 2>"$dir/gen.err" &
gen=$!
{
    curl -sN -m 20 -o "$dir/curl.out" -w '%{http_code}' "http://127.0.0.1:$port/v1/completions" \
        -H 'Content-Type: application/json' \
        -d '{"prompt":"Once upon a time","max_tokens":100,"stream":true}' >"$dir/curl.code"
    now_ms >"$dir/curl.t"
} &
cpid=$!
sleep 1
kill -KILL $coord
wait $coord 2>/dev/null
tk=$(now_ms)
wait $gen
rc=$?
tg=$(now_ms)
wait $cpid
tc=$(cat "$dir/curl.t")
echo "  (generate ended $((tg - tk)) ms after the kill, curl $((tc - tk)) ms)"
[ $rc -eq 4 ] && [ $((tg - tk)) -lt 5000 ] && grep -q "lost the connection to the coordinator" "$dir/gen.err" &&
    ok "lmpipe generate exits with status 4 within 5 s of the coordinator's SIGKILL: $(cat "$dir/gen.err")" ||
    bad "generate: status $rc after $((tg - tk)) ms: $(cat "$dir/gen.err")"
code=$(cat "$dir/curl.code")
if [ $((tc - tk)) -lt 4000 ] && { [ "$code" = 503 ] || { [ "$code" = 200 ] && grep -q '"error"' "$dir/curl.out"; }; } &&
    grep -q "lost the connection to the coordinator" "$dir/curl.out"; then
    ok "the streaming HTTP client gets an error within 4 s (HTTP $code): $(head -c 200 "$dir/curl.out")"
else
    bad "curl: HTTP $code after $((tc - tk)) ms: $(cat "$dir/curl.out")"
fi
h=$(health)
[ "$h" = 503 ] && grep -q '"status":"unavailable"' "$dir/health.body" &&
    ok "/health: 503 unavailable while no coordinator answers" || bad "/health: $h $(cat "$dir/health.body")"

# A pipeline back on the same endpoints: the same gateway serves again.
kill -CONT $eng
stopped=()
for p in $tok $eng $samp; do kill -TERM $p; wait $p 2>/dev/null; done
services
coordinator
wait_health 200 ok 30 || bad "the gateway did not reconnect: $(health) $(cat "$dir/health.body")"
code=$(curl -s -m 30 -o "$dir/curl2.out" -w '%{http_code}' "http://127.0.0.1:$port/v1/completions" \
    -H 'Content-Type: application/json' -d '{"prompt":"Once upon a time","max_tokens":8,"temperature":0}')
[ "$code" = 200 ] && grep -q '"text"' "$dir/curl2.out" &&
    ok "after the coordinator came back, a new request through the same gateway succeeds" ||
    bad "after the restart: HTTP $code $(cat "$dir/curl2.out")"

# A request held up (its engine stopped) ends at its deadline.
kill -STOP $eng
stopped+=($eng)
t0=$(now_ms)
timeout 20 "$lmpipe" generate --endpoint "ipc://$dir/coord" --prompt "Once upon a time" --max-tokens 100 \
    --deadline-ms 700 >/dev/null 2>"$dir/gen.err"
rc=$?
t1=$(now_ms)
kill -CONT $eng
stopped=()
[ $rc -eq 1 ] && [ $((t1 - t0)) -lt 2500 ] && grep -q "deadline" "$dir/gen.err" &&
    ok "a request past its deadline_ms ends after $((t1 - t0)) ms: $(cat "$dir/gen.err")" ||
    bad "deadline: status $rc after $((t1 - t0)) ms: $(cat "$dir/gen.err")"

# A stage down while the coordinator runs: degraded (200), and ok once back.
kill -KILL $samp
wait $samp 2>/dev/null
# (The engine's link, closed with its group's, is named until it reconnects.)
degraded_sampler() {
    for _ in $(seq 1 150); do
        [ "$(health)" = 200 ] && grep -q '"status":"degraded"' "$dir/health.body" &&
            grep -q "sampler-svc" "$dir/health.body" && ! grep -q "engine-svc" "$dir/health.body" && return 0
        sleep 0.1
    done
    return 1
}
degraded_sampler && ok "/health with the sampler down: 200 $(cat "$dir/health.body")" ||
    bad "/health with the sampler down: $(health) $(cat "$dir/health.body")"
start samp.log "$build/sampler-svc/sampler-svc" --model "$model" --endpoint "ipc://$dir/samp"
samp=${pids[-1]}
kill -KILL $tok
wait $tok 2>/dev/null
wait_health 503 unavailable 15 && grep -q "tokenizer-svc" "$dir/health.body" &&
    ok "/health with the tokenizer down: 503 $(cat "$dir/health.body")" ||
    bad "/health with the tokenizer down: $(health) $(cat "$dir/health.body")"
for p in $http $coord $eng $samp; do kill -TERM $p 2>/dev/null; wait $p 2>/dev/null; done

# ---- lmpipe up helpers ------------------------------------------------------------------
start_up() { # extra args...: sets up ep eng samp shm run
    rm -f "$dir/up.out"
    "$lmpipe" up --model "$model" "$@" >"$dir/up.out" 2>>"$dir/up.err" &
    up=$!
    pids+=($up)
    ep=
    for _ in $(seq 1 300); do
        ep=$(sed -n 's/^lmpipe up: ready on //p' "$dir/up.out" 2>/dev/null)
        [ -n "$ep" ] && break
        kill -0 $up 2>/dev/null || break
        sleep 0.1
    done
    [ -n "$ep" ] || { bad "lmpipe up did not get ready: $(cat "$dir/up.err")"; return 1; }
    eng=$(ps -o pid=,args= --ppid $up | awk '/engine-svc/ {print $1}')
    samp=$(ps -o pid=,args= --ppid $up | awk '/sampler-svc/ {print $1}')
    shm=$(ps -o args= --ppid $up | sed -n 's/.*--shm-name \/\([^ ]*\).*/\1/p')
    run=${ep#ipc://}
    run=${run%/*}
}

# ---- 2: SIGTERM drains ------------------------------------------------------------------
if start_up --drain-grace-ms 1500; then
    kill -STOP $eng
    stopped+=($eng)
    timeout 20 "$lmpipe" generate --endpoint "$ep" --prompt "Once upon a time" --max-tokens 100 \
        >"$dir/gen.out" 2>"$dir/gen.err" &
    gen=$!
    sleep 0.5
    kill -TERM $up
    tk=$(now_ms)
    sleep 0.3
    timeout 20 "$lmpipe" generate --endpoint "$ep" --prompt "Once" --max-tokens 4 >/dev/null 2>"$dir/gen2.err"
    rc2=$?
    wait $gen
    rc=$?
    tg=$(now_ms)
    kill -CONT $eng
    stopped=()
    [ $rc2 -ne 0 ] && grep -q "draining" "$dir/gen2.err" &&
        ok "a new request during the drain is refused: $(cat "$dir/gen2.err")" ||
        bad "a request during the drain: status $rc2: $(cat "$dir/gen2.err")"
    # The grace period (1.5 s), and a little for the client to print.
    [ $rc -eq 1 ] && [ $((tg - tk)) -lt 2200 ] && grep -q "shutting down" "$dir/gen.err" &&
        ok "SIGTERM to lmpipe up: the client's final event came $((tg - tk)) ms later: $(cat "$dir/gen.err")" ||
        bad "drain: generate status $rc after $((tg - tk)) ms: $(cat "$dir/gen.err")"
    wait $up
    rc=$?
    [ $rc -eq 0 ] && ok "lmpipe up exits 0 after the drain" || bad "lmpipe up exited $rc: $(tail -5 "$dir/up.err")"
fi

# A request running at the SIGTERM finishes within the (default) grace period.
if start_up; then
    kill -STOP $eng
    stopped+=($eng)
    timeout 20 "$lmpipe" generate --endpoint "$ep" --prompt "Once upon a time" --max-tokens 32 \
        >"$dir/gen.out" 2>"$dir/gen.err" &
    gen=$!
    sleep 0.5
    kill -TERM $up
    sleep 0.5
    kill -CONT $eng
    stopped=()
    wait $gen
    rc=$?
    [ $rc -eq 0 ] && [ -s "$dir/gen.out" ] &&
        ok "a request running at SIGTERM finishes during the drain: $(head -c 60 "$dir/gen.out")..." ||
        bad "a request running at SIGTERM: status $rc: $(cat "$dir/gen.err")"
    wait $up
    rc=$?
    [ $rc -eq 0 ] || bad "lmpipe up exited $rc after the drain: $(tail -5 "$dir/up.err")"
fi

# ---- 3: the stale segment and run folder of a crash are swept at the next start -------
# Look-alikes of a live owner (this shell) stay.
decoy_dir=/tmp/lmpipe-$$-Zz9Zz9
decoy_seg=lmpipe-$$-00000000000000ff
mkdir -p "$decoy_dir" && : >"/dev/shm/$decoy_seg"
if start_up; then
    old_shm=$shm
    old_run=$run
    # Both at once: lmpipe up gets no chance to clean up after the engine.
    kill -KILL $eng $up
    wait $up 2>/dev/null
    for _ in $(seq 1 50); do pgrep -P $up >/dev/null || break; sleep 0.1; done
    [ -e "/dev/shm/$old_shm" ] && [ -e "$old_run" ] &&
        ok "the crash left /dev/shm/$old_shm and $old_run ($(ls "$old_run"))" ||
        bad "the crash left no segment or run folder to sweep: the sweep is not tested"
    if start_up; then
        [ ! -e "/dev/shm/$old_shm" ] && [ ! -e "$old_run" ] &&
            ok "the next lmpipe up removed the stale segment and run folder" ||
            bad "left after the next start: $(ls -d "/dev/shm/$old_shm" "$old_run" 2>/dev/null)"
        [ -e "/dev/shm/$decoy_seg" ] && [ -d "$decoy_dir" ] &&
            ok "a live owner's look-alike segment and folder stay" ||
            bad "the sweep removed a live owner's files"
        kill -TERM $up
        wait $up 2>/dev/null
    fi
fi
exit $fail
