#!/usr/bin/env bash
# The Debian packages in a clean Debian 12 root: `cpack -G DEB` from the
# build, a minimal bookworm made by debootstrap from Debian's mirror, then
# there: `apt-get install ./nmt_*.deb ./python3-nmt_*.deb` (their
# dependencies from the mirror), nmt --version with its modules found, lines
# translated with a small model (by nmt and by import nmt) and scored, the
# man page and completion in place, and `apt-get purge` leaving nothing
# behind. Skipped (77), saying why, where it cannot run: not
# root, no debootstrap, no mirror reachable, or an AddressSanitizer build.
# The base root is kept in BUILD_DIR/debootstrap (a tarball) between runs.
# Usage: package_debian.sh NMT DATA_DIR WORK_DIR BUILD_DIR SOURCE_DIR
set -u
NMT=$1 DATA=$2 WORK=$3 BUILD=$4 SRC=$5
MIRROR=${NMT_DEBIAN_MIRROR:-http://deb.debian.org/debian}
skip() { echo "package_debian: skipped ($*)"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$SRC/tests/cli_common.sh"
[ "$(id -u)" -eq 0 ] || skip "needs root for debootstrap and chroot"
command -v debootstrap >/dev/null || skip "no debootstrap (apt-get install debootstrap)"
command -v cpack >/dev/null || skip "no cpack"
if asan_build "$NMT"; then skip "an AddressSanitizer build"; fi

rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 1
ROOT=$WORK/root
cleanup() {
  umount "$ROOT/proc" 2>/dev/null
  rm -rf "$ROOT"
}
trap cleanup EXIT

cpack -G DEB -B "$WORK/debs" --config "$BUILD/CPackConfig.cmake" >cpack.log 2>&1 ||
  fail "cpack: $(tail -5 cpack.log)"
DEB=$(ls debs/nmt_*_amd64.deb 2>/dev/null | head -1)
[ -n "$DEB" ] || fail "cpack made no nmt_*_amd64.deb: $(ls debs)"
# The Python module's package, where the build made the module.
PYDEB=$(ls debs/python3-nmt_*_amd64.deb 2>/dev/null | head -1)

CACHE=$BUILD/debootstrap/bookworm-minbase.tgz
mkdir -p "$(dirname "$CACHE")"
if [ ! -s "$CACHE" ]; then
  debootstrap --variant=minbase --make-tarball="$CACHE.part" bookworm "$WORK/tarball" "$MIRROR" \
    >debootstrap.log 2>&1 || skip "debootstrap could not reach $MIRROR: $(tail -1 debootstrap.log)"
  mv "$CACHE.part" "$CACHE"
fi
debootstrap --variant=minbase --unpack-tarball="$CACHE" bookworm "$ROOT" "$MIRROR" \
  >>debootstrap.log 2>&1 || fail "debootstrap: $(tail -3 debootstrap.log)"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
mount -t proc proc "$ROOT/proc" || fail "cannot mount /proc in the root"
in_root() { chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "$@"; }

# One apt-get install, the packages and their dependencies from the mirror.
debs=""
for d in $DEB $PYDEB; do
  cp "$d" "$ROOT/tmp/"
  debs="$debs /tmp/$(basename "$d")"
done
in_root apt-get update >apt.log 2>&1 || fail "apt-get update in the root: $(tail -3 apt.log)"
in_root apt-get install -y --no-install-recommends $debs >>apt.log 2>&1 ||
  fail "apt-get install$debs: $(tail -5 apt.log)"

in_root nmt --version >version.txt 2>&1 || fail "nmt --version in the root: $(cat version.txt)"
grep -q "^nmt " version.txt || fail "nmt --version: $(cat version.txt)"
grep -q "^serve: cpp-httplib" version.txt || fail "the HTTP module was not found: $(cat version.txt)"

# A small model, trained here, translates and scores there.
train_toy_model "$NMT" "$DATA"
gzip -dc "$DATA/multi30k/test_2016_flickr.en.gz" | head -20 >src.en
gzip -dc "$DATA/multi30k/test_2016_flickr.de.gz" | head -20 >ref.de
"$NMT" translate -m m.nmt -i src.en -o want.de 2>err.txt || fail "nmt translate here: $(cat err.txt)"
cp m.nmt src.en ref.de "$ROOT/tmp/"
in_root nmt translate -m /tmp/m.nmt -i /tmp/src.en -o /tmp/got.de 2>err.txt ||
  fail "nmt translate in the root: $(cat err.txt)"
cmp -s want.de "$ROOT/tmp/got.de" || fail "the packaged nmt translates otherwise than the built one"
in_root nmt score -i /tmp/got.de -r /tmp/ref.de >score.txt 2>err.txt ||
  fail "nmt score in the root: $(cat err.txt)"
"$NMT" score -i want.de -r ref.de >want_score.txt 2>/dev/null
cmp -s score.txt want_score.txt || fail "nmt score in the root: $(cat score.txt)"
if [ -n "$PYDEB" ]; then
  in_root python3 -c 'import nmt, sys
t = nmt.Translator("/tmp/m.nmt")
lines = open("/tmp/src.en").read().splitlines()
sys.stdout.write("".join(r.hypotheses[0] + "\n" for r in t.translate_batch(lines)))' >py.de 2>err.txt ||
    fail "import nmt in the root: $(cat err.txt)"
  cmp -s want.de py.de || fail "the packaged Python module translates otherwise than nmt"
fi
for f in /usr/share/man/man1/nmt-translate.1 /usr/share/bash-completion/completions/nmt \
  /usr/share/nmt/models/transformer-base.json; do
  [ -e "$ROOT$f" ] || fail "the package installed no $f"
done

in_root apt-get purge -y nmt >>apt.log 2>&1 || fail "apt-get purge nmt: $(tail -3 apt.log)"
left=$(in_root sh -c 'ls -d /usr/bin/nmt /usr/lib/nmt /usr/share/nmt /usr/lib/libnmt* \
  /usr/lib/python3/dist-packages/nmt 2>/dev/null')
[ -z "$left" ] || fail "apt-get purge left: $left"
echo "package_debian: $(basename "$DEB") ${PYDEB:+and $(basename "$PYDEB") }installed," \
  "translated, scored and purged in a clean bookworm"
