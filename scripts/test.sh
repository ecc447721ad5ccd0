#!/usr/bin/env bash
# Builds nmt and its tests and runs them, then the fuzz targets for a short
# fixed time (the README's test command; .ci/run runs exactly this). Tests
# read corpora from ../shared/data and never need the network.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
# One test process at a time: each uses every core through OpenMP, and two
# spinning thread teams on two cores slow each other down badly.
ctest --test-dir build --output-on-failure -j1
# The fuzz targets, built with clang and run briefly on the committed seeds
# (scripts/fuzz.sh 600 is the long local run).
scripts/fuzz.sh "${FUZZ_SECONDS:-10}"
