#!/usr/bin/env bash
# What Hogwild does as workers grow: staleness, lost updates and accuracy (`--measure`).
#
#   bench/staleness.sh [DATA_DIR] [OUT_DIR]        (defaults: data/mnist, a new folder under /tmp)
#
# Runs 1, 2, 4 and 8 workers on LeNet and on the MLP, with batch 16, 64 and 256, 5 epochs each
# with --measure (the PyTorch example's other settings: lr 0.01, momentum 0.5, seed 1), and
# prints one markdown row per run: staleness (other workers' updates between a worker's read of
# the weights and its update; mean, median, p99, max, and the mean in milliseconds), the share
# of updates that overlapped another worker's, the update's share of a step's time, the
# lost-update fraction (||lost|| / ||applied||) after 1 and after 5 epochs, the test accuracy
# after 1 and 5 epochs, and samples/s. OUT_DIR keeps each run's metrics CSV and output, and one
# `hogwild compare` per model and batch (its table, compare.svg and compare-measure.svg).
# WORKERS, BATCHES, MODELS and EPOCHS (environment) narrow the sweep.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="${1:-data/mnist}"
OUT="${2:-$(mktemp -d /tmp/hogwild-staleness-XXXXXX)}"
WORKERS="${WORKERS:-1 2 4 8}"
BATCHES="${BATCHES:-16 64 256}"
MODELS="${MODELS:-lenet mlp}"
EPOCHS="${EPOCHS:-5}"
mkdir -p "$OUT"

# The value of column $2 in the row of CSV file $1 whose epoch is $3 and that ends that epoch
# (the last row with that epoch); "last" for the last row.
field() {
    awk -F, -v name="$2" -v want="$3" '
        NR == 1 { for (i = 1; i <= NF; i++) { col[$i] = i }; next }
        want == "last" || $col["epoch"] == want { value = $col[name] }
        END { print value }' "$1"
}

percent() { awk -v x="$1" 'BEGIN { if (x == "nan" || x == "") print "-"; else printf "%.3g", 100 * x }'; }

started=$(date +%s)
echo "command: bench/staleness.sh $DATA $OUT   (WORKERS=\"$WORKERS\" BATCHES=\"$BATCHES\" MODELS=\"$MODELS\" EPOCHS=$EPOCHS)"
echo "machine: $(nproc) cores, load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| model | batch | workers | updates | staleness mean | median | p99 | max | staleness ms (mean) | overlapped % | update % of step | lost % (1 epoch) | lost % ($EPOCHS epochs) | accuracy % (1 epoch) | accuracy % ($EPOCHS epochs) | samples/s |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for model in $MODELS; do
    for batch in $BATCHES; do
        runs=()
        for workers in $WORKERS; do
            name="$model-b$batch-w$workers"
            csv="$OUT/$name.csv"
            ./hogwild --quiet --measure --model "models/$model.model" --data "$DATA" --workers "$workers" \
                --batch-size "$batch" --epochs "$EPOCHS" --metrics "$csv" >"$OUT/$name.out"
            runs+=("$csv")
            samples_per_s=$(sed -n 's/^done:.*(\([0-9]*\) samples\/s).*/\1/p' "$OUT/$name.out")
            compute=$(field "$csv" compute_us_per_step last)
            update=$(field "$csv" update_us_per_step last)
            update_share=$(awk -v c="$compute" -v u="$update" 'BEGIN { printf "%.1f", 100 * u / (c + u) }')
            stale_ms=$(awk -v us="$(field "$csv" staleness_us_mean last)" 'BEGIN { printf "%.2f", us / 1000 }')
            printf '| %s | %s | %s | %s | %.2f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' \
                "$model" "$batch" "$workers" "$(field "$csv" updates last)" "$(field "$csv" staleness_mean last)" \
                "$(field "$csv" staleness_median last)" "$(field "$csv" staleness_p99 last)" \
                "$(field "$csv" staleness_max last)" "$stale_ms" "$(percent "$(field "$csv" overlap_fraction last)")" \
                "$update_share" "$(percent "$(field "$csv" lost_fraction 1)")" \
                "$(percent "$(field "$csv" lost_fraction last)")" "$(field "$csv" test_accuracy 1)" \
                "$(field "$csv" test_accuracy last)" "$samples_per_s"
        done
        ./hogwild compare "${runs[@]}" --plot "$OUT/compare-$model-b$batch.svg" >"$OUT/compare-$model-b$batch.txt"
    done
done
echo
echo "took $(($(date +%s) - started)) s; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); files in $OUT"
