#!/bin/bash
# lmpipe-info-test.sh - `lmpipe info` on a real model, a vocab-only file and
# bad files.  The expected values are the stories260K model's published
# shape (llama2.c tinyllamas: dim 64, 5 layers, 8 heads, 4 KV heads, hidden
# 172, vocab 512) and sizes worked out from it, not output of our own code.
# usage: lmpipe-info-test.sh LMPIPE SHARED_DIR TMPDIR
set -u
lmpipe=$1 shared=$2 tmp=$3/lmpipe-info-test.$$
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # description, command...
    local what=$1; shift
    if ! "$@"; then echo "FAIL: $what" >&2; fail=1; fi
}
has() { grep -qE -- "$1" "$2"; }

model=$shared/models/stories260K.gguf
"$lmpipe" info "$model" >"$tmp/out" 2>"$tmp/err"
check "info on stories260K exits 0" test $? -eq 0
check "quiet on stderr" test ! -s "$tmp/err"
check "version" has '^version: 3$' "$tmp/out"
check "file size" has "^size: $(stat -c %s "$model")\$" "$tmp/out"
check "key count" has '^metadata \(19 keys\):' "$tmp/out"
check "architecture" has '^  general\.architecture +str "llama"$' "$tmp/out"
check "n_embd" has '^  llama\.embedding_length +u32 64$' "$tmp/out"
check "layers" has '^  llama\.block_count +u32 5$' "$tmp/out"
check "heads" has '^  llama\.attention\.head_count +u32 8$' "$tmp/out"
check "kv heads" has '^  llama\.attention\.head_count_kv +u32 4$' "$tmp/out"
check "ffn" has '^  llama\.feed_forward_length +u32 172$' "$tmp/out"
check "eps" has '^  llama\.attention\.layer_norm_rms_epsilon +f32 1e-05$' "$tmp/out"
check "token list" has '^  tokenizer\.ggml\.tokens +str\[512\] \["<unk>", "<s>", "</s>", ' "$tmp/out"
# 5 layers x 9 tensors + token_embd, output_norm, output
check "tensor count" has '^tensors \(48\):' "$tmp/out"
# 64 x 512 F32 = 131072 bytes
check "token_embd row" has '^  token_embd\.weight +F32 +64 x 512 +[0-9]+ +131072$' "$tmp/out"
check "output row" has '^  output\.weight +F32 +64 x 512 ' "$tmp/out"
# wk: 64 -> 4 KV heads x 8 = 32; 64 x 32 x 4 = 8192 bytes
check "attn_k row" has '^  blk\.4\.attn_k\.weight +F32 +64 x 32 +[0-9]+ +8192$' "$tmp/out"
check "ffn_down row" has '^  blk\.4\.ffn_down\.weight +F32 +172 x 64 +[0-9]+ +44032$' "$tmp/out"
check "norm row" has '^  blk\.0\.attn_norm\.weight +F32 +64 +[0-9]+ +256$' "$tmp/out"
n=$(grep -cE '^  (token_embd|output|output_norm|blk\.[0-4]\.[a-z_]+)\.weight ' "$tmp/out")
check "48 tensor rows ($n)" test "$n" -eq 48

vocab=$shared/vocab/ggml-vocab-qwen2.gguf
"$lmpipe" info "$vocab" >"$tmp/out" 2>"$tmp/err"
check "info on a vocab-only file exits 0" test $? -eq 0
check "vocab: no tensors" has '^tensors \(0\):' "$tmp/out"
check "vocab: 151936 tokens" has '^  tokenizer\.ggml\.tokens +str\[151936\] ' "$tmp/out"
check "vocab: merges" has '^  tokenizer\.ggml\.merges +str\[151387\] \["Ġ Ġ", ' "$tmp/out"

bad() { # description, expected stderr pattern, file
    "$lmpipe" info "$3" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    check "$1: nonzero exit" test $rc -ne 0
    check "$1: nothing on stdout" test ! -s "$tmp/out"
    check "$1: message names the file" grep -qF -- "$3" "$tmp/err"
    check "$1: message '$2' (got: $(head -c 300 "$tmp/err"))" has "$2" "$tmp/err"
}
bad "missing file" 'No such file' "$tmp/missing.gguf"
: >"$tmp/empty.gguf"
bad "empty file" 'truncated' "$tmp/empty.gguf"
bad "text file" 'bad magic' "$shared/vocab/ggml-vocab-llama-spm.gguf.inp"
head -c $(($(stat -c %s "$model") - 1000)) "$model" >"$tmp/cut.gguf"
bad "cut in the data" "tensor '[a-z0-9_.]+': data .* runs past the end" "$tmp/cut.gguf"
head -c 100 "$model" >"$tmp/cut100.gguf"
bad "cut in the header" 'cannot fit|truncated' "$tmp/cut100.gguf"
bad "a folder" 'truncated|not a regular|Is a directory' "$tmp"

"$lmpipe" info >"$tmp/out" 2>"$tmp/err"
check "no argument: exit 2" test $? -eq 2
check "no argument: usage" has 'usage: lmpipe info' "$tmp/err"

exit $fail
