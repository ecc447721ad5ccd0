#!/usr/bin/env bash
# `nmt score -tok zh | ja-mecab | flores101 | flores200` against what
# sacreBLEU 2.6.0 printed for the same files (tests/fixtures/sacrebleu-tok,
# README.md there): corpus text and JSON, -lc, BLEU with chrF, sentence
# level, to the printed digit; and hostile input (ill-formed UTF-8, a short
# hypothesis file, ko-mecab, flores without its model). The inputs (corpus
# text and a SentencePiece model trained on it) are made from DATA_DIR by
# make_inputs.py there, into WORK_DIR/in; what sacreBLEU printed is committed.
# Usage: cli_score_tok.sh NMT DATA_DIR WORK_DIR
set -uo pipefail
NMT=$1 DATA=$2 WORK=$3
FIX=$(cd "$(dirname "$0")" && pwd)/fixtures/sacrebleu-tok
IN=$WORK/in
rm -rf "$WORK" && mkdir -p "$IN"
fail() { echo "FAIL: $*" >&2; exit 1; }
python3 "$FIX/make_inputs.py" "$DATA" "$IN" || fail "make_inputs.py $DATA $IN"
same() {  # same EXPECTED_FILE NAME -- NMT ARGS...
  local want=$1 name=$2; shift 3
  "$NMT" score "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" || { cat "$WORK/$name.err"; fail "$name: exit $?"; }
  diff -u "$want" "$WORK/$name.out" >"$WORK/$name.diff" || { head -20 "$WORK/$name.diff"; fail "$name differs from sacreBLEU"; }
}
expect_error() {  # expect_error RC MESSAGE_REGEX -- NMT ARGS...
  local rc=$1 re=$2; shift 3
  "$NMT" score "$@" >"$WORK/e.out" 2>"$WORK/e.err"; local got=$?
  [ "$got" -eq "$rc" ] || { cat "$WORK/e.err"; fail "score $*: exit $got, expected $rc"; }
  [ "$(wc -l <"$WORK/e.err")" -eq 1 ] || { cat "$WORK/e.err"; fail "score $*: expected one line on stderr"; }
  grep -qE -e "$re" "$WORK/e.err" || { cat "$WORK/e.err"; fail "score $*: message does not match $re"; }
  [ ! -s "$WORK/e.out" ] || fail "score $*: printed a score"
}

check_all() {  # check_all NAME TOK [SENTENCE] [EXTRA ARGS...]
  local n=$1 t=$2 sl=$3; shift 3
  local f=$FIX/$n i=$IN/$n
  same "$f.$t.txt" "$n.$t.txt" -- "$i.ref" -i "$i.hyp" -tok "$t" -w 1 -f text "$@"
  same "$f.$t.json" "$n.$t.json" -- "$i.ref" -i "$i.hyp" -tok "$t" -w 1 -f json "$@"
  same "$f.$t.lc.txt" "$n.$t.lc" -- "$i.ref" -i "$i.hyp" -tok "$t" -lc -w 2 -f text "$@"
  same "$f.$t.bleu-chrf.json" "$n.$t.bleu-chrf" -- "$i.ref" -i "$i.hyp" -tok "$t" --metrics bleu chrf -w 1 -f json "$@"
  [ "$sl" = sl ] && same "$f.$t.sl.txt" "$n.$t.sl" -- "$i.ref" -i "$i.hyp" -tok "$t" -sl -w 1 -f text "$@"
  return 0
}

check_all zh zh sl
check_all ja ja-mecab sl
check_all spm flores101 - --spm-model "$IN/spm.model"
check_all spm flores200 sl --spm-model "$IN/spm.model"
for t in spm spBLEU-1K; do
  same "$FIX/spm.$t.txt" "spm.$t.txt" -- "$IN/spm.ref" -i "$IN/spm.hyp" -tok $t -w 1 -f text --spm-model "$IN/spm.model"
  same "$FIX/spm.$t.json" "spm.$t.json" -- "$IN/spm.ref" -i "$IN/spm.hyp" -tok $t -w 1 -f json --spm-model "$IN/spm.model"
done
grep -q "^nmt: warning: -tok spm is sacreBLEU's old name for flores101" "$WORK/spm.spm.txt.err" \
  || fail "-tok spm: no warning"

# Ill-formed UTF-8 (sacreBLEU stops with a UnicodeDecodeError): replaced with
# U+FFFD and said so by line, then scored as sacreBLEU scores that text.
same "$FIX/zh.zh.badutf8.txt" badutf8 -- "$IN/zh.ref" -i "$IN/zh.badutf8.hyp" -tok zh -w 1 -f text
for l in 4 5 6; do
  grep -q "zh.badutf8.hyp line $l: invalid UTF-8 replaced with U+FFFD" "$WORK/badutf8.err" \
    || { cat "$WORK/badutf8.err"; fail "no UTF-8 warning for line $l"; }
done

# A NUL byte inside a line, as sacreBLEU reads it (MeCab stops at it).
same "$FIX/nul.ja-mecab.txt" nul.ja -- "$IN/nul.ref" -i "$IN/nul.hyp" -tok ja-mecab -w 1
same "$FIX/nul.flores200.txt" nul.spm -- "$IN/nul.ref" -i "$IN/nul.hyp" -tok flores200 -w 1 --spm-model "$IN/spm.model"

# A hypothesis file one line short, as sacreBLEU refuses it (exit 1).
for t in zh ja-mecab; do
  expect_error 1 "^nmt: error: score: $IN/zh.short.hyp has 299 lines but reference $IN/zh.ref has 300$" \
    -- "$IN/zh.ref" -i "$IN/zh.short.hyp" -tok $t
done
expect_error 1 "^nmt: error: score: $IN/zh.short.hyp has 299 lines but reference $IN/zh.ref has 300$" \
  -- "$IN/zh.ref" -i "$IN/zh.short.hyp" -tok flores200 --spm-model "$IN/spm.model"

# ko-mecab cannot be had from Debian: one line, exit 1, no numbers.
expect_error 1 "^nmt: error: -tok ko-mecab needs mecab-ko and its dictionary mecab-ko-dic, which are not in Debian" \
  -- "$IN/zh.ref" -i "$IN/zh.hyp" -tok ko-mecab
# flores without its model, or a model that is not one.
expect_error 2 "^nmt score: error: score: -tok flores200 needs --spm-model FILE: the FLORES-200 SentencePiece model \(sacreBLEU downloads it as ~/.sacrebleu/models/flores200sacrebleuspm" \
  -- "$IN/spm.ref" -i "$IN/spm.hyp" -tok flores200
expect_error 2 "^nmt score: error: score: -tok flores101 needs --spm-model FILE: the FLORES-101 SentencePiece model" \
  -- "$IN/spm.ref" -i "$IN/spm.hyp" -tok flores101
expect_error 2 "^nmt score: error: score: -tok spBLEU-1K needs --spm-model FILE: the spBLEU-1K SentencePiece model" \
  -- "$IN/spm.ref" -i "$IN/spm.hyp" -tok spBLEU-1K
expect_error 1 "^nmt: error: --spm-model $WORK/none.model: No such file or directory$" \
  -- "$IN/spm.ref" -i "$IN/spm.hyp" -tok flores200 --spm-model "$WORK/none.model"
expect_error 1 "^nmt: error: --spm-model $IN/zh.ref: not a SentencePiece model" \
  -- "$IN/spm.ref" -i "$IN/spm.hyp" -tok flores200 --spm-model "$IN/zh.ref"
expect_error 2 "^nmt score: error: score: --spm-model applies to -tok flores101, flores200, spm and spBLEU-1K, not -tok 13a" \
  -- "$IN/spm.ref" -i "$IN/spm.hyp" --spm-model "$IN/spm.model"
# chrF takes no tokeniser: as in sacreBLEU, -tok does not change it.
"$NMT" score "$IN/zh.ref" -i "$IN/zh.hyp" --metrics chrf -tok ko-mecab -w 1 >"$WORK/chrf-ko.out" \
  || fail "chrF with -tok ko-mecab"
"$NMT" score "$IN/zh.ref" -i "$IN/zh.hyp" --metrics chrf -w 1 | cmp -s - "$WORK/chrf-ko.out" \
  || fail "-tok changed chrF"
# No IPA dictionary: one line, exit 1. Shown in a private mount namespace
# (root only), with an empty directory over Debian's dictionary.
mkdir -p "$WORK/nodic"
if unshare -m true 2>/dev/null; then
  unshare -m bash -c 'mount --bind "$1" /var/lib/mecab/dic/ipadic-utf8 && shift && "$@"' _ "$WORK/nodic" \
    "$NMT" score "$IN/ja.ref" -i "$IN/ja.hyp" -tok ja-mecab >"$WORK/nodic.out" 2>"$WORK/nodic.err"
  rc=$?
  [ "$rc" -eq 1 ] && [ "$(wc -l <"$WORK/nodic.err")" -eq 1 ] && [ ! -s "$WORK/nodic.out" ] &&
    grep -q "^nmt: error: -tok ja-mecab needs MeCab's IPA dictionary in /var/lib/mecab/dic/ipadic-utf8 (Debian package mecab-ipadic-utf8)" "$WORK/nodic.err" \
    || { cat "$WORK/nodic.err"; fail "no dictionary: exit $rc"; }
else
  echo "cli_score_tok: skipped the missing-dictionary check (needs unshare -m, i.e. root)"
fi
"$NMT" score --help | grep -q "392,127" || fail "--help does not say which IPA dictionary"
echo "cli_score_tok: all passed"
