#!/usr/bin/env bash
# One node against two, on MNIST, with the same 4 workers in all and the same batch per update:
#
#   one-node             ./hogwild --workers 4                       (Hogwild on one machine)
#   hogwild-2hosts       2 ranks x --workers 2, --sync-every $SYNC   (Hogwild across 2 hosts)
#   dataparallel-2hosts  2 ranks x --replicas 2                      (batch 64 split over the 4)
#
# and both across-host runs again over a link limited to 100 Mbit/s (tc tbf), the point being
# that asynchronous Hogwild keeps its workers at single-node speed while synchronous DataParallel
# waits for the link every step.
#
#   bench/multinode.sh [EPOCHS]        (default 3) the 2 hosts are network namespaces on this
#                                      machine (tests/tools/netns_hosts.sh; needs root)
#   HOSTFILE=hosts bench/multinode.sh  the 2 ranks on the hosts of an Open MPI hostfile (no
#                                      limited runs: limit the real link yourself)
#   SYNC=100ms TARGET=97 MODEL=models/lenet.model bench/multinode.sh   (defaults: 20ms, as hogwild, 94, the MLP)
#
# Writes each run's metrics to bench/out/multinode/*.csv, prints each run's summary (samples/s)
# and Hogwild's coupling line, then the `hogwild compare` table (time and samples to the target)
# and its plot. On one machine the "hosts" share its cores: the numbers show the cost of the link,
# not the gain of a second machine.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
EPOCHS="${1:-3}"
SYNC="${SYNC:-20ms}"
TARGET="${TARGET:-94}"
MODEL="${MODEL:-models/mlp.model}"
OUT=bench/out/multinode
mkdir -p "$OUT"
[ -d data/mnist ] || { echo "no data/mnist: ./hogwild download mnist" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "mpirun not found: apt-get install openmpi-bin libopenmpi-dev" >&2; exit 1; }

# As root Open MPI wants both variables; several ranks on one host need --bind-to none, and more
# processes than cores --oversubscribe.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
NETNS=tests/tools/netns_hosts.sh
NAME=hwbench
N=250
cleanup() { [ -n "${HOSTFILE:-}" ] || "$NETNS" down "$NAME"; }
trap cleanup EXIT

echo "machine: $(lscpu | sed -n 's/^Model name: *//p') x $(nproc) cores; hosts: ${HOSTFILE:-2 network namespaces on this machine}"
echo "command: bench/multinode.sh $EPOCHS ($MODEL, MNIST, 4 workers in all, batch 64 per update, --sync-every $SYNC)"
common=(--model "$ROOT/$MODEL" --data "$ROOT/data/mnist" --epochs "$EPOCHS" --quiet --eval-every 10000)

# across LABEL RATE ARGS...: 2 ranks, one per host, the link limited to RATE (or not: "").
across() {
    local label=$1 rate=$2
    shift 2
    if [ -n "${HOSTFILE:-}" ]; then
        mpirun -np 2 --bind-to none --hostfile "$HOSTFILE" "$ROOT/hogwild" "$@" "${common[@]}" \
            --metrics "$ROOT/$OUT/$label.csv"
    else
        "$NETNS" down "$NAME"
        "$NETNS" up "$NAME" "$N" $rate
        "$NETNS" mpirun "$NAME" "$N" -np 2 --bind-to none --oversubscribe "$ROOT/hogwild" "$@" "${common[@]}" \
            --metrics "$ROOT/$OUT/$label.csv"
    fi
}

show() { grep -E '^(done|coupling)' || true; }

files=("$OUT/one-node.csv")
echo; echo "== one-node: ./hogwild --workers 4"
./hogwild --workers 4 "${common[@]}" --metrics "$OUT/one-node.csv" | show
for limit in "" 100mbit; do
    [ -n "$limit" ] && [ -n "${HOSTFILE:-}" ] && break
    suffix=${limit:+-$limit}
    echo; echo "== hogwild-2hosts$suffix: 2 ranks x --workers 2 --sync-every $SYNC${limit:+, link $limit}"
    across "hogwild-2hosts$suffix" "$limit" --workers 2 --sync-every "$SYNC" | show
    echo; echo "== dataparallel-2hosts$suffix: 2 ranks x --replicas 2${limit:+, link $limit}"
    across "dataparallel-2hosts$suffix" "$limit" --mode dataparallel --replicas 2 | show
    files+=("$OUT/hogwild-2hosts$suffix.csv" "$OUT/dataparallel-2hosts$suffix.csv")
done

echo
echo '```'
./hogwild compare "${files[@]}" --target "$TARGET" --plot "$OUT/multinode.svg"
echo '```'
