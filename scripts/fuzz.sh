#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) and runs each for a
# fixed time on a working corpus seeded from fuzz/corpus/. Prints, per
# target, the executions and the crashes found; exits non-zero if any
# target crashed (the input is saved under build-fuzz/crashes/TARGET/).
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET ...]   (default 600, all of them)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
seconds=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_model_file fuzz_config fuzz_text_input fuzz_tokenizers fuzz_import_ct2
  fuzz_import_marian fuzz_html fuzz_pickle)
build=${FUZZ_BUILD:-build-fuzz}
cmake -S . -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang -DNMT_FUZZ=ON \
  -DNMT_CUDA=OFF -DNMT_BUILD_TESTS=OFF -DNMT_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"
status=0
printf '%-18s %8s %12s %10s %8s\n' target seconds executions exec/s crashes
for t in "${targets[@]}"; do
  work=$build/corpus/$t crashes=$build/crashes/$t
  mkdir -p "$work" "$crashes"
  set +e
  # One thread of the fuzzer; the library's OpenMP loops stay on one core too.
  OMP_NUM_THREADS=1 "$build/fuzz/$t" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2560 \
    -malloc_limit_mb=2048 -max_len=32768 -print_final_stats=1 -artifact_prefix="$crashes/" \
    "$work" "fuzz/corpus/$t" >"$build/$t.log" 2>&1
  rc=$?
  set -e
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$build/$t.log" | grep -o '[0-9]*$' || echo 0)
  found=$(find "$crashes" -type f | wc -l)
  printf '%-18s %8s %12s %10s %8s\n' "$t" "$seconds" "$runs" "$((runs / (seconds > 0 ? seconds : 1)))" "$found"
  if [ $rc -ne 0 ] || [ "$found" -ne 0 ]; then
    status=1
    grep -m5 -E "ERROR|SUMMARY|Test unit written" "$build/$t.log" >&2 || tail -20 "$build/$t.log" >&2
  fi
done
exit $status
