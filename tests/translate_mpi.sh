#!/usr/bin/env bash
# Distributed translation on one machine: `mpirun -np N nmt translate` writes
# the bytes one process writes, for beam search, n-best jsonl, sampling,
# several inputs into --output-dir and to stdout, gzip, stdin, inputs of 0, 1
# and 4 lines, and short last rounds split unevenly (301 lines; 3 ranks);
# each rank translates its share (a bad line's warning comes from the rank
# that parsed it); a rank killed mid-run fails the run with mpirun's message
# naming it and leaves the old output untouched (rank 0 removes its
# temporary file when mpirun ends it; one killed outright leaves it for the
# next run to remove); an input or output rank 0 refuses ends every rank at
# once with one message; commands that run in one process refuse a launcher. The model is a
# transformer-tiny trained here for a few seconds. Exits 77 (ctest: skipped)
# without mpirun or without MPI in the build.
# Usage: translate_mpi.sh NMT DATA_DIR WORK_DIR
set -uo pipefail
NMT=$1 DATA=$2 WORK=$3
. "$(dirname "$0")/mpi_common.sh"
m30k=$DATA/multi30k
mpi() { local n=$1; shift; timeout 300 mpirun -np "$n" --bind-to none "$NMT" "$@"; }

"$NMT" train -c transformer-tiny --train-src "$m30k/train.en.gz" --train-tgt "$m30k/train.de.gz" \
  --out m.nmt --vocab-size 1000 --max-steps 300 --warmup 100 --batch-tokens 2048 --seed 1 \
  --no-recipe 2>train.err || { cat train.err; fail "train"; }
# 301 lines, an empty one and a bad UTF-8 one among them: rounds of 14 and
# 21 lines end in 7 (4 + 3) and 7 (3 + 3 + 1).
zcat "$m30k/test_2016_flickr.en.gz" | head -301 >test.en
sed -i '5s/.*//; 17s/$/ \xff\xfe/' test.en
zcat "$m30k/val.en.gz" | head -50 >val.en

same() {  # NAME ARGS...: one process to one.out, then 2 and 3 ranks
  local name=$1
  shift
  "$NMT" translate -m m.nmt "$@" -o "$name.1" 2>"$name.1.err" || { cat "$name.1.err"; fail "$name: one process"; }
  [ -s "$name.1" ] || fail "$name: no output"
  for n in 2 3; do
    mpi "$n" translate -m m.nmt "$@" -o "$name.$n" >"$name.$n.out" 2>"$name.$n.err" \
      || { cat "$name.$n.err"; fail "$name: $n ranks"; }
    cmp -s "$name.1" "$name.$n" || fail "$name: $n ranks wrote other bytes than one process: $(cmp "$name.1" "$name.$n")"
  done
  echo "$name: 2 and 3 ranks = one process ($(wc -l <"$name.1") lines)"
}
same beam4 -i test.en --beam 4 --window 7 --threads 1 --workers 1
same nbest -i test.en --beam 4 --n-best 3 --format jsonl --window 7
same sample -i test.en --sampling topk:10 --seed 7 --n-best 2 --window 16
same window64 -i test.en --window 64
"$NMT" translate -m m.nmt -i test.en -o one.gz 2>/dev/null && mpi 2 translate -m m.nmt -i test.en -o two.gz 2>/dev/null \
  || fail "gzip output"
cmp -s <(zcat one.gz) <(zcat two.gz) || fail "gzip output of 2 ranks differs"
# The warnings about line 17's bytes are rank 0's, once.
[ "$(grep -c 'invalid UTF-8' beam4.2.err)" -eq "$(grep -c 'invalid UTF-8' beam4.1.err)" ] \
  || fail "the warnings differ: $(cat beam4.2.err)"
# stdout, and stdin (which mpirun gives rank 0).
mpi 2 translate -m m.nmt --window 9 <test.en >stdout.2 2>/dev/null || fail "stdin to stdout"
"$NMT" translate -m m.nmt <test.en >stdout.1 2>/dev/null
cmp -s stdout.1 stdout.2 || fail "stdin to stdout: 2 ranks differ from one process"
# Several inputs, one output each.
"$NMT" translate -m m.nmt -i test.en val.en --output-dir dir1 --suffix de 2>/dev/null || fail "--output-dir"
mpi 2 translate -m m.nmt -i test.en val.en --output-dir dir2 --suffix de --window 5 2>/dev/null \
  || fail "--output-dir with 2 ranks"
for f in test.de val.de; do cmp -s "dir1/$f" "dir2/$f" || fail "--output-dir: $f differs"; done
# Several inputs to one output, and inputs smaller than a round.
head -4 test.en >four.en
head -1 test.en >one.en
mpi 3 translate -m m.nmt -i four.en one.en val.en --window 2 >many.3 2>/dev/null || fail "several inputs, 3 ranks"
"$NMT" translate -m m.nmt -i four.en one.en val.en >many.1 2>/dev/null
cmp -s many.1 many.3 || fail "several inputs to stdout: 3 ranks differ from one process"
[ "$(wc -l <many.3)" -eq 55 ] || fail "several inputs: expected 55 lines, got $(wc -l <many.3)"
mpi 3 translate -m m.nmt -i /dev/null -o empty.out 2>/dev/null || fail "an empty input, 3 ranks"
[ -f empty.out ] && [ ! -s empty.out ] || fail "an empty input did not give an empty output"
echo "stdout, stdin, gzip, --output-dir, several inputs and inputs of 0, 1, 4 lines: identical"

# The work is shared: 6 lines with windows of 4 are one round, split 3 + 3,
# so line 6 is rank 1's, and so is the warning about it.
{ python3 -c 'import json; [print(json.dumps({"text": l.rstrip("\n")})) for l in open("val.en").readlines()[:5]]'
  echo 'not json'; } >bad.jsonl
timeout 300 mpirun -np 2 --bind-to none --tag-output "$NMT" translate -m m.nmt -i bad.jsonl \
  --input-format jsonl --window 4 -o bad.out 2>bad.err || { cat bad.err; fail "jsonl with a bad line"; }
grep -q '^\[1,1\]<stderr>:nmt: warning: line 6' bad.err || fail "rank 1 did not parse line 6: $(cat bad.err)"
echo "rank 1 parsed its own window"

# A line typed into a pipe is answered before the next arrives.
mkfifo typed.fifo
exec 4<>typed.fifo
mpirun -np 2 --bind-to none "$NMT" translate -m m.nmt -i typed.fifo >typed.out 2>typed.err 4>&- &
run=$!
head -1 val.en >&4
for _ in $(seq 300); do [ -s typed.out ] && break; sleep 0.1; done
[ -s typed.out ] || { kill $run; fail "no answer to a typed line within 30 s"; }
# Waiting for the next line, the other rank sleeps rather than spins. A
# spinning rank burns a core, 100 ticks a second; a sleeping one a few, and up
# to 22 was seen on a busy 2-vCPU VM: the limit is half a core.
sleep 2
for p in $(pgrep -P $run -f "nmt translate"); do
  ticks=$(awk '{ print $14 + $15 }' /proc/$p/stat)
  sleep 1
  [ $(($(awk '{ print $14 + $15 }' /proc/$p/stat) - ticks)) -lt 50 ] || { kill $run; fail "a rank waiting for input spins: $(($(awk '{ print $14 + $15 }' /proc/$p/stat) - ticks)) ticks in 1 s"; }
done
exec 4>&-
wait $run || fail "typed lines: $(cat typed.err)"
cmp -s typed.out <(head -1 val.en | "$NMT" translate -m m.nmt 2>/dev/null) || fail "the typed line's translation differs"
echo "a typed line is answered at once"

# A killed rank: the run fails, naming it; the old output stays as it was.
# The input comes through a FIFO held open, so the run cannot end first.
for _ in $(seq 40); do cat test.en; done >big.en
echo "old translation" >killed.out
mkfifo in.fifo
for victim_rank in 1 0; do
  mpirun -np 2 --bind-to none "$NMT" translate -m m.nmt -i in.fifo -o killed.out \
    --beam 4 --threads 1 --workers 1 --window 32 >/dev/null 2>killed.err &
  run=$!
  exec 3<>in.fifo  # read-write: opening does not wait for rank 0
  cat big.en >&3 2>/dev/null &
  feeder=$!
  victim=""
  for _ in $(seq 300); do
    for p in $(pgrep -P $run -f "nmt translate"); do
      tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$victim_rank" && victim=$p
    done
    [ -n "$victim" ] && ls -a | grep -q '^\.killed\.out\.tmp' && break
    sleep 0.1
  done
  [ -n "$victim" ] || fail "no rank $victim_rank process under mpirun"
  sleep 1
  kill -9 "$victim"
  for _ in $(seq 300); do kill -0 $run 2>/dev/null || break; sleep 0.1; done
  kill -0 $run 2>/dev/null && { kill -9 $run; fail "the run went on for 30 s after rank $victim_rank died"; }
  exec 3>&-
  kill $feeder 2>/dev/null
  wait $run && fail "a run whose rank $victim_rank died exited 0"
  grep -q "rank $victim_rank .*exited on signal 9" killed.err \
    || fail "the error does not name rank $victim_rank: $(tail -5 killed.err)"
  [ "$(cat killed.out)" = "old translation" ] || fail "killing rank $victim_rank changed the output"
  if [ $victim_rank = 1 ] && ls -a | grep -q '^\.killed\.out\.tmp'; then
    fail "a temporary file was left: $(ls -a | grep tmp)"
  fi
  echo "rank $victim_rank killed: $(grep -m1 'exited on signal' killed.err | sed 's/ *$//')"
done
mpi 2 translate -m m.nmt -i val.en -o killed.out 2>/dev/null || fail "the run after the kills"
ls -a | grep -q '^\.killed\.out\.tmp' && fail "the dead rank 0's temporary file is still there"
cmp -s killed.out <("$NMT" translate -m m.nmt -i val.en 2>/dev/null) || fail "the run after the kills differs"

# Refusals: rank 0's own checks end every rank, with one message.
start=$(date +%s)
mpi 2 translate -m m.nmt -i test.en -o "$WORK" >/dev/null 2>dir.err
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "-o DIRECTORY with 2 ranks: exit $rc"
[ $(($(date +%s) - start)) -lt 60 ] || fail "-o DIRECTORY took over a minute to fail"
[ "$(grep -c 'error: .*-o' dir.err)" -eq 1 ] || fail "expected one error naming -o: $(cat dir.err)"
grep -q "MPI_ABORT" dir.err && fail "-o DIRECTORY aborted MPI: $(cat dir.err)"
refused() {  # WHAT FILE PATTERN: exit 1 or 2 (not a timeout), the message once
  local rc=$1
  [ "$rc" -eq 1 ] || [ "$rc" -eq 2 ] || fail "$2: exit $rc (124: it hung)"
  [ "$(grep -c "$4" "$3")" -ge 1 ] || fail "$2: $(cat "$3")"
}
mpi 2 translate -m m.nmt -i missing.en >/dev/null 2>missing.err
refused $? "a missing input with 2 ranks" missing.err "missing.en"
[ "$(grep -c 'error: ' missing.err)" -eq 1 ] || fail "a missing input: expected one error line: $(cat missing.err)"
grep -q "MPI_ABORT" missing.err && fail "a missing input aborted MPI: $(cat missing.err)"
mpi 2 score -r val.en -i val.en >/dev/null 2>score.err
refused $? "nmt score under mpirun" score.err "only train and translate run distributed"
echo "refusals: one message, every rank ended"
echo "translate mpi: all checks passed"
