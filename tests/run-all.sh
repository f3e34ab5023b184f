#!/bin/bash
# Build lmpipe and run the whole test suite: the normal build (every suite;
# the gpu suite skips where no GPU is present) and an ASan+UBSan build that
# runs the `sanitize` suite (parsers fed corrupt and hostile input).
# Ends with one line: "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
# sampler-svc loads plugins only from folders no one else can write
# (docs/SAMPLER.md); the plugin tests use the build tree as that folder.
umask 022
bash deploy/setup-debian.sh || { echo "0 passed, 1 failed"; exit 1; }

jobs=$(nproc)
# meson 1.0 sets no UBSAN_OPTIONS: without halt_on_error a UBSan report
# would only print, and the test would still pass.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
status=0
setup() { # dir, options...
    local dir=$1; shift
    if [ -d "$dir" ]; then meson setup --reconfigure "$dir" "$@" >/dev/null
    else meson setup "$dir" "$@" >/dev/null; fi
}
run_suite() { # dir, meson test args...
    local dir=$1; shift
    rm -f "$dir/meson-logs/testlog.json"
    meson test -C "$dir" --print-errorlogs --num-processes "$jobs" "$@" || status=1
}

setup build-test --buildtype=debugoptimized && ninja -C build-test || status=1
run_suite build-test
setup build-asan --buildtype=debug -Db_sanitize=address,undefined -Db_lundef=false \
    -Dcuda=disabled && ninja -C build-asan || status=1
run_suite build-asan --suite sanitize

passed=0
failed=0
for log in build-test/meson-logs/testlog.json build-asan/meson-logs/testlog.json; do
    [ -f "$log" ] || { failed=$((failed + 1)); continue; }
    p=$(grep -cE '"result": "(OK|EXPECTEDFAIL)"' "$log")
    f=$(grep -cE '"result": "(FAIL|TIMEOUT|ERROR|UNEXPECTEDPASS)"' "$log")
    passed=$((passed + p))
    failed=$((failed + f))
done
[ $status -ne 0 ] && [ $failed -eq 0 ] && failed=1
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
