#!/bin/bash
# lmpipe's llama.cpp endpoints against llama.cpp's llama-server on the same
# GGUF (llama-api-test.mjs says what it checks).
# usage: llama-api-test.sh LMPIPE SHARED_DIR
set -u
lmpipe=$1
shared=$2
here=$(cd "$(dirname "$0")" && pwd)
server=$shared/llama.cpp/bin/llama-server
command -v node >/dev/null || { echo "FAIL: node is not installed (deploy/setup-debian.sh)"; exit 1; }
[ -x "$server" ] || { echo "FAIL: $server is missing: the reference this test compares with"; exit 1; }
work=$(mktemp -d /tmp/lmpipe-llama-api-test.XXXXXX)
# stories260K with a Llama 2 chat template added, as in openai-test.sh
model=$work/stories260K-chat.gguf
up= ls=
trap '[ -n "$up" ] && kill -TERM $up 2>/dev/null && wait $up; [ -n "$ls" ] && kill $ls 2>/dev/null && wait $ls; rm -rf "$work"' EXIT
. "$here/up-http.sh"
python3 "$here/gguf-chat-template.py" "$shared/models/stories260K.gguf" "$model" || exit 1
lport=$(python3 "$(dirname "$0")/../free-ports.py")
# --jinja: llama.cpp renders the GGUF's chat template, as tokenizer-svc does
# (docs/TOKENIZER.md); the prompt cache on, as by default
"$server" -m "$model" -t 1 -np 1 -c 512 --jinja --host 127.0.0.1 --port "$lport" >"$work/ls.log" 2>&1 &
ls=$!
up_http || exit 1
for _ in $(seq 1 300); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$lport/health")" = 200 ] && break
    kill -0 $ls 2>/dev/null || break
    sleep 0.1
done
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$lport/health")" = 200 ] ||
    { echo "FAIL: llama-server did not start: $(tail -5 "$work/ls.log")"; exit 1; }
LMPIPE_HTTP=$base LMPIPE_API_KEY=$key LLAMA_HTTP=http://127.0.0.1:$lport GOLDENS=$shared/goldens \
    timeout 240 node "$here/llama-api-test.mjs"
