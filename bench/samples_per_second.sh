#!/usr/bin/env bash
# Training speed of two ./hogwild command lines, side by side: A and B run in turn, RUNS times
# each (A B A B ...), and the table gives each one's median training samples/s (first fork to
# last join, as the summary line prints it) and the median (and range) of the paired ratios B/A.
# Pairing keeps a slow spell of a shared machine from landing on one side only.
#
#   bench/samples_per_second.sh RUNS 'A ARGS' 'B ARGS' [BIN_A] [BIN_B]
#
# BIN_A and BIN_B default to ./hogwild; naming another binary for A compares two builds on the
# same arguments. Examples:
#   bench/samples_per_second.sh 7 '--mode dataparallel --replicas 1' '--mode dataparallel --replicas 2'
#   bench/samples_per_second.sh 11 '--workers 2' '--workers 2' /tmp/before/hogwild ./hogwild
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 3 ] || { sed -n 2,13p "$0" >&2; exit 2; }
RUNS=$1 A_ARGS=$2 B_ARGS=$3 BIN_A=${4:-./hogwild} BIN_B=${5:-./hogwild}

. bench/stats.sh

# "done: N samples, training T s (R samples/s), wall ..." -> R; a run that prints no such line fails.
rate() {  # bin args...
    local bin=$1; shift
    local out
    out=$("$bin" --quiet "$@") || { echo "failed: $bin $*" >&2; exit 1; }
    echo "$out" | sed -n 's/^done: .*training [0-9.]* s (\([0-9]*\) samples\/s).*/\1/p'
}

a_rates=(); b_rates=(); ratios=()
for _ in $(seq "$RUNS"); do
    # shellcheck disable=SC2086
    a=$(rate "$BIN_A" $A_ARGS); b=$(rate "$BIN_B" $B_ARGS)
    a_rates+=("$a"); b_rates+=("$b")
    ratios+=("$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.3f", b / a}')")
done
echo "machine: $(lscpu | sed -n 's/^Model name: *//p') x $(nproc) cores; $("$BIN_B" --version | sed -n 's/^BLAS: //p')"
echo "command: bench/samples_per_second.sh $RUNS '$A_ARGS' '$B_ARGS' $BIN_A $BIN_B"
echo
echo "| | command | samples/s (median of $RUNS) |"
echo "|---|---|---|"
echo "| A | $BIN_A $A_ARGS | $(printf '%s\n' "${a_rates[@]}" | median) |"
echo "| B | $BIN_B $B_ARGS | $(printf '%s\n' "${b_rates[@]}" | median) |"
echo
printf '%s\n' "${ratios[@]}" | median_range "B/A: %.2fx (paired runs: %.2f-%.2f)\n"
