#!/usr/bin/env bash
# Everything the GPU code must show on a real GPU, in one run with a time limit per part, so that
# a machine held for a few minutes does all of it and a second run can redo what failed:
#
#   env      the machine: GPU, driver, CUDA, CPU, NUMA, ./hogwild --version, torch
#   tests    the GPU suites for real: cuda, cuda_layers, gpu_train, mpi_gpu
#   train    GPU Hogwild (4 workers, launch by launch and as CUDA graphs) and GPU DataParallel
#            (--gpus 0,0) against the same runs on the CPU, 10 epochs of MNIST: accuracy after 1 and 10
#   cleanup  Ctrl-C and a worker killed with SIGKILL, Hogwild and DataParallel on the GPU: then no
#            process, no device memory (nvidia-smi) and no shared memory may be left
#   bench    bench/gpu_bench.sh: samples/s, copies against compute, and the floor of a step
#            (kernels x launch cost, bytes / bandwidth), with and without CUDA graphs
#   torch    PyTorch's Hogwild example on the same GPU (bench/peer_torch_hogwild.py --device cuda)
#   compare  DEVICE=cuda:0 bench/compare_modes.sh: Hogwild against DataParallel on the GPU
#   cpu      bench/cpu_scaling.sh: Hogwild on the machine's cores (1 to 16 workers)
#   multigpu Hogwild on several GPUs for real: the suite multigpu with two copies of the weights on
#            the one GPU (--gpus 0,0 standing for two GPUs), Ctrl-C and a killed worker with two
#            copies (nothing left behind), then 1 copy against 2 copies on it (samples/s and
#            accuracy, 1 epoch of MNIST, LeNet and the MLP, 2 and 4 workers; 2 copies also with
#            rounds every 5 ms)
#
#   bench/gpu_check.sh OUT_DIR [PART ...]       (default: every part but cpu, in the order above)
#   HW_PREBUILT=1   use the binaries in place instead of running make first
#   HW_BIN=PATH TEST_BIN=PATH   the multigpu part's binaries (default ./hogwild, build/test_hogwild;
#                   build-sim/hogwild and build-sim/test_hogwild with HW_SIM_DEVICES=2 try the part
#                   on the simulated device);  MULTIGPU_MODELS="lenet mlp"  its models
#   EPOCHS=10       the train part's epochs;  PYTHON=python3  the peer's Python
#
# Each part writes OUT_DIR/<part>.log; OUT_DIR/summary.md gathers the results and every part's
# status (ok, FAILED with its exit code, or TIMED OUT), which is printed last.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: bench/gpu_check.sh OUT_DIR [PART ...]}
shift
PARTS=${*:-env tests train cleanup bench torch compare}
EPOCHS=${EPOCHS:-10}
PYTHON=${PYTHON:-python3}
DATA=${DATA:-data/mnist}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
SUMMARY="$OUT/summary.md"
: > "$SUMMARY"

say() { echo "$*" | tee -a "$SUMMARY"; }

# part NAME SECONDS: runs part_NAME with a time limit, its output into OUT/NAME.log.
part() {
    local name=$1 limit=$2 start status
    start=$(date +%s)
    echo "== $name (limit ${limit}s)"
    timeout -k 10 "$limit" bash -c "$(declare -f); OUT='$OUT' EPOCHS='$EPOCHS' PYTHON='$PYTHON' DATA='$DATA' part_$name" \
        > "$OUT/$name.log" 2>&1
    status=$?
    local took=$(($(date +%s) - start))
    case $status in
        0) say "- part $name: ok (${took}s)" ;;
        124 | 137) say "- part $name: TIMED OUT after ${took}s" ;;
        *) say "- part $name: FAILED, exit $status (${took}s)" ;;
    esac
    tail -n 60 "$OUT/$name.log"
}

# Nothing of a run (session SID, started by setsid) may outlive it: no process of its session, no
# device memory (no process on the GPU at all), no shared-memory name of its pid.
leftovers() {  # SID
    local procs apps shm
    procs=$(pgrep -s "$1" | tr '\n' ' ')
    apps=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader 2>/dev/null | tr '\n' ';')
    shm=$(ls /dev/shm 2>/dev/null | grep "^hogwild-$1-" | tr '\n' ' ')
    echo "left behind: processes [${procs}] GPU apps [${apps}] /dev/shm [${shm}]"
    [ -z "$procs$apps$shm" ]
}

part_env() {
    nvidia-smi || return 1
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_mode,clocks.max.sm --format=csv
    nvcc --version | tail -2
    lscpu | grep -E '^(Model name|CPU\(s\)|Socket|Core|Thread|NUMA|L2|L3)'
    command -v numactl >/dev/null && numactl --hardware
    ./hogwild --version
    "$PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "oneDNN", torch.backends.mkldnn.is_available())' || true
}

part_tests() {
    HW_BIN=$PWD/hogwild build/test_hogwild --filter '@(cuda|cuda_layers|gpu_train|mpi_gpu)/*' --verbose=0 2>&1 |
        grep -vE '^\[----\] .*(Running|is running)'
    return "${PIPESTATUS[0]}"
}

# One run's accuracy after epoch 1 and after the last, from its metrics CSV.
accuracy_row() {  # label csv log
    awk -F, -v label="$1" -v rate="$(sed -n 's/^done: .*(\([0-9]*\) samples\/s).*/\1/p' "$3")" '
        NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        { acc[$col["epoch"]] = $col["test_accuracy"]; last = $col["epoch"] }
        END { printf "| %s | %s | %s (epoch %s) | %s |\n", label, acc[1], acc[last], last, rate }' "$2"
}

part_train() {
    local rc=0
    run() {  # label args...
        local label=$1
        shift
        echo "$ ./hogwild $* --data $DATA --epochs $EPOCHS"
        timeout 150 ./hogwild --quiet --data "$DATA" --epochs "$EPOCHS" --metrics "$OUT/train-$label.csv" "$@" \
            > "$OUT/train-$label.log" 2>&1 || { echo "FAILED: $label"; tail -5 "$OUT/train-$label.log"; rc=1; }
        tail -2 "$OUT/train-$label.log"
    }
    run cpu-hogwild-4 --workers 4
    run gpu-hogwild-4 --device cuda --workers 4
    HOGWILD_CUDA_GRAPHS=1 run gpu-hogwild-4-graphs --device cuda --workers 4
    run cpu-dataparallel-2 --mode dataparallel --replicas 2
    run gpu-dataparallel-0,0 --mode dataparallel --gpus 0,0
    {
        echo
        echo "| run (LeNet, MNIST, batch 64, lr 0.01, momentum 0.5, seed 1) | accuracy after epoch 1 | after the last | samples/s |"
        echo "|---|---:|---:|---:|"
        for label in cpu-hogwild-4 gpu-hogwild-4 gpu-hogwild-4-graphs cpu-dataparallel-2 gpu-dataparallel-0,0; do
            [ -s "$OUT/train-$label.csv" ] && accuracy_row "$label" "$OUT/train-$label.csv" "$OUT/train-$label.log"
        done
    } | tee -a "$OUT/summary-train.md"
    return $rc
}

# stop_case NAME SIGNAL_WHAT ARGS...: starts ./hogwild ($HW_BIN) in a session of its own, lets it
# train, then either Ctrl-C (SIGINT to the whole process group, as a terminal sends it) or SIGKILL
# to one worker; reports the exit status, its last lines and what was left behind. Sets the
# caller's rc to 1 on a failure.
stop_case() {
    local name=$1 how=$2
    shift 2
    rm -f "$OUT/$name.safetensors"
    # A script's background job starts with SIGINT ignored, and hogwild keeps an ignored
    # SIGINT ignored (as nohup expects): give it the default, as a terminal's job has.
    setsid env --default-signal=INT "${HW_BIN:-./hogwild}" --data "$DATA" --epochs 50 --save "$OUT/$name.safetensors" "$@" \
        > "$OUT/cleanup-$name.log" 2>&1 &
    local pid=$!
    sleep 8
    if [ "$how" = ctrl-c ]; then
        kill -INT -- "-$pid"
    else
        local worker
        worker=$(pgrep -P "$pid" -x "$(basename "${HW_BIN:-hogwild}")" | head -1)
        echo "killing worker pid $worker of $pid"
        kill -KILL "$worker"
    fi
    local waited=0
    while kill -0 "$pid" 2>/dev/null && [ $waited -lt 60 ]; do sleep 0.5; waited=$((waited + 1)); done
    kill -0 "$pid" 2>/dev/null && { echo "still running 30 s after the $how: killed"; kill -KILL -- "-$pid"; rc=1; }
    wait "$pid"
    local status=$?
    sleep 1
    echo "### $name ($how): exit $status after $((waited / 2)) s; checkpoint: $(ls -la "$OUT/$name.safetensors" 2>&1 | cut -c1-100)"
    tr '\r' '\n' < "$OUT/cleanup-$name.log" | grep -v '^\s*$' | tail -4
    if [ "$how" = ctrl-c ] && { [ $status != 130 ] || [ ! -s "$OUT/$name.safetensors" ]; }; then
        echo "FAILED: Ctrl-C must end the run with 130 and save the checkpoint"
        rc=1
    fi
    if [ "$how" = kill-worker ] && { [ $status != 1 ] || ! grep -q 'worker' "$OUT/cleanup-$name.log"; }; then
        echo "FAILED: a killed worker must end the run with 1, naming the worker"
        rc=1
    fi
    if ! leftovers "$pid"; then rc=1; fi
    pkill -KILL -s "$pid" 2>/dev/null
}

part_cleanup() {
    local rc=0
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader 2>/dev/null | grep . &&
        { echo "processes on the GPU BEFORE the cleanup part"; rc=1; }
    stop_case hogwild-cuda-ctrl-c ctrl-c --device cuda --workers 4
    stop_case hogwild-cuda-kill-worker kill-worker --device cuda --workers 4
    stop_case hogwild-cuda-fs-ctrl-c ctrl-c --device cuda --workers 4 --sharing-strategy file_system
    stop_case hogwild-cuda-fs-kill-worker kill-worker --device cuda --workers 4 --sharing-strategy file_system
    stop_case dataparallel-cuda-ctrl-c ctrl-c --mode dataparallel --gpus 0,0
    return $rc
}

part_bench() {
    STEPS=${STEPS:-} HW_PREBUILT=1 bench/gpu_bench.sh
}

part_torch() {
    "$PYTHON" -c 'import torch; assert torch.cuda.is_available()' || { echo "no torch with CUDA here"; return 0; }
    echo "| peer (PyTorch's mnist_hogwild, 1 epoch, GPU) | workers | train samples/s (ready to done) | wall samples/s | accuracy |"
    echo "|---|---:|---:|---:|---:|"
    for model in lenet mlp; do
        for workers in 1 4; do
            out=$(timeout 120 "$PYTHON" bench/peer_torch_hogwild.py --device cuda --model "$model" --workers "$workers" \
                --data "$DATA" 2>&1 | grep '^peer ' | tail -1)
            echo "$out" >> "$OUT/torch-raw.log"
            echo "$out" | awk -v m="$model" -v w="$workers" '{
                for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
                printf "| %s (torch %s) | %d | %s | %.0f | %s |\n", m, v["torch"], w, v["samples_per_second"],
                       (v["wall_seconds"] > 0 ? 60000 / v["wall_seconds"] : 0), v["test_accuracy"] }'
        done
    done
    echo
    echo "hogwild on the same GPU, 1 epoch (whole-run samples/s from the first fork, as hogwild prints it):"
    for model in lenet mlp; do
        for workers in 1 4; do
            for graphs in 0 1; do
                echo "$model workers $workers graphs $graphs: $(HOGWILD_CUDA_GRAPHS=$graphs ./hogwild --quiet --device cuda \
                    --workers "$workers" --model "models/$model.model" --data "$DATA" | sed -n 's/^done: //p')"
            done
        done
    done
}

part_compare() {
    DATASETS=${COMPARE_DATASETS:-mnist} DEVICE=cuda:0 bench/compare_modes.sh "${COMPARE_EPOCHS:-2}"
}

part_multigpu() {
    local rc=0 bin=${HW_BIN:-$PWD/hogwild} tests=${TEST_BIN:-build/test_hogwild}
    HW_BIN=$bin "$tests" --filter 'multigpu/*' --verbose=0 2>&1 | grep -vE '^\[----\] .*(Running|is running)'
    [ "${PIPESTATUS[0]}" = 0 ] || { echo "FAILED: the multigpu suite"; rc=1; }
    # Two copies on the GPU: Ctrl-C saves, a killed worker is named with its GPU, nothing is left.
    stop_case hogwild-gpus-ctrl-c ctrl-c --gpus 0,0 --workers 4 --quiet
    stop_case hogwild-gpus-kill-worker kill-worker --gpus 0,0 --workers 4 --quiet
    grep -q 'worker [0-9]* on cuda:0 was killed by signal SIGKILL' "$OUT/cleanup-hogwild-gpus-kill-worker.log" ||
        { echo "FAILED: the killed worker's GPU is not named"; rc=1; }
    # One row per run: samples/s and accuracy from the summary line, the copies' rounds.
    row() {  # model workers where log
        local rate acc rounds
        rate=$(sed -n 's/^done: .*(\([0-9]*\) samples\/s).*/\1/p' "$4")
        acc=$(sed -n 's/^done: .*accuracy \([0-9.]*\)%.*/\1/p' "$4")
        rounds=$(sed -n 's/^coupling of .*: \([0-9]*\) rounds.*took \([0-9.]*\) ms on average.*/\1 (\2 ms each)/p' "$4")
        echo "| $1 | $2 | $3 | ${rate:-FAILED} | ${acc:--} | ${rounds:--} |"
    }
    {
        echo
        echo "| model (1 epoch of MNIST) | workers | weights | samples/s | accuracy | rounds |"
        echo "|---|---:|---|---:|---:|---|"
    } | tee -a "$OUT/summary-multigpu.md"
    for model in ${MULTIGPU_MODELS:-lenet mlp}; do
        for workers in 2 4; do
            # The last: rounds every 5 ms instead of 20, where a round costs little (no network).
            for where in "--device cuda:0" "--gpus 0,0" "--gpus 0,0 --sync-every 5ms"; do
                local label=1-copy
                [ "$where" = "--gpus 0,0" ] && label=2-copies
                [ "$where" = "--gpus 0,0 --sync-every 5ms" ] && label=2-copies-5ms
                local log="$OUT/multigpu-$model-$workers-$label.log"
                # shellcheck disable=SC2086
                timeout 100 "$bin" $where --workers "$workers" --model "models/$model.model" --data "$DATA" \
                    --epochs 1 --quiet > "$log" 2>&1 || { echo "FAILED: $model $workers $label"; tail -3 "$log"; rc=1; }
                row "$model" "$workers" "$label (${where#--})" "$log" | tee -a "$OUT/summary-multigpu.md"
            done
        done
    done
    return $rc
}

part_cpu() {
    bench/cpu_scaling.sh "$OUT/cpu_scaling"
}

if [ "${HW_PREBUILT:-0}" != 1 ]; then
    make -j"$(nproc)" all build/bench_gpu_bench > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
fi
[ -f "$DATA/train-images-idx3-ubyte.gz" ] || ./hogwild download mnist --dir "$DATA" || exit 1

declare -A LIMIT=([env]=30 [tests]=200 [train]=420 [cleanup]=150 [bench]=240 [torch]=240 [compare]=300 [cpu]=420
    [multigpu]=300)
for p in $PARTS; do
    [ -n "${LIMIT[$p]:-}" ] || { echo "unknown part $p (parts: ${!LIMIT[*]})" >&2; exit 2; }
    part "$p" "${PART_LIMIT:-${LIMIT[$p]}}"
done
echo
echo "== summary ($OUT/summary.md)"
cat "$SUMMARY"
