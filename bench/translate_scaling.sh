#!/usr/bin/env bash
# Distributed translation on this machine: one model, one input, as
#   1 process x 1 thread, 2 processes x 1 thread (mpirun -np 2), and
#   1 process x 2 workers of 1 thread (the one-process way to use 2 cores),
# alternated ROUNDS times (default 2). Prints lines/s and source words/s
# (the best round of each), the speed-up against one process, the largest
# process's peak memory, whether each output is byte-identical to one
# process's, and a model of N nodes fitted to the measurement (see
# bench/SCALING.md): a fixed cost T0 (start-up and model load, measured on
# an empty input) and the translation split N ways with the balance loss
# measured at 2 ranks.
#   bench/translate_scaling.sh MODEL [INPUT]
# INPUT: default the first LINES (5000) German lines of Multi30k's training
# set; BEAM (default 4) and WINDOW (default 1024) as for nmt translate.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
NMT=${NMT:-$root/build/nmt}
MODEL=${1:?usage: bench/translate_scaling.sh MODEL [INPUT]}
LINES=${LINES:-5000}
BEAM=${BEAM:-4}
WINDOW=${WINDOW:-1024}
ROUNDS=${ROUNDS:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ $# -ge 2 ]; then
  input=$2
else
  { zcat "$root/../shared/data/multi30k/train.de.gz" || true; } | head -n "$LINES" >"$work/in.txt"
  input=$work/in.txt
fi
lines=$(wc -l <"$input")
tokens=$(wc -w <"$input")
echo "model $MODEL; input $input: $lines lines, $tokens words; beam $BEAM, window $WINDOW"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "mpi: $("$NMT" --version | grep -i mpi)"

declare -A best rss same
calc() { awk "BEGIN { print $1 }"; }
run() {  # name launcher...
  local name=$1
  shift
  local t0 t1 s
  t0=$(date +%s.%N)
  /usr/bin/time -f "%M" -o "$work/$name.rss" "$@" "$NMT" translate -m "$MODEL" -i "$input" \
    -o "$work/$name.out" --beam "$BEAM" --window "$WINDOW" --threads 1 \
    $([ "$name" = "1x2workers" ] && echo "--workers 2" || echo "--workers 1") 2>"$work/$name.err" \
    || { cat "$work/$name.err"; exit 1; }
  t1=$(date +%s.%N)
  s=$(calc "$t1 - $t0")
  if [ -z "${best[$name]:-}" ] || [ "$(calc "($s < ${best[$name]}) ? 1 : 0")" = 1 ]; then best[$name]=$s; fi
  rss[$name]=$(tail -1 "$work/$name.rss")
  printf '  round %d %-12s %7.2f s\n' "$round" "$name" "$s"
}
for round in $(seq "$ROUNDS"); do
  run 1x1
  run 2x1 mpirun -np 2 --bind-to core
  run 1x2workers
done
for name in 2x1 1x2workers; do
  cmp -s "$work/1x1.out" "$work/$name.out" && same[$name]=yes || same[$name]=NO
done
same[1x1]=reference
printf '\n| run | seconds | lines/s | src words/s | speed-up | peak MiB (largest process) | output |\n|---|---|---|---|---|---|---|\n'
declare -A label=([1x1]="1 process x 1 thread" [2x1]="2 processes x 1 thread (mpirun)" [1x2workers]="1 process, 2 workers x 1 thread")
for name in 1x1 2x1 1x2workers; do
  s=${best[$name]}
  printf '| %s | %.2f | %.1f | %.0f | %.2f | %d | %s |\n' "${label[$name]}" "$s" "$(calc "$lines / $s")" \
    "$(calc "$tokens / $s")" "$(calc "${best[1x1]} / $s")" $((${rss[$name]} / 1024)) "${same[$name]}"
done
# The fixed cost: start-up and model load, on an empty input (best of 3).
t0() {
  local best="" t a b
  for _ in 1 2 3; do
    a=$(date +%s.%N)
    "$@" "$NMT" translate -m "$MODEL" -i /dev/null -o "$work/empty.out" 2>/dev/null
    b=$(date +%s.%N)
    t=$(calc "$b - $a")
    if [ -z "$best" ] || [ "$(calc "($t < $best) ? 1 : 0")" = 1 ]; then best=$t; fi
  done
  echo "$best"
}
f1=$(t0)
f2=$(t0 mpirun -np 2 --bind-to core)
# T(N) = T0(N) + (T1 - T0(1)) / N x (1 + loss), the loss (rounds waiting for
# their slowest window) as measured at 2 ranks; T0(N) taken as T0(2).
work1=$(calc "${best[1x1]} - $f1")
loss=$(calc "(${best[2x1]} - $f2) / ($work1 / 2) - 1")
printf '\nfixed cost (empty input): 1 process %.2f s, 2 processes %.2f s; balance loss at 2 ranks %.1f%%\n' \
  "$f1" "$f2" "$(calc "100 * $loss")"
for scale in 1 100; do
  printf 'modelled speed-up, %d x this input:' "$scale"
  for n in 4 8 16 64; do
    printf ' N=%d: %.1f' "$n" "$(calc "($f1 + $scale * $work1) / ($f2 + $scale * $work1 / $n * (1 + $loss))")"
  done
  echo
done
