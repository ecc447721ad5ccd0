#!/usr/bin/env bash
# Data-parallel scaling on this machine: transformer-small on Multi30k
# En->De, the same options and seed, as
#   1 process x 1 thread, 2 processes x 1 thread (mpirun), 1 process x 2 threads,
# STEPS updates each (default 60) of --batch-tokens 4096 per process. Prints
# target tokens/s over the updates after the first 10 (from the JSON-lines
# log: the update's target tokens over rank 0's step time), the speed-up
# against one process and thread, peak memory per process, and then the
# allreduce time of small's and base's gradients over loopback.
#   bench/train_scaling.sh [STEPS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
NMT=${NMT:-$root/build/nmt}
STEPS=${1:-60}
data=${DATA:-$root/../shared/data/multi30k}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# One vocabulary for every run.
"$NMT" train --no-recipe -c transformer-small --train-src "$data/train.en.gz" --train-tgt "$data/train.de.gz" \
  --max-steps 1 --out "$work/v.nmt" --threads 2 2>/dev/null
"$NMT" info "$work/v.nmt" --format json >/dev/null
run() {  # name launcher... -- threads
  local name=$1 threads=$2; shift 2
  /usr/bin/time -f "%M" -o "$work/$name.rss" "$@" "$NMT" train --no-recipe -c transformer-small \
    --train-src "$data/train.en.gz" --train-tgt "$data/train.de.gz" --out "$work/$name.nmt" \
    --spm "$work/spm.model" --batch-tokens 4096 --warmup 1000 --lr-scale 0.5 --seed 1 \
    --threads "$threads" --max-steps "$STEPS" --checkpoint-every 0 --log-every 1000 2>"$work/$name.err"
  awk -F'"tgt_tokens":' '/"type":"train"/ { split($2, a, ","); t = a[1];
      match($0, /"step_seconds":[0-9.e-]+/); s = substr($0, RSTART + 15, RLENGTH - 15);
      match($0, /"step":[0-9]+/); k = substr($0, RSTART + 7, RLENGTH - 7) + 0;
      if (k > 10) { tok += t; sec += s } } END { printf "%.1f", tok / sec }' "$work/$name.nmt.log.jsonl"
}
# The vocabulary file, from v.nmt (SentencePiece's bytes are its last tensor).
python3 - "$work/v.nmt" "$work/spm.model" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n]); s, e = h["vocab/sentencepiece"]["data_offsets"]
open(sys.argv[2], "wb").write(b[8 + n + s:8 + n + e])
PY
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
printf '%-26s %12s %9s %12s\n' run "tgt tok/s" speed-up "max RSS MiB"
base=$(run one 1)
printf '%-26s %12s %9s %12.0f\n' "1 process x 1 thread" "$base" 1.00 "$(($(cat "$work/one.rss") / 1024))"
two=$(run two 1 mpirun -np 2 --bind-to none)
printf '%-26s %12s %9.2f %12.0f\n' "2 processes x 1 thread" "$two" "$(echo "$two / $base" | bc -l)" "$(($(cat "$work/two.rss") / 1024))"
thr=$(run thr 2)
printf '%-26s %12s %9.2f %12.0f\n' "1 process x 2 threads" "$thr" "$(echo "$thr / $base" | bc -l)" "$(($(cat "$work/thr.rss") / 1024))"
echo
mpirun -np 2 --bind-to none "$root/build/bench/bench_allreduce"
