#!/usr/bin/env bash
# GPU Hogwild throughput: LeNet and the MLP at batch 64 and 512 with 1 and 4 worker processes
# sharing one set of weights on cuda:0 through a CUDA IPC handle, each step launched kernel by
# kernel and as one CUDA graph. Prints a markdown table (samples/s over all workers, the time per
# step in H2D input copies vs compute, measured with CUDA events, and the step's floor: its
# kernels times the measured cost of a launch, and the bytes it must move over the measured
# bandwidth; see step_bytes in bench/gpu_bench.c) and keeps it in bench/out/gpu_bench.md.
#
#   bench/gpu_bench.sh                  build (make) and run every configuration
#   STEPS=200 bench/gpu_bench.sh        fewer steps per configuration (default: 100000 / batch)
#   HW_PREBUILT=1 bench/gpu_bench.sh    use build/bench_gpu_bench as it is
#
# Without a GPU (or in a build without CUDA) it says so and exits 1: nothing is measured.
set -euo pipefail
cd "$(dirname "$0")/.."

# Linked by the Makefile's bench rule: the core library plus the GPU objects (in a CUDA build they
# are not in build/libhogwild.a but in the plugin), with cuBLAS, the CUDA runtime and NCCL.
[ "${HW_PREBUILT:-0}" = 1 ] || make -s build/bench_gpu_bench >/dev/null
mkdir -p bench/out
gpu_bench=build/bench_gpu_bench

if ! probe="$($gpu_bench --probe)"; then
    echo "gpu_bench: NO GPU — nothing measured. ${probe}"
    exit 1
fi
echo "$probe"
# The two ceilings, measured once in a process of their own (the runs below fork before CUDA starts).
floor="$($gpu_bench --floor)" || { echo "gpu_bench: the floor measurement failed"; exit 1; }
launch_us=$(echo "$floor" | sed -n 's/^launch_us=\([0-9.]*\) .*/\1/p')
gbps=$(echo "$floor" | sed -n 's/.* gbps=\([0-9.]*\) .*/\1/p')

out=bench/out/gpu_bench.md
{
    echo "GPU Hogwild on cuda:0 ($(date -u +%Y-%m-%dT%H:%MZ), $(git rev-parse --short HEAD 2>/dev/null || echo unknown))"
    echo "$probe"
    echo "$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | sed 's/^/driver /'); $(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/CUDA \1/p')"
    echo "floor: $floor"
    echo
    header=--header
    for model in lenet mlp; do
        for batch in 64 512; do
            for workers in 1 4; do
                for graph in "" --graph; do
                    # one process per configuration: CUDA must be initialised after the fork of the workers
                    $gpu_bench --model "$model" --batch "$batch" --workers "$workers" $graph \
                        --launch-us "$launch_us" --gbps "$gbps" ${STEPS:+--steps "$STEPS"} $header
                    header=
                done
            done
        done
    done
    echo
    echo "samples/s: all workers' samples over the slowest worker's wall time (random uint8 MNIST-shaped"
    echo "input, SGD lr 0.01 momentum 0.5). Copy and compute ms/step come from a second pass timed with"
    echo "CUDA events; copy share = copy / (copy + compute); copies overlap compute in the first pass."
    echo "kernels/step: kernels and GEMMs of one step (a GEMM counted once). floor: launches = kernels x the"
    echo "measured launch cost; bytes = what the step must move (bench/gpu_bench.c, step_bytes) / the measured"
    echo "bandwidth; floor samples/s = batch / the larger; share of floor = samples/s / floor samples/s."
} | tee "$out"
