#!/usr/bin/env bash
# nmt convert on models in Marian's and CTranslate2's layouts (written by
# tests/convert_synthetic.py with random weights): each converts into a model
# every command loads (info, translate, score -m, quantize), keeps its
# vocabularies and tokenisation, and every option nmt cannot run exactly is
# refused with one line naming it, writing nothing. Random weights test the
# readers and refusals, not the arithmetic: tests/cli_convert_peers.sh checks
# that on models and translations the tools themselves made.
# Usage: cli_convert.sh NMT DATA_DIR WORK_DIR
set -uo pipefail
NMT=$1 DATA=$2 WORK=$3
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf "$WORK" && mkdir -p "$WORK"
cd "$WORK" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }
gen() { python3 "$HERE/convert_synthetic.py" "$@" || fail "convert_synthetic.py $*"; }

# A real SentencePiece model, as OPUS-MT ships one for each side.
zcat "$DATA/multi30k/train.en.gz" | head -2000 >text.txt
spm_train --input=text.txt --model_prefix=sp --vocab_size=120 --model_type=unigram \
  --minloglevel=2 >/dev/null 2>&1 || fail "spm_train"
head -3 text.txt >in.txt

# expect STATUS PATTERN command...: the status, and the last stderr line.
expect() {
  local want=$1 pat=$2; shift 2
  "$@" </dev/null >out.txt 2>err.txt
  local rc=$?
  [ "$rc" -eq "$want" ] || fail "$*: exit $rc, expected $want ($(cat err.txt))"
  tail -1 err.txt | grep -qF -- "$pat" || fail "$*: expected '$pat', got: $(cat err.txt)"
}

# 1. Marian, OPUS-MT's layout: model.npz, vocab.yml, source.spm, target.spm.
gen marian opus sp.vocab
cp sp.model opus/source.spm && cp sp.model opus/target.spm
expect 0 "nmt convert: wrote m1.nmt (from Marian synthetic" "$NMT" convert opus -o m1.nmt
"$NMT" info m1.nmt >info.txt 2>&1 || fail "info m1.nmt: $(cat info.txt)"
for want in "(swish)" "post-LN" "sinusoidal-concat" "output bias" "decoder starts from a zero embedding" \
  "token ids pad none unk 1 bos none eos 0" "never outputs <unk>" "tokens, cut by a SentencePiece model" \
  "imported     from Marian"; do
  grep -qF "$want" info.txt || fail "nmt info m1.nmt lacks '$want': $(cat info.txt)"
done
"$NMT" translate -m m1.nmt -i in.txt -o out1.txt --threads 1 2>err.txt || fail "translate m1: $(cat err.txt)"
[ "$(wc -l <out1.txt)" -eq 3 ] || fail "translate m1: $(wc -l <out1.txt) lines for 3"
"$NMT" score -m m1.nmt --src in.txt --tgt in.txt --threads 1 >score.txt 2>err.txt || fail "score -m m1: $(cat err.txt)"
"$NMT" quantize m1.nmt -o m1q.nmt 2>err.txt || fail "quantize m1: $(cat err.txt)"
"$NMT" info m1q.nmt 2>&1 | grep -qF "tokens, cut by a SentencePiece model" || fail "quantize lost the vocabulary"
# What each holds once loaded is reported (a model this small gives no
# ratio to check: bench/model_memory.sh measures a transformer-base).
for m in m1 m1q; do
  "$NMT" info --format json "$m.nmt" | python3 -c "
import json, sys
assert json.load(sys.stdin).get('loaded_bytes', 0) > 0" || fail "nmt info $m.nmt: no loaded_bytes"
  "$NMT" info "$m.nmt" | grep -q "^memory .* once loaded (weights as read, vocabulary)$" ||
    fail "nmt info $m.nmt: no memory line"
done
"$NMT" translate -m m1q.nmt -i in.txt --threads 1 >/dev/null 2>err.txt || fail "translate m1q: $(cat err.txt)"
# The .npz itself, with the files named.
expect 0 "wrote m2.nmt" "$NMT" convert opus/model.npz --vocab opus/vocab.yml --spm sp.model -o m2.nmt
cmp -s <("$NMT" translate -m m1.nmt -i in.txt --threads 1 2>/dev/null) \
  <("$NMT" translate -m m2.nmt -i in.txt --threads 1 2>/dev/null) || fail "m1 and m2 translate differently"

# Pre-norm with a final norm, untied embeddings.
gen marian pre sp.vocab transformer-preprocess='"n"' transformer-postprocess='"da"' \
  transformer-postprocess-top='"n"' tied-embeddings-all=false tied-embeddings=true transformer-ffn-activation='"relu"'
expect 0 "wrote m3.nmt" "$NMT" convert pre --spm sp.model -o m3.nmt
"$NMT" info m3.nmt 2>&1 | grep -qF "pre-LN, sinusoidal-concat" || fail "m3 is not pre-LN: $("$NMT" info m3.nmt 2>&1)"
"$NMT" translate -m m3.nmt -i in.txt --threads 1 >/dev/null 2>err.txt || fail "translate m3: $(cat err.txt)"

# Refused by name, nothing written.
refuse() {  # DIR PATTERN option=value...
  local dir=$1 pat=$2; shift 2
  rm -rf "$dir"; gen marian "$dir" sp.vocab "$@"
  expect 1 "$pat" "$NMT" convert "$dir" --spm sp.model -o r.nmt
  [ ! -e r.nmt ] || fail "a refused conversion wrote r.nmt"
}
refuse r1 "Marian option --type amun: only Marian's transformer converts" type='"amun"'
refuse r2 "Marian option --transformer-ffn-depth 3:" transformer-ffn-depth=3
refuse r3 "Marian option --right-left true:" right-left=true
refuse r4 "Marian option --transformer-ffn-activation gelu:" transformer-ffn-activation='"gelu"'
refuse r5 "Marian option --transformer-postprocess dn:" transformer-postprocess='"dn"'
refuse r6 "Marian option --transformer-decoder-autoreg average-attention:" transformer-decoder-autoreg='"average-attention"'
refuse r7 "Marian option --transformer-postprocess-emb n:" transformer-postprocess-emb='"n"'
refuse r8 "parameter decoder_l1_rnn_W belongs to nothing nmt's Transformer has" x-extra-params='["decoder_l1_rnn_W"]'
# Damaged inputs.
rm -rf bad && mkdir bad && head -c 300 opus/model.npz >bad/model.npz && cp opus/vocab.yml bad/
expect 1 "bad/model.npz: not a readable .npz archive" "$NMT" convert bad --spm sp.model -o r.nmt
expect 1 "no such file or directory" "$NMT" convert nothing-here -o r.nmt
mkdir -p empty
expect 1 "neither a CTranslate2 model (model.bin), a Hugging Face one (config.json and model.safetensors or pytorch_model.bin) nor a Marian one (.npz)" "$NMT" convert empty -o r.nmt
expect 2 "-o m1.nmt is the" "$NMT" convert opus --spm m1.nmt -o m1.nmt
[ ! -e r.nmt ] || fail "a failed conversion wrote r.nmt"

# 2. CTranslate2: model.bin, config.json, shared_vocabulary.json; pre-norm,
# shared embeddings aliased to the projection.
gen ct2 ct sp.vocab
expect 0 "wrote c1.nmt (from CTranslate2 (TransformerSpec revision 3), space-separated tokens" \
  "$NMT" convert ct -o c1.nmt
"$NMT" info c1.nmt >info.txt 2>&1 || fail "info c1.nmt: $(cat info.txt)"
for want in "(relu)" "pre-LN" "learned positions" "tied embeddings" "tokens (tokenised text, split at spaces)"; do
  grep -qF "$want" info.txt || fail "nmt info c1.nmt lacks '$want': $(cat info.txt)"
done
# Without a SentencePiece model, text is its tokens: pieces in, pieces out.
spm_encode --model=sp.model <in.txt >in.pieces || fail "spm_encode"
"$NMT" translate -m c1.nmt -i in.pieces -o outc.txt --threads 1 2>err.txt || fail "translate c1: $(cat err.txt)"
[ "$(wc -l <outc.txt)" -eq 3 ] || fail "translate c1: $(wc -l <outc.txt) lines for 3"
expect 0 "SentencePiece sp.model" "$NMT" convert ct --spm sp.model -o c2.nmt
"$NMT" translate -m c2.nmt -i in.txt --threads 1 >/dev/null 2>err.txt || fail "translate c2: $(cat err.txt)"
# Quantised weights are widened as CTranslate2 reads them: int8 values over
# their row's scale, halves exactly.
for q in int8 f16; do
  gen ct2 ct-$q sp.vocab quant=$q
  expect 0 "wrote cq-$q.nmt" "$NMT" convert ct-$q -o cq-$q.nmt
  python3 - cq-$q.nmt ct-$q/expected.json <<'PY' || fail "$q weights were not widened as CTranslate2 reads them"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
e = h["encoder/layer_0/ffn/w1/weight"]
assert e["dtype"] == "F32", e
a, b = e["data_offsets"]
cols = e["shape"][1]
got = struct.unpack("<%df" % cols, raw[8 + n + a:8 + n + a + 4 * cols])
want = json.load(open(sys.argv[2]))["ffn_w1_row0"]
bad = [(g, w) for g, w in zip(got, want) if abs(g - w) > 1e-6 * max(1.0, abs(w))]
assert not bad and len(got) == len(want), bad[:3]
PY
  "$NMT" translate -m cq-$q.nmt -i in.pieces --threads 1 >/dev/null 2>err.txt || fail "translate cq-$q: $(cat err.txt)"
done
# A tied int8 embedding: its aliases (the decoder's embedding and the
# projection) find the scale under the target's name, as CTranslate2's
# loader does.
gen ct2 ct-tied sp.vocab quant=int8-tied
expect 0 "wrote cq-tied.nmt" "$NMT" convert ct-tied -o cq-tied.nmt
"$NMT" translate -m cq-tied.nmt -i in.pieces --threads 1 >/dev/null 2>err.txt || fail "translate cq-tied: $(cat err.txt)"
# Post-norm.
gen ct2 ctpost sp.vocab encoder/pre_norm=0 decoder/pre_norm=0
expect 0 "wrote c3.nmt" "$NMT" convert ctpost -o c3.nmt
"$NMT" info c3.nmt 2>&1 | grep -qF "post-LN" || fail "c3 is not post-LN"
# Refused by name.
crefuse() {  # DIR PATTERN attr=value...
  local dir=$1 pat=$2; shift 2
  rm -rf "$dir"; gen ct2 "$dir" sp.vocab "$@"
  expect 1 "$pat" "$NMT" convert "$dir" -o r.nmt
  [ ! -e r.nmt ] || fail "a refused conversion wrote r.nmt"
}
crefuse q1 "CTranslate2 decoder/alibi true: not supported" decoder/alibi=1
crefuse q2 "CTranslate2 activation 4: nmt has ReLU" encoder/activation=4 decoder/activation=4
crefuse q3 "CTranslate2 pre_norm: the encoder and decoder differ" encoder/pre_norm=0
crefuse q4 "CTranslate2 encoder relative positions: nmt has absolute positions only" add=encoder/layer_0/self_attention/relative_position_keys
crefuse q5 "the model has no variable encoder/layer_1/ffn/layer_norm/gamma" drop=encoder/layer_1/ffn/layer_norm/gamma
crefuse q6 "variable decoder/layer_0/attention/unknown belongs to nothing" add=decoder/layer_0/attention/unknown
crefuse q8 "CTranslate2 encoder/layer_1/ffn/layer_norm (no beta): an RMS norm" drop=encoder/layer_1/ffn/layer_norm/beta
head -c 1000 ct/model.bin >q7.bin; rm -rf q7 && cp -r ct q7 && mv q7.bin q7/model.bin
expect 1 "not a readable CTranslate2 model: truncated" "$NMT" convert q7 -o r.nmt
expect 1 "give CTranslate2's model directory, not its model.bin" "$NMT" convert ct/model.bin -o r.nmt
expect 2 "--vocab: a CTranslate2 model directory holds its vocabularies" "$NMT" convert ct --vocab sp.vocab -o r.nmt
[ ! -e r.nmt ] || fail "a failed conversion wrote r.nmt"
echo "cli convert: all checks passed"
