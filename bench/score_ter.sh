#!/usr/bin/env bash
# TER speed beside sacreBLEU's, on the same files, in one run: newstest2014
# en-de (3,003 lines; the hypothesis is the reference perturbed with
# tests/fixtures/sacrebleu-ter/perturb.py, seed 1: shifted blocks, swaps,
# drops, insertions, case and punctuation) and newstest2021 en-de (1,002
# lines; human reference A scored against reference C, a real second
# translation). Wall-clock seconds, best of RUNS, and both scores, which must
# agree.
#
#   SACREBLEU=/path/to/sacrebleu bench/score_ter.sh [NMT]
# Environment: SACREBLEU, the sacreBLEU command (a sacreBLEU 2.6.0 set up as
# tests/fixtures/sacrebleu-ter/README.md describes; not part of this repo;
# without it only nmt is timed); RUNS (default 3); DATA (default
# ../shared/data); EXTRA, more arguments for both (e.g. --ter-normalized).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
NMT=${1:-$root/build/nmt}
DATA=${DATA:-$root/../shared/data}
RUNS=${RUNS:-3}
EXTRA=${EXTRA:-}
SACREBLEU=${SACREBLEU:-}
[ -x "$NMT" ] || { echo "score_ter: build first ($NMT is missing)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

nt14=$DATA/wmt14-newstest2014/newstest2014-deen.de
python3 "$root/tests/fixtures/sacrebleu-ter/perturb.py" 1 <"$nt14" >"$tmp/nt14.hyp"
nt21=$DATA/newstest2021

best_time() {  # command...: prints "SECONDS OUTPUT" of the fastest of RUNS runs
  local best="" out t0 t1 t
  for _ in $(seq "$RUNS"); do
    t0=$(date +%s.%N)
    out=$("$@" 2>/dev/null)
    t1=$(date +%s.%N)
    t=$(echo "$t1 - $t0" | bc)
    if [ -z "$best" ] || [ "$(echo "$t < $best" | bc)" -eq 1 ]; then best=$t; fi
  done
  printf '%.3f %s\n' "$best" "$out"
}

printf "%-34s %7s %10s %10s %8s  %s\n" "test set" lines "nmt s" "sacrebleu s" speedup "TER (nmt / sacrebleu)"
run_pair() {  # label, hypothesis, reference
  local label=$1 hyp=$2 ref=$3 lines nt st ns ss
  lines=$(wc -l <"$hyp")
  # shellcheck disable=SC2086  # EXTRA is a word list
  read -r nt ns < <(best_time "$NMT" score "$ref" -i "$hyp" --metrics ter -b -w 4 $EXTRA)
  if [ -n "$SACREBLEU" ]; then
    # shellcheck disable=SC2086
    read -r st ss < <(best_time $SACREBLEU "$ref" -i "$hyp" -m ter -b -w 4 $EXTRA)
    [ "$ns" = "$ss" ] || echo "score_ter: $label: nmt says $ns, sacreBLEU $ss" >&2
    printf "%-34s %7d %10s %10s %7.1fx  %s / %s\n" "$label" "$lines" "$nt" "$st" \
      "$(echo "$st / $nt" | bc -l)" "$ns" "$ss"
  else
    printf "%-34s %7d %10s %10s %8s  %s\n" "$label" "$lines" "$nt" "-" "-" "$ns"
  fi
}
run_pair "newstest2014 de (perturbed ref)" "$tmp/nt14.hyp" "$nt14"
run_pair "newstest2021 de (ref A vs ref C)" "$nt21/newstest2021.en-de.ref.A.de" "$nt21/newstest2021.en-de.ref.C.de"
[ -n "$SACREBLEU" ] || echo "(SACREBLEU unset: sacreBLEU not timed)"
