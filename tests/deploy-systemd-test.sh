#!/bin/bash
# deploy/systemd: `systemd-analyze verify` on every template unit (an
# instance of each, with ExecStart's /usr/bin/lmpipe replaced by the built
# one), failing on any warning it prints, not only on its exit status; then
# the settings the units promise: Type=notify with NotifyAccess=main (lmpipe
# up relays its services' notifications), a watchdog, Restart=on-failure,
# the hardening, the key as a credential, and `--only ROLE` per role, with
# engine and sampler in one unit for the /dev/shm ring.
# Exit 77 only when systemd-analyze is missing or cannot verify a trivial
# unit here (no systemd to load units with).
# usage: deploy-systemd-test.sh SOURCE_DIR LMPIPE
set -u
src=$1
lmpipe=$(realpath "$2")
fail=0
work=$(mktemp -d /tmp/deploy-systemd-test.XXXXXX)
trap 'rm -rf "$work"' EXIT

sa=$(command -v systemd-analyze) || { echo "SKIP: no systemd-analyze"; exit 77; }
printf '[Service]\nType=oneshot\nExecStart=/bin/true\n' >"$work/lmpipe-probe.service"
if ! out=$("$sa" verify "$work/lmpipe-probe.service" 2>&1) || [ -n "$out" ]; then
    echo "SKIP: systemd-analyze cannot verify a trivial unit here: $out"
    exit 77
fi
rm "$work/lmpipe-probe.service"

units="lmpipe lmpipe-tokenizer lmpipe-engine lmpipe-sampler lmpipe-group lmpipe-coordinator lmpipe-http"
for u in $units; do
    f=$src/deploy/systemd/$u@.service
    [ -f "$f" ] || { echo "FAIL: $f missing"; fail=1; continue; }
    sed "s|/usr/bin/lmpipe |$lmpipe |" "$f" >"$work/$u@.service"
    grep -q "^ExecStart=$lmpipe up " "$work/$u@.service" || { echo "FAIL: $u: ExecStart is not /usr/bin/lmpipe up"; fail=1; }
    if ! out=$("$sa" verify "$work/$u@test.service" 2>&1) || [ -n "$out" ]; then
        echo "FAIL: systemd-analyze verify $u@test.service:"
        echo "$out"
        fail=1
    fi
    want=(Type=notify NotifyAccess=main WatchdogSec= Restart=on-failure DynamicUser=yes
          ProtectSystem=strict PrivateTmp=yes NoNewPrivileges=yes
          "LoadCredential=curve.key:/etc/lmpipe/keys/%i.key"
          "BindReadOnlyPaths=%d/curve.key:/etc/lmpipe/keys/%i.key")
    for w in "${want[@]}"; do
        grep -q "^$w" "$f" || { echo "FAIL: $u: no $w"; fail=1; }
    done
    case $u in
    lmpipe) only= ;;
    lmpipe-group) only=" --only engine,sampler" ;;
    *) only=" --only ${u#lmpipe-}" ;;
    esac
    grep -qx "ExecStart=/usr/bin/lmpipe up --config /etc/lmpipe/%i.conf$only" "$f" ||
        { echo "FAIL: $u: ExecStart does not run 'lmpipe up --config /etc/lmpipe/%i.conf$only'"; fail=1; }
    # A private /dev is a private /dev/shm: not where the ring's two ends are.
    case $u in
    lmpipe|lmpipe-group|lmpipe-engine|lmpipe-sampler)
        grep -q "^PrivateDevices=yes" "$f" && { echo "FAIL: $u: PrivateDevices=yes hides /dev/shm and GPUs"; fail=1; }
        grep -q "/dev/shm" "$f" || { echo "FAIL: $u: no note on the ring in /dev/shm"; fail=1; } ;;
    *)
        grep -q "^PrivateDevices=yes" "$f" || { echo "FAIL: $u: no PrivateDevices=yes"; fail=1; } ;;
    esac
done
grep -q "^RuntimeDirectory=lmpipe$" "$src/deploy/systemd/lmpipe@.service" &&
    grep -q "^RuntimeDirectoryMode=0700$" "$src/deploy/systemd/lmpipe@.service" ||
    { echo "FAIL: lmpipe@: no RuntimeDirectory=lmpipe with mode 0700"; fail=1; }
[ $fail -eq 0 ] && echo "ok: $(echo $units | wc -w) units verify and carry their settings"
exit $fail
