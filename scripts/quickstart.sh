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
# default 10), THREADS (0: all cores), OUT (default quickstart/en-de.nmt),
# CONFIG (default transformer-small). Rerunning continues the same run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
NMT=${NMT:-$root/build/nmt}
MINUTES=${MINUTES:-10}
THREADS=${THREADS:-0}
OUT=${OUT:-quickstart/en-de.nmt}
CONFIG=${CONFIG:-transformer-small}

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
resume=()
[ -d "$OUT.ckpt" ] && resume=(--resume)
# A short run needs a short warmup: the paper's 4000 steps would leave the
# learning rate tiny for the whole budget. Peak lr = 0.5 * 256^-0.5 * 300^-0.5.
set +e
"$NMT" train --config "$CONFIG" \
  --train-src "$train_src" --train-tgt "$train_tgt" \
  --valid-src "$valid_src" --valid-tgt "$valid_tgt" \
  --out "$OUT" --max-minutes "$MINUTES" --threads "$THREADS" \
  --warmup 300 --lr-scale 0.5 --valid-every 200 --valid-sentences 200 \
  --checkpoint-every 200 --checkpoint-minutes 5 "${resume[@]}"
rc=$?
set -e
if [ $rc -ne 0 ]; then
  echo "quickstart: training stopped (exit $rc); rerun to continue from the last checkpoint" >&2
  exit $rc
fi

model=$OUT
[ -s "$OUT.best" ] && model=$OUT.best
echo
echo "== A few test translations ($model, beam 4) =="
hyp=$OUT.test.hyp
"$NMT" translate -m "$model" -i "$test_src" -o "$hyp" --beam 4 --threads "$THREADS"
paste <(gzip -cdf "$test_src" | head -5) <(head -5 "$hyp") | sed 's/\t/\n  -> /'
echo
echo "== Test BLEU ($(gzip -cdf "$test_src" | wc -l) sentences) =="
gzip -cdf "$test_tgt" > "$OUT.test.ref"
"$NMT" score "$OUT.test.ref" -i "$hyp"
echo
echo "Learning curve: $OUT.curve.svg   metrics: $OUT.log.jsonl"
