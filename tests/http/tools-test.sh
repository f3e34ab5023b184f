#!/bin/bash
# Tool calling and reasoning end to end (tools-test.mjs says what it
# checks): `lmpipe up --config` with HTTP on synth-qwen2 (random weights,
# the real Qwen2 vocabulary) and Qwen 2.5's template as
# tokenizer.chat_template_file; where nats-server and lmpipe-nats are there,
# one case over NATS too (the node script starts nats-server and the bridge).
# usage: tools-test.sh LMPIPE LMPIPE_NATS SHARED_DIR
set -u
lmpipe=$1
bridge=$2
shared=$3
here=$(cd "$(dirname "$0")" && pwd)
nats_dir=$here/../nats
command -v node >/dev/null || { echo "FAIL: node is not installed (deploy/setup-debian.sh)"; exit 1; }
[ -d "$here/node_modules/openai" ] || { echo "FAIL: $here/node_modules/openai missing: run npm ci in tests/http (deploy/setup-debian.sh)"; exit 1; }
/usr/bin/python3 -c 'import jsonschema' 2>/dev/null || { echo "FAIL: python3-jsonschema is missing (deploy/setup-debian.sh)"; exit 1; }
nats_ok=0
if command -v nats-server >/dev/null && [ -x "$bridge" ]; then
    [ -d "$nats_dir/node_modules/nats" ] ||
        { echo "FAIL: $nats_dir/node_modules/nats missing: run npm ci in tests/nats (deploy/setup-debian.sh)"; exit 1; }
    nats_ok=1
fi
work=$(mktemp -d /tmp/lmpipe-tools-test.XXXXXX)
up=
trap '[ -n "$up" ] && kill -TERM $up 2>/dev/null && wait $up; rm -rf "$work"' EXIT
port=$(python3 "$here/../free-ports.py")
model=$shared/models/synth-qwen2-Q8_0.gguf
key=test-key-$$
cat >"$work/lmpipe.conf" <<CONF
model = $model
endpoint = ipc://$work/client.sock
http.listen = 127.0.0.1:$port
tokenizer.chat_template_file = $shared/templates/Qwen2.5-7B-Instruct.jinja
CONF
"$lmpipe" up --config "$work/lmpipe.conf" --api-key "$key" >"$work/up.out" 2>"$work/up.err" &
up=$!
base=http://127.0.0.1:$port
for _ in $(seq 1 600); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$base/health")" = 200 ] && break
    kill -0 $up 2>/dev/null || break
    sleep 0.1
done
[ "$(curl -s -o /dev/null -w '%{http_code}' "$base/health")" = 200 ] ||
    { echo "FAIL: lmpipe up did not get healthy on $base: $(cat "$work/up.out" "$work/up.err")"; exit 1; }
# the vocabulary's end-of-generation tokens (llama.cpp's list: end of text
# and turn, and the FIM pad, repo and file-separator tokens), banned for the
# parallel-call case
eog=$(printf '<|im_end|><|endoftext|><|fim_pad|><|repo_name|><|file_sep|>' | "$lmpipe" tokenize --model "$model" | tr ' ' ',')
LMPIPE_HTTP=$base LMPIPE_API_KEY=$key SHARED=$shared EOG_IDS="[$eog]" LMPIPE=$lmpipe LMPIPE_NATS=$bridge \
    COORD="ipc://$work/client.sock" MODEL=$model WORK=$work NATS_OK=$nats_ok timeout 240 node "$here/tools-test.mjs"
rc=$?
if grep -l "Sanitizer\|runtime error:" "$work"/bridge-*.log 2>/dev/null; then
    echo "FAIL: a sanitizer report in the bridge's log"
    rc=1
fi
[ $rc -ne 0 ] && tail -20 "$work/up.err"
exit $rc
