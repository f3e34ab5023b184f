#!/bin/bash
# run-long.sh - each parser's libFuzzer target for RUNS executions (default
# 10^7), one at a time and niced, from a copy of its seed corpus; prints one
# line per target: executions, seconds, executions/s, coverage (cov, ft)
# and the corpus it grew to.  A crash stops that target with libFuzzer's
# report and its crash-* file in OUT.  The figures go in docs/TESTING.md.
# Build first (docs/TESTING.md, "Fuzzing"):
#   CC=clang meson setup build-fuzz -Dfuzz=true -Dcuda=disabled -Db_sanitize=address,undefined \
#       -Db_lundef=false -Dc_args=-fsanitize=fuzzer-no-link
#   ninja -C build-fuzz tests/fuzz/fuzz-{json,frames,nats-request,gguf,http}
# usage: tests/fuzz/run-long.sh BUILD_FUZZ OUT [RUNS] [TARGET...]
set -u
build=$(cd "$1" && pwd)
out=$2
runs=${3:-10000000}
shift 3 2>/dev/null || shift $#
targets=${*:-json nats-request frames gguf http}
src=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
status=0
for t in $targets; do
    bin=$build/tests/fuzz/fuzz-$t
    [ -x "$bin" ] || { echo "$t: $bin not built"; status=1; continue; }
    case $t in
        gguf) maxlen=8192 ;;
        http) maxlen=4096 ;;
        *) maxlen=2048 ;;
    esac
    rm -rf "$out/corpus-$t"
    cp -r "$src/corpus-$t" "$out/corpus-$t"
    t0=$(date +%s)
    ( cd "$out" && UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
        nice -n 19 "$bin" -runs="$runs" -max_len=$maxlen -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 "corpus-$t" >"$out/$t.log" 2>&1 )
    rc=$?
    secs=$(( $(date +%s) - t0 ))
    done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$out/$t.log" | tail -1)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/$t.log" | tail -1)
    cov=$(echo "$done_line" | sed -n 's/.*cov: \([0-9]*\).*ft: \([0-9]*\).*corp: \([0-9]*\).*/cov \1, ft \2, corpus \3/p')
    if [ $rc -eq 0 ] && [ "${execs:-0}" -ge "$runs" ]; then
        echo "$t: ${execs} executions in ${secs} s ($(( execs / (secs > 0 ? secs : 1) ))/s), $cov, no crash"
    else
        echo "$t: FAILED (exit $rc) after ${execs:-?} executions in ${secs} s: $(grep -m3 -E 'ERROR|SUMMARY|crash-' "$out/$t.log")"
        status=1
    fi
done
exit $status
