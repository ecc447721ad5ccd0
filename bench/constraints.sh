#!/usr/bin/env bash
# Terminology constraints on real text: test_2016_flickr with one or two
# reference words per sentence as constraints (the longest words of the
# reference, one for odd lines and two for even ones), translated with and
# without them. Prints BLEU both ways, the share of constraints that appear
# in the output, and the time of each run (whole process).
# Usage: bench/constraints.sh MODEL [NMT] [BEAM]
set -euo pipefail
MODEL=${1:?usage: bench/constraints.sh MODEL [NMT] [BEAM]}
NMT=${2:-build/nmt}
BEAM=${3:-4}
DATA=$(cd "$(dirname "$0")/../../shared/data/multi30k" && pwd)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
zcat "$DATA/test_2016_flickr.en.gz" >"$W/src.en"
zcat "$DATA/test_2016_flickr.de.gz" >"$W/ref.de"
python3 - "$W" <<'PY'
import json, re, sys
w = sys.argv[1]
src = open(w + "/src.en", encoding="utf-8").read().splitlines()
ref = open(w + "/ref.de", encoding="utf-8").read().splitlines()
with open(w + "/in.jsonl", "w", encoding="utf-8") as out:
    for i, (s, r) in enumerate(zip(src, ref)):
        words = [x for x in re.findall(r"\w+", r) if len(x) > 1]
        longest = sorted(dict.fromkeys(words), key=lambda x: -len(x))
        cons = longest[: 1 if i % 2 == 0 else 2]  # line 1 (i = 0) is odd
        out.write(json.dumps({"text": s, "constraints": cons}, ensure_ascii=False) + "\n")
PY
secs() { local t0=$EPOCHREALTIME; "$@"; awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'; }
t_plain=$(secs "$NMT" translate -m "$MODEL" --beam "$BEAM" -i "$W/src.en" -o "$W/plain.de")
t_cons=$(secs "$NMT" translate -m "$MODEL" --beam "$BEAM" --input-format jsonl -i "$W/in.jsonl" \
  -o "$W/cons.de" 2>"$W/warnings")
python3 - "$W" <<'PY'
import json, sys
w = sys.argv[1]
cons = [json.loads(l)["constraints"] for l in open(w + "/in.jsonl", encoding="utf-8")]
out = open(w + "/cons.de", encoding="utf-8").read().splitlines()
n = sum(len(c) for c in cons)
met = sum(1 for c, o in zip(cons, out) for x in c if x in o)
print(f"constraints: {n} over {len(cons)} sentences; met {met} ({100.0 * met / n:.2f}%)")
PY
echo "warnings: $(wc -l <"$W/warnings")"
echo "BLEU without constraints: $("$NMT" score "$W/ref.de" -i "$W/plain.de" -b)"
echo "BLEU with constraints:    $("$NMT" score "$W/ref.de" -i "$W/cons.de" -b)"
awk -v p="$t_plain" -v c="$t_cons" 'BEGIN { printf "time without: %.2f s (%.1f sent/s); with: %.2f s (%.1f sent/s); slowdown %.2fx\n", p, 1000 / p, c, 1000 / c, c / p }'
