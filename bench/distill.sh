#!/usr/bin/env bash
# nmt distill's benchmark on Multi30k En->De: a teacher trained by the recipe
# for TEACHER_MINUTES, a student distilled from it in STUDENT_MINUTES (the
# whole of nmt distill: teacher's translations, filter, pilots, student,
# int8), and optionally the recipe's --optimize speed model trained on the
# original data for STUDENT_MINUTES; then each translates test_2016_flickr
# at beam 4, whole process, turn about for ROUNDS rounds (the best of each
# kept), scored as sacreBLEU does, with the peak memory of a translation and
# the model's size. Last, bench/ct2.py runs CTranslate2 at its best
# settings on the teacher, where PYTHON can import ctranslate2.
#
#   bench/distill.sh 60 60
#
# Environment: NMT (build/nmt), DATA (../shared/data), OUT (runs/distill),
# THREADS (0: all cores), ROUNDS (3), SPEED (1: also the --optimize speed
# row), PYTHON (python3; one that imports ctranslate2 for its rows).
# A model that exists is not trained again.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
NMT=${NMT:-$root/build/nmt}
DATA=${DATA:-$root/../shared/data}
OUT=${OUT:-$root/runs/distill}
THREADS=${THREADS:-0}
ROUNDS=${ROUNDS:-3}
SPEED=${SPEED:-0}
PYTHON=${PYTHON:-python3}
tm=${1:-60} sm=${2:-60}
m=$DATA/multi30k
data=(--train-src "$m/train.en.gz" --train-tgt "$m/train.de.gz" --valid-src "$m/val.en.gz"
      --valid-tgt "$m/val.de.gz")
mkdir -p "$OUT"
cd "$OUT"
log() { echo "== $*" >&2; }

if [ ! -s teacher.nmt ]; then
  log "teacher: $NMT train ${data[*]} --out teacher.nmt --max-minutes $tm"
  "$NMT" train "${data[@]}" --out teacher.nmt --max-minutes "$tm" --threads "$THREADS" \
    2> >(tee teacher.err >&2)
fi
if [ ! -s student.nmt ]; then
  resume=()
  [ -d student.nmt.distill ] && resume=(--resume)
  log "student: $NMT distill --teacher teacher.nmt ${data[*]} -o student.nmt --max-minutes $sm"
  /usr/bin/time -v "$NMT" distill --teacher teacher.nmt "${data[@]}" -o student.nmt \
    --max-minutes "$sm" --threads "$THREADS" "${resume[@]}" 2> >(tee student.err >&2)
fi
rows=(teacher teacher-int8 student)
if [ "$SPEED" = 1 ]; then
  if [ ! -s speed.nmt ]; then
    log "speed: $NMT train ${data[*]} --out speed.nmt --max-minutes $sm --optimize speed"
    "$NMT" train "${data[@]}" --out speed.nmt --max-minutes "$sm" --optimize speed \
      --threads "$THREADS" 2> >(tee speed.err >&2)
  fi
  rows+=(speed)
fi

model_of() { case $1 in teacher|teacher-int8) echo teacher.nmt ;; *) echo "$1.nmt" ;; esac; }
extra_of() { case $1 in teacher-int8) echo "--compute-type int8" ;; *) echo "" ;; esac; }
gzip -cd "$m/test_2016_flickr.de.gz" >test.ref
for r in $(seq "$ROUNDS"); do
  for row in "${rows[@]}"; do
    # shellcheck disable=SC2046
    /usr/bin/time -f '%e %M' -o "$row.time.$r" "$NMT" translate -m "$(model_of "$row")" \
      $(extra_of "$row") -i "$m/test_2016_flickr.en.gz" -o "$row.hyp" --beam 4 \
      --threads "$THREADS" 2>/dev/null
  done
done
printf 'row\tBLEU\tchrF\tsent/s\tx teacher\tpeak_MiB\tsize_MiB\tlayers\tweights\n' >results.tsv
for row in "${rows[@]}"; do
  "$NMT" score test.ref -i "$row.hyp" --metrics bleu chrf -f json >"$row.score.json"
  "$NMT" info "$(model_of "$row")" --format json >"$row.info.json"
  python3 - "$row" "$ROUNDS" "$(model_of "$row")" >>results.tsv <<'PY'
import json, os, sys
row, rounds, model = sys.argv[1], int(sys.argv[2]), sys.argv[3]
score = {s["name"]: s["score"] for s in json.load(open(f"{row}.score.json"))}
lines = sum(1 for _ in open(f"{row}.hyp"))
def best(name):
    times = [tuple(map(float, open(f"{name}.time.{r}").read().split()[-2:])) for r in range(1, rounds + 1)]
    return lines / min(t for t, _ in times), max(kb for _, kb in times) / 1024
speed, peak = best(row)
teacher, _ = best("teacher")
info = json.load(open(f"{row}.info.json"))
cfg = info["config"]
weights = "int8" if row == "teacher-int8" else info["weights"]
print(f"{row}\t{score['BLEU']:.1f}\t{score['chrF2']:.1f}\t{speed:.1f}\t{speed / teacher:.2f}\t"
      f"{peak:.0f}\t{os.path.getsize(model) / 2**20:.1f}\t"
      f"{cfg['encoder_layers']}+{cfg['decoder_layers']}\t{weights}")
PY
done
column -t -s $'\t' results.tsv
if "$PYTHON" -c 'import ctranslate2' 2>/dev/null; then
  log "CTranslate2 on the teacher: bench/ct2.py teacher.nmt --types f32,int8"
  NMT=$NMT "$PYTHON" "$root/bench/ct2.py" teacher.nmt --types f32,int8 --threads "$(nproc)" \
    | tee ct2.txt
else
  log "CTranslate2: $PYTHON cannot import ctranslate2; its rows are left out"
fi
