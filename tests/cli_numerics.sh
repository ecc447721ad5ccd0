#!/usr/bin/env bash
# The arithmetic in the open (lib/cpu/numerics.h): --version, nmt info and
# translate --verbose print one numerics line; NMT_NUMERICS forces each of
# its choices that this CPU can run, and every forced path translates the
# test lines and scores their references near the default's log-
# probabilities; a malformed or impossible
# NMT_NUMERICS is refused in one line before anything is written.
#   cli_numerics.sh NMT DATA WORK
set -uo pipefail
NMT=$1 DATA=$2 WORK=$3
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf "$WORK" && mkdir -p "$WORK"
cd "$WORK" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }
source "$HERE/cli_common.sh"

zcat "$DATA/multi30k/test_2016_flickr.en.gz" | head -20 >test.en
zcat "$DATA/multi30k/test_2016_flickr.de.gz" | head -20 >test.de
"$NMT" convert "$HERE/fixtures/peers/marian-opus/model.npz" -o m.nmt 2>err.txt ||
  fail "convert: $(cat err.txt)"

line=$("$NMT" --version | sed -n 's/^numerics: \(kernels .*\)$/\1/p')
[ -n "$line" ] || fail "--version prints no numerics: $("$NMT" --version)"
info=$("$NMT" info m.nmt | sed -n 's/^numerics     \(.*\) (on this machine)$/\1/p')
[ "$info" = "$line" ] || fail "nmt info's numerics '$info' differ from --version's '$line'"

# translate CT OUT [NMT_NUMERICS]: the test lines translated into OUT, its
# --verbose numerics line in OUT.num, and their references' model scores in
# OUT.lp (log-probability per token, one line each).
translate() {
  NMT_NUMERICS=${3:-} "$NMT" translate -m m.nmt -i test.en -o "$2" --compute-type "$1" --beam 4 \
    --threads 1 --verbose 2>err.txt || fail "translate $1 NMT_NUMERICS=${3:-}: $(cat err.txt)"
  sed -n 's/^numerics: //p' err.txt >"$2.num"
  [ "$(wc -l <"$2")" -eq 20 ] || fail "NMT_NUMERICS=${3:-}: $(wc -l <"$2") lines for 20"
  NMT_NUMERICS=${3:-} "$NMT" score -m m.nmt --src test.en --tgt test.de --compute-type "$1" \
    --threads 1 2>err.txt >"$2.scores" || fail "score $1 NMT_NUMERICS=${3:-}: $(cat err.txt)"
  tail -n +2 "$2.scores" | cut -f3 >"$2.lp"
}
# close A B LIMIT: every reference's log-probability per token within LIMIT.
close() {
  python3 - "$1" "$2" "$3" <<'PY' || fail "NMT_NUMERICS=$forced ($ct): log-probabilities far from the default's"
import sys
a = [float(l) for l in open(sys.argv[1])]
b = [float(l) for l in open(sys.argv[2])]
sys.exit(len(a) != 20 or len(b) != 20 or max(abs(x - y) for x, y in zip(a, b)) > float(sys.argv[3]))
PY
}

translate f32 d.f32
translate int8 d.int8
[ "$(cat d.f32.num)" = "$line" ] || fail "translate --verbose: '$(cat d.f32.num)', --version: '$line'"

# This CPU's class and VNNI, as nmt's default line says them (cli_portable
# checks the class against /proc/cpuinfo; test_cpu_numerics the rule).
host=$(sed -n 's/^kernels \([a-z0-9]*\);.*/\1/p' <<<"$line")
[ -n "$host" ] || fail "no kernel class in '$line'"
vnni=no
grep -q "int8 products: oneDNN VNNI" <<<"$line" && vnni=yes
# Each forced choice: CT, NMT_NUMERICS, what the line must then say. Scalar
# kernels leave int8 to oneDNN: with VNNI where the CPU has it, else on
# 7-bit weights (cpu/numerics.cpp's rule).
scalar_int8="int8 products: oneDNN (7-bit"
[ "$vnni" = yes ] && scalar_int8="int8 products: oneDNN VNNI"
cases=("f32|f32=onednn|f32 products: oneDNN"
       "f32|sparse=0|sparse ffn2: never"
       "f32|sparse=64M|sparse ffn2: weights up to 64 MiB"
       "f32|kernels=scalar|kernels scalar; f32 products: oneDNN"
       "int8|int8=onednn-7bit|int8 products: oneDNN (7-bit weights)"
       "int8|kernels=scalar|kernels scalar; f32 products: oneDNN; $scalar_int8")
if [ "$host" != scalar ]; then
  cases+=("f32|f32=nmt|f32 products: nmt rows" "int8|int8=nmt|int8 products: nmt rows")
fi
[ "$vnni" = yes ] && cases+=("int8|int8=onednn-vnni|int8 products: oneDNN VNNI")
n=0
for c in "${cases[@]}"; do
  IFS='|' read -r ct forced want <<<"$c"
  n=$((n + 1))
  translate "$ct" "f$n" "$forced"
  grep -qF "$want" "f$n.num" || fail "NMT_NUMERICS=$forced: the line says '$(cat "f$n.num")'"
  # Another summation order moves a log-probability in its 5th or 6th
  # digit; 7-bit int8 weights by about 0.02 a token; a wrong kernel by far
  # more.
  close "d.$ct.lp" "f$n.lp" "$([ "$ct" = int8 ] && echo 0.1 || echo 0.001)"
  echo "ok: NMT_NUMERICS=$forced ($ct): $want"
done

# Refused, in one line naming the problem, before any output is written.
for bad in "f32=fast:f32=fast is not nmt or onednn" "sparse=3Q:sparse=3Q is not a size" \
           "blas=mkl:no key \"blas\"" "f32:\"f32\" is not key=value" \
           "sparse=1M,sparse=2M:sparse given twice"; do
  value=${bad%%:*} pat=${bad#*:}
  NMT_NUMERICS=$value expect 1 "NMT_NUMERICS: $pat" "$NMT" translate -m m.nmt -i test.en -o x.out
  [ -e x.out ] && fail "NMT_NUMERICS=$value: wrote x.out"
done
[ "$host" != avx512 ] && NMT_NUMERICS=kernels=avx512 expect 1 \
  "NMT_NUMERICS: kernels=avx512: this CPU runs $host at most" "$NMT" info m.nmt
[ "$vnni" = yes ] ||
  NMT_NUMERICS=int8=onednn-vnni expect 1 "this CPU has no VNNI" "$NMT" --version
echo "ok: $n forced numerics translate; malformed ones refused"
