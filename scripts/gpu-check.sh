#!/usr/bin/env bash
# The checks only a GPU can make, prepared here and run in one call on a
# lent GPU machine (the device tool, ../.library/device/README.md), whose
# minutes are few: nothing is built or fetched there.
#
#   bash scripts/gpu-check.sh pack   # here: builds build-gpu/ (portable code,
#                                    # -DNMT_NATIVE=OFF, since the GPU machine's
#                                    # CPU is another; CUDA on) and bundles its
#                                    # binaries and the libraries they load (but
#                                    # glibc's and CUDA's) into .gpu/
#   bash scripts/gpu-check.sh        # there: device run, carry [".gpu"],
#                                    # timeout_s 300
#
# What it runs there, each with its log under $OUT (or /tmp/gpu-check):
#  - nvidia-smi, and whether the binaries load against that machine's CUDA;
#  - the backend parity harness on cuda (tests/backend_ops.cpp: every op
#    against the CPU reference), in f32, bf16 and int8; a case whose op the
#    CUDA backend lacks fails there, by name;
#  - the unit tests' GPU cases ([gpu]: placement, training, decoding);
#  - the benchmarks (bench below): training target tokens/s of
#    transformer-small and -base in bf16 at about 25k-token batches, a
#    recipe run of one minute and its test_2016_flickr BLEU, and that model's
#    beam-4 translation of test_2016_flickr (whole process), each beside its
#    share of the GPU's peak, in one table.
# It prints one line per check and a summary, and exits non-zero if any failed.
#
#   bash scripts/gpu-check.sh bench-dry   # here: the benchmarks on the CPU,
#                                         # a few steps each, to try the
#                                         # commands and the table
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bundle=$root/.gpu/nmt-gpu.tar.gz

pack() {
  local build=${BUILD:-$root/build-gpu} stage
  mkdir -p "$root/.gpu"
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DNMT_NATIVE=OFF -DNMT_CUDA=ON \
    -DNMT_BUILD_TESTS=ON >"$root/.gpu/build.log" 2>&1 &&
    cmake --build "$build" -j"$(nproc)" --target nmt nmt_backend_ops nmt_tests nmt_cuda bench_translate \
      >>"$root/.gpu/build.log" 2>&1 ||
    { tail -20 "$root/.gpu/build.log" >&2; echo "gpu-check pack: the build failed" >&2; exit 1; }
  rm -f "$root/.gpu/build.log"
  for f in nmt tests/nmt_backend_ops tests/nmt_tests libnmt_cuda.so bench/bench_translate; do
    [ -f "$build/$f" ] || { echo "gpu-check pack: the build made no $build/$f" >&2; exit 1; }
  done
  stage=$(mktemp -d)
  mkdir -p "$stage/bin" "$stage/lib" "$stage/data"
  # The benchmarks' corpus: ../shared does not travel to the GPU machine.
  local m30k=${DATA:-$root/../shared/data}/multi30k
  for f in train val test_2016_flickr; do cp "$m30k/$f.en.gz" "$m30k/$f.de.gz" "$stage/data/"; done
  cp "$build/nmt" "$build/tests/nmt_backend_ops" "$build/tests/nmt_tests" "$build/libnmt_cuda.so" \
    "$build/bench/bench_translate" "$stage/bin/"
  # Every library the binaries load but glibc's (the machine's own must be
  # used) and CUDA's (the driver's toolkit there, which matches it).
  ldd "$stage"/bin/* 2>/dev/null | awk '/=> \// {print $3}' | sort -u | while read -r lib; do
    case $(basename "$lib") in
      libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux* | libcuda.so* | \
        libcudart.so* | libcublas*.so* | libcudnn*.so* | libnccl.so* | libnvrtc*.so*) ;;
      *) cp -L "$lib" "$stage/lib/" ;;
    esac
  done
  ldd --version | head -1 | awk '{print $NF}' >"$stage/glibc-version"
  (cd "$root" && git rev-parse --short HEAD 2>/dev/null) >"$stage/commit"
  tar -C "$stage" -cf - . | nice -n 19 gzip -6 >"$bundle.tmp" && mv "$bundle.tmp" "$bundle"
  rm -rf "$stage"
  local mib=$(( $(stat -c %s "$bundle") / 1048576 ))
  echo "gpu-check pack: $bundle ($mib MiB; the device's carry limit is 64 MiB for the whole tree)"
  [ "$mib" -lt 56 ] || { echo "gpu-check pack: the bundle is too large to carry" >&2; exit 1; }
}

check() {
  local out=${OUT:-/tmp/gpu-check} dir=/tmp/nmt-gpu failed=0
  mkdir -p "$out"
  [ -f "$bundle" ] || { echo "gpu-check: no $bundle: run 'scripts/gpu-check.sh pack' here and carry .gpu" >&2; exit 1; }
  rm -rf "$dir" && mkdir -p "$dir" && gzip -dc "$bundle" | tar -C "$dir" -xf - || exit 1
  echo "bundle of commit $(cat "$dir/commit"), built against glibc $(cat "$dir/glibc-version"); this machine: $(ldd --version | head -1 | awk '{print $NF}')"
  # CUDA's libraries: the toolkit's, else the Python wheels'.
  local cuda_lib
  cuda_lib=$(dirname "$(find /usr/local/cuda*/ /usr/lib /opt -name 'libcublasLt.so.13*' 2>/dev/null | head -1)" 2>/dev/null)
  export LD_LIBRARY_PATH=$dir/lib${cuda_lib:+:$cuda_lib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export NMT_CUDA_LIBRARY=$dir/bin/libnmt_cuda.so
  echo "CUDA libraries from: ${cuda_lib:-none found}"
  nvidia-smi >"$out/nvidia-smi.txt" 2>&1 && head -15 "$out/nvidia-smi.txt"
  local -a names=() codes=()
  run() {  # run NAME COMMAND...: its log in $out/NAME.log
    local name=$1 rc
    shift
    local t0=$SECONDS
    "$@" >"$out/$name.log" 2>&1
    rc=$?
    names+=("$name") codes+=("$rc")
    printf '%-28s rc=%-3s %4ss  %s\n' "$name" "$rc" $((SECONDS - t0)) "$(tail -1 "$out/$name.log")"
    [ "$rc" -eq 0 ] || failed=1
  }
  run loads bash -c "ldd '$dir/bin/nmt' '$dir/bin/libnmt_cuda.so' | grep 'not found' && exit 1;
    echo 'every library the binaries need is found'"
  run parity_f32 "$dir/bin/nmt_backend_ops" cuda -w NoTests "~[bf16]~[int8]"
  run parity_bf16 "$dir/bin/nmt_backend_ops" cuda --needs bf16 -w NoTests "[bf16]"
  run parity_int8 "$dir/bin/nmt_backend_ops" cuda --needs int8 -w NoTests "[int8]"
  # Placement: training (f32 and bf16), saving, resuming, decoding and nmt
  # train's whole run on the GPU against the CPU (tests/test_device.cpp).
  run unit_gpu "$dir/bin/nmt_tests" --needs gpu -w NoTests "[gpu]"
  # The benchmarks, each step under a timeout so that the whole stays inside
  # one device command (600 s); the table is in bench.log.
  run bench bench "$dir/bin/nmt" "$dir/data" cuda "$out/bench" full
  sed -n '/^benchmark (/,$p' "$out/bench.log"
  # Which cases failed, by name, for the issue's notes.
  # (Catch2's console report: a case's name follows the first of two rules.)
  awk 'FNR == 1 { rule = 0 } /^-+$/ && length($0) > 70 { if (++rule % 2 == 1) { getline; name = $0 } } /FAILED/ { print FILENAME ": " name }' \
    "$out"/parity_*.log "$out"/unit_gpu.log 2>/dev/null | sort -u >"$out/failures.txt"
  [ -s "$out/failures.txt" ] && echo "failed cases ($(wc -l <"$out/failures.txt")):" && cat "$out/failures.txt"
  echo "summary: ${#names[@]} checks, $(printf '%s\n' "${codes[@]}" | grep -vc '^0$') not passed; logs in $out"
  exit "$failed"
}

# Target tokens/s over the steps after the first five, from a run's log.
train_rate() {
  awk -F'[,:{}]' '/"type":"train"/ {
      for (i = 1; i < NF; ++i) {
        if ($i == "\"tgt_tokens\"") t = $(i + 1)
        if ($i == "\"step_seconds\"") s = $(i + 1)
        if ($i == "\"step\"") n = $(i + 1)
      }
      if (n > 5) { tok += t; sec += s }
    } END { if (sec > 0) printf "%.0f", tok / sec; else printf "-" }' "$1"
}

# bench NMT DATA DEVICE WORK full|dry: the benchmark table. dry: a few
# steps and seconds each, to try the commands here.
bench() {
  local nmt=$1 data=$2 dev=$3 work=$4 mode=$5 steps=40 minutes=1 bt=25000
  [ "$mode" = dry ] && steps=7 minutes=0.15 bt=2000
  local peak=990  # dense bf16 TFLOP/s of an H200 (the issue's figure)
  [ "$dev" = cpu ] && peak=0
  if [ "$dev" = cuda ] && ! "$nmt" --version 2>/dev/null | grep -qE "cuda: CUDA .*, [1-9][0-9]* devices?\)"; then
    echo "benchmarks skipped: no CUDA device"
    return 77
  fi
  mkdir -p "$work"
  local -a rows=()
  local cfg params rate fig t0 secs missing=0
  for cfg in transformer-small transformer-base; do
    rm -rf "$work/$cfg.nmt"*  # a run's checkpoints (a directory) too
    t0=$SECONDS
    timeout 120 "$nmt" train --device "$dev" --no-recipe -c "$cfg" --train-src "$data/train.en.gz" \
      --train-tgt "$data/train.de.gz" --out "$work/$cfg.nmt" --batch-tokens "$bt" \
      --compute-type bf16 --max-steps "$steps" --seed 1 --no-shortlist --log-every 1000 \
      >"$work/$cfg.log" 2>&1
    rate=$(train_rate "$work/$cfg.nmt.log.jsonl" 2>/dev/null)
    fig=-
    if [[ "$rate" =~ ^[0-9]+$ ]]; then fig="$rate tgt tok/s"; else missing=1; fi
    params=$("$nmt" info "$work/$cfg.nmt" 2>/dev/null | awk '/^parameters/ {gsub(/[()]/, "", $3); print $3}')
    rows+=("train $cfg bf16, $bt-token batches|$fig|$(share "$rate" "$params" "$peak")|$((SECONDS - t0)) s, $steps updates")
  done
  # One minute of the recipe (model, schedule and compute type chosen for
  # the device), then the test set at beam 4: the whole process, timed.
  rm -rf "$work/recipe.nmt"* "$work/test.hyp"
  t0=$SECONDS
  timeout 200 "$nmt" train --device "$dev" --train-src "$data/train.en.gz" --train-tgt "$data/train.de.gz" \
    --valid-src "$data/val.en.gz" --valid-tgt "$data/val.de.gz" --out "$work/recipe.nmt" \
    --max-minutes "$minutes" >"$work/recipe.log" 2>&1
  secs=$((SECONDS - t0))
  local start end bleu sents=-
  start=$(date +%s.%N)
  timeout 60 "$nmt" translate --device "$dev" -m "$work/recipe.nmt" -i "$data/test_2016_flickr.en.gz" \
    -o "$work/test.hyp" --beam 4 2>"$work/translate.log"
  end=$(date +%s.%N)
  [ -s "$work/test.hyp" ] && sents=$(awk -v n="$(wc -l <"$work/test.hyp")" -v a="$start" -v b="$end" 'BEGIN { printf "%.0f", n / (b - a) }')
  gzip -dc "$data/test_2016_flickr.de.gz" >"$work/test.ref"
  bleu=$("$nmt" score "$work/test.ref" -i "$work/test.hyp" -b 2>/dev/null)
  [ -n "$bleu" ] && [ "$sents" != - ] || missing=1
  rows+=("recipe, --max-minutes $minutes|test_2016_flickr BLEU ${bleu:--}|-|$secs s in all")
  local sfig=-
  [ "$sents" != - ] && sfig="$sents sent/s"
  rows+=("translate test_2016_flickr, beam 4|$sfig|-|whole process")
  # The engine alone (bench_translate: warm passes, BLEU beside them).
  local engine
  engine=$(timeout 90 "$(dirname "$nmt")/bench_translate" --real "$work/recipe.nmt" --device "$dev" \
    --src "$data/test_2016_flickr.en.gz" --ref "$data/test_2016_flickr.de.gz" --repeat 2 \
    2>"$work/engine.log" | awk '$1 == 2 { printf "%s sent/s, BLEU %s", $2, $NF }')
  rows+=("translate test_2016_flickr, beam 4|${engine:--}|-|engine only, 2nd pass")
  [ -n "$engine" ] || missing=1
  printf '%-50s %-30s %-8s %s\n' "benchmark ($dev)" figure "of peak" notes
  local r
  for r in "${rows[@]}"; do
    IFS='|' read -r a b c d <<<"$r"
    printf '%-50s %-30s %-8s %s\n' "$a" "$b" "$c" "$d"
  done
  return "$missing"  # a figure that is missing fails the check (logs in $work)
}

# Model arithmetic (6 x parameters per target token, forward and backward)
# as a share of a peak in TFLOP/s; "-" without one.
share() {
  local rate=$1 params=$2 peak=$3
  [[ "$rate" =~ ^[0-9]+$ && "$params" =~ ^[0-9]+$ && "$peak" != 0 ]] || { echo "-"; return; }
  awk -v r="$rate" -v p="$params" -v k="$peak" 'BEGIN { printf "%.1f%%", 6 * r * p / (k * 1e12) * 100 }'
}

case ${1:-check} in
  pack) pack ;;
  check) check ;;
  bench-dry)
    mkdir -p "${OUT:-/tmp/gpu-check}/bench-dry/bin"
    ln -sf "$root/build/nmt" "$root/build/bench/bench_translate" "${OUT:-/tmp/gpu-check}/bench-dry/bin/"
    bench "${OUT:-/tmp/gpu-check}/bench-dry/bin/nmt" "${DATA:-$root/../shared/data}/multi30k" cpu \
      "${OUT:-/tmp/gpu-check}/bench-dry" dry ;;
  *) echo "usage: scripts/gpu-check.sh [pack|check|bench-dry]" >&2; exit 2 ;;
esac
