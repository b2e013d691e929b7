#!/usr/bin/env bash
# What lock-freedom buys, measured (issue 42's study): every CPU Hogwild variant on LeNet, the MLP
# and the sparse logistic regression, over seeds, and the simulated accuracy against the delay.
#
#   bench/variants.sh [SEEDS] [DATA_DIR]     (defaults: 5 seeds, data/mnist)
#
# 1. For each model and variant, `hogwild sweep --workers $WORKERS --mode hogwild --seeds 1-SEEDS`
#    of $EPOCHS epochs into bench/out/variants/<model>/<variant>/, then one `hogwild compare` of
#    the model's variants (their settings column keeps them apart): samples/s, final and best test
#    accuracy, each a mean with its 95% interval, in a markdown table, and compare's plots.
#    Variants: lockfree (the default), locked and atomic (--update), bf16 (--weights bf16),
#    stale0 and stale2 (--max-staleness 0 and 2, where this build has it). The sparse model
#    (models/logreg.model on `hogwild synth --kind sparse --train 200000 --test 20000 --features
#    10000 --nnz 20`, --lr 0.5 --batch-size 10, $SPARSE_EPOCHS epochs) takes the --update variants
#    only: the others are refused for sparse models.
# 2. One --measure run of 2 workers per model and variant (seed 1): staleness (mean, max) and the
#    lost-update fraction.
# 3. With the MLP in MODELS, the MLP under --simulate $SIM_WORKERS --delay fixed:K for K in $DELAYS, over the same seeds:
#    the accuracy against the delay, beside the real runs' measured mean staleness, in a table and
#    bench/plots/variants-delay.svg (bench/plot_delay.py).
# MODELS, VARIANTS, WORKERS, EPOCHS, SPARSE_EPOCHS, DELAYS and SIM_WORKERS (environment) narrow it.
# Names the CPU first. The speeds are only as quiet as the machine: the load average is printed.
set -euo pipefail
cd "$(dirname "$0")/.."
SEEDS="${1:-5}"
DATA="${2:-data/mnist}"
MODELS="${MODELS:-lenet mlp logreg}"
VARIANTS="${VARIANTS:-lockfree locked atomic bf16 stale0 stale2}"
WORKERS="${WORKERS:-1,2}"
EPOCHS="${EPOCHS:-3}"
SPARSE_EPOCHS="${SPARSE_EPOCHS:-5}"
DELAYS="${DELAYS:-0 1 2 4 8 16 32 64}"
SIM_WORKERS="${SIM_WORKERS:-64}"
OUT=bench/out/variants
. bench/stats.sh
count_arg SEEDS "$SEEDS"
count_arg EPOCHS "$EPOCHS"
count_arg SPARSE_EPOCHS "$SPARSE_EPOCHS"
count_arg SIM_WORKERS "$SIM_WORKERS"
[ -x ./hogwild ] || { echo "build first: make" >&2; exit 1; }
[ -d "$DATA" ] || { echo "no data in $DATA: ./hogwild download mnist" >&2; exit 1; }
./hogwild --version >/dev/null || exit 1
mkdir -p "$OUT" bench/plots
awk -F': ' '/^model name/ {n = $2} /^cpu family/ {f = $2} /^model\t/ {m = $2} END {printf "CPU: %s, family %s model %s\n", n, f, m}' /proc/cpuinfo
echo "command: bench/variants.sh $SEEDS $DATA   (MODELS=\"$MODELS\" VARIANTS=\"$VARIANTS\" WORKERS=$WORKERS EPOCHS=$EPOCHS SPARSE_EPOCHS=$SPARSE_EPOCHS DELAYS=\"$DELAYS\" SIM_WORKERS=$SIM_WORKERS)"
echo "machine: $(nproc) cores, load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

SPARSE_DATA="$OUT/sparse-data"
[ -f "$SPARSE_DATA/train.libsvm" ] ||
    ./hogwild synth --kind sparse --dir "$SPARSE_DATA" --train 200000 --test 20000 --features 10000 --nnz 20 >/dev/null

# variant_flags VARIANT: its training flags; exits 1 for a name it does not know.
variant_flags() {
    case "$1" in
        lockfree) echo "--update lockfree" ;;
        locked) echo "--update locked" ;;
        atomic) echo "--update atomic" ;;
        bf16) echo "--weights bf16" ;;
        stale0) echo "--max-staleness 0" ;;
        stale2) echo "--max-staleness 2" ;;
        *) echo "unknown variant '$1' (lockfree, locked, atomic, bf16, stale0, stale2)" >&2; return 1 ;;
    esac
}

# applies MODEL VARIANT: whether this build runs VARIANT on MODEL (the sparse model takes the
# --update variants only; --max-staleness where ./hogwild --help knows it).
applies() {
    local flag
    flag=$(variant_flags "$2" | cut -d' ' -f1)
    ./hogwild --help | grep -q -- "$flag " || return 1
    [ "$1" != logreg ] || [ "$flag" = --update ]
}

# model_flags MODEL: the model, its data and the epochs.
model_flags() {
    case "$1" in
        logreg) echo "--model models/logreg.model --data $SPARSE_DATA --lr 0.5 --batch-size 10 --epochs $SPARSE_EPOCHS" ;;
        *) echo "--model models/$1.model --data $DATA --epochs $EPOCHS" ;;
    esac
}

# summary_rows CSV MODEL: compare's group table (--summary-csv) as markdown rows.
summary_rows() {
    python3 - "$1" "$2" <<'EOF'
import csv, sys
for g in csv.DictReader(open(sys.argv[1])):
    s = g["settings"]
    variant = next((w.split("=", 1)[1] for w in s.split() if w.split("=")[0] in ("update", "weights")), "")
    variant = variant or next((f"max-staleness {w.split('=', 1)[1]}" for w in s.split() if w.startswith("max-staleness=")), "") or "lockfree"
    f = lambda k: float(g[k])
    print(f"| {sys.argv[2]} | {variant} | {g['workers']} | {g['runs']} | {f('samples_per_s_mean'):.0f} "
          f"[{f('samples_per_s_ci_low'):.0f}, {f('samples_per_s_ci_high'):.0f}] | {f('final_accuracy_mean'):.2f} "
          f"[{f('final_accuracy_ci_low'):.2f}, {f('final_accuracy_ci_high'):.2f}] | {f('best_accuracy_mean'):.2f} |")
EOF
}

echo
echo "## Variants: $WORKERS workers, seeds 1-$SEEDS (mean [95% interval])"
echo
echo "| model | variant | workers | runs | samples/s | final accuracy % | best accuracy % |"
echo "|---|---|---|---|---|---|---|"
for model in $MODELS; do
    csvs=()
    for variant in $VARIANTS; do
        applies "$model" "$variant" || continue
        mkdir -p "$OUT/$model"
        # shellcheck disable=SC2046 # the flags are words
        ./hogwild sweep --dir "$OUT/$model/$variant" --workers "$WORKERS" --mode hogwild --seeds "1-$SEEDS" -- \
            $(model_flags "$model") $(variant_flags "$variant") >"$OUT/$model-$variant.sweep.log"
        csvs+=("$OUT/$model/$variant"/hogwild-*.csv)
    done
    ./hogwild compare "${csvs[@]}" --summary-csv "$OUT/$model-summary.csv" --plot "$OUT/$model.svg" --overwrite \
        >"$OUT/$model-compare.txt"
    summary_rows "$OUT/$model-summary.csv" "$model"
done

echo
echo "## --measure, 2 workers, seed 1"
echo
echo "| model | variant | staleness mean | staleness max | lost updates % | update us per step |"
echo "|---|---|---|---|---|---|"
for model in $MODELS; do
    for variant in $VARIANTS; do
        applies "$model" "$variant" || continue
        # shellcheck disable=SC2046
        ./hogwild $(model_flags "$model") $(variant_flags "$variant") --workers 2 --measure --quiet \
            >"$OUT/$model-$variant.measure.txt"
        awk -v model="$model" -v variant="$variant" '
            $1 == "all" { mean = $3; max = $6; update = $NF }
            /in total$/ { lost = $(NF - 2); sub(/%/, "", lost) }
            END { printf "| %s | %s | %s | %s | %s | %s |\n", model, variant, mean, max, lost, update }' \
            "$OUT/$model-$variant.measure.txt"
    done
done

case " $MODELS " in *" mlp "*) ;; *) echo; echo "(no simulated part: it sets the MLP beside its real runs, and MODELS has no mlp)"; exit 0 ;; esac
echo
echo "## Simulated: the MLP, --simulate $SIM_WORKERS --delay fixed:K, seeds 1-$SEEDS, $EPOCHS epochs"
echo
sims=()
mkdir -p "$OUT/simulate"
for delay in $DELAYS; do
    ./hogwild sweep --dir "$OUT/simulate/d$delay" --workers 1 --mode hogwild --seeds "1-$SEEDS" -- \
        --model models/mlp.model --data "$DATA" --epochs "$EPOCHS" --simulate "$SIM_WORKERS" --delay "fixed:$delay" \
        >"$OUT/simulate-d$delay.sweep.log"
    sims+=("$OUT/simulate/d$delay"/hogwild-*.csv)
done
./hogwild compare "${sims[@]}" --summary-csv "$OUT/simulate-summary.csv" --no-plot >"$OUT/simulate-compare.txt"
python3 bench/plot_delay.py "$OUT/simulate-summary.csv" "$OUT/mlp-summary.csv" "$OUT/mlp-lockfree.measure.txt" \
    bench/plots/variants-delay.svg "$SIM_WORKERS"
echo
echo "wrote bench/plots/variants-delay.svg; each model's compare plots in $OUT/"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
