#!/bin/bash
# The four services started by hand, each with its own flags (no lmpipe up),
# on ipc:// sockets in a temp folder, then `lmpipe generate` against the
# coordinator.  The sampler claims another host (LMPIPE_HOST_ID), so the
# hello must choose inline rows although the engine has a ring; the result
# is still the golden continuation, and the sampler's token text is the
# tokenizer's.  Then a tokenizer of another
# model is refused at hello with a clear error.
# usage: services-test.sh BUILD_DIR SHARED_DIR
set -u
build=$1
shared=$2
model=$shared/models/stories260K.gguf
other=$shared/models/synth-llama-Q8_0.gguf
dir=$(mktemp -d /tmp/lmpipe-svc-test.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM $p 2>/dev/null; done
    for p in "${pids[@]}"; do wait $p 2>/dev/null; done
    rm -rf "$dir"
}
trap cleanup EXIT
export LMPIPE_PARENT_PID=$$ # die with this script
fail=0

start() { # log, binary, args...
    local log=$1; shift
    "$@" 2>"$dir/$log" &
    pids+=($!)
}
start tok.log "$build/tokenizer-svc/tokenizer-svc" --model "$model" --endpoint "ipc://$dir/tok"
start eng.log "$build/engine-svc/engine-svc" --model "$model" --endpoint "ipc://$dir/eng" --threads 1
LMPIPE_HOST_ID=another-host start samp.log "$build/sampler-svc/sampler-svc" --model "$model" --endpoint "ipc://$dir/samp"
LMPIPE_LOG=info start coord.log "$build/coordinator/coordinator" --endpoint "ipc://$dir/coord" \
    --tokenizer "ipc://$dir/tok" --engine "ipc://$dir/eng" --sampler "ipc://$dir/samp"

ids=$(timeout 60 "$build/tools/lmpipe" generate --endpoint "ipc://$dir/coord" \
      --prompt "Lily and Tom went to the park" --temperature 0 --max-tokens 64 --ids)
python3 - "$shared/goldens/stories260K.json" "$ids" <<'PY' || fail=1
import json, sys
g = json.load(open(sys.argv[1]))
case = next(c for c in g["cases"] if c["prompt"] == "Lily and Tom went to the park")
if (json.loads(sys.argv[2]) if sys.argv[2] else []) != case["continuation_ids"]:
    print("FAIL: ids differ from the golden"); sys.exit(1)
print("ok: hand-started services give the golden continuation")
PY
grep -q "logits inline" "$dir/coord.log" && echo "ok: engine and sampler on different hosts: rows inline" ||
    { echo "FAIL: the coordinator did not choose inline rows: $(cat "$dir/coord.log")"; fail=1; }

# The text of each token, from the sampler's decoder: the same bytes as the
# tokenizer's detokenization of the golden continuation, cut before the
# stop string.
gen_text() { # endpoint
    timeout 60 "$build/tools/lmpipe" generate --endpoint "$1" --prompt "Lily and Tom went to the park" \
        --temperature 0 --max-tokens 64 --stop "play with the box"
}
text1=$(gen_text "ipc://$dir/coord")
want=$(python3 - "$shared/goldens/stories260K.json" <<'PY' | "$build/tools/lmpipe" detokenize --model "$model"
import json, sys
g = json.load(open(sys.argv[1]))
case = next(c for c in g["cases"] if c["prompt"] == "Lily and Tom went to the park")
print(" ".join(str(i) for i in case["continuation_ids"]))
PY
)
want=${want%%play with the box*}
[ -n "$text1" ] && [ "$text1" = "$want" ] && echo "ok: the sampler's token text is the tokenizer's, cut at the stop string" ||
    { echo "FAIL: token text differs: sampler '$text1', tokenizer '$want'"; fail=1; }

# A tokenizer of another model: the coordinator refuses the pipeline, and a
# client is told why.
start tok2.log "$build/tokenizer-svc/tokenizer-svc" --model "$other" --endpoint "ipc://$dir/tok2"
start coord2.log "$build/coordinator/coordinator" --endpoint "ipc://$dir/coord2" \
    --tokenizer "ipc://$dir/tok2" --engine "ipc://$dir/eng" --sampler "ipc://$dir/samp"
out=$(timeout 30 "$build/tools/lmpipe" generate --endpoint "ipc://$dir/coord2" --prompt x 2>&1)
echo "$out" | grep -q "model mismatch" && echo "ok: another model's tokenizer is refused" ||
    { echo "FAIL: mismatched model not refused clearly: $out"; fail=1; }
echo "  ($(echo "$out" | grep -o "model mismatch.*" | head -1))"

# Every service stops cleanly on SIGTERM (exit status 0).
for p in "${pids[@]}"; do kill -TERM $p; done
for p in "${pids[@]}"; do wait $p || { echo "FAIL: service $p exited $?"; fail=1; }; done
pids=()
[ -z "$(ls "$dir" | grep -v log)" ] || { echo "FAIL: socket files left: $(ls "$dir")"; fail=1; }
exit $fail
