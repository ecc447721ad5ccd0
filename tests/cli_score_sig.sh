#!/usr/bin/env bash
# nmt score with several systems, paired tests and confidence intervals
# against what sacreBLEU 2.6.0 printed: every case of
# tests/fixtures/sacrebleu-sig/cases.tsv, compared byte for byte with
# expected/NAME.out (with SACREBLEU_SEED=None only the parts that do not
# depend on the draws), then hostile input. The input files (ref.de, sysA.de,
# ...) are made from DATA_DIR by the fixture's make_inputs.py into
# WORK_DIR/inputs, and the cases run there under the same names, so the
# system names sacreBLEU printed still match. Usage: cli_score_sig.sh NMT DATA_DIR WORK_DIR
set -uo pipefail
NMT=$1 DATA=$2 WORK=$(realpath -m "$3")
[[ $NMT == */* ]] && NMT=$(realpath "$NMT")  # the cases run in WORK/inputs
FIX=$(cd "$(dirname "$0")/fixtures/sacrebleu-sig" && pwd)
rm -rf "$WORK" && mkdir -p "$WORK"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
python3 "$FIX/make_inputs.py" "$DATA" "$WORK/inputs" ||
  { echo "FAIL: could not make the inputs from DATA_DIR '$DATA'" >&2; exit 1; }
cd "$WORK/inputs" || exit 1

while IFS=$'\t' read -r name env args; do
  [[ -z "$name" || "$name" == \#* ]] && continue
  [[ "$env" == - ]] && env=
  # sacreBLEU's -m (metrics) is --metrics in nmt; everything else is the same.
  nargs=$(sed 's/ -m / --metrics /' <<<" $args")
  rc=0
  # shellcheck disable=SC2086
  env $env "$NMT" score $nargs >"$WORK/$name.out" 2>"$WORK/$name.err" || rc=$?
  [[ "$rc" == "$(cat "$FIX/expected/$name.rc")" ]] || { fail "$name: exit $rc"; cat "$WORK/$name.err" >&2; continue; }
  if [[ "$env" == *None* ]]; then
    # Fresh entropy: the numbers differ run to run, the layout and signature do not.
    strip() { grep -v '^│' "$1"; }
    diff <(strip "$FIX/expected/$name.out") <(strip "$WORK/$name.out") >"$WORK/$name.diff" ||
      { fail "$name (seed none)"; cat "$WORK/$name.diff" >&2; }
  else
    diff "$FIX/expected/$name.out" "$WORK/$name.out" >"$WORK/$name.diff" ||
      { fail "$name: nmt score $nargs"; head -20 "$WORK/$name.diff" >&2; }
  fi
done <"$FIX/cases.tsv"

# The same seed gives the same draws twice; another seed gives others.
"$NMT" score ref.de -i sysA.de sysB.de --paired-bs -pbsn 50 -f json >"$WORK/s1" 2>/dev/null
"$NMT" score ref.de -i sysA.de sysB.de --paired-bs -pbsn 50 -f json >"$WORK/s2" 2>/dev/null
SACREBLEU_SEED=3 "$NMT" score ref.de -i sysA.de sysB.de --paired-bs -pbsn 50 -f json >"$WORK/s3" 2>/dev/null
cmp -s "$WORK/s1" "$WORK/s2" || fail "the same seed gave different resamples"
cmp -s "$WORK/s1" "$WORK/s3" && fail "SACREBLEU_SEED=3 gave the default seed's resamples"

# Hostile input. A hypothesis file with fewer lines (sacreBLEU: "System and
# reference streams have different lengths.", exit 1): named, with both counts.
"$NMT" score ref.de -i sysA.de short.de >"$WORK/h1.out" 2>"$WORK/h1.err"; rc=$?
[[ $rc == 1 ]] || fail "short hypothesis: exit $rc, expected 1"
grep -qx 'nmt: error: score: short.de has 350 lines but reference ref.de has 400' "$WORK/h1.err" ||
  { fail "short hypothesis message"; cat "$WORK/h1.err" >&2; }
[[ -s "$WORK/h1.out" ]] && fail "short hypothesis: something was printed on stdout"

# One system with --paired-bs (sacreBLEU: "Paired tests require multiple
# input systems given to --input (-i).", exit 1): a usage error in nmt.
"$NMT" score ref.de -i sysA.de --paired-bs >"$WORK/h2.out" 2>"$WORK/h2.err"; rc=$?
[[ $rc == 2 ]] || fail "--paired-bs with one system: exit $rc, expected 2"
grep -q 'nmt score: error: score: paired tests require multiple input systems given to --input (-i)' "$WORK/h2.err" ||
  { fail "--paired-bs with one system: message"; cat "$WORK/h2.err" >&2; }
# ... and a baseline given twice is one system (sacreBLEU skips the repeat).
"$NMT" score ref.de -i sysA.de sysA.de --paired-ar >/dev/null 2>"$WORK/h3.err"; rc=$?
[[ $rc == 2 ]] || fail "baseline given twice: exit $rc, expected 2"
grep -q 'ignoring sysA.de as it was also given as the baseline' "$WORK/h3.err" || fail "baseline twice: note"
# A repeated non-baseline name is refused, as sacreBLEU refuses it.
"$NMT" score ref.de -i sysA.de sysB.de sysB.de >/dev/null 2>"$WORK/h4.err"; rc=$?
[[ $rc == 1 ]] || fail "system named twice: exit $rc, expected 1"
# --paired-bs and --paired-ar together, --confidence with several systems,
# tests at sentence level: usage errors.
"$NMT" score ref.de -i sysA.de sysB.de --paired-bs --paired-ar >/dev/null 2>&1; [[ $? == 2 ]] || fail "-pbs with -par"
"$NMT" score ref.de -i sysA.de sysB.de -ci >/dev/null 2>"$WORK/h5.err"; [[ $? == 2 ]] || fail "-ci with two systems"
grep -q 'use --paired-bs or --paired-ar for several' "$WORK/h5.err" || fail "-ci with two systems: message"
"$NMT" score ref.de -i sysA.de -ci -sl >/dev/null 2>&1; [[ $? == 2 ]] || fail "-ci with -sl"
# A bad seed names the variable.
SACREBLEU_SEED=x "$NMT" score ref.de -i sysA.de sysB.de -pbs >/dev/null 2>"$WORK/h6.err"; [[ $? == 1 ]] || fail "bad seed: exit"
grep -q "SACREBLEU_SEED must be a non-negative integer or 'none', got 'x'" "$WORK/h6.err" || fail "bad seed: message"
# Invalid UTF-8 (sacreBLEU stops with a UnicodeDecodeError): nmt warns with
# the file and line, replaces the bytes, and still compares.
"$NMT" score ref.de -i sysA.de bad.de --paired-bs -pbsn 20 -f text >"$WORK/h7.out" 2>"$WORK/h7.err"; rc=$?
[[ $rc == 0 ]] || fail "invalid UTF-8: exit $rc"
grep -q 'bad.de.*line 3' "$WORK/h7.err" || { fail "invalid UTF-8: no warning naming bad.de line 3"; cat "$WORK/h7.err" >&2; }
grep -q 'Baseline: sysA.de' "$WORK/h7.out" || fail "invalid UTF-8: no table"

# Resamples are drawn a block at a time: memory follows their number, not
# their number times the lines (50,000 resamples of these 400 lines held
# 160 MB of indices, 10^7 of 1000 lines ran out of memory).
source "$(cd "$(dirname "$0")" && pwd)/cli_common.sh"
for args in "-i sysA.de sysB.de --paired-bs -pbsn 50000" "-i sysA.de -ci -cin 50000" \
            "-i sysA.de sysB.de --paired-ar -parn 200000"; do
  # shellcheck disable=SC2086
  kb=$(peak_kb "$WORK/m.out" "$NMT" score ref.de $args)
  { [[ $kb -ge 0 ]] && grep -q BLEU "$WORK/m.out"; } || fail "score $args failed"
  asan_build "$NMT" || [[ $kb -lt 60000 ]] || fail "score $args took $kb KB"
done
# A count whose scores alone could not fit in this machine's memory is
# refused at once, naming the option (2^31 resamples of 3 metrics: 96 GiB).
mem_kb=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
if ((mem_kb < 96 * 1024 * 1024)); then
  "$NMT" score ref.de -i sysA.de sysB.de --paired-bs -pbsn 2147483647 --metrics bleu chrf ter \
    >"$WORK/b1.out" 2>"$WORK/b1.err"; rc=$?
  [[ $rc == 2 ]] || fail "--paired-bs-n 2147483647: exit $rc, expected 2"
  grep -q '^nmt score: error: score: --paired-bs-n 2147483647 needs 96.0 GiB to keep the scores of its resamples (48 bytes each with --metrics bleu chrf ter), more than this machine.s .*; expected at most [0-9]*' "$WORK/b1.err" ||
    { fail "--paired-bs-n 2147483647: message"; cat "$WORK/b1.err" >&2; }
else
  echo "cli_score_sig: skipped the --paired-bs-n bound (this machine has $mem_kb KB, more than it needs)" >&2
fi
# Memory that runs out anyway (here under a ulimit) is told with what was
# being done. AddressSanitizer reserves more address space than any limit.
if asan_build "$NMT"; then
  echo "cli_score_sig: skipped out-of-memory under ulimit -v (an AddressSanitizer build)" >&2
else
  # The bound is the memory the process may use: under the ulimit, 60M
  # resamples (480 MB of scores) are refused before any work; 45M pass the
  # bound and run out with the rest of what the run holds.
  (ulimit -v 400000; "$NMT" score ref.de -i sysA.de -ci -cin 60000000) >/dev/null 2>"$WORK/o1.err"; rc=$?
  [[ $rc == 2 ]] || fail "-cin 60000000 under 400 MB: exit $rc, expected 2"
  grep -q -- '--confidence-n 60000000 needs 0.4 GiB' "$WORK/o1.err" ||
    { fail "-cin 60000000 under 400 MB: message"; cat "$WORK/o1.err" >&2; }
  (ulimit -v 400000; "$NMT" score ref.de -i sysA.de -ci -cin 45000000) >/dev/null 2>"$WORK/o2.err"; rc=$?
  [[ $rc == 1 ]] || fail "-cin 45000000 under 400 MB: exit $rc, expected 1"
  grep -qx 'nmt: error: score: out of memory resampling for --confidence-n 45000000' "$WORK/o2.err" ||
    { fail "-cin 45000000 under 400 MB: message"; cat "$WORK/o2.err" >&2; }
fi

if ((failures)); then echo "$failures failure(s)" >&2; exit 1; fi
echo "cli_score_sig: all cases match sacreBLEU 2.6.0"
