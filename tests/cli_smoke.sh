#!/usr/bin/env bash
# CLI smoke test on the built binary: train a tiny model on the joeynmt toy
# corpus, translate through a pipe, score, and check that bad input gives one
# clear line and a non-zero exit.  Usage: cli_smoke.sh NMT DATA_DIR WORK_DIR
set -uo pipefail
NMT=$1 DATA=$2 WORK=$3
rm -rf "$WORK" && mkdir -p "$WORK"
fail() { echo "FAIL: $*" >&2; exit 1; }
toy=$DATA/joeynmt-toy

"$NMT" --version >/dev/null || fail "--version"
# A CPU run loads no CUDA library: the backend is lib/cuda's own library,
# opened only when a GPU is asked about (cuBLAS alone maps some 540 MB).
ldd "$NMT" >"$WORK/ldd.txt" || fail "ldd $NMT"
! grep -E 'libcu(blas|blasLt|dart)\.' "$WORK/ldd.txt" || fail "nmt links CUDA libraries"
# In a build with CUDA the library loads (else every GPU test would skip as
# if there were no GPU), and one that cannot be used is named with the reason.
"$NMT" --version >"$WORK/version.txt" || fail "--version"
if ! grep -q "cuda: not built" "$WORK/version.txt"; then
  ! grep -q "cuda: built, not loadable" "$WORK/version.txt" || fail "$(grep -o 'cuda: [^;]*' "$WORK/version.txt")"
  NMT_CUDA_LIBRARY=$DATA/joeynmt-toy/train.en "$NMT" --version >"$WORK/version.txt" || fail "--version"
  grep -q "cuda: built, not loadable (.*train.en" "$WORK/version.txt" ||
    fail "NMT_CUDA_LIBRARY naming a text file: $(grep -o 'cuda: [^;]*' "$WORK/version.txt")"
fi
"$NMT" train -c transformer-tiny --train-src "$toy/train.en" --train-tgt "$toy/train.de" \
  --valid-src "$toy/dev.en" --valid-tgt "$toy/dev.de" --out "$WORK/m.nmt" \
  --vocab-size 300 --max-steps 15 --batch-tokens 1024 --seed 1 2>"$WORK/train.err" \
  || { cat "$WORK/train.err"; fail "train"; }
[ -s "$WORK/m.nmt" ] || fail "no model written"

printf 'Hello world.\n\nThis is a test.\n' | "$NMT" translate -m "$WORK/m.nmt" --beam 2 >"$WORK/out.txt" \
  || fail "translate"
[ "$(wc -l <"$WORK/out.txt")" -eq 3 ] || fail "translate: expected 3 output lines, got $(wc -l <"$WORK/out.txt")"
[ -z "$(sed -n 2p "$WORK/out.txt")" ] || fail "translate: empty line in, non-empty line out"
printf 'Hello world.\n' | LD_DEBUG=files "$NMT" translate -m "$WORK/m.nmt" 2>"$WORK/ld.txt" >/dev/null ||
  fail "translate under LD_DEBUG"
grep -qE 'file=libcu(blas|blasLt|dart)\.' "$WORK/ld.txt" &&
  fail "a CPU translation loaded CUDA: $(grep -m1 -E 'file=libcu' "$WORK/ld.txt")"
# Nor what only pictures, Marian's .npz, -tok ja-mecab and several ranks use
# (opened on first use, lib/core/dynlib.h): cairo with X11 and fonts, libzip
# with libcrypto, MeCab, Open MPI.
unused='lib(cairo|zip|mecab|crypto|X11|pixman-1|mpi|open-pal)\.so'
! grep -E "$unused" "$WORK/ldd.txt" || fail "nmt links libraries that translation does not use"
grep -qE "file=$unused" "$WORK/ld.txt" &&
  fail "a translation loaded $(grep -m1 -oE "file=$unused[^ ]*" "$WORK/ld.txt")"

printf 'a\nb\n' | "$NMT" translate -m "$WORK/m.nmt" --beam 2 --n-best 2 >"$WORK/nbest.txt" || fail "n-best"
[ "$(wc -l <"$WORK/nbest.txt")" -eq 4 ] || fail "n-best: expected 4 lines"
grep -q '^1 ||| ' "$WORK/nbest.txt" || fail "n-best format"
printf 'a\n' | "$NMT" translate -m "$WORK/m.nmt" --format jsonl | grep -q '^{"line":1,.*"translation":"[^"]*"}$' \
  || fail "jsonl"

# Workers share one model; the output does not depend on how many there are.
"$NMT" translate -m "$WORK/m.nmt" -i "$toy/dev.en" --beam 2 --workers 1 --threads 1 >"$WORK/w1.txt" 2>/dev/null \
  || fail "translate --workers 1"
"$NMT" translate -m "$WORK/m.nmt" -i "$toy/dev.en" --beam 2 --workers 3 --window 64 --batch-tokens 300 >"$WORK/w3.txt" 2>/dev/null \
  || fail "translate --workers 3"
"$NMT" translate -m "$WORK/m.nmt" -i "$toy/dev.en" --beam 2 --window 64 --batch-tokens 300 >"$WORK/w1b.txt" 2>/dev/null
cmp -s "$WORK/w3.txt" "$WORK/w1b.txt" || fail "--workers 3 differs from --workers 1"
[ "$(wc -l <"$WORK/w1.txt")" -eq "$(wc -l <"$toy/dev.en")" ] || fail "--workers: line count"

# Interactive use: a line written into an open pipe comes back before the
# input ends (nmt flushes a window as soon as more input would block).
coproc NMTP { "$NMT" translate -m "$WORK/m.nmt" --beam 1 2>/dev/null; }
echo "Hello world." >&"${NMTP[1]}"
IFS= read -r -t 60 answer <&"${NMTP[0]}" || fail "interactive: no answer while stdin was still open"
exec {NMTP[1]}>&-
wait "$NMTP_PID" || fail "interactive: exit status"

# A reader that goes away early: nmt must end quietly with status 0.
head -300 "$toy/train.en" | "$NMT" translate -m "$WORK/m.nmt" --beam 1 --window 8 2>"$WORK/pipe.err" | head -1 >/dev/null
rc=${PIPESTATUS[1]}
[ "$rc" -eq 0 ] || fail "closed stdout: exit $rc"
! grep -v "warning" "$WORK/pipe.err" || fail "closed stdout: printed an error"

head -3 "$toy/dev.en" >"$WORK/s.txt"; head -3 "$toy/dev.de" >"$WORK/t.txt"
"$NMT" score -m "$WORK/m.nmt" --src "$WORK/s.txt" --tgt "$WORK/t.txt" >"$WORK/score.txt" || fail "score -m"
[ "$(wc -l <"$WORK/score.txt")" -eq 4 ] || fail "score -m: expected a header and 3 lines"
head -1 "$WORK/score.txt" | grep -q '^logprob	tokens	logprob_per_token	score$' || fail "score -m: header"
"$NMT" score --metric bleu "$WORK/t.txt" -i "$WORK/t.txt" | grep -q '^BLEU|nrefs:1|.* = 100.00 ' || fail "score --metric bleu"

# An int8 copy: about a quarter of the size, said so by info, and it
# translates as the f32 model does when told to compute in int8.
"$NMT" quantize "$WORK/m.nmt" -o "$WORK/m8.nmt" 2>/dev/null || fail "quantize"
f32_bytes=$(stat -c %s "$WORK/m.nmt") s8_bytes=$(stat -c %s "$WORK/m8.nmt")
# Each weight goes from 4 bytes to 1; the vocabulary and metadata stay.
params=$("$NMT" info "$WORK/m.nmt" | sed -n 's/^parameters .*(\([0-9]*\))$/\1/p')
[ -n "$params" ] && [ $((f32_bytes - s8_bytes)) -gt $((params * 5 / 2)) ] \
  || fail "quantize: $s8_bytes bytes from $f32_bytes for $params parameters"
"$NMT" info "$WORK/m8.nmt" | grep -q "int8 weights" || fail "info: no int8 weights shown"
"$NMT" translate -m "$WORK/m8.nmt" -i "$toy/dev.en" --beam 2 >"$WORK/q8.txt" 2>/dev/null || fail "translate int8 model"
"$NMT" translate -m "$WORK/m.nmt" -i "$toy/dev.en" --beam 2 --compute-type int8 >"$WORK/q32.txt" 2>/dev/null \
  || fail "translate --compute-type int8"
cmp -s "$WORK/q8.txt" "$WORK/q32.txt" || fail "the int8 file and --compute-type int8 translate differently"
[ "$(wc -l <"$WORK/q8.txt")" -eq "$(wc -l <"$toy/dev.en")" ] || fail "int8: line count"

# Bad input: one line on stderr, non-zero exit, no crash. The patterns are
# whole messages: a word or a digit ("2.*1") would match another error.
expect_error() {  # pattern, command...
  local pat=$1; shift
  "$@" </dev/null >/dev/null 2>"$WORK/err.txt"
  local rc=$?
  [ "$rc" -ne 0 ] && [ "$rc" -lt 128 ] || fail "$*: exit $rc"
  [ "$(wc -l <"$WORK/err.txt")" -eq 1 ] || fail "$*: expected one line, got: $(cat "$WORK/err.txt")"
  grep -q -- "$pat" "$WORK/err.txt" || fail "$*: expected '$pat', got: $(cat "$WORK/err.txt")"
}
expect_error "^nmt: error: -m $WORK/missing.nmt: No such file or directory$" \
  "$NMT" translate -m "$WORK/missing.nmt"
head -c 5000 "$WORK/m.nmt" >"$WORK/trunc.nmt"
expect_error "^nmt: error: $WORK/trunc.nmt: not a valid model file: header length [0-9]* exceeds the file size 5000 (truncated?)$" \
  "$NMT" translate -m "$WORK/trunc.nmt"
echo '{"d_model": 10,' >"$WORK/bad.json"
expect_error "^nmt: error: $WORK/bad.json: not valid JSON: " "$NMT" summary -c "$WORK/bad.json"
printf 'x\ny\n' >"$WORK/two.txt"; printf 'x\n' >"$WORK/one.txt"
expect_error "^nmt: error: score: $WORK/two.txt has 2 lines but reference $WORK/one.txt has 1$" \
  "$NMT" score --metric bleu "$WORK/one.txt" -i "$WORK/two.txt"
expect_error "^nmt: error: parallel files differ in length: $WORK/two.txt has 2 lines but $WORK/one.txt has 1$" \
  "$NMT" train -c transformer-tiny --train-src "$WORK/two.txt" --train-tgt "$WORK/one.txt" --out "$WORK/x.nmt"
cp "$WORK/m.nmt" "$WORK/keep.nmt"
expect_error "error: -o $WORK/m.nmt is the model file $WORK/m.nmt; refusing to overwrite it" \
  "$NMT" quantize "$WORK/m.nmt" -o "$WORK/m.nmt"
cmp -s "$WORK/m.nmt" "$WORK/keep.nmt" || fail "quantize onto itself changed the model"
expect_error "^nmt: error: $WORK/m8.nmt is already quantised (int8)$" "$NMT" quantize "$WORK/m8.nmt" -o "$WORK/m88.nmt"
expect_error "compute-type: fp7 not in" "$NMT" translate -m "$WORK/m.nmt" --compute-type fp7
# The ops that lack bf16 are named: the products, and in training their backward pass too.
no_bf16="^nmt: error: --compute-type bf16: bf16 needs a CPU with AVX512-BF16 or AMX; this one has avx2"
ONEDNN_MAX_CPU_ISA=AVX2 expect_error "$no_bf16 (gemm)$" "$NMT" translate -m "$WORK/m.nmt" --compute-type bf16
ONEDNN_MAX_CPU_ISA=AVX2 expect_error "$no_bf16 (gemm, linear_backward)$" "$NMT" train -c transformer-tiny \
  --train-src "$toy/train.en" --train-tgt "$toy/train.de" --out "$WORK/b.nmt" --compute-type bf16
# --device: where there is no GPU (or no CUDA in the build), asking for one
# is one line and exit 1 before anything is read or written; a name that is
# no device is a usage error.
head -20 "$toy/dev.en" >"$WORK/dev.en" && head -20 "$toy/dev.de" >"$WORK/dev.de"
"$NMT" --version >"$WORK/version-now.txt" 2>&1  # version.txt was rewritten above
if grep -qE "cuda: not built|cuda: built, not loadable|0 devices" "$WORK/version-now.txt"; then
  no_gpu="^nmt: error: \\(no CUDA device is available\\|nmt was built without CUDA support\\)$"
  expect_error "$no_gpu" "$NMT" translate -m "$WORK/m.nmt" --device cuda -i "$WORK/dev.en" -o "$WORK/d.txt"
  [ ! -e "$WORK/d.txt" ] || fail "translate --device cuda without a GPU wrote its output"
  expect_error "$no_gpu" "$NMT" score -m "$WORK/m.nmt" --src "$WORK/dev.en" --tgt "$WORK/dev.de" --device cuda:0
  expect_error "$no_gpu" "$NMT" attention -m "$WORK/m.nmt" "A man." -o "$WORK/d.svg" --device cuda
  expect_error "$no_gpu" "$NMT" train -c transformer-tiny --train-src "$toy/train.en" \
    --train-tgt "$toy/train.de" --out "$WORK/d.nmt" --device cuda
  [ ! -e "$WORK/d.nmt" ] && [ ! -e "$WORK/d.svg" ] || fail "--device cuda without a GPU wrote a file"
fi
expect_error "^nmt translate: error: --device: expected cpu or cuda\[:N\], got \"gpu\"" \
  "$NMT" translate -m "$WORK/m.nmt" --device gpu
"$NMT" translate -m "$WORK/m.nmt" --device cpu <"$WORK/dev.en" >"$WORK/dcpu.txt" || fail "--device cpu"
"$NMT" translate -m "$WORK/m.nmt" <"$WORK/dev.en" | cmp -s - "$WORK/dcpu.txt" || fail "--device cpu differs from the default"
echo "cli smoke: all checks passed"
