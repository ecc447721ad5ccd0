#!/usr/bin/env bash
# nmt score against what sacreBLEU 2.6.0 printed for TER (alone and with
# BLEU and chrF): every case of tests/fixtures/sacrebleu-ter/cases.txt is
# run through the binary and compared byte for byte with expected/NAME.out;
# then the inputs sacreBLEU refuses.  The inputs are made first, into
# WORK_DIR/inputs, from DATA_DIR (../shared/data) by make_inputs.py, and the
# cases run there.  Usage: cli_score_ter.sh NMT DATA_DIR WORK_DIR
set -uo pipefail
NMT=$1 DATA=$2 WORK=$3
FIX=$(cd "$(dirname "$0")/fixtures/sacrebleu-ter" && pwd)
IN=$WORK/inputs
rm -rf "$WORK" && mkdir -p "$WORK"
fail() { echo "FAIL: $*" >&2; exit 1; }
python3 "$FIX/make_inputs.py" "$DATA" "$IN" || fail "make_inputs.py $DATA $IN"

n=0
while IFS=$'\t' read -r name args nmt_args; do
  case "$name" in ''|'#'*) continue ;; esac
  if [ -z "$nmt_args" ]; then
    nmt_args=${args/ -m / --metrics }
    [[ " $args " == *" -f "* ]] || nmt_args+=" -f json"
    [[ " $args " == *" -w "* ]] || nmt_args+=" -w 1"
  fi
  # shellcheck disable=SC2086  # the arguments are word lists
  (cd "$IN" && "$NMT" score $nmt_args) >"$WORK/$name.out" 2>"$WORK/$name.err" \
    || fail "$name: nmt score $nmt_args: $(cat "$WORK/$name.err")"
  cmp -s "$WORK/$name.out" "$FIX/expected/$name.out" \
    || fail "$name: nmt score $nmt_args differs from sacrebleu $args:
$(diff "$WORK/$name.out" "$FIX/expected/$name.out" | head -5)"
  n=$((n + 1))
done <"$FIX/cases.txt"
[ "$n" -ge 40 ] || fail "only $n cases ran"
grep -q "^nmt: warning: hostile-bad.hyp line 19: invalid UTF-8 replaced with U+FFFD$" \
  "$WORK/hostile-bad-utf8.err" || fail "bad UTF-8: no warning by line: $(cat "$WORK/hostile-bad-utf8.err")"

expect_error() {  # exit status, pattern, command...
  local want=$1 pat=$2; shift 2
  "$@" </dev/null >/dev/null 2>"$WORK/err.txt"
  local rc=$?
  [ "$rc" -eq "$want" ] || fail "$*: exit $rc, expected $want"
  [ "$(wc -l <"$WORK/err.txt")" -eq 1 ] || fail "$*: expected one line, got: $(cat "$WORK/err.txt")"
  grep -q -- "$pat" "$WORK/err.txt" || fail "$*: expected '$pat', got: $(cat "$WORK/err.txt")"
}
head -5 "$IN/m30k.hyp" >"$WORK/five.hyp"
expect_error 1 "^nmt: error: score: $WORK/five.hyp has 5 lines but reference $IN/m30k.ref has 400$" \
  "$NMT" score "$IN/m30k.ref" -i "$WORK/five.hyp" --metrics ter
expect_error 2 "^nmt score: error: score: sacreBLEU 2.6.0 has no -ti (it would read -t i); case-sensitive TER is --ter-case-sensitive (see nmt score --help)$" \
  "$NMT" score "$IN/m30k.ref" -i "$IN/m30k.hyp" --metrics ter -ti
expect_error 2 "^nmt score: error: score: only one metric can be used with --sentence-level" \
  "$NMT" score "$IN/m30k.ref" -i "$IN/m30k.hyp" --metrics bleu ter -sl
# An empty system: sacreBLEU says "Test set None contains no sentence" and exits 1.
: >"$WORK/empty.hyp"
: >"$WORK/empty.ref"
expect_error 1 "^nmt: error: score: $WORK/empty.hyp has no lines: nothing to score$" \
  "$NMT" score "$WORK/empty.ref" -i "$WORK/empty.hyp" --metrics ter
# A document-length segment costs its band of the edit-distance table, not
# the whole table: 10,000 words took 890 MB that way (30,000 words 8 GB).
python3 - "$WORK" <<'PY'
import random, sys
r = random.Random(1); vocab = ['w%d' % i for i in range(3000)]
ref = [r.choice(vocab) for _ in range(10000)]
hyp = [w if r.random() > 0.1 else r.choice(vocab) for w in ref]
open(sys.argv[1] + '/long.ref', 'w').write(' '.join(ref) + '\n')
open(sys.argv[1] + '/long.hyp', 'w').write(' '.join(hyp) + '\n')
PY
source "$(cd "$(dirname "$0")" && pwd)/cli_common.sh"
peak=$(peak_kb "$WORK/long.out" "$NMT" score "$WORK/long.ref" -i "$WORK/long.hyp" --metrics ter -b -w 4)
[ "$peak" -ge 0 ] || fail "a 10,000-word segment: nmt score failed"
[ "$(cat "$WORK/long.out")" = 9.7300 ] || fail "a 10,000-word segment: TER $(cat "$WORK/long.out"), expected 9.7300"
asan_build "$NMT" || [ "$peak" -lt 200000 ] || fail "a 10,000-word segment took $peak KB"
echo "cli_score_ter: $n sacreBLEU cases identical"
