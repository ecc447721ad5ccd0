#!/usr/bin/env bash
# Batch-invariant output: each line of test_2016_flickr gets byte-identical
# translation, score and log-probability whatever its neighbours, the
# batching (--batch-tokens, and continuous against static batches: sentences
# that join a running batch), the workers and the threads, in its own order
# and in a shuffled copy. The model is a transformer-tiny trained here on
# Multi30k for a few seconds: poor, but its outputs vary in length and
# content, which is what batching could disturb. Also: stopping a 1-best
# search early finds the same first hypothesis as an n-best search.
# Usage: batch_invariance.sh NMT DATA_DIR WORK_DIR
set -uo pipefail
NMT=$1 DATA=$2 WORK=$3
rm -rf "$WORK" && mkdir -p "$WORK"
fail() { echo "FAIL: $*" >&2; exit 1; }
m30k=$DATA/multi30k
"$NMT" train -c transformer-tiny --train-src "$m30k/train.en.gz" --train-tgt "$m30k/train.de.gz" \
  --out "$WORK/m.nmt" --vocab-size 1000 --max-steps 500 --warmup 150 --batch-tokens 2048 \
  --seed 1 2>"$WORK/train.err" || { cat "$WORK/train.err"; fail "train"; }

zcat "$m30k/test_2016_flickr.en.gz" >"$WORK/test.en"
n=$(wc -l <"$WORK/test.en")
# A fixed shuffle; perm holds each shuffled line's original number.
awk '{ printf "%d\t%s\n", NR, $0 }' "$WORK/test.en" | sort -t$'\t' -k1,1 -R --random-source=<(yes) \
  >"$WORK/shuffled.tsv"
cut -f1 "$WORK/shuffled.tsv" >"$WORK/perm"
cut -f2- "$WORK/shuffled.tsv" >"$WORK/shuffled.en"
cmp -s "$WORK/test.en" "$WORK/shuffled.en" && fail "the shuffle left the order unchanged"

# Everything but the line number, in input order.
strip() { sed 's/^{"line":[0-9]*,//'; }
translate() {  # INPUT OUTPUT ARGS...
  local in=$1 out=$2
  shift 2
  "$NMT" translate -m "$WORK/m.nmt" -i "$in" --format jsonl --beam 4 "$@" 2>>"$WORK/err" | strip >"$out" \
    || fail "translate $*"
  [ "$(wc -l <"$out")" -eq "$n" ] || fail "translate $*: expected $n lines"
}
translate "$WORK/test.en" "$WORK/ref" --batch-tokens 4096 --threads 1 --workers 1 --batching static
[ "$(sort -u "$WORK/ref" | wc -l)" -gt $((n / 2)) ] || fail "the model's outputs are too uniform to test anything"
# same_as REF ARGS...: the test set in order, and its shuffled copy put back
# in order, each translated with ARGS, must equal REF byte for byte.
runs=0
same_as() {
  local ref=$1
  shift
  translate "$WORK/test.en" "$WORK/out" "$@"
  cmp -s "$ref" "$WORK/out" || fail "$*: $(diff "$ref" "$WORK/out" | grep -c '^>') lines differ"
  translate "$WORK/shuffled.en" "$WORK/out" "$@"
  paste "$WORK/perm" "$WORK/out" | sort -n -k1,1 | cut -f2- >"$WORK/unshuffled"
  cmp -s "$ref" "$WORK/unshuffled" ||
    fail "shuffled, $*: $(diff "$ref" "$WORK/unshuffled" | grep -c '^>') lines differ"
  runs=$((runs + 2))
}
# Static batches (the default) and continuous batching, where sentences
# join running batches as others finish: the same bytes.
for batching in static continuous; do
  for bt in 64 300 1000 4096 16000; do
    for threads in 1 2; do
      for workers in 1 3; do
        same_as "$WORK/ref" --batch-tokens "$bt" --threads "$threads" --workers "$workers" \
          --batching "$batching"
      done
    done
  done
done
echo "batch invariance: $runs runs of $n lines, all identical to the reference"

# With the shortlist that training built: each sentence's output columns are
# its own pieces, however many its batch's union holds (from one sentence's
# to nearly the whole vocabulary at 16000 tokens).
translate "$WORK/test.en" "$WORK/ref_sl" --batch-tokens 4096 --threads 1 --workers 1 --shortlist on \
  --batching static
runs=0
for batching in static continuous; do
  for bt in 64 1000 16000; do
    for workers in 1 3; do
      same_as "$WORK/ref_sl" --batch-tokens "$bt" --threads 1 --workers "$workers" --shortlist on \
        --batching "$batching"
    done
  done
done
echo "batch invariance with the shortlist: $runs runs of $n lines, all identical to its reference"

# int8: each row's activations are rounded with their own scale, so the
# batching, static or continuous, changes nothing either.
translate "$WORK/test.en" "$WORK/ref_int8" --batch-tokens 4096 --threads 1 --workers 1 \
  --compute-type int8 --batching static
runs=0
for batching in static continuous; do
  for bt in 64 300; do
    same_as "$WORK/ref_int8" --batch-tokens "$bt" --threads 1 --workers 3 --compute-type int8 \
      --batching "$batching"
  done
done
echo "batch invariance in int8: $runs runs of $n lines, all identical to its reference"

# Where continuous batching cannot apply (alignments need each batch to run
# to its end) it says so, once, and the batches run static.
translate "$WORK/test.en" "$WORK/al_static" --batch-tokens 300 --alignments --batching static
: >"$WORK/err"
translate "$WORK/test.en" "$WORK/al_cont" --batch-tokens 300 --alignments --batching continuous
cmp -s "$WORK/al_static" "$WORK/al_cont" || fail "--alignments with --batching continuous changed the output"
[ "$(grep -c 'continuous batching does not apply: alignments' "$WORK/err")" -eq 1 ] ||
  fail "--alignments with --batching continuous: expected one warning, stderr: $(cat "$WORK/err")"
echo "continuous batching with alignments: one warning, static batches, the same output"

# Stopping: a 1-best search ends a sentence once its best finished
# hypothesis beats what the live ones could score a few tokens on; with
# --n-best 4 it goes on until 4 have finished and the worst of them does.
# The longer search must not find a better first hypothesis (looking no
# tokens ahead, 24 of these 1000 lines changed).
translate "$WORK/test.en" "$WORK/nbest" --n-best 4
python3 - "$WORK/ref" "$WORK/nbest" <<'PY' || fail "the 1-best search stopped before its best hypothesis"
import json, sys
a = [json.loads("{" + l) for l in open(sys.argv[1])]
b = [json.loads("{" + l) for l in open(sys.argv[2])]
bad = [i + 1 for i, (x, y) in enumerate(zip(a, b))
       if (x["translation"], x["score"], x["logprob"]) != (y["translation"], y["score"], y["logprob"])]
print(f"stopping: {len(bad)} of {len(a)} first hypotheses differ with --n-best 4" +
      (f", lines {bad[:5]}" if bad else ""))
sys.exit(1 if bad or len(a) != len(b) else 0)
PY
