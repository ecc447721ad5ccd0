#!/usr/bin/env bash
# nmt train's recipe and its corpora, on the built binary:
#  - --explain prints every choice with its reason and stops, writing nothing;
#  - the recipe follows the data: Chinese text gets a character coverage
#    below 1, a small corpus a small vocabulary; a budget of time is measured;
#  - an option given (command line or the config's "training" object) wins
#    and is listed as given; --no-recipe takes the fixed defaults;
#  - several corpora train as one, line counts checked per pair of files;
#  - exact duplicate pairs and pairs of implausible length ratio are dropped
#    and counted in the summary line (with peak memory); --no-filter keeps them;
#  - the recipe is in the model (nmt info) and a resumed run keeps it;
#  - --optimize speed gives the decoder two layers and writes int8 where it
#    validates as well, student gives it one, a given config keeps its own.
# Usage: cli_train_recipe.sh NMT DATA_DIR WORK_DIR
set -uo pipefail
NMT=$1 DATA=$2 WORK=$3
rm -rf "$WORK" && mkdir -p "$WORK"
cd "$WORK" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$(dirname "$0")/cli_common.sh"
toy=$DATA/joeynmt-toy
has() { grep -q -- "$1" "$2" || fail "expected '$1' in $2: $(cat "$2")"; }
hasnt() { ! grep -q -- "$1" "$2" || fail "did not expect '$1' in $2: $(cat "$2")"; }

# 1. --explain: the choices and their reasons, then nothing trained or written.
"$NMT" train --train-src "$toy/train.en" --train-tgt "$toy/train.de" --valid-src "$toy/dev.en" \
  --valid-tgt "$toy/dev.de" --out ex.nmt --max-steps 50 --threads 1 --explain 2>ex.err \
  || fail "--explain: $(cat ex.err)"
for key in config vocab_size character_coverage compute_type batch_tokens updates lr_schedule \
  warmup_steps lr_scale dropout label_smoothing valid_every valid_sentences early_stop \
  checkpoint_every average_last; do
  grep -q "^nmt train: recipe: $key [^:]*: ." ex.err || fail "--explain: no reason for $key: $(cat ex.err)"
done
has "recipe: config transformer-small: 995 pairs" ex.err  # less 5 repeated pairs
has "recipe: vocab_size 1000: 995 pairs" ex.err
has "recipe: updates 50: the budget (--max-steps 50)" ex.err
has "recipe: lr_schedule linear" ex.err
has "stopping before training" ex.err
hasnt "step 1 " ex.err
for f in ex.nmt ex.nmt.best ex.nmt.log.jsonl ex.nmt.curve.svg ex.nmt.ckpt ex.nmt.lock; do
  [ ! -e "$f" ] || fail "--explain wrote $f"
done

# --optimize: quality keeps the config's split, speed gives the decoder two
# layers and student one (printed with the reason), a given config keeps
# its layers, and speed without the recipe needs a config (exit 2, one line).
has "recipe: layers 3+3: --optimize quality" ex.err
"$NMT" train --train-src "$toy/train.en" --train-tgt "$toy/train.de" --out sp.nmt --max-steps 50 \
  --threads 1 --explain --optimize speed 2>sp.err || fail "speed --explain: $(cat sp.err)"
has "recipe: layers 3+2: --optimize speed: the decoder runs for every output token" sp.err
"$NMT" train --train-src "$toy/train.en" --train-tgt "$toy/train.de" --out sp.nmt --max-steps 50 \
  --threads 1 --explain --optimize student 2>st.err || fail "student --explain: $(cat st.err)"
has "recipe: layers 3+1: --optimize student: .* one decoder layer, for a teacher's translations" st.err
"$NMT" train --train-src "$toy/train.en" --train-tgt "$toy/train.de" --out sp.nmt --max-steps 50 \
  --threads 1 --explain --optimize speed -c transformer-small 2>spg.err || fail "speed -c: $(cat spg.err)"
has "recipe: layers 3+3: given (--config; --optimize speed keeps a given config's layers)" spg.err
"$NMT" train --train-src "$toy/train.en" --train-tgt "$toy/train.de" --out sp.nmt --max-steps 50 \
  --optimize speed --no-recipe 2>spn.err
[ $? -eq 2 ] || fail "--optimize speed --no-recipe: expected exit 2: $(cat spn.err)"
has "optimize speed shapes the model the recipe chooses, but the recipe is off" spn.err
[ "$(wc -l <spn.err)" -eq 1 ] || fail "--optimize speed --no-recipe: not one line: $(cat spn.err)"
# speed's weights: int8 where the validation set's chrF in int8 is within
# 0.5 of f32's, and OUT is what the line says; f32 without validation pairs.
"$NMT" train -c transformer-tiny --vocab-size 300 --train-src "$toy/train.en" \
  --train-tgt "$toy/train.de" --valid-src "$toy/dev.en" --valid-tgt "$toy/dev.de" --out q8.nmt \
  --max-steps 20 --threads 1 --optimize speed 2>q8.err || fail "speed: $(cat q8.err)"
line=$(grep "weights: .* (--optimize speed): chrF [0-9.]* in int8 against [0-9.]* in f32 ([0-9]* validation sentences, beam 4)" q8.err) ||
  fail "speed: no weights line: $(cat q8.err)"
"$NMT" info q8.nmt >q8.info 2>&1 || fail "info q8: $(cat q8.info)"
python3 - "$line" q8.nmt.log.jsonl <<'EOF' || fail "speed: the weights line: $line"
import json, re, sys
line, log = sys.argv[1:]
m = re.search(r"weights: (int8|f32) .*chrF ([0-9.]+) in int8 against ([0-9.]+) in f32", line)
kept, int8, f32 = m.group(1), float(m.group(2)), float(m.group(3))
assert (kept == "int8") == (int8 >= f32 - 0.5 - 0.005), line
assert (kept == "f32") == ("more than 0.5 lost" in line), line
entry = [json.loads(l) for l in open(log) if '"type":"int8"' in l.replace(" ", "")][-1]
assert entry["int8"] == (kept == "int8"), entry
EOF
if grep -q "weights: int8" q8.err; then has "int8 weights" q8.info; else hasnt "int8 weights" q8.info; fi
"$NMT" train -c transformer-tiny --vocab-size 300 --train-src "$toy/train.en" \
  --train-tgt "$toy/train.de" --out q8n.nmt --max-steps 2 --threads 1 --optimize speed 2>q8n.err ||
  fail "speed without validation: $(cat q8n.err)"
has "weights: f32 (--optimize speed): no validation set to measure int8's cost on" q8n.err

# 2. The data decides: Chinese gets SentencePiece's 0.9995, English/German 1.0.
head -3000 "$DATA/tatoeba-cmn-eng/train.en" >zh.en
head -3000 "$DATA/tatoeba-cmn-eng/train.zh" >zh.zh
"$NMT" train --train-src zh.en --train-tgt zh.zh --out zh.nmt --max-steps 10 --threads 1 \
  --explain 2>zh.err || fail "zh --explain: $(cat zh.err)"
has "recipe: character_coverage 0.9995: [0-9]*% of a side's characters are Han" zh.err
has "recipe: vocab_size 4000: 29[0-9][0-9] pairs" zh.err
has "recipe: character_coverage 1.0: an alphabetic script" ex.err
has "recipe: valid_tokenize zh: Chinese target text" zh.err
has "recipe: valid_tokenize 13a" ex.err
# A time budget is planned from the measured speed.
"$NMT" train --train-src "$toy/train.en" --train-tgt "$toy/train.de" --out tm.nmt \
  --max-minutes 1 --threads 1 --explain 2>tm.err || fail "time --explain: $(cat tm.err)"
has "measured [0-9.]* s per update of" tm.err
has "recipe: updates [0-9]*: the budget (--max-minutes 1 at [0-9.]* s per update measured" tm.err
# Where the CPU has bf16, the type is timed both ways on the built model and
# the faster kept (without the timing, a CPU with AVX512-BF16 but no AMX
# trained in its slower type).
if grep -q "recipe: compute_type bf16: this CPU multiplies" tm.err; then
  has "recipe: compute_type \(bf16\|f32\): .* [0-9.]* s in bf16, [0-9.]* s in f32" tm.err
  has "measured [0-9.]* s per update of [0-9]* tokens ([0-9]* target tokens/s, f32)" tm.err
else
  echo "note: no bf16 on this CPU; the bf16/f32 timing is not exercised"
fi

# 3. Given options win and are listed as given, from the command line and
# from the config's "training" object; -c gives the config's own values.
cat >mine.json <<'JSON'
{"name": "mine", "encoder_layers": 1, "decoder_layers": 1, "d_model": 32, "d_ff": 64, "heads": 4,
 "dropout": 0.05, "label_smoothing": 0.2, "max_positions": 64, "vocab_size": 300,
 "training": {"warmup_steps": 7}}
JSON
"$NMT" train -c mine.json --train-src "$toy/train.en" --train-tgt "$toy/train.de" --out g.nmt \
  --max-steps 10 --batch-tokens 1000 --lr-schedule cosine --compute-type f32 --threads 1 \
  --explain 2>g.err || fail "given --explain: $(cat g.err)"
has "recipe: config mine: given (--config)" g.err
has "recipe: vocab_size 300: from the config mine" g.err
has "recipe: batch_tokens 1000: given" g.err
has "recipe: lr_schedule cosine: given" g.err
has "recipe: compute_type f32: given" g.err
has "recipe: warmup_steps 7: given" g.err
has "recipe: dropout 0.05: from the config mine" g.err
has "recipe: label_smoothing 0.2: from the config mine" g.err
"$NMT" train --train-src "$toy/train.en" --train-tgt "$toy/train.de" --out d.nmt --max-steps 10 \
  --dropout 0.15 --threads 1 --explain 2>d.err || fail "--dropout --explain: $(cat d.err)"
has "recipe: dropout 0.15: given (--dropout)" d.err
# --no-recipe: no choice made, the fixed defaults.
"$NMT" train --no-recipe -c transformer-tiny --train-src "$toy/train.en" --train-tgt "$toy/train.de" \
  --out nr.nmt --max-steps 2 --vocab-size 300 --threads 1 --explain 2>nr.err || fail "--no-recipe: $(cat nr.err)"
hasnt "recipe:" nr.err

# 4. Several corpora: one run over both, line counts checked per pair.
# (the toy corpus without its own repeated pairs, so that the counts below are exact)
paste "$toy/train.en" "$toy/train.de" | awk '!seen[$0]++' >uniq.tsv
head -600 uniq.tsv | cut -f1 >a.en; head -600 uniq.tsv | cut -f2 >a.de
tail -400 uniq.tsv | cut -f1 >b.en; tail -400 uniq.tsv | cut -f2 >b.de
head -399 b.de >b.short.de
expect 1 "parallel files differ in length: b.en has 400 lines but b.short.de has 399" \
  "$NMT" train --train-src a.en b.en --train-tgt a.de b.short.de --out x.nmt --threads 1
expect 2 "--train-src names 2 file(s) and --train-tgt 1" \
  "$NMT" train --train-src a.en b.en --train-tgt a.de --out x.nmt --threads 1
"$NMT" train -c transformer-tiny --vocab-size 300 --train-src a.en b.en --train-tgt a.de b.de \
  --out two.nmt --max-steps 4 --threads 1 2>two.err || fail "two corpora: $(cat two.err)"
has "training data: [0-9]* of 1000 pairs from 2 corpus file pair(s)" two.err
"$NMT" info two.nmt >info.txt || fail "info"
has "trained on   a.en, b.en | a.de, b.de" info.txt
has "^recipe       batch_tokens [0-9]*: " info.txt
has "^recipe       config transformer-tiny: given (--config)" info.txt
"$NMT" info --format json two.nmt | grep -q '"recipe"' || fail "info json: no recipe"

# 5. Filters: copies of pairs and a pair of 5x the length ratio are dropped
# and counted; --no-filter keeps them.
{ cat a.en; head -50 a.en; } >f.en
{ cat a.de; head -50 a.de; } >f.de
echo "Hello ." >>f.en
echo "Ein Mann schreibt einen Satz über Hunde und Katzen und Vögel am Strand im Sommer ." >>f.de
# One vocabulary for both runs, so that the same pairs have the same lengths.
spm_train --input=a.en,a.de --model_prefix=toy --vocab_size=300 --pad_id=0 --unk_id=1 \
  --bos_id=2 --eos_id=3 --minloglevel=2 >/dev/null 2>&1 || fail "spm_train"
ratio_dropped() { sed -n 's/.*exact duplicate pairs and \([0-9]*\) of implausible length ratio.*/\1/p' "$1"; }
"$NMT" train -c transformer-tiny --spm toy.model --train-src a.en --train-tgt a.de --out a.nmt \
  --max-steps 2 --threads 1 2>a.err || fail "a alone: $(cat a.err)"
has "dropped 0 exact duplicate pairs" a.err
"$NMT" train -c transformer-tiny --spm toy.model --train-src f.en --train-tgt f.de --out f.nmt \
  --max-steps 2 --threads 1 2>f.err || fail "filters: $(cat f.err)"
has "dropped 50 exact duplicate pairs and [0-9]* of implausible length ratio (target/source subwords outside [0-9.]*-[0-9.]*, 3x off the median" f.err
r0=$(ratio_dropped a.err) r1=$(ratio_dropped f.err)
[ -n "$r0" ] && [ "$r1" -eq $((r0 + 1)) ] || fail "length ratio: $r0 dropped alone, $r1 with the added pair"
kept=$(sed -n 's/.*training data: \([0-9]*\) of 600 pairs.*/\1/p' a.err)
has "training data: $kept of 651 pairs" f.err  # the same pairs as a alone
has "peak memory [0-9]* MiB" f.err
"$NMT" train -c transformer-tiny --spm toy.model --train-src f.en --train-tgt f.de --out nf.nmt \
  --max-steps 2 --threads 1 --no-filter 2>nf.err || fail "--no-filter: $(cat nf.err)"
nfkept=$(sed -n 's/.*training data: \([0-9]*\) of 651 pairs.*/\1/p' nf.err)
[ -n "$nfkept" ] && [ "$nfkept" -gt "$kept" ] || fail "--no-filter kept $nfkept pairs, the filters $kept"
has "no-filter: duplicates and length ratios kept" nf.err

# 6. A resumed run keeps what the recipe chose when it began.
"$NMT" train -c transformer-tiny --vocab-size 300 --train-src "$toy/train.en" --train-tgt "$toy/train.de" \
  --out r.nmt --max-steps 6 --checkpoint-every 3 --threads 1 2>r1.err || fail "first run: $(cat r1.err)"
batch=$(sed -n 's/.*recipe: batch_tokens \([0-9]*\):.*/\1/p' r1.err)
[ -n "$batch" ] || fail "no batch_tokens in the recipe: $(cat r1.err)"
rm r.nmt
"$NMT" train -c transformer-tiny --vocab-size 300 --train-src "$toy/train.en" --train-tgt "$toy/train.de" \
  --out r.nmt --max-steps 12 --threads 1 --resume 2>r2.err || fail "resumed run: $(cat r2.err)"
has "resuming with the recipe the run began with" r2.err
hasnt "recipe: " r2.err
hasnt "warning: --" r2.err
"$NMT" info --format json r.nmt | python3 -c "
import json, sys
j = json.load(sys.stdin)
assert j['training_options']['batch_tokens'] == $batch, j['training_options']
assert any(c['key'] == 'batch_tokens' for c in j['recipe'])
" || fail "resumed model: batch or recipe changed"
# 7. A time budget: the schedule's end follows the measured speed, so the
# learning rate has decayed to near 0 when the time is up.
"$NMT" train -c transformer-tiny --vocab-size 300 --train-src "$toy/train.en" --train-tgt "$toy/train.de" \
  --out t.nmt --max-minutes 0.2 --threads 1 2>t.err || fail "timed run: $(cat t.err)"
has "schedule: the learning rate reaches 0 at update" t.err
has "wrote t.nmt after [0-9]* steps (max-minutes)" t.err
# (Under AddressSanitizer the first steps are too slow for 12 s to hold 50.)
asan_build "$NMT" && { echo "cli_train_recipe: all passed (the timed run's schedule unchecked: an AddressSanitizer build)"; exit 0; }
python3 - t.nmt.log.jsonl <<'PY' || fail "timed run: the learning rate did not end near 0: $(tail -3 t.nmt.log.jsonl)"
import json, sys
lr = [r["lr"] for r in map(json.loads, open(sys.argv[1])) if r.get("type") == "train"]
assert len(lr) > 50, len(lr)
assert lr[-1] < 0.15 * max(lr), (lr[-1], max(lr))
PY
echo "cli_train_recipe: all passed"
