#!/usr/bin/env bash
# Hogwild across ranks: the coupling's rules (--sync-rule, src/comm/rule.c) against one node with
# the same workers in all, at the same samples (issue 22). Every run is one row of a CSV.
#
#   bench/couple_rules.sh accuracy [RUNS]   (default 5) LeNet 1 epoch and the MLP 3 epochs on this
#        machine, 2 ranks and 4 ranks against one node with the same total workers: one node,
#        then each SETUPS entry, run after run (paired: the same minutes of a shared machine)
#   bench/couple_rules.sh hosts [RUNS]      the MLP 3 epochs on 2 hosts (2 ranks x 2 workers,
#        network namespaces: tests/tools/netns_hosts.sh, needs root) at full speed and at 100
#        Mbit/s, against one node of 4 workers
#   bench/couple_rules.sh sweep [RUNS]      (default 3) the trade-off: the MLP 3 epochs on 2 hosts
#        for every --sync-every of SWEEP_EVERY and link of SWEEP_LINKS, both rules
#
# SETUPS (accuracy, hosts): space-separated NAME=RULE@EVERY[@BIN], e.g. the default
#   "momentum=momentum@default sum-100ms=sum@100ms"; "default" gives no --sync-every; BIN
#   (optional) is another hogwild binary, e.g. the build before issue 22 (then RULE is ignored:
#   it has no --sync-rule).
# MODELS (accuracy): "lenet mlp"; RANKS (accuracy): "2 4"; LINKS (hosts): "full 100mbit".
# Appends to bench/out/couple/runs.csv (OUT=...): part, model, epochs, setup, ranks, workers,
# link, rule, sync_every, run, final %, best %, samples/s, rounds, ms in flight (mean), load.
# bench/plot_couple.py draws the sweep from it; each run's metrics CSV and output stay in OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PART="${1:-accuracy}"
RUNS="${2:-$([ "$PART" = sweep ] && echo 3 || echo 5)}"
OUT="${OUT:-bench/out/couple}"
SETUPS="${SETUPS:-momentum=momentum@default sum-100ms=sum@100ms}"
MODELS="${MODELS:-lenet mlp}"
RANKS="${RANKS:-2 4}"
LINKS="${LINKS:-full 100mbit}"
SWEEP_EVERY="${SWEEP_EVERY:-10ms 20ms 50ms 100ms 200ms 500ms 1000ms}"
SWEEP_LINKS="${SWEEP_LINKS:-full 100mbit 10mbit}"
mkdir -p "$OUT/runs"
OUT=$(realpath "$OUT")
CSV="$OUT/runs.csv"
[ -d data/mnist ] || { echo "no data/mnist: ./hogwild download mnist" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "mpirun not found: apt-get install openmpi-bin libopenmpi-dev" >&2; exit 1; }
[ -f "$CSV" ] || echo "part,model,epochs,setup,ranks,workers,link,rule,sync_every,run,final,best,samples_per_s,rounds,flight_ms,load" > "$CSV"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
NETNS=tests/tools/netns_hosts.sh
NAME=hwcouple
N=251
hosts_link=""
cleanup() { [ -z "$hosts_link" ] || "$NETNS" down "$NAME"; }
trap cleanup EXIT

echo "machine: $(lscpu | sed -n 's/^Model name: *//p') x $(nproc) cores; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "command: bench/couple_rules.sh $PART $RUNS (SETUPS=\"$SETUPS\")"

# The two hosts with their link at LINK ("full": no limit), made once per link.
hosts() {
    [ "$hosts_link" = "$1" ] && return
    [ -z "$hosts_link" ] || "$NETNS" down "$NAME"
    hosts_link=$1
    "$NETNS" up "$NAME" "$N" $([ "$1" = full ] || echo "$1")
}

# best_of CSV: the best test accuracy of a metrics file, after the row before training.
best_of() { awk -F, 'NR > 2 && $9 > best { best = $9 } END { print best }' "$1"; }

# one PART MODEL EPOCHS SETUP RANKS WORKERS LINK RULE EVERY RUN BIN: one run, one row. RANKS 0 is
# one node; LINK "local" is mpirun on this host, else the 2 hosts.
one() {
    local part=$1 model=$2 epochs=$3 setup=$4 ranks=$5 workers=$6 link=$7 rule=$8 every=$9 run=${10} bin=${11}
    local tag="$part-$model-$setup-r$ranks-$link-$every-$run"
    local metrics="$OUT/runs/$tag.csv" log="$OUT/runs/$tag.txt"
    local args=("$bin" --workers "$workers" --model "$ROOT/models/$model.model" --data "$ROOT/data/mnist"
                --epochs "$epochs" --quiet --eval-every 10000 --metrics "$metrics" --overwrite)
    if [ "$ranks" -gt 0 ]; then
        [ "$every" = default ] || args+=(--sync-every "$every")
        [ "$bin" != "$ROOT/hogwild" ] || [ "$rule" = default ] || args+=(--sync-rule "$rule")
    fi
    local status=0
    if [ "$ranks" -eq 0 ]; then
        "${args[@]}" > "$log" 2>&1 || status=$?
    elif [ "$link" = local ]; then
        mpirun -np "$ranks" --oversubscribe --bind-to none "${args[@]}" > "$log" 2>&1 || status=$?
    else
        hosts "$link"
        "$NETNS" mpirun "$NAME" "$N" -np 2 --bind-to none --oversubscribe "${args[@]}" > "$log" 2>&1 || status=$?
    fi
    local final="" best="" rate="" rounds="" flight=""
    if [ $status -eq 0 ]; then
        final=$(sed -n 's/^done: .*accuracy \([0-9.]*\)%.*/\1/p' "$log")
        rate=$(sed -n 's/^done: .*(\([0-9.]*\) samples\/s).*/\1/p' "$log")
        rounds=$(sed -n 's/^coupling (rank 0 of [0-9]*): \([0-9]*\) rounds.*/\1/p' "$log")
        flight=$(sed -n 's/^coupling .*in flight \([0-9.]*\) ms on.*/\1/p' "$log")
        best=$(best_of "$metrics")
    else
        final="failed($status)"
    fi
    local load
    load=$(cut -d' ' -f1 /proc/loadavg)
    echo "$part,$model,$epochs,$setup,$ranks,$workers,$link,$rule,$every,$run,$final,$best,$rate,$rounds,$flight,$load" \
        | tee -a "$CSV"
}

epochs_of() { [ "$1" = lenet ] && echo 1 || echo 3; }

# setup NAME=RULE@EVERY[@BIN] -> sets s_name s_rule s_every s_bin
setup() {
    s_name=${1%%=*}
    local rest=${1#*=}
    IFS=@ read -r s_rule s_every s_bin <<< "$rest"
    s_bin=${s_bin:-$ROOT/hogwild}
}

case "$PART" in
accuracy)
    for model in $MODELS; do
        epochs=$(epochs_of "$model")
        for ranks in $RANKS; do
            # The same 4 workers in all for the MLP (2 x 2, 4 x 1); LeNet: 1 worker a rank.
            workers=1
            [ "$model" = mlp ] && workers=$((4 / ranks))
            for run in $(seq 1 "$RUNS"); do
                one accuracy "$model" "$epochs" one-node 0 $((ranks * workers)) local - - "$run" "$ROOT/hogwild"
                for s in $SETUPS; do
                    setup "$s"
                    one accuracy "$model" "$epochs" "$s_name" "$ranks" "$workers" local "$s_rule" "$s_every" "$run" "$s_bin"
                done
            done
        done
    done
    ;;
hosts)
    for link in $LINKS; do
        for run in $(seq 1 "$RUNS"); do
            one hosts mlp 3 one-node 0 4 local - - "$run" "$ROOT/hogwild"
            for s in $SETUPS; do
                setup "$s"
                one hosts mlp 3 "$s_name" 2 2 "$link" "$s_rule" "$s_every" "$run" "$s_bin"
            done
        done
    done
    ;;
sweep)
    for link in $SWEEP_LINKS; do
        for run in $(seq 1 "$RUNS"); do
            for every in $SWEEP_EVERY; do
                for rule in momentum sum; do
                    one sweep mlp 3 "$rule" 2 2 "$link" "$rule" "$every" "$run" "$ROOT/hogwild"
                done
            done
        done
    done
    ;;
*)
    echo "usage: bench/couple_rules.sh accuracy|hosts|sweep [RUNS]" >&2
    exit 2
    ;;
esac
