#!/usr/bin/env bash
# Hogwild on many cores: how far lock-free sharing scales and what stops it. One epoch of MNIST
# per run, for each model and each count K of processes:
#
#   hogwild      ./hogwild --workers K: K workers writing one shared set of weights
#   private      K independent ./hogwild --workers 1 runs at once, each on its own weights: the
#                same per-worker work with nothing shared (the ceiling without sharing: what the
#                cores, caches and memory bandwidth allow)
#   dataparallel ./hogwild --mode dataparallel --replicas K
#   torch        PyTorch's Hogwild example with K processes (bench/peer_torch_hogwild.py), when
#                $PEER_PYTHON imports torch
#
# then --measure (LeNet) at the MEASURE counts: staleness, overlap and lost updates.
#
#   bench/cpu_scaling.sh [OUT_DIR]                       (default bench/out/cpu_scaling)
#   COUNTS="1 2 4 8 12 16" MODELS="lenet mlp" MEASURE="1 4 16" PEER_PYTHON=python3 \
#       DATA=data/mnist bench/cpu_scaling.sh
#
# Prints the machine (lscpu, NUMA), a markdown table per model (samples/s, speed-up over one
# worker, hogwild's share of the private ceiling, accuracy) and the --measure summaries; every
# run's numbers go to OUT_DIR/scaling.csv and its output to OUT_DIR/logs/.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench/out/cpu_scaling}
COUNTS=${COUNTS:-1 2 4 8 12 16}
MODELS=${MODELS:-lenet mlp}
MEASURE=${MEASURE:-1 4 16}
DATA=${DATA:-data/mnist}
PEER_PYTHON=${PEER_PYTHON:-python3}
mkdir -p "$OUT/logs"
[ -x ./hogwild ] || { echo "cpu_scaling: no ./hogwild (make)" >&2; exit 1; }
[ -f "$DATA/train-images-idx3-ubyte.gz" ] || [ -f "$DATA/train-images-idx3-ubyte" ] ||
    { echo "cpu_scaling: no MNIST in $DATA (./hogwild download mnist)" >&2; exit 1; }

echo "machine: $(lscpu | sed -n 's/^Model name: *//p') x $(nproc) cores; $(./hogwild --version | sed -n 's/^BLAS: //p')"
lscpu | grep -E '^(Socket|Core|Thread|NUMA|L2|L3)' | sed 's/^/  /'
command -v numactl >/dev/null && numactl --hardware | sed 's/^/  /'
echo "command: COUNTS=\"$COUNTS\" MODELS=\"$MODELS\" bench/cpu_scaling.sh   (1 epoch of $DATA, batch 64, lr 0.01, momentum 0.5)"

csv="$OUT/scaling.csv"
echo "model,mode,processes,samples_per_second,accuracy" > "$csv"

# "done: N samples, training T s (R samples/s), ...; test loss L, accuracy A%" -> "R A"
rate_of() { sed -n 's/^done: .*(\([0-9]*\) samples\/s).*accuracy \([0-9.]*\)%.*/\1 \2/p' "$1"; }

run_hogwild() {  # model mode k log -> "rate accuracy"
    local model=$1 mode=$2 k=$3 log=$4
    local args=(--workers "$k")
    [ "$mode" = dataparallel ] && args=(--mode dataparallel --replicas "$k")
    ./hogwild --quiet --data "$DATA" --model "models/$model.model" "${args[@]}" >"$log" 2>&1 || echo "failed: see $log" >&2
    rate_of "$log"
}

run_private() {  # model k -> "summed rate, mean accuracy"
    local model=$1 k=$2 i
    for i in $(seq "$k"); do
        ./hogwild --quiet --data "$DATA" --model "models/$model.model" --workers 1 --seed "$i" \
            >"$OUT/logs/private-$model-$k-$i.log" 2>&1 &
    done
    wait
    for i in $(seq "$k"); do rate_of "$OUT/logs/private-$model-$k-$i.log"; done |
        awk '{r += $1; a += $2; n++} END {if (n) printf "%d %.2f\n", r, a / n}'
}

run_torch() {  # model k -> "rate accuracy", or nothing without torch
    local model=$1 k=$2 log="$OUT/logs/torch-$model-$k.log"
    "$PEER_PYTHON" bench/peer_torch_hogwild.py --model "$model" --workers "$k" --data "$DATA" >"$log" 2>&1 || return 0
    sed -n 's/.*samples_per_second=\([0-9]*\) test_accuracy=\([0-9.]*\).*/\1 \2/p' "$log"
}

have_torch=0
"$PEER_PYTHON" -c 'import torch' 2>/dev/null && have_torch=1
if [ $have_torch = 1 ]; then
    echo "peer: $("$PEER_PYTHON" -c 'import torch; print("torch", torch.__version__, "| oneDNN:", torch.backends.mkldnn.is_available(), "| BLAS:", torch.__config__.show().split("BLAS_INFO=")[1].split(",")[0] if "BLAS_INFO=" in torch.__config__.show() else "?")')"
else
    echo "peer: $PEER_PYTHON has no torch: the torch column is empty"
fi

for model in $MODELS; do
    declare -A R=() A=()
    for k in $COUNTS; do
        for mode in hogwild dataparallel; do
            read -r r a <<<"$(run_hogwild "$model" "$mode" "$k" "$OUT/logs/$mode-$model-$k.log")"
            R[$mode,$k]=${r:-}; A[$mode,$k]=${a:-}
        done
        read -r r a <<<"$(run_private "$model" "$k")"
        R[private,$k]=${r:-}; A[private,$k]=${a:-}
        if [ $have_torch = 1 ]; then
            read -r r a <<<"$(run_torch "$model" "$k")"
            R[torch,$k]=${r:-}; A[torch,$k]=${a:-}
        fi
        for mode in hogwild private dataparallel torch; do
            [ -n "${R[$mode,$k]:-}" ] && echo "$model,$mode,$k,${R[$mode,$k]},${A[$mode,$k]}" >> "$csv"
        done
    done
    one=${R[hogwild,1]:-0}
    echo
    echo "### $model, 1 epoch"
    echo
    echo "| processes | hogwild samples/s | speed-up | private (no sharing) samples/s | hogwild / private | hogwild accuracy | dataparallel samples/s | dataparallel accuracy | torch samples/s | torch accuracy | hogwild / torch |"
    echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for k in $COUNTS; do
        h=${R[hogwild,$k]:-}; p=${R[private,$k]:-}; t=${R[torch,$k]:-}
        awk -v k="$k" -v h="$h" -v one="$one" -v p="$p" -v ha="${A[hogwild,$k]:-}" -v d="${R[dataparallel,$k]:-}" \
            -v da="${A[dataparallel,$k]:-}" -v t="$t" -v ta="${A[torch,$k]:-}" 'BEGIN {
            printf "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", k, h,
                (h != "" && one > 0) ? sprintf("%.2fx", h / one) : "", p,
                (h != "" && p > 0) ? sprintf("%.0f%%", 100 * h / p) : "", ha, d, da, t, ta,
                (h != "" && t > 0) ? sprintf("%.2fx", h / t) : "" }'
    done
    unset R A
done

echo
echo "### --measure, LeNet, 1 epoch"
for k in $MEASURE; do
    log="$OUT/logs/measure-lenet-$k.log"
    ./hogwild --quiet --data "$DATA" --workers "$k" --measure >"$log" 2>&1 || echo "failed: see $log" >&2
    echo
    echo "workers $k: $(sed -n 's/^done: \(.*\)/\1/p' "$log")"
    echo '```'
    sed -n '/^measure:/,$p' "$log" | grep -E '^(measure|  worker|  all|  lost|    )' | grep -vE '^  [0-9]+ ' | head -20
    echo '```'
done

if command -v perf >/dev/null && ! perf stat -x, -e cache-misses true 2>&1 | grep -q 'not supported'; then
    echo
    echo "### perf stat (cache misses), LeNet, 1 epoch"
    for k in 1 ${COUNTS##* }; do
        perf stat -e cycles,instructions,cache-misses,LLC-load-misses -x, -o "$OUT/logs/perf-$k.csv" \
            ./hogwild --quiet --data "$DATA" --workers "$k" >/dev/null 2>&1
        echo "workers $k: $(tr '\n' ' ' < "$OUT/logs/perf-$k.csv")"
    done
else
    echo
    echo "perf: not available here (no perf, or no hardware counters in this VM)"
fi
