#!/usr/bin/env bash
# vs-llama-tokenize.sh - one whole tokenizer run of lmpipe against one of
# llama.cpp's llama-tokenize on the same vocabulary and text: process
# start, GGUF open, load, encode (no BOS, no special tokens), printing the
# ids. The two take turns for N rounds; each run's CPU time (perf stat
# task-clock, so time other processes hold the core is left out) and the
# medians go into one Markdown table, with MB/s of text and the ratio.
#
#   bench/vs-llama-tokenize.sh [-r rounds] [-b build_dir] VOCAB.gguf TEXT
#
# LMPIPE (default BUILD/tools/lmpipe) and LLAMA_TOKENIZE (default
# ../shared/llama.cpp/bin/llama-tokenize) name the two programs. Needs perf.
set -euo pipefail

usage() {
    echo "usage: $0 [-r rounds] [-b build_dir] VOCAB.gguf TEXT" >&2
    exit 2
}

rounds=5
build=build
while getopts "r:b:h" opt; do
    case $opt in
    r) rounds=$OPTARG ;;
    b) build=$OPTARG ;;
    *) usage ;;
    esac
done
shift $((OPTIND - 1))
[ $# -eq 2 ] || usage
vocab=$1
text=$2
if ! [[ $rounds =~ ^[1-9][0-9]*$ ]]; then
    echo "$0: -r wants a positive integer, got '$rounds'" >&2
    exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
lmpipe=${LMPIPE:-$root/$build/tools/lmpipe}
llama_tokenize=${LLAMA_TOKENIZE:-$root/../shared/llama.cpp/bin/llama-tokenize}
for f in "$vocab" "$text"; do
    [ -r "$f" ] || { echo "$0: cannot read '$f'" >&2; exit 1; }
done
[ -x "$lmpipe" ] || { echo "$0: no lmpipe at '$lmpipe' (set LMPIPE or -b)" >&2; exit 1; }
[ -x "$llama_tokenize" ] || { echo "$0: no llama-tokenize at '$llama_tokenize' (set LLAMA_TOKENIZE)" >&2; exit 1; }
command -v perf > /dev/null || { echo "$0: needs perf" >&2; exit 1; }

# CPU milliseconds of one run of the command, stdin from $text.
cpu_ms() {
    local out
    out=$(perf stat -x, -e task-clock -- "$@" < "$text" 2>&1 > /dev/null) || {
        echo "$0: '$1' failed: $out" >&2
        exit 1
    }
    awk -F, '$3 == "task-clock" { printf "%.2f", $1 }' <<< "$out"
}
median() {
    sort -g | awk '{ v[NR] = $1 } END {
        if (NR % 2) printf "%.2f", v[(NR + 1) / 2]
        else printf "%.2f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

lp=() ll=()
for ((i = 0; i < rounds; i++)); do
    lp+=("$(cpu_ms "$lmpipe" tokenize --raw --model "$vocab")")
    ll+=("$(cpu_ms "$llama_tokenize" -m "$vocab" -f "$text" --ids --log-disable --no-bos \
        --no-parse-special)")
done
bytes=$(stat -c %s "$text")
m_lp=$(printf "%s\n" "${lp[@]}" | median)
m_ll=$(printf "%s\n" "${ll[@]}" | median)
echo "vocab: $vocab, text: $text ($bytes bytes), rounds: $rounds (lmpipe, then llama-tokenize, in turn)"
echo
echo "| | lmpipe CPU ms | llama-tokenize CPU ms |"
echo "|---|---|---|"
for ((i = 0; i < rounds; i++)); do
    echo "| round $((i + 1)) | ${lp[i]} | ${ll[i]} |"
done
echo "| median | $m_lp | $m_ll |"
awk -v b="$bytes" -v a="$m_lp" -v c="$m_ll" 'BEGIN {
    printf "| MB/s (median) | %.1f | %.1f |\n", b / a / 1e3, b / c / 1e3
    printf "\nratio (llama-tokenize / lmpipe CPU time): %.1fx\n", c / a }'
