#!/usr/bin/env bash
# nmt distill on the built binary, on Multi30k's first pairs (a teacher of
# 300 steps and its OUT.best as an ensemble, 2000 pairs distilled, a
# 3-minute budget):
#  - refusals: one line each, exit 2 for options, 1 for inputs;
#  - each step printed with its choice, reason and time: the teacher's
#    compute type, its translations, the filter (counts that add up, a
#    threshold that splits the kept from the dropped), the two pilots, the
#    student (one decoder layer), int8;
#  - a stop during the student's training exits 130 and --resume finishes;
#    other options on resume are refused; a finished run resumed does nothing;
#  - a teacher step cut mid-line goes on after its last whole line, and
#    gives the same lines as the uninterrupted run;
#  - the student is an ordinary model: info says how it was distilled,
#    translate and score take it.
# Usage: cli_distill.sh NMT DATA_DIR WORK_DIR
set -uo pipefail
NMT=$1 DATA=$2 WORK=$3
rm -rf "$WORK" && mkdir -p "$WORK"
cd "$WORK" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$(dirname "$0")/cli_common.sh"
m=$DATA/multi30k
has() { grep -q -- "$1" "$2" || fail "expected '$1' in $2: $(cat "$2")"; }

# The teacher: a short training, and its best checkpoint beside it.
gzip -cd "$m/train.en.gz" | head -5000 >tr.en
gzip -cd "$m/train.de.gz" | head -5000 >tr.de
gzip -cd "$m/val.en.gz" | head -50 >va.en
gzip -cd "$m/val.de.gz" | head -50 >va.de
"$NMT" train -c transformer-tiny --train-src tr.en --train-tgt tr.de --valid-src va.en \
  --valid-tgt va.de --out t.nmt --vocab-size 1000 --max-steps 300 --valid-every 150 --seed 1 \
  2>teacher.err || fail "teacher: $(cat teacher.err)"
[ -f t.nmt.best ] || fail "no t.nmt.best"
head -2000 tr.en >src.en
head -2000 tr.de >src.de
base=(--train-src src.en --train-tgt src.de --valid-src va.en --valid-tgt va.de)

# 1. Refusals, before any work.
expect 2 "max-minutes" "$NMT" distill --teacher t.nmt "${base[@]}" -o s.nmt
expect 1 "no-such.nmt" "$NMT" distill --teacher no-such.nmt "${base[@]}" -o s.nmt --max-minutes 1
expect 2 "valid-tgt" "$NMT" distill --teacher t.nmt --train-src src.en --train-tgt src.de \
  --valid-src va.en -o s.nmt --max-minutes 1
expect 2 "drop-share" "$NMT" distill --teacher t.nmt "${base[@]}" -o s.nmt --max-minutes 1 \
  --drop-share 0.7
expect 2 "is the --train-src file" "$NMT" distill --teacher t.nmt "${base[@]}" -o src.en \
  --max-minutes 1
expect 1 "no earlier run" "$NMT" distill --teacher t.nmt "${base[@]}" -o s.nmt --max-minutes 1 \
  --resume
[ ! -e s.nmt.distill ] || fail "a refused run left s.nmt.distill"

# 2. The whole flow, stopped three seconds into the student's training.
common=(--teacher t.nmt t.nmt.best "${base[@]}" --max-minutes 3 --pilot-minutes 0.3)
args=("${common[@]}" -o s.nmt)
"$NMT" distill "${args[@]}" 2>run1.err &
pid=$!
for _ in $(seq 600); do
  grep -q "^nmt distill: student: .*step 1 " run1.err && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.5
done
sleep 3
kill -INT $pid
wait $pid
rc=$?
[ $rc -eq 130 ] || fail "stopped: exit $rc, expected 130: $(tail -5 run1.err)"
has "teacher: int8: chrF [0-9.]* in int8 against [0-9.]* in f32 (50 validation sentences, beam [0-9]*)\|teacher: f32: chrF .* more than 0.5 lost" run1.err
has "teacher: translating 2000 lines at beam 4" run1.err
has "teacher: done \[" run1.err
has "filter: kept [0-9]* of 2000 pairs; [0-9]* scored below" run1.err
has "original targets: two pilots of 0.3 minutes each" run1.err
has "original targets: \(mix\|none\): validation chrF" run1.err
has "student: recipe: layers [0-9]*+1: --optimize student" run1.err
has "stopped: .* of 3 minutes spent; --resume goes on from here" run1.err
[ ! -e s.nmt ] || fail "a stopped run wrote s.nmt"
[ "$(wc -l <s.nmt.distill/teacher.jsonl)" -eq 2000 ] || fail "teacher.jsonl: not 2000 lines"
# The filter's counts add up, and its threshold splits what it kept from
# what it dropped (by the teacher's log-probability per token).
python3 - s.nmt.distill <<'EOF' || fail "filter check"
import json, sys
d = sys.argv[1]
f = json.load(open(d + "/state.json"))["filter"]
assert f["kept"] + f["low_score"] + f["empty"] == f["pairs"] == 2000, f
assert f["low_score"] == int(0.05 * (2000 - f["empty"])), f
t = [json.loads(l) for l in open(d + "/teacher.jsonl")]
src = open("src.en").read().split("\n")[:2000]
kept_tgt = open(d + "/distilled.tgt").read().split("\n")[:-1]
assert len(kept_tgt) == f["kept"], (len(kept_tgt), f)
score = [x["lp"] / max(1, x["n"]) for x in t]
ok = [i for i in range(2000) if src[i].strip() and t[i]["t"].strip()]
kept = sorted(ok, key=lambda i: score[i])[f["low_score"]:]
assert all(score[i] >= f["threshold"] for i in kept), "a kept pair below the threshold"
dropped = sorted(ok, key=lambda i: score[i])[:f["low_score"]]
assert all(score[i] <= f["threshold"] for i in dropped), "a dropped pair above the threshold"
assert [t[i]["t"] for i in sorted(kept)] == kept_tgt, "distilled.tgt is not the kept lines"
EOF

# 3. Resuming with other options is refused; as it was, it finishes.
expect 1 "beam differs from the earlier run's" "$NMT" distill "${args[@]}" --beam 2 --resume
"$NMT" distill "${args[@]}" --resume 2>run2.err || fail "resume: $(tail -5 run2.err)"
has "resuming: [0-9.]* of 3 minutes spent" run2.err
has "wrote s.nmt: distilled by t.nmt and 1 more (beam 4" run2.err
if grep -q "teacher: translating\|pilots of" run2.err; then fail "resume redid done steps: $(cat run2.err)"; fi
"$NMT" distill "${args[@]}" --resume 2>run3.err || fail "resume done: $(cat run3.err)"
has "nothing to do: s.nmt was written" run3.err

# 4. The student is an ordinary model.
"$NMT" info s.nmt >info.txt || fail "info"
has "int8 weights" info.txt
has "^distilled    by t.nmt and 1 more (beam 4, .*); [0-9]* of 2000 pairs kept; original targets" info.txt
has "^config       transformer-small-3x1: 3+1 layers" info.txt
"$NMT" info --format json s.nmt | python3 -c '
import json, sys
d = json.load(sys.stdin)["distilled_from"]
assert d["teachers"] == ["t.nmt", "t.nmt.best"] and d["beam"] == 4, d
assert d["weights"] == "int8" and "chrf_int8" in d, d
assert d["pairs"]["pairs"] == 2000, d' || fail "info json"
"$NMT" translate -m s.nmt -i va.en -o va.out 2>tr.err || fail "translate: $(cat tr.err)"
[ "$(wc -l <va.out)" -eq 50 ] || fail "translate: not 50 lines"
"$NMT" score -m s.nmt --src va.en --tgt va.de >/dev/null 2>sc.err \
  || fail "score -m: $(cat sc.err)"

# 5. A teacher step cut mid-line (a crash) goes on after its last whole
# line, and its lines equal the uninterrupted run's.
mkdir s2.nmt.distill
python3 - <<'EOF' || fail "crafting a cut run"
import json
s = json.load(open("s.nmt.distill/state.json"))
keep = {k: s[k] for k in ("version", "inputs", "teacher_compute")}
keep["minutes"] = 2.99
keep["original"] = {"choice": "none", "reason": "test"}
json.dump(keep, open("s2.nmt.distill/state.json", "w"))
lines = open("s.nmt.distill/teacher.jsonl").read().split("\n")
open("s2.nmt.distill/teacher.jsonl", "w").write("\n".join(lines[:1250]) + "\n" + lines[1250][:7])
EOF
"$NMT" distill "${common[@]}" -o s2.nmt --resume 2>cut.err
[ $? -eq 1 ] || fail "cut run: expected exit 1 (budget spent): $(cat cut.err)"
has "teacher: translating 2000 lines at beam 4 in .* from line 1251" cut.err
has "the budget is spent" cut.err
cmp s.nmt.distill/teacher.jsonl s2.nmt.distill/teacher.jsonl || fail "resumed teacher lines differ"
cmp s.nmt.distill/distilled.tgt s2.nmt.distill/distilled.tgt || fail "distilled pairs differ"
echo "cli_distill: ok"
