#!/bin/bash
# gpu-checks.sh - every check of docs/CUDA.md that needs a GPU, in one run
# (a lent device gives 10 minutes a command):
#   1. cuda-backend-test: each op and whole forward passes against the CPU;
#   2. every golden whose model is in SHARED_DIR/models, with --backend cuda
#      (and its exact/ twin), at the same tolerances as on the CPU;
#   3. lmpipe run through the four processes (stories260K golden, logits
#      copied from the GPU into the shared-memory ring, and with --no-shm);
#   4. compute-sanitizer memcheck and racecheck on a short generation
#      through the four processes;
#   5. the measured bandwidth, then for the TinyLlama-1.1B and Qwen2.5-0.5B
#      shapes (Q4_K_M) and Qwen2.5-0.5B F16, synthesized here when their
#      vocabulary is in SHARED_DIR/vocab: lmpipe bench (pp512, tg128, the
#      decode as a share of the bandwidth ceiling), lmpipe bench --pipeline
#      (its added time per step) and aggregate decode of 1 and 16
#      concurrent requests through lmpipe up.
# Prints a short table last; logs go to OUT (default ./gpu-out).
#
# Usage: tests/gpu/gpu-checks.sh SHARED_DIR
# BUILD (default build-gpu) is configured and built here with -Dcuda=enabled
# unless it holds a build already and NO_BUILD=1 is set (a machine without
# the build's dependencies: build elsewhere, copy the tree to the same path).
set -u
cd "$(dirname "$0")/../.."
shared=$(cd "${1:?usage: gpu-checks.sh SHARED_DIR}" && pwd)
build=${BUILD:-build-gpu}
out=${OUT:-$PWD/gpu-out}
tmp=${TMPDIR:-/tmp}
mkdir -p "$out"
summary=()
note() { summary+=("$1"); echo "== $1"; }
run() { # name timeout command...: the exit status, output in $out/name.log
    local n=$1 t=$2
    shift 2
    timeout "$t" "$@" >"$out/$n.log" 2>&1
}

nvidia-smi --query-gpu=name,memory.total,clocks.max.memory --format=csv,noheader >"$out/gpu.txt" 2>&1
note "gpu: $(cat "$out/gpu.txt")"
if [ "${NO_BUILD:-0}" != 1 ]; then
    [ -f "$build/build.ninja" ] || meson setup "$build" -Dcuda=enabled -Dshared_dir="$shared" \
        >"$out/setup.log" 2>&1 || { note "setup FAILED (see setup.log)"; exit 1; }
    ninja -C "$build" >"$out/build.log" 2>&1 || { note "build FAILED (see build.log)"; exit 1; }
fi
lmpipe=$build/tools/lmpipe
fails=0
check() { # label status (77: the backend refused a feature of the model by name)
    if [ "$2" = 0 ]; then note "$1: ok"
    elif [ "$2" = 77 ]; then note "$1: skipped (refused by name, see its log)"
    else note "$1: FAIL ($2)"; fails=$((fails + 1)); fi
}

# 1-2. ops, forward passes and goldens
if [ -f "$shared/models/synth-llama-Q4_K_M.gguf" ] && [ -f "$shared/models/synth-qwen2-Q8_0.gguf" ]; then
    run cuda-backend 300 "$build/tests/gpu/cuda-backend-test" "$shared/models"
    check "cuda-backend-test" $?
else
    note "cuda-backend-test: skipped (its models are absent)"
fi
for g in "$shared"/goldens/*.json; do
    name=$(basename "$g" .json)
    model=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["model"])' "$g")
    if [ ! -f "$shared/models/$model" ]; then note "golden $name: skipped ($model absent)"; continue; fi
    run "golden-$name" 300 "$build/tests/golden-test" "$shared/models" "$g" --backend cuda
    check "golden $name" $?
    if [ -f "$shared/goldens/exact/$name.json" ]; then
        run "golden-exact-$name" 300 "$build/tests/golden-test" "$shared/models" \
            "$shared/goldens/exact/$name.json" --exact --backend cuda
        check "golden exact/$name" $?
    fi
done

# 3. the four processes
run lmpipe-run 300 bash tests/lmpipe-run-test.sh "$lmpipe" "$shared"
check "lmpipe run (4 processes, ring and inline)" $?

# 4. sanitizers over a short generation through the four processes
story=$shared/models/stories260K.gguf
for tool in memcheck racecheck; do
    run "$tool" 300 compute-sanitizer --tool $tool --target-processes all --error-exitcode 9 \
        "$lmpipe" run --model "$story" --prompt "Once upon a time" --temperature 0 --max-tokens 24
    check "compute-sanitizer $tool" $?
done

# 5. figures
run bandwidth 60 "$build/tests/gpu/cuda-bandwidth"
bw=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["read_plus_write_gb_s"])' \
    "$out/bandwidth.log" 2>/dev/null)
note "bandwidth: ${bw:-?} GB/s (device-to-device copy, read + write)"
synth() { # name arch shape type vocab
    local f=$tmp/lmpipe-gpu-$1.gguf
    [ -f "$shared/vocab/$5" ] || return 1
    [ -f "$f" ] || "$lmpipe" synth --arch "$2" --shape "$3" --type "$4" --vocab "$shared/vocab/$5" \
        -o "$f" >"$out/synth-$1.log" 2>&1 || return 1
    echo "$f"
}
aggregate() { # model clients: tokens/s of C concurrent greedy requests of 128 tokens
    local w=$tmp/lmpipe-gpu-agg.$$ c=$2 up i got=0 t0 t1 gp=()
    rm -rf "$w"; mkdir -p "$w"
    printf "model = %s\nrun_dir = %s\nendpoint = ipc://%s/c.sock\nmax_seqs = 16\nn_ctx = 1024\n" \
        "$1" "$w" "$w" >"$w/conf"
    "$lmpipe" up --config "$w/conf" >"$w/up.out" 2>"$w/up.err" &
    up=$!
    for i in $(seq 600); do grep -q "ready on" "$w/up.out" && break; sleep 0.1; done
    "$lmpipe" generate --endpoint "ipc://$w/c.sock" --prompt warm --max-tokens 8 --ignore-eos >/dev/null
    t0=$(date +%s.%N)
    for i in $(seq "$c"); do
        "$lmpipe" generate --endpoint "ipc://$w/c.sock" --prompt "Request $i: once upon a time" \
            --temperature 0 --max-tokens 128 --ignore-eos --ids >"$w/r$i" 2>&1 &
        gp+=($!)
    done
    wait "${gp[@]}"
    t1=$(date +%s.%N)
    for i in $(seq "$c"); do got=$((got + $(tr -cd , <"$w/r$i" | wc -c) + 1)); done
    kill -TERM $up; wait $up
    rm -rf "$w"
    python3 -c "print(f'{$got / ($t1 - $t0):.0f} tok/s ({$got} tokens)')"
}
for spec in "tinyllama-Q4_K_M llama tinyllama-1.1b Q4_K_M ggml-vocab-llama-spm.gguf" \
            "qwen2.5-0.5b-Q4_K_M qwen2 qwen2.5-0.5b Q4_K_M ggml-vocab-qwen2.gguf" \
            "qwen2.5-0.5b-F16 qwen2 qwen2.5-0.5b F16 ggml-vocab-qwen2.gguf"; do
    set -- $spec
    m=$(synth "$@") || { note "$1: skipped (no vocabulary $5, or synth failed)"; continue; }
    run "bench-$1" 300 "$lmpipe" bench --model "$m" --backend cuda
    note "$(python3 - "$out/bench-$1.log" "$m" "${bw:-0}" "$1" <<'PY'

import json, os, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
gb = os.path.getsize(sys.argv[2]) / 1e9
bw = float(sys.argv[3])
ceil = bw / gb if bw else 0
print(f"{sys.argv[4]}: pp512 {d['prefill_tok_s']:.0f} tok/s, tg128 {d['decode_tok_s']:.1f} tok/s"
      f" = {100 * d['decode_tok_s'] / ceil if ceil else 0:.1f}% of the ceiling {ceil:.0f} tok/s"
      f" ({gb:.3f} GB read per token)")
PY
)"
    run "pipe-$1" 300 "$lmpipe" bench --model "$m" --pipeline --runs 3
    note "$(python3 - "$out/pipe-$1.log" "$1" <<'PY'

import json, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
s, c = d["step_us"], d["pipeline_cost_pct"]
print(f"{sys.argv[2]} pipeline: tg {d['decode_tok_s']:.1f} tok/s; cost vs in-process {c['decode']}%"
      f" (vs sampled in-process {c['decode_vs_sampled']}%); added per step p50 {s['added_p50']} us,"
      f" p99 {s['added_p99']} us")
PY
)"
    note "$1 aggregate decode through lmpipe up: 1 client $(aggregate "$m" 1), 16 clients $(aggregate "$m" 16)"
done

echo
printf '%s\n' "${summary[@]}"
echo "gpu-checks: $fails failed"
[ $fails = 0 ]
