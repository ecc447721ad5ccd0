#!/usr/bin/env bash
# nmt convert on Hugging Face checkpoints that Transformers itself wrote
# (tests/fixtures/hf: MarianMT with tied and with separate vocabularies, the
# latter as pytorch_model.bin, and M2M-100 with NLLB's tokeniser and
# language codes): each translates greedily and with a beam of 4 exactly as
# Transformers' generate did, token for token and score for score, and
# nmt score -m gives the references' log-probabilities of its forward pass
# within 1e-3 (tests/hf_compare.py); int8 (and bf16 where the CPU has it)
# translate them too. Languages are options and jsonl fields; what nmt
# cannot represent, and a pickle that names anything but tensors, is refused
# by name.
# Usage: cli_hf.sh NMT DATA_DIR WORK_DIR
set -uo pipefail
NMT=$1 WORK=$3
HERE=$(cd "$(dirname "$0")" && pwd)
FIX=$HERE/fixtures/hf
rm -rf "$WORK" && mkdir -p "$WORK"
cd "$WORK" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$HERE/cli_common.sh"  # expect

NLLB_LANGS=(--source-lang eng_Latn --target-lang deu_Latn)

# 1. Each fixture converts (detected from config.json) and matches Transformers.
for m in marian-tied marian-separate nllb; do
  expect 0 "nmt convert: wrote $m.nmt (from Hugging Face" "$NMT" convert "$FIX/$m" -o $m.nmt
  langs=()
  [ $m = nllb ] && langs=("${NLLB_LANGS[@]}")
  bf16=1  # where the CPU has it
  probe=$(echo x | "$NMT" translate -m $m.nmt --compute-type bf16 "${langs[@]}" 2>&1)
  case $probe in *"bf16 needs a CPU"*) bf16=0 ;; esac
  python3 "$HERE/hf_compare.py" "$NMT" $m.nmt "$FIX/$m/expected.json" "${langs[@]}" ||
    fail "$m: nmt differs from Transformers"
  python3 "$HERE/hf_compare.py" "$NMT" $m.nmt "$FIX/$m/expected.json" "${langs[@]}" \
    --compute-type int8 || fail "$m: int8"
  if [ $bf16 = 1 ]; then
    python3 "$HERE/hf_compare.py" "$NMT" $m.nmt "$FIX/$m/expected.json" "${langs[@]}" \
      --compute-type bf16 || fail "$m: bf16"
  fi
done
# The tied model as PyTorch saves it: four names of one storage, read once.
expect 0 "nmt convert: wrote tied-bin.nmt (from Hugging Face marian (pytorch_model.bin)" \
  "$NMT" convert "$FIX/marian-tied-bin" -o tied-bin.nmt
python3 "$HERE/hf_compare.py" "$NMT" tied-bin.nmt "$FIX/marian-tied/expected.json" ||
  fail "marian-tied-bin: nmt differs from Transformers"
grep -q "pytorch_model.bin" <("$NMT" info marian-separate.nmt 2>&1) ||
  fail "info does not say the weights came from pytorch_model.bin"
"$NMT" info marian-separate.nmt 2>&1 | grep -q "source vocabulary" ||
  fail "marian-separate: its vocabularies are not separate"

# Shards: the same weights split over two safetensors files and listed by
# model.safetensors.index.json, as Transformers writes a large model, convert
# to the same model.
cp -r "$FIX/marian-tied" sharded && rm sharded/model.safetensors
python3 - "$FIX/marian-tied/model.safetensors" sharded <<'EOF'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
header.pop("__metadata__", None)
names = sorted(header)
weight_map = {}
for k, part in enumerate((names[::2], names[1::2])):
    file = "model-%05d-of-00002.safetensors" % (k + 1)
    head, data = {"__metadata__": {"format": "pt"}}, b""
    for name in part:
        a, b = header[name]["data_offsets"]
        head[name] = dict(header[name], data_offsets=[len(data), len(data) + b - a])
        data += raw[8 + n + a:8 + n + b]
        weight_map[name] = file
    h = json.dumps(head).encode()
    open(sys.argv[2] + "/" + file, "wb").write(struct.pack("<Q", len(h)) + h + data)
json.dump({"metadata": {}, "weight_map": weight_map},
          open(sys.argv[2] + "/model.safetensors.index.json", "w"))
EOF
expect 0 "nmt convert: wrote sharded.nmt (from Hugging Face marian (model-00001-of-00002" \
  "$NMT" convert sharded -o sharded.nmt
python3 "$HERE/hf_compare.py" "$NMT" sharded.nmt "$FIX/marian-tied/expected.json" ||
  fail "sharded: nmt differs from Transformers"
sed -i 's/"model-00002-of-00002.safetensors"/"..\/elsewhere.safetensors"/' sharded/model.safetensors.index.json
expect 1 "is not mapped to a file in the directory" "$NMT" convert sharded -o sharded2.nmt

# 2. Languages: nmt info lists them; one run translates a jsonl file into
#    several, as separate runs do; a missing or unknown one is refused with
#    the list, and a model of one pair refuses them.
"$NMT" info nllb.nmt >info.txt 2>&1 || fail "info nllb.nmt"
grep -q "^languages    202 .*deu_Latn.*zho_Hans" info.txt || fail "info lists no languages: $(cat info.txt)"
src="A man in an orange hat starring at something."
for l in deu_Latn fra_Latn zho_Hans; do
  echo "$src" | "$NMT" translate -m nllb.nmt --scores --source-lang eng_Latn --target-lang $l >>separate.txt ||
    fail "translate into $l"
done
for l in deu_Latn fra_Latn zho_Hans; do
  printf '{"text": "%s", "source_lang": "eng_Latn", "target_lang": "%s"}\n' "$src" $l
done >mixed.jsonl
"$NMT" translate -m nllb.nmt --scores --input-format jsonl <mixed.jsonl >mixed.txt || fail "jsonl languages"
cmp -s separate.txt mixed.txt || fail "jsonl languages differ from separate runs"
# (The random weights end these at once, but not with the same score.)
[ "$(sort -u separate.txt | wc -l)" -eq 3 ] || fail "the target language changes nothing"
# Options give the default a line may override.
printf '{"text": "%s", "target_lang": "fra_Latn"}\n{"text": "%s"}\n' "$src" "$src" >over.jsonl
"$NMT" translate -m nllb.nmt --scores --input-format jsonl "${NLLB_LANGS[@]}" <over.jsonl >over.txt ||
  fail "jsonl over options"
[ "$(sed -n 1p over.txt)" = "$(sed -n 2p separate.txt)" ] &&
  [ "$(sed -n 2p over.txt)" = "$(sed -n 1p separate.txt)" ] || fail "a line's target_lang is not used"
echo "$src" >in.txt
expect 2 "--target-lang: this model is multilingual; say which language (ace_Arab" \
  "$NMT" translate -m nllb.nmt -i in.txt --source-lang eng_Latn
expect 2 "--target-lang: \"klingon\" is not one of this model's languages" \
  "$NMT" translate -m nllb.nmt -i in.txt --source-lang eng_Latn --target-lang klingon
expect 2 "--target-lang: this model translates one language pair" \
  "$NMT" translate -m marian-tied.nmt -i in.txt --target-lang deu
expect 2 "--target-lang: this model is multilingual" \
  "$NMT" score -m nllb.nmt --src in.txt --tgt in.txt --source-lang eng_Latn
# Word alignments, attention maps and HTML would count the language tokens
# as words: refused until they do not.
expect 2 "alignments, attention and HTML are not yet available for multilingual models" \
  "$NMT" translate -m nllb.nmt -i in.txt "${NLLB_LANGS[@]}" --alignments
expect 2 "attention maps are not yet available for multilingual models" \
  "$NMT" attention -m nllb.nmt "$src" -o a.png
printf '{"text": "%s", "source_lang": "eng_Latn", "target_lang": "xx"}\n' "$src" >bad.jsonl
"$NMT" translate -m nllb.nmt --input-format jsonl <bad.jsonl >bad.txt 2>err.txt ||
  fail "a jsonl line with an unknown language stops the run"
grep -q "line 1: target_lang: \"xx\" is not one" err.txt || fail "no warning: $(cat err.txt)"
[ "$(cat bad.txt)" = "" ] || fail "a refused line is not empty"

# OPUS-MT's models into several languages: the target's >>xxx<< token
# starts the source (here two tokens of the fixture's vocabulary renamed).
cp -r "$FIX/marian-tied" opus-mul
python3 - opus-mul/vocab.json <<'EOF'
import json, sys
v = json.load(open(sys.argv[1], encoding="utf-8"))
ids = {i: t for t, i in v.items()}
ids[10], ids[11] = ">>deu<<", ">>fra<<"
json.dump({t: i for i, t in ids.items()}, open(sys.argv[1], "w", encoding="utf-8"),
          ensure_ascii=False)
EOF
expect 0 "nmt convert: wrote mul.nmt" "$NMT" convert opus-mul -o mul.nmt
"$NMT" info mul.nmt 2>&1 |
  grep -q "^languages    2 (source: not used; target: token before the source): deu fra" ||
  fail "OPUS-MT languages: $("$NMT" info mul.nmt 2>&1)"
expect 2 "--target-lang: this model is multilingual; say which language (deu fra)" \
  "$NMT" translate -m mul.nmt -i in.txt
"$NMT" score -m mul.nmt --src in.txt --tgt in.txt --target-lang deu >deu.txt || fail "score deu"
"$NMT" score -m mul.nmt --src in.txt --tgt in.txt --target-lang fra >fra.txt || fail "score fra"
cmp -s deu.txt fra.txt && fail "the >>xxx<< token changes nothing"

# 3. What nmt cannot represent is refused by name; nothing is written.
cp -r "$FIX/marian-tied" other
sed -i 's/"model_type": "marian"/"model_type": "t5"/' other/config.json
expect 1 "other/config.json: \"model_type\": \"t5\": nmt converts MarianMT" \
  "$NMT" convert other -o o.nmt
[ -e o.nmt ] && fail "a refused model was written"
cp -r "$FIX/marian-tied" act
sed -i 's/"activation_function": "[a-z_]*"/"activation_function": "quick_gelu"/' act/config.json
expect 1 "\"activation_function\": \"quick_gelu\": nmt has relu" "$NMT" convert act -o o.nmt
cp -r "$FIX/nllb" notok && rm notok/sentencepiece.bpe.model
expect 1 "notok: no sentencepiece.bpe.model" "$NMT" convert notok -o o.nmt
cp -r "$FIX/marian-tied" noweights && rm noweights/model.safetensors
expect 1 "nor a Marian one (.npz) is in this directory" "$NMT" convert noweights -o o.nmt
expect 1 "noweights: no weights (model.safetensors" "$NMT" convert noweights --from hf -o o.nmt

# 4. A pytorch_model.bin whose pickle names anything but tensors (here
#    os.system) is refused before anything in it is used.
cp -r "$FIX/marian-separate" evil
python3 - evil/pytorch_model.bin <<'EOF'
import sys, zipfile
# GLOBAL os.system, the argument, REDUCE: what a hostile pickle runs.
pkl = b"\x80\x02cos\nsystem\nq\x00X\x0c\x00\x00\x00touch pwned!q\x01\x85q\x02Rq\x03."
with zipfile.ZipFile(sys.argv[1], "w") as z:
    z.writestr("archive/data.pkl", pkl)
    z.writestr("archive/version", "3\n")
EOF
expect 1 "refers to os.system, which no file of tensors needs; refused" "$NMT" convert evil -o o.nmt
[ -e pwned! ] && fail "a pickle ran code"
python3 - evil/pytorch_model.bin <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w") as z:
    z.writestr("archive/data.pkl", b"\x80\x02}q\x00X\x01\x00\x00\x00aq\x01\x8a")  # cut short
EOF
expect 1 "truncated pickle" "$NMT" convert evil -o o.nmt
echo "cli_hf: ok"
