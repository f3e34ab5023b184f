#!/bin/bash
# The README's first command through the real pipeline: `lmpipe run` from
# the empty prompt (BOS alone), greedy, 200 tokens, must give the golden ids
# and text of stories260K-from-bos.json, with shared memory and with
# --no-shm; and it must leave no process, segment or socket behind.
# usage: lmpipe-run-test.sh LMPIPE SHARED_DIR
set -u
lmpipe=$1
shared=$2
golden=$shared/goldens/stories260K-from-bos.json
model=$shared/models/stories260K.gguf
fail=0
# Segments are named lmpipe-PID-RANDOM after the engine that made them.
# Other tests may run pipelines at the same time, so a leak is a segment
# whose engine has exited and that is still there a moment later (its
# supervisor removes it right after the engine exits).
orphans() {
    local seg pid
    for seg in $(ls /dev/shm 2>/dev/null | grep '^lmpipe-'); do
        pid=${seg#lmpipe-}; pid=${pid%%-*}
        kill -0 "$pid" 2>/dev/null || echo "$seg"
    done
}
before_shm=$(orphans)

for mode in "" "--no-shm"; do
    ids=$(timeout 120 "$lmpipe" run --model "$model" --prompt "" --temperature 0 --max-tokens 200 --ids $mode) || {
        echo "FAIL: lmpipe run --ids $mode exited $?"; fail=1; }
    text=$(timeout 120 "$lmpipe" run --model "$model" --prompt "" --temperature 0 --max-tokens 200 $mode) || {
        echo "FAIL: lmpipe run $mode exited $?"; fail=1; }
    python3 - "$golden" "$ids" "$text" "$mode" <<'PY' || fail=1
import json, sys
g = json.load(open(sys.argv[1]))
want = g["cases"][0]["continuation_ids"]
got = json.loads(sys.argv[2]) if sys.argv[2] else []
mode = sys.argv[4] or "shm"
if got != want:
    n = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    print(f"FAIL ({mode}): ids differ from the golden at {n} ({len(got)} vs {len(want)} tokens)")
    sys.exit(1)
if sys.argv[3] != g["expected_text"]:
    print(f"FAIL ({mode}): text differs from expected_text")
    sys.exit(1)
print(f"ok ({mode}): 200 golden ids and the expected text")
PY
done

# A bad model path is a clear error, not a hang.
out=$(timeout 30 "$lmpipe" run --model /nonexistent.gguf --prompt x 2>&1)
[ $? -ne 0 ] && echo "$out" | grep -q nonexistent || { echo "FAIL: bad model: $out"; fail=1; }

# Nothing left behind.
leaked=$(comm -13 <(echo "$before_shm" | sort) <(orphans | sort))
if [ -n "$leaked" ]; then
    sleep 2
    leaked=$(comm -12 <(echo "$leaked") <(orphans | sort))
fi
[ -z "$leaked" ] || { echo "FAIL: shared-memory segments left: $leaked"; fail=1; }
left=$(pgrep -f -P $$ 'engine-svc|sampler-svc|tokenizer-svc|coordinator' || true)
[ -z "$left" ] || { echo "FAIL: processes left: $left"; fail=1; }
exit $fail
