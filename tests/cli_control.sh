#!/usr/bin/env bash
# Translation control on the command line: tsv prefixes, jsonl constraints,
# alignments and attention matrices, heat-map pictures, and malformed lines
# that are warned about by number and leave an empty output line while the
# run goes on. Usage: cli_control.sh NMT DATA_DIR WORK_DIR
set -uo pipefail
NMT=$1 DATA=$2 WORK=$3
rm -rf "$WORK" && mkdir -p "$WORK"
fail() { echo "FAIL: $*" >&2; exit 1; }
toy=$DATA/joeynmt-toy
M=$WORK/m.nmt
# The model these checks translate with: its fixed options (--no-recipe) keep
# it a model whose translations are not empty.
"$NMT" train --no-recipe -c transformer-tiny --train-src "$toy/train.en" --train-tgt "$toy/train.de" \
  --out "$M" --vocab-size 300 --max-steps 15 --batch-tokens 1024 --seed 1 2>"$WORK/train.err" \
  || { cat "$WORK/train.err"; fail "train"; }
line() { sed -n "$1p" "$2"; }

# Target prefixes (tsv); a line without a TAB is skipped with a warning.
printf 'Hello world.\tDas ist\nno tab here\n\tnur Präfix\nThis is a test.\tEin\n' >"$WORK/in.tsv"
"$NMT" translate -m "$M" --input-format tsv -i "$WORK/in.tsv" >"$WORK/tsv.out" 2>"$WORK/tsv.err" ||
  fail "tsv translate"
[ "$(wc -l <"$WORK/tsv.out")" -eq 4 ] || fail "tsv: expected 4 lines"
line 1 "$WORK/tsv.out" | grep -q '^Das ist' || fail "tsv: line 1 does not start with its prefix"
line 4 "$WORK/tsv.out" | grep -q '^Ein' || fail "tsv: line 4 does not start with its prefix"
[ -z "$(line 2 "$WORK/tsv.out")" ] || fail "tsv: the line without a TAB is not empty"
grep -q '^nmt: warning: .*in.tsv line 2: no TAB' "$WORK/tsv.err" || fail "tsv: no warning naming line 2"
# Line 3 has a prefix but no source: its prefix cannot be used, and says so.
grep -q '^nmt: warning: .*in.tsv line 3: the source is empty, so its prefix is not used' "$WORK/tsv.err" ||
  fail "tsv: no warning naming line 3 (a prefix without a source)"
[ "$(grep -c warning "$WORK/tsv.err")" -eq 2 ] || fail "tsv: expected two warnings: $(cat "$WORK/tsv.err")"

# Constraints (jsonl), and each kind of bad line.
cat >"$WORK/in.jsonl" <<'JSON'
{"text": "Hello world.", "constraints": ["Katze", "grün"]}
{"text": "broken
{"text": "Hello.", "constraints": [3]}
{"text": "Hello.", "constraint": ["x"]}
["Hello"]
{"text": "Hello.", "constraints": ["☃"]}
{"text": "This is a test.", "prefix": "Ein", "constraints": ["Haus"]}

{"text": "Hello.", "constraints": [" "]}
JSON
"$NMT" translate -m "$M" --input-format jsonl -i "$WORK/in.jsonl" --beam 4 >"$WORK/j.out" 2>"$WORK/j.err" ||
  fail "jsonl translate"
[ "$(wc -l <"$WORK/j.out")" -eq 9 ] || fail "jsonl: expected 9 lines, got $(wc -l <"$WORK/j.out")"
for w in Katze grün; do line 1 "$WORK/j.out" | grep -qF "$w" || fail "jsonl: line 1 lacks constraint $w"; done
line 7 "$WORK/j.out" | grep -q '^Ein' || fail "jsonl: line 7 does not start with its prefix"
line 7 "$WORK/j.out" | grep -qF Haus || fail "jsonl: line 7 lacks its constraint"
for n in 2 3 4 5 6 8 9; do [ -z "$(line $n "$WORK/j.out")" ] || fail "jsonl: line $n is not empty"; done
grep -q 'line 2: the line: not valid JSON' "$WORK/j.err" || fail "jsonl: line 2 warning"
grep -q 'line 3: "constraints" must be a list of strings' "$WORK/j.err" || fail "jsonl: line 3 warning"
grep -q 'line 4: unknown key "constraint"' "$WORK/j.err" || fail "jsonl: line 4 warning"
grep -q 'line 5: expected a JSON object' "$WORK/j.err" || fail "jsonl: line 5 warning"
grep -q "line 6: constraint 1 \"☃\" has characters the model's vocabulary lacks" "$WORK/j.err" ||
  fail "jsonl: line 6 warning"
grep -q 'line 9: constraint 1 is empty' "$WORK/j.err" || fail "jsonl: line 9 warning"
[ "$(grep -c warning "$WORK/j.err")" -eq 6 ] || fail "jsonl: expected 6 warnings: $(cat "$WORK/j.err")"

# Alignments: Moses-style pairs after ' ||| ', one line per input line.
printf 'Hello world.\n\nThis is a test.\n' | "$NMT" translate -m "$M" --alignments >"$WORK/a.out" ||
  fail "--alignments"
[ "$(wc -l <"$WORK/a.out")" -eq 3 ] || fail "--alignments: expected 3 lines"
line 1 "$WORK/a.out" | grep -Eq ' \|\|\| ([0-9]+-[0-9]+( |$))+$' || fail "--alignments format: $(line 1 "$WORK/a.out")"
printf 'Hello world.\n' | "$NMT" translate -m "$M" --format jsonl --attention --alignments \
  --alignment-layer 1 >"$WORK/att.jsonl" || fail "--attention"
python3 - "$WORK/att.jsonl" <<'PY' || fail "--attention: the matrix does not match its pieces"
import json, sys
j = json.loads(open(sys.argv[1]).read())
a = j["attention"]
assert len(a["weights"]) == len(a["target"]) and a["target"][-1] == "</s>"
assert all(len(r) == len(a["source"]) for r in a["weights"])
assert all(abs(sum(r) - 1) < 1e-2 for r in a["weights"])
assert j["alignment"] != ""
PY
expect_usage() { "$@" </dev/null >/dev/null 2>"$WORK/u.err"; [ $? -eq 2 ] || fail "expected exit 2: $*"; }
expect_usage "$NMT" translate -m "$M" --attention
expect_usage "$NMT" translate -m "$M" --alignments --beam 4 --n-best 2
printf 'Hi.\n' | "$NMT" translate -m "$M" --alignments --alignment-layer 9 >/dev/null 2>"$WORK/l.err" &&
  fail "--alignment-layer 9 accepted"
grep -q 'alignment-layer 9: the decoder has layers 1..2' "$WORK/l.err" || fail "alignment layer error"

# Heat maps: valid PNG, SVG and PDF files; other extensions refused.
for kind in self cross decoder-self; do
  for ext in png svg pdf; do
    "$NMT" attention -m "$M" --kind $kind "Hello world." -o "$WORK/map-$kind.$ext" >/dev/null 2>&1 ||
      fail "attention --kind $kind -o .$ext"
  done
  python3 - "$WORK/map-$kind" <<'PY' || fail "attention --kind $kind: invalid picture"
import struct, sys, xml.dom.minidom, zlib
p = open(sys.argv[1] + ".png", "rb").read()
assert p[:8] == b"\x89PNG\r\n\x1a\n" and p[12:16] == b"IHDR"
w, h = struct.unpack(">II", p[16:24])
assert w > 50 and h > 50
assert zlib.crc32(p[12:29]) == struct.unpack(">I", p[29:33])[0]  # IHDR's CRC
svg = xml.dom.minidom.parse(sys.argv[1] + ".svg").documentElement
assert svg.tagName == "svg"
assert open(sys.argv[1] + ".pdf", "rb").read(5) == b"%PDF-"
PY
done
"$NMT" attention -m "$M" --head 2 --layer 1 "Hello." -o "$WORK/h.png" >/dev/null 2>&1 || fail "--head 2"
"$NMT" attention -m "$M" "Hello." -o "$WORK/map.jpg" >/dev/null 2>"$WORK/e.err" && fail ".jpg accepted"
grep -q "^nmt: error: $WORK/map.jpg: the picture's format comes from its extension: \.png, \.svg or \.pdf$" "$WORK/e.err" \
  || fail ".jpg error: $(cat "$WORK/e.err")"
[ ! -e "$WORK/map.jpg" ] || fail ".jpg written"
"$NMT" attention -m "$M" --layer 7 "Hello." -o "$WORK/x.png" >/dev/null 2>"$WORK/e.err" && fail "--layer 7 accepted"
grep -q "^nmt attention: error: --layer 7: the decoder has layers 1\.\.2 (see nmt attention --help)$" "$WORK/e.err" || fail "--layer 7 error: $(cat "$WORK/e.err")"
"$NMT" attention -m "$M" --head 9 "Hello." -o "$WORK/x.png" >/dev/null 2>"$WORK/e.err" && fail "--head 9 accepted"
grep -q "^nmt attention: error: --head 9: the model has heads 1\.\.4 (see nmt attention --help)$" "$WORK/e.err" || fail "--head 9 error: $(cat "$WORK/e.err")"
# Sampling: a line's samples depend on --seed, its number and its text only,
# not on batching, workers or threads; another seed draws others.
head -40 "$toy/dev.en" >"$WORK/s.en"
samp() { "$NMT" translate -m "$M" -i "$WORK/s.en" --sampling topk:10 --n-best 2 "$@" 2>"$WORK/s.err" ||
  fail "sampling $*: $(cat "$WORK/s.err")"; }
samp --seed 5 --threads 1 --workers 1 >"$WORK/s1.out"
samp --seed 5 --threads 2 --workers 2 --batch-tokens 64 >"$WORK/s2.out"
cmp -s "$WORK/s1.out" "$WORK/s2.out" || fail "sampling changed with workers, threads or batches"
[ "$(wc -l <"$WORK/s1.out")" -eq $((2 * $(wc -l <"$WORK/s.en"))) ] ||
  fail "sampling --n-best 2: $(wc -l <"$WORK/s1.out") lines for $(wc -l <"$WORK/s.en") x 2"
samp --seed 6 --threads 1 >"$WORK/s3.out"
cmp -s "$WORK/s1.out" "$WORK/s3.out" && fail "another seed drew the same samples"
"$NMT" translate -m "$M" -i "$WORK/s.en" --sampling topp:0.9 --seed 5 --threads 1 >/dev/null 2>"$WORK/s.err" ||
  fail "topp sampling: $(cat "$WORK/s.err")"
for bad in "topk:0" "topk:x" "topp:1.5" "nucleus" "topp:"; do
  "$NMT" translate -m "$M" -i "$WORK/s.en" --sampling "$bad" >/dev/null 2>"$WORK/s.err" && fail "--sampling $bad accepted"
  grep -q "error: --sampling $bad: expected topk:K" "$WORK/s.err" || fail "--sampling $bad: $(cat "$WORK/s.err")"
done
"$NMT" translate -m "$M" -i "$WORK/s.en" --sampling full --beam 4 >/dev/null 2>"$WORK/s.err" && fail "--sampling with --beam 4 accepted"
grep -q "error: --sampling draws one token at a time: it takes --beam 1" "$WORK/s.err" || fail "--sampling --beam 4: $(cat "$WORK/s.err")"
# Ensembles: -m M -m M translates and scores as M alone; a model of another
# vocabulary is refused by name.
"$NMT" translate -m "$M" -i "$WORK/s.en" --threads 1 >"$WORK/e1.out" 2>/dev/null || fail "translate M"
"$NMT" translate -m "$M" -m "$M" -i "$WORK/s.en" --threads 1 >"$WORK/e2.out" 2>"$WORK/e.err" ||
  fail "ensemble translate: $(cat "$WORK/e.err")"
cmp -s "$WORK/e1.out" "$WORK/e2.out" || fail "an ensemble of M with itself translates otherwise than M"
"$NMT" score -m "$M" -m "$M" --src "$WORK/s.en" --tgt "$WORK/e1.out" --summary >"$WORK/e2.sum" 2>&1 || fail "ensemble score: $(cat "$WORK/e2.sum")"
"$NMT" score -m "$M" --src "$WORK/s.en" --tgt "$WORK/e1.out" --summary >"$WORK/e1.sum" 2>&1 || fail "score: $(cat "$WORK/e1.sum")"
cmp -s "$WORK/e1.sum" "$WORK/e2.sum" || fail "ensemble score $(cat "$WORK/e2.sum") vs $(cat "$WORK/e1.sum")"
"$NMT" train --no-recipe -c transformer-tiny --train-src "$toy/train.en" --train-tgt "$toy/train.de" \
  --out "$WORK/m200.nmt" --vocab-size 200 --max-steps 2 --batch-tokens 1024 2>/dev/null || fail "train m200"
"$NMT" translate -m "$M" -m "$WORK/m200.nmt" -i "$WORK/s.en" >/dev/null 2>"$WORK/e.err" && fail "a mixed ensemble was accepted"
grep -q "error: -m $WORK/m200.nmt: its vocabulary differs from $M's" "$WORK/e.err" || fail "mixed ensemble: $(cat "$WORK/e.err")"

# Progress: nothing more on a stderr that is no terminal; --progress prints
# plain lines, the last "(done)"; a terminal shows a live line, cleared at
# the end (script(1) gives the run a terminal).
"$NMT" translate -m "$M" -i "$WORK/s.en" -o "$WORK/p.out" --threads 1 --window 4 2>"$WORK/p0.err" || fail "translate: $(cat "$WORK/p0.err")"
grep -q "lines/s" "$WORK/p0.err" && fail "progress printed without --progress or a terminal: $(cat "$WORK/p0.err")"
"$NMT" translate -m "$M" -i "$WORK/s.en" -o "$WORK/p.out" --threads 1 --window 4 --progress 2>"$WORK/p1.err" || fail "translate --progress"
n=$(wc -l <"$WORK/s.en")
tail -1 "$WORK/p1.err" | grep -q "^nmt translate $WORK/s.en: $n lines, [0-9.]* lines/s, 100% (ETA 0:00:00) (done)$" ||
  fail "--progress: $(cat "$WORK/p1.err")"
"$NMT" score -m "$M" --src "$WORK/s.en" --tgt "$WORK/s.en" --threads 1 --progress >/dev/null 2>"$WORK/p2.err" || fail "score -m --progress"
tail -1 "$WORK/p2.err" | grep -q "^nmt score -m $M: $n lines, .* (done)$" || fail "score -m --progress: $(cat "$WORK/p2.err")"
if command -v script >/dev/null; then
  script -qec "$NMT translate -m $M -i $WORK/s.en -o $WORK/p.out --threads 1 --window 4" /dev/null >"$WORK/tty.txt" 2>&1 ||
    fail "translate on a terminal: $(cat "$WORK/tty.txt")"
  grep -q "lines/s" "$WORK/tty.txt" || fail "no live progress line on a terminal: $(cat -v "$WORK/tty.txt")"
  [ "$(tail -c 4 "$WORK/tty.txt" | od -An -c | tr -d ' ')" = '\r033[K' ] ||
    fail "the live line is not cleared at the end: $(tail -c 40 "$WORK/tty.txt" | cat -v)"
fi
echo "cli_control: all checks passed"
