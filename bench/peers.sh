#!/usr/bin/env bash
# What switching buys: one Marian model translated by marian-decoder, by
# CTranslate2 (the model converted by its own Marian converter) and by nmt (the
# model imported with nmt convert), on the same text with the same search
# (beam 4, no length normalisation), side by side in one run, f32 and int8.
# Each figure is the best of ROUNDS alternated rounds; sentences/s count the
# whole pipeline a user runs (text in, text out: CTranslate2's SentencePiece
# encoding and decoding included, as Marian and nmt do it inside).
#
#   bench/peers.sh MODEL.nmt [TEXT]
#   bench/peers.sh MARIAN_DIR CT2_F32_DIR CT2_INT8_DIR [TEXT]
#
# MODEL.nmt: a model nmt trained with Marian's architecture (-c
# bench/peers-marian.json), written as a Marian model by bench/nmt2marian.py
# and converted to CTranslate2 (f32 and --quantization int8) by CTranslate2's
# own Marian converter, which runs from CT2_PYTHON (CTranslate2's python/
# source directory; needs numpy and PyYAML). Marian trains slowly on a CPU:
# this gives the tools a model of a size people translate with.
# MARIAN_DIR holds model.npz and vocab.spm (one SentencePiece model, as
# OPUS-MT's); the CT2 directories are its conversions (ct2-marian-converter,
# with --quantization int8 for the second). TEXT: default the 1000 English
# sentences of Multi30k's test_2016_flickr. The tools are built outside this
# repository: MARIAN_BIN (marian's build directory: marian-decoder, and
# marian-conv for Marian's own int8, intgemm8), CT2_BIN (CTranslate2's).
# Environment: ROUNDS (default 2), THREADS (default: all cores).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
NMT=${NMT:-$root/build/nmt}
MARIAN_BIN=${MARIAN_BIN:?marian build directory (marian-decoder)}
CT2_BIN=${CT2_BIN:?CTranslate2 build directory (cli/ct2-translator, libctranslate2.so)}
ROUNDS=${ROUNDS:-2}
THREADS=${THREADS:-$(nproc)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ $# -ge 1 ] && [ -f "$1" ]; then
  CT2_PYTHON=${CT2_PYTHON:?CTranslate2 python/ source directory, for its Marian converter}
  MD=$tmp/marian C32=$tmp/ct2-f32 C8=$tmp/ct2-int8
  TEXT=${2:-$root/../shared/data/multi30k/test_2016_flickr.en.gz}
  python3 "$root/bench/nmt2marian.py" "$1" "$MD" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
  [ -s "$MD/vocab.spm" ] || { echo "peers: $1: a model with imported ids (vocab.yml); give nmt's own" >&2; exit 1; }
  # CTranslate2's converter takes Marian's vocab.yml: the pieces in id order.
  spm_export_vocab --model "$MD/vocab.spm" | python3 -c '
import json, sys
for i, l in enumerate(sys.stdin):
    print("%s: %d" % (json.dumps(l.rstrip("\n").split("\t")[0], ensure_ascii=False), i))' >"$MD/vocab.yml"
  for q in f32 int8; do
    d=$C32; qa=()
    [ $q = int8 ] && d=$C8 qa=(--quantization int8)
    PYTHONPATH=$CT2_PYTHON python3 -m ctranslate2.converters.marian --model_path "$MD/model.npz" \
      --vocab_paths "$MD/vocab.yml" "$MD/vocab.yml" --output_dir "$d" "${qa[@]}" >"$tmp/err" 2>&1 ||
      { cat "$tmp/err" >&2; echo "peers: CTranslate2's Marian converter failed ($q)" >&2; exit 1; }
  done
else
  [ $# -ge 3 ] || { echo "usage: peers.sh MODEL.nmt [TEXT] | MARIAN_DIR CT2_F32_DIR CT2_INT8_DIR [TEXT]" >&2; exit 2; }
  MD=$1 C32=$2 C8=$3
  TEXT=${4:-$root/../shared/data/multi30k/test_2016_flickr.en.gz}
fi
# The commands below are strings that bash -c splits at spaces.
case "$NMT$MD$C32$C8$MARIAN_BIN$CT2_BIN$tmp" in
  *" "*) echo "peers: a path with a space in it; move the tools or the models" >&2; exit 2 ;;
esac
gzip -cdf "$TEXT" >"$tmp/in.txt"
spm=$MD/vocab.spm
NAME=peers
. "$root/bench/side_by_side.sh"
quiet "$NMT" convert "$MD/model.npz" --vocab "$spm" -o "$tmp/m.nmt"
quiet "$NMT" quantize "$tmp/m.nmt" -o "$tmp/m8.nmt"
export LD_LIBRARY_PATH=$CT2_BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# The runs: name, then the command; each reads $tmp/in.txt and writes $tmp/NAME.out.
ct2() {  # ct2 MODEL INTER INTRA [compute type]
  spm_encode --model "$spm" <"$tmp/in.txt" |
    "$CT2_BIN/cli/ct2-translator" --model "$1" --inter_threads "$2" --intra_threads "$3" \
      --beam_size 4 --length_penalty 0 --batch_size 32 --max_decoding_length 256 ${4:+--compute_type $4} 2>/dev/null |
    spm_decode --model "$spm"
}
# The same search everywhere: beam 4, no length normalisation, at most 3n+3
# target pieces (Marian's --max-length-factor 3 with its </s>).
marian="$MARIAN_BIN/marian-decoder -v $spm $spm --beam-size 4 --normalize 0 --cpu-threads $THREADS --mini-batch 32 --maxi-batch 100 --maxi-batch-sort src --quiet"
nmt="$NMT translate --beam 4 --alpha 0 --max-length-a 3 --max-length-b 3 --workers $THREADS --threads 1"
add "marian-decoder f32" "$marian -m $MD/model.npz"
add "ct2 f32 (1x$THREADS)" "ct2 $C32 1 $THREADS"
add "ct2 f32 (${THREADS}x1)" "ct2 $C32 $THREADS 1"
add "nmt f32" "$nmt -m $tmp/m.nmt"
# Marian's own int8: its intgemm 8-bit matrices, written by marian-conv.
if [ -x "$MARIAN_BIN/marian-conv" ]; then
  quiet "$MARIAN_BIN/marian-conv" -f "$MD/model.npz" -t "$tmp/marian-int8.bin" --gemm-type intgemm8
  add "marian-decoder int8" "$marian -m $tmp/marian-int8.bin"
fi
add "ct2 int8 (1x$THREADS)" "ct2 $C8 1 $THREADS"
add "ct2 int8 (${THREADS}x1)" "ct2 $C8 $THREADS 1"
add "nmt int8" "$nmt -m $tmp/m8.nmt"
if grep -qE 'avx512_bf16|amx_bf16' /proc/cpuinfo; then
  add "nmt bf16" "$nmt -m $tmp/m.nmt --compute-type bf16"
fi

export -f ct2
export spm tmp CT2_BIN
run_rounds
print_table
