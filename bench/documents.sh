#!/usr/bin/env bash
# Documents against sentences: test_2016_flickr's 1000 sentences grouped
# into paragraphs of 1-5 (one paragraph a line), translated with
# `--split sentences`, against the same sentences one per line, alternated
# ROUNDS times; then how many paragraphs equal their sentences' translations
# joined with a space, and the BLEU of the paragraphs translated with and
# without --split against the reference paragraphs.
# Usage: bench/documents.sh NMT MODEL [ROUNDS] [extra translate options...]
set -eu
NMT=$1 MODEL=$2 ROUNDS=${3:-3}
shift $(( $# < 3 ? $# : 3 ))
DATA=$(cd "$(dirname "$0")/../../shared/data" && pwd)
W=$(mktemp -d /tmp/nmt-bench-documents.XXXXXX)
trap 'rm -rf "$W"' EXIT
gzip -dc "$DATA/multi30k/test_2016_flickr.en.gz" >"$W/sent.en"
gzip -dc "$DATA/multi30k/test_2016_flickr.de.gz" >"$W/sent.de"
python3 - "$W" <<'EOF'
import sys
w = sys.argv[1]
src = [l.rstrip("\n") for l in open(f"{w}/sent.en")]
ref = [l.rstrip("\n") for l in open(f"{w}/sent.de")]
with open(f"{w}/para.en", "w") as pe, open(f"{w}/para.de", "w") as pd, open(f"{w}/sizes", "w") as sz:
    i = k = 0
    while i < len(src):
        n = min(1 + k % 5, len(src) - i)
        pe.write(" ".join(src[i:i + n]) + "\n"); pd.write(" ".join(ref[i:i + n]) + "\n")
        sz.write(f"{n}\n"); i += n; k += 1
EOF
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores"
echo "model: $MODEL; options: $*"
timed() {  # timed OUT args...: wall seconds
  local out=$1; shift
  /usr/bin/time -f %e -o "$W/t" "$NMT" translate -m "$MODEL" "$@" -o "$out" 2>/dev/null
  cat "$W/t"
}
for r in $(seq "$ROUNDS"); do
  a=$(timed "$W/sent.out" -i "$W/sent.en" "$@")
  b=$(timed "$W/split.out" -i "$W/para.en" --split sentences "$@")
  python3 -c "print(f'round $r: one per line {$a:.2f} s ({1000/$a:.1f} sent/s), paragraphs --split sentences {$b:.2f} s ({1000/$b:.1f} sent/s): {$a/$b*100:.1f}%')"
done
"$NMT" translate -m "$MODEL" -i "$W/para.en" "$@" -o "$W/whole.out" 2>/dev/null
python3 - "$W" <<'EOF'
import re, sys
w = sys.argv[1]
sizes = [int(x) for x in open(f"{w}/sizes")]
src = [l.rstrip("\n") for l in open(f"{w}/sent.en")]
sent = [l.rstrip("\n") for l in open(f"{w}/sent.out")]
split = [l.rstrip("\n") for l in open(f"{w}/split.out")]
i, same, shown, marked, same_marked = 0, 0, 0, 0, 0
with open(f"{w}/joined.out", "w") as j:
    for n, s in zip(sizes, split):
        joined = " ".join(sent[i:i + n]); j.write(joined + "\n")
        # Every sentence but the last ends in a stop and the next starts
        # with a capital: where a sentence ends is to be seen.
        seen = all(re.search(r'[.!?]"?$', a) and b[:1].isupper()
                   for a, b in zip(src[i:i + n - 1], src[i + 1:i + n]))
        marked += seen
        same_marked += seen and s == joined
        if s == joined:
            same += 1
        elif shown < 4:
            shown += 1
            print("  differs:", " | ".join(src[i:i + n])[:300])
        i += n
print(f"paragraphs equal to their sentences' translations joined: {same} of {len(sizes)} "
      f"({same / len(sizes) * 100:.1f}%); of those whose every sentence ends in a stop before a "
      f"capital: {same_marked} of {marked} ({same_marked / max(marked, 1) * 100:.1f}%)")
EOF
for f in whole split joined; do
  printf '%-7s BLEU against the reference paragraphs: ' "$f"
  "$NMT" score "$W/para.de" -i "$W/$f.out" -b
done
