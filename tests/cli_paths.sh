#!/usr/bin/env bash
# Nothing lost: every output is written as what it is (a regular file
# replaced atomically with its permissions, a symlink through to its target,
# /proc/self/fd/N as the descriptor, .gz as gzip), refused before any work
# when it is a directory, empty or one of the inputs; every write failure is
# an error; every input goes through the same path check, UTF-8 check and
# model validation; a huge line costs bounded memory; a stop signal leaves
# no temporary file. (Device nodes, FIFOs and full disks: cli_devices.sh.)
# Usage: cli_paths.sh NMT DATA_DIR WORK_DIR
set -uo pipefail
NMT=$1 DATA=$2 WORK=$3
rm -rf "$WORK" && mkdir -p "$WORK"
cd "$WORK" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }
toy=$DATA/joeynmt-toy
T="--threads 1 --workers 1"

. "$(dirname "$0")/cli_common.sh"
train_toy_model "$NMT" "$DATA"
md5() { md5sum "$1" | cut -d' ' -f1; }
model_md5=$(md5 m.nmt)

no_temps() { [ -z "$(ls -A "${1:-.}" | grep '\.tmp\.')" ] || fail "$2: temp files left: $(ls -A "${1:-.}" | grep '\.tmp\.')"; }
printf 'A man is riding a bike.\nTwo dogs play.\n' >in.en

# 1. Outputs as what they are.
# A regular file keeps its permission bits.
echo old >private.hyp && chmod 600 private.hyp
"$NMT" translate -m m.nmt -i in.en -o private.hyp $T 2>/dev/null || fail "translate -o private.hyp"
[ "$(stat -c %a private.hyp)" = 600 ] || fail "a 0600 output became $(stat -c %a private.hyp)"
[ "$(wc -l <private.hyp)" -eq 2 ] || fail "private.hyp not written"
"$NMT" quantize m.nmt -o q.nmt 2>/dev/null && chmod 640 q.nmt &&
  "$NMT" quantize m.nmt -o q.nmt 2>/dev/null || fail "quantize twice"
[ "$(stat -c %a q.nmt)" = 640 ] || fail "a 0640 model became $(stat -c %a q.nmt)"
# A read-only output is refused, as a shell's > refuses it (root may write
# anything, so as root this runs as nobody).
# (in a folder of /tmp, with a copy of the binary, which nobody may not
# reach where the checkout is).
ro=$(mktemp -d /tmp/nmt-cli-paths.XXXXXX) && chmod 755 "$ro" && cp "$NMT" m.nmt in.en "$ro"/ || fail "scratch"
as_user=()
[ "$(id -u)" -eq 0 ] && as_user=(runuser -u nobody --)
(cd "$ro" && echo keep >ro.hyp && chmod 444 ro.hyp &&
  "${as_user[@]}" ./nmt translate -m m.nmt -i in.en -o ro.hyp $T >/dev/null 2>err.txt; echo $? >rc.txt)
[ "$(cat "$ro/rc.txt")" = 1 ] && grep -q "^nmt: error: cannot write ro.hyp: Permission denied$" "$ro/err.txt" ||
  fail "a read-only output: exit $(cat "$ro/rc.txt"), $(cat "$ro/err.txt")"
[ "$(cat "$ro/ro.hyp")" = keep ] || fail "a read-only output was replaced"
rm -rf "$ro"
# A symlink writes its target and stays a link; a dangling one makes its target.
echo keep >target.txt && ln -s target.txt link.hyp
"$NMT" translate -m m.nmt -i in.en -o link.hyp $T 2>/dev/null || fail "translate -o symlink"
[ -L link.hyp ] || fail "the symlink was replaced by a file"
[ "$(wc -l <target.txt)" -eq 2 ] || fail "the symlink's target was not written"
ln -s new-target.txt dangling.hyp
"$NMT" translate -m m.nmt -i in.en -o dangling.hyp $T 2>/dev/null || fail "translate -o dangling symlink"
[ -L dangling.hyp ] && [ "$(wc -l <new-target.txt)" -eq 2 ] || fail "a dangling link did not make its target"
# /proc/self/fd/1 (through a symlink too) and /dev/stdout are this process's stdout.
ln -s /proc/self/fd/1 to-stdout
"$NMT" translate -m m.nmt -i in.en -o to-stdout $T >captured.txt 2>err.txt || fail "-o link to /proc/self/fd/1: $(cat err.txt)"
[ "$(wc -l <captured.txt)" -eq 2 ] && [ -L to-stdout ] || fail "-o link to /proc/self/fd/1 wrote $(wc -c <captured.txt) bytes"
echo first >appended.txt
"$NMT" translate -m m.nmt -i in.en -o /dev/stdout $T >>appended.txt 2>err.txt || fail "-o /dev/stdout: $(cat err.txt)"
[ "$(head -1 appended.txt)" = first ] && [ "$(wc -l <appended.txt)" -eq 3 ] || fail "-o /dev/stdout under >> did not append"
"$NMT" translate -m m.nmt -i in.en -o /proc/self/fd/1 $T | cat >piped.txt || fail "-o /proc/self/fd/1 into a pipe"
[ "$(wc -l <piped.txt)" -eq 2 ] || fail "-o /proc/self/fd/1 into a pipe wrote $(wc -l <piped.txt) lines"
# .gz is gzip, for text; binary outputs refuse it.
"$NMT" translate -m m.nmt -i in.en -o out.hyp.gz $T 2>/dev/null || fail "translate -o .gz"
[ "$(zcat out.hyp.gz | wc -l)" -eq 2 ] || fail "-o out.hyp.gz is not gzip: $(file out.hyp.gz)"
"$NMT" translate -m m.nmt -i in.en --output-dir gzdir --suffix de.gz $T 2>/dev/null || fail "--suffix de.gz"
[ "$(zcat gzdir/in.de.gz | wc -l)" -eq 2 ] || fail "--output-dir with a .gz suffix is not gzip"
expect 2 "-o q.nmt.gz: nmt does not compress this kind of file" "$NMT" quantize m.nmt -o q.nmt.gz
expect 2 "-o map.png.gz: nmt does not compress this kind of file" "$NMT" attention -m m.nmt "A man." -o map.png.gz
# Directories and empty paths are refused before any work, naming the option.
mkdir adir
expect 2 "^nmt translate: error: -o .: is a directory" "$NMT" translate -m m.nmt -i in.en -o . $T
expect 2 "^nmt translate: error: -o is empty" "$NMT" translate -m m.nmt -i in.en -o "" $T
expect 2 "^nmt quantize: error: -o adir: is a directory" "$NMT" quantize m.nmt -o adir
expect 2 "^nmt quantize: error: -o is empty" "$NMT" quantize m.nmt -o ""
expect 2 "^nmt attention: error: -o adir/: is a directory" "$NMT" attention -m m.nmt "A man." -o adir/
expect 2 "-o nodir/x.hyp: directory nodir does not exist" "$NMT" translate -m m.nmt -i in.en -o nodir/x.hyp $T
expect 2 "^nmt train: error: --out adir: is a directory" \
  "$NMT" train -c transformer-tiny --train-src in.en --train-tgt in.en --out adir
expect 2 "^nmt train: error: --out m2.nmt.gz: nmt does not compress this kind of file" \
  "$NMT" train -c transformer-tiny --train-src in.en --train-tgt in.en --out m2.nmt.gz
expect 2 "^nmt train: error: --out is empty" \
  "$NMT" train -c transformer-tiny --train-src in.en --train-tgt in.en --out ""
touch afile
expect 1 "--output-dir afile exists and is not a directory" "$NMT" translate -m m.nmt -i in.en --output-dir afile $T
expect 2 "--suffix ../x holds a '/'" "$NMT" translate -m m.nmt -i in.en --output-dir od --suffix ../x $T
# No output may be an input: attention and quantize onto the model.
cp m.nmt model.png
expect 2 "-o model.png is the -m file model.png; refusing to overwrite it" \
  "$NMT" attention -m model.png "A man." -o model.png
[ "$(md5 model.png)" = "$model_md5" ] || fail "attention -o overwrote its model"
expect 2 "-o ./m.nmt is the model file m.nmt" "$NMT" quantize m.nmt -o ./m.nmt
[ "$(md5 m.nmt)" = "$model_md5" ] || fail "quantize -o overwrote its model"

# 2. Stale and interrupted temporary files.
# A temp file of a process that is gone is removed by the next run into the same output.
echo stale >.fresh.hyp.nmt.tmp.999999999
# Files of the user's that only look like temporary files stay (nmt's own
# are hidden and say "nmt").
echo mine >fresh.hyp.tmp.999999998 && echo mine >.fresh.hyp.tmp.999999997
"$NMT" translate -m m.nmt -i in.en -o fresh.hyp $T 2>/dev/null || fail "translate -o fresh.hyp"
[ ! -e .fresh.hyp.nmt.tmp.999999999 ] || fail "a stale temp file of a dead process was left"
[ "$(cat fresh.hyp.tmp.999999998 .fresh.hyp.tmp.999999997)" = "$(printf 'mine\nmine')" ] ||
  fail "a user's fresh.hyp.tmp.N or .fresh.hyp.tmp.N was removed"
rm -f fresh.hyp.tmp.999999998 .fresh.hyp.tmp.999999997
# A stop signal removes the temp file of the output being written.
for sig in INT TERM HUP; do
  zcat "$DATA/multi30k/train.en.gz" | head -20000 | "$NMT" translate -m m.nmt -o big.hyp $T 2>/dev/null &
  pid=$!
  for _ in $(seq 50); do ls -A | grep -q '^\.big\.hyp\.nmt\.tmp\.' && break; sleep 0.1; done
  sleep 0.5
  kill -$sig $pid; wait $pid
  no_temps . "SIG$sig"
  [ ! -e big.hyp ] || fail "SIG$sig left a partial big.hyp"
done

# 3. Every command that prints fails when stdout cannot be written.
closed() {  # command...: stdout closed: exit 1 and one line naming stdout
  "$@" >&- 2>err.txt </dev/null
  local rc=$?
  [ "$rc" -eq 1 ] || fail "$* >&-: exit $rc ($(cat err.txt))"
  grep -q "cannot write stdout: Bad file descriptor" err.txt || fail "$* >&-: $(cat err.txt)"
}
head -2 "$toy/dev.de" >ref.de
closed "$NMT" info m.nmt
closed "$NMT" summary -c transformer-tiny --threads 1 --batch 2 --length 4
closed "$NMT" score -m m.nmt --src in.en --tgt in.en --threads 1
closed "$NMT" score ref.de -i ref.de
closed "$NMT" translate -m m.nmt -i in.en $T
closed "$NMT" attention -m m.nmt "A man." -o map.svg
closed "$NMT" --help
# The reader going away is not an error.
"$NMT" info m.nmt | head -1 >/dev/null
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "info | head: exit ${PIPESTATUS[0]}"

# 4. Inputs: one check and one message for every command and option.
expect 1 "^nmt: error: -m adir: is a directory" "$NMT" translate -m adir -i in.en $T
expect 1 "^nmt: error: -m adir: is a directory" "$NMT" score -m adir --src in.en --tgt in.en
expect 1 "^nmt: error: -m adir: is a directory" "$NMT" attention -m adir "A man." -o x.svg
expect 1 "^nmt: error: model adir: is a directory" "$NMT" info adir
expect 1 "^nmt: error: model adir: is a directory" "$NMT" quantize adir -o x.nmt
expect 1 "^nmt: error: -i adir: is a directory" "$NMT" translate -m m.nmt -i adir $T
expect 1 "^nmt: error: --src adir: is a directory" "$NMT" score -m m.nmt --src adir --tgt in.en
expect 1 "^nmt: error: reference adir: is a directory" "$NMT" score adir -i in.en
expect 1 "^nmt: error: -i nothing.en: No such file or directory" "$NMT" translate -m m.nmt -i nothing.en $T
expect 1 "^nmt: error: --train-src adir: is a directory" "$NMT" train --train-src adir --train-tgt in.en --out t.nmt
expect 1 "^nmt: error: --valid-tgt nothing.de: No such file or directory" \
  "$NMT" train --train-src in.en --train-tgt in.en --valid-src in.en --valid-tgt nothing.de --out t.nmt
expect 1 "^nmt: error: -c adir: is a directory" "$NMT" train -c adir --train-src in.en --train-tgt in.en --out t.nmt
expect 1 "^nmt: error: -c adir: is a directory" "$NMT" summary -c adir
: >empty.json
expect 1 "^nmt: error: -c empty.json: the file is empty" "$NMT" summary -c empty.json
expect 1 "^nmt: error: -c empty.json: the file is empty" "$NMT" train -c empty.json --train-src in.en --train-tgt in.en --out t.nmt
: >empty.nmt
expect 1 "empty.nmt: not a valid model file: the file is empty" "$NMT" translate -m empty.nmt -i in.en $T
# A model through a pipe, as from <(zcat m.nmt.gz): read once, checked alike.
gzip -c m.nmt >m.nmt.gz
[ "$("$NMT" translate -m <(zcat m.nmt.gz) -i in.en $T 2>/dev/null | wc -l)" -eq 2 ] || fail "translate -m <(zcat)"
"$NMT" info <(zcat m.nmt.gz) >info.txt 2>err.txt || fail "info <(zcat): $(cat err.txt)"
grep -q "crc32 $("$NMT" info m.nmt --format json | sed -n 's/.*"crc32": "\(.*\)".*/\1/p')" info.txt ||
  fail "info of a pipe shows another checksum: $(cat info.txt)"
head -c 100 m.nmt | cat >cut.nmt
expect 1 "not a valid model file" "$NMT" info <(cat cut.nmt)
# Invalid UTF-8: the same warning, by file and line, in every command.
printf 'A man.\nA \xff dog.\n' >bad.en
for cmd in "translate -m m.nmt -i bad.en $T" "score -m m.nmt --src bad.en --tgt in.en --threads 1" \
           "score in.en -i bad.en"; do
  "$NMT" $cmd >/dev/null 2>err.txt || fail "$cmd: $(cat err.txt)"
  grep -q "^nmt: warning: bad.en line 2: invalid UTF-8 replaced with U+FFFD$" err.txt ||
    fail "$cmd: no UTF-8 warning naming bad.en line 2: $(cat err.txt)"
done
"$NMT" attention -m m.nmt "$(printf 'A \xff man.')" -o u.svg >/dev/null 2>err.txt || fail "attention with bad UTF-8"
grep -q "^nmt: warning: the sentence: invalid UTF-8 replaced with U+FFFD$" err.txt || fail "attention: $(cat err.txt)"
expect 2 "--target is empty" "$NMT" attention -m m.nmt "A man." --target "" -o t.svg

# 5. Every command that loads a model validates it the same way.
python3 - <<'PY' || fail "could not write the damaged models"
import json, struct
def load(p):
    b = open(p, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; return json.loads(b[8:8 + n]), b[8 + n:]
def save(p, h, d):
    hj = json.dumps(h, separators=(',', ':')).encode(); hj += b' ' * ((8 - len(hj) % 8) % 8)
    open(p, 'wb').write(struct.pack('<Q', len(hj)) + hj + d)
h, d = load('m.nmt')
g = json.loads(json.dumps(h)); g['__metadata__']['step'] = 'abc'; save('step.nmt', g, d)
# the vocabulary blob replaced by bytes of the same length that are not a SentencePiece model
s, e = h['vocab/sentencepiece']['data_offsets']; save('spm.nmt', h, d[:s] + b'\x07' * (e - s) + d[e:])
g = json.loads(json.dumps(h)); c = json.loads(g['__metadata__']['config']); c['vocab_size'] += 8
g['__metadata__']['config'] = json.dumps(c)
save('vocab.nmt', g, d)
g = json.loads(json.dumps(h)); del g['decoder/layer_1/ffn/w2/bias']; save('missing.nmt', g, d)
g = json.loads(json.dumps(h)); g['encoder/layer_0/ffn/w1/weight']['data_offsets'] = [len(d), len(d) + 8192]
save('past-end.nmt', g, d)
PY
for f in step:'metadata "step" is not a non-negative integer' spm:'vocab/sentencepiece: invalid SentencePiece model' \
         vocab:'the vocabulary has 300 pieces but the model' missing:'missing tensor decoder/layer_1/ffn/w2/bias' \
         past-end:"not a valid model file: tensor encoder/layer_0/ffn/w1/weight's data .* extends past the end"; do
  name=${f%%:*} pat=${f#*:}
  expect 1 "$name.nmt: $pat" "$NMT" translate -m $name.nmt -i in.en $T
  expect 1 "$name.nmt: $pat" "$NMT" info $name.nmt
  expect 1 "$name.nmt: $pat" "$NMT" score -m $name.nmt --src in.en --tgt in.en
  expect 1 "$name.nmt: $pat" "$NMT" quantize $name.nmt -o $name.q.nmt
  expect 1 "$name.nmt: $pat" "$NMT" attention -m $name.nmt "A man." -o $name.svg
done
# Configs: one parser for summary and train alike (a BOM is fine, an array is not).
printf '\xef\xbb\xbf' >bom.json && cat "$(dirname "$0")/../models/transformer-tiny.json" >>bom.json
"$NMT" summary -c bom.json --threads 1 --batch 2 --length 4 >/dev/null 2>err.txt || fail "summary -c with a BOM: $(cat err.txt)"
echo '[1, 2]' >arr.json
expect 1 "arr.json: expected a JSON object at the top level" "$NMT" summary -c arr.json
expect 1 "arr.json: expected a JSON object at the top level" \
  "$NMT" train -c arr.json --train-src in.en --train-tgt in.en --out arr.nmt

# 6. Memory follows the work, not the input's shape.
python3 -c "open('long.en','w').write('ok first\n' + 'word ' * 2000000 + '\nok last\n')"
/usr/bin/time -f "%M" -o rss.txt "$NMT" translate -m m.nmt -i long.en --beam 1 $T >long.hyp 2>err.txt ||
  fail "a 10 MB line: $(cat err.txt)"
[ "$(wc -l <long.hyp)" -eq 3 ] || fail "a 10 MB line: $(wc -l <long.hyp) output lines"
grep -q "long.en line 2: 10000000 bytes; only the first .* are read (a line is translated in pieces up to 4 times what the model takes at most" err.txt ||
  fail "a 10 MB line: no warning: $(cat err.txt)"
/usr/bin/time -f "%M" -o rss0.txt "$NMT" translate -m m.nmt -i in.en --beam 1 $T >/dev/null 2>&1
[ "$(tail -1 rss.txt)" -lt $(( $(tail -1 rss0.txt) + 100000 )) ] ||
  fail "a 10 MB line took $(tail -1 rss.txt) kB, against $(tail -1 rss0.txt) kB for two short lines"
rm -f long.en
expect 2 "^nmt translate: error: --beam 1000: .* could need up to .* GiB, more than this machine's" \
  "$NMT" translate -m m.nmt -i in.en --beam 1000 --batch-tokens 16777216 --window 1048576 $T

# 7. Lines that cannot be used as given say so.
printf '{"text": "", "constraints": ["Hund"]}\n' >c.jsonl
"$NMT" translate -m m.nmt --input-format jsonl -i c.jsonl $T >/dev/null 2>err.txt
grep -q "line 1: the source is empty, so its constraints are not used" err.txt || fail "jsonl without text: $(cat err.txt)"
# tsv and jsonl records longer than the model takes are parsed whole, not
# broken into a parse error: a text is translated in pieces (as a text line
# is), a text with a prefix is cut at the model's length.
long=$(printf 'A man is riding a bike. %.0s' $(seq 800))
printf '{"text": "%s"}\n{"text": "Two dogs play."}\n' "$long" >long.jsonl
printf '%s\tEin\nTwo dogs play.\tZwei\n' "$long" >long.tsv
for fmt in jsonl tsv; do
  "$NMT" translate -m m.nmt --input-format $fmt -i long.$fmt --beam 1 $T >long.out 2>err.txt ||
    fail "a long $fmt record: $(cat err.txt)"
  grep -q "line 1: .*\(it is translated in [0-9]* pieces\|exceed the model's limit of [0-9]*; truncated\)" err.txt ||
    fail "a long $fmt record: no word of the pieces or the cut: $(cat err.txt)"
  ! grep -q "an empty line is written instead" err.txt || fail "a long $fmt record was not parsed: $(cat err.txt)"
  [ "$(wc -l <long.out)" -eq 2 ] && [ -n "$(head -1 long.out)" ] || fail "a long $fmt record: $(cat long.out)"
done

# 8. Standard output that is one of the inputs: refused before reading, as
# cat(1) refuses it (appending to the input would read its own output
# back until the disk was full).
head -c 0 /dev/null >self.en && for _ in $(seq 300); do cat in.en >>self.en; done
cp self.en self.orig
"$NMT" translate -m m.nmt -i self.en $T >>self.en 2>err.txt; rc=$?
[ $rc = 2 ] && grep -q "standard output is the -i file self.en; refusing" err.txt || fail "-i x >> x: exit $rc, $(cat err.txt)"
"$NMT" translate -m m.nmt $T <self.en >>self.en 2>err.txt; rc=$?
[ $rc = 2 ] && grep -q "standard output is the file on standard input; refusing" err.txt || fail "<x >>x: exit $rc, $(cat err.txt)"
cmp -s self.en self.orig || fail "stdout into the input changed it ($(wc -l <self.en) lines)"
# -o /dev/stdout whose reader leaves ends as plain stdout does: quietly, exit 0.
yes 'A man.' | head -20000 >many.en
for o in "" "-o /dev/stdout"; do
  "$NMT" translate -m m.nmt -i many.en --beam 1 $T $o 2>err.txt | head -1 >/dev/null
  [ "${PIPESTATUS[0]}" = 0 ] && [ ! -s err.txt ] || fail "translate $o | head -1: exit ${PIPESTATUS[0]}, $(cat err.txt)"
done
# --output-dir names that are directories are refused before any output is written.
mkdir -p od/b.en.hyp && cp in.en a.en && cp in.en b.en
expect 2 "--output-dir od/b.en.hyp: is a directory" "$NMT" translate -m m.nmt -i a.en -i b.en --output-dir od $T
[ ! -e od/a.en.hyp ] || fail "--output-dir wrote a.en.hyp before refusing b.en.hyp"
# A file that cannot be made beside the output says that, not that the
# (writable) output is denied.
ro=$(mktemp -d /tmp/nmt-cli-paths.XXXXXX) && cp "$NMT" m.nmt in.en "$ro"/ && mkdir "$ro/rd" &&
  echo old >"$ro/rd/f" && chmod 666 "$ro/rd/f" && chmod 755 "$ro" "$ro/rd" || fail "scratch"
if [ "$(id -u)" -eq 0 ]; then
  (cd "$ro" && runuser -u nobody -- ./nmt translate -m m.nmt -i in.en -o rd/f $T >/dev/null 2>err.txt)
  grep -q "cannot write rd/f: cannot create a file in rd (Permission denied)" "$ro/err.txt" ||
    fail "an output in a read-only folder: $(cat "$ro/err.txt")"
  [ "$(cat "$ro/rd/f")" = old ] || fail "an output in a read-only folder changed"
fi
rm -rf "$ro"
# A truncated model given to summary -c is refused as a model, not as JSON.
head -c 5 m.nmt >t5.nmt
expect 1 "not a valid model file" "$NMT" summary -c t5.nmt --threads 1
no_temps . "the end"
echo "cli_paths: all passed"
