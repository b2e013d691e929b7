#!/usr/bin/env bash
# GPU Hogwild throughput: LeNet and the MLP at batch 64 and 512 with 1 and 4 worker processes
# sharing one set of weights on cuda:0 through a CUDA IPC handle. Prints a markdown table
# (samples/s over all workers, and the time per step in H2D input copies vs compute, measured
# with CUDA events) and keeps it in bench/out/gpu_bench.md.
#
#   bench/gpu_bench.sh            build (make) and run every configuration
#   STEPS=200 bench/gpu_bench.sh  fewer steps per configuration (default: 100000 / batch)
#
# Without a GPU (or in a build without CUDA) it says so and exits 1: nothing is measured.
set -euo pipefail
cd "$(dirname "$0")/.."

make -s build/libhogwild.a >/dev/null
# The library's own compile and link flags, as the Makefile computed them (CUDA, NCCL, BLAS).
flags() { make -s --no-print-directory --eval="print-flags: ; @echo \$($1)" print-flags; }
CC_BIN="$(flags CC)"
mkdir -p build bench/out
$CC_BIN $(flags CFLAGS) bench/gpu_bench.c build/libhogwild.a -o build/gpu_bench $(flags LDLIBS)

if ! probe="$(build/gpu_bench --probe)"; then
    echo "gpu_bench: NO GPU — nothing measured. ${probe}"
    exit 1
fi
echo "$probe"

out=bench/out/gpu_bench.md
{
    echo "GPU Hogwild on cuda:0 ($(date -u +%Y-%m-%dT%H:%MZ), $(git rev-parse --short HEAD 2>/dev/null || echo unknown))"
    echo "$probe"
    echo
    header=--header
    for model in lenet mlp; do
        for batch in 64 512; do
            for workers in 1 4; do
                # one process per configuration: CUDA must be initialised after the fork of the workers
                build/gpu_bench --model "$model" --batch "$batch" --workers "$workers" \
                    ${STEPS:+--steps "$STEPS"} $header
                header=
            done
        done
    done
    echo
    echo "samples/s: all workers' samples over the slowest worker's wall time (random uint8 MNIST-shaped"
    echo "input, SGD lr 0.01 momentum 0.5). Copy and compute ms/step come from a second pass timed with"
    echo "CUDA events; copy share = copy / (copy + compute); copies overlap compute in the first pass."
} | tee "$out"
