#!/usr/bin/env bash
# Two Hogwild workers against one, and where the difference from twice one goes, measured.
#
#   bench/two_workers.sh [RUNS] [DATA_DIR]        (defaults: 5 runs, data/mnist; MODELS="lenet mlp")
#
# For each model, one epoch each run, batch 64, default settings:
#   1 worker, 2 workers     `hogwild sweep --workers 1,2 --seeds 1-RUNS` into bench/out/two_workers/
#                           <model>/: compare's group table, samples/s (a run's samples over its
#                           wall time, evaluations included) with its 95% interval, and the speed-up
#                           of 2 workers over 1 with its interval
#   private pair            two ./hogwild --workers 1 at once, each on its own weights (RUNS times,
#                           into <model>-pair/): the same per-worker work with nothing shared,
#                           summed: twice the group's mean (build/bench_compute_floor prints the
#                           same ceiling for the bare step)
#   2 epochs                sweep --workers 2 --epochs 2 (into <model>-2ep/): the parent's evaluation
#                           of epoch 1 runs while the workers train epoch 2
#   --measure               at 1 and 2 workers: each worker's forward+backward and SGD update per
#                           step, in microseconds (the update is --measure's own, which also sums
#                           what it wrote: slower than the plain update)
#   batch assembly          build/bench_loader: hw_batch_fill's microseconds per batch
# The means come from compare's --summary-csv; this script computes no statistic of its own.
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

# The mean samples/s of the group of `workers` in compare's summary of folder $1.
group_rate() {  # dir workers -> samples/s
    ./hogwild compare "$1" --no-plot --summary-csv "$1.summary.csv" >/dev/null 2>&1
    awk -F, -v w="$2" 'NR == 1 {for (i = 1; i <= NF; i++) col[$i] = i; next}
        $col["workers"] == w {printf "%.0f\n", $col["samples_per_s_mean"]}' "$1.summary.csv"
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
echo "command: bench/two_workers.sh $RUNS $DATA   (1 epoch, batch 64; means of $RUNS runs, seeds 1-$RUNS)"
for model in $MODELS; do
    flags=(--model "models/$model.model" --data "$DATA")
    echo
    echo "$model, 1 and 2 workers, seeds 1-$RUNS:"
    echo
    echo '```'
    ./hogwild sweep --dir "$OUT/$model" --workers 1,2 --mode hogwild --seeds "1-$RUNS" -- "${flags[@]}" |
        sed -n '/^groups of runs/,$p'
    echo '```'
    mkdir -p "$OUT/$model-pair"
    for i in $(seq "$RUNS"); do
        for side in 1 2; do
            csv="$OUT/$model-pair/p$i-$side.csv"
            [ -f "$csv" ] || ./hogwild --quiet "${flags[@]}" --workers 1 --seed $((2 * i + side)) --metrics "$csv" \
                >/dev/null 2>&1 &
        done
        wait
    done
    ./hogwild sweep --dir "$OUT/$model-2ep" --workers 2 --mode hogwild --seeds "1-$RUNS" -- "${flags[@]}" \
        --epochs 2 >/dev/null
    r1=$(group_rate "$OUT/$model" 1); r2=$(group_rate "$OUT/$model" 2)
    rp=$(( 2 * $(group_rate "$OUT/$model-pair" 1) )); re=$(group_rate "$OUT/$model-2ep" 2)
    read -r c1 u1 < <(measured "$model" 1)
    read -r c2 u2 < <(measured "$model" 2)
    echo
    echo "$model:"
    echo
    echo "| 1 worker | 2 workers | private pair (2 x 1 worker at once) | 2 workers / private pair | 2 workers, 2 epochs |"
    echo "|---|---|---|---|---|"
    awk -v r1="$r1" -v r2="$r2" -v rp="$rp" -v re="$re" \
        'BEGIN {printf "| %d | %d | %d (%.2fx one worker) | %.0f%% | %d |\n", r1, r2, rp, rp / r1, 100 * r2 / rp, re}'
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
