#!/bin/bash
# lmpipe-synth-test.sh - `lmpipe synth` with the tiny shapes against the
# shared synth-*.gguf files, which llama.cpp's quantizer made with the same
# shapes: the tensor tables (names, types, shapes, offsets, sizes) and the
# metadata (all but general.name) must match.  Also: the output loads in
# `lmpipe info`, a seed gives the same bytes on every run, and bad options
# fail with a message.
# usage: lmpipe-synth-test.sh LMPIPE SHARED_DIR TMPDIR
set -u
lmpipe=$1 shared=$2 tmp=$3/lmpipe-synth-test.$$
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # description, command...
    local what=$1; shift
    if ! "$@"; then echo "FAIL: $what" >&2; fail=1; fi
}
tensors() { "$lmpipe" info "$1" | awk '/^tensors/ { t = 1; next } t'; }
meta() { "$lmpipe" info "$1" | awk '/^metadata/ { m = 1; next } /^$/ { m = 0 } m' |
         grep -v '^  general\.name '; }

for spec in llama:F16 llama:Q4_0 llama:Q4_K_M llama:Q6_K llama:Q8_0 qwen2:Q4_K_M qwen2:Q8_0; do
    arch=${spec%:*} type=${spec#*:}
    vocab=$shared/vocab/ggml-vocab-llama-spm.gguf
    [ "$arch" = qwen2 ] && vocab=$shared/vocab/ggml-vocab-qwen2.gguf
    ref=$shared/models/synth-$arch-$type.gguf
    out=$tmp/$arch-$type.gguf
    "$lmpipe" synth --arch "$arch" --shape tiny --type "$type" --vocab "$vocab" --seed 1 \
        -o "$out" 2>"$tmp/err"
    check "$spec: synth exits 0 ($(cat "$tmp/err"))" test $? -eq 0
    check "$spec: quiet" test ! -s "$tmp/err"
    "$lmpipe" info "$out" >/dev/null
    check "$spec: lmpipe info loads it" test $? -eq 0
    check "$spec: tensor table differs from llama.cpp's file" \
        diff <(tensors "$out") <(tensors "$ref")
    check "$spec: metadata differs from llama.cpp's file" diff <(meta "$out") <(meta "$ref")
done

# qwen35's tiny shape has the shared synth-qwen35-F32.gguf's tensors (names,
# types, shapes; that file is laid out in another order) and qwen35.* keys
# (its own tokenizer as the vocab); in Q4_K_M the engine loads and runs it.
q35=$shared/models/synth-qwen35-F32.gguf
"$lmpipe" synth --arch qwen35 --shape tiny --type F32 --vocab "$q35" --seed 1 -o "$tmp/q35.gguf"
check "qwen35: synth exits 0" test $? -eq 0
shapes() { tensors "$1" | awk 'NR > 1 { NF -= 2; print }' | sort; }
check "qwen35: tensors differ from the shared fixture's" \
    diff <(shapes "$tmp/q35.gguf") <(shapes "$q35")
check "qwen35: qwen35.* keys differ from the shared fixture's" \
    diff <(meta "$tmp/q35.gguf" | grep '^  qwen35\.' | sort) <(meta "$q35" | grep '^  qwen35\.' | sort)
"$lmpipe" synth --arch qwen35 --shape tiny --type Q4_K_M --vocab "$q35" --seed 1 \
    -o "$tmp/q35q.gguf"
check "qwen35 Q4_K_M: synth exits 0" test $? -eq 0
check "qwen35 Q4_K_M: ssm_conv1d stays F32" grep -q 'blk\.0\.ssm_conv1d\.weight *F32' \
    <(tensors "$tmp/q35q.gguf")
check "qwen35 Q4_K_M: the engine runs it" "$lmpipe" score --model "$tmp/q35q.gguf" --ids 1,2,3 \
    >"$tmp/out" 2>"$tmp/err"

# Determinism: two runs with one seed are the same file; another seed is not.
v=$shared/vocab/ggml-vocab-llama-spm.gguf
args=(synth --arch llama --shape tiny --type Q4_K_M --vocab "$v")
"$lmpipe" "${args[@]}" --seed 7 --threads 1 -o "$tmp/a.gguf"
"$lmpipe" "${args[@]}" --seed 7 --threads 2 -o "$tmp/b.gguf"
"$lmpipe" "${args[@]}" --seed 8 -o "$tmp/c.gguf"
ha=$(sha256sum <"$tmp/a.gguf") hb=$(sha256sum <"$tmp/b.gguf") hc=$(sha256sum <"$tmp/c.gguf")
check "same seed, same hash" test "$ha" = "$hb"
check "another seed, another hash" test "$ha" != "$hc"

bad() { # description, expected stderr pattern, expected exit, args...
    local what=$1 pat=$2 want=$3; shift 3
    "$lmpipe" synth "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    check "$what: exit $want (got $rc)" test $rc -eq "$want"
    check "$what: message '$pat' (got: $(head -c 300 "$tmp/err"))" grep -qE -- "$pat" "$tmp/err"
}
bad "no options" 'required' 2
bad "unknown option" "unknown option '--fast'" 2 --fast 1
bad "bad seed" "--seed 'x'" 2 --seed x
bad "unknown type" "--type 'Q9_9'" 1 --arch llama --shape tiny --type Q9_9 --vocab "$v" \
    -o "$tmp/d.gguf"
bad "qwen shape for llama" "not a llama shape" 1 --arch llama --shape qwen2.5-0.5b \
    --type Q8_0 --vocab "$v" -o "$tmp/d.gguf"
bad "missing vocab" "$tmp/none.gguf" 1 --arch llama --shape tiny --type Q8_0 \
    --vocab "$tmp/none.gguf" -o "$tmp/d.gguf"
check "no file left by a failed run" test ! -e "$tmp/d.gguf"
"$lmpipe" synth --help >"$tmp/out"
check "--help exits 0 and lists the types" grep -q 'Q4_K_M' "$tmp/out"

exit $fail
