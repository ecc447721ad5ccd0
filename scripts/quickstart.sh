#!/usr/bin/env bash
# Quickstart: train transformer-small on Multi30k En->De for a short budget,
# translate a few test sentences and print the test BLEU.
#
#   scripts/quickstart.sh                      # finds or downloads Multi30k
#   scripts/quickstart.sh TRAIN.en TRAIN.de VALID.en VALID.de [TEST.en TEST.de]
#
# Data, in this order: the files named as arguments; $DATA (a directory with
# train/val/test_2016_flickr.{en,de}.gz); ../shared/data/multi30k or
# data/multi30k beside the repository; else a download from
# github.com/multi30k/dataset (scripts/get-multi30k.sh).
# Environment: NMT (binary, default build/nmt), MINUTES (training budget,
# default 10), THREADS (default: all cores), OUT (default quickstart/en-de.nmt),
# CONFIG (default: the recipe's). Rerunning continues the same run.
# nmt train is given the data and the budget only: its recipe chooses the
# rest (model, vocabulary, compute type, batch, schedule...) and prints why.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
NMT=${NMT:-$root/build/nmt}
MINUTES=${MINUTES:-10}
THREADS=${THREADS:-}
OUT=${OUT:-quickstart/en-de.nmt}
CONFIG=${CONFIG:-}

if [ ! -x "$NMT" ]; then
  echo "quickstart: $NMT not found; build first: cmake -S . -B build && make -C build -j nmt" >&2
  exit 1
fi

need="train.en.gz train.de.gz val.en.gz val.de.gz test_2016_flickr.en.gz test_2016_flickr.de.gz"
has_all() { for f in $need; do [ -s "$1/$f" ] || return 1; done; }

if [ $# -ge 4 ]; then
  train_src=$1 train_tgt=$2 valid_src=$3 valid_tgt=$4
  test_src=${5:-$3} test_tgt=${6:-$4}
else
  dir=""
  for d in "${DATA:-}" "$root/../shared/data/multi30k" "$root/data/multi30k"; do
    if [ -n "$d" ] && has_all "$d"; then dir=$d; break; fi
  done
  if [ -z "$dir" ]; then
    echo "quickstart: Multi30k not found locally; downloading it into $root/data/multi30k" >&2
    if ! "$root/scripts/get-multi30k.sh" "$root/data/multi30k"; then
      cat >&2 <<MSG
quickstart: could not download Multi30k. Put these files (from
https://github.com/multi30k/dataset, data/task1/raw) in a directory and set
DATA=that/directory, or name your own files:
  $need
  scripts/quickstart.sh TRAIN.en TRAIN.de VALID.en VALID.de [TEST.en TEST.de]
MSG
      exit 1
    fi
    dir=$root/data/multi30k
  fi
  train_src=$dir/train.en.gz train_tgt=$dir/train.de.gz
  valid_src=$dir/val.en.gz valid_tgt=$dir/val.de.gz
  test_src=$dir/test_2016_flickr.en.gz test_tgt=$dir/test_2016_flickr.de.gz
fi

mkdir -p "$(dirname "$OUT")"
extra=()
[ -d "$OUT.ckpt" ] && extra+=(--resume)
[ -n "$CONFIG" ] && extra+=(--config "$CONFIG")
[ -n "$THREADS" ] && extra+=(--threads "$THREADS")
set +e
"$NMT" train --train-src "$train_src" --train-tgt "$train_tgt" \
  --valid-src "$valid_src" --valid-tgt "$valid_tgt" \
  --out "$OUT" --max-minutes "$MINUTES" "${extra[@]}"
rc=$?
set -e
if [ $rc -ne 0 ]; then
  echo "quickstart: training stopped (exit $rc); rerun to continue from the last checkpoint" >&2
  exit $rc
fi

# The final model: the better-validating of the last weights and the
# average of the last checkpoints.
model=$OUT
echo
echo "== A few test translations ($model, beam 4) =="
hyp=$OUT.test.hyp
"$NMT" translate -m "$model" -i "$test_src" -o "$hyp" --beam 4 --threads "${THREADS:-0}"
paste <(gzip -cdf "$test_src" | head -5) <(head -5 "$hyp") | sed 's/\t/\n  -> /'
echo
echo "== Test BLEU ($(gzip -cdf "$test_src" | wc -l) sentences) =="
gzip -cdf "$test_tgt" > "$OUT.test.ref"
"$NMT" score "$OUT.test.ref" -i "$hyp"
echo
echo "Learning curve: $OUT.curve.svg   metrics: $OUT.log.jsonl"
