# up-http.sh - sourced by the HTTP tests: start `lmpipe up --http` on a free
# port with one API key and wait until GET /health says 200.
# needs: $lmpipe $model $work; sets: $up (pid) $port $base $key; returns 1 on failure.
up_http() {
    port=$(python3 "$(dirname "${BASH_SOURCE[0]}")/../free-ports.py")
    key=test-key-$$
    base=http://127.0.0.1:$port
    "$lmpipe" up --model "$model" --endpoint "ipc://$work/client.sock" --http "127.0.0.1:$port" \
        --api-key "$key" >"$work/up.out" 2>"$work/up.err" &
    up=$!
    for _ in $(seq 1 300); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' "$base/health")" = 200 ] && return 0
        kill -0 $up 2>/dev/null || break
        sleep 0.1
    done
    echo "FAIL: lmpipe up --http did not get healthy on $base: $(cat "$work/up.out" "$work/up.err")"
    return 1
}
