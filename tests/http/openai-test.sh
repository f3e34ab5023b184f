#!/bin/bash
# The npm openai SDK against `lmpipe up --http` (openai-test.mjs says what it
# checks). node and the SDK are required: deploy/setup-debian.sh installs them.
# usage: openai-test.sh LMPIPE SHARED_DIR
set -u
lmpipe=$1
shared=$2
here=$(cd "$(dirname "$0")" && pwd)
command -v node >/dev/null || { echo "FAIL: node is not installed (deploy/setup-debian.sh)"; exit 1; }
[ -d "$here/node_modules/openai" ] || { echo "FAIL: $here/node_modules/openai missing: run npm ci in tests/http (deploy/setup-debian.sh)"; exit 1; }
work=$(mktemp -d /tmp/lmpipe-openai-test.XXXXXX)
# stories260K with a Llama 2 chat template added (it has none; chat needs one)
model=$work/stories260K-chat.gguf
up=
trap '[ -n "$up" ] && kill -TERM $up 2>/dev/null && wait $up; rm -rf "$work"' EXIT
. "$here/up-http.sh"
python3 "$here/gguf-chat-template.py" "$shared/models/stories260K.gguf" "$model" || exit 1
up_http || exit 1
LMPIPE_HTTP=$base LMPIPE_API_KEY=$key LMPIPE=$lmpipe MODEL=$model GOLDENS=$shared/goldens \
    timeout 240 node "$here/openai-test.mjs"
