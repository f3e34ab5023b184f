#!/bin/bash
# Engine groups: one coordinator over two tokenizers and three groups
# started by hand on ipc:// sockets (docs/PIPELINE.md, "Engine groups").
#   - tokenizations are spread over both tokenizers;
#   - group a shares the ring; group b's sampler claims another host
#     (LMPIPE_HOST_ID), so its rows go inline;
#   - group c is down when the coordinator starts: it serves with a and b,
#     and picks c up once c's services come;
#   - 16 concurrent requests spread over the groups, each giving exactly the
#     tokens it gives alone;
#   - group b's engine is stopped, then killed, with requests in flight:
#     its requests move to the other groups (prefilled again from prompt
#     and tokens so far) and give their solo tokens; the others serve on,
#     and b comes back when its engine is restarted;
#   - with every group idle, requests sharing a cached prefix go to the
#     group that holds it.
# usage: groups-test.sh BUILD_DIR SHARED_DIR
set -u
build=$1
model=$2/models/stories260K.gguf
lmpipe=$build/tools/lmpipe
dir=$(mktemp -d /tmp/lmpipe-groups-test.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -KILL $p 2>/dev/null; done
    for p in "${pids[@]}"; do wait $p 2>/dev/null; done
    rm -rf "$dir"
}
trap cleanup EXIT
export LMPIPE_PARENT_PID=$$ # die with this script
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

start() { # log, binary, args...  (pid in $last)
    local log=$1; shift
    "$@" 2>>"$dir/$log" &
    last=$!
    pids+=($last)
}
start_group() { # name [env...]
    local g=$1; shift
    start eng-$g.log "$build/engine-svc/engine-svc" --model "$model" --endpoint "ipc://$dir/eng-$g" --threads 1
    eval "eng_$g=$last"
    start samp-$g.log env "$@" "$build/sampler-svc/sampler-svc" --model "$model" --endpoint "ipc://$dir/samp-$g"
}
start tok.log "$build/tokenizer-svc/tokenizer-svc" --model "$model" --endpoint "ipc://$dir/tok"
start tok2.log "$build/tokenizer-svc/tokenizer-svc" --model "$model" --endpoint "ipc://$dir/tok2"
tok2=$last
start_group a
start_group b LMPIPE_HOST_ID=another-host
LMPIPE_LOG=info start coord.log "$build/coordinator/coordinator" --endpoint "ipc://$dir/coord" \
    --tokenizer "ipc://$dir/tok,ipc://$dir/tok2" --group "a,ipc://$dir/eng-a,ipc://$dir/samp-a" \
    --group "b,ipc://$dir/eng-b,ipc://$dir/samp-b" --group "c,ipc://$dir/eng-c,ipc://$dir/samp-c"

gen() { # n prompt -> ids (or the error) in $dir/out.n, status in $dir/rc.n
    timeout 60 "$lmpipe" generate --endpoint "ipc://$dir/coord" --prompt "$2" --temperature 0 \
        --max-tokens 48 --ignore-eos --ids >"$dir/out.$1" 2>&1
    echo $? >"$dir/rc.$1"
}
prompt() { echo "Once upon a time there was a child number $1 who"; }
stat_field() { # group field(n_requests|steps|ready|dropped) -> value
    "$lmpipe" stats --endpoint "ipc://$dir/coord" | awk -v g="group $1:" -v f="$2" '
        index($0, g) == 1 { if (f == "ready") { print ($3 == "ready,") ? 1 : 0; exit }
                            n = split($0, w, /[ ,]+/); for (i = 1; i < n; i++) if (w[i] == f) { print w[i+1]; exit } }'
}
stat_placed() { "$lmpipe" stats --endpoint "ipc://$dir/coord" | sed -n "s/^group $1: .* requests \([0-9]*\),.*/\1/p"; }
concurrent() { # tag: 16 requests at once
    for i in $(seq 16); do gen "$1.$i" "$(prompt $i)" & done
    wait_gens
}
wait_gens() { for j in $(jobs -p); do case " ${pids[*]} " in *" $j "*) ;; *) wait $j;; esac; done; }
same_as_solo() { # tag: how many of the 16 equal their solo ids
    local n=0
    for i in $(seq 16); do cmp -s "$dir/out.solo.$i" "$dir/out.$1.$i" && [ "$(cat "$dir/rc.$1.$i")" = 0 ] && n=$((n + 1)); done
    echo $n
}

# Ready with a and b while c is down (ready once one group is: wait for b).
"$lmpipe" stats --endpoint "ipc://$dir/coord" --timeout 30000 >/dev/null 2>&1
for t in $(seq 40); do [ "$(stat_field a ready)$(stat_field b ready)" = 11 ] && break; sleep 0.25; done
"$lmpipe" stats --endpoint "ipc://$dir/coord" >"$dir/stats0" 2>&1
grep -q "^group a: ready" "$dir/stats0" && grep -q "^group b: ready" "$dir/stats0" &&
    grep -q "^group c: down" "$dir/stats0" && ok "ready with groups a and b while c is down" ||
    bad "readiness: $(cat "$dir/stats0")"
grep -q "group b ready .*logits inline" "$dir/coord.log" &&
    grep -q "group a ready .*logits in shared memory" "$dir/coord.log" &&
    ok "group a shares the ring; group b's sampler on 'another host' gets rows inline" ||
    bad "ring choice per group: $(grep ready "$dir/coord.log")"

# Each prompt alone, then all 16 at once.
for i in $(seq 16); do gen "solo.$i" "$(prompt $i)"; done
[ "$(for i in $(seq 16); do cat "$dir/rc.solo.$i"; done | sort -u)" = 0 ] && ok "16 solo generations" ||
    bad "solo generations failed: $(cat "$dir"/out.solo.* | head -5)"
a0=$(stat_placed a); b0=$(stat_placed b)
concurrent two
a1=$(stat_placed a); b1=$(stat_placed b)
n=$(same_as_solo two)
[ "$n" = 16 ] && ok "16 concurrent requests over two groups give their solo tokens" ||
    bad "$n of 16 concurrent requests match their solo tokens"
[ $((a1 - a0)) -ge 4 ] && [ $((b1 - b0)) -ge 4 ] && [ $((a1 - a0 + b1 - b0)) = 16 ] &&
    ok "spread: group a took $((a1 - a0)), group b $((b1 - b0))" ||
    bad "not spread over both groups: a $((a1 - a0)), b $((b1 - b0))"

tok_msgs() { "$lmpipe" stats --endpoint "ipc://$dir/$1" | sed -n 's/^messages: \([0-9]*\),.*/\1/p'; }
t1=$(tok_msgs tok); t2=$(tok_msgs tok2)
[ "${t1:-0}" -ge 12 ] && [ "${t2:-0}" -ge 12 ] && ok "tokenizations spread over two tokenizers ($t1 and $t2 messages)" ||
    bad "tokenizers: $t1 and $t2 messages"

# Group c comes up late: the coordinator picks it up (backoff at most 10 s).
start_group c
for t in $(seq 60); do [ "$(stat_field c ready)" = 1 ] && break; sleep 0.5; done
[ "$(stat_field c ready)" = 1 ] && ok "group c, down at start, is picked up once it comes" ||
    bad "group c not ready: $("$lmpipe" stats --endpoint "ipc://$dir/coord")"
c0=$(stat_placed c)
concurrent three
c1=$(stat_placed c)
n=$(same_as_solo three)
[ "$n" = 16 ] && [ $((c1 - c0)) -ge 3 ] && ok "16 requests over three groups (c took $((c1 - c0))) give their solo tokens" ||
    bad "three groups: $n of 16 match, group c took $((c1 - c0))"

# Prefix placement: with every group idle, a request whose prompt shares a
# cached prefix goes to the group that holds it, and reuses it there.
reused() { "$lmpipe" stats --endpoint "ipc://$dir/coord" | sed -n "s/^group $1 kv: .*; \([0-9]*\) prompt tokens reused$/\1/p"; }
long="Once upon a time there was a little girl named Lily who loved to play in the big green park with her dog and her red ball every day"
for g in a b c; do eval "p0_$g=$(stat_placed $g)"; done
gen pfx.0 "$long."
holder=
for g in a b c; do [ $(( $(stat_placed $g) - $(eval echo \$p0_$g) )) = 1 ] && holder=$g; done
if [ -n "$holder" ]; then
    eval "p1=$(stat_placed $holder) r1=$(reused $holder)"
    for i in 1 2 3 4; do gen pfx.$i "$long, and friend number $i came too."; done
    p2=$(stat_placed $holder); r2=$(reused $holder)
    rcs=$(cat "$dir"/rc.pfx.* | sort -u)
    [ $((p2 - p1)) = 4 ] && [ $((r2 - r1)) -ge 64 ] && [ "$rcs" = 0 ] &&
        ok "4 requests sharing group $holder's cached prefix all go to $holder and reuse $((r2 - r1)) tokens" ||
        bad "prefix placement: $holder took $((p2 - p1)) of 4, reused $((r2 - r1)) tokens, rc $rcs"
else bad "prefix placement: the first request was not placed on exactly one group"; fi

# Group b's engine stops (its requests stall in flight), then is killed.
kill -STOP $eng_b
b0=$(stat_placed b)
for i in $(seq 16); do gen "kill.$i" "$(prompt $i)" & done
# kill it once requests are placed on it: a fixed wait is too short under
# ASan on a loaded machine
for _ in $(seq 300); do [ "$(stat_placed b)" -gt "$b0" ] 2>/dev/null && break; sleep 0.1; done
sleep 0.2
{ kill -KILL $eng_b && wait $eng_b; } 2>/dev/null
wait_gens
b1=$(stat_placed b)
n=$(same_as_solo kill)
nerr=0
for i in $(seq 16); do [ "$(cat "$dir/rc.kill.$i")" = 0 ] || nerr=$((nerr + 1)); done
moved=$(grep -c "group b: [0-9]* running request(s) re-driven" "$dir/coord.log")
[ $((b1 - b0)) -ge 1 ] && [ "$nerr" = 0 ] && [ "$n" = 16 ] && [ "$moved" -ge 1 ] &&
    ok "killing group b's engine: its requests move to the other groups; all 16 give their solo tokens" ||
    bad "kill: b had $((b1 - b0)), $nerr errors, $n of 16 match solo, moved $moved; $(cat "$dir/out.kill.1")"
sleep 0.2
[ "$(stat_field b ready)" = 0 ] && [ "$(stat_field b dropped)" = 1 ] && ok "group b is reported down, dropped once" ||
    bad "group b after the kill: $("$lmpipe" stats --endpoint "ipc://$dir/coord" | grep "group b")"
concurrent after
n=$(same_as_solo after)
[ "$n" = 16 ] && ok "groups a and c serve on" || bad "after the kill: $n of 16 match"

# A tokenizer killed: the other one takes every tokenization.
{ kill -KILL $tok2 && wait $tok2; } 2>/dev/null
sleep 0.5
t1=$(tok_msgs tok)
concurrent onetok
n=$(same_as_solo onetok)
t2=$(tok_msgs tok)
[ "$n" = 16 ] && [ $((t2 - t1)) -ge 16 ] && ok "with one tokenizer killed, the other tokenizes all 16" ||
    bad "one tokenizer killed: $n of 16 match, the other got $((t2 - t1)) messages"

# The engine comes back; its sampler stayed up and still takes the
# coordinator as its controller (the link's routing id is kept).
start eng-b.log "$build/engine-svc/engine-svc" --model "$model" --endpoint "ipc://$dir/eng-b" --threads 1
for t in $(seq 60); do [ "$(stat_field b ready)" = 1 ] && break; sleep 0.5; done
b0=$(stat_placed b)
concurrent back
b1=$(stat_placed b)
n=$(same_as_solo back)
[ "$n" = 16 ] && [ $((b1 - b0)) -ge 3 ] && ok "group b is back and serves (took $((b1 - b0)))" ||
    bad "group b back: $n of 16 match, b took $((b1 - b0)); $(grep "group b\\|sampler-svc" "$dir/coord.log" | tail -5)"

for p in "${pids[@]}"; do kill -TERM $p 2>/dev/null; done
wait
pids=()
exit $fail
