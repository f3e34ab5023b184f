#!/usr/bin/env bash
# vs-llama.sh - lmpipe's engine against llama.cpp on the same GGUF file with
# the same thread count: pp512 and tg128 (-p and -n change the lengths: a
# short run where a loaded machine makes llama.cpp's decode crawl), the two
# programs taking turns for
# N rounds so that both see the same drift of a shared machine. Prints one
# Markdown table: each round's figures, the medians and the ratios, with
# the 1-minute load average at the start of each round and the memory read
# rate lmpipe bench measured around its decode (decode_read.read_gb_s), the
# two things that move decode most on a shared VM.
#
#   bench/vs-llama.sh [-t threads] [-r rounds] [-b build_dir] [-p pp] [-n tg] MODEL.gguf
#
# LMPIPE (default BUILD/tools/lmpipe) and LLAMA_BENCH (default
# ../shared/llama.cpp/bin/llama-bench) name the two programs. Needs jq.
# A llama-bench test that fails shows as n/a, with the reason on stderr.
set -euo pipefail

usage() {
    echo "usage: $0 [-t threads] [-r rounds] [-b build_dir] [-p pp] [-n tg] MODEL.gguf" >&2
    exit 2
}

threads=2
rounds=3
build=build
pp=512
tg=128
while getopts "t:r:b:p:n:h" opt; do
    case $opt in
    t) threads=$OPTARG ;;
    r) rounds=$OPTARG ;;
    b) build=$OPTARG ;;
    p) pp=$OPTARG ;;
    n) tg=$OPTARG ;;
    *) usage ;;
    esac
done
shift $((OPTIND - 1))
[ $# -eq 1 ] || usage
model=$1

for v in threads rounds pp tg; do
    if ! [[ ${!v} =~ ^[1-9][0-9]*$ ]]; then
        echo "$0: -$(case $v in pp) echo p ;; tg) echo n ;; *) echo "${v:0:1}" ;; esac) wants a positive integer, got '${!v}'" >&2
        exit 2
    fi
done
root=$(cd "$(dirname "$0")/.." && pwd)
lmpipe=${LMPIPE:-$root/$build/tools/lmpipe}
llama_bench=${LLAMA_BENCH:-$root/../shared/llama.cpp/bin/llama-bench}
[ -r "$model" ] || { echo "$0: cannot read model '$model'" >&2; exit 1; }
[ -x "$lmpipe" ] || { echo "$0: no lmpipe at '$lmpipe' (set LMPIPE or -b)" >&2; exit 1; }
[ -x "$llama_bench" ] || { echo "$0: no llama-bench at '$llama_bench' (set LLAMA_BENCH)" >&2; exit 1; }
command -v jq > /dev/null || { echo "$0: needs jq" >&2; exit 1; }

# The median of the numbers on stdin, one a line ("n/a" lines left out);
# "n/a" when there are none.
median() {
    { grep -v '^n/a$' || true; } | sort -g | awk '{ v[NR] = $1 } END {
        if (NR == 0) printf "n/a"
        else if (NR % 2) printf "%.2f", v[(NR + 1) / 2]
        else printf "%.2f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        if (a == "n/a" || b == "n/a" || b <= 0) printf "n/a"; else printf "%.2fx", a / b }'
}
num() { [ "$1" = n/a ] && printf "n/a" || printf "%.2f" "$1"; }

# llama-bench's tokens/s for one test (-p N -n 0 or -p 0 -n N), or "n/a"
# with the reason on stderr when it fails (a prebuilt binary can stop with
# SIGILL on a CPU that lacks an instruction set it was built for).
llama_ts() {
    local out rc=0
    out=$("$llama_bench" -m "$model" -t "$threads" -p "$1" -n "$2" -r 1 -o json 2> /dev/null) || rc=$?
    local ts
    ts=$(jq -r '.[0].avg_ts // empty' <<< "$out" 2> /dev/null || true)
    if [ $rc -ne 0 ] || [ -z "$ts" ]; then
        echo "$0: llama-bench -p $1 -n $2 failed (exit status $rc)" >&2
        printf "n/a"
    else
        printf "%s" "$ts"
    fi
}

lp_pp=() lp_tg=() ll_pp=() ll_tg=() load=() read=()
for ((i = 0; i < rounds; i++)); do
    load+=("$(cut -d' ' -f1 /proc/loadavg)")
    # One warm-up and one timed run of each test, in both programs (lmpipe
    # bench warms up by itself, llama-bench with -r 1 too).
    out=$("$lmpipe" bench --model "$model" --threads "$threads" \
        --prompt-tokens "$pp" --gen-tokens "$tg")
    lp_pp+=("$(jq -r .prefill_tok_s <<< "$out")")
    lp_tg+=("$(jq -r .decode_tok_s <<< "$out")")
    read+=("$(jq -r '.decode_read.read_gb_s // "n/a"' <<< "$out")")
    ll_pp+=("$(llama_ts "$pp" 0)")
    ll_tg+=("$(llama_ts 0 "$tg")")
done

echo "model: $model, threads: $threads, rounds: $rounds (lmpipe, then llama-bench, in turn)"
echo
echo "| round | load | read GB/s | lmpipe pp$pp | llama.cpp pp$pp | ratio | lmpipe tg$tg | llama.cpp tg$tg | ratio |"
echo "|---|---|---|---|---|---|---|---|---|"
for ((i = 0; i < rounds; i++)); do
    printf "| %d | %s | %s | %s | %s | %s | %s | %s | %s |\n" $((i + 1)) "${load[i]}" "${read[i]}" \
        "$(num "${lp_pp[i]}")" "$(num "${ll_pp[i]}")" "$(ratio "${lp_pp[i]}" "${ll_pp[i]}")" \
        "$(num "${lp_tg[i]}")" "$(num "${ll_tg[i]}")" "$(ratio "${lp_tg[i]}" "${ll_tg[i]}")"
done
m_lp_pp=$(printf "%s\n" "${lp_pp[@]}" | median)
m_ll_pp=$(printf "%s\n" "${ll_pp[@]}" | median)
m_lp_tg=$(printf "%s\n" "${lp_tg[@]}" | median)
m_ll_tg=$(printf "%s\n" "${ll_tg[@]}" | median)
printf "| median | | | %s | %s | %s | %s | %s | %s |\n" \
    "$m_lp_pp" "$m_ll_pp" "$(ratio "$m_lp_pp" "$m_ll_pp")" \
    "$m_lp_tg" "$m_ll_tg" "$(ratio "$m_lp_tg" "$m_ll_tg")"
