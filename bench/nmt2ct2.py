#!/usr/bin/env python3
"""Writes an nmt model as a CTranslate2 model through CTranslate2's own spec
classes (ctranslate2.specs.TransformerSpec and its Converter), so that
CTranslate2 is measured on the same weights as nmt (bench/ct2.sh). The
inverse of `nmt convert`'s CTranslate2 importer (lib/convert/ctranslate2.cpp):
every architecture key nmt has maps to a spec attribute; a model that has
something CTranslate2's TransformerSpec cannot express is refused by name.

  nmt2ct2.py MODEL.nmt OUT_DIR [--quantization int8|int8_float32|bfloat16|...] [--vmap]

Needs numpy and CTranslate2's Python package on PYTHONPATH; the compiled
extension is not needed to convert (CTranslate2's python/ source directory
does). An int8 model (nmt quantize) is written from its int8 weights times
their scales; CTranslate2 then quantises as --quantization says.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nmt_file import ModelFile  # noqa: E402

try:
    from ctranslate2.converters.converter import Converter
    from ctranslate2.specs import common_spec, transformer_spec
except ImportError as e:
    sys.exit(f"nmt2ct2.py: CTranslate2's Python package is not importable ({e}): "
             "set PYTHONPATH to CTranslate2's python/ directory or install it")

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("model")
ap.add_argument("out_dir")
ap.add_argument("--quantization", default=None)
ap.add_argument("--force", action="store_true", help="replace OUT_DIR")
ap.add_argument("--vmap", action="store_true",
                help="write the model's vocabulary shortlist as CTranslate2's vocabulary map "
                     "(vmap.txt, for use_vmap)")
args = ap.parse_args()


def fail(msg):
    sys.exit(f"nmt2ct2.py: {args.model}: {msg}")


model = ModelFile(args.model, fail)
header, cfg = model.header, model.cfg
used = set()


blob = model.blob


def get(name, shape):
    """A tensor as f32 (an int8 matrix times its per-row scales)."""
    if name not in header:
        fail(f"no tensor {name}")
    t = header[name]
    if t["shape"] != list(shape):
        fail(f"{name} has shape {t['shape']}, expected {list(shape)}")
    used.add(name)
    if t["dtype"] == "F32":
        return np.frombuffer(blob(name), dtype="<f4").reshape(shape).copy()
    if t["dtype"] == "I8" and name + ".scale" in header:
        used.add(name + ".scale")
        q = np.frombuffer(blob(name), dtype=np.int8).reshape(shape).astype(np.float32)
        s = np.frombuffer(blob(name + ".scale"), dtype="<f4")
        return q * s.reshape(-1, 1)
    fail(f"{name} is {t['dtype']}")


def spm_pieces(model):
    """The pieces of a SentencePiece ModelProto in id order (field 1, each a
    SentencePiece message whose field 1 is the piece), read without the
    sentencepiece package."""
    def varint(b, i):
        v = s = 0
        while True:
            c = b[i]
            i += 1
            v |= (c & 0x7F) << s
            s += 7
            if c < 0x80:
                return v, i

    def fields(b):
        i = 0
        while i < len(b):
            key, i = varint(b, i)
            f, wire = key >> 3, key & 7
            if wire == 0:
                v, i = varint(b, i)
            elif wire == 1:
                v, i = b[i:i + 8], i + 8
            elif wire == 2:
                ln, i = varint(b, i)
                v, i = b[i:i + ln], i + ln
            elif wire == 5:
                v, i = b[i:i + 4], i + 4
            else:
                fail(f"the SentencePiece model has a field of wire type {wire}")
            yield f, v

    pieces = []
    for f, v in fields(model):
        if f == 1:
            piece = next((p for g, p in fields(v) if g == 1), b"")
            pieces.append(piece.decode("utf-8"))
    return pieces


def tokens(side):
    prefix = "vocab/source/" if side == "source" else "vocab/"
    if prefix + "tokens" in header:
        return json.loads(blob(prefix + "tokens"))
    if prefix + "sentencepiece" in header:
        return spm_pieces(blob(prefix + "sentencepiece"))
    return None


tgt_tokens = tokens("target")
if tgt_tokens is None:
    fail("the model holds no vocabulary")
src_tokens = tokens("source") or tgt_tokens
D, F, H = cfg["d_model"], cfg["d_ff"], cfg["heads"]
V = cfg["vocab_size"]
Vs = cfg.get("src_vocab_size", 0) or V
if len(tgt_tokens) != V or len(src_tokens) != Vs:
    fail(f"vocabularies of {len(src_tokens)} and {len(tgt_tokens)} pieces for embeddings of {Vs} and {V}")
if cfg.get("d_k", D // H) * H != D or cfg.get("d_v", D // H) * H != D:
    fail("d_k * heads must be d_model, as in CTranslate2's attention")
acts = {"relu": common_spec.Activation.RELU, "gelu-tanh": common_spec.Activation.GELUTanh,
        "swish": common_spec.Activation.SWISH, "gelu": common_spec.Activation.GELU}
act = cfg.get("activation", "relu")
if act not in acts:
    fail(f"activation {act!r} has no CTranslate2 counterpart")
pre = cfg.get("norm", "post") == "pre"
final_norm = pre and cfg.get("final_norm", True)
ids = {k: cfg.get(k, d) for k, d in (("pad_id", 0), ("unk_id", 1), ("bos_id", 2), ("eos_id", 3))}
zero_start = cfg.get("decoder_start", "bos") == "zero"


def positions(side):
    kind = cfg.get("positional", "sinusoidal")
    P = cfg["max_positions"]
    if kind == "learned":
        return get(f"{side}/embed/positions", (P, D))
    pos = np.arange(P, dtype=np.float64)[:, None]
    if kind == "sinusoidal":  # model/embeddings.cpp: interleaved, angles in double
        i = np.arange(0, D, 2, dtype=np.float64)[None, :]
        angle = pos / np.power(10000.0, i / D)
        t = np.zeros((P, D), dtype=np.float32)
        t[:, 0::2] = np.sin(angle).astype(np.float32)
        t[:, 1::2] = np.cos(angle[:, : D // 2]).astype(np.float32)
        return t
    if kind == "sinusoidal-concat":  # sines then cosines, in float as nmt computes them
        inc = np.float32(np.log(np.float32(10000.0)) / (np.float32(D) / 2 - 1))
        v = pos.astype(np.float32) * np.exp(np.arange(D // 2, dtype=np.float32) * -inc)[None, :]
        return np.concatenate([np.sin(v), np.cos(v)], axis=1).astype(np.float32)
    fail(f"positional {kind!r}")


def linear(spec, name, out_dim, in_dim, bias=True):
    spec.weight = get(name + "/weight", (out_dim, in_dim))  # (out, in), as CTranslate2 stores it
    if bias:
        spec.bias = get(name + "/bias", (out_dim,))


def norm(spec, name):
    spec.gamma = get(name + "/gamma", (D,))
    spec.beta = get(name + "/beta", (D,))


def ffn(spec, name):
    linear(spec.linear_0, name + "/w1", F, D)
    linear(spec.linear_1, name + "/w2", D, F)


def write_vmap(path):
    """nmt's shortlist (lib/model/shortlist.cpp: little-endian int32s, magic
    NTSL) as CTranslate2's vocabulary map: a line of the always-allowed
    pieces under the empty key (its frequent pieces), then each source piece
    with its candidates. CTranslate2 takes the union over a batch, as nmt
    does, but masks no sentence to its own."""
    if "shortlist" not in header:
        fail("--vmap: the model holds no shortlist (nmt shortlist adds one)")
    used.add("shortlist")
    b = np.frombuffer(blob("shortlist"), dtype="<i4")
    magic, version, sv, tv, _, _, n_freq, entries = (int(x) for x in b[:8])
    if magic != 0x4C53544E or sv != Vs or tv != V:
        fail("--vmap: the shortlist is not one for this model's vocabularies")
    at = 8
    offsets = b[at:at + sv + 1]
    at += sv + 1
    targets = b[at:at + entries]
    at += entries
    by_freq = b[at:at + tv]
    if at + tv != len(b):
        fail(f"--vmap: the shortlist's {len(b)} values do not match its counts (version {version})")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\t" + " ".join(tgt_tokens[t] for t in by_freq[:n_freq]) + "\n")
        for piece in range(sv):
            cand = targets[offsets[piece]:offsets[piece + 1]]
            if len(cand) and src_tokens[piece] and not any(c in src_tokens[piece] for c in " \t\n"):
                f.write(src_tokens[piece] + "\t" + " ".join(tgt_tokens[t] for t in cand) + "\n")


class NmtConverter(Converter):
    def _load(self):
        spec = transformer_spec.TransformerSpec.from_config(
            (cfg["encoder_layers"], cfg["decoder_layers"]), H, pre_norm=pre,
            no_final_norm=pre and not final_norm, activation=acts[act])
        if cfg.get("tie_embeddings", True):
            emb = get("embed/tokens", (V, D))
            src_emb = tgt_emb = proj = emb
        else:
            src_emb = get("encoder/embed/tokens", (Vs, D))
            tgt_emb = get("decoder/embed/tokens", (V, D))
            proj = tgt_emb if cfg.get("tie_output", False) else get("decoder/output/weight", (V, D))
        spec.encoder.embeddings[0].weight = src_emb
        spec.decoder.embeddings.weight = tgt_emb
        spec.decoder.projection.weight = proj
        if cfg.get("output_bias", False):
            spec.decoder.projection.bias = get("decoder/output/bias", (V,))
        for side in (spec.encoder, spec.decoder):
            side.scale_embeddings = bool(cfg.get("scale_embeddings", True))
        spec.encoder.position_encodings.encodings = positions("encoder")
        spec.decoder.position_encodings.encodings = positions("decoder")
        for l, layer in enumerate(spec.encoder.layer):
            s = f"encoder/layer_{l}"
            linear(layer.self_attention.linear[0], s + "/self_attn/qkv", 3 * D, D)
            linear(layer.self_attention.linear[1], s + "/self_attn/out", D, D)
            norm(layer.self_attention.layer_norm, s + "/ln1")
            ffn(layer.ffn, s + "/ffn")
            norm(layer.ffn.layer_norm, s + "/ln2")
        for l, layer in enumerate(spec.decoder.layer):
            s = f"decoder/layer_{l}"
            linear(layer.self_attention.linear[0], s + "/self_attn/qkv", 3 * D, D)
            linear(layer.self_attention.linear[1], s + "/self_attn/out", D, D)
            norm(layer.self_attention.layer_norm, s + "/ln1")
            linear(layer.attention.linear[0], s + "/cross_attn/q", D, D)
            linear(layer.attention.linear[1], s + "/cross_attn/kv", 2 * D, D)
            linear(layer.attention.linear[2], s + "/cross_attn/out", D, D)
            norm(layer.attention.layer_norm, s + "/ln2")
            ffn(layer.ffn, s + "/ffn")
            norm(layer.ffn.layer_norm, s + "/ln3")
        if final_norm:
            norm(spec.encoder.layer_norm, "encoder/final_ln")
            norm(spec.decoder.layer_norm, "decoder/final_ln")
        if zero_start:
            # Marian's decoding from a zero embedding, as CTranslate2's Marian
            # converter writes it.
            spec.decoder.start_from_zero_embedding = True
        # The vocabulary shortlist is nmt's table, not a weight (CTranslate2's
        # counterpart is a vocabulary map, --use_vmap).
        left = [k for k in header if k not in used and not k.startswith("vocab/") and k != "shortlist"]
        if left:
            fail(f"tensor {left[0]} has no place in CTranslate2's TransformerSpec")
        spec.config.unk_token = tgt_tokens[ids["unk_id"]]
        spec.config.eos_token = tgt_tokens[ids["eos_id"]]
        # From a zero embedding the start token is never embedded; CTranslate2's
        # Marian converter names <s> all the same.
        bos = tgt_tokens[ids["bos_id"]] if ids["bos_id"] >= 0 else "<s>"
        spec.config.bos_token = spec.config.decoder_start_token = bos
        spec.config.add_source_bos = bool(cfg.get("source_bos", False))
        spec.config.add_source_eos = bool(cfg.get("source_eos", True))
        # Left unset (null) at CTranslate2's own default, 1e-5, as its
        # converters do; nmt's default is 1e-6.
        eps = float(cfg.get("layer_norm_eps", 1e-6))
        spec.config.layer_norm_epsilon = None if np.float32(eps) == np.float32(1e-5) else eps
        spec.register_source_vocabulary(src_tokens)
        spec.register_target_vocabulary(tgt_tokens)
        return spec


vmap = None
if args.vmap:
    import tempfile
    vmap = os.path.join(tempfile.mkdtemp(prefix="nmt2ct2-"), "vmap.txt")
    write_vmap(vmap)
NmtConverter().convert(args.out_dir, vmap=vmap, quantization=args.quantization, force=args.force)
print(f"nmt2ct2.py: wrote {args.out_dir}: {cfg['encoder_layers']}+{cfg['decoder_layers']} layers, "
      f"d_model {D}, d_ff {F}, {H} heads, {'pre' if pre else 'post'}-norm, {act}, {V} pieces"
      f"{', quantization ' + args.quantization if args.quantization else ''}", file=sys.stderr)
