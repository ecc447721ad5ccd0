#!/usr/bin/env bash
# What a user types, and what a hostile user types: outputs never destroy
# inputs, familiar command lines work or fail with the nmt spelling, usage
# errors exit 2 with a suggestion, numbers are range-checked, deep JSON is
# refused, and a model says what it is.
# Usage: cli_safety.sh NMT DATA_DIR WORK_DIR
set -uo pipefail
NMT=$1 DATA=$2 WORK=$3
rm -rf "$WORK" && mkdir -p "$WORK"
cd "$WORK" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }
toy=$DATA/joeynmt-toy

. "$(dirname "$0")/cli_common.sh"
train_toy_model "$NMT" "$DATA"


# 1. Outputs never destroy inputs.
printf 'A man is riding a bike.\nTwo dogs play.\n' >in.en
cp in.en keep.en
expect 2 "^nmt translate: error: -o in.en is the -i file in.en; refusing to overwrite it" "$NMT" translate -m m.nmt -i in.en -o in.en
cmp -s in.en keep.en || fail "-o = -i changed the input"
expect 2 "-o ./in.en is the -i file in.en" "$NMT" translate -m m.nmt -i in.en -o ./in.en
ln -sf in.en link.en
expect 2 "-o in.en is the -i file link.en" "$NMT" translate -m m.nmt -i link.en -o in.en
"$NMT" translate -m m.nmt -o in.en <in.en >/dev/null 2>err.txt && fail "-o = stdin file accepted"
grep -q -- "-o in.en is standard input" err.txt || fail "-o = stdin: $(cat err.txt)"
cmp -s in.en keep.en || fail "-o = stdin changed the input"
expect 2 "-o m.nmt is the -m file m.nmt" "$NMT" translate -m m.nmt -i in.en -o m.nmt
mkdir -p a b
cp in.en a/x.en; printf 'One.\nTwo.\nThree.\nFour.\n' >b/x.en
gzip -c in.en >a/y.en.gz; cp in.en a/y.en
"$NMT" translate -m m.nmt -i a/x.en a/y.en.gz --output-dir a 2>/dev/null || fail "--output-dir onto the inputs' folder"
cmp -s a/x.en in.en && cmp -s a/y.en in.en || fail "--output-dir overwrote an input"
[ "$(wc -l <a/x.en.hyp)" -eq 2 ] && [ "$(wc -l <a/y.en.hyp)" -eq 2 ] || fail "--output-dir names: $(ls a)"
expect 2 "error: inputs a/x.en and b/x.en would both be written to o/x.en.hyp;" \
  "$NMT" translate -m m.nmt -i a/x.en b/x.en --output-dir o
[ ! -e o ] || fail "a refused run created its output folder"
"$NMT" translate -m m.nmt -i a/x.en a/y.en.gz --output-dir new/deep --suffix de 2>/dev/null \
  || fail "--output-dir that does not exist"
[ -s new/deep/x.de ] && [ -s new/deep/y.de ] || fail "--suffix naming: $(ls new/deep)"
expect 2 "error: inputs a/y.en and a/y.en.gz would both be written to o2/y.en.hyp;" \
  "$NMT" translate -m m.nmt -i a/y.en a/y.en.gz --output-dir o2
# A failed run leaves no half file under the final name (nor a temp file).
printf 'x\n' >trunc.nmt
expect 1 "^nmt: error: trunc.nmt: not a valid model file: file is only 2 bytes (truncated?)$" \
  "$NMT" translate -m trunc.nmt -i in.en -o fresh.de
[ ! -e fresh.de ] || fail "a failed translation left fresh.de"
[ -z "$(ls -A | grep '\.tmp\.')" ] || fail "temp files left: $(ls -A | grep '\.tmp\.')"

# 2. Command lines people already know.
head -5 "$toy/dev.de" >ref.de; head -5 "$toy/dev.de" | sed 's/ein/eine/' >hyp.de
gold=$("$NMT" score ref.de -i hyp.de -f text) || fail "score ref -i hyp"
[ "$("$NMT" score ref.de -f text <hyp.de)" = "$gold" ] || fail "score ref < hyp"
[[ "$gold" == "BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0 = "* ]] || fail "one-line text: $gold"
"$NMT" score -r ref.de ref.de <hyp.de >/dev/null 2>err.txt && fail "-r a b accepted"
grep -q "either with -r or as arguments" err.txt || fail "-r a b: $(cat err.txt)"
"$NMT" score ref.de ref.de -tok intl -lc -f json -w 3 <hyp.de >out.json || fail "sacrebleu flags"
grep -q '"tok": "intl"' out.json && grep -q '"case": "lc"' out.json && grep -q '"nrefs": "2"' out.json \
  || fail "sacrebleu json: $(cat out.json)"
"$NMT" score ref.de --metrics bleu chrf -i hyp.de -f text >two.txt || fail "--metrics bleu chrf"
[ "$(wc -l <two.txt)" -eq 2 ] && grep -q '^ *chrF2|' two.txt || fail "two metrics: $(cat two.txt)"
[ "$("$NMT" score ref.de -i hyp.de -b -w 1)" = "$(printf '%.1f' "$("$NMT" score ref.de -i hyp.de -b -w 4)")" ] \
  || fail "-b -w"
expect 2 "for sacreBLEU's -m bleu write --metrics bleu" "$NMT" score -m bleu ref.de -i hyp.de
expect 2 "did you mean translate" "$NMT" tranlsate -m m.nmt
expect 2 "did you mean --beam" "$NMT" translate -m m.nmt --beam-size 4
expect 2 "unexpected arguments: t.hyp -lc -tok" "$NMT" translate -m m.nmt t.hyp -lc -tok
"$NMT" >usage.txt 2>&1; [ $? -eq 0 ] && grep -q "Subcommands:" usage.txt || fail "bare nmt"
for cmd in train translate score; do
  "$NMT" $cmd --help | grep -q -- "--threads INT:INT in \[0 - 1024\]=0" || fail "$cmd --help: threads default"
done
"$NMT" train --help | grep -q -- "--batch-tokens INT:INT >= 2=recipe, or 4096" || fail "train --help: defaults"
cat >typo.json <<'JSON'
{"encoder_layer": 2, "decoder_layers": 2, "d_model": 32, "d_ff": 64, "heads": 4,
 "dropout": 0.0, "label_smoothing": 0.1}
JSON
expect 1 'key "encoder_layer": unknown key (did you mean encoder_layers?)' "$NMT" summary -c typo.json
"$NMT" train -c transformer-tiny --train-src "$toy/train.en" --train-tgt "$toy/train.de" --out v.nmt \
  --vocab-size 20 --max-steps 1 2>err.txt && fail "a vocabulary smaller than the alphabet"
tail -1 err.txt | grep -q "^nmt: error: --vocab-size 20 is too small for this text.* use --vocab-size 90 or more" \
  || fail "SentencePiece error in nmt's words: $(cat err.txt)"

# Numbers are range-checked, NaN included.
for a in 1e300 nan -5; do
  expect 2 "error: --max-length-a: Value $a not in range \[0 - 100\]" "$NMT" translate -m m.nmt --max-length-a "$a"
done
expect 2 "error: --alpha: Value nan not in range \[0 - 10\]" "$NMT" translate -m m.nmt --alpha nan
expect 2 "error: --threads: Value -1 not in range 0 to 1024" "$NMT" translate -m m.nmt --threads -1
expect 2 "error: --lr-scale: expected a number > 0, got nan" \
  "$NMT" train -c transformer-tiny --train-src in.en --train-tgt in.en --out z.nmt --lr-scale nan

# Deep JSON: a clear error, never a stack overflow.
deep() { printf '{"name":"x","training":{"seed":'; head -c "$1" /dev/zero | tr '\0' '['; head -c "$1" /dev/zero | tr '\0' ']'; printf '}}'; }
deep 100000 >deep.json
expect 1 "nested deeper than 64" "$NMT" summary -c deep.json
expect 1 "nested deeper than 64" "$NMT" train -c deep.json --train-src in.en --train-tgt in.en --out d.nmt

# 3. Know what a model is.
"$NMT" info m.nmt >info.txt || fail "info"
grep -q "^parameters   52.4K (52352)" info.txt && grep -q "crc32 [0-9a-f]\{8\}" info.txt \
  && grep -q "^step         10" info.txt && grep -q "^trained on   .*train.en" info.txt \
  && grep -q '"batch_tokens":1024' info.txt && grep -q "SentencePiece pieces, e.g." info.txt \
  || fail "info: $(cat info.txt)"
"$NMT" --version | grep -q "^nmt .*(commit .*build)" || fail "--version: commit"
"$NMT" --version | grep -q "cpu: oneDNN" || fail "--version: backends"
"$NMT" summary -c m.nmt --batch 2 --length 5 >summary.txt || fail "summary MODEL"
grep -q "^parameters   52.4K" summary.txt && ! grep -q "0\.0M\| 0 tok" summary.txt || fail "summary units: $(cat summary.txt)"
# Scores say what they are: translate's and score -m's 'score' are both the
# log-probability over ((5 + tokens) / 6)^alpha, and lines count from 1.
printf 'Two dogs play.\nA man.\n' >two.en
gnmt_ok() {  # file with "logprob" "tokens" "score" fields, alpha
  awk -v alpha="$2" '{
    match($0, /"logprob":[-0-9.e]+/); lp = substr($0, RSTART + 10, RLENGTH - 10)
    match($0, /"tokens":[0-9]+/); n = substr($0, RSTART + 9, RLENGTH - 9)
    match($0, /"score":[-0-9.e]+/); sc = substr($0, RSTART + 8, RLENGTH - 8)
    want = lp / ((5 + n) / 6) ^ alpha; d = want - sc; if (d < 0) d = -d
    if (d > 1e-4 * (1 - want)) bad = 1 } END { exit bad }' "$1"
}
"$NMT" translate -m m.nmt -i two.en --beam 2 --alpha 0.8 --format jsonl >t.jsonl || fail "translate jsonl"
gnmt_ok t.jsonl 0.8 || fail "translate's score is not logprob / GNMT penalty: $(cat t.jsonl)"
head -1 t.jsonl | grep -q '"line":1,' || fail "translate jsonl counts from 1"
sed -n 's/.*"translation":"\([^"]*\)".*/\1/p' t.jsonl >two.hyp
"$NMT" score -m m.nmt --src two.en --tgt two.hyp --alpha 0.8 --output-format jsonl >s.jsonl || fail "score -m jsonl"
gnmt_ok s.jsonl 0.8 || fail "score -m's score is not logprob / GNMT penalty: $(cat s.jsonl)"
head -1 s.jsonl | grep -q '"line":1,' || fail "score -m jsonl counts from 1"
"$NMT" translate -m m.nmt -i two.en --scores | head -1 | grep -q '^-[0-9.]*	' || fail "--scores column"
"$NMT" translate -m m.nmt -i two.en --beam 2 --n-best 2 | head -1 | grep -q '^1 ||| ' || fail "n-best counts from 1"
# Braces in a path are the path's: only an option's key is written as its flag.
expect 1 "^nmt: error: -m no-such/{abc}/m.nmt: No such file or directory$" \
  "$NMT" translate -m "no-such/{abc}/m.nmt"
echo "cli safety: all checks passed"
