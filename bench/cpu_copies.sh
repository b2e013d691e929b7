#!/usr/bin/env bash
# Each copy of the CPU kernels that this CPU runs, timed in turn: is the automatic choice, the copy
# needing the most that the CPU runs, the fastest here? (src/nn/cpu/kernels.c says what was measured;
# bench/RESULTS.md, issue 28.)
#
#   bench/cpu_copies.sh [ROUNDS] [DATA_DIR]        (defaults: 5 rounds, data/mnist)
#
# Each round runs, for every copy in turn (HOGWILD_CPU_PATH=avx512|avx2|baseline, those that
# `./hogwild --version` says this CPU runs), build/bench_nn_step models/lenet.model (one core,
# forward and backward, best of 5 one-second runs) and, when DATA_DIR holds MNIST, one epoch of
# ./hogwild --workers 2 (LeNet, whole-run samples/s). It prints the medians per copy and each
# copy's median ratio to the automatic choice's, round by round (the copies of one round ran one
# after the other, so a slow spell of a shared machine lands on all of them).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${1:-5}"
DATA="${2:-data/mnist}"
. bench/stats.sh
count_arg ROUNDS "$ROUNDS"
[ -x ./hogwild ] || { echo "build first: make" >&2; exit 1; }
make -s build/bench_nn_step >/dev/null

# The automatic choice is read without HOGWILD_CPU_PATH: a forced copy in the caller's environment
# would otherwise be labelled "(automatic)" and every ratio taken against it.
kernels=$(env -u HOGWILD_CPU_PATH ./hogwild --version | sed -n 's/^CPU kernels: //p')
auto=${kernels%% *}
runs=$(sed -n 's/.*this CPU runs \([a-z0-9, ]*\);.*/\1/p' <<<"$kernels" | tr -d ',')
[ -n "$runs" ] || { echo "cannot read the copies this CPU runs from: $kernels" >&2; exit 1; }
whole=1
[ -f "$DATA/train-images-idx3-ubyte.gz" ] || [ -f "$DATA/train-images-idx3-ubyte" ] || {
    whole=0
    echo "no MNIST in $DATA: the whole runs are skipped (./hogwild download mnist)" >&2
}

echo "machine: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1) x $(nproc) cores"
echo "CPU kernels: $kernels"
echo "command: bench/cpu_copies.sh $ROUNDS $DATA   (medians of $ROUNDS rounds)"
echo

declare -A step run
for r in $(seq "$ROUNDS"); do
    for copy in $runs; do
        s=$(HOGWILD_CPU_PATH=$copy build/bench_nn_step models/lenet.model |
            sed -n 's/.*batch  *64: *\([0-9]*\) samples\/s best.*/\1/p')
        [ -n "$s" ] || { echo "bench_nn_step printed no rate under HOGWILD_CPU_PATH=$copy" >&2; exit 1; }
        step[$copy]+="$s "
        if [ "$whole" = 1 ]; then
            w=$(HOGWILD_CPU_PATH=$copy ./hogwild --quiet --workers 2 --data "$DATA" 2>&1 |
                sed -n 's/^done: .*training [0-9.]* s (\([0-9]*\) samples\/s).*/\1/p')
            [ -n "$w" ] || { echo "./hogwild failed under HOGWILD_CPU_PATH=$copy" >&2; exit 1; }
            run[$copy]+="$w "
        fi
    done
    echo "round $r of $ROUNDS done" >&2
done

values() { tr ' ' '\n' <<<"$1" | grep .; }  # "a1 a2 ...", one a line
ratios() {  # "a1 a2 ..." "b1 b2 ...": the median of a_i / b_i
    paste -d' ' <(values "$1") <(values "$2") | awk '{printf "%.3f\n", $1 / $2}' | median
}

echo "| copy | LeNet step, one core (samples/s) | step / $auto's | 2 workers, 1 epoch (samples/s) | 2 workers / $auto's |"
echo "|---|---|---|---|---|"
for copy in $runs; do
    ws="skipped"
    wr="skipped"
    if [ "$whole" = 1 ]; then
        ws=$(values "${run[$copy]}" | median)
        wr="$(ratios "${run[$copy]}" "${run[$auto]}")x"
    fi
    name=$copy
    [ "$copy" = "$auto" ] && name="$copy (automatic)"
    echo "| $name | $(values "${step[$copy]}" | median) | $(ratios "${step[$copy]}" "${step[$auto]}")x | $ws | $wr |"
done
