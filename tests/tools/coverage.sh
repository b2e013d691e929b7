#!/bin/sh
# Line coverage of src/ by the Criterion suite, with gcov (CPU build: CUDA code is not counted).
#
#   tests/tools/coverage.sh          build build-cov/ with --coverage, run the suite, summarise
#   tests/tools/coverage.sh --report summarise the counts already in build-cov/
#
# Worker processes leave by _exit, which writes no counts: code that runs only inside a Hogwild
# worker counts as not run. Compare numbers taken the same way.
set -eu
cd "$(dirname "$0")/../.."
B=build-cov
if [ "${1:-}" != "--report" ]; then
    find "$B" -name '*.gcda' -delete 2>/dev/null || true
    # LDFLAGS: the MPI part is a shared object of its own, linked with gcov's runtime too
    make -j"$(nproc)" BUILD=$B CUDA=0 OPT='-O0 --coverage' LDFLAGS=--coverage $B/hogwild $B/test_hogwild $B/bench_nn_step $B/bench_compute_floor
    HW_BIN="$PWD/$B/hogwild" $B/test_hogwild || echo "coverage.sh: the suite had failures (counted anyway)"
fi
for gcno in $(find "$B" -name '*.gcno' ! -path "$B/tests/*" | sort); do
    obj=${gcno%.gcno}.o
    src=src/${obj#$B/}; src=${src%.o}; src=${src%.cu}
    [ -f "$src.c" ] && gcov -n -o "$obj" "$src.c" 2>/dev/null
done | awk '/^File /{f=$2; gsub(/\047/,"",f); next}
/^Lines executed:/ && f ~ /^src\// && !(f in seen) {seen[f]=1; split($2,a,"%"); sub(/.*:/,"",a[1]); n=$4; hit+=a[1]*n/100; tot+=n; printf "%-32s %7.2f%% of %d\n", f, a[1], n}
END {printf "TOTAL src/: %.0f of %d lines = %.2f%%\n", hit, tot, 100*hit/tot}'
