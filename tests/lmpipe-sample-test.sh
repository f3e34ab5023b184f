#!/bin/bash
# `lmpipe sample`: counts of draws from hand-made rows against their
# expected distributions (chi-square at p = 0.001, fixed seeds), the
# vocabulary guard options (--n-real, --mask-file), --history for
# penalties, --plugin, determinism of --seed, and clear refusals of bad
# input.
# usage: lmpipe-sample-test.sh LMPIPE MASK_TOKENS_SO WORKDIR MODEL
set -u
lmpipe=$1
plugin=$2
work=$3
model=$4
mkdir -p "$work"
fail=0

python3 - "$work" <<'PY'
import math, struct, sys
w = sys.argv[1]
# p = .1 .2 .3 .4 as logits, plus two tokens with huge logits for the guard
row = [math.log(p) for p in (.1, .2, .3, .4)] + [50.0, 60.0]
open(w + "/row6.f32", "wb").write(struct.pack("<6f", *row))
open(w + "/mask6.bin", "wb").write(bytes([0, 0, 0, 0, 1, 1]))
open(w + "/short.f32", "wb").write(b"\0\0\0")
PY

# check NAME JSON EXPECTED...: counts vs expected probabilities (ids 0..)
check() {
    python3 - "$@" <<'PY'
import json, sys
name, got, want = sys.argv[1], json.loads(sys.argv[2]), [float(x) for x in sys.argv[3:]]
n = sum(got.values())
crit = {1: 10.83, 2: 13.82, 3: 16.27, 4: 18.47}
x2, df = 0.0, -1
for i, p in enumerate(want):
    c = got.get(str(i), 0)
    if p == 0:
        if c:
            print(f"FAIL {name}: id {i} drawn {c} times, expected never"); sys.exit(1)
        continue
    e = p * n
    x2 += (c - e) ** 2 / e
    df += 1
extra = [k for k in got if int(k) >= len(want) or want[int(k)] == 0]
if extra:
    print(f"FAIL {name}: unexpected ids {extra}"); sys.exit(1)
if df >= 1 and x2 > crit[df]:
    print(f"FAIL {name}: chi-square {x2:.2f} > {crit[df]} ({got})"); sys.exit(1)
print(f"ok {name}")
PY
}

run() { "$lmpipe" sample --logits "$work/row6.f32" "$@"; }

# the real vocabulary is 4 tokens: 4 and 5 (logits 50, 60) never come out
out=$(run --n-real 4 --params '{"temperature":1,"samplers":[]}' --draws 20000 --seed 1) &&
    check "n-real, temperature 1" "$out" .1 .2 .3 .4 0 0 || fail=1
out=$(run --mask-file "$work/mask6.bin" --params '{"temperature":0.5,"samplers":["temperature"]}' \
      --draws 20000 --seed 2) &&
    check "mask file, temperature 0.5" "$out" 0.0333333 0.1333333 0.3 0.5333333 0 0 || fail=1
out=$(run --n-real 4 --params '{"top_k":2,"temperature":1,"samplers":["top_k"]}' --draws 20000 --seed 3) &&
    check "top-k 2" "$out" 0 0 0.4285714 0.5714286 || fail=1
out=$(run --n-real 4 --params '{"top_p":0.8,"temperature":1,"samplers":["top_p"]}' --draws 20000 --seed 4) &&
    check "top-p 0.8" "$out" 0 0.2222222 0.3333333 0.4444444 || fail=1
out=$(run --n-real 4 --params '{"min_p":0.6,"temperature":1,"samplers":["min_p"]}' --draws 20000 --seed 5) &&
    check "min-p 0.6" "$out" 0 0 0.4285714 0.5714286 || fail=1
# history 3 3 with a presence penalty of ln 4 on top of repeat 1: p(3) drops
# from .4 to .1 -> .1 .2 .3 .1 over .7
out=$(run --n-real 4 --history 3,3 --params '{"temperature":1,"presence_penalty":1.3862944,"samplers":["penalties"]}' \
      --draws 20000 --seed 6) &&
    check "history + presence penalty" "$out" 0.1428571 0.2857143 0.4285714 0.1428571 || fail=1
# the example plugin masks token 2: .1 .2 .4 over .7
out=$(run --n-real 4 --plugin "$plugin=2" --params '{"temperature":1,"top_k":0,"top_p":1,"min_p":0}' --draws 20000 --seed 7) &&
    check "mask-tokens plugin" "$out" 0.1428571 0.2857143 0 0.5714286 || fail=1
# greedy
out=$(run --n-real 4 --params '{"temperature":0}' --draws 5) && [ "$out" = '{"3":5}' ] &&
    echo "ok greedy" || { echo "FAIL greedy: $out"; fail=1; }
# the same seed gives the same counts; another seed does not
a=$(run --n-real 4 --params '{"temperature":1}' --draws 1000 --seed 42)
b=$(run --n-real 4 --params '{"temperature":1}' --draws 1000 --seed 42)
c=$(run --n-real 4 --params '{"temperature":1}' --draws 1000 --seed 43)
[ "$a" = "$b" ] && [ "$a" != "$c" ] && echo "ok seed" || { echo "FAIL seed: $a / $b / $c"; fail=1; }

# refusals: exit status non-zero and a message naming the problem
refuse() { # WANT ARGS...
    local want=$1; shift
    local msg
    msg=$("$lmpipe" sample "$@" 2>&1 >/dev/null) && { echo "FAIL accepted: $*"; fail=1; return; }
    echo "$msg" | grep -qF -- "$want" && echo "ok refused: $want" ||
        { echo "FAIL: '$msg' lacks '$want'"; fail=1; }
}
refuse "top_k: must be >= 0" --logits "$work/row6.f32" --params '{"top_k":-1}' --draws 1
refuse "top_p: must be in [0, 1], got 1.5" --logits "$work/row6.f32" --params '{"top_p":1.5}' --draws 1
refuse "NaN and Infinity are not JSON" --logits "$work/row6.f32" --params '{"min_p":NaN}' --draws 1
refuse 'unknown sampler "bogus"' --logits "$work/row6.f32" --params '{"samplers":["bogus"]}' --draws 1
refuse "longer than the limit of 16" --logits "$work/row6.f32" \
    --params '{"samplers":"kkkkkkkkkkkkkkkkk"}' --draws 1
refuse "temprature: not a sampling parameter" --logits "$work/row6.f32" --params '{"temprature":1}' --draws 1
refuse "is not a row of float32 logits" --logits "$work/short.f32" --params '{}' --draws 1
refuse "expected one per token" --logits "$work/row6.f32" --mask-file "$work/short.f32" --params '{}' --draws 1
refuse "No such file" --logits "$work/none.f32" --params '{}' --draws 1
refuse "--draws: need 1 to" --logits "$work/row6.f32" --params '{}' --draws 0
refuse "required" --logits "$work/row6.f32"
refuse "--history" --logits "$work/row6.f32" --params '{}' --draws 1 --history 1,x
refuse "cannot load" --logits "$work/row6.f32" --params '{}' --draws 1 --plugin /nonexistent.so
# a plugin from a folder others may write to is refused unopened: one
# world-writable without the sticky bit, and one between the folder and a
# root-owned sticky directory (/tmp, which itself is trusted above the
# folder: docs/SECURITY.md, "Plugin folders")
tmpdir=$(mktemp -d /tmp/lmpipe-sample-plugin.XXXXXX)
mkdir -m 0777 "$tmpdir/open" && chmod 0777 "$tmpdir/open" && mkdir -m 0755 "$tmpdir/open/plugins"
cp "$plugin" "$tmpdir/open/plugins/mask.so"
refuse "open is writable by others" --logits "$work/row6.f32" --params '{}' --draws 1 \
    --plugin "$tmpdir/open/plugins/mask.so"
cp "$plugin" "$tmpdir/open/mask.so"
refuse "open is writable by others" --logits "$work/row6.f32" --params '{}' --draws 1 \
    --plugin "$tmpdir/open/mask.so"
rm -rf "$tmpdir"
# a relative --plugin path is relative to the current folder
lmpipe_abs=$(cd "$(dirname "$lmpipe")" && pwd)/$(basename "$lmpipe")
out=$(cd "$(dirname "$plugin")/.." && "$lmpipe_abs" sample --logits "$work/row6.f32" --n-real 4 \
      --plugin "$(basename "$(dirname "$plugin")")/$(basename "$plugin")=2" \
      --params '{"temperature":0}' --draws 5) && [ "$out" = '{"3":5}' ] &&
    echo "ok relative --plugin path" || { echo "FAIL relative --plugin path: $out"; fail=1; }
refuse "rows of 512 logits, the row has 6" --logits "$work/row6.f32" --params '{}' --draws 1 \
    --model "$model"

# --model: the vocabulary of stories260K (512 tokens); with DRY's default text
# breakers resolved.  A row favouring token 300 greedily gives 300.
python3 - "$work" <<'PY'
import struct, sys
row = [0.0] * 512
row[300] = 5.0
open(sys.argv[1] + "/row512.f32", "wb").write(struct.pack("<512f", *row))
PY
out=$("$lmpipe" sample --logits "$work/row512.f32" --model "$model" --history 5,6,7,5,6 \
      --params '{"temperature":0,"dry_multiplier":0.8}' --draws 3) && [ "$out" = '{"300":3}' ] &&
    echo "ok --model" || { echo "FAIL --model: $out"; fail=1; }
exit $fail
