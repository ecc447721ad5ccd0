#!/usr/bin/env bash
# Distributed training on one machine: `mpirun -np 2 nmt train` (two ranks,
# one thread each, oversubscribed) against one process with --update-freq 2,
# step by step; two identical runs; Ctrl-C (SIGINT to mpirun) ending every
# rank with one checkpoint that resumes; a killed rank ending the run with a
# message that names it. Exits 77 (ctest: skipped) without mpirun or without
# MPI in the build.
# Usage: train_mpi.sh NMT DATA_DIR WORK_DIR
set -uo pipefail
NMT=$1 DATA=$2 WORK=$3
. "$(dirname "$0")/mpi_common.sh"
toy=$DATA/joeynmt-toy
MPIRUN=(mpirun -np 2 --bind-to none)

cat "$toy/train.en" "$toy/train.de" >spm.txt
spm_train --input=spm.txt --model_prefix=spm --vocab_size=300 --pad_id=0 --unk_id=1 --bos_id=2 \
  --eos_id=3 --character_coverage=1.0 --minloglevel=2 >/dev/null 2>&1 || fail "spm_train"
ARGS=(train -c transformer-tiny --train-src "$toy/train.en" --train-tgt "$toy/train.de" --spm spm.model
  --batch-tokens 400 --threads 1 --seed 5 --checkpoint-every 5 --log-every 1 --compute-type f32)
losses() { grep '"type":"train"' "$1" | sed 's/.*"loss":\([-0-9.e]*\).*/\1/'; }

# 1. Two ranks compute what one process computes with --update-freq 2.
"${MPIRUN[@]}" "$NMT" "${ARGS[@]}" --max-steps 20 --out two.nmt >two.out 2>two.err \
  || { cat two.err; fail "mpirun -np 2 nmt train"; }
grep -q "MPI (.*), 2 ranks" two.err || fail "the log does not say how many ranks: $(cat two.err)"
"$NMT" "${ARGS[@]}" --max-steps 20 --update-freq 2 --out one.nmt 2>one.err || { cat one.err; fail "one process"; }
losses two.nmt.log.jsonl >two.loss
losses one.nmt.log.jsonl >one.loss
[ "$(wc -l <two.loss)" -eq 20 ] || fail "expected 20 steps, got $(wc -l <two.loss)"
paste two.loss one.loss | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * $2) { print "step " NR ": " $1 " vs " $2; bad = 1 } } END { exit bad }' \
  || fail "2 ranks and --update-freq 2 differ by more than 1e-5 relative"
# 2. The same run again gives the same losses.
"${MPIRUN[@]}" "$NMT" "${ARGS[@]}" --max-steps 20 --out again.nmt >/dev/null 2>again.err || fail "second run"
losses again.nmt.log.jsonl | cmp -s - two.loss || fail "two runs with 2 ranks differ"
echo "2 ranks = --update-freq 2 within 1e-5 for 20 steps; repeatable"

# 3. Ctrl-C: every rank finishes its step, one checkpoint is written, the
# run ends; --resume continues it.
"${MPIRUN[@]}" "$NMT" "${ARGS[@]}" --max-steps 100000 --out int.nmt >/dev/null 2>int.err &
run=$!
for _ in $(seq 150); do [ -n "$(ls int.nmt.ckpt 2>/dev/null)" ] && break; sleep 0.2; done
kill -INT $run
for _ in $(seq 300); do kill -0 $run 2>/dev/null || break; sleep 0.1; done
kill -0 $run 2>/dev/null && { kill -9 $run; fail "mpirun did not end within 30 s of SIGINT"; }
wait $run
grep -q "interrupted at step" int.err || fail "no word of the interruption: $(tail -5 int.err)"
step=$(ls int.nmt.ckpt | tail -1 | sed 's/step-0*\([0-9]*\)\.nmt/\1/')
"${MPIRUN[@]}" "$NMT" "${ARGS[@]}" --max-steps $((step + 3)) --resume --out int.nmt >/dev/null 2>resume.err \
  || { cat resume.err; fail "resume after SIGINT"; }
grep -q "resuming from .*step-0*$step.nmt" resume.err || fail "did not resume from step $step"
"$NMT" info int.nmt >/dev/null || fail "the resumed run's model does not load"
echo "SIGINT: stopped at step $step with a checkpoint, resumed to $((step + 3))"

# 4. A rank that dies ends the run, with a message naming it.
"${MPIRUN[@]}" "$NMT" "${ARGS[@]}" --max-steps 100000 --out dead.nmt >/dev/null 2>dead.err &
run=$!
for _ in $(seq 150); do [ -n "$(ls dead.nmt.ckpt 2>/dev/null)" ] && break; sleep 0.2; done
victim=$(pgrep -P $run -f "nmt train" | tail -1)
[ -n "$victim" ] || fail "no rank process found under mpirun"
kill -9 "$victim"
for _ in $(seq 300); do kill -0 $run 2>/dev/null || break; sleep 0.1; done
kill -0 $run 2>/dev/null && { kill -9 $run; fail "the run went on for 30 s after a rank died"; }
wait $run && fail "a run with a dead rank exited 0"
grep -q "process rank [0-9]* .*exited on signal 9" dead.err \
  || fail "the error does not name the rank: $(tail -5 dead.err)"
for f in dead.nmt.ckpt/*.nmt; do "$NMT" info "$f" >/dev/null || fail "$f does not load"; done
echo "killed rank: run ended; $(grep -m1 'process rank' dead.err)"
echo "train mpi: all checks passed"
