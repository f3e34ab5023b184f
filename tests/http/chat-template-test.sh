#!/bin/bash
# Chat templates through the real services: `lmpipe up --http` on
# stories260K with Qwen2.5's template in its GGUF, against Hugging Face's
# rendering (chat-template-test.py says what it checks), then an agent-loop
# conversation through the npm openai SDK (tools-sdk-test.mjs).
# usage: chat-template-test.sh LMPIPE SHARED_DIR
set -u
lmpipe=$1
shared=$2
here=$(cd "$(dirname "$0")" && pwd)
command -v node >/dev/null || { echo "FAIL: node is not installed (deploy/setup-debian.sh)"; exit 1; }
[ -d "$here/node_modules/openai" ] || { echo "FAIL: $here/node_modules/openai missing: run npm ci in tests/http (deploy/setup-debian.sh)"; exit 1; }
/usr/bin/python3 -c 'import jinja2' 2>/dev/null || { echo "FAIL: python3-jinja2 is missing (deploy/setup-debian.sh)"; exit 1; }
work=$(mktemp -d /tmp/lmpipe-chat-template-test.XXXXXX)
model=$work/stories260K-qwen.gguf
up=
trap '[ -n "$up" ] && kill -TERM $up 2>/dev/null && wait $up; rm -rf "$work"' EXIT
. "$here/up-http.sh"
python3 "$here/gguf-chat-template.py" "$shared/models/stories260K.gguf" "$model" \
    "$(cat "$shared/templates/Qwen2.5-7B-Instruct.jinja")" || exit 1
up_http || exit 1
status=0
LMPIPE_HTTP=$base LMPIPE_API_KEY=$key timeout 240 /usr/bin/python3 "$here/chat-template-test.py" "$shared" || status=1
LMPIPE_HTTP=$base LMPIPE_API_KEY=$key timeout 120 node "$here/tools-sdk-test.mjs" || status=1
exit $status
