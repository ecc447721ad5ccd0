#!/usr/bin/env bash
# What the vocabulary shortlist buys and what it costs, side by side in one
# run on this machine: sentences/s of the engine (bench_translate --real,
# the 2nd and 3rd warm passes) and of the whole process (nmt translate of
# test_2016_flickr, load and SentencePiece included, best of REPEAT), BLEU
# on test_2016_flickr and val, and peak memory, with the shortlist and
# without, each compute type measured off then on before the next.
#
#   bench/shortlist.sh MODEL     # a model holding a shortlist: nmt train
#                                # stores one, nmt shortlist adds one
# Environment: TYPES (default "f32 int8 bf16"), REPEAT (default 3), DATA.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
MODEL=${1:?usage: bench/shortlist.sh MODEL}
NMT=${NMT:-$root/build/nmt}
BENCH=${BENCH:-$root/build/bench/bench_translate}
TYPES=${TYPES:-f32 int8 bf16}
REPEAT=${REPEAT:-3}
data=${DATA:-$root/../shared/data}/multi30k
[ -x "$BENCH" ] || { echo "shortlist.sh: build first ($BENCH is missing)" >&2; exit 1; }
"$NMT" info "$MODEL" >/dev/null || exit 1
"$NMT" info "$MODEL" | grep -q '^shortlist' ||
  { echo "shortlist.sh: $MODEL holds no shortlist (nmt shortlist adds one)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
zcat "$data/test_2016_flickr.en.gz" >"$tmp/test.en"
zcat "$data/test_2016_flickr.de.gz" >"$tmp/test.de"
n=$(wc -l <"$tmp/test.en")

"$NMT" info "$MODEL" | grep '^shortlist'
echo "beam 4, test_2016_flickr ($n lines) and val; engine: sent/s of warm passes 2 and 3"
printf "%-6s %-4s %9s %9s %12s %10s %10s %10s\n" type list engine engine "process s/s" "BLEU test" "BLEU val" "peak MiB"
for t in $TYPES; do
  if ! echo a | "$NMT" translate -m "$MODEL" --compute-type "$t" >/dev/null 2>"$tmp/err"; then
    printf "%-6s skipped: %s\n" "$t" "$(head -1 "$tmp/err")"
    continue
  fi
  for sl in off on; do
    "$BENCH" --real "$MODEL" --compute-type "$t" --repeat 3 --shortlist "$sl" >"$tmp/e.txt" 2>&1
    "$BENCH" --real "$MODEL" --compute-type "$t" --repeat 1 --shortlist "$sl" \
      --src "$data/val.en.gz" --ref "$data/val.de.gz" >"$tmp/v.txt" 2>&1
    best=0
    for _ in $(seq "$REPEAT"); do
      s=$(date +%s.%N)
      "$NMT" translate -m "$MODEL" --compute-type "$t" --beam 4 --shortlist "$sl" -i "$tmp/test.en" \
        -o "$tmp/hyp" 2>/dev/null
      e=$(date +%s.%N)
      best=$(python3 -c "print(max($best, $n / ($e - $s)))")
    done
    runs=$(awk '$1 ~ /^[0-9]+$/ && NF == 5' "$tmp/e.txt")
    printf "%-6s %-4s %9s %9s %12.1f %10s %10s %10s\n" "$t" "$sl" \
      "$(echo "$runs" | awk 'NR == 2 {print $2}')" "$(echo "$runs" | awk 'NR == 3 {print $2}')" \
      "$best" "$(echo "$runs" | awk 'NR == 3 {print $5}')" \
      "$(awk '$1 ~ /^[0-9]+$/ && NF == 5 {print $5}' "$tmp/v.txt")" \
      "$(awk '/^peak memory/ {print $3}' "$tmp/e.txt")"
  done
done
grep -m1 '^real text' "$tmp/e.txt" | sed 's/^real text: /setup: /' || true
