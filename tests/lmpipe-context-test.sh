#!/bin/bash
# A generation cut short by the context limit (finish reason "context"):
# `lmpipe run --n-ctx 24` and `lmpipe generate` against `lmpipe up` with
# n_ctx = 24 print the 24 golden tokens (BOS alone as the prompt), say on
# stderr that the context stopped them with the prompt, generated and
# context counts, and exit with status 3; --max-tokens under the limit
# still exits 0 with nothing on stderr.
# usage: lmpipe-context-test.sh LMPIPE SHARED_DIR
set -u
lmpipe=$1
shared=$2
model=$shared/models/stories260K.gguf
golden=$shared/goldens/stories260K-from-bos.json
fail=0
work=$(mktemp -d /tmp/lmpipe-context-test.XXXXXX)
up=
trap '[ -n "$up" ] && kill -KILL $up 2>/dev/null; rm -rf "$work"' EXIT
want_msg='stopped at the context limit (finish reason "context"): 1 prompt tokens + 24 generated tokens, context size 24'

# check WHAT STATUS WANT_STATUS OUT_FILE ERR_FILE MODE: MODE ids (the golden's
# first 24 ids), text (their text is a prefix of the golden's) or short (5 ids).
check() {
    local what=$1 rc=$2 want_rc=$3 out=$4 err=$5 mode=$6
    [ "$rc" -eq "$want_rc" ] || { echo "FAIL ($what): status $rc, want $want_rc: $(cat "$err")"; fail=1; }
    if [ "$want_rc" -eq 3 ]; then
        grep -qF "$want_msg" "$err" || { echo "FAIL ($what): stderr '$(cat "$err")'"; fail=1; }
    else
        [ -s "$err" ] && { echo "FAIL ($what): stderr '$(cat "$err")'"; fail=1; }
    fi
    python3 - "$golden" "$out" "$mode" "$what" <<'PY' || fail=1
import json, sys
g = json.load(open(sys.argv[1]))
want = g["cases"][0]["continuation_ids"]
out = open(sys.argv[2]).read()
mode, what = sys.argv[3], sys.argv[4]
if mode == "text":
    ok = len(out) > 1 and g["expected_text"].startswith(out.rstrip("\n"))
else:
    n = 24 if mode == "ids" else 5
    ok = json.loads(out) == want[:n]
if not ok:
    print(f"FAIL ({what}): output {out!r}")
    sys.exit(1)
print(f"ok ({what})")
PY
}

timeout 120 "$lmpipe" run --model "$model" --n-ctx 24 --prompt "" --temperature 0 --ids \
    >"$work/out" 2>"$work/err"
check "run --ids" $? 3 "$work/out" "$work/err" ids
timeout 120 "$lmpipe" run --model "$model" --n-ctx 24 --prompt "" --temperature 0 \
    >"$work/out" 2>"$work/err"
check "run text" $? 3 "$work/out" "$work/err" text
timeout 120 "$lmpipe" run --model "$model" --n-ctx 24 --prompt "" --temperature 0 --ids \
    --max-tokens 5 >"$work/out" 2>"$work/err"
check "run --max-tokens 5" $? 0 "$work/out" "$work/err" short

# lmpipe generate, against a pipeline whose context is 24 positions.
echo "n_ctx = 24" >"$work/conf"
"$lmpipe" up --config "$work/conf" --model "$model" >"$work/up.out" 2>"$work/up.err" &
up=$!
ep=
for _ in $(seq 1 300); do
    ep=$(sed -n 's/^lmpipe up: ready on //p' "$work/up.out" 2>/dev/null)
    [ -n "$ep" ] && break
    kill -0 $up 2>/dev/null || break
    sleep 0.1
done
if [ -z "$ep" ]; then
    echo "FAIL: lmpipe up did not get ready: $(cat "$work/up.err")"
    exit 1
fi
gen() { timeout 60 "$lmpipe" generate --endpoint "$ep" --prompt "" --temperature 0 "$@" \
        >"$work/out" 2>"$work/err"; }
gen --ids; check "generate --ids" $? 3 "$work/out" "$work/err" ids
gen; check "generate text" $? 3 "$work/out" "$work/err" text
gen --stream; check "generate --stream" $? 3 "$work/out" "$work/err" text
gen --ids --max-tokens 5; check "generate --max-tokens 5" $? 0 "$work/out" "$work/err" short
kill -TERM $up
wait $up || { echo "FAIL: lmpipe up exited $?"; fail=1; }
up=
exit $fail
