#!/bin/bash
# Engine groups and CURVE, on one machine standing in for several hosts.
#
# 1. Aggregate decode throughput of one engine group against two, each
#    engine with --threads 1 (so the two cores stand in for two hosts):
#    C concurrent greedy requests of N tokens (ignore_eos), rounds taking
#    turns (1 group, 2 groups, then 2, 1, ...), every service started fresh
#    each round.  Tokens/s = all generated tokens over the wall time from
#    the first request sent to the last one answered.
# 2. The time CURVE adds per decode step: one group on tcp://127.0.0.1 with
#    rows inline (no_shm: every step's rows cross the links, as between
#    hosts), CURVE against allow_insecure_tcp, one request of T tokens on
#    the small model, rounds taking turns; per step = wall / tokens.
#
# usage: bench/groups-bench.sh [-b BUILD] [-r ROUNDS] [-c CLIENTS] [-n TOKENS]
#                              [-s SMALL_MODEL] [-t STEP_TOKENS] MODEL
set -u
build=build rounds=3 clients=16 ntok=64 small=../shared/models/stories260K.gguf steptok=512
while getopts "b:r:c:n:s:t:" o; do
    case $o in
    b) build=$OPTARG ;; r) rounds=$OPTARG ;; c) clients=$OPTARG ;; n) ntok=$OPTARG ;;
    s) small=$OPTARG ;; t) steptok=$OPTARG ;;
    *) sed -n 2,17p "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# = 1 ] || { sed -n 2,17p "$0"; exit 2; }
model=$(realpath "$1")
small=$(realpath "$small")
lmpipe=$(realpath "$build/tools/lmpipe")
work=$(mktemp -d /tmp/lmpipe-groups-bench.XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill -TERM $p 2>/dev/null; done; wait; rm -rf "$work"' EXIT

up() { # name config only: start `lmpipe up`, wait for its ready line(s)
    "$lmpipe" up --config "$2" --only "$3" >"$work/$1.out" 2>"$work/$1.err" &
    pids+=($!)
    local want=$(( $(echo "$3" | tr ',' '\n' | grep -c .) ))
    [[ $3 == *coordinator* ]] && want=1
    for _ in $(seq 1 600); do
        [ "$(grep -c "ready on" "$work/$1.out")" -ge $want ] && return 0
        kill -0 ${pids[-1]} 2>/dev/null || break
        sleep 0.1
    done
    echo "groups-bench: $1 did not start: $(cat "$work/$1.err")" >&2
    exit 1
}
down() {
    for p in "${pids[@]}"; do kill -TERM $p 2>/dev/null; done
    wait "${pids[@]}" 2>/dev/null
    pids=()
}

group_conf() { # name: an engine group's host, on ipc:// in its own folder
    mkdir -p "$work/$1"
    cat >"$work/$1.conf" <<EOF
model = $model
run_dir = $work/$1
engine.endpoint = ipc://$work/$1/engine.sock
sampler.endpoint = ipc://$work/$1/sampler.sock
threads = 1
max_seqs = $clients
n_ctx = 512
EOF
}

throughput() { # groups: one round, tokens/s on stdout
    local n=$1 conf=$work/coord$1.conf
    mkdir -p "$work/coord"
    printf "model = %s\nrun_dir = %s/coord\nendpoint = ipc://%s/coord/c.sock\n" "$model" "$work" "$work" >"$conf"
    for g in $(seq 1 "$n"); do
        group_conf g$g
        up g$g "$work/g$g.conf" engine,sampler
        printf "group.g%d.engine = ipc://%s/g%d/engine.sock\ngroup.g%d.sampler = ipc://%s/g%d/sampler.sock\n" \
            $g "$work" $g $g "$work" $g >>"$conf"
    done
    up coord "$conf" tokenizer,coordinator
    local ep=ipc://$work/coord/c.sock
    "$lmpipe" generate --endpoint "$ep" --prompt "warm-up" --max-tokens 8 --ignore-eos >/dev/null
    local t0 t1 gp=()
    t0=$(date +%s.%N)
    for i in $(seq 1 "$clients"); do
        "$lmpipe" generate --endpoint "$ep" --prompt "Request $i of the round: once upon a time" \
            --temperature 0 --max-tokens "$ntok" --ignore-eos --ids >"$work/r$i" 2>&1 &
        gp+=($!)
    done
    wait "${gp[@]}"
    t1=$(date +%s.%N)
    local got=0
    for i in $(seq 1 "$clients"); do got=$((got + $(tr -cd , <"$work/r$i" | wc -c) + 1)); done
    [ $got = $((clients * ntok)) ] || echo "groups-bench: $got tokens, not $((clients * ntok))" >&2
    down
    echo "$got $t0 $t1" | awk '{printf "%.1f", $1 / ($3 - $2)}'
}

step_time() { # curve|plain: one round, microseconds per step on stdout
    local conf=$work/step.conf port=25556
    [ "$1" = curve ] && port=25566 # not the ports the other mode's services just left
    rm -rf "$work/step"
    mkdir -p "$work/step"
    cat >"$conf" <<EOF
model = $small
run_dir = $work/step
endpoint = ipc://$work/step/c.sock
tokenizer.endpoint = tcp://127.0.0.1:$port
engine.endpoint = tcp://127.0.0.1:$((port + 1))
sampler.endpoint = tcp://127.0.0.1:$((port + 2))
no_shm = true
threads = 1
EOF
    if [ "$1" = curve ]; then echo "curve.key = $work/host.key" >>"$conf"
    else echo "allow_insecure_tcp = true" >>"$conf"; fi
    up step "$conf" tokenizer,engine,sampler,coordinator
    local ep=ipc://$work/step/c.sock t0 t1
    "$lmpipe" generate --endpoint "$ep" --prompt "warm-up" --max-tokens 16 --ignore-eos >/dev/null
    t0=$(date +%s.%N)
    "$lmpipe" generate --endpoint "$ep" --prompt "Once upon a time" --temperature 0 \
        --max-tokens "$steptok" --ignore-eos --ids >/dev/null
    t1=$(date +%s.%N)
    down
    echo "$t0 $t1" | awk -v n="$steptok" '{printf "%.1f", ($2 - $1) * 1e6 / n}'
}

"$lmpipe" keygen -o "$work/host" >/dev/null
echo "groups-bench: $model, $clients clients x $ntok tokens, engines --threads 1; $(nproc) CPUs; load $(cut -d' ' -f1 /proc/loadavg)"
echo "| round | 1 group tok/s | 2 groups tok/s | ratio |"
echo "|---|---|---|---|"
r1=() r2=()
for r in $(seq 1 "$rounds"); do
    if [ $((r % 2)) = 1 ]; then a=$(throughput 1); b=$(throughput 2)
    else b=$(throughput 2); a=$(throughput 1); fi
    r1+=("$a"); r2+=("$b")
    echo "| $r | $a | $b | $(echo "$b $a" | awk '{printf "%.2fx", $1 / $2}') |"
done
m1=$(printf "%s\n" "${r1[@]}" | sort -g | awk '{v[NR]=$1} END{print v[int((NR+1)/2)]}')
m2=$(printf "%s\n" "${r2[@]}" | sort -g | awk '{v[NR]=$1} END{print v[int((NR+1)/2)]}')
echo "| median | $m1 | $m2 | $(echo "$m2 $m1" | awk '{printf "%.2fx", $1 / $2}') |"

echo
echo "per decode step, $small, $steptok tokens, rows inline over tcp://127.0.0.1"
echo "| round | plain TCP us/step | CURVE us/step | CURVE adds |"
echo "|---|---|---|---|"
p=() c=()
for r in $(seq 1 "$rounds"); do
    if [ $((r % 2)) = 1 ]; then x=$(step_time plain); y=$(step_time curve)
    else y=$(step_time curve); x=$(step_time plain); fi
    p+=("$x"); c+=("$y")
    echo "| $r | $x | $y | $(echo "$y $x" | awk '{printf "%.1f us", $1 - $2}') |"
done
mp=$(printf "%s\n" "${p[@]}" | sort -g | awk '{v[NR]=$1} END{print v[int((NR+1)/2)]}')
mc=$(printf "%s\n" "${c[@]}" | sort -g | awk '{v[NR]=$1} END{print v[int((NR+1)/2)]}')
echo "| median | $mp | $mc | $(echo "$mc $mp" | awk '{printf "%.1f us", $1 - $2}') |"
