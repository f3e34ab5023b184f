#!/bin/bash
# gpu-checks.sh - every check of docs/CUDA.md that needs a GPU, in one run
# (a lent device gives 10 minutes a command): build with the CUDA backend,
# the gpu suite (op and forward comparisons, every golden with --backend
# cuda), the four-process run, the measured bandwidth, and lmpipe bench on
# the TinyLlama-shape Q4_K_M and F16 models (synthesized here when not
# given).  Prints a short table last; logs go to OUT (default ./gpu-out).
# Usage: tests/gpu/gpu-checks.sh SHARED_DIR [Q4_K_M.gguf]
set -u
cd "$(dirname "$0")/../.."
shared=$(cd "${1:?usage: gpu-checks.sh SHARED_DIR [Q4_K_M.gguf]}" && pwd)
q4km=${2:-}
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
jobs=$(nproc)
summary=()
note() { summary+=("$1"); echo "== $1"; }

nvidia-smi --query-gpu=name,memory.total,clocks.max.memory --format=csv >"$out/gpu.txt" 2>&1
if [ ! -d build-gpu ]; then
    meson setup build-gpu -Dcuda=enabled -Dshared_dir="$shared" >"$out/setup.log" 2>&1 ||
        { note "setup FAILED (see setup.log)"; exit 1; }
fi
ninja -C build-gpu -j"$jobs" >"$out/build.log" 2>&1 || { note "build FAILED (see build.log)"; exit 1; }

# 1-2. the gpu suite: cuda-backend and every golden with the CUDA backend
meson test -C build-gpu --suite gpu --num-processes 4 --print-errorlogs >"$out/gpu-suite.log" 2>&1
note "gpu suite: $(grep -E '^(Ok|Fail|Skipped):' "$out/gpu-suite.log" | tr -s ' ' | paste -sd' ')"
# 3. everything else, where the engine now defaults to the CUDA backend
meson test -C build-gpu --no-suite gpu --no-suite fuzz --num-processes 4 --print-errorlogs \
    >"$out/all-suites.log" 2>&1
note "other suites: $(grep -E '^(Ok|Fail|Skipped):' "$out/all-suites.log" | tr -s ' ' | paste -sd' ')"
# 4. lmpipe run through the four processes (stories260K golden)
meson test -C build-gpu lmpipe-run pipeline-goldens --print-errorlogs >"$out/run.log" 2>&1
note "lmpipe run / pipeline goldens: $(grep -E '^(Ok|Fail):' "$out/run.log" | tr -s ' ' | paste -sd' ')"

# 5. bandwidth, then bench
build-gpu/tests/gpu/cuda-bandwidth >"$out/bandwidth.json" 2>&1
note "bandwidth: $(cat "$out/bandwidth.json")"
lmpipe=build-gpu/tools/lmpipe
vocab=$shared/vocab/ggml-vocab-llama-spm.gguf
tmp=${TMPDIR:-/tmp}
if [ -z "$q4km" ]; then
    q4km=$tmp/tinyllama-Q4_K_M.gguf
    [ -f "$q4km" ] || $lmpipe synth --arch llama --shape tinyllama-1.1b --type Q4_K_M \
        --vocab "$vocab" -o "$q4km" >"$out/synth.log" 2>&1
fi
f16=$tmp/tinyllama-F16.gguf
[ -f "$f16" ] || $lmpipe synth --arch llama --shape tinyllama-1.1b --type F16 \
    --vocab "$vocab" -o "$f16" >>"$out/synth.log" 2>&1
for m in "$q4km" "$f16"; do
    [ -f "$m" ] || { note "bench: no model $m (see synth.log)"; continue; }
    $lmpipe bench --model "$m" --backend cuda >"$out/bench-$(basename "$m").json" 2>&1
    note "bench $(basename "$m"): $(tail -1 "$out/bench-$(basename "$m").json")"
    LMPIPE_CUDA_GRAPHS=0 $lmpipe bench --model "$m" --backend cuda --prompt-tokens 64 \
        >"$out/bench-nographs-$(basename "$m").json" 2>&1
    note "bench $(basename "$m"), graphs off: $(tail -1 "$out/bench-nographs-$(basename "$m").json")"
done

# 6. memory checker over the op and forward test, where present
if command -v compute-sanitizer >/dev/null; then
    compute-sanitizer --tool memcheck --error-exitcode 9 build-gpu/tests/gpu/cuda-backend-test \
        "$shared/models" >"$out/memcheck.log" 2>&1
    note "memcheck: exit $? (see memcheck.log)"
fi

echo
printf '%s\n' "${summary[@]}"
