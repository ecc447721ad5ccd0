#!/usr/bin/env bash
# nmt train fails before it works: every check that needs no training runs
# before the data is read or a vocabulary trained, and says which file or
# option is wrong. No output may be an input (the config included); text
# with nothing SentencePiece keeps is an empty side; option messages name
# the option as typed, with the range --help shows, and exit 2; a stop
# signal before the first step ends the run at once, and later within a
# step, the final phase included, where OUT appears once, whole; --resume
# refuses a different model or vocabulary, and data changed since the
# checkpoint, and names every other option that differs; a damaged newest
# checkpoint is named and passed over.
# Usage: cli_train_checks.sh NMT DATA_DIR WORK_DIR
set -uo pipefail
NMT=$1 DATA=$2 WORK=$3
CFG=$(cd "$(dirname "$0")/.." && pwd)/models/transformer-tiny.json
rm -rf "$WORK" && mkdir -p "$WORK"
cd "$WORK" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }
zcat "$DATA/multi30k/train.en.gz" | head -3000 >tr.en
zcat "$DATA/multi30k/train.de.gz" | head -3000 >tr.de
A=(-c "$CFG" --threads 1 --vocab-size 200)
T=(--train-src tr.en --train-tgt tr.de)

# expect STATUS PATTERN command...: exit status, the last line on stderr
# matching, and no line saying that training went ahead.
expect() {
  local want=$1 pat=$2; shift 2
  "$@" </dev/null >out.txt 2>err.txt
  local rc=$?
  [ "$rc" -eq "$want" ] || fail "$*: exit $rc, expected $want ($(cat err.txt))"
  tail -1 err.txt | grep -q -- "$pat" || fail "$*: expected '$pat', got: $(cat err.txt)"
  [ "${LATE:-0}" = 1 ] || ! grep -q "step 1 \|SentencePiece vocabulary of" err.txt \
    || fail "$*: worked before failing: $(cat err.txt)"
}
no_outputs() {  # OUT: nothing of a run is left (OUT*, nor a hidden .OUT*.tmp.PID)
  local d b f left=""
  d=$(dirname "$1") b=$(basename "$1")
  for f in "$d/$b"* "$d/.$b"*; do [ -e "$f" ] && left="$left $f"; done
  [ -z "$left" ] || fail "outputs left:$left"
}

# 1. No output is an input, the --config file included.
cp "$CFG" my.json; cp my.json keep.json
expect 2 "--out: my.json would overwrite the --config file my.json" \
  "$NMT" train "${A[@]/$CFG/my.json}" "${T[@]}" --max-steps 2 --out my.json
cmp -s my.json keep.json || fail "--out = --config changed the config"
mkdir o1
for suffix in .curve.svg .log.jsonl .best .lock; do
  cp "$CFG" "o1/m.nmt$suffix"
  expect 2 "would overwrite the --config file o1/m.nmt$suffix" \
    "$NMT" train -c "o1/m.nmt$suffix" --threads 1 --vocab-size 200 "${T[@]}" --max-steps 2 --out o1/m.nmt
  cmp -s "o1/m.nmt$suffix" "$CFG" || fail "-c OUT$suffix was changed"
  rm "o1/m.nmt$suffix"
done
mkdir -p o2/m.nmt.ckpt; cp "$CFG" o2/m.nmt.ckpt/c.json
expect 2 "is in o2/m.nmt.ckpt/" "$NMT" train -c o2/m.nmt.ckpt/c.json --threads 1 "${T[@]}" --out o2/m.nmt

# 2. Checked before any work: OUT.ckpt a file, an existing OUT without
# checkpoints, a validation set with nothing usable.
mkdir o3; touch o3/m.nmt.ckpt
expect 1 "o3/m.nmt.ckpt exists and is not a directory" "$NMT" train "${A[@]}" "${T[@]}" --out o3/m.nmt
expect 1 "o3/m.nmt.ckpt exists and is not a directory" "$NMT" train "${A[@]}" "${T[@]}" --out o3/m.nmt --resume
mkdir -p o5/m.nmt.curve.svg
expect 1 "--out: o5/m.nmt.curve.svg is a directory" "$NMT" train "${A[@]}" "${T[@]}" --out o5/m.nmt
mkdir o4; echo old >o4/m.nmt
expect 1 "o4/m.nmt already exists" "$NMT" train "${A[@]}" "${T[@]}" --max-steps 2 --out o4/m.nmt
[ "$(cat o4/m.nmt)" = old ] || fail "an existing OUT was overwritten"
yes '  ' | head -100 >va.en; cp va.en va.de
expect 1 "va.en: no usable sentence pairs in the validation set" \
  "$NMT" train "${A[@]}" "${T[@]}" --valid-src va.en --valid-tgt va.de --max-steps 2 --out v.nmt
no_outputs v.nmt

# A config describing a model nmt train cannot make (another toolkit's
# token ids, or separate vocabularies) is refused by name before the data.
python3 - "$CFG" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
json.dump(dict(c, eos_id=0, unk_id=1, pad_id=-1, bos_id=-1, decoder_start="zero"), open("ids.json", "w"))
json.dump(dict(c, tie_embeddings=False, src_vocab_size=300), open("srcv.json", "w"))
PY
expect 1 "config transformer-tiny: pad_id -1: the vocabulary nmt train makes has pad 0" \
  "$NMT" train -c ids.json --threads 1 "${T[@]}" --max-steps 2 --out ids.nmt
expect 1 "config transformer-tiny: src_vocab_size 300: nmt train makes one joint vocabulary" \
  "$NMT" train -c srcv.json --threads 1 "${T[@]}" --max-steps 2 --out srcv.nmt
no_outputs ids.nmt
# What it can make, nmt info shows.
python3 - "$CFG" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
json.dump(dict(c, activation="gelu", output_bias=True, norm="pre", final_norm=False,
               positional="sinusoidal-concat", tie_embeddings=False, tie_output=True),
          open("feat.json", "w"))
PY
"$NMT" train -c feat.json --threads 1 --vocab-size 200 "${T[@]}" --max-steps 2 --out feat.nmt \
  2>err.txt || fail "training with feat.json: $(cat err.txt)"
"$NMT" info feat.nmt >info.txt 2>&1 || fail "nmt info feat.nmt: $(cat info.txt)"
for want in "d_ff 64 (gelu)" "pre-LN without final norms" "sinusoidal-concat positions" \
  "separate source, tied target and output embeddings" "output bias"; do
  grep -qF "$want" info.txt || fail "nmt info lacks '$want': $(cat info.txt)"
done

# 3. Text with nothing SentencePiece keeps is an empty side: one error, exit
# 1, no lock left (SentencePiece itself would end the process with 255).
head -300 tr.de >tr300.de
yes '   ' | head -300 >sp.txt
yes $'\xe3\x80\x80 \xe3\x80\x80' | head -300 >ideo.txt      # U+3000
printf '\x01\x02\x03\n%.0s' $(seq 300) >ctrl.txt
yes $'\xe2\x80\x8b\xef\xbb\xbf' | head -300 >zw.txt          # U+200B, U+FEFF
yes '' | head -300 >blank.txt
for f in sp ideo ctrl zw blank; do
  expect 1 "$f.txt: no usable sentence pairs (0 longer than 63 subwords, 300 with an empty side" \
    "$NMT" train "${A[@]}" --train-src $f.txt --train-tgt tr300.de --max-steps 2 --out u.nmt
  no_outputs u.nmt
done
# Mixed in with real text, such lines are counted and skipped.
{ head -200 tr.en; cat zw.txt; head -100 ideo.txt; } >mix.en; head -600 tr.de >mix.de
"$NMT" train "${A[@]}" --train-src mix.en --train-tgt mix.de --max-steps 1 --out mix.nmt 2>err.txt \
  || fail "mixed text: $(cat err.txt)"
grep -q "training data: [0-9]* of 600 pairs.* and 400 with an empty side" err.txt || fail "mixed text: $(cat err.txt)"

# 4. Option messages name the option as typed, exit 2, and agree with --help.
expect 2 "--warmup: expected an integer >= 1, got 0" "$NMT" train "${A[@]}" "${T[@]}" --out x.nmt --warmup 0
expect 2 "--batch-tokens: expected an integer >= 2, got 0" "$NMT" train "${A[@]}" "${T[@]}" --out x.nmt --batch-tokens 0
expect 2 "--batch-tokens: expected an integer >= 2, got 1" "$NMT" train "${A[@]}" "${T[@]}" --out x.nmt --batch-tokens 1
expect 2 "--lr-scale: expected a number > 0, got 0" "$NMT" train "${A[@]}" "${T[@]}" --out x.nmt --lr-scale 0
expect 2 "--lr-scale: expected a number > 0, got nan" "$NMT" train "${A[@]}" "${T[@]}" --out x.nmt --lr-scale nan
expect 2 "--vocab-size: expected 0 or an integer >= 8, got 5" "$NMT" train "${A[@]}" "${T[@]}" --out x.nmt --vocab-size 5
expect 2 "--early-stop needs a validation set" "$NMT" train "${A[@]}" "${T[@]}" --out x.nmt --early-stop 2
expect 2 "--early-stop needs validations during the run, but --valid-every is 0" "$NMT" train "${A[@]}" "${T[@]}" \
  --valid-src tr.en --valid-tgt tr.de --out x.nmt --early-stop 2 --valid-every 0
"$NMT" train --help >help.txt
grep -q -- "--lr-scale FLOAT:FLOAT > 0=" help.txt && grep -q -- "--warmup INT:INT >= 1=" help.txt \
  && grep -q -- "--batch-tokens INT:INT >= 2=" help.txt || fail "--help ranges: $(grep -- '--lr-scale\|--warmup\|--batch-tokens' help.txt)"
# A budget below the widest pair would give pairs batches of their own.
LATE=1 expect 2 "--batch-tokens 2 is smaller than the widest sentence pair" \
  "$NMT" train -c "$CFG" --threads 1 --vocab-size 200 "${T[@]}" --out x.nmt --batch-tokens 2
no_outputs x.nmt
# Memory bounded by the work: a range check, at once, naming the option.
expect 2 "--update-freq 1000000000: .*expected at most" \
  "$NMT" train "${A[@]}" "${T[@]}" --out x.nmt --update-freq 1000000000
expect 2 "--batch-tokens 1000000000000: .*expected at most" \
  "$NMT" train "${A[@]}" "${T[@]}" --out x.nmt --batch-tokens 1000000000000

# 5. --spm and --vocab-size that disagree; the same file on both sides.
"$NMT" train "${A[@]/200/150}" "${T[@]}" --max-steps 2 --out base.nmt 2>/dev/null || fail "base run"
python3 - <<'PY' || fail "extracting the vocabulary"
import json, struct
b = open('base.nmt', 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n])
s, e = h['vocab/sentencepiece']['data_offsets']; open('base.spm', 'wb').write(b[8 + n + s:8 + n + e])
PY
expect 2 "--vocab-size 300 differs from --spm base.spm, which has [0-9]* pieces" \
  "$NMT" train "${A[@]/200/300}" "${T[@]}" --spm base.spm --max-steps 2 --out s.nmt
"$NMT" train "${A[@]}" --train-src tr.en --train-tgt tr.en --max-steps 1 --out same.nmt 2>err.txt || fail "same file"
grep -q "warning: --train-src and --train-tgt are the same file" err.txt || fail "same file: $(cat err.txt)"

# 6. A stop signal before the first step ends the run at once, lock removed:
# here --train-src is a FIFO that nobody writes.
mkfifo fifo.en
SECONDS=0
timeout -k 10 1 "$NMT" train "${A[@]}" --train-src fifo.en --train-tgt tr.de --out f.nmt 2>err.txt
rc=$?
[ "$rc" -eq 124 ] && [ "$SECONDS" -le 4 ] || fail "SIGTERM while reading: exit $rc after ${SECONDS}s ($(cat err.txt))"
no_outputs f.nmt
"$NMT" train "${A[@]}" --train-src fifo.en --train-tgt tr.de --out f.nmt 2>err.txt &
pid=$!
sleep 0.5; kill -INT $pid; wait $pid
rc=$?
[ "$rc" -eq 130 ] || fail "SIGINT while reading: exit $rc ($(cat err.txt))"
no_outputs f.nmt

# 7. --resume: a damaged newest checkpoint is named and passed over.
R=(-c "$CFG" --threads 1 --vocab-size 200 "${T[@]}" --checkpoint-every 10 --keep-checkpoints 0 --log-every 1000)
mkdir base; "$NMT" train "${R[@]}" --max-steps 20 --out base/m.nmt 2>/dev/null || fail "checkpointed run"
cat >corrupt.py <<'PY'
import sys, struct, json
mode, path = sys.argv[1], sys.argv[2]
b = bytearray(open(path, 'rb').read()); n = struct.unpack('<Q', b[:8])[0]; base = 8 + n
h = json.loads(b[8:base]); meta = h['__metadata__']
def rewrite():
    hj = json.dumps(h, separators=(',', ':')).encode(); hj += b' ' * ((8 - len(hj) % 8) % 8)
    return bytearray(struct.pack('<Q', len(hj)) + hj + bytes(b[base:]))
if mode.startswith('old-'):  # a checkpoint from before checksums
    del meta['checksum']; b = rewrite(); n = struct.unpack('<Q', b[:8])[0]; base = 8 + n
    h = json.loads(b[8:base]); meta = h['__metadata__']; mode = mode[4:]
if mode == 'truncate': b = b[:len(b) // 2]
elif mode == 'header': b[8:16] = b'{"x": [['
elif mode == 'flip-weight': b[base + h['encoder/layer_0/ffn/w1/weight']['data_offsets'][0] + 3] ^= 0x04
elif mode == 'adam-v-negative':
    s = base + h['optimizer/adam_v']['data_offsets'][0]
    for k in range(0, 4000, 4): b[s + k + 3] |= 0x80
elif mode == 'state-step':
    meta['training_state'] = meta['training_state'].replace('"step":20', '"step":1000000000000'); b = rewrite()
open(path, 'wb').write(bytes(b))
PY
for mode in truncate header flip-weight adam-v-negative state-step old-adam-v-negative old-state-step; do
  rm -rf c; cp -a base c; python3 corrupt.py $mode c/m.nmt.ckpt/step-000000020.nmt || fail "corrupt $mode"
  "$NMT" train "${R[@]}" --max-steps 21 --out c/m.nmt --resume 2>err.txt || fail "$mode: $(cat err.txt)"
  grep -q "warning: step-000000020.nmt is damaged (.*); resuming from step-000000010.nmt" err.txt \
    && grep -q "wrote c/m.nmt after 21 steps" err.txt || fail "$mode: $(cat err.txt)"
  case $mode in  # with a checksum, any change to the content is caught by it
    flip-weight|adam-v-negative|state-step) grep -q "damaged (its checksum does not match" err.txt \
      || fail "$mode: not caught by the checksum: $(cat err.txt)" ;;
  esac
done
# An older checkpoint without a checksum still resumes.
rm -rf c; cp -a base c; python3 corrupt.py old-none c/m.nmt.ckpt/step-000000020.nmt
"$NMT" train "${R[@]}" --max-steps 21 --out c/m.nmt --resume 2>err.txt || fail "no checksum: $(cat err.txt)"
grep -q "resuming from c/m.nmt.ckpt/step-000000020.nmt" err.txt && ! grep -q warning err.txt \
  || fail "no checksum: $(cat err.txt)"
# Every checkpoint damaged: one error naming them.
rm -rf c; cp -a base c
for f in c/m.nmt.ckpt/step-*.nmt; do python3 corrupt.py truncate "$f"; done
expect 1 "--resume: no checkpoint in c/m.nmt.ckpt can be resumed from: step-000000020.nmt is damaged" \
  "$NMT" train "${R[@]}" --max-steps 21 --out c/m.nmt --resume

# 8. --resume with another model, vocabulary or options.
rm -rf c; cp -a base c
sed 's/"d_model": *[0-9]*/"d_model": 48/' "$CFG" >wide.json
expect 1 "--config wide.json differs from the model of checkpoint step-000000020.nmt (.*d_model 32 there, 48 here;" \
  "$NMT" train "${R[@]/$CFG/wide.json}" --max-steps 21 --out c/m.nmt --resume
expect 1 "--vocab-size 300 differs from the vocabulary of checkpoint step-000000020.nmt (200 pieces)" \
  "$NMT" train "${R[@]/200/300}" --max-steps 21 --out c/m.nmt --resume
expect 1 "--spm base.spm is not the vocabulary of checkpoint" \
  "$NMT" train "${R[@]}" --spm base.spm --max-steps 21 --out c/m.nmt --resume
"$NMT" train "${R[@]}" --max-steps 21 --out c/m.nmt --resume --lr-scale 0.5 --warmup 100 2>err.txt \
  || fail "resume with other options: $(cat err.txt)"
grep -q "warning: --lr-scale is 0.5 here but was 0.0[0-9]*" err.txt && grep -q "warning: --warmup is 100 here but was 5 " err.txt \
  || fail "resume with other options: $(cat err.txt)"
# A file beside --out that nmt did not write is never truncated, replaced
# or removed: OUT.lock (someone's Cargo.lock beside --out Cargo, or a
# symlink), OUT.log.jsonl, OUT.curve.svg and OUT.best beside no log of an
# earlier nmt run.
mkdir side && echo "my lock" >side/Cargo.lock
expect 1 "side/Cargo.lock exists and is not an nmt lock file; refusing to touch it" \
  "$NMT" train "${A[@]}" "${T[@]}" --max-steps 2 --out side/Cargo
[ "$(cat side/Cargo.lock)" = "my lock" ] || fail "a user's OUT.lock was changed"
rm side/Cargo.lock && echo keep >side/elsewhere && ln -s elsewhere side/Cargo.lock
expect 1 "side/Cargo.lock exists and is not an nmt lock file" \
  "$NMT" train "${A[@]}" "${T[@]}" --max-steps 2 --out side/Cargo
[ "$(cat side/elsewhere)" = keep ] && [ -L side/Cargo.lock ] || fail "a symlinked OUT.lock was followed"
rm side/Cargo.lock
for suffix in .log.jsonl .curve.svg .best; do
  echo mine >"side/Cargo$suffix"
  expect 1 "side/Cargo$suffix already exists and is not from an earlier nmt run of this --out" \
    "$NMT" train "${A[@]}" "${T[@]}" --max-steps 2 --out side/Cargo
  [ "$(cat "side/Cargo$suffix")" = mine ] || fail "a user's OUT$suffix was overwritten"
  [ ! -e side/Cargo.lock ] || fail "a refused run left its lock"
  rm "side/Cargo$suffix"
done
# An earlier run's own files (its log says so) are replaced, as before; a
# lock left by a killed nmt is taken over.
"$NMT" train "${A[@]}" "${T[@]}" --max-steps 2 --out side/m.nmt 2>err.txt || fail "side: $(cat err.txt)"
rm -r side/m.nmt side/m.nmt.ckpt && echo "pid 999999999 on elsewhere" >side/m.nmt.lock
"$NMT" train "${A[@]}" "${T[@]}" --max-steps 2 --out side/m.nmt 2>err.txt ||
  fail "a new run beside an earlier run's log and a dead nmt's lock: $(cat err.txt)"
[ -s side/m.nmt ] && [ ! -e side/m.nmt.lock ] || fail "side: no model, or the lock was left"
# An empty log is what a run killed before its first record leaves (the
# kill -9 soak of train_crash.sh hit it): the next run starts, as a resumed
# one goes on.
: >side/e.nmt.log.jsonl
"$NMT" train "${A[@]}" "${T[@]}" --max-steps 2 --out side/e.nmt 2>err.txt ||
  fail "a run beside an empty log (a run killed at its start): $(cat err.txt)"
# 9. A stop signal ends the run within a step of whatever runs, a validation
# included, with 128 + the signal and a checkpoint of the last step; in the
# final phase (validation, averaging, the shortlist) it writes no OUT. OUT
# appears once, whole: kill -9 in the final phase leaves OUT.partial, which
# the next run removes. --resume finishes the run, validation included.
# Synthetic words, so that the vocabulary trains in no time.
mkdir fin && cd fin || fail "mkdir fin"
python3 - <<'PY'
import random
r = random.Random(1)
def pairs(n, fs, ft):
    with open(fs, 'w') as s, open(ft, 'w') as t:
        for i in range(n):
            w = ['s%d' % r.randrange(60) for _ in range(r.randrange(3, 12))]
            s.write(' '.join(w) + '\n'); t.write(' '.join('t' + x[1:] for x in reversed(w)) + '\n')
pairs(1000, 'c.src', 'c.tgt'); pairs(500, 'v.src', 'v.tgt')
PY
F=(-c "$CFG" --threads 1 --vocab-size 200 --train-src c.src --train-tgt c.tgt --valid-src v.src
  --valid-tgt v.tgt --valid-sentences 0 --valid-every 5 --checkpoint-every 3 --average-last 2 --out m.nmt)
# stop_at SIGNAL STATUS PATTERN FILE ARGS...: a run, signalled once FILE has
# a line matching PATTERN; it must end within a second with STATUS.
stop_at() {
  local sig=$1 want=$2 pat=$3 file=$4; shift 4
  "$NMT" train "${F[@]}" "$@" 2>run.err &
  local pid=$! rc
  until grep -q -- "$pat" "$file" 2>/dev/null || ! kill -0 $pid 2>/dev/null; do sleep 0.02; done
  [ "$sig" = KILL ] && sleep 0.3  # into the shortlist's measurement
  kill -"$sig" $pid; SECONDS=0; wait $pid 2>/dev/null; rc=$?
  [ "$rc" -eq "$want" ] && [ $SECONDS -le 1 ] ||
    fail "SIG$sig at '$pat': exit $rc after ${SECONDS}s, expected $want: $(tail -3 run.err)"
}
step_logged() { echo "\"step\":$1,\"step_seconds\""; }  # the log's "train" line of a step
# In the validation at step 5, then in the final validation at step 6.
stop_at INT 130 "$(step_logged 5)" m.nmt.log.jsonl --max-steps 6
grep -q "validation at step 5 stopped" run.err && [ -e m.nmt.ckpt/step-000000005.nmt ] ||
  fail "SIGINT in a validation: $(tail -3 run.err; ls m.nmt.ckpt)"
stop_at TERM 143 "$(step_logged 6)" m.nmt.log.jsonl --max-steps 6 --resume
grep -q "^nmt train: validation at step 5: loss" run.err || fail "the resumed run did not validate step 5"
grep -q "interrupted at step 6, before m.nmt was written" run.err && [ -e m.nmt.ckpt/step-000000006.nmt ] ||
  fail "SIGTERM in the final phase: $(tail -3 run.err; ls m.nmt.ckpt)"
[ ! -e m.nmt ] && [ ! -e m.nmt.partial ] || fail "a stopped final phase left $(ls m.nmt m.nmt.partial 2>&1)"
stop_at KILL 137 "final model:" run.err --max-steps 6 --resume
[ ! -e m.nmt ] || fail "kill -9 in the final phase left m.nmt, without its shortlist"
"$NMT" train "${F[@]}" --max-steps 6 --resume 2>run.err || fail "finishing the run: $(cat run.err)"
grep -q "removed [1-9][0-9]* temporary file(s)" run.err && [ ! -e m.nmt.partial ] ||
  fail "m.nmt.partial was not removed: $(ls m.nmt*)"
"$NMT" info m.nmt 2>&1 | grep -q "^shortlist    [0-9]* entries" || fail "the finished m.nmt has no shortlist"

# 10. --resume refuses data that changed since the checkpoint (here the
# same number of lines, other text), naming the file;
# --resume-with-new-data goes on, with a warning.
cp c.src c.keep && sed -i '1,100s/s1/s2/g' c.src
expect 1 "^nmt: error: c.src has changed since checkpoint step-000000006.nmt was written (the same 1000 lines in number, other text): .*--resume-with-new-data" \
  "$NMT" train "${F[@]}" --max-steps 7 --resume
mv c.keep c.src && cp v.tgt v.keep && sed -i '5s/$/ t7/' v.tgt
expect 1 "^nmt: error: v.tgt has changed since checkpoint step-000000006.nmt was written (the same 500 lines in number, other text)" \
  "$NMT" train "${F[@]}" --max-steps 7 --resume
mv v.keep v.tgt && sed -i '1,100s/s1/s2/g' c.src
"$NMT" train "${F[@]}" --max-steps 7 --no-shortlist --resume-with-new-data 2>run.err ||
  fail "--resume-with-new-data: $(cat run.err)"
grep -q "warning: c.src has changed since checkpoint step-000000006.nmt .*going on with the data as they are now" run.err &&
  grep -q "wrote m.nmt after 7 steps" run.err || fail "--resume-with-new-data: $(cat run.err)"

cd ..

echo "cli train checks: all checks passed"
