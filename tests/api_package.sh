#!/usr/bin/env bash
# The installed package: `cmake --install` into a fresh prefix, the programs
# of examples/ built against it with find_package(nmt) alone, and what they
# write byte for byte what the installed `nmt` writes: translations (as a
# stream, and as lines in one call), n-best jsonl, corpus BLEU, and an error
# that names the option by its key.
# Usage: api_package.sh NMT DATA_DIR WORK_DIR BUILD_DIR SOURCE_DIR
set -u
BUILD=$4 SRC=$5
WORK=$3
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$SRC/tests/cli_common.sh"
# A sanitized libnmt would need its runtime loaded first by every program.
if asan_build "$1"; then echo "api_package: skipped (an AddressSanitizer build)"; exit 77; fi

cmake --install "$BUILD" --prefix "$WORK/prefix" >install.log 2>&1 || { cat install.log; fail "cmake --install"; }
for f in bin/nmt include/nmt/nmt.h lib/cmake/nmt/nmtConfig.cmake share/nmt/models/transformer-tiny.json; do
  [ -e "prefix/$f" ] || fail "cmake --install wrote no $f"
done
ls prefix/lib/libnmt.so* >/dev/null 2>&1 || fail "cmake --install wrote no libnmt.so"
# Only the public API is exported: no symbol of the library's own namespaces.
if nm -DC --defined-only prefix/lib/libnmt.so | grep -E ' nmt::(Translator|BeamSearch|TranslationService)' | grep -q .; then
  fail "libnmt.so exports the library's internals"
fi
NMT="$WORK/prefix/bin/nmt"

# The examples see the installed package and nothing of the build.
cmake -S "$SRC/examples" -B ex -DCMAKE_PREFIX_PATH="$WORK/prefix" -DCMAKE_BUILD_TYPE=Release \
  >ex.log 2>&1 || { cat ex.log; fail "configuring examples/ against the installed package"; }
cmake --build ex -j2 >>ex.log 2>&1 || { cat ex.log; fail "building examples/"; }
ldd ex/translate | grep -q "$WORK/prefix/lib/libnmt.so" || fail "examples/translate does not link the installed libnmt: $(ldd ex/translate)"

# The installed binary finds its configs in PREFIX/share/nmt/models.
mkdir -p elsewhere && cd elsewhere
train_toy_model "$NMT" "$2"
cd .. && mv elsewhere/m.nmt .
gzip -dc "$2/multi30k/test_2016_flickr.en.gz" | head -60 >in.en

"$NMT" translate -m m.nmt <in.en >nmt.txt 2>nmt.err || fail "nmt translate: $(cat nmt.err)"
ex/translate m.nmt <in.en >stream.txt 2>ex.err || fail "examples/translate: $(cat ex.err)"
cmp -s nmt.txt stream.txt || fail "examples/translate (a stream) differs from nmt translate: $(diff nmt.txt stream.txt | head -5)"
ex/translate m.nmt lines=1 <in.en >lines.txt 2>ex.err || fail "examples/translate lines=1: $(cat ex.err)"
cmp -s nmt.txt lines.txt || fail "examples/translate lines=1 differs from nmt translate"
[ "$(wc -l <lines.txt)" -eq 60 ] || fail "60 lines in, $(wc -l <lines.txt) out"

"$NMT" translate -m m.nmt --beam 3 --n-best 2 --format jsonl --compute-type int8 <in.en >nmt.jsonl 2>nmt.err ||
  fail "nmt translate --n-best: $(cat nmt.err)"
ex/translate m.nmt beam=3 n_best=2 format=jsonl compute_type=int8 <in.en >ex.jsonl 2>ex.err ||
  fail "examples/translate n_best=2: $(cat ex.err)"
cmp -s nmt.jsonl ex.jsonl || fail "examples/translate's jsonl n-best differs from nmt translate's"

# BLEU of real German against other real German: a score far from 0 and 100.
gzip -dc "$2/multi30k/test_2016_flickr.de.gz" | head -60 >ref.de
gzip -dc "$2/multi30k/test_2016_flickr.de.gz" | sed -n 2,61p >hyp.de
want=$("$NMT" score -r ref.de -i hyp.de --format text 2>&1) || fail "nmt score: $want"
got=$(ex/bleu hyp.de ref.de 2>&1) || fail "examples/bleu: $got"
[ "$want" = "$got" ] || fail "examples/bleu says '$got', nmt score '$want'"

# Errors: one line naming the option by its key, a usage error's status.
ex/translate m.nmt beam=0 <in.en >/dev/null 2>err.txt
[ $? -eq 2 ] || fail "beam=0: expected exit 2"
grep -q "^error: beam: expected a number from 1 to 1024, got 0$" err.txt || fail "beam=0: $(cat err.txt)"
ex/translate m.nmt beam=x <in.en >/dev/null 2>err.txt
[ $? -eq 2 ] || fail "beam=x: expected exit 2"
grep -q "^translate: beam=x: expected a number$" err.txt || fail "beam=x: $(cat err.txt)"
ex/translate missing.nmt <in.en >/dev/null 2>err.txt
[ $? -eq 1 ] || fail "a missing model: expected exit 1"
grep -q "^error: .*missing.nmt" err.txt || fail "a missing model: $(cat err.txt)"
# The installed tree moved elsewhere: the binary and libnmt open the moved
# tree's modules (glibc's LD_DEBUG names each file dlopen maps), its pages
# and completions are there.
for f in share/man/man1/nmt-translate.1 share/bash-completion/completions/nmt \
  share/zsh/vendor-completions/_nmt share/fish/vendor_completions.d/nmt.fish; do
  [ -e "prefix/$f" ] || fail "cmake --install wrote no $f"
done
mv prefix moved
modules=$(ls moved/lib/nmt/ 2>/dev/null)
[ -n "$modules" ] || fail "cmake --install put no module in lib/nmt"
LD_DEBUG=files moved/bin/nmt --version >version.txt 2>ld.txt || fail "moved nmt --version: $(cat version.txt)"
for m in $modules; do
  grep -q "file=$WORK/moved/lib/nmt/$m .*dynamically loaded" ld.txt ||
    fail "the moved binary did not open its own $m: $(grep -o "file=[^ ]*$m" ld.txt | head -1)"
done
moved/bin/nmt translate -m m.nmt <in.en >moved.txt 2>nmt.err || fail "moved nmt translate: $(cat nmt.err)"
cmp -s nmt.txt moved.txt || fail "the moved nmt translates otherwise"
echo "api_package: installed package, examples built against it, outputs equal nmt's; moved, it finds its own modules"
