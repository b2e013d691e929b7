#!/usr/bin/env bash
# Two Hogwild workers against one, and where the difference from twice one goes, measured.
#
#   bench/two_workers.sh [RUNS] [DATA_DIR]        (defaults: 5 runs, data/mnist; MODELS="lenet mlp")
#
# For each model, one epoch each run, batch 64, default settings:
#   1 worker, 2 workers     ./hogwild --workers 1 and --workers 2 in turn, RUNS times: whole-run
#                           samples/s (first fork to last join) and the median of the paired ratios
#   private pair            two ./hogwild --workers 1 at once, each on its own weights (RUNS times):
#                           the same per-worker work with nothing shared, summed: what two cores
#                           allow this run without the sharing (build/bench_compute_floor prints
#                           the same ceiling for the bare step)
#   2 epochs                ./hogwild --workers 2 --epochs 2: the parent's evaluation of epoch 1
#                           (the test set, in the parent) runs while the workers train epoch 2
#   --measure               at 1 and 2 workers: each worker's forward+backward and SGD update per
#                           step, in microseconds (the update is --measure's own, which also sums
#                           what it wrote: slower than the plain update)
#   batch assembly          build/bench_loader: hw_batch_fill's microseconds per batch
# and prints them as one markdown table per model, then how the 2-worker run's time splits:
# the machine's own limit (private pair against twice one worker), the sharing (2 workers
# against the private pair: cache lines of the shared weights moving between the cores, and
# the update's share), batch assembly and the parent's evaluation.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-5}"
DATA="${2:-data/mnist}"
MODELS="${MODELS:-lenet mlp}"
OUT=bench/out/two_workers
. bench/stats.sh
count_arg RUNS "$RUNS"
mkdir -p "$OUT"
[ -x ./hogwild ] || { echo "build first: make" >&2; exit 1; }
[ -d "$DATA" ] || { echo "no data in $DATA: ./hogwild download mnist" >&2; exit 1; }
./hogwild --version >/dev/null || exit 1  # a refused HOGWILD_CPU_PATH or OPENBLAS_CORETYPE, said before any table
make -s build/bench_loader >/dev/null

rate_of() { sed -n 's/^done: .*training [0-9.]* s (\([0-9]*\) samples\/s).*/\1/p' "$1"; }

run() {  # log args... -> samples/s
    local log=$1; shift
    ./hogwild --quiet --data "$DATA" "$@" >"$log" 2>&1 || { echo "failed: ./hogwild $* (see $log)" >&2; exit 1; }
    rate_of "$log"
}

# --measure's "all" row (or worker 0's with one worker): "fwd+bwd us" and "update us", the last two columns
measured() {  # model workers -> "fwd_bwd_us update_us"
    local log="$OUT/measure-$1-$2.log"
    ./hogwild --quiet --data "$DATA" --model "models/$1.model" --workers "$2" --measure >"$log" 2>&1
    awk -v w="$2" '/fwd\+bwd us/ {on=1; next} on && (($1 == "all") || (w == 1 && $1 == "0")) {print $(NF-1), $NF; exit}' "$log"
}

assembly_us=$(build/bench_loader "$DATA" 2>/dev/null | sed -n 's/^batch assembly.*: *\([0-9.]*\) us\/batch/\1/p')

echo "machine: $(lscpu | sed -n 's/^Model name: *//p') x $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "hogwild: $(./hogwild --version | sed -n 's/^BLAS: //p'); CPU kernels $(./hogwild --version | sed -n 's/^CPU kernels: //p')"
echo "command: bench/two_workers.sh $RUNS $DATA   (1 epoch, batch 64; medians of $RUNS runs)"
for model in $MODELS; do
    one=(); two=(); pair=(); ratios=(); epochs2=()
    for i in $(seq "$RUNS"); do
        a=$(run "$OUT/$model-1.log" --model "models/$model.model" --workers 1)
        b=$(run "$OUT/$model-2.log" --model "models/$model.model" --workers 2)
        one+=("$a"); two+=("$b")
        ratios+=("$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.3f", b / a}')")
        run "$OUT/$model-p1.log" --model "models/$model.model" --workers 1 --seed 1 >/dev/null &
        run "$OUT/$model-p2.log" --model "models/$model.model" --workers 1 --seed 2 >/dev/null &
        wait
        pair+=("$(( $(rate_of "$OUT/$model-p1.log") + $(rate_of "$OUT/$model-p2.log") ))")
        epochs2+=("$(run "$OUT/$model-e2.log" --model "models/$model.model" --workers 2 --epochs 2)")
    done
    r1=$(printf '%s\n' "${one[@]}" | median); r2=$(printf '%s\n' "${two[@]}" | median)
    rp=$(printf '%s\n' "${pair[@]}" | median); re=$(printf '%s\n' "${epochs2[@]}" | median)
    ratio=$(printf '%s\n' "${ratios[@]}" | median_range "%.2fx (%.2f-%.2f)")
    read -r c1 u1 < <(measured "$model" 1)
    read -r c2 u2 < <(measured "$model" 2)
    echo
    echo "$model:"
    echo
    echo "| 1 worker | 2 workers | 2 / 1: median (range) of pairs | private pair (2 x 1 worker at once) | 2 workers / private pair | 2 workers, 2 epochs |"
    echo "|---|---|---|---|---|---|"
    awk -v r1="$r1" -v r2="$r2" -v rp="$rp" -v re="$re" -v ratio="$ratio" \
        'BEGIN {printf "| %d | %d | %s | %d (%.2fx one worker) | %.0f%% | %d |\n", r1, r2, ratio, rp, rp / r1, 100 * r2 / rp, re}'
    echo
    echo "| per step (us, --measure) | 1 worker | 2 workers |"
    echo "|---|---|---|"
    echo "| forward + backward | $c1 | $c2 |"
    echo "| SGD update onto the shared weights | $u1 | $u2 |"
    awk -v u1="$u1" -v u2="$u2" -v c1="$c1" -v c2="$c2" -v a="$assembly_us" 'BEGIN {
        printf "| the update'"'"'s share of the step | %.1f%% | %.1f%% |\n", 100 * u1 / (c1 + u1), 100 * u2 / (c2 + u2)
        printf "| batch assembly (bench_loader: %s us), its share | %.1f%% | %.1f%% |\n", a, 100 * a / (c1 + u1 + a), 100 * a / (c2 + u2 + a) }'
    echo
    awk -v r1="$r1" -v r2="$r2" -v rp="$rp" -v re="$re" 'BEGIN {
        printf "where 2 workers stand against twice one (%d): the cores together give the private pair %.0f%% of it", 2 * r1, 100 * rp / (2 * r1)
        printf " (shared caches, memory, clocks); sharing the weights keeps %.0f%% of the private pair;", 100 * r2 / rp
        printf " a second epoch, with the parent evaluating epoch 1 beside the workers, runs at %.0f%% of one epoch'"'"'s rate\n", 100 * re / r2 }'
done
