#!/usr/bin/env bash
# How close the training step runs to the machine's floor (issue 28's first target), in one command:
# build/bench_compute_floor (the sgemm peak, and the floor it gives the model) and the step of one
# or two builds (build/bench_nn_step: one core, best of 5 one-second runs), in turn, round by round.
# The floor moves with what the other tenants of a shared machine leave, so each step is set
# against the floor of its own round.
#
#   bench/floor_share.sh [ROUNDS] [MODEL] [STEP_BIN [STEP_BIN_B]]
#       (defaults: 7 rounds, models/lenet.model, build/bench_nn_step)
#
# With two step binaries (a build before a change and one after), their order alternates by round
# and the last line is the median of their paired ratios. It prints a markdown table: per round
# the peak, the floor, each step and its share of the floor; then the medians. Pin it to one core
# where the machine allows (taskset -c 2 bench/floor_share.sh); HOGWILD_CPU_PATH and
# OPENBLAS_CORETYPE choose the kernels as for ./hogwild.
set -euo pipefail
# MODEL and STEP_BIN given are the caller's, read from the folder it ran in: made absolute before
# the cd to the repository (which read them from there, another build or none).
caller="$PWD"
absolute() { case "$1" in /*) echo "$1" ;; *) echo "$caller/$1" ;; esac; }
ROUNDS="${1:-7}"
MODEL="${2:-}"
[ -z "$MODEL" ] || MODEL=$(absolute "$MODEL")
shift $(($# < 2 ? $# : 2))
BINS=()
for b in "$@"; do BINS+=("$(absolute "$b")"); done
cd "$(dirname "$0")/.."
. bench/stats.sh
[ -n "$MODEL" ] || MODEL=models/lenet.model
[ ${#BINS[@]} -gt 0 ] || BINS=(build/bench_nn_step)
count_arg ROUNDS "$ROUNDS"
[ ${#BINS[@]} -le 2 ] || { echo "at most two step binaries, got ${#BINS[@]}" >&2; exit 2; }
[ -f "$MODEL" ] || { echo "no model file $MODEL" >&2; exit 2; }
make -s build/bench_compute_floor build/bench_nn_step >/dev/null
for b in "${BINS[@]}"; do [ -f "$b" ] && [ -x "$b" ] || { echo "not an executable file: $b" >&2; exit 2; }; done
# Each step binary once, briefly, before the rounds: one that fails on MODEL or prints no rate is
# said now, not after a round's floor was measured.
for b in "${BINS[@]}"; do
    check=$("$b" "$MODEL" 64 0.05) || { echo "$b failed on $MODEL (above)" >&2; exit 1; }
    grep -q 'samples/s best' <<<"$check" || { echo "$b printed no rate for $MODEL:" >&2; echo "$check" >&2; exit 1; }
    [ "$b" != "${BINS[0]}" ] || kernels=$(grep '^CPU kernels: ' <<<"$check" || true)
done

echo "machine: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) cores usable here"
echo "$kernels   (${BINS[0]}'s)"
echo "command: bench/floor_share.sh $ROUNDS $MODEL ${BINS[*]}   (HOGWILD_CPU_PATH=${HOGWILD_CPU_PATH:-})"
# The floor is OpenBLAS's sgemm rate: OPENBLAS_CORETYPE set to a narrower instruction set than the
# step's kernels (Haswell under avx512, as some VMs set it for everything) lowers the floor and
# not the step, and the shares read above 100%. Said, so that such a table is not taken as a user's.
if [ -n "${OPENBLAS_CORETYPE:-}" ]; then
    echo "note: OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE sets the floor's BLAS kernels; a user's run leaves it unset" \
        "(OpenBLAS then picks the CPU's own), and a share above 100% means the floor's kernels are narrower than the step's"
fi
echo
header="| round | sgemm peak (GFLOP/s) | floor (samples/s) |"
rule="|---|---|---|"
for b in "${BINS[@]}"; do header+=" $b (samples/s) | share |"; rule+="---|---|"; done
echo "$header"
echo "$rule"

step_of() { "$1" "$MODEL" | sed -n 's/.*batch  *[0-9]*: *\([0-9]*\) samples\/s best.*/\1/p'; }
share_of() { awk -v a="$1" -v f="$2" 'BEGIN {printf "%.0f", 100 * a / f}'; }  # step floor -> percent
declare -a peaks floors shares0 shares1 steps0 steps1 ratios
for r in $(seq "$ROUNDS"); do
    out=$(build/bench_compute_floor "$MODEL")
    peak=$(sed -n 's/^single-core sgemm peak: \([0-9.]*\) GFLOP.*/\1/p' <<<"$out")
    floor=$(sed -n 's/.*, floor \([0-9]*\) samples\/s per core.*/\1/p' <<<"$out")
    [ -n "$peak" ] && [ -n "$floor" ] || { echo "bench_compute_floor printed no peak or floor:" >&2; echo "$out" >&2; exit 1; }
    order=(0 1)
    [ $((r % 2)) = 0 ] && order=(1 0)
    s=("" "")
    for i in "${order[@]}"; do
        [ "$i" -lt ${#BINS[@]} ] || continue
        s[i]=$(step_of "${BINS[i]}")
        [ -n "${s[i]}" ] || { echo "${BINS[i]} printed no rate" >&2; exit 1; }
    done
    peaks+=("$peak"); floors+=("$floor"); steps0+=("${s[0]}")
    share0=$(share_of "${s[0]}" "$floor"); shares0+=("$share0")
    line="| $r | $peak | $floor | ${s[0]} | $share0% |"
    if [ ${#BINS[@]} = 2 ]; then
        steps1+=("${s[1]}")
        share1=$(share_of "${s[1]}" "$floor"); shares1+=("$share1")
        ratios+=("$(awk -v a="${s[1]}" -v b="${s[0]}" 'BEGIN {printf "%.3f", a / b}')")
        line+=" ${s[1]} | $share1% |"
    fi
    echo "$line"
done
m() { printf '%s\n' "$@" | median | awk '{printf "%.0f", $1}'; }
line="| median | $(printf '%s\n' "${peaks[@]}" | median) | $(m "${floors[@]}") | $(m "${steps0[@]}") | **$(m "${shares0[@]}")%** |"
[ ${#BINS[@]} = 2 ] && line+=" $(m "${steps1[@]}") | **$(m "${shares1[@]}")%** |"
echo "$line"
if [ ${#BINS[@]} = 2 ]; then
    echo
    echo "${BINS[1]} / ${BINS[0]}: $(printf '%s\n' "${ratios[@]}" | median_range "%.3fx (%.3f-%.3f), the median of the rounds' paired ratios")"
fi
