#!/usr/bin/env bash
# A million lines through a pipe: streams N short lines (cycled from the
# joeynmt toy corpus) through `nmt translate --format jsonl` with a tiny
# model, checks that exactly N lines come back numbered 1..N in order, and
# reports lines/s and the process's peak memory (max RSS, /usr/bin/time) at
# 10k, 100k and 1M lines: it must stay flat.
#   bench/pipe_million.sh [NMT] [MODEL] [COUNTS...]
# Without MODEL, a transformer-tiny is trained for 200 steps first.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
NMT=${1:-$root/build/nmt}
MODEL=${2:-}
shift 2 2>/dev/null || shift $# 2>/dev/null || true
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(10000 100000 1000000)
toy=$root/../shared/data/joeynmt-toy
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -z "$MODEL" ]; then
  MODEL=$work/tiny.nmt
  "$NMT" train -c transformer-tiny --train-src "$toy/train.en" --train-tgt "$toy/train.de" \
    --vocab-size 300 --max-steps 200 --batch-tokens 1024 --out "$MODEL" 2>/dev/null
fi
# Short lines: the first 8 words of each toy sentence.
awk '{ n = NF < 8 ? NF : 8; s = $1; for (i = 2; i <= n; i++) s = s " " $i; print s }' \
  "$toy/train.en" >"$work/short.en"
echo "model: $MODEL; $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
printf '%10s %10s %10s %12s %s\n' lines seconds lines/s "max RSS MiB" check
for n in "${counts[@]}"; do
  # The output is checked as it streams: count and order from the jsonl
  # "line" field, which the translator numbers itself.
  check=$( { /usr/bin/time -f "%M %e" -o "$work/time" \
      "$NMT" translate -m "$MODEL" --beam 1 --format jsonl \
      < <(awk -v n="$n" '{ a[NR] = $0 } END { for (i = 0; i < n; i++) print a[i % NR + 1] }' "$work/short.en") ; } \
    | awk -v n="$n" '{ match($0, /"line":[0-9]+/); k = substr($0, RSTART + 7, RLENGTH - 7) + 0
                       if (k != NR) { print "out of order at " NR; bad = 1; exit } }
                     END { if (!bad) print (NR == n ? "exact" : "count " NR " != " n) }')
  read -r rss secs <"$work/time"
  awk -v n="$n" -v s="$secs" -v r="$rss" -v c="$check" \
    'BEGIN { printf "%10d %10.1f %10.0f %12.1f %s\n", n, s, n / s, r / 1024, c }'
done
