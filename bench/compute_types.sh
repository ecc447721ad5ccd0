#!/usr/bin/env bash
# Translation speed and quality in each compute type, side by side, on this
# machine in one run: real text (test_2016_flickr through the whole pipeline,
# nmt translate's default workers and threads) with BLEU on test_2016_flickr
# and on val, the fixed protocol (transformer-small and -base, greedy and
# beam 4, batch 1 and 32), and peak memory. A compute type this CPU lacks
# (bf16 without AVX512-BF16 or AMX) is reported as skipped.
#
#   bench/compute_types.sh [MODEL]    # default: runs/multi30k/en-de.nmt,
#                                     # which bench/train_multi30k.sh trains
# Environment: TYPES (default "f32 int8 bf16"), FIXED=0 skips the fixed
# protocol, THREADS for the fixed protocol (default: all cores).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
MODEL=${1:-$root/runs/multi30k/en-de.nmt}
BENCH=${BENCH:-$root/build/bench/bench_translate}
TYPES=${TYPES:-f32 int8 bf16}
THREADS=${THREADS:-$(nproc)}
data=${DATA:-$root/../shared/data/multi30k}
[ -x "$BENCH" ] || { echo "compute_types: build first ($BENCH is missing)" >&2; exit 1; }
[ -s "$MODEL" ] || { echo "compute_types: no model at $MODEL (bench/train_multi30k.sh trains one)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

supported() {  # a one-line translation tells whether this CPU runs the type
  echo "a" | "$root/build/nmt" translate -m "$MODEL" --compute-type "$1" >/dev/null 2>"$tmp/err"
}

echo "real text: $MODEL, beam 4, sent/s of the 2nd and 3rd timed passes (the 1st builds what other workers lacked)"
printf "%-6s %10s %10s %14s %10s %12s\n" type "sent/s" "sent/s" "BLEU test16" "BLEU val" "peak MiB"
for t in $TYPES; do
  if ! supported "$t"; then
    printf "%-6s skipped: %s\n" "$t" "$(sed 's/^nmt translate: error: //' "$tmp/err")"
    continue
  fi
  "$BENCH" --real "$MODEL" --compute-type "$t" --repeat 3 >"$tmp/test.txt" 2>&1
  "$BENCH" --real "$MODEL" --compute-type "$t" --repeat 1 \
    --src "$data/val.en.gz" --ref "$data/val.de.gz" >"$tmp/val.txt" 2>&1
  runs=$(awk '$1 ~ /^[0-9]+$/ && NF == 5' "$tmp/test.txt")
  printf "%-6s %10s %10s %14s %10s %12s\n" "$t" \
    "$(echo "$runs" | awk 'NR == 2 {print $2}')" "$(echo "$runs" | awk 'NR == 3 {print $2}')" \
    "$(echo "$runs" | awk 'NR == 3 {print $5}')" \
    "$(awk '$1 ~ /^[0-9]+$/ && NF == 5 {print $5}' "$tmp/val.txt")" \
    "$(awk '/^peak memory/ {print $3}' "$tmp/test.txt")"
done
# The setup the passes ran with (the same for every type).
grep -m1 '^real text' "$tmp/test.txt" 2>/dev/null | sed 's/^real text: /setup: /; s/, \(f32\|int8\|bf16\), /, /' || true

[ "${FIXED:-1}" = 0 ] && exit 0
echo
echo "fixed protocol, $THREADS threads, sent/s"
printf "%-6s %9s %9s %9s %9s %9s %9s %9s %9s %10s\n" type s-g1 s-g32 s-b4-1 s-b4-32 b-g1 b-g32 b-b4-1 b-b4-32 "peak MiB"
for t in $TYPES; do
  supported "$t" || continue
  "$BENCH" "$THREADS" --compute-type "$t" >"$tmp/fixed.txt" 2>&1
  printf "%-6s %s %10s\n" "$t" \
    "$(awk '$1 ~ /^transformer-/ && $4 != "latency" {printf "%9s ", $4}' "$tmp/fixed.txt")" \
    "$(awk '/^peak memory/ {print $3}' "$tmp/fixed.txt")"
done
