#!/usr/bin/env bash
# bench/nmt2ct2.py, which writes an nmt model through CTranslate2's own spec
# classes for bench/ct2.py, checked without CTranslate2's compiled engine:
#  - the fixtures that CTranslate2 4.8.1's own Marian converter wrote
#    (tests/fixtures/peers), imported with nmt convert and written back by
#    nmt2ct2.py, give the same model.bin: every variable and attribute, the
#    same values (within 1e-6), and the same config.json and vocabularies;
#  - a model nmt trains (sinusoidal positions, post-norm, tied embeddings),
#    written by nmt2ct2.py and imported again, translates as the original
#    does, greedy and beam 4, line for line.
# Needs numpy and CTranslate2's Python package (CT2_PYTHON: its python/
# source directory, which imports without the compiled extension); without
# them it exits 77 (skipped).
# Usage: ct2_export.sh NMT DATA_DIR WORK_DIR
set -uo pipefail
NMT=$1 DATA=$2 WORK=$3
HERE=$(cd "$(dirname "$0")" && pwd)
FIX=$HERE/fixtures/peers
rm -rf "$WORK" && mkdir -p "$WORK"
cd "$WORK" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$HERE/cli_common.sh"
export PYTHONPATH=${CT2_PYTHON:-}${PYTHONPATH:+:$PYTHONPATH}
# The first Python that has both (Debian's python3-numpy is /usr/bin's).
PY= why=
for p in ${PYTHON:-} python3 /usr/bin/python3; do
  if err=$("$p" -c "import numpy, ctranslate2.specs" 2>&1); then PY=$p; break; fi
  why="$p: $(printf '%s\n' "$err" | tail -n 1)"
done
if [ -z "$PY" ]; then
  # A compiled extension in CT2_PYTHON also needs libctranslate2.so on
  # LD_LIBRARY_PATH; the last Python's error says which import failed.
  echo "ct2_export: skipped (needs numpy and CTranslate2's Python package: CT2_PYTHON=.../python; $why)"
  exit 77
fi

# model.bin's variables and attributes, by name (aliases resolved), as
# specs/model_spec.py writes them.
cat >read_bin.py <<'PY'
import struct, sys
import numpy as np
TYPES = {0: "<f4", 1: "i1", 2: "<i2", 3: "<i4", 4: "<f2"}
def read(path):
    b = open(path, "rb").read()
    at = 0
    def get(fmt):
        nonlocal at
        v = struct.unpack_from(fmt, b, at)
        at += struct.calcsize(fmt)
        return v[0]
    def string():
        nonlocal at
        n = get("<H")
        s = b[at:at + n - 1].decode()
        at += n
        return s
    version, spec, revision = get("<I"), string(), get("<I")
    out = {}
    for _ in range(get("<I")):
        name = string()
        shape = [get("<I") for _ in range(get("<B"))]
        t, nbytes = get("<B"), get("<I")
        out[name] = np.frombuffer(b[at:at + nbytes], dtype=TYPES[t]).reshape(shape)
        at += nbytes
    for _ in range(get("<I")):
        alias, target = string(), string()
        out[alias] = out[target]
    assert at == len(b), "trailing bytes"
    return spec, revision, out
spec_a, rev_a, a = read(sys.argv[1])
spec_b, rev_b, b = read(sys.argv[2])
what = sys.argv[3]
if (spec_a, rev_a) != (spec_b, rev_b):
    sys.exit(f"{what}: {spec_b} revision {rev_b}, CTranslate2 wrote {spec_a} revision {rev_a}")
if set(a) != set(b):
    sys.exit(f"{what}: variables only in CTranslate2's: {sorted(set(a) - set(b))[:5]}, "
             f"only in nmt2ct2.py's: {sorted(set(b) - set(a))[:5]}")
worst = 0.0
for k in sorted(a):
    x, y = a[k], b[k]
    if x.shape != y.shape or x.dtype != y.dtype:
        sys.exit(f"{what}: {k}: {y.dtype}{list(y.shape)}, CTranslate2 wrote {x.dtype}{list(x.shape)}")
    d = float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64)))) if x.size else 0.0
    worst = max(worst, d)
    if d > 1e-6:
        sys.exit(f"{what}: {k} differs by {d:g}")
print(f"{what}: {len(a)} variables equal to CTranslate2's (largest difference {worst:.1e})")
PY

# 1. The fixtures CTranslate2's Marian converter wrote, imported and written back.
for name in ct2-postnorm-shared-f32 ct2-prenorm-separate-f32; do
  d=$FIX/$name
  "$NMT" convert "$d" -o "$name.nmt" 2>err.txt || fail "convert $name: $(cat err.txt)"
  "$PY" "$HERE/../bench/nmt2ct2.py" "$name.nmt" "$name.back" 2>err.txt ||
    fail "nmt2ct2.py $name: $(cat err.txt)"
  "$PY" read_bin.py "$d/model.bin" "$name.back/model.bin" "$name" || fail "$name: model.bin"
  for f in config.json shared_vocabulary.json source_vocabulary.json target_vocabulary.json; do
    [ -e "$d/$f" ] || { [ ! -e "$name.back/$f" ] || fail "$name: $f, which CTranslate2 did not write"; continue; }
    "$PY" -c "import json,sys; a,b=(json.load(open(p)) for p in sys.argv[1:3]); sys.exit(0 if a==b else 1)" \
      "$d/$f" "$name.back/$f" || fail "$name: $f differs: $(diff "$d/$f" "$name.back/$f" | head -5)"
  done
done

# 2. nmt's own model through CTranslate2's spec classes and back.
train_toy_model "$NMT" "$DATA"
"$PY" "$HERE/../bench/nmt2ct2.py" m.nmt m.ct2 2>err.txt || fail "nmt2ct2.py m.nmt: $(cat err.txt)"
"$PY" - "$HERE/../bench" m.nmt <<'PY' >m.spm || fail "the model's SentencePiece model"
import sys
sys.path.insert(0, sys.argv[1])
from nmt_file import ModelFile
sys.stdout.buffer.write(ModelFile(sys.argv[2], sys.exit).blob("vocab/sentencepiece"))
PY
"$NMT" convert m.ct2 --spm m.spm -o back.nmt 2>err.txt || fail "convert nmt2ct2.py's model: $(cat err.txt)"
head -100 "$DATA/joeynmt-toy/dev.en" >in.txt
for b in 1 4; do
  "$NMT" translate -m m.nmt -i in.txt -o a.$b --beam $b --alpha 0 --threads 1 2>err.txt || fail "translate: $(cat err.txt)"
  "$NMT" translate -m back.nmt -i in.txt -o b.$b --beam $b --alpha 0 --threads 1 2>err.txt || fail "translate back: $(cat err.txt)"
  cmp -s a.$b b.$b || fail "beam $b: the model written by nmt2ct2.py and imported again translates otherwise: $(diff a.$b b.$b | head -4)"
done
# The shortlist as CTranslate2's vocabulary map (--vmap): every piece nmt
# outputs with --shortlist on is among the candidates the map gives its
# source (CTranslate2 adds <unk>, <s> and </s> itself).
# (nmt train stored one in m.nmt; the model imported from CTranslate2 has none.)
"$NMT" info m.nmt | grep -q '^shortlist' || fail "the trained model holds no shortlist"
"$PY" "$HERE/../bench/nmt2ct2.py" m.nmt sl.ct2 --vmap 2>err.txt || fail "nmt2ct2.py --vmap: $(cat err.txt)"
[ -s sl.ct2/vmap.txt ] || fail "--vmap wrote no vmap.txt"
"$PY" "$HERE/../bench/nmt2ct2.py" ct2-postnorm-shared-f32.nmt nosl.ct2 --vmap 2>err.txt &&
  fail "--vmap without a shortlist"
grep -q "holds no shortlist" err.txt || fail "--vmap without a shortlist: $(cat err.txt)"
"$NMT" translate -m m.nmt -i in.txt --shortlist on --format jsonl --attention --beam 4 --threads 1 \
  >sl.jsonl 2>err.txt || fail "translate --shortlist on: $(cat err.txt)"
"$PY" - sl.ct2/vmap.txt sl.jsonl <<'PY' || fail "the vocabulary map"
import json, sys
rules = {}
for line in open(sys.argv[1], encoding="utf-8"):
    key, _, targets = line.rstrip("\n").partition("\t")
    rules[key] = set(targets.split())
if not rules.get(""):
    sys.exit("no always-allowed pieces (the empty key)")
checked = 0
for n, line in enumerate(open(sys.argv[2], encoding="utf-8"), 1):
    att = json.loads(line)["attention"]
    if att is None:  # an empty translation has no attention to show
        continue
    allowed = set(rules[""]) | {"<unk>", "<s>", "</s>"}
    for p in att["source"]:
        allowed |= rules.get(p, set())
    for p in att["target"]:
        checked += 1
        if p not in allowed:
            sys.exit(f"line {n}: nmt output {p!r}, which the map does not give its source")
if checked < 100:
    sys.exit(f"only {checked} output pieces to check")
print(f"vmap: {len(rules) - 1} source pieces; {checked} output pieces of {n} lines all in their maps")
PY
# Refused by name: a model with something CTranslate2's spec has no place for.
"$PY" - m.nmt odd.nmt <<'PY' || fail "making odd.nmt"
import json, struct, sys
raw = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n]); base = raw[8 + n:]
end = max(t["data_offsets"][1] for k, t in h.items() if k != "__metadata__")
h["extra/thing"] = {"dtype": "F32", "shape": [1], "data_offsets": [end, end + 4]}
head = json.dumps(h).encode(); head += b" " * (-len(head) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(head)) + head + base[:end] + b"\0\0\0\0")
PY
"$PY" "$HERE/../bench/nmt2ct2.py" odd.nmt odd.ct2 2>err.txt && fail "nmt2ct2.py converted a model with an unknown tensor"
grep -q "extra/thing has no place" err.txt || fail "unknown tensor: $(cat err.txt)"
[ ! -e odd.ct2 ] || fail "nmt2ct2.py left odd.ct2 behind"
echo "ct2_export: all passed"
