#!/usr/bin/env bash
# The recipe benchmark: `nmt train` given only the data and a budget, on
# several language pairs, beside the same budget with the fixed defaults
# (--no-recipe: the paper's schedule, f32, transformer-small) and with the
# best hand-set recipe found (bench/train_multi30k.sh's, scripts/quickstart.sh's
# before the recipe). Each cell trains, translates the test set (beam 4) and
# scores it as sacreBLEU does (BLEU with the tokeniser the target language
# needs: zh for Chinese, ja-mecab for Japanese, 13a otherwise; and chrF).
#
#   bench/recipe.sh                  # every task at MINUTES, every variant
#   bench/recipe.sh en-de en-zh      # some tasks
#
# Tasks: en-de de-en en-fr (multi30k, test_2016_flickr), en-zh zh-en
# (tatoeba-cmn-eng), en-ja (small_parallel_enja), de-en-big (manythings-deu-eng
# less every pair whose German side is in the Tatoeba test, tested on
# tatoeba-test-v2021-08-07).
# Environment: NMT (build/nmt), DATA (../shared/data), OUT (runs/recipe),
# MINUTES (budgets, default "10"), VARIANTS (default "recipe defaults hand";
# also speed: --optimize speed, the recipe's config with a two-layer
# decoder, in int8 where that validates as well; student: --optimize
# student, a one-layer decoder; recipe-cosine, recipe-isqrt, recipe-f32,
# recipe-b4096: the recipe with that one choice changed),
# THREADS (0: all cores), EXTRA (options added to every nmt train, e.g.
# "--seed 2" for a repeat in another OUT). A cell whose score exists is not run again; every
# finished cell is a row of OUT/results.tsv, and the table is printed at the end.
# sent/s is the beam-4 translation of the test set, whole process (load
# included), best of two runs, in the model's own weights (layers says
# which: f32, or int8 where --optimize speed chose it); peak_MiB is training's.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
NMT=${NMT:-$root/build/nmt}
DATA=${DATA:-$root/../shared/data}
OUT=${OUT:-$root/runs/recipe}
MINUTES=${MINUTES:-10}
VARIANTS=${VARIANTS:-recipe defaults hand}
THREADS=${THREADS:-0}
EXTRA=${EXTRA:-}
tasks=("$@")
[ ${#tasks[@]} -gt 0 ] || tasks=(en-de en-zh de-en en-fr zh-en en-ja de-en-big)
mkdir -p "$OUT"
results=$OUT/results.tsv
[ -s "$results" ] || printf 'task\tminutes\tvariant\tlayers\tBLEU\tchrF\tsent/s\tupdates\ttgt_tok/s\tpeak_MiB\tcommand\n' >"$results"
bf16=f32
grep -qE 'avx512_bf16|amx_bf16' /proc/cpuinfo && bf16=bf16

# The files of a task: train/valid/test source and target, and the BLEU tokeniser.
task_files() {
  local t=$1 m=$DATA/multi30k c=$DATA/tatoeba-cmn-eng j=$DATA/small_parallel_enja
  case $t in
    en-de) echo "$m/train.en.gz $m/train.de.gz $m/val.en.gz $m/val.de.gz $m/test_2016_flickr.en.gz $m/test_2016_flickr.de.gz 13a" ;;
    de-en) echo "$m/train.de.gz $m/train.en.gz $m/val.de.gz $m/val.en.gz $m/test_2016_flickr.de.gz $m/test_2016_flickr.en.gz 13a" ;;
    en-fr) echo "$m/train.en.gz $m/train.fr.gz $m/val.en.gz $m/val.fr.gz $m/test_2016_flickr.en.gz $m/test_2016_flickr.fr.gz 13a" ;;
    en-zh) echo "$c/train.en $c/train.zh $c/dev.en $c/dev.zh $c/test.en $c/test.zh zh" ;;
    zh-en) echo "$c/train.zh $c/train.en $c/dev.zh $c/dev.en $c/test.zh $c/test.en 13a" ;;
    en-ja) echo "$j/train.en $j/train.ja $j/dev.en $j/dev.ja $j/test.en $j/test.ja ja-mecab" ;;
    de-en-big)
      local d=$OUT/data/manythings
      if [ ! -s "$d/train.en" ]; then
        mkdir -p "$d"
        python3 - "$DATA/manythings-deu-eng/deu-eng.zip" "$DATA/tatoeba/tatoeba-test-v2021-08-07.deu" "$d" <<'PY'
import sys, zipfile
zip_path, test_de, out = sys.argv[1:]
test = {l.rstrip("\n") for l in open(test_de, encoding="utf-8")}
with zipfile.ZipFile(zip_path) as z:
    name = next(n for n in z.namelist() if n.endswith("deu.txt"))
    rows = [l.split("\t") for l in z.read(name).decode("utf-8").splitlines()]
pairs = [(r[1], r[0]) for r in rows if len(r) >= 2]
# No German sentence of the test set in training or validation (the data
# README's overlap warning: the two come from tatoeba.org).
kept = [p for p in pairs if p[0] not in test]
dev = kept[7::170][:1000]
dev_set = set(dev)
train = [p for p in kept if p not in dev_set]
for name, part in (("train", train), ("dev", dev)):
    with open(f"{out}/{name}.de", "w", encoding="utf-8") as fd, open(f"{out}/{name}.en", "w", encoding="utf-8") as fe:
        for de, en in part:
            fd.write(de + "\n"); fe.write(en + "\n")
print(f"manythings: {len(pairs)} pairs, {len(pairs)-len(kept)} with a test German sentence removed, "
      f"{len(train)} train, {len(dev)} dev", file=sys.stderr)
PY
      fi
      echo "$d/train.de $d/train.en $d/dev.de $d/dev.en $DATA/tatoeba/tatoeba-test-v2021-08-07.deu $DATA/tatoeba/tatoeba-test-v2021-08-07.eng 13a" ;;
    *) echo "recipe.sh: unknown task $t" >&2; return 1 ;;
  esac
}

# The variant's options beyond the data, budget and output.
variant_options() {
  local v=$1 minutes=$2
  case $v in
    recipe) echo "" ;;
    speed) echo "--optimize speed" ;;
    student) echo "--optimize student" ;;
    # The recipe with one choice overridden: the schedule shapes it chose
    # between, and f32 where it chose bf16.
    recipe-cosine) echo "--lr-schedule cosine" ;;
    recipe-isqrt) echo "--lr-schedule inverse-sqrt" ;;
    recipe-f32) echo "--compute-type f32" ;;
    recipe-b4096) echo "--batch-tokens 4096" ;;
    # What `nmt train` did before the recipe: the paper's schedule (4000
    # warmup updates, inverse square root), 4096-token batches, f32,
    # transformer-small with its 8000 pieces and dropout 0.3, no filters.
    defaults) echo "--no-recipe --no-filter -c transformer-small" ;;
    # The best hand-set recipes found before the recipe existed, in bf16
    # where the CPU has it: scripts/quickstart.sh's for short budgets,
    # bench/train_multi30k.sh's for an hour.
    hand)
      if [ "$minutes" -le 20 ]; then
        echo "--no-recipe -c transformer-small --compute-type $bf16 --warmup 300 --lr-scale 0.5 --valid-every 200 --valid-sentences 200 --checkpoint-every 200"
      else
        echo "--no-recipe -c transformer-small --compute-type $bf16 --batch-tokens 4096 --warmup 1000 --lr-scale 0.5 --checkpoint-minutes 10 --checkpoint-every 1000000 --keep-checkpoints 0 --average-last 5 --valid-every 500 --valid-sentences 500"
      fi ;;
    *) echo "recipe.sh: unknown variant $v" >&2; return 1 ;;
  esac
}

run_cell() {
  local task=$1 minutes=$2 variant=$3
  local dir=$OUT/$task/$minutes-$variant
  [ -s "$dir/score.json" ] && return 0
  read -r tsrc ttgt vsrc vtgt esrc etgt tok < <(task_files "$task")
  local opts
  opts=$(variant_options "$variant" "$minutes")
  rm -rf "$dir"
  mkdir -p "$dir"
  # shellcheck disable=SC2086
  local cmd="$NMT train --train-src $tsrc --train-tgt $ttgt --valid-src $vsrc --valid-tgt $vtgt --out $dir/m.nmt --max-minutes $minutes --threads $THREADS $opts${EXTRA:+ $EXTRA}"
  echo "== $task, $minutes min, $variant: $cmd" >&2
  # shellcheck disable=SC2086
  /usr/bin/time -v $cmd 2> >(tee "$dir/train.err" >&2) >/dev/null
  local best=0
  for _ in 1 2; do
    local t0 t1
    t0=$(date +%s.%N)
    "$NMT" translate -m "$dir/m.nmt" -i "$esrc" -o "$dir/test.hyp" --beam 4 --threads "$THREADS" 2>"$dir/translate.err"
    t1=$(date +%s.%N)
    best=$(python3 -c "import sys; n, a, b, c = sys.argv[1:]; print(max(float(c), int(n) / (float(b) - float(a))))" \
      "$(wc -l <"$dir/test.hyp")" "$t0" "$t1" "$best")
  done
  echo "$best" >"$dir/sent_per_s"
  "$NMT" info "$dir/m.nmt" --format json >"$dir/info.json"
  gzip -cdf "$etgt" >"$dir/test.ref"
  "$NMT" score "$dir/test.ref" -i "$dir/test.hyp" --metrics bleu chrf -tok "$tok" -f json >"$dir/score.json"
  python3 - "$dir" "$task" "$minutes" "$variant" "$cmd" >>"$results" <<'PY'
import json, re, sys
d, task, minutes, variant, cmd = sys.argv[1:]
scores = json.load(open(f"{d}/score.json"))
speed = float(open(f"{d}/sent_per_s").read())
info = json.load(open(f"{d}/info.json"))
cfg = info["config"]
layers = f"{cfg['encoder_layers']}+{cfg['decoder_layers']} {info['weights']}"
score = {s["name"]: s["score"] for s in scores}
train = [json.loads(l) for l in open(f"{d}/m.nmt.log.jsonl")]
steps = [r for r in train if r.get("type") == "train"]
tok = sum(r["tgt_tokens"] for r in steps) / max(sum(r["step_seconds"] for r in steps), 1e-9)
m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(f"{d}/train.err").read())
peak = int(m.group(1)) / 1024 if m else float("nan")
print(f"{task}\t{minutes}\t{variant}\t{layers}\t{score.get('BLEU', float('nan')):.1f}\t"
      f"{score.get('chrF2', float('nan')):.1f}\t{speed:.1f}\t{steps[-1]['step']}\t{tok:.0f}\t{peak:.0f}\t{cmd}")
PY
}

for task in "${tasks[@]}"; do
  for minutes in $MINUTES; do
    for variant in $VARIANTS; do
      run_cell "$task" "$minutes" "$variant"
    done
  done
done
echo
column -t -s $'\t' <(cut -f1-10 "$results")
