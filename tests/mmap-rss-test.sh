#!/bin/sh
# Weights are held once: after scoring with every weight read, the resident
# size must stay close to the file size (the packed matrices replace their
# mapped pages; a second copy or a dequantized float copy would add at least
# the file's size again).  The allowance covers
# the program, activations and one logits buffer.
# Usage: mmap-rss-test.sh LMPIPE MODEL ALLOWANCE_MB
set -eu
stats=$("$1" score --model "$2" --ids 1,2,3,4,5,6,7,8 --stats 2>&1 >/dev/null)
echo "$stats"
echo "$stats" | awk -v allow="$3" '{
    match($0, /"rss_mb": [0-9.]+/); rss = substr($0, RSTART + 10, RLENGTH - 10) + 0
    match($0, /"file_mb": [0-9.]+/); file = substr($0, RSTART + 11, RLENGTH - 11) + 0
    if (file <= 0 || rss <= 0) { print "no stats"; exit 1 }
    if (rss > file + allow) { printf "resident %.1f MB > file %.1f MB + %d MB\n", rss, file, allow; exit 1 }
    printf "resident %.1f MB <= file %.1f MB + %d MB\n", rss, file, allow }'
