#!/usr/bin/env bash
# Outputs that are not regular files, and disks that fill up: a character
# device, a FIFO and a symlink to a device are written through and never
# replaced; a full disk is an error, never a silent exit 0 with a truncated
# file. Device nodes are made with mknod in the scratch folder (never /dev)
# and the full disk is a 16 kB tmpfs, so this needs root: without it the
# test exits 77 and ctest shows it skipped.
# Usage: cli_devices.sh NMT DATA_DIR WORK_DIR
set -uo pipefail
NMT=$1 DATA=$2 WORK=$3
[ "$(id -u)" -eq 0 ] || { echo "cli_devices: needs root (mknod, mount); skipped"; exit 77; }
rm -rf "$WORK" && mkdir -p "$WORK"
cd "$WORK" || exit 1
mknod probe c 1 3 2>/dev/null || { echo "cli_devices: mknod refused here; skipped"; exit 77; }
fail() { echo "FAIL: $*" >&2; umount "$WORK/small" 2>/dev/null; exit 1; }
T="--threads 1 --workers 1"
. "$(dirname "$0")/cli_common.sh"
train_toy_model "$NMT" "$DATA"
printf 'A man is riding a bike.\nTwo dogs play.\n' >in.en

is_null() { [ -c "$1" ] && [ "$(stat -c %t:%T "$1")" = 1:3 ] || fail "$2: $1 is no longer the character device: $(ls -l "$1")"; }
mknod null c 1 3
"$NMT" translate -m m.nmt -i in.en -o null $T 2>err.txt || fail "translate -o chardev: $(cat err.txt)"
is_null null "translate -o"
mknod qnull c 1 3
"$NMT" quantize m.nmt -o qnull 2>err.txt || fail "quantize -o chardev: $(cat err.txt)"
is_null qnull "quantize -o"
mknod x.png c 1 3
"$NMT" attention -m m.nmt "A man." -o x.png >/dev/null 2>err.txt || fail "attention -o chardev: $(cat err.txt)"
is_null x.png "attention -o"
mknod lnull c 1 3 && ln -s lnull link-to-null
"$NMT" translate -m m.nmt -i in.en -o link-to-null $T 2>/dev/null || fail "translate -o link to a device"
is_null lnull "translate -o symlink" && [ -L link-to-null ] || fail "the symlink to a device was replaced"
# A FIFO is written through to its reader.
mkfifo fifo
(timeout 30 cat fifo >fifo.got) &
reader=$!
"$NMT" translate -m m.nmt -i in.en -o fifo $T 2>err.txt || fail "translate -o fifo: $(cat err.txt)"
wait $reader || fail "the FIFO's reader got nothing"
[ -p fifo ] || fail "the FIFO was replaced: $(ls -l fifo)"
[ "$(wc -l <fifo.got)" -eq 2 ] || fail "the FIFO's reader got $(wc -l <fifo.got) lines"

# A full disk: every command that prints fails, naming stdout and the reason.
for cmd in "info m.nmt" "summary -c transformer-tiny --threads 1 --batch 2 --length 4" \
           "score -m m.nmt --src in.en --tgt in.en --threads 1" "translate -m m.nmt -i in.en $T"; do
  "$NMT" $cmd >/dev/full 2>err.txt
  rc=$?
  [ "$rc" -eq 1 ] || fail "$cmd >/dev/full: exit $rc"
  grep -q "^nmt: error: cannot write stdout: No space left on device$" err.txt || fail "$cmd >/dev/full: $(cat err.txt)"
done
mkdir small && mount -t tmpfs -o size=16k tmpfs small || { echo "cli_devices: no tmpfs; skipped"; exit 77; }
zcat "$DATA/multi30k/val.en.gz" >val.en; zcat "$DATA/multi30k/val.de.gz" >val.de
"$NMT" score -m m.nmt --src val.en --tgt val.de --threads 1 >small/scores.tsv 2>err.txt
rc=$?
[ "$rc" -eq 1 ] || fail "score -m onto a full disk: exit $rc"
grep -q "^nmt: error: cannot write stdout: No space left on device$" err.txt || fail "score -m onto a full disk: $(cat err.txt)"
rm -f small/scores.tsv; echo keep >small/out.hyp
"$NMT" translate -m m.nmt -i val.en -o small/out.hyp $T 2>err.txt && fail "translate -o onto a full disk succeeded"
grep -q "small/out.hyp is unchanged" err.txt || fail "translate -o onto a full disk: $(cat err.txt)"
[ "$(cat small/out.hyp)" = keep ] || fail "a full disk changed the old output"
[ -z "$(ls -A small | grep '\.tmp\.')" ] || fail "a full disk left a temp file"
umount small
echo "cli_devices: all passed"
