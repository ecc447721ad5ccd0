#!/usr/bin/env bash
# Paired bootstrap resampling, 1000 resamples, 3000 sentences, 2 systems:
# nmt score beside sacreBLEU 2.6.0 on the same files, and the p-values of
# both. Outside ctest. The reference is the first 3000 lines of
# newstest2014-deen.de; the two "systems" are that reference with every 7th
# and every 5th word dropped (awk, deterministic), so both tools score
# realistic German.
# Usage: SACREBLEU=CMD bench/score_significance.sh NMT [DATA_DIR], CMD a
# sacreBLEU 2.6.0 set up as tests/fixtures/sacrebleu-sig/README.md describes
# (optional); DATA_DIR defaults to ../shared/data beside the checkout.
set -euo pipefail
NMT=${1:?usage: SACREBLEU=CMD $0 NMT [DATA_DIR]}
# Absolute, since the cases run in a scratch folder.
NMT=$(realpath "$NMT")
DATA=$(realpath "${2:-$(dirname "$0")/../../shared/data}")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
head -3000 "$DATA/wmt14-newstest2014/newstest2014-deen.de" >"$WORK/ref.de"
drop() { awk -v k="$1" '{o=""; for (i=1;i<=NF;i++) if (i%k) o=o (o==""?"":" ") $i; print o}' "$WORK/ref.de"; }
drop 7 >"$WORK/a.de"
drop 5 >"$WORK/b.de"
cd "$WORK"
seconds() { local t0 t1; t0=$(date +%s.%N); "$@" >"$WORK/last.json" 2>/dev/null; t1=$(date +%s.%N); echo "$t1 - $t0" | bc; }
p_values() { grep -o '"p_value": [0-9][0-9.e-]*' "$WORK/last.json" | sed 's/"p_value": //' | tr '\n' ' '; }

# Each case: nmt, then sacreBLEU on the same command line (-m is --metrics in nmt).
run_case() {
  local label=$1; shift
  local nargs=("$@") sargs=()
  for a in "$@"; do [[ $a == --metrics ]] && sargs+=(-m) || sargs+=("$a"); done
  printf '%-36s nmt %6.2f s  p = %s\n' "$label" "$(seconds "$NMT" score "${nargs[@]}")" "$(p_values)"
  cp "$WORK/last.json" "$WORK/nmt.json"
  if [[ -n "${SACREBLEU:-}" ]]; then
    # shellcheck disable=SC2086
    printf '%-36s sacreBLEU %6.2f s  p = %s' "" "$(seconds $SACREBLEU "${sargs[@]}")" "$(p_values)"
    cmp -s "$WORK/last.json" "$WORK/nmt.json" && echo "  (identical JSON)" || echo "  (JSON differs)"
  fi
}
echo "paired bootstrap, 3000 sentences (newstest2014 de), 2 systems; wall time on $(nproc) cores"
run_case "BLEU, 1000 resamples" ref.de -i a.de b.de --paired-bs -f json
run_case "BLEU, 1 resample (scoring alone)" ref.de -i a.de b.de --paired-bs -pbsn 1 -f json
run_case "BLEU+chrF, 1000 resamples" ref.de -i a.de b.de --paired-bs --metrics bleu chrf -f json
run_case "BLEU+chrF, 1 resample" ref.de -i a.de b.de --paired-bs -pbsn 1 --metrics bleu chrf -f json
[[ -n "${SACREBLEU:-}" ]] || echo "(set SACREBLEU to the sacreBLEU command to time it beside nmt)"
