#!/usr/bin/env bash
# --weights bf16 against f32: the MLP's CPU Hogwild runs with shared weights in bfloat16 or float.
#
#   bench/bf16_weights.sh [RUNS] [DATA_DIR]     (defaults: 3 runs, data/mnist; MODEL=models/mlp.model)
#
# For each dtype, `hogwild sweep --workers 1,2 --mode hogwild --seeds 1-RUNS` of one epoch (batch
# 64, default settings) into bench/out/bf16_weights/<dtype>/, then one `hogwild compare` of both
# folders: its group table (the settings column, weights=bf16, keeps the dtypes apart) gives
# samples/s and accuracy with their intervals. Then one --measure run of 2 workers per dtype: the
# update's microseconds per step and the bytes each update writes. Names the CPU first.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-3}"
DATA="${2:-data/mnist}"
MODEL="${MODEL:-models/mlp.model}"
OUT=bench/out/bf16_weights
. bench/stats.sh
count_arg RUNS "$RUNS"
[ -x ./hogwild ] || { echo "build first: make" >&2; exit 1; }
[ -d "$DATA" ] || { echo "no data in $DATA: ./hogwild download mnist" >&2; exit 1; }
./hogwild --version >/dev/null || exit 1
mkdir -p "$OUT"
awk -F': ' '/^model name/ {n = $2} /^cpu family/ {f = $2} /^model\t/ {m = $2} END {printf "CPU: %s, family %s model %s\n", n, f, m}' /proc/cpuinfo
for dtype in f32 bf16; do
    ./hogwild sweep --dir "$OUT/$dtype" --workers 1,2 --mode hogwild --seeds "1-$RUNS" -- \
        --model "$MODEL" --data "$DATA" --epochs 1 --weights "$dtype" >/dev/null
done
./hogwild compare "$OUT"/f32/hogwild-*.csv "$OUT"/bf16/hogwild-*.csv --no-plot
for dtype in f32 bf16; do
    echo "--measure, 2 workers, --weights $dtype:"
    ./hogwild --model "$MODEL" --data "$DATA" --epochs 1 --workers 2 --weights "$dtype" --measure --quiet |
        grep -E '^  (worker|all) |each update writes'
done
