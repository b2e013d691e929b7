#!/usr/bin/env bash
# hogwild set-up and main job.
#
#   ./run.sh          install what is missing, build, get MNIST, train with 4 Hogwild workers,
#                     then DataParallel with 4 replicas on the same data, then compare the two
#   ./run.sh test     install what is missing, build, get the data, run the whole test suite
#
# Environment:
#   HOGWILD_DATA_MIRROR  a local folder laid out as <mirror>/mnist/*.gz, <mirror>/fashion-mnist/*.gz,
#                        tried before the public mirrors (CI points it at ../shared/data)
#   CUDA=0               build without CUDA even where nvcc is installed
#   JOBS                 parallel make jobs (default: number of cores)
set -euo pipefail
cd "$(dirname "$0")"

MODE="${1:-train}"
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"

# Debian packages the build and the tests need. pkg-config finds stb; libopenblas-dev gives cblas.h
# and libopenblas0-pthread the library ./hogwild loads at run time (the pthread build, run with one
# thread per caller: thread-safe, see include/hw/blas.h); jansson reads and writes checkpoint
# headers; libmd checks the downloads' md5; criterion runs the tests; g++ builds the CUDA host code
# against the simulated CUDA device of the tests (make sim); Open MPI (mpicc, mpirun, libmpi) runs
# training across several ranks and machines (README, "Several machines") and its tests; clang and
# clang-format are CI's second compiler and the formatter (.ci/run: make CC=clang, make format-check).
PACKAGES="gcc g++ make pkg-config zlib1g-dev libopenblas-dev libopenblas0-pthread libstb-dev libjansson-dev libmd-dev libcriterion-dev"
PACKAGES="$PACKAGES openmpi-bin libopenmpi-dev clang clang-format"

say() { printf '[run.sh] %s\n' "$*"; }

install_missing() {
    local missing=()
    for pkg in $PACKAGES; do
        if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
            missing+=("$pkg")
        fi
    done
    if [ ${#missing[@]} -eq 0 ]; then
        say "packages: all present"
        return 0
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        say "missing packages: ${missing[*]}; this is not a Debian system: install their equivalents"
        exit 1
    fi
    if [ "$(id -u)" -ne 0 ]; then
        say "missing packages: ${missing[*]}. As root, run:"
        echo "    apt-get update && apt-get install -y ${missing[*]}"
        exit 1
    fi
    say "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
}

build() {
    say "building (make -j$JOBS)"
    make -j"$JOBS" all
}

# Fetches MNIST and Fashion-MNIST (the local mirror first, then the public mirrors, md5-checked).
# Offline with no mirror, writes the synthetic digits instead and says so.
get_data() {
    local ok=1
    for name in mnist fashion-mnist; do
        if ! ./hogwild download "$name" --dir "data/$name"; then
            ok=0
        fi
    done
    if [ $ok -eq 0 ] && [ ! -f data/mnist/train-images-idx3-ubyte.gz ]; then
        say "could not get MNIST (offline, and no HOGWILD_DATA_MIRROR): using the SYNTHETIC digits in data/synthetic instead"
        ./hogwild synth --dir data/synthetic --overwrite  # run.sh's own folder: the same digits again
        DATA_DIR=data/synthetic
    fi
}

install_missing
build
DATA_DIR=data/mnist

case "$MODE" in
    test)
        get_data
        say "running the test suite"
        make test
        ;;
    train)
        get_data
        mkdir -p runs
        say "Hogwild: ./hogwild --workers 4 --data $DATA_DIR --eval-every 15000 --metrics runs/hogwild-4.csv"
        ./hogwild --workers 4 --data "$DATA_DIR" --eval-every 15000 --metrics runs/hogwild-4.csv
        say "DataParallel: ./hogwild --mode dataparallel --replicas 4 --data $DATA_DIR --eval-every 15000 --metrics runs/dataparallel-4.csv"
        ./hogwild --mode dataparallel --replicas 4 --data "$DATA_DIR" --eval-every 15000 \
            --metrics runs/dataparallel-4.csv
        say "comparison (target accuracy 90%: one epoch)"
        ./hogwild compare runs/hogwild-4.csv runs/dataparallel-4.csv --target 90 --plot runs/compare.svg
        ;;
    *)
        echo "usage: ./run.sh [test]" >&2
        exit 2
        ;;
esac
