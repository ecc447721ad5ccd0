#!/usr/bin/env bash
# Crash-proof training: kill -9 at random moments, resuming each time, must
# leave every file loadable, lose at most one checkpoint interval per kill,
# and end with the same model, byte for byte, as a run never interrupted.
# Also: stale temp files go, a second run into the same OUT is refused with
# the other's pid, a full disk (here a file-size limit) keeps the previous
# checkpoint and says so, a damaged log line is dropped on resume, and
# --average-last says which weights it kept.
# Usage: train_crash.sh NMT DATA_DIR WORK_DIR [KILLS]
set -uo pipefail
NMT=$1 DATA=$2 WORK=$3 KILLS=${4:-12}
rm -rf "$WORK" && mkdir -p "$WORK"
cd "$WORK" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }
toy=$DATA/joeynmt-toy
EVERY=25
ARGS=(train -c transformer-tiny --train-src "$toy/train.en" --train-tgt "$toy/train.de"
  --valid-src "$toy/dev.en" --valid-tgt "$toy/dev.de" --valid-every 100 --valid-sentences 20
  --spm spm.model --batch-tokens 512 --threads 1 --seed 3
  --checkpoint-every $EVERY --keep-checkpoints 3 --average-last 3)
# Background runs start nmt itself (not a subshell), so that kill -9 hits it.
train() {  # OUT, extra options...
  local out=$1; shift
  "$NMT" "${ARGS[@]}" --out "$out" "$@"
}

# One vocabulary for every run (SentencePiece's own trainer, ids as nmt
# wants them), so that the runs differ only in their kills.
cat "$toy/train.en" "$toy/train.de" >spm.txt
spm_train --input=spm.txt --model_prefix=spm --vocab_size=300 --pad_id=0 --unk_id=1 --bos_id=2 \
  --eos_id=3 --character_coverage=1.0 --minloglevel=2 >/dev/null 2>&1 || fail "spm_train"

# The reference: one uninterrupted run, in its own folder under the same
# names, since the options (paths included) are recorded in the model.
mkdir ref && cp spm.model ref/
(cd ref && train k.nmt --max-steps 1000 2>ref.err) || { cat ref/ref.err; fail "reference run"; }

loadable() {  # every model file on disk opens and checks out
  local f
  for f in k.nmt k.nmt.best k.nmt.ckpt/*.nmt; do
    [ -e "$f" ] || continue
    "$NMT" info "$f" >/dev/null 2>info.err || fail "after a kill, $f does not load: $(cat info.err)"
  done
  if command -v python3 >/dev/null && [ -e k.nmt.log.jsonl ]; then
    python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' k.nmt.log.jsonl \
      || fail "after a kill, a log line is not JSON"
  fi
}
last_logged_step() { grep '"type":"train"' k.nmt.log.jsonl 2>/dev/null | grep -o '"step":[0-9]*' | tail -1 | cut -d: -f2; }
last_ckpt_step() { ls k.nmt.ckpt 2>/dev/null | grep '^step-.*\.nmt$' | tail -1 | sed 's/step-0*\([0-9]*\)\.nmt/\1/'; }

RANDOM=7
kills=0
while [ $kills -lt "$KILLS" ]; do
  "$NMT" "${ARGS[@]}" --out k.nmt --max-steps 1000 --resume >/dev/null 2>run.err &
  pid=$!
  sleep "0.$((RANDOM % 9 + 2))"
  if ! kill -0 $pid 2>/dev/null; then
    wait $pid || { cat run.err; fail "a resumed run failed"; }
    break  # finished before this kill
  fi
  kill -9 $pid
  wait $pid 2>/dev/null
  kills=$((kills + 1))
  loadable
  logged=$(last_logged_step); ckpt=$(last_ckpt_step)
  if [ -n "$logged" ]; then
    [ $((logged - ${ckpt:-0})) -le $EVERY ] || fail "kill $kills lost steps ${ckpt:-0}..$logged, more than $EVERY"
  fi
done
[ $kills -ge 10 ] || fail "only $kills kills landed before training finished"
# Stale temporary files, as a kill during a write leaves them, go at the next start.
: >.k.nmt.nmt.tmp.99999; : >k.nmt.ckpt/.step-000000999.nmt.nmt.tmp.12345
# A user's own files of those shapes are not nmt's to remove.
: >k.nmt.tmp.4321; : >.k.nmt.tmp.4322
train k.nmt --max-steps 1000 --resume 2>run.err || { cat run.err; fail "the last resumed run"; }
grep -q "removed .* temporary file(s) left by an interrupted run" run.err || fail "no word of the stale temps"
left=$(ls -A . k.nmt.ckpt | grep '\.nmt\.tmp\.' | grep -v -x -e k.nmt.tmp.4321 -e .k.nmt.tmp.4322)
[ -z "$left" ] || fail "temp files remain: $left"
[ -e k.nmt.tmp.4321 ] && [ -e .k.nmt.tmp.4322 ] || fail "a user's k.nmt.tmp.4321 or .k.nmt.tmp.4322 was removed"
rm -f k.nmt.tmp.4321 .k.nmt.tmp.4322
cmp -s k.nmt ref/k.nmt || fail "after $kills kills the final model differs from the uninterrupted run's"
grep -q "final model: " run.err || fail "--average-last does not say which weights it kept"
grep -q '"type":"final".*"kept":"\(average\|last\)"' k.nmt.log.jsonl || grep -q '"kept":"\(average\|last\)".*"type":"final"' k.nmt.log.jsonl \
  || fail "the log does not record which final weights were kept"
echo "kill -9 soak: $kills kills, final model identical to the uninterrupted run's"

# A second training into the same OUT is refused while the first runs.
"$NMT" "${ARGS[@]}" --out l.nmt --max-steps 100000 >/dev/null 2>first.err &
first=$!
for _ in $(seq 100); do [ -e l.nmt.lock ] && grep -q pid l.nmt.lock 2>/dev/null && break; sleep 0.1; done
train l.nmt --max-steps 100000 >/dev/null 2>second.err && fail "a second run into the same OUT started"
grep -q "in use by another nmt (pid $first on" second.err || fail "the refusal does not name pid $first: $(cat second.err)"
kill $first; wait $first 2>/dev/null

# A damaged log line is dropped on resume, with a word.
echo '{"type":"train","step":2}' >>k.nmt.log.jsonl
train k.nmt --resume --max-steps 1010 2>run.err || { cat run.err; fail "resume over a damaged log line"; }
grep -q "dropped 1 unreadable line" run.err || fail "the damaged log line went unmentioned: $(cat run.err)"

# A full disk while checkpointing: the previous checkpoint stays, and the
# error says so. A file-size limit below a checkpoint's size makes the write
# fail as a full disk would.
before=$(last_ckpt_step)
( ulimit -f 600; train k.nmt --resume --max-steps 1100 ) 2>full.err && fail "training went on with a full disk"
tail -1 full.err | grep -q "the checkpoint of step [0-9]* was not saved (cannot write .*File too large).*previous checkpoint .*step-0*$before.nmt is intact" \
  || fail "full disk: $(tail -1 full.err)"
"$NMT" info "k.nmt.ckpt/$(ls k.nmt.ckpt | grep '^step-' | tail -1)" >/dev/null || fail "the previous checkpoint does not load"
[ -z "$(ls -A k.nmt.ckpt | grep '\.tmp\.')" ] || fail "a failed checkpoint left its temp file"
echo "train crash: all checks passed"
