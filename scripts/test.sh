#!/usr/bin/env bash
# Builds nmt and its tests and runs them, then the fuzz targets for a short
# fixed time (the README's test command; .ci/run runs exactly this). Tests
# read corpora from ../shared/data and never need the network.
# NMT_SANITIZE=ON scripts/test.sh: the same tests on a build with ASan and
# UBSan (in build-asan; the fuzz targets are sanitized builds already).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/install-deps.sh
build=build
flags=(-DCMAKE_BUILD_TYPE=Release)
if [ "${NMT_SANITIZE:-OFF}" = ON ]; then
  build=build-asan
  flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DNMT_SANITIZE=ON)
  # A leak at exit is not a test failure (nmt ends some commands without
  # tearing down); a UBSan report is.
  export ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
fi
cmake -S . -B "$build" "${flags[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)"
# One test process at a time: each uses every core through OpenMP, and two
# spinning thread teams on two cores slow each other down badly.
ctest --test-dir "$build" --output-on-failure -j1
[ "$build" = build-asan ] && exit 0
# The fuzz targets, built with clang and run briefly on the committed seeds
# (scripts/fuzz.sh 600 is the long local run).
scripts/fuzz.sh "${FUZZ_SECONDS:-10}"
