#!/usr/bin/env bash
# nmt score's memory follows the text, not the text times an option: chrF
# at its highest orders on one long line, and on many lines of several
# systems. (TER's long segments are checked in cli_score_ter.sh, resampling
# counts in cli_score_sig.sh.)
# Usage: cli_score_limits.sh NMT DATA_DIR WORK_DIR
set -uo pipefail
NMT=$1 WORK=$3
rm -rf "$WORK" && mkdir -p "$WORK"
fail() { echo "FAIL: $*" >&2; exit 1; }
source "$(cd "$(dirname "$0")" && pwd)/cli_common.sh"
asan=0
asan_build "$NMT" && asan=1
python3 - "$WORK" <<'PY'
import random, sys
r = random.Random(3); vocab = ['w%d' % i for i in range(5000)]
ref = [r.choice(vocab) for _ in range(4000)]
hyp = [w if r.random() > 0.1 else r.choice(vocab) for w in ref]
open(sys.argv[1] + '/long.ref', 'w').write(' '.join(ref) + '\n')
open(sys.argv[1] + '/long.hyp', 'w').write(' '.join(hyp) + '\n')
r = random.Random(4); vocab = vocab[:500]
ref = [' '.join(r.choice(vocab) for _ in range(5)) for _ in range(10000)]
open(sys.argv[1] + '/many.ref', 'w').write('\n'.join(ref) + '\n')
for k in (1, 2):
    sys_k = [' '.join(w if r.random() > 0.2 else r.choice(vocab) for w in l.split()) for l in ref]
    open(sys.argv[1] + '/many.%d' % k, 'w').write('\n'.join(sys_k) + '\n')
PY
# chrF counts one order at a time: 200 orders of a 23 KB line held 110 MB
# when every order's counts were kept at once (a 1 MB line: 5 GB).
kb=$(peak_kb "$WORK/chrf.out" "$NMT" score "$WORK/long.ref" -i "$WORK/long.hyp" --metrics chrf \
  --chrf-char-order 100 --chrf-word-order 100 -b -w 4)
[ "$kb" -ge 0 ] || fail "chrF at orders 100 and 100 failed"
[ "$(cat "$WORK/chrf.out")" = 22.5525 ] || fail "chrF at orders 100 and 100: $(cat "$WORK/chrf.out"), expected 22.5525"
[ $asan = 1 ] || [ "$kb" -lt 50000 ] || fail "chrF at orders 100 and 100 of a 23 KB line took $kb KB"
# The table of several systems keeps each system's corpus statistics, not a
# row per line as wide as the orders (600 numbers): 10,000 lines of two
# systems took 107 MB that way.
kb=$(peak_kb "$WORK/many.out" "$NMT" score "$WORK/many.ref" -i "$WORK/many.1" "$WORK/many.2" \
  --metrics chrf --chrf-char-order 100 --chrf-word-order 100 -f json -w 4)
[ "$kb" -ge 0 ] || fail "two systems' chrF at orders 100 and 100 failed"
grep -q '"chrF2+.*": "[0-9]' "$WORK/many.out" || fail "two systems' chrF: $(cat "$WORK/many.out")"
[ $asan = 1 ] || [ "$kb" -lt 50000 ] || fail "two systems' chrF at orders 100 and 100 of 10,000 lines took $kb KB"

# score -m: --batch-tokens (up to 2^24) could ask for more than the process
# may use; a batch that could not fit is refused before any work, naming the
# option. A model of 50,000 tokens takes 0.4 MB of logits a target token:
# under a 1 GB ulimit, batches of 4000 tokens cannot fit, and 300 pairs of
# 10 tokens make them that large.
HERE=$(cd "$(dirname "$0")" && pwd)
python3 "$HERE/hostile_models.py" ct2 "$WORK/wide" V=50000 || fail "hostile_models.py"
"$NMT" convert "$WORK/wide" -o "$WORK/wide.nmt" 2>"$WORK/wide.err" || fail "convert: $(cat "$WORK/wide.err")"
python3 -c "
for i in range(300): print(' '.join('w%d' % ((i * 7 + k) % 900 + 3) for k in range(10)))" >"$WORK/pairs.txt"
if [ $asan = 1 ]; then
  echo "cli_score_limits: skipped --batch-tokens under ulimit -v (an AddressSanitizer build)" >&2
  exit 0
fi
(ulimit -v 1000000; "$NMT" score -m "$WORK/wide.nmt" --src "$WORK/pairs.txt" --tgt "$WORK/pairs.txt" \
  --batch-tokens 1000000 --threads 1) >/dev/null 2>"$WORK/bt.err"
rc=$?
[ "$rc" -eq 2 ] || fail "score -m --batch-tokens 1000000 under 1 GB: exit $rc, expected 2 ($(cat "$WORK/bt.err"))"
grep -qF -- "--batch-tokens 1000000: a batch of 3300 padded tokens would need at least" "$WORK/bt.err" ||
  fail "score -m --batch-tokens: $(cat "$WORK/bt.err")"
(ulimit -v 1000000; "$NMT" score -m "$WORK/wide.nmt" --src "$WORK/pairs.txt" --tgt "$WORK/pairs.txt" \
  --batch-tokens 500 --threads 1) >/dev/null 2>"$WORK/bt.err" || fail "score -m --batch-tokens 500: $(cat "$WORK/bt.err")"
echo "cli_score_limits: all passed"
