#!/usr/bin/env bash
# Training speed and accuracy of hogwild against its peer, PyTorch's mnist_hogwild example run
# the same way (bench/peer_torch_hogwild.py), on this machine, side by side.
#
#   bench/hogwild_vs_torch.sh [RUNS] [DATA_DIR] [PYTHON]  (defaults: 5 runs, data/mnist, /usr/bin/python3)
#
# For each model (lenet, mlp) and worker count (1, 2, 4) it runs both RUNS times, one epoch,
# default settings, each hogwild run right before a peer run, and prints a markdown table of the
# medians: training samples/s (first fork to last join, data already in memory), test accuracy,
# and the speed ratio. The ratio is the median of the RUNS paired ratios (each hogwild run over
# the peer run beside it), which keeps a slow spell of a shared machine from landing on one side
# only; the range of the paired ratios follows it.
#
# PYTHON is the Python whose torch is the peer: Debian's python3-torch by default (torch 1.13 on
# OpenBLAS), or the PyPI torch 2.x of bench/.venv-torch (README, "Benchmarks"):
#   bench/hogwild_vs_torch.sh 5 data/mnist bench/.venv-torch/bin/python
# The line "peer:" names its torch, the BLAS it was built with and whether oneDNN ran LeNet's
# convolutions. Without torch the peer columns say "skipped" (a PYTHON named, as an argument or as
# PEER_PYTHON, that cannot import torch is refused instead).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-5}"
DATA="${2:-data/mnist}"
PY="${3:-${PEER_PYTHON:-/usr/bin/python3}}"
WORKER_COUNTS="${WORKER_COUNTS:-1 2 4}"

. bench/stats.sh
count_arg RUNS "$RUNS"
[ -x ./hogwild ] || { echo "build first: make" >&2; exit 1; }
[ -d "$DATA" ] || { echo "no data in $DATA: ./hogwild download mnist" >&2; exit 1; }
./hogwild --version >/dev/null || exit 1  # a refused HOGWILD_CPU_PATH or OPENBLAS_CORETYPE, said before any table

have_torch=1
$PY -c "import torch" 2>/dev/null || have_torch=0
# A Python named (argument or PEER_PYTHON) that has no torch is a mistake, not "skipped": the default
# one without torch is the only case the peer columns say so.
if [ $have_torch -eq 0 ] && { [ -n "${3:-}" ] || [ -n "${PEER_PYTHON:-}" ]; }; then
    echo "the peer's Python $PY cannot import torch (README, \"Benchmarks\": bench/.venv-torch)" >&2
    exit 2
fi


# hogwild's summary line: "done: N samples, training T s (R samples/s), wall W s; test loss L, accuracy A%"
hogwild_run() {  # model workers -> "rate accuracy"
    ./hogwild --quiet --model "models/$1.model" --workers "$2" --data "$DATA" |
        sed -n 's/.*training [0-9.]* s (\([0-9]*\) samples\/s).*accuracy \([0-9.]*\)%.*/\1 \2/p'
}

peer_run() {  # model workers -> "rate accuracy"
    $PY bench/peer_torch_hogwild.py --model "$1" --workers "$2" --data "$DATA" |
        sed -n 's/.*samples_per_second=\([0-9]*\) test_accuracy=\([0-9.]*\).*/\1 \2/p'
}

echo "machine: $(lscpu | sed -n 's/^Model name: *//p') x $(nproc) cores, $(uname -sr)"
echo "hogwild: $(./hogwild --version | sed -n 's/^BLAS: //p'); CPU kernels $(./hogwild --version | sed -n 's/^CPU kernels: //p')"
if [ $have_torch -eq 1 ]; then
    echo "peer: $($PY bench/peer_torch_hogwild.py --describe 2>/dev/null)"
fi
echo "command: WORKER_COUNTS=\"$WORKER_COUNTS\" bench/hogwild_vs_torch.sh $RUNS $DATA $PY   ($RUNS runs each, medians)"
echo
echo "| model | workers | hogwild samples/s | hogwild acc % | peer samples/s | peer acc % | speed ratio: median (range) of pairs |"
echo "|---|---|---|---|---|---|---|"
for model in lenet mlp; do
    for w in $WORKER_COUNTS; do
        h_rates=(); h_accs=(); p_rates=(); p_accs=(); ratios=()
        for _ in $(seq "$RUNS"); do
            read -r rate acc < <(hogwild_run "$model" "$w")
            h_rates+=("$rate"); h_accs+=("$acc")
            if [ $have_torch -eq 1 ]; then
                h_rate=$rate
                read -r rate acc < <(peer_run "$model" "$w")
                p_rates+=("$rate"); p_accs+=("$acc")
                ratios+=("$(awk -v a="$h_rate" -v b="$rate" 'BEGIN {printf "%.3f", a / b}')")
            fi
        done
        hr=$(printf '%s\n' "${h_rates[@]}" | median); ha=$(printf '%s\n' "${h_accs[@]}" | median)
        if [ $have_torch -eq 1 ]; then
            pr=$(printf '%s\n' "${p_rates[@]}" | median); pa=$(printf '%s\n' "${p_accs[@]}" | median)
            ratio=$(printf '%s\n' "${ratios[@]}" | median_range "%.2fx (%.2f-%.2f)")
        else
            pr="skipped (no torch)"; pa="-"; ratio="-"
        fi
        echo "| $model | $w | $hr | $ha | $pr | $pa | $ratio |"
    done
done
