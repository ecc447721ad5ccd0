#!/usr/bin/env bash
# Documents on real text: --split sentences (Multi30k sentences grouped into
# paragraphs translate as the sentences do one per line), --split paragraphs
# (the same paragraphs wrapped at 72 columns between blank lines), and a
# sentence of 400 words from newstest2014, translated whole in pieces
# instead of cut at the model's length.
# Usage: cli_documents.sh NMT DATA_DIR WORK_DIR
set -u
NMT=$1 DATA=$2 WORK=$3
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$(dirname "$0")/cli_common.sh"
train_toy_model "$NMT" "$DATA"
T="--threads 1 --beam 2"

# 1. Paragraphs of 1-5 sentences, one per line: --split sentences writes
# each line's sentences' translations, each as it is alone on a line.
gzip -dc "$DATA/multi30k/test_2016_flickr.en.gz" | head -150 >sent.en
python3 - <<'EOF'
import textwrap
sents = [l.strip() for l in open("sent.en")]
sizes, i, k = [], 0, 0
while i < len(sents):
    n = 1 + k % 5
    sizes.append(min(n, len(sents) - i)); i += n; k += 1
with open("para.en", "w") as p, open("sizes.txt", "w") as s, open("wrapped.en", "w") as w:
    i = 0
    for n in sizes:
        para = " ".join(sents[i:i + n]); i += n
        p.write(para + "\n"); s.write(f"{n}\n")
        w.write(textwrap.fill(para, 72) + "\n\n" + ("\n" if n == 3 else ""))
EOF
"$NMT" translate -m m.nmt -i sent.en $T >sent.out 2>err.txt || fail "sentences: $(cat err.txt)"
"$NMT" translate -m m.nmt -i para.en --split sentences $T >split.out 2>err.txt ||
  fail "--split sentences: $(cat err.txt)"
"$NMT" translate -m m.nmt -i para.en $T >whole.out 2>err.txt || fail "paragraph lines: $(cat err.txt)"
python3 - <<'EOF' || fail "--split sentences: $(cat agree.txt)"
import re
sizes = [int(x) for x in open("sizes.txt")]
src = [l.rstrip("\n") for l in open("sent.en")]
sent = [l.rstrip("\n") for l in open("sent.out")]
split = [l.rstrip("\n") for l in open("split.out")]
whole = [l.rstrip("\n") for l in open("whole.out")]
assert len(split) == len(sizes) == len(whole), (len(split), len(sizes))
i, same, same_whole, marked, same_marked = 0, 0, 0, 0, 0
for n, s, w in zip(sizes, split, whole):
    joined = " ".join(sent[i:i + n])
    # A sentence without its full stop runs into the next: no splitter
    # can see where one ends (51 of Multi30k's 1000 have none).
    seen = all(re.search(r'[.!?]"?$', x) for x in src[i:i + n - 1])
    i += n
    same += s == joined
    same_whole += w == joined and n > 1
    marked += seen
    same_marked += seen and s == joined
multi = sum(n > 1 for n in sizes)
open("agree.txt", "w").write(
    f"{same} of {len(sizes)} paragraphs as their sentences, {same_marked} of {marked} whose "
    f"sentences end in stops; without --split {same_whole} of {multi}\n")
assert same_marked >= 0.98 * marked
assert same_whole < 0.5 * multi  # the feature is what makes them agree
EOF

# 2. The same paragraphs wrapped at 72 columns, blank lines between them:
# one line per paragraph, the blank lines kept.
"$NMT" translate -m m.nmt -i wrapped.en --split paragraphs $T >para.out 2>err.txt ||
  fail "--split paragraphs: $(cat err.txt)"
python3 - <<'EOF' || fail "--split paragraphs"
sizes = [int(x) for x in open("sizes.txt")]
split = [l.rstrip("\n") for l in open("split.out")]
want = []
for n, s in zip(sizes, split):
    want += [s, ""] + ([""] if n == 3 else [])
got = [l.rstrip("\n") for l in open("para.out")]
assert got == want, (len(got), len(want), [(a, b) for a, b in zip(got, want) if a != b][:3])
EOF
# From a pipe too, a paragraph at a time.
head -4 wrapped.en | "$NMT" translate -m m.nmt --split paragraphs $T >pipe.out 2>err.txt ||
  fail "--split paragraphs from a pipe: $(cat err.txt)"
[ "$(head -1 pipe.out)" = "$(head -1 para.out)" ] || fail "--split paragraphs from a pipe: $(cat pipe.out)"

# 3. A sentence of 400 words (newstest2014 sentences joined by commas): with
# or without --split, translated whole in pieces the model takes, cut at
# clause boundaries, with a warning; no word of it is lost.
python3 - "$DATA/wmt14-newstest2014/newstest2014-deen.en" <<'EOF'
import sys
words, parts = 0, []
for line in open(sys.argv[1]):
    s = line.strip().rstrip(".!?")
    if not s or "." in s or "?" in s or "!" in s:
        continue
    parts.append(s); words += len(s.split())
    if words >= 400:
        break
open("long.en", "w").write("Two dogs play. " + ", ".join(parts) + ".\nA man sleeps.\n")
EOF
for split in none sentences; do
  "$NMT" translate -m m.nmt -i long.en --split $split --format jsonl $T >long.jsonl 2>err.txt ||
    fail "a 400-word sentence: $(cat err.txt)"
  grep -q "long.en line 1: a sentence of [0-9]* bytes is longer than the model takes at most [0-9]* subwords at once; it is translated in [0-9]* pieces cut at clause boundaries" err.txt ||
    fail "a 400-word sentence (--split $split): no warning: $(cat err.txt)"
  python3 - $split <<'EOF' || fail "a 400-word sentence (--split $split)"
import json, sys
src = open("long.en").read().split("\n")[0]
lines = [json.loads(l) for l in open("long.jsonl")]
assert len(lines) == 2
parts = lines[0]["sentences"]
# Every word of the line is in one piece, in order.
assert " ".join(p["source"] for p in parts).split() == src.split(), "words lost"
assert len(parts) >= 3 and all(len(p["source"].split()) < 300 for p in parts)
# Pieces end at commas where they can.
assert sum(p["source"].endswith(",") for p in parts) >= len(parts) // 2
assert lines[0]["translation"].count(" ") >= len(parts) - 1
assert all(p["confidence"] <= 0 for p in parts)
if sys.argv[1] == "sentences":
    assert parts[0]["source"] == "Two dogs play."
EOF
done

# 4. Options that mean nothing together are refused.
expect 2 "source-language requires --split" "$NMT" translate -m m.nmt --source-language de
expect 2 "attention draws one sentence's map" \
  "$NMT" translate -m m.nmt --split sentences --attention --format jsonl
expect 1 "source-language nonsense! is not a language code" \
  "$NMT" translate -m m.nmt --split sentences --source-language 'nonsense!'
echo "cli_documents: ok ($(cat agree.txt))"
