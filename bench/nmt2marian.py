#!/usr/bin/env python3
"""Writes an nmt model as a Marian model, so that marian-decoder and
CTranslate2 (through its own Marian converter) can be measured on the same
weights as nmt (bench/peers.sh) at a realistic size: Marian trains slowly on a
CPU, nmt does not. The inverse of `nmt convert`'s Marian importer
(lib/convert/marian.cpp), for the models OPUS-MT publishes: post-norm, one
embedding matrix tied with the output layer, an output bias, swish or ReLU,
Marian's sine|cosine position layout, decoding from a zero embedding. Any other
model is refused; nothing is approximated.

  nmt2marian.py MODEL.nmt OUT_DIR

OUT_DIR gets model.npz (its options in special:model.yml), the vocabulary
(vocab.spm; or, when the model's ids are not its SentencePiece model's own, as
for an imported model, vocab.yml with source.spm and target.spm, as OPUS-MT
lays them out) and model.npz.decoder.yml. Train a model this can
write with a config such as bench/peers-marian.json. Standard library only.
"""
import json
import struct
import sys
import zipfile
from array import array
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nmt_file import ModelFile  # noqa: E402

if len(sys.argv) != 3:
    sys.exit("usage: nmt2marian.py MODEL.nmt OUT_DIR")
src, out = Path(sys.argv[1]), Path(sys.argv[2])


def fail(msg):
    sys.exit(f"nmt2marian.py: {src}: {msg}")


model = ModelFile(src, fail)
raw, header, meta, base, cfg = model.raw, model.header, model.meta, model.base, model.cfg


def tensor(name):
    if name not in header:
        fail(f"no tensor {name}")
    t = header[name]
    a, b = t["data_offsets"]
    if t["dtype"] != "F32":
        fail(f"{name} is {t['dtype']}: give the f32 model (before nmt quantize)")
    return array("f", raw[base + a:base + b]), t["shape"]


def need(key, want):
    if cfg.get(key) != want:
        fail(f"config {key} is {cfg.get(key)!r}; Marian's OPUS-MT transformer needs {want!r}")


need("norm", "post")
need("tie_embeddings", True)
need("output_bias", True)
need("positional", "sinusoidal-concat")
need("decoder_start", "zero")
need("scale_embeddings", True)
if cfg.get("activation") not in ("swish", "relu"):
    fail(f"config activation is {cfg.get('activation')!r}; Marian has swish and relu")
if cfg.get("src_vocab_size", 0):
    fail("separate source vocabulary: Marian's --tied-embeddings-all needs one")
if cfg.get("output_unk", True):
    fail("config output_unk is true: marian-decoder never outputs <unk> (set \"output_unk\": false)")
if cfg.get("source_bos") or not cfg.get("source_eos", True):
    fail("the source is framed otherwise than Marian's (</s> after it, nothing before)")
if abs(cfg.get("layer_norm_eps", 1e-6) - 1e-6) > 1e-12:
    fail(f"layer_norm_eps {cfg['layer_norm_eps']}: Marian's layer norm has 1e-6")
D, F, H, V = cfg["d_model"], cfg["d_ff"], cfg["heads"], cfg["vocab_size"]
if cfg.get("d_k", D // H) * H != D or cfg.get("d_v", D // H) * H != D:
    fail("d_k * heads must be d_model, as in Marian")

P = {}
used = set()


def get(name, shape):
    a, s = tensor(name)
    if s != list(shape):
        fail(f"{name} has shape {s}, expected {list(shape)}")
    used.add(name)
    return a


def transposed(a, rows, cols):
    """A row-major rows x cols matrix as cols x rows."""
    t = array("f", bytes(4 * rows * cols))
    for r in range(rows):
        t[r::rows] = a[r * cols:(r + 1) * cols]
    return t


def put(name, a, shape):
    P[name] = (a, shape)


put("Wemb", get("embed/tokens", (V, D)), (V, D))
put("decoder_ff_logit_out_b", get("decoder/output/bias", (V,)), (1, V))


def attention(to, frm, self_attn):
    if self_attn:
        w, b = get(frm + "/qkv/weight", (3 * D, D)), get(frm + "/qkv/bias", (3 * D,))
        ws = [w[i * D * D:(i + 1) * D * D] for i in range(3)]
        bs = [b[i * D:(i + 1) * D] for i in range(3)]
    else:
        kv, bkv = get(frm + "/kv/weight", (2 * D, D)), get(frm + "/kv/bias", (2 * D,))
        ws = [get(frm + "/q/weight", (D, D)), kv[:D * D], kv[D * D:]]
        bs = [get(frm + "/q/bias", (D,)), bkv[:D], bkv[D:]]
    for x, w, b in zip("qkv", ws, bs):
        put(f"{to}_W{x}", transposed(w, D, D), (D, D))  # nmt: (out, in); Marian: (in, out)
        put(f"{to}_b{x}", b, (1, D))
    put(to + "_Wo", transposed(get(frm + "/out/weight", (D, D)), D, D), (D, D))
    put(to + "_bo", get(frm + "/out/bias", (D,)), (1, D))


def norm(to, frm):
    put(to + "_ln_scale", get(frm + "/gamma", (D,)), (1, D))
    put(to + "_ln_bias", get(frm + "/beta", (D,)), (1, D))


def ffn(to, frm):
    put(to + "_W1", transposed(get(frm + "/w1/weight", (F, D)), F, D), (D, F))
    put(to + "_b1", get(frm + "/w1/bias", (F,)), (1, F))
    put(to + "_W2", transposed(get(frm + "/w2/weight", (D, F)), D, F), (F, D))
    put(to + "_b2", get(frm + "/w2/bias", (D,)), (1, D))


for l in range(cfg["encoder_layers"]):
    to, frm = f"encoder_l{l + 1}", f"encoder/layer_{l}"
    attention(to + "_self", frm + "/self_attn", True)
    norm(to + "_self_Wo", frm + "/ln1")
    ffn(to + "_ffn", frm + "/ffn")
    norm(to + "_ffn_ffn", frm + "/ln2")
for l in range(cfg["decoder_layers"]):
    to, frm = f"decoder_l{l + 1}", f"decoder/layer_{l}"
    attention(to + "_self", frm + "/self_attn", True)
    norm(to + "_self_Wo", frm + "/ln1")
    attention(to + "_context", frm + "/cross_attn", False)
    norm(to + "_context_Wo", frm + "/ln2")
    ffn(to + "_ffn", frm + "/ffn")
    norm(to + "_ffn_ffn", frm + "/ln3")
# The vocabulary shortlist is nmt's table, not a weight: Marian makes its own
# lexical shortlists (from fast_align), so it is left behind.
left = [k for k in header
        if k not in used and not k.startswith("vocab/") and k != "shortlist"]
if left:
    fail(f"tensor {left[0]} has no place in Marian's transformer")

# Marian 1.12's options for a transformer, the subset of what it writes that
# concerns this model (it also writes the RNN and BERT keys, which its
# transformer ignores); CTranslate2's Marian converter reads several of them
# that marian-decoder would default.
options = {
    "type": "transformer", "dim-emb": D, "dim-vocabs": [V, V],
    "enc-depth": cfg["encoder_layers"], "dec-depth": cfg["decoder_layers"],
    "transformer-heads": H, "transformer-dim-ffn": F, "transformer-ffn-depth": 2,
    "transformer-decoder-dim-ffn": 0, "transformer-decoder-ffn-depth": 0,
    "transformer-ffn-activation": cfg["activation"], "transformer-preprocess": "",
    "transformer-postprocess": "dan", "transformer-postprocess-emb": "d",
    "transformer-postprocess-top": "", "transformer-train-position-embeddings": False,
    "transformer-disable-position-embeddings": False, "transformer-decoder-autoreg": "self-attention",
    "transformer-tied-layers": [], "transformer-no-projection": False, "transformer-no-bias": False,
    "transformer-no-affine": False, "transformer-pool": False, "transformer-alibi-shift": False,
    "transformer-alibi-trainable": False, "transformer-attention-mask": "default",
    "transformer-guided-alignment-layer": "last", "transformer-rnn-projection": False,
    "transformer-aan-activation": "swish", "transformer-aan-depth": 2, "transformer-aan-nogate": False,
    "transformer-dim-aan": 2048, "tied-embeddings": False, "tied-embeddings-all": True,
    "tied-embeddings-src": False, "output-omit-bias": False, "right-left": False,
    "lemma-dim-emb": 0, "lemma-dependency": "", "factors-combine": "sum", "factors-dim-emb": 0,
    "ulr": False, "ulr-dim-emb": 0, "ulr-trainable-transformation": False, "input-types": [],
    "layer-normalization": False, "skip": False, "version": "v1.12.43 (written by bench/nmt2marian.py)",
}


def yaml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "\n" + "".join(f"  - {x}\n" for x in v).rstrip("\n") if v else "\n  []"
    if isinstance(v, str):
        return json.dumps(v)
    return str(v)


yml = "".join(f"{k}: {yaml_value(v)}\n" for k, v in sorted(options.items()))


def npy(a, shape, descr="<f4"):
    dims = "(%d,)" % shape[0] if len(shape) == 1 else "(" + ", ".join(map(str, shape)) + ")"
    h = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, dims)
    h += " " * ((64 - (10 + len(h) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode("latin1") + a


blob = model.blob


if "vocab/sentencepiece" not in header:
    fail("the model holds no SentencePiece model")
spm = blob("vocab/sentencepiece")
src_spm = blob("vocab/source/sentencepiece") if "vocab/source/sentencepiece" in header else spm
if "vocab/source/tokens" in header and blob("vocab/source/tokens") != blob("vocab/tokens"):
    fail("the source and target vocabularies differ: Marian's --tied-embeddings-all needs one")
out.mkdir(parents=True, exist_ok=True)
with zipfile.ZipFile(out / "model.npz", "w", zipfile.ZIP_STORED) as z:
    for name, (a, shape) in sorted(P.items()):
        z.writestr(name + ".npy", npy(a.tobytes(), shape))
    # One NUL, as marian ends the string: CTranslate2 4.8.1's converter cuts
    # exactly one before parsing the YAML (marian pads with more, which
    # CTranslate2 then refuses; see tests/fixtures/peers/README.md).
    y = yml.encode() + b"\0"
    z.writestr("special:model.yml.npy", npy(y, (len(y),), "|i1"))

vocab = "vocab.spm"
if "vocab/tokens" not in header and src_spm == spm:
    (out / vocab).write_bytes(spm)
else:
    # Imported ids, or one vocabulary cut by two SentencePiece models: a
    # vocab.yml maps the pieces to the ids, beside source.spm and target.spm
    # (OPUS-MT's layout).
    if "vocab/tokens" not in header:
        fail("two SentencePiece models but no token list")
    (out / "source.spm").write_bytes(src_spm)
    (out / "target.spm").write_bytes(spm)
    tokens = json.loads(blob("vocab/tokens"))
    (out / "vocab.yml").write_text("".join(f"{json.dumps(t, ensure_ascii=False)}: {i}\n"
                                           for i, t in enumerate(tokens)), encoding="utf-8")
    vocab = "vocab.yml"
(out / "model.npz.decoder.yml").write_text(
    f"relative-paths: true\nmodels:\n  - model.npz\nvocabs:\n  - {vocab}\n  - {vocab}\n"
    "beam-size: 4\nnormalize: 0\nword-penalty: 0\nmini-batch: 32\nmaxi-batch: 100\nmaxi-batch-sort: src\n")
print(f"nmt2marian.py: wrote {out}/model.npz: {len(P)} parameters, d_model {D}, d_ff {F}, "
      f"{H} heads, {cfg['encoder_layers']}+{cfg['decoder_layers']} layers, {V} pieces, vocabulary {vocab}",
      file=sys.stderr)
