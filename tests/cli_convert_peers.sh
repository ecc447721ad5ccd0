#!/usr/bin/env bash
# nmt convert against the real tools: small models that Marian and CTranslate2
# wrote themselves, with the translations and scores those tools produced
# (tests/fixtures/peers/README.md says which tool, version and command made
# each). Every imported model must translate the fixtures' test sentences
# exactly as the tool did, greedy and beam 4, token for token (except where
# marian-decoder's pre-norm decoder departs from its own model, see
# check_marian), and `nmt score -m` must give every reference token the
# tool's log-probability within 1e-3.
# A transposed matrix, a swapped norm, a shifted position table or a wrong
# start token changes these numbers; the synthetic files of cli_convert.sh
# cannot show that.
# Usage: cli_convert_peers.sh NMT DATA_DIR WORK_DIR
set -uo pipefail
NMT=$1 DATA=$2 WORK=$3
HERE=$(cd "$(dirname "$0")" && pwd)
FIX=$HERE/fixtures/peers
rm -rf "$WORK" && mkdir -p "$WORK"
cd "$WORK" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }

# same_lines WANT GOT WHAT: equal line for line, else the first difference.
same_lines() {
  [ "$(wc -l <"$1")" -eq "$(wc -l <"$2")" ] || fail "$3: $(wc -l <"$2") lines, the tool wrote $(wc -l <"$1")"
  local n
  n=$(cmp "$1" "$2" 2>/dev/null | sed -n 's/.* line \([0-9]*\).*/\1/p')
  [ -z "$n" ] || fail "$3: line $n differs: the tool '$(sed -n "${n}p" "$1")', nmt '$(sed -n "${n}p" "$2")'"
}

# compare_scores NMT_JSONL TOOL_TOKENS TOLERANCE WHAT: per-token
# log-probabilities of nmt's score -m --word-scores jsonl against the tool's,
# one line of numbers per sentence.
compare_scores() {
  python3 - "$@" <<'PY' || fail "$4"
import json, sys
nmt_jsonl, tool_tokens, tol, what = sys.argv[1:5]
tol = float(tol)
nmt = [json.loads(l)["token_logprobs"] for l in open(nmt_jsonl, encoding="utf-8")]
tool = [[float(x) for x in l.split()] for l in open(tool_tokens, encoding="utf-8")]
if len(nmt) != len(tool):
    sys.exit(f"{what}: {len(nmt)} sentences scored, the tool scored {len(tool)}")
worst, count = 0.0, 0
for i, (a, b) in enumerate(zip(nmt, tool), 1):
    if len(a) != len(b):
        sys.exit(f"{what}: line {i}: {len(a)} tokens scored, the tool scored {len(b)}")
    for j, (x, y) in enumerate(zip(a, b), 1):
        worst = max(worst, abs(x - y)); count += 1
        if abs(x - y) > tol:
            sys.exit(f"{what}: line {i} token {j}: nmt {x:.6f}, the tool {y:.6f}")
print(f"{what}: {count} tokens, largest difference {worst:.2e}")
PY
}

# A Marian fixture: model.npz with its SentencePiece vocabularies; the tool's
# text output for beam 1 and 4 (--normalize 0, --max-length-factor 3: at most
# 3 x the source's pieces with its </s>, which is 3n + 3) and marian-scorer
# --word-scores on the test pairs.
check_marian() {
  local name=$1 prenorm=0; shift
  [ "$name" = marian-prenorm ] && prenorm=1
  local d=$FIX/$name
  "$NMT" convert "$d/model.npz" "$@" -o "$name.nmt" 2>err.txt || fail "convert $name: $(cat err.txt)"
  for b in 1 4; do
    "$NMT" translate -m "$name.nmt" -i test.en -o "$name.beam$b" --beam "$b" --alpha 0 \
      --max-length-a 3 --max-length-b 3 --threads 1 2>err.txt || fail "translate $name: $(cat err.txt)"
    if [ $prenorm = 0 ]; then
      same_lines "$d/beam$b.txt" "$name.beam$b" "$name, beam $b"
    else
      # marian-decoder's pre-norm decoder differs from the model it trained
      # and scores with: after the first step its self-attention reads keys
      # and values of the earlier positions without their layer norm
      # (transformer.h: DecoderLayerSelfAttention concatenates the raw
      # inputs, and LayerAttention normalises keys only when they are the
      # query's own input), so its translations are not the argmax of
      # marian-scorer's probabilities, which nmt matches below. Only the
      # first greedy token, chosen before that happens, must agree.
      [ "$b" = 1 ] || continue
      cmp -s <(awk '{print $1}' "$d/beam$b.txt") <(awk '{print $1}' "$name.beam$b") ||
        fail "$name, beam $b: first words differ from marian-decoder's"
    fi
  done
  "$NMT" score -m "$name.nmt" --src test.en --tgt test.de --word-scores --output-format jsonl \
    --threads 1 >"$name.score" 2>err.txt || fail "score -m $name: $(cat err.txt)"
  # marian-scorer --word-scores: "sentence score ||| WordScores= token scores".
  sed 's/.*WordScores= *//' "$d/score.txt" >"$name.tool_tokens"
  compare_scores "$name.score" "$name.tool_tokens" 1e-3 "$name: score -m"
}

# A CTranslate2 fixture: its model directory; the tool's --with_score output
# ("score ||| tokens", --length_penalty 0) for beam 1 and 4, and --task score
# --with_tokens_score ("mean ||| tokens ||| token scores"). Tokens are given
# and written space-separated, as CTranslate2 takes them.
check_ct2() {
  local name=$1 d=$FIX/$1 side=shared
  case $name in *separate*) side=separate ;; esac
  "$NMT" convert "$d" -o "$name.nmt" 2>err.txt || fail "convert $name: $(cat err.txt)"
  for b in 1 4; do
    local tool=${2:-beam}$b.txt
    "$NMT" translate -m "$name.nmt" -i $side.en -o "$name.beam$b" --beam "$b" --alpha 0 \
      --max-length-a 0 --max-length-b 256 --scores --threads 1 2>err.txt || fail "translate $name: $(cat err.txt)"
    same_lines <(sed 's/^[^|]*||| //' "$d/$tool") <(cut -f2- "$name.beam$b") "$name, beam $b"
    python3 - "$d/$tool" "$name.beam$b" <<'PY' || fail "$name, beam $b: search scores differ"
import sys
# A hypothesis cut at the length limit (256 tokens) scores without </s> in
# CTranslate2 and with it in nmt: only those that ended are compared.
tool = [l.split("|||") for l in open(sys.argv[1], encoding="utf-8")]
nmt = [float(l.split("\t")[0]) for l in open(sys.argv[2], encoding="utf-8")]
bad = [i + 1 for i, (t, b) in enumerate(zip(tool, nmt))
       if len(t[1].split()) < 256 and abs(float(t[0]) - b) > 1e-3 * (len(t[1].split()) + 1)]
sys.exit(f"lines {bad[:5]}" if bad else 0)
PY
  done
  "$NMT" score -m "$name.nmt" --src $side.en --tgt $side.de --word-scores --output-format jsonl \
    --threads 1 >"$name.score" 2>err.txt || fail "score -m $name: $(cat err.txt)"
  sed 's/.*||| *//' "$d/score.txt" >"$name.tool_tokens"
  compare_scores "$name.score" "$name.tool_tokens" 1e-3 "$name: score -m"
}

[ -d "$FIX" ] || fail "no fixtures at $FIX"
# The test sentences: the first 100 pairs of test_2016_flickr, which the tools
# translated and scored; as pieces for CTranslate2, cut by the Marian models'
# SentencePiece models, as the fixtures were made.
zcat "$DATA/multi30k/test_2016_flickr.en.gz" | head -100 >test.en
zcat "$DATA/multi30k/test_2016_flickr.de.gz" | head -100 >test.de
pieces() { spm_encode --model "$1" <"$2" || fail "spm_encode $1"; }
pieces "$FIX/marian-opus/vocab.spm" test.en >shared.en
pieces "$FIX/marian-opus/vocab.spm" test.de >shared.de
pieces "$FIX/marian-prenorm/source.spm" test.en >separate.en
pieces "$FIX/marian-prenorm/target.spm" test.de >separate.de
check_marian marian-opus --vocab "$FIX/marian-opus/vocab.spm"
# Without --vocab: the vocabularies named in the model.npz.decoder.yml that
# marian wrote beside the model.
"$NMT" convert "$FIX/marian-opus/model.npz" -o found.nmt 2>err.txt || fail "convert without --vocab: $(cat err.txt)"
"$NMT" translate -m found.nmt -i test.en --beam 4 --alpha 0 --max-length-a 3 --max-length-b 3 \
  --threads 1 -o found.beam4 2>err.txt || fail "translate found.nmt: $(cat err.txt)"
same_lines "$FIX/marian-opus/beam4.txt" found.beam4 "marian-opus converted without --vocab, beam 4"
# Python with tests/npz_arrays.py importable (an .npz read without numpy).
npz_python() { PYTHONPATH=$HERE${PYTHONPATH:+:$PYTHONPATH} python3 "$@"; }

# A model saved without its options in the archive: they come from the
# training config marian writes beside it (MODEL.npz.yml), here the archive's
# own special:model.yml moved out of it.
mkdir -p sep && npz_python - "$FIX/marian-opus/model.npz" sep/model.npz <<'PY' || fail "could not split the fixture's options out"
import sys, zipfile
from npz_arrays import marian_options_text
open(sys.argv[2] + ".yml", "w").write(marian_options_text(sys.argv[1]))
with zipfile.ZipFile(sys.argv[1]) as z, zipfile.ZipFile(sys.argv[2], "w") as out:
    for n in z.namelist():
        if n != "special:model.yml.npy":
            out.writestr(n, z.read(n))
PY
"$NMT" convert sep/model.npz --vocab "$FIX/marian-opus/vocab.spm" -o sep.nmt 2>err.txt ||
  fail "convert with model.npz.yml beside the model: $(cat err.txt)"
"$NMT" translate -m sep.nmt -i test.en --beam 4 --alpha 0 --max-length-a 3 --max-length-b 3 \
  --threads 1 -o sep.beam4 2>err.txt || fail "translate sep.nmt: $(cat err.txt)"
same_lines "$FIX/marian-opus/beam4.txt" sep.beam4 "marian-opus with its options in model.npz.yml, beam 4"
rm sep/model.npz.yml
"$NMT" convert sep/model.npz --vocab "$FIX/marian-opus/vocab.spm" -o none.nmt 2>err.txt &&
  fail "converted a model with no options"
grep -q "no special:model.yml in the archive and no model.npz.yml beside it" err.txt ||
  fail "no options: $(cat err.txt)"
[ ! -e none.nmt ] || fail "wrote none.nmt for a model with no options"
check_marian marian-prenorm --vocab "$FIX/marian-prenorm/source.spm" "$FIX/marian-prenorm/target.spm"
for f in ct2-postnorm-shared-f32 ct2-prenorm-separate-f32; do check_ct2 "$f"; done
# int8 weights: nmt widens them (value x row scale) and computes in f32, which
# is what CTranslate2 computes with --compute_type float32 on the same file.
for f in ct2-postnorm-shared-int8 ct2-prenorm-separate-int8; do check_ct2 "$f" beam-f32compute; done

# Every command loads each imported model: info says where it came from,
# attention draws a sentence, quantize writes an int8 model that translates.
for name in marian-opus marian-prenorm ct2-postnorm-shared-f32 ct2-prenorm-separate-int8; do
  case $name in marian-*) want="from Marian" src=test.en ;; *) want="from CTranslate2" src=shared.en ;; esac
  case $name in *separate*) src=separate.en ;; esac
  tgt=${src%.en}.de
  "$NMT" info "$name.nmt" >info.txt 2>&1 || fail "info $name: $(cat info.txt)"
  grep -qF "$want" info.txt || fail "info $name does not say '$want': $(cat info.txt)"
  "$NMT" attention -m "$name.nmt" -o "$name.svg" "$(head -1 $src)" >/dev/null 2>err.txt ||
    fail "attention $name: $(cat err.txt)"
  grep -q "<svg" "$name.svg" || fail "attention $name: no SVG written"
  "$NMT" quantize "$name.nmt" -o "$name.q.nmt" 2>err.txt || fail "quantize $name: $(cat err.txt)"
  # int8 rounds each weight and each activation to 8 bits with its row's
  # scale, which moves the reference tokens' log-probabilities by about a
  # hundredth on average: 0.0064-0.0117 for these four models (CTranslate2's
  # own int8 of marian-opus, from its fixture's score files: 0.0116), at
  # most 0.013 here, where 7-bit weights (oneDNN's way without VNNI) gave
  # 0.0149-0.0182. A greedy translation changes only where the f32 model's
  # choice was close: at least 67 of the 100 lines stay (71-88; 7-bit
  # weights: 56-65). Ten lines, as before, told little: 6-9 stayed, and 4-6
  # with 7-bit weights.
  for m in "$name.nmt" "$name.q.nmt"; do
    "$NMT" translate -m "$m" -i "$src" -o "$m.out" --beam 1 --threads 1 2>err.txt ||
      fail "translate $m: $(cat err.txt)"
    "$NMT" score -m "$m" --src "$src" --tgt "$tgt" --word-scores --output-format jsonl \
      --threads 1 >"$m.ref.jsonl" 2>err.txt || fail "score -m $m: $(cat err.txt)"
  done
  python3 - "$name.nmt.ref.jsonl" "$name.q.nmt.ref.jsonl" <<'PY' || fail "quantized $name: log-probabilities moved too far"
import json, sys
f32, q = ([json.loads(l)["token_logprobs"] for l in open(p, encoding="utf-8")] for p in sys.argv[1:3])
d = [abs(x - y) for a, b in zip(f32, q, strict=True) for x, y in zip(a, b, strict=True)]
mean = sum(d) / len(d)
print(f"quantized: {len(d)} reference tokens, log-probabilities {mean:.4f} from f32 on average, {max(d):.3f} at most")
sys.exit(0 if mean <= 0.013 else 1)
PY
  same=$(paste -d'\t' "$name.nmt.out" "$name.q.nmt.out" | awk -F'\t' '$1 == $2 && $1 != ""' | wc -l)
  [ "$same" -ge 67 ] || fail "quantized $name: $same of 100 greedy lines equal the f32 model's"
done

# bench/nmt2marian.py, which writes nmt's models for the peers' benchmark
# (bench/peers.sh), is the importer's inverse: the model marian wrote,
# imported and written back, has every parameter byte for byte as marian
# stored it, and imports again to a model that translates the same.
python3 "$HERE/../bench/nmt2marian.py" marian-opus.nmt back 2>err.txt || fail "nmt2marian.py: $(cat err.txt)"
npz_python - "$FIX/marian-opus/model.npz" back/model.npz <<'PY' || fail "nmt2marian.py: not marian's parameters"
import sys
from npz_arrays import arrays
want, got = arrays(sys.argv[1]), arrays(sys.argv[2])
want.pop("special:model.yml"); got.pop("special:model.yml")
if want.keys() != got.keys():
    sys.exit(f"parameters {sorted(want.keys() ^ got.keys())[:4]} are not in both")
bad = [n for n in want if want[n] != got[n]]
sys.exit(f"{len(bad)} parameters differ, first {bad[0]}: {want[bad[0]][:2]} against {got[bad[0]][:2]}" if bad else 0)
PY
"$NMT" convert back -o back.nmt 2>err.txt || fail "convert nmt2marian.py's model: $(cat err.txt)"
"$NMT" translate -m back.nmt -i test.en -o back.beam4 --beam 4 --alpha 0 --max-length-a 3 \
  --max-length-b 3 --threads 1 2>err.txt || fail "translate back.nmt: $(cat err.txt)"
same_lines marian-opus.beam4 back.beam4 "nmt2marian.py's model, beam 4"
# Its other branch, a model nmt trained (its own SentencePiece ids: vocab.spm),
# as bench/peers.sh gives it: a few updates of bench/peers-marian.json made
# small, written out, imported back, translating the same; and the options it
# writes are the ones marian itself wrote for such a model.
python3 - "$HERE/../bench/peers-marian.json" tiny.json <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(encoder_layers=1, decoder_layers=1, d_model=32, d_ff=64, heads=4, vocab_size=300)
json.dump(c, open(sys.argv[2], "w"))
PY
toy=$DATA/joeynmt-toy
# No shortlist: Marian's format carries the weights only, and the round trip
# compares them.
"$NMT" train -c tiny.json --train-src "$toy/train.en" --train-tgt "$toy/train.de" --valid-src "$toy/dev.en" \
  --valid-tgt "$toy/dev.de" --out tiny.nmt --vocab-size 300 --max-steps 20 --batch-tokens 1024 \
  --threads 1 --seed 1 --no-shortlist >/dev/null 2>err.txt || fail "train tiny.json: $(tail -3 err.txt)"
python3 "$HERE/../bench/nmt2marian.py" tiny.nmt tiny 2>err.txt || fail "nmt2marian.py tiny.nmt: $(cat err.txt)"
[ -s tiny/vocab.spm ] && [ ! -e tiny/vocab.yml ] || fail "nmt2marian.py: nmt's own model was not written with vocab.spm"
"$NMT" convert tiny -o tiny-back.nmt 2>err.txt || fail "convert nmt2marian.py's tiny model: $(cat err.txt)"
head -20 "$toy/dev.en" >tiny.in
for m in tiny tiny-back; do
  "$NMT" translate -m $m.nmt -i tiny.in -o $m.out --beam 4 --threads 1 2>err.txt || fail "translate $m: $(cat err.txt)"
done
same_lines tiny.out tiny-back.out "a model nmt trained, through nmt2marian.py and back"
npz_python - "$FIX/marian-opus/model.npz" tiny/model.npz <<'PY' || fail "nmt2marian.py writes options marian would not"
import sys
from npz_arrays import marian_options_text
def options(path):  # marian's flat YAML: "key: value" lines, lists as "  - x" or "  []" lines
    out, key = {}, None
    for line in marian_options_text(path).splitlines():
        if line.startswith(" "):
            out[key] = (out[key] or "") + line.strip() + ";"
        else:
            key, _, value = line.partition(":")
            out[key] = value.strip().strip('"')
    return out
marian, ours = options(sys.argv[1]), options(sys.argv[2])
sizes = {"dim-emb", "dim-vocabs", "enc-depth", "dec-depth", "transformer-dim-ffn", "version"}
bad = [f"{k}: marian {marian.get(k)!r}, nmt2marian.py {v!r}" for k, v in ours.items()
       if k not in sizes and marian.get(k) != v]
sys.exit("; ".join(bad) if bad else 0)
PY
python3 "$HERE/../bench/nmt2marian.py" marian-prenorm.nmt pre 2>err.txt &&
  fail "nmt2marian.py wrote a pre-norm model, which it cannot"
grep -q "config norm is 'pre'" err.txt || fail "nmt2marian.py on pre-norm: $(cat err.txt)"
# -o never replaces a file the conversion read, found beside the model
# rather than named: model.bin, config.json, the vocabularies, source.spm.
cp -r "$FIX/ct2-postnorm-shared-int8" ct && cp -r "$FIX/marian-prenorm" mp
sums() { md5sum ct/* mp/*; }
before=$(sums)
for args in "ct -o ct/model.bin" "ct -o ct/config.json" "ct -o ct/shared_vocabulary.json" \
  "mp/model.npz -o mp/source.spm" "mp/model.npz -o mp/target.spm" "mp/model.npz -o mp/model.npz.decoder.yml"; do
  # shellcheck disable=SC2086
  "$NMT" convert $args 2>err.txt && fail "convert $args: replaced a file of the model"
  grep -q "is the converted model's file .*; refusing to overwrite it" err.txt || fail "convert $args: $(cat err.txt)"
done
[ "$before" = "$(sums)" ] || fail "a refused convert changed the model's files"
"$NMT" convert ct -o ct/model.nmt 2>err.txt || fail "convert into the model's folder: $(cat err.txt)"
# A SentencePiece file that is not one is named.
echo garbage >g.spm
"$NMT" convert mp/model.npz --spm g.spm -o g.nmt 2>err.txt && fail "converted with a garbage --spm"
grep -q "g.spm: invalid SentencePiece model" err.txt || fail "a garbage --spm is not named: $(cat err.txt)"
# CTranslate2's own test models in its oldest formats, which CTranslate2 4.x
# still loads (binary versions 1 and 2: OpenNMT-tf's variable names, item
# sizes instead of types, int16 without a saved scale, int8): each
# transliterates as CTranslate2's ModelVariantTest expects, and the version 2
# model scores its Scoring test's pairs as that test expects (within 1e-5).
OLD=$FIX/ct2-old
for m in v1-aren v1-aren-i16 v2-aren v2-aren-i16 v2-aren-i8; do
  "$NMT" convert "$OLD/$m" -o old-$m.nmt 2>err.txt || fail "convert ct2-old/$m: $(cat err.txt)"
  for beam in 1 2 4; do
    got=$(echo "آ ت ز م و ن" | "$NMT" translate -m old-$m.nmt --beam $beam 2>err.txt)
    [ "$got" = "a t z m o n" ] || fail "ct2-old/$m beam $beam: '$got' ($(cat err.txt)), CTranslate2's test expects 'a t z m o n'"
  done
done
"$NMT" score -m old-v2-aren.nmt --src "$OLD/score.src" --tgt "$OLD/score.tgt" --output-format jsonl \
  --word-scores >old-score.jsonl || fail "score ct2-old/v2-aren"
python3 - old-score.jsonl "$OLD/score.expected" <<'PY' || fail "ct2-old/v2-aren: scores differ from CTranslate2's test"
import json, sys
got = [json.loads(l)["token_logprobs"] for l in open(sys.argv[1])]
want = [[float(x) for x in l.split()] for l in open(sys.argv[2])]
assert len(got) == len(want), (len(got), len(want))
for g, w in zip(got, want):
    assert len(g) == len(w) and max(abs(a - b) for a, b in zip(g, w)) < 1e-5, (g, w)
PY

echo "cli_convert_peers: ok"
