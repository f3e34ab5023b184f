#!/usr/bin/env bash
# ceiling-shapes.sh - decode against the memory bandwidth for several model
# files in one sitting: `lmpipe bench` on each file in turn, for N rounds,
# so that every file sees the same drift of a shared machine.  Prints one
# Markdown table: per file the medians of pp, tg and decode's share of the
# bytes-read ceiling of its own minutes (decode_read.decode_of_ceiling_pct),
# with the plain read rate measured around each decode.
#
#   bench/ceiling-shapes.sh [-t threads] [-r rounds] [-b build_dir] [-p N] [-n N] MODEL.gguf...
#
# LMPIPE (default BUILD/tools/lmpipe) names the program.  Needs jq.
set -euo pipefail

threads=2 rounds=3 build=build pp=512 tg=128
while getopts "t:r:b:p:n:h" opt; do
    case $opt in
    t) threads=$OPTARG ;;
    r) rounds=$OPTARG ;;
    b) build=$OPTARG ;;
    p) pp=$OPTARG ;;
    n) tg=$OPTARG ;;
    *) echo "usage: $0 [-t threads] [-r rounds] [-b build_dir] [-p N] [-n N] MODEL.gguf..." >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "usage: $0 [-t threads] [-r rounds] [-b build_dir] MODEL.gguf..." >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
lmpipe=${LMPIPE:-$root/$build/tools/lmpipe}
[ -x "$lmpipe" ] || { echo "$0: no lmpipe at '$lmpipe' (set LMPIPE or -b)" >&2; exit 1; }
command -v jq > /dev/null || { echo "$0: needs jq" >&2; exit 1; }

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) printf "n/a";
    else if (NR % 2) printf "%.1f", v[(NR + 1) / 2]; else printf "%.1f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for ((r = 1; r <= rounds; r++)); do
    for i in $(seq 1 $#); do
        m=${!i}
        "$lmpipe" bench --model "$m" --threads "$threads" --prompt-tokens "$pp" --gen-tokens "$tg" \
            2> /dev/null > "$tmp/out.json" || { echo "$0: lmpipe bench failed on $m" >&2; continue; }
        jq -r '.prefill_tok_s' "$tmp/out.json" >> "$tmp/$i.pp"
        jq -r '.decode_tok_s' "$tmp/out.json" >> "$tmp/$i.tg"
        jq -r '.decode_read.decode_of_ceiling_pct' "$tmp/out.json" >> "$tmp/$i.pct"
        jq -r '"\(.decode_read.read_gb_s_before)/\(.decode_read.read_gb_s_after)"' "$tmp/out.json" >> "$tmp/$i.rd"
        jq -r '.decode_read.gb_per_token' "$tmp/out.json" > "$tmp/$i.gb"
    done
done
echo "| model file | GB read a token | pp$pp | tg$tg | read GB/s before/after, each round | tg share of ceiling, each round | median share |"
echo "|---|---|---|---|---|---|---|"
for i in $(seq 1 $#); do
    m=${!i}
    [ -s "$tmp/$i.tg" ] || continue
    printf "| %s | %s | %s | %s | %s | %s | **%s%%** |\n" "$(basename "$m" .gguf)" "$(cat "$tmp/$i.gb")" \
        "$(median < "$tmp/$i.pp")" "$(median < "$tmp/$i.tg")" "$(paste -sd ' ' "$tmp/$i.rd")" \
        "$(paste -sd ' ' "$tmp/$i.pct")" "$(median < "$tmp/$i.pct")"
done
