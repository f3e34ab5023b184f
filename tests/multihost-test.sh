#!/bin/bash
# Three hosts as Linux network namespaces joined by veth links, each with
# its own hostname (UTS namespace), so the hellos tell them apart as they
# would real machines:
#   host A (10.77.1.1, 10.77.2.1): coordinator, tokenizer, HTTP gateway
#   host B (10.77.1.2): engine group "b" (engine + sampler, one ring)
#   host C (10.77.2.2): engine group "c"
# Every link is tcp:// with CURVE.  Variant 1 checks the goldens, 16
# requests spread over both groups against their solo tokens, peers without
# the right key, shared memory inside host B only, admin-only control and
# the plugin folder, then kills host C mid-run.  Variant 2 puts group c's
# sampler on host A, so its rows travel inline, and checks the goldens and
# the 16 requests again.
# usage: multihost-test.sh LMPIPE SHARED_DIR BUILD_DIR
set -u
lmpipe=$(realpath "$1")
shared=$(realpath "$2")
build=$(realpath "$3")
model=$shared/models/stories260K.gguf
golden=$shared/goldens/stories260K.json
marker_so=$build/sampler-svc/test-marker.so

[ "$(id -u)" = 0 ] || { echo "skip: network namespaces need root"; exit 77; }
probe=lpprobe$$
ip netns add $probe 2>/dev/null || { echo "skip: cannot make a network namespace here"; exit 77; }
ip netns del $probe
command -v unshare >/dev/null || { echo "skip: no unshare"; exit 77; }

fail=0
sfx=$$
A=lpA$sfx B=lpB$sfx C=lpC$sfx
# under the build tree: the plugin folder must have no writable-by-others parent
work=$(mktemp -d "$build/multihost.XXXXXX")
chmod 755 "$work"
kill_ns() { # ns: every process in it, at once (a host that dies)
    local p
    p=$(ip netns pids "$1" 2>/dev/null)
    [ -n "$p" ] && kill -KILL $p 2>/dev/null
    for _ in $(seq 1 50); do [ -z "$(ip netns pids "$1" 2>/dev/null)" ] && break; sleep 0.1; done
}
cleanup() {
    for n in $A $B $C; do kill_ns $n; ip netns del $n 2>/dev/null; done
    rm -rf "$work"
}
trap cleanup EXIT

make_hosts() {
    for n in $A $B $C; do
        ip netns add $n || { echo "FAIL: ip netns add $n"; exit 1; }
        ip -n $n link set lo up
    done
    ip link add ab$sfx netns $A type veth peer name ba$sfx netns $B
    ip link add ac$sfx netns $A type veth peer name ca$sfx netns $C
    ip -n $A addr add 10.77.1.1/24 dev ab$sfx
    ip -n $B addr add 10.77.1.2/24 dev ba$sfx
    ip -n $A addr add 10.77.2.1/24 dev ac$sfx
    ip -n $C addr add 10.77.2.2/24 dev ca$sfx
    ip -n $A link set ab$sfx up; ip -n $B link set ba$sfx up
    ip -n $A link set ac$sfx up; ip -n $C link set ca$sfx up
}

on() { # host cmd...: run on a host (its namespace and hostname)
    local h=$1; shift
    local ns
    case $h in A) ns=$A ;; B) ns=$B ;; C) ns=$C ;; esac
    ip netns exec "$ns" unshare --uts sh -c 'hostname "$0"; exec "$@"' "host$h-$sfx" "$@"
}

# ---- keys ----
for k in hostA hostB hostC client rogue; do "$lmpipe" keygen -o "$work/$k" >/dev/null || exit 1; done
"$lmpipe" keygen -o "$work/stranger" >/dev/null # a key pair no host knows of
mkdir -m 700 "$work/plugins"
cp "$marker_so" "$work/plugins/" || exit 1
# the marker plugin's constructor creates this file in the sampler's process
export LP_TEST_PLUGIN_MARKER=$work/marker-opened

write_configs() { # variant
    local v=$1
    cat >"$work/A.conf" <<EOF
model = $model
run_dir = $work/runA
endpoint = tcp://10.77.1.1:5555
curve.key = $work/hostA.key
curve.allow = $work/hostB.pub,$work/hostC.pub,$work/client.pub
http.listen = 10.77.1.1:8080
max_seqs = 8
group.b.engine = tcp://10.77.1.2:5557
group.b.sampler = tcp://10.77.1.2:5558
group.b.server_key = $work/hostB.pub
group.c.engine = tcp://10.77.2.2:5557
group.c.server_key = $work/hostC.pub
EOF
    if [ "$v" = 1 ]; then
        echo "group.c.sampler = tcp://10.77.2.2:5558" >>"$work/A.conf"
    else # group c's sampler on host A: its rows cross hosts inline
        cat >>"$work/A.conf" <<EOF
group.c.sampler = tcp://10.77.2.1:5560
group.c.sampler_key = $work/hostA.pub
sampler.endpoint = tcp://10.77.2.1:5560
EOF
    fi
    for h in B C; do
        local ip=10.77.1.2
        [ $h = C ] && ip=10.77.2.2
        cat >"$work/$h.conf" <<EOF
model = $model
run_dir = $work/run$h
engine.endpoint = tcp://$ip:5557
sampler.endpoint = tcp://$ip:5558
curve.key = $work/host$h.key
curve.allow = $work/hostA.pub
curve.coordinator = $work/hostA.pub
sampler.plugin_dir = $work/plugins
max_seqs = 8
EOF
    done
}

pids=()
start_host() { # host services log
    local h=$1 only=$2
    on "$h" "$lmpipe" up --config "$work/$h.conf" --only "$only" >"$work/$h.out" 2>"$work/$h.err" &
    pids+=($!)
}

coord="tcp://10.77.1.1:5555"
gen() { # host key prompt max [extra...]: the ids of one greedy generation
    local h=$1 key=$2 p=$3 max=$4
    shift 4
    on "$h" timeout 30 "$lmpipe" generate --endpoint "$coord" --curve-key "$work/$key.key" \
        --server-key "$work/hostA.pub" --prompt "$p" --temperature 0 --max-tokens "$max" --ids "$@"
}

cstats() { # the coordinator's `lmpipe stats`, asked from host A with its key
    on A "$lmpipe" stats --endpoint "$coord" --curve-key "$work/hostA.key" --server-key "$work/hostA.pub" \
        --timeout 3000 2>/dev/null
}
group_field() { # stats-text group field: "requests 8" -> 8; "rows ring" -> ring
    echo "$1" | sed -n "s/^group $2: .*[ ,]$3 \([^ ,]*\).*/\1/p"
}

wait_ready() { # seconds: the coordinator answers and both groups are ready
    local end=$((SECONDS + $1))
    while [ $SECONDS -lt $end ]; do
        st=$(cstats)
        [ "$(echo "$st" | grep -c '^group [bc]: ready')" = 2 ] && return 0
        sleep 0.2
    done
    echo "FAIL: the pipeline did not get ready with both groups"
    for f in A B C; do echo "--- host $f:"; tail -5 "$work/$f.err"; done
    return 1
}

check_goldens() { # what
    local i=0
    while IFS= read -r p; do
        ids=$(gen A client "$p" 64 --ignore-eos 2>"$work/gen.err")
        python3 - "$golden" "$i" "$ids" <<'PY' || { echo "FAIL ($1): golden '$p': $(cat "$work/gen.err")"; fail=1; }
import json, sys
g = json.load(open(sys.argv[1]))["cases"][int(sys.argv[2])]
got = json.loads(sys.argv[3])
want = g["continuation_ids"]
if got != want[:len(got)] or len(got) != len(want):
    print("got", got, "\nwant", want); sys.exit(1)
PY
        i=$((i + 1))
    done < <(python3 -c "import json,sys; [print(c['prompt']) for c in json.load(open(sys.argv[1]))['cases']]" "$golden")
    [ $fail = 0 ] && echo "ok ($1): the stories260K goldens over CURVE across hosts"
}

prompts=()
for i in $(seq 1 16); do prompts+=("Story $i: once upon a time, a little"); done

check_spread() { # what: 16 requests at once, each equal to its solo run
    local bad=0
    for i in $(seq 0 15); do
        gen A client "${prompts[$i]}" 24 >"$work/solo$i" 2>"$work/solo$i.err" ||
            { echo "FAIL ($1): solo request $i: $(cat "$work/solo$i.err")"; bad=1; }
    done
    local before after
    before=$(cstats)
    local gp=()
    for i in $(seq 0 15); do gen A client "${prompts[$i]}" 24 >"$work/par$i" 2>"$work/par$i.err" & gp+=($!); done
    for i in $(seq 0 15); do wait "${gp[$i]}" || { echo "FAIL ($1): request $i: $(cat "$work/par$i.err")"; bad=1; }; done
    for i in $(seq 0 15); do
        [ -s "$work/solo$i" ] && cmp -s "$work/solo$i" "$work/par$i" || {
            echo "FAIL ($1): request $i: solo $(cat "$work/solo$i") against $(cat "$work/par$i")"; bad=1; }
    done
    after=$(cstats)
    local nb=$(( $(group_field "$after" b requests) - $(group_field "$before" b requests) ))
    local nc=$(( $(group_field "$after" c requests) - $(group_field "$before" c requests) ))
    echo "  requests placed: group b $nb, group c $nc"
    [ $nb -gt 0 ] && [ $nc -gt 0 ] && [ $((nb + nc)) = 16 ] || bad=1
    [ $bad = 0 ] && echo "ok ($1): 16 requests at once, over both groups, each its solo tokens" ||
        { echo "FAIL ($1): spread"; fail=1; }
}

refusals() { # host endpoint: the service's count of refused peers, asked by its own host
    on "$1" "$lmpipe" stats --endpoint "$2" --curve-key "$work/host$1.key" --server-key "$work/host$1.pub" \
        --timeout 3000 | sed -n 's/^auth refused: //p'
}

refused() { # what host endpoint server-key-name client-key-name: no answer, and counted
    local what=$1 h=$2 ep=$3 srv=$4 cli=$5
    local count0 count1
    count0=$(refusals "$h" "$ep")
    local args=(--endpoint "$ep")
    [ "$cli" != none ] && args+=(--curve-key "$work/$cli.key" --server-key "$work/$srv.pub")
    if on A "$lmpipe" stats --timeout 2000 "${args[@]}" >"$work/ref.out" 2>&1; then
        echo "FAIL ($what): answered: $(head -c 300 "$work/ref.out")"; fail=1; return
    fi
    for _ in $(seq 1 30); do
        count1=$(refusals "$h" "$ep")
        [ "$count1" -gt "$count0" ] && break
        sleep 0.1
    done
    [ -n "$count0" ] && [ "${count1:-0}" -gt "$count0" ] && echo "ok ($what): no answer, refusals $count0 -> $count1" ||
        { echo "FAIL ($what): refusal not counted ($count0 -> $count1)"; fail=1; }
}

# ============================== variant 1 ==============================
make_hosts
write_configs 1
start_host B engine,sampler
start_host C engine,sampler
start_host A tokenizer,coordinator,http
if wait_ready 20; then
    check_goldens "variant 1"
    check_spread "variant 1"

    # keys: none, a stranger's key, a client key pointed at the wrong server
    for ep in "$coord A" "tcp://10.77.1.2:5557 B" "tcp://10.77.1.2:5558 B" "tcp://10.77.2.2:5557 C" \
              "tcp://10.77.2.2:5558 C"; do
        set -- $ep
        refused "no key, $1" "$2" "$1" "host$2" none
        refused "key off the allow-list, $1" "$2" "$1" "host$2" stranger
        refused "wrong server key, $1" "$2" "$1" rogue client
    done

    # shared memory inside host B, not across hosts
    st=$(cstats)
    [ "$(group_field "$st" b rows)" = ring ] && [ "$(group_field "$st" c rows)" = ring ] &&
        echo "ok: each group's engine and sampler share a ring on their own host" ||
        { echo "FAIL: groups without their ring"; fail=1; }
    segs=$(on B sh -c "ls /dev/shm | grep -c lmpipe" 2>/dev/null)
    [ "${segs:-0}" -ge 1 ] && echo "ok: host B's ring is a /dev/shm segment" || { echo "FAIL: no ring on host B"; fail=1; }

    # control: admins only (through the coordinator and at a sampler), and
    # plugins only from the plugin folder
    ctl() { # host key endpoint server-key-name command...
        local h=$1 key=$2 ep=$3 srv=$4
        shift 4
        on "$h" timeout 15 "$lmpipe" sampler --endpoint "$ep" --curve-key "$work/$key.key" \
            --server-key "$work/$srv.pub" "$@" >"$work/ctl.out" 2>&1
    }
    ctl A client "$coord" hostA set '{"temperature": 0.1}' &&
        { echo "FAIL: a non-admin's SamplerControl was taken: $(cat "$work/ctl.out")"; fail=1; } ||
        { grep -q "only admins" "$work/ctl.out" && echo "ok: a non-admin's SamplerControl is refused: $(tail -1 "$work/ctl.out")" ||
          { echo "FAIL: non-admin control: $(cat "$work/ctl.out")"; fail=1; }; }
    ctl A stranger tcp://10.77.1.2:5558 hostB get &&
        { echo "FAIL: host B's sampler answered a stranger: $(cat "$work/ctl.out")"; fail=1; } ||
        echo "ok: host B's sampler gives a stranger nothing"
    ctl A hostA "$coord" hostA get && echo "ok: the admin key's control goes through" ||
        { echo "FAIL: admin control: $(cat "$work/ctl.out")"; fail=1; }
    cp "$marker_so" "$work/outside.so"
    ctl A hostA "$coord" hostA load "$work/outside.so" &&
        { echo "FAIL: a plugin outside the plugin folder loaded: $(cat "$work/ctl.out")"; fail=1; } ||
        echo "ok: a plugin path outside the folder is refused: $(tail -1 "$work/ctl.out")"
    [ -e "$work/marker-opened" ] && { echo "FAIL: the refused plugin was opened"; fail=1; }
    ctl A hostA "$coord" hostA load test-marker.so && [ -e "$work/marker-opened" ] &&
        echo "ok: the same plugin loads from the plugin folder (its constructor ran)" ||
        { echo "FAIL: the plugin in the folder: $(cat "$work/ctl.out")"; fail=1; }
    ctl A hostA "$coord" hostA rollback >/dev/null || { echo "FAIL: rollback: $(cat "$work/ctl.out")"; fail=1; }

    # host C dies mid-run: it stops dead with requests in flight (every
    # process frozen at once), its link goes (no FIN, no RST reaches host
    # A), then it is gone.  The coordinator finds it silent by the links'
    # heartbeats; group c's requests move to group b (prefilled again from
    # prompt and tokens so far) and each gives its solo tokens.
    for i in $(seq 0 15); do gen A client "${prompts[$i]}" 200 --ignore-eos >"$work/ksolo$i" 2>&1; done
    gp=()
    for i in $(seq 0 15); do gen A client "${prompts[$i]}" 200 --ignore-eos >"$work/kill$i" 2>"$work/kill$i.err" & gp+=($!); done
    # stop host C only once it holds requests: on a loaded machine the 16
    # clients may take longer than any fixed sleep to be placed
    for _ in $(seq 1 200); do
        [ "$(group_field "$(cstats)" c running)" -ge 1 ] 2>/dev/null && break
        sleep 0.05
    done
    p=$(ip netns pids $C)
    [ -n "$p" ] && kill -STOP $p
    held=$(group_field "$(cstats)" c running)
    ip -n $A link del ac$sfx
    kill_ns $C
    ip netns del $C
    codes=()
    for i in $(seq 0 15); do wait "${gp[$i]}"; codes+=($?); done
    ok=0 same=0
    for i in $(seq 0 15); do
        [ "${codes[$i]}" = 0 ] && ok=$((ok + 1)) || echo "  request $i: status ${codes[$i]}: $(cat "$work/kill$i.err")"
        [ -s "$work/ksolo$i" ] && cmp -s "$work/ksolo$i" "$work/kill$i" && same=$((same + 1))
    done
    moved=$(grep -o "group c: [0-9]* running request(s) re-driven" "$work/A.err" | head -1)
    st=$(cstats)
    if [ "${held:-0}" -ge 1 ] && [ $ok = 16 ] && [ $same = 16 ] && [ -n "$moved" ] &&
       echo "$st" | grep -q "^group c: down"; then
        echo "ok: host C lost with ${held} requests running on it ($moved): all 16 finished with their solo tokens, group c is down"
    else
        echo "FAIL: host C lost: ${held:-?} running on c, $ok of 16 finished, $same equal to solo, '$moved'; $(echo "$st" | grep '^group c')"
        fail=1
    fi
    ids=$(gen A client "Lily and Tom went to the park" 64 --ignore-eos 2>&1)
    python3 - "$golden" "$ids" <<'PY' && echo "ok: group b serves on after host C is gone" ||
import json, sys
want = json.load(open(sys.argv[1]))["cases"][1]["continuation_ids"]
sys.exit(0 if json.loads(sys.argv[2]) == want else 1)
PY
        { echo "FAIL: after host C died: $ids"; fail=1; }
else
    fail=1
fi
for n in $A $B $C; do kill_ns $n; ip netns del $n 2>/dev/null; done
wait 2>/dev/null
rm -rf "$work"/run?

# ============================== variant 2 ==============================
make_hosts
write_configs 2
start_host B engine,sampler
start_host C engine
start_host A tokenizer,coordinator,http,sampler
if wait_ready 20; then
    st=$(cstats)
    [ "$(group_field "$st" b rows)" = ring ] && [ "$(group_field "$st" c rows)" = inline ] &&
        echo "ok (variant 2): group b uses its ring, group c's rows travel inline to host A" ||
        { echo "FAIL (variant 2): ring use"; fail=1; }
    check_goldens "variant 2"
    check_spread "variant 2"
else
    fail=1
fi

exit $fail
