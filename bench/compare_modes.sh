#!/usr/bin/env bash
# Hogwild against DataParallel on the same model and data: 1, 2, 4 workers against 1, 2, 4
# replicas, the same batch per SGD update (64: a Hogwild worker's own batch, a DataParallel
# step's whole batch split over its replicas), the same epochs, on MNIST and Fashion-MNIST.
#
#   bench/compare_modes.sh [EPOCHS]          (default 5)
#   DEVICE=cuda:0 bench/compare_modes.sh     the same on a GPU: the Hogwild workers share cuda:0,
#                                            the DataParallel replicas are streams on cuda:0
#   DATASETS=mnist bench/compare_modes.sh    one dataset only (default: mnist fashion-mnist)
#   GPUS=0,1 bench/compare_modes.sh          on K GPUs (a list as --gpus takes it; 0,0 puts two on
#                                            one GPU): Hogwild with a copy of the weights per GPU
#                                            and 1, 2, 4 workers per GPU, against DataParallel with
#                                            a replica per GPU, and both on the first GPU alone
#   HOGWILD=./hogwild                        the binary (build-sim/hogwild: the simulated device)
#   SEEDS=1-5 bench/compare_modes.sh         each set-up over these seeds (default 1-3)
#
# On one device, a `hogwild sweep` per dataset into bench/out/compare/<dataset>/ (1, 2, 4 workers
# and replicas, both modes, SEEDS): compare's group table (mean, sd, 95% interval, the speed-up over
# 1 worker, Welch's test between the modes) and its plots beside the CSVs; a sweep stopped and
# started again goes on. With GPUS, one run per set-up, each into its own CSV, and compare over them.
set -euo pipefail
cd "$(dirname "$0")/.."
EPOCHS="${1:-5}"
DEVICE="${DEVICE:-cpu}"
GPUS="${GPUS:-}"
HOGWILD="${HOGWILD:-./hogwild}"
OUT=bench/out/compare
[ "$DEVICE" = cpu ] || OUT="bench/out/compare-${DEVICE//:/}"
[ -z "$GPUS" ] || OUT="bench/out/compare-gpus-${GPUS//,/-}"
mkdir -p "$OUT"

echo "machine: $(lscpu | sed -n 's/^Model name: *//p') x $(nproc) cores"
if [ "$DEVICE" != cpu ] || [ -n "$GPUS" ]; then
    echo "gpu: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null || echo 'nvidia-smi not found')"
fi
echo "command: DEVICE=$DEVICE GPUS=$GPUS bench/compare_modes.sh $EPOCHS   (LeNet, batch 64 per update, lr 0.01, momentum 0.5, seeds ${SEEDS:-1-3})"
for name in ${DATASETS:-mnist fashion-mnist}; do
    target=97
    [ "$name" = fashion-mnist ] && target=80
    [ -d "data/$name" ] || { echo "no data/$name: ./hogwild download $name" >&2; exit 1; }
    files=()
    if [ -n "$GPUS" ]; then
        # K GPUs: Hogwild with a copy per GPU (N workers per GPU) against DataParallel with a
        # replica per GPU, and both on the list's first GPU alone.
        k=$(echo "$GPUS" | tr ',' '\n' | wc -l)
        first="cuda:${GPUS%%,*}"
        for n in 1 2 4; do
            "$HOGWILD" --quiet --data "data/$name" --epochs "$EPOCHS" --gpus "$GPUS" --workers $((n * k)) \
                --eval-every 20000 --metrics "$OUT/$name-hogwild-$k-gpus-$((n * k)).csv" >/dev/null
            "$HOGWILD" --quiet --data "data/$name" --epochs "$EPOCHS" --device "$first" --workers "$n" \
                --eval-every 20000 --metrics "$OUT/$name-hogwild-1-gpu-$n.csv" >/dev/null
            files+=("$OUT/$name-hogwild-$k-gpus-$((n * k)).csv" "$OUT/$name-hogwild-1-gpu-$n.csv")
        done
        "$HOGWILD" --quiet --data "data/$name" --epochs "$EPOCHS" --mode dataparallel --gpus "$GPUS" \
            --eval-every 20000 --metrics "$OUT/$name-dataparallel-$k-gpus.csv" >/dev/null
        "$HOGWILD" --quiet --data "data/$name" --epochs "$EPOCHS" --mode dataparallel --device "$first" \
            --replicas 1 --eval-every 20000 --metrics "$OUT/$name-dataparallel-1-gpu.csv" >/dev/null
        files+=("$OUT/$name-dataparallel-$k-gpus.csv" "$OUT/$name-dataparallel-1-gpu.csv")
    fi
    echo
    echo "### $name, $EPOCHS epochs, target $target%"
    echo
    echo '```'
    if [ -n "$GPUS" ]; then
        "$HOGWILD" compare "${files[@]}" --target "$target" --plot "$OUT/$name.svg"
    else
        "$HOGWILD" sweep --dir "$OUT/$name" --workers 1,2,4 --mode hogwild,dataparallel --seeds "${SEEDS:-1-3}" \
            --target "$target" -- --data "data/$name" --epochs "$EPOCHS" --device "$DEVICE" --eval-every 20000
    fi
    echo '```'
done
