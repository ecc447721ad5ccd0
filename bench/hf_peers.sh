#!/usr/bin/env bash
# A Hugging Face MarianMT model translated by Transformers' generate, by
# CTranslate2 (the directory converted by its ct2-transformers-converter) and
# by nmt (converted by nmt convert), on the same text with the same search
# (beam 4, no length normalisation), side by side in one run, f32 and int8:
# sentences/s of the whole process (text in, text out, the model's load
# included) and peak memory, best of ROUNDS alternated rounds, and how many
# lines equal nmt's f32 ones.
#
#   bench/hf_peers.sh MODEL.nmt|HF_DIR [TEXT]
#
# MODEL.nmt: a model nmt trained with Marian's architecture (-c
# bench/peers-marian.json), written as a MarianMT directory by
# bench/nmt2hf.py; or HF_DIR, such a directory (an OPUS-MT download).
# TEXT: default the 1000 English sentences of Multi30k's test_2016_flickr.
# PYTHON: a python with transformers, torch, sentencepiece and ctranslate2
# (a virtual environment outside this repository; default
# ../venv-hf/bin/python beside it, as ../shared is). Environment: ROUNDS (default 2), THREADS
# (default: all cores).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
NMT=${NMT:-$root/build/nmt}
PYTHON=${PYTHON:-$root/../venv-hf/bin/python}
ROUNDS=${ROUNDS:-2}
THREADS=${THREADS:-$(nproc)}
TEXT=${2:-$root/../shared/data/multi30k/test_2016_flickr.en.gz}
[ $# -ge 1 ] || { echo "usage: hf_peers.sh MODEL.nmt|HF_DIR [TEXT]" >&2; exit 2; }
"$PYTHON" -c "import transformers, torch, ctranslate2, sentencepiece" 2>/dev/null ||
  { echo "hf_peers: $PYTHON lacks transformers, torch, ctranslate2 or sentencepiece" >&2; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
case "$NMT$PYTHON$tmp$root" in
  *" "*) echo "hf_peers: a path with a space in it; move the tools or the models" >&2; exit 2 ;;
esac
NAME=hf_peers
. "$root/bench/side_by_side.sh"
if [ -f "$1" ]; then
  HF=$tmp/hf
  quiet "$PYTHON" "$root/bench/nmt2hf.py" "$1" "$HF"
else
  HF=$1
fi
ct2_convert=$(dirname "$PYTHON")/ct2-transformers-converter
quiet "$ct2_convert" --model "$HF" --output_dir "$tmp/ct2-f32"
quiet "$ct2_convert" --model "$HF" --output_dir "$tmp/ct2-int8" --quantization int8
quiet "$NMT" convert "$HF" -o "$tmp/m.nmt"
quiet "$NMT" quantize "$tmp/m.nmt" -o "$tmp/m8.nmt"
gzip -cdf "$TEXT" >"$tmp/in.txt"

run="$PYTHON $root/bench/hf_run.py"
nmt="$NMT translate --beam 4 --alpha 0 --max-length-a 0 --max-length-b 255 --workers $THREADS --threads 1"
add "transformers f32" "$run transformers $HF $THREADS"
add "ct2 f32 (1x$THREADS)" "$run ctranslate2 $tmp/ct2-f32 $HF 1 $THREADS"
add "ct2 f32 (${THREADS}x1)" "$run ctranslate2 $tmp/ct2-f32 $HF $THREADS 1"
add "nmt f32" "$nmt -m $tmp/m.nmt"
add "transformers int8" "$run transformers $HF $THREADS int8"
add "ct2 int8 (1x$THREADS)" "$run ctranslate2 $tmp/ct2-int8 $HF 1 $THREADS"
add "ct2 int8 (${THREADS}x1)" "$run ctranslate2 $tmp/ct2-int8 $HF $THREADS 1"
add "nmt int8" "$nmt -m $tmp/m8.nmt"

run_rounds
print_table
echo "model: $("$NMT" info "$tmp/m.nmt" 2>&1 | grep '^config' | sed 's/^config *//')"
