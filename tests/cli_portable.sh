#!/usr/bin/env bash
# One binary for every x86-64 CPU (lib/cpu/isa.h): nmt's kernels are
# compiled once per instruction-set class (scalar, AVX2, AVX-512) and one is
# chosen at start, printed by --version (cpu/numerics.h) and forced with
# ONEDNN_MAX_CPU_ISA.
#   cli_portable.sh NMT DATA WORK: no wide register outside the classes'
#     kernels, each class this CPU has is chosen when forced and translates.
#   cli_portable.sh NMT DATA WORK qemu: the binary run as CPUs without AVX
#     (Nehalem) and without AVX-512 (Haswell) would run it, under
#     qemu-x86_64, picks the scalar and AVX2 classes and translates exactly
#     as this CPU does with that class forced (exit 77 without qemu-user,
#     and for an AddressSanitizer build, which qemu-user cannot run).
set -uo pipefail
NMT=$1 DATA=$2 WORK=$3 MODE=${4:-host}
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf "$WORK" && mkdir -p "$WORK"
cd "$WORK" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }
class_of() { sed -n 's/.*numerics: kernels \([a-z0-9]*\).*/\1/p'; }
has() { grep -qw "$1" /proc/cpuinfo; }

zcat "$DATA/multi30k/test_2016_flickr.en.gz" | head -20 >test.en
"$NMT" convert "$HERE/fixtures/peers/marian-opus/model.npz" -o m.nmt 2>err.txt ||
  fail "convert: $(cat err.txt)"
translate() {  # OUT, with the environment given before the call
  "$@" translate -m m.nmt -i test.en -o "$OUT" --beam 4 --threads 1 --scores 2>err.txt ||
    fail "translate ($*): $(cat err.txt)"
}

if [ "$MODE" = qemu ]; then
  command -v qemu-x86_64 >/dev/null || { echo "skipped: no qemu-x86_64 (apt-get install qemu-user)"; exit 77; }
  # qemu-user cannot map AddressSanitizer's shadow memory: an ASan build is
  # killed there before main (the release build is the one this checks).
  source "$HERE/cli_common.sh"
  asan_build "$NMT" && { echo "skipped: an AddressSanitizer build does not run under qemu-user"; exit 77; }
  for pair in Nehalem:SSE41:scalar Haswell:AVX2:avx2; do
    IFS=: read -r cpu cap want <<<"$pair"
    [ "$want" = avx2 ] && ! { has avx2 && has fma; } && continue
    got=$(qemu-x86_64 -cpu "$cpu" "$NMT" --version 2>/dev/null | class_of)
    [ "$got" = "$want" ] || fail "as a $cpu CPU nmt chose the '$got' kernels, not $want"
    OUT=q.$cpu translate qemu-x86_64 -cpu "$cpu" "$NMT"
    OUT=h.$cpu ONEDNN_MAX_CPU_ISA=$cap translate "$NMT"
    cmp -s "q.$cpu" "h.$cpu" ||
      fail "as a $cpu CPU nmt translated otherwise than here with ONEDNN_MAX_CPU_ISA=$cap: $(diff "q.$cpu" "h.$cpu" | head -3)"
    echo "ok: as a $cpu CPU: $want kernels, translations equal to this CPU's with that class forced"
  done
  exit 0
fi

bash "$HERE/isa_check.sh" "$NMT" || exit 1

# The classes this CPU runs, each forced and printed; every one translates
# the test lines (each in its own numbers: line counts and scores checked).
host=scalar
has avx2 && has fma && host=avx2
has avx512f && has avx512bw && has avx512dq && has avx512vl && host=avx512
got=$("$NMT" --version | class_of)
[ "$got" = "$host" ] || fail "nmt chose the '$got' kernels on a CPU whose widest class is $host"
for pair in SSE41:scalar AVX2:avx2 AVX512_CORE:avx512; do
  IFS=: read -r cap want <<<"$pair"
  case $want:$host in avx2:scalar | avx512:scalar | avx512:avx2) continue ;; esac
  got=$(ONEDNN_MAX_CPU_ISA=$cap "$NMT" --version | class_of)
  [ "$got" = "$want" ] || fail "ONEDNN_MAX_CPU_ISA=$cap chose the '$got' kernels, not $want"
  OUT=t.$want ONEDNN_MAX_CPU_ISA=$cap translate "$NMT"
  [ "$(wc -l <"t.$want")" -eq 20 ] || fail "$want kernels: $(wc -l <"t.$want") lines for 20"
  if [ "$want" != scalar ]; then
    python3 - t.scalar "t.$want" <<'PY' || fail "$want kernels' scores are far from the scalar ones"
import sys
a = [float(l.split("\t")[0]) for l in open(sys.argv[1])]
b = [float(l.split("\t")[0]) for l in open(sys.argv[2])]
# Another summation order moves a score in its 5th or 6th digit; a wrong
# kernel moves it by far more (or changes the words, then the score too).
worst = max(abs(x - y) for x, y in zip(a, b))
sys.exit(worst > 0.05)
PY
  fi
  echo "ok: ONEDNN_MAX_CPU_ISA=$cap: $want kernels"
done
echo "ok: this CPU's class is $host"
