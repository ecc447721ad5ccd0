#!/usr/bin/env bash
# Training benchmark: transformer-small on Multi30k En->De (../shared/data),
# validating on val, then test_2016_flickr BLEU (beam 4, alpha 0.6, cased 13a,
# sacreBLEU-identical) of every checkpoint against training minutes.
# Prints target tokens/s and its share of the FP32 peak (6 x parameters
# flops per token), peak memory and validation perplexity.
#
#   bench/train_multi30k.sh              # MINUTES=120 CKPT_MINUTES=10 by default
# Environment: NMT, MINUTES, CKPT_MINUTES, OUT, THREADS, COMPUTE (f32 or bf16,
# nmt train --compute-type), PEAK_GFLOPS (default:
# measured by bench_gemm's FMA loop, if built).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
NMT=${NMT:-$root/build/nmt}
MINUTES=${MINUTES:-120}
CKPT_MINUTES=${CKPT_MINUTES:-10}
OUT=${OUT:-$root/runs/multi30k/en-de.nmt}
THREADS=${THREADS:-2}
COMPUTE=${COMPUTE:-f32}
data=${DATA:-$root/../shared/data/multi30k}
for f in train.en.gz train.de.gz val.en.gz val.de.gz test_2016_flickr.en.gz test_2016_flickr.de.gz; do
  [ -s "$data/$f" ] || { echo "train_multi30k: missing $data/$f (set DATA)" >&2; exit 1; }
done
mkdir -p "$(dirname "$OUT")"

# Peak lr 1e-3 (lr-scale 0.5 x 256^-0.5 x 1000^-0.5), then the paper's
# inverse square-root decay; the final model averages the last 5 checkpoints.
if [ ! -s "$OUT" ]; then
  /usr/bin/time -v "$NMT" train --no-recipe -c transformer-small \
    --train-src "$data/train.en.gz" --train-tgt "$data/train.de.gz" \
    --valid-src "$data/val.en.gz" --valid-tgt "$data/val.de.gz" --out "$OUT" \
    --batch-tokens 4096 --warmup 1000 --lr-scale 0.5 --threads "$THREADS" --seed 1 \
    --compute-type "$COMPUTE" \
    --max-minutes "$MINUTES" --checkpoint-minutes "$CKPT_MINUTES" --checkpoint-every 1000000 \
    --keep-checkpoints 0 --average-last 5 --valid-every 500 --valid-sentences 500 --log-every 200 \
    2> >(tee "$OUT.train.err" >&2)
fi

log=$OUT.log.jsonl
python3 - "$log" "$OUT.train.err" "${PEAK_GFLOPS:-}" <<'PY'
import json, re, sys
log, err, peak = sys.argv[1], sys.argv[2], sys.argv[3]
recs = [json.loads(l) for l in open(log)]
train = [r for r in recs if r.get("type") == "train"]
valid = [r for r in recs if r.get("type") == "valid"]
steady = train[len(train) // 10:] or train
tok = sum(r["tgt_tokens"] for r in steady) / sum(r["step_seconds"] for r in steady)
print(f"steps {train[-1]['step']}, {train[-1]['elapsed_s']/60:.1f} min, "
      f"steady-state {tok:.0f} target tokens/s")
m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(err).read())
if m: print(f"peak memory {int(m.group(1))/1024:.0f} MiB")
params = re.search(r"([0-9.]+)M parameters", open(err).read())
if params:
    flops = 6 * float(params.group(1)) * 1e6 * tok / 1e9
    line = f"training compute {flops:.1f} GFLOP/s (6 x {params.group(1)}M parameters per target token)"
    if peak: line += f" = {100*flops/float(peak):.1f}% of {peak} GFLOP/s"
    print(line)
if valid: print("last validation:", {k: valid[-1][k] for k in valid[-1] if k != "type"})
PY

echo "minutes  step  test_2016_flickr BLEU (beam 4)"
for ck in "$OUT".ckpt/step-*.nmt "$OUT"; do
  step=$(basename "$ck" .nmt | sed 's/^step-0*//')
  [ "$ck" = "$OUT" ] && step=final
  "$NMT" translate -m "$ck" -i "$data/test_2016_flickr.en.gz" -o "$OUT.hyp" --beam 4 --threads "$THREADS" 2>/dev/null
  bleu=$("$NMT" score "$data/test_2016_flickr.de.gz" -i "$OUT.hyp" --no-signature | head -1)
  if [ "$step" = final ]; then mins="end"; else
    mins=$(python3 -c "import json,sys
for l in open('$log'):
  r=json.loads(l)
  if r.get('type')=='train' and r['step']==$step: print(f\"{r['elapsed_s']/60:.1f}\"); break")
  fi
  echo "$mins  $step  $bleu"
done
