#!/usr/bin/env bash
# Vocabulary shortlists on the built binary:
#  - nmt train builds one from its training pairs, measures its BLEU cost on
#    the validation set, says so, and stores both (nmt info shows them);
#    --no-shortlist stores none;
#  - nmt translate --shortlist on|off|auto, and its refusals;
#  - nmt shortlist adds one to any model, measured when given a set, without
#    touching its input; nmt quantize keeps it;
#  - a model whose shortlist bytes are damaged is refused by name;
#  - text the model's vocabulary does not know, blank text and a blank
#    validation set are refused before any work, and a table that lets
#    nothing through but <unk> is refused when loaded.
# Usage: cli_shortlist.sh NMT DATA_DIR WORK_DIR
set -uo pipefail
NMT=$1 DATA=$2 WORK=$3
rm -rf "$WORK" && mkdir -p "$WORK"
cd "$WORK" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$(dirname "$0")/cli_common.sh"
toy=$DATA/joeynmt-toy
has() { grep -q -- "$1" "$2" || fail "expected '$1' in $2: $(cat "$2")"; }

# 1. Training builds and measures it.
"$NMT" train -c transformer-tiny --train-src "$toy/train.en" --train-tgt "$toy/train.de" \
  --valid-src "$toy/dev.en" --valid-tgt "$toy/dev.de" --out m.nmt --vocab-size 300 \
  --max-steps 30 --batch-tokens 1024 --seed 1 --threads 1 2>train.err || fail "train: $(cat train.err)"
# The defaults: 10 per source piece, and an eighth of the (300-piece) vocabulary frequent.
has "shortlist: the 10 likeliest target pieces of each source piece and the 37 most frequent, from [0-9]* training pairs" train.err
has "validation BLEU at beam 4 [0-9.]* with it, [0-9.]* without ([0-9]* sentences" train.err
grep -q '"type":"shortlist"' m.nmt.log.jsonl || fail "no shortlist entry in the training log"
"$NMT" info m.nmt >info.txt 2>&1 || fail "info: $(cat info.txt)"
has "^shortlist    [0-9]* entries (the 10 likeliest of each source piece, 37 frequent pieces), from [0-9]* training pairs; BLEU [0-9.]* with it, [0-9.]* without, on [0-9]* sentences at beam 4" info.txt
"$NMT" info m.nmt --format json >info.json || fail "info json"
python3 - info.json <<'PY' || fail "info json: $(cat info.json)"
import json, sys
s = json.load(open(sys.argv[1]))["shortlist"]
assert s["entries"] > 0 and s["per_source"] == 10 and s["frequent"] == 37, s
m = s["measured_on"]
assert m["sentences"] > 0 and m["beam"] == 4 and 0 <= m["reference_coverage"] <= 1, m
assert s["default"] == (m["bleu"] - m["bleu_shortlist"] <= 0.2), s
PY

# 2. translate --shortlist: every line answered, whichever way.
head -50 "$toy/train.en" >in.en
for mode in on off auto; do
  "$NMT" translate -m m.nmt -i in.en -o "out.$mode" --shortlist "$mode" 2>tr.err || fail "--shortlist $mode: $(cat tr.err)"
  [ "$(wc -l <"out.$mode")" -eq 50 ] || fail "--shortlist $mode: expected 50 lines"
done
expect 2 "--shortlist" "$NMT" translate -m m.nmt -i in.en --shortlist maybe
expect 2 "^nmt translate: error: --shortlist on restricts the search; --sampling draws from the whole vocabulary" \
  "$NMT" translate -m m.nmt -i in.en --shortlist on --sampling topk:5

# 3. --no-shortlist stores none, and --shortlist on says what to do.
"$NMT" train -c transformer-tiny --train-src "$toy/train.en" --train-tgt "$toy/train.de" \
  --out plain.nmt --vocab-size 300 --max-steps 10 --batch-tokens 1024 --seed 1 --threads 1 \
  --no-shortlist 2>plain.err || fail "train --no-shortlist: $(cat plain.err)"
grep -q "shortlist:" plain.err && fail "--no-shortlist built one: $(cat plain.err)"
"$NMT" info plain.nmt >plain.info 2>&1 || fail "info plain"
grep -q "^shortlist" plain.info && fail "--no-shortlist: info shows a shortlist"
expect 1 "^nmt: error: plain.nmt has no vocabulary shortlist; nmt shortlist makes one from parallel text" \
  "$NMT" translate -m plain.nmt -i in.en --shortlist on
"$NMT" translate -m plain.nmt -i in.en -o plain.out 2>/dev/null || fail "auto without a shortlist"

# 4. nmt shortlist adds one, measured on a set; its input is untouched.
cp plain.nmt plain.copy
"$NMT" shortlist -m plain.nmt --src "$toy/train.en" --tgt "$toy/train.de" --valid-src "$toy/dev.en" \
  --valid-tgt "$toy/dev.de" --per-source 20 --frequent 50 -o added.nmt 2>sl.err || fail "shortlist: $(cat sl.err)"
has "BLEU [0-9.]* with it, [0-9.]* without, on 20 sentences" sl.err
cmp -s plain.nmt plain.copy || fail "nmt shortlist changed its input"
"$NMT" info added.nmt >added.info 2>&1 || fail "info added"
has "^shortlist    [0-9]* entries (the 20 likeliest of each source piece, 50 frequent pieces), from 1000 pairs of" added.info
"$NMT" translate -m added.nmt -i in.en -o added.out --shortlist on 2>/dev/null || fail "translate added"
[ "$(wc -l <added.out)" -eq 50 ] || fail "added: expected 50 lines"
# Without a set it is stored but off unless asked for.
"$NMT" shortlist -m plain.nmt --src "$toy/train.en" --tgt "$toy/train.de" -o unmeasured.nmt 2>un.err \
  || fail "shortlist without a set: $(cat un.err)"
has "no --valid-src to measure it on" un.err
"$NMT" info unmeasured.nmt >un.info 2>&1 && has "used only with --shortlist on" un.info
# Refusals, with nothing written.
expect 2 "is the -m file" "$NMT" shortlist -m plain.nmt --src "$toy/train.en" --tgt "$toy/train.de" -o plain.nmt
expect 2 "one target file per source file" "$NMT" shortlist -m plain.nmt --src "$toy/train.en" "$toy/dev.en" \
  --tgt "$toy/train.de" -o x.nmt
expect 2 "go together" "$NMT" shortlist -m plain.nmt --src "$toy/train.en" --tgt "$toy/train.de" \
  --valid-src "$toy/dev.en" -o x.nmt
expect 1 "line counts differ\|lines" "$NMT" shortlist -m plain.nmt --src "$toy/train.en" --tgt "$toy/dev.de" -o x.nmt
[ ! -e x.nmt ] || fail "a refused nmt shortlist wrote x.nmt"
cmp -s plain.nmt plain.copy || fail "a refused nmt shortlist changed its model"

# 5. quantize keeps it.
"$NMT" quantize m.nmt -o m8.nmt 2>/dev/null || fail "quantize"
"$NMT" info m8.nmt >m8.info 2>&1 || fail "info m8"
has "^shortlist    " m8.info
"$NMT" translate -m m8.nmt -i in.en -o m8.out --shortlist on 2>/dev/null || fail "translate int8 with a shortlist"

# 6. Damaged shortlist bytes: refused by name, one line.
python3 - m.nmt bad.nmt <<'PY' || fail "could not damage the model"
import json, struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
begin = header["shortlist"]["data_offsets"][0]
data[8 + n + begin:8 + n + begin + 4] = b"\0\0\0\0"
open(sys.argv[2], "wb").write(data)
PY
expect 1 "^nmt: error: bad.nmt: the shortlist is malformed (not a shortlist)" "$NMT" translate -m bad.nmt -i in.en --shortlist on
# A run that will not use the shortlist does not read it (a loaded int8
# transformer-base is about a megabyte smaller for it).
"$NMT" translate -m bad.nmt -i in.en --shortlist off >bad.out 2>/dev/null || fail "--shortlist off read the shortlist"
cmp -s bad.out out.off || fail "--shortlist off on the damaged copy translates differently"
expect 1 "^nmt: error: bad.nmt: the shortlist is malformed" "$NMT" info bad.nmt
# nmt shortlist replaces the damaged table without reading it.
"$NMT" shortlist -m bad.nmt --src "$toy/train.en" --tgt "$toy/train.de" -o mended.nmt 2>/dev/null ||
  fail "nmt shortlist could not replace a damaged shortlist"
"$NMT" info mended.nmt >/dev/null 2>&1 || fail "info of the mended model"

# 7. Text the model's vocabulary does not know (raw words for a model that
# reads space-separated tokens) is refused by file before any work, or warned
# about with its share of unknown tokens; so are blank text and a blank
# validation set (by option, before the table is built). A model whose
# shortlist lets nothing through but <unk> is refused, not run.
for i in $(seq 0 40); do printf 'w%d\t0\n' "$i"; done >tok.vocab
python3 "$(dirname "$0")/convert_synthetic.py" ct2 ct tok.vocab || fail "convert_synthetic.py"
"$NMT" convert ct -o tok.nmt 2>/dev/null || fail "convert tok.nmt"
printf 'hello world\nthe cat sat\n' >raw.src; printf 'hallo welt\ndie katze\n' >raw.tgt
printf 'w3 w4\nw5 w6 w7\n' >tok.src; printf 'w8 w9\nw10\n' >tok.tgt; printf '\n \n' >blank.txt
expect 1 "^nmt: error: no source token of raw.src is in the model's vocabulary (all 5 are <unk>): is it tokenised" \
  "$NMT" shortlist -m tok.nmt --src raw.src --tgt raw.tgt -o x.nmt
expect 1 "^nmt: error: no target token of raw.tgt is in the model's vocabulary" \
  "$NMT" shortlist -m tok.nmt --src tok.src --tgt raw.tgt -o x.nmt
expect 1 "^nmt: error: blank.txt and blank.txt: no line pair has text on both sides (2 lines" \
  "$NMT" shortlist -m tok.nmt --src blank.txt --tgt blank.txt -o x.nmt
expect 1 "^nmt: error: --valid-src blank.txt and --valid-tgt blank.txt: no line pair has text on both sides" \
  "$NMT" shortlist -m tok.nmt --src tok.src --tgt tok.tgt --valid-src blank.txt --valid-tgt blank.txt -o x.nmt
expect 1 "^nmt: error: no source token of --valid-src raw.src is in the model's vocabulary" \
  "$NMT" shortlist -m tok.nmt --src tok.src --tgt tok.tgt --valid-src raw.src --valid-tgt tok.tgt -o x.nmt
[ ! -e x.nmt ] || fail "a refused nmt shortlist wrote x.nmt"
printf 'w3 hello w4 world x\nw5 a b c\n' >mostly.src
"$NMT" shortlist -m tok.nmt --src mostly.src --tgt tok.tgt -o mostly.nmt 2>mostly.err || fail "mostly: $(cat mostly.err)"
has "^nmt: warning: 67% of the source tokens of mostly.src (6 of 9) are not in the model's vocabulary" mostly.err
# A table whose frequent pieces are <unk> alone, as one built from text the
# vocabulary does not know was: every target w8 (frequent), then <unk> put
# first in the frequency order.
printf 'w8\nw8\n' >w8.tgt
"$NMT" shortlist -m tok.nmt --src tok.src --tgt w8.tgt --per-source 0 --frequent 1 -o one.nmt 2>/dev/null ||
  fail "a frequent-only shortlist"
"$NMT" translate -m one.nmt -i tok.src --shortlist on >/dev/null 2>&1 || fail "a frequent-only shortlist is refused"
python3 - one.nmt unk.nmt <<'PY' || fail "could not make the <unk>-only table"
import json, struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", data[:8])[0]
begin, end = json.loads(data[8:8 + n])["shortlist"]["data_offsets"]
sl = list(struct.unpack("<%di" % ((end - begin) // 4), data[8 + n + begin:8 + n + end]))
src_vocab, tgt_vocab, entries = sl[2], sl[3], sl[7]
at = 8 + src_vocab + 1 + entries  # the frequency order
order = sl[at:at + tgt_vocab]
i = order.index(1)
order[0], order[i] = order[i], order[0]
sl[at:at + tgt_vocab] = order
data[8 + n + begin:8 + n + end] = struct.pack("<%di" % len(sl), *sl)
open(sys.argv[2], "wb").write(data)
PY
expect 1 "^nmt: error: unk.nmt: its vocabulary shortlist lets no target piece through but <unk>" \
  "$NMT" translate -m unk.nmt -i tok.src --shortlist on
"$NMT" translate -m unk.nmt -i tok.src --shortlist off >/dev/null 2>&1 || fail "--shortlist off read the <unk>-only table"
echo "cli_shortlist: ok"
