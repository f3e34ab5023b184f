#!/bin/bash
# The generation flags of `lmpipe run` and `lmpipe generate` (tools/gen-args.c)
# through the real binary: numbers that are not plain decimal (nan, inf, hex,
# blanks) or do not fit are refused at the command line with status 2 and a
# message naming the flag and the value; good values and --params reach the
# pipeline and shape the generation.
# usage: lmpipe-args-test.sh LMPIPE SHARED_DIR
set -u
lmpipe=$1
model=$2/models/stories260K.gguf
fail=0

# refuse CMD FLAG VALUE WANT: status 2, stderr names the flag and WANT.
refuse() {
    local cmd=$1 flag=$2 value=$3 want=$4 out rc
    if [ "$cmd" = run ]; then
        out=$(timeout 30 "$lmpipe" run --model "$model" --prompt x "$flag" "$value" 2>&1)
    else
        out=$(timeout 30 "$lmpipe" generate --endpoint ipc:///nonexistent/coord --prompt x \
              "$flag" "$value" 2>&1)
    fi
    rc=$?
    if [ $rc -ne 2 ] || [[ "$out" != *"lmpipe $cmd: $flag: "* ]] || [[ "$out" != *"$want"* ]]; then
        echo "FAIL: $cmd $flag '$value': status $rc, '$out' (want status 2 and '$want')"
        fail=1
    fi
}

for cmd in run generate; do
    for flag in --temperature --top-p --min-p; do
        for v in nan NaN inf -inf infinity 0x1p-1 0x10 " 0.5" "0.5 " "" 1e .5e1.2 1,5; do
            refuse $cmd $flag "$v" "'$v' is not a decimal number"
        done
        refuse $cmd $flag 1e999 "1e999 is out of range"
        refuse $cmd $flag -1e39 "-1e39 is out of range"
    done
    for flag in --top-k --seed --max-tokens; do
        for v in nan inf 0x10 1.5 1e3 " 3" +3 ""; do
            refuse $cmd $flag "$v" "'$v' is not a decimal integer"
        done
        refuse $cmd $flag 99999999999999999999 "is out of range"
    done
    # The parameter's own range, named by the flag.
    refuse $cmd --top-p 1.5 "top_p: must be in [0, 1], got 1.5"
    refuse $cmd --min-p -0.5 "min_p: must be in [0, 1], got -0.5"
    refuse $cmd --top-k -1 "out of range [0, 2147483647]"
    refuse $cmd --seed -2 "out of range [-1, 9007199254740992]"
    refuse $cmd --max-tokens 0 "not a positive integer (or -1)"
done

# Good numbers in each form reach the pipeline: three greedy tokens.
ids=$(timeout 60 "$lmpipe" run --model "$model" --prompt "" --temperature 0 --top-p .95 \
      --min-p 5e-2 --top-k 40 --seed 7 --max-tokens 3 --ids) &&
    python3 -c 'import json,sys; sys.exit(len(json.loads(sys.argv[1])) != 3)' "$ids" ||
    { echo "FAIL: good numbers: '$ids'"; fail=1; }
exit $fail
