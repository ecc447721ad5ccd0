#!/usr/bin/env bash
# What nmt convert does with models other tools wrote, damaged or forged
# (tests/hostile_models.py): an imported model is checked as strictly as a
# loaded one before anything is written, no model can make an output line
# into two, what a file claims never costs more than the work it holds, and
# every refusal is one line naming the file and the variable, key or token.
# Also what translate does with such text: warnings that name the input,
# options that mean nothing alone, a closed stdin.
# Usage: cli_imports.sh NMT DATA_DIR WORK_DIR
set -uo pipefail
NMT=$1 WORK=$3
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf "$WORK" && mkdir -p "$WORK"
cd "$WORK" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }
gen() { rm -rf "$2"; python3 "$HERE/hostile_models.py" "$@" || fail "hostile_models.py $*"; }

# refused PATTERN convert-arguments...: exit 1 in bounded time and memory
# (a forged size must not be believed), the pattern in its one stderr line,
# and no output file.
# An AddressSanitizer build (NMT_SANITIZE=ON) reserves terabytes of address
# space and keeps freed memory in quarantine: no ulimit -v fits it, and its
# peak memory says nothing of nmt's. Those checks are skipped there.
source "$HERE/cli_common.sh"
asan=0
asan_build "$NMT" && asan=1
refused() {
  local pat=$1; shift
  rm -f out.nmt
  ( [ $asan = 1 ] || ulimit -v 2000000; timeout 20 "$NMT" convert "$@" -o out.nmt) </dev/null >/dev/null 2>err.txt
  local rc=$?
  [ "$rc" -eq 1 ] || fail "convert $*: exit $rc, expected 1 ($(cat err.txt))"
  [ "$(wc -l <err.txt)" -eq 1 ] || fail "convert $*: not one line: $(cat err.txt)"
  grep -qF -- "$pat" err.txt || fail "convert $*: expected '$pat', got: $(cat err.txt)"
  [ ! -e out.nmt ] || fail "convert $*: wrote out.nmt"
}

# A well-formed model converts and translates.
gen ct2 good
"$NMT" convert good -o good.nmt 2>err.txt || fail "convert good: $(cat err.txt)"
[ "$(echo "w3 w4" | "$NMT" translate -m good.nmt 2>/dev/null | wc -l)" -eq 1 ] || fail "good: not one line"

# Principle 2: a token that would split an output line is refused, named by
# id and file, in either vocabulary format; so is one that is not UTF-8.
for t in 'x\ny' 'x\ry' 'x\u0000y' 'x\u2028y' 'x\u0085y' 'x\u000by'; do
  gen ct2 m token3="$t"
  refused "shared_vocabulary.json: token 3 (" m
  grep -qF "line break or NUL" err.txt || fail "token $t: $(cat err.txt)"
done
gen ct2 m token3='x\ry' txt=1
refused "shared_vocabulary.txt line 4: token 3" m
gen ct2 m txt=1
head -11 m/shared_vocabulary.txt >v && printf '\xff\xfe\n' >>v && mv v m/shared_vocabulary.txt
refused "shared_vocabulary.txt line 12: token 11 (\"\\xff\\xfe\") is not valid UTF-8" m

# ... and what a model writes into a line is escaped by one rule where a
# format separates fields with " ||| ": a favourite token "|||" stays inside
# its field, in n-best lists and with alignments.
gen ct2 m token3='|||' favourite=3
"$NMT" convert m -o bars.nmt 2>err.txt || fail "convert |||: $(cat err.txt)"
printf 'w4 w5\nw6\n' >in.txt
"$NMT" translate -m bars.nmt -i in.txt --beam 2 --n-best 2 --threads 1 >nbest.txt 2>/dev/null ||
  fail "n-best with |||"
[ "$(wc -l <nbest.txt)" -eq 4 ] || fail "n-best: $(wc -l <nbest.txt) lines for 2 x 2"
awk -F' \\|\\|\\| ' 'NF != 3 { bad = 1 } END { exit bad }' nbest.txt || fail "n-best fields: $(head -2 nbest.txt)"
grep -qF '&#124;&#124;&#124;' nbest.txt || fail "n-best: ||| not escaped: $(head -1 nbest.txt)"
"$NMT" translate -m bars.nmt -i in.txt --alignments --threads 1 >al.txt 2>/dev/null || fail "alignments"
awk -F' \\|\\|\\| ' 'NF != 2 { bad = 1 } END { exit bad }' al.txt || fail "alignment fields: $(head -1 al.txt)"

# Principle 1: a non-finite weight or an int8 scale of 0 is refused by
# convert, naming the source's variable, as every other command refuses it.
gen ct2 m nan=1
refused "model.bin: variable encoder/layer_0/ffn/linear_0/weight holds a non-finite value" m
gen ct2 m int8_scale=0
refused "variable encoder/layer_0/ffn/linear_0/weight_scale holds 0" m
gen ct2 m int8_scale=nan
refused "variable encoder/layer_0/ffn/linear_0/weight_scale holds nan" m
gen npz n nan=1
refused "model.npz: parameter encoder_l1_ffn_W1 holds a non-finite value" n/model.npz
# A name given twice is refused, not "the later wins"; so is a name without
# its terminator, a negative .npy dimension.
gen ct2 m dup=1
refused "variable encoder/layer_0/ffn/linear_0/weight given twice" m
gen npz n dup=1
refused "the archive holds Wemb.npy twice" n/model.npz
gen ct2 m no_nul=1
refused "a string without its terminating NUL (\"TransformerSpecX\")" m
gen npz n neg_shape=1
refused ".npy shape (-8, 16) holds something other than non-negative integers" n/model.npz

# Principle 3: what a file claims is checked against the configuration and
# against the file's size before memory is given (refused() runs under a
# 2 GB ulimit and 20 s): a zip bomb of 3 x 64 MB in 200 KB, an FFN that
# claims 2^32 - 1 rows, a zero-width model whose FFN of 10^8 rows has no
# bias (once filled with zeros before any check), 30000 aliases (once
# quadratic: minutes).
gen npz n bomb=3
refused "the archive's entries claim" n/model.npz
gen ct2 m ffn_rows=4294967295
refused "whose size does not match its shape" m
gen ct2 m D=0 F=100000000 no_ffn_bias=1
refused "variable decoder/embeddings/weight has shape (12, 0): its width (d_model) must be from 1 to" m
gen ct2 m junk=30000
refused "variable junk/0 belongs to nothing" m

# Principle 5: library errors reach the user with the file and the key, and
# names read from files are printed escaped.
gen ct2 m && echo '[]' >m/config.json
refused "m/config.json: expected a JSON object, got array" m
gen ct2 m && sed -i 's/"add_source_bos": false/"add_source_bos": "yes"/' m/config.json
refused "m/config.json: key \"add_source_bos\": expected true or false, got \"yes\"" m
gen ct2 m && sed -i 's/"layer_norm_epsilon": null/"layer_norm_epsilon": 1e300/' m/config.json
refused "key \"layer_norm_epsilon\": expected a number in (0, 1], got 1e+300" m
gen npz n deep=5000
refused "special:model.yml: not readable YAML: line 1" n/model.npz
gen npz n && printf '"</s>": 0\n[a, b]: 1\n' >n/vocab.yml
refused "vocab.yml line 2: a key that is not a token (a YAML list)" n/model.npz
gen ct2 m name_suffix='\u001b[31mred'
refused 'variable encoder/unknown\x1b[31mred belongs to nothing' m

# Principle 1: a tokeniser that does not cut text into the model's
# vocabulary is refused; raw text into a model that reads tokens is warned
# about, once, with the share of unknown tokens.
printf 'the cat sat on the mat\nthe dog ran in the park\n%.0s' $(seq 50) >t.txt
spm_train --input=t.txt --model_prefix=sp --vocab_size=24 --model_type=char --minloglevel=2 \
  >/dev/null 2>&1 || fail "spm_train"
gen ct2 m
refused "sp.model: 16 of its 16 pieces are not tokens of m/shared_vocabulary.json" m --spm sp.model
gen npz n pieces=sp.vocab
"$NMT" convert n/model.npz --spm sp.model -o n.nmt 2>err.txt || fail "npz with its own spm: $(cat err.txt)"
printf 'the cat sat\nw3 w4\nthe dog\n' | "$NMT" translate -m good.nmt --threads 1 >/dev/null 2>err.txt ||
  fail "raw text"
grep -qF "<stdin> line 1: 3 of its 3 tokens are not in the model's vocabulary" err.txt ||
  fail "raw text into a token model: $(cat err.txt)"
[ "$(grep -c "not in the model's vocabulary" err.txt)" -eq 1 ] || fail "unknown tokens: said more than once"

# Warnings name the input when there are several; a long jsonl line is
# parsed whole and its text cut as a text line's is.
printf '{"text": "w3", "prefix": 5}\n' >a.jsonl
printf '{"text": "w4"}\n{"text": "w5", "prefix": 6}\n' >b.jsonl
"$NMT" translate -m good.nmt -i a.jsonl b.jsonl --input-format jsonl --threads 1 >out.txt 2>err.txt ||
  fail "jsonl"
grep -qF 'a.jsonl line 1: "prefix" must be a string' err.txt || fail "jsonl warning: $(cat err.txt)"
grep -qF 'b.jsonl line 2: "prefix" must be a string' err.txt || fail "jsonl warning: $(cat err.txt)"
[ "$(wc -l <out.txt)" -eq 3 ] || fail "jsonl: $(wc -l <out.txt) lines for 3"
python3 -c "print('{\"text\": \"' + 'w3 ' * 1500000 + '\"}')" >long.jsonl
"$NMT" translate -m good.nmt -i long.jsonl --input-format jsonl --threads 1 >out.txt 2>err.txt ||
  fail "long jsonl"
grep -qF 'long.jsonl line 1: "text" is 4500000 bytes; only the first' err.txt ||
  fail "long jsonl: $(cat err.txt)"
grep -q "not valid JSON" err.txt && fail "long jsonl: reported as invalid JSON"
[ "$(wc -l <out.txt)" -eq 1 ] && [ -n "$(cat out.txt)" ] || fail "long jsonl: not translated"

# Options that mean nothing alone, and an unsigned option given -1.
expect_usage() {
  echo "w3" | "$NMT" translate -m good.nmt "$@" >/dev/null 2>err.txt
  [ $? -eq 2 ] || fail "translate $*: accepted"
}
expect_usage --sampling-temperature 2
grep -qF -- "--sampling-temperature requires --sampling" err.txt || fail "temperature: $(cat err.txt)"
expect_usage --sampling full --seed -1
grep -qF -- "--seed: Value -1 is not a whole number" err.txt || fail "--seed -1: $(cat err.txt)"

# A closed stdin is an error, not an empty input.
"$NMT" translate -m good.nmt <&- >out.txt 2>err.txt && fail "closed stdin accepted"
grep -qF "cannot read stdin: it is closed" err.txt || fail "closed stdin: $(cat err.txt)"

# The hidden temporary file of an output never makes a legal name too long.
long=$(printf 'n%.0s' $(seq 250)).txt
echo "w3" | "$NMT" translate -m good.nmt -o "$long" 2>err.txt || fail "a 254-byte output name: $(cat err.txt)"
[ "$(wc -l <"$long")" -eq 1 ] || fail "a 254-byte output name: not written"
echo "cli_imports: ok"
