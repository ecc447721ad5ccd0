#!/usr/bin/env python3
"""Writes small models in Marian's and CTranslate2's file layouts, with
random weights, for cli_convert.sh: what `nmt convert` reads and what it must
refuse. They test the readers and the refusals, not the arithmetic: the
translations that prove the conversion exact come from models the tools
themselves wrote (tests/fixtures/, see its README).

  convert_synthetic.py marian DIR VOCAB.txt [option=value ...]
  convert_synthetic.py ct2 DIR VOCAB.txt [attribute=value ...]

VOCAB.txt: one token per line (SentencePiece's pieces, as spm_export_vocab
writes them with their scores). Options override the model's (Marian: YAML
values; CTranslate2: scalar attributes written as int8, or "drop=NAME" to
leave a variable out, "add=NAME" to add an unknown one)."""
import json
import random
import struct
import sys
import zipfile
from pathlib import Path

D, F, H, L = 16, 32, 2, 2


def npy(shape, values, descr="<f4"):
    dims = "(%d,)" % shape[0] if len(shape) == 1 else "(" + ", ".join("%d" % d for d in shape) + ")"
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, dims)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    fmt = {"<f4": "f", "|i1": "b"}[descr]
    return (b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1") +
            struct.pack("<%d%s" % (len(values), fmt), *values))


def rand(n, scale=0.3):
    return [random.gauss(0, scale) for _ in range(n)]


def pieces(vocab_txt):
    return [l.split("\t")[0] for l in Path(vocab_txt).read_text(encoding="utf-8").splitlines()]


def marian(out, vocab_txt, overrides):
    out.mkdir(parents=True, exist_ok=True)
    # Marian's ids: </s> 0, <unk> 1, then the pieces.
    toks = ["</s>", "<unk>"] + [p for p in pieces(vocab_txt) if p not in ("<unk>", "<s>", "</s>", "<pad>")]
    V = len(toks)
    with open(out / "vocab.yml", "w", encoding="utf-8") as f:
        for i, t in enumerate(toks):
            f.write("%s: %d\n" % (json.dumps(t, ensure_ascii=False), i))
    opts = {"type": "transformer", "dim-emb": D, "dim-vocabs": [V, V], "enc-depth": L,
            "dec-depth": L, "transformer-heads": H, "transformer-dim-ffn": F,
            "transformer-ffn-depth": 2, "transformer-ffn-activation": "swish",
            "transformer-preprocess": "", "transformer-postprocess": "dan",
            "transformer-postprocess-emb": "d", "tied-embeddings-all": True,
            "transformer-decoder-autoreg": "self-attention", "version": "synthetic"}
    for o in overrides:
        k, v = o.split("=", 1)
        opts[k] = json.loads(v)
    pre = opts["transformer-preprocess"] == "n"
    arrays = {}

    def put(name, shape):
        n = 1
        for d in shape:
            n *= d
        arrays[name] = (shape, rand(n) if not name.endswith("_ln_scale") and "_ln_scale" not in name
                        else [1.0 + x for x in rand(n, 0.1)])

    if opts.get("tied-embeddings-all"):
        put("Wemb", (V, D))
    else:
        put("encoder_Wemb", (V, D))
        put("decoder_Wemb", (V, D))
        if not opts.get("tied-embeddings"):
            put("decoder_ff_logit_out_W", (D, V))
    put("decoder_ff_logit_out_b", (1, V))
    sfx = "_pre" if pre else ""
    for side, blocks in (("encoder", ["self"]), ("decoder", ["self", "context"])):
        for l in range(1, L + 1):
            for b in blocks:
                p = "%s_l%d_%s" % (side, l, b)
                for w in ("Wq", "Wk", "Wv", "Wo"):
                    put("%s_%s" % (p, w), (D, D))
                    put("%s_b%s" % (p, w[1]), (1, D))
                put("%s_Wo_ln_scale%s" % (p, sfx), (1, D))
                put("%s_Wo_ln_bias%s" % (p, sfx), (1, D))
            p = "%s_l%d_ffn" % (side, l)
            put(p + "_W1", (D, F))
            put(p + "_b1", (1, F))
            put(p + "_W2", (F, D))
            put(p + "_b2", (1, D))
            put(p + "_ffn_ln_scale" + sfx, (1, D))
            put(p + "_ffn_ln_bias" + sfx, (1, D))
        if opts.get("transformer-postprocess-top") == "n":
            put(side + "_top_ln_scale", (1, D))
            put(side + "_top_ln_bias", (1, D))
    for name in opts.pop("x-extra-params", []):
        put(name, (1, D))
    yml = "".join("%s: %s\n" % (k, json.dumps(v)) for k, v in opts.items()).encode() + b"\0"
    with zipfile.ZipFile(out / "model.npz", "w", zipfile.ZIP_STORED) as z:
        for name, (shape, values) in arrays.items():
            z.writestr(name + ".npy", npy(shape, values))
        z.writestr("special:model.yml.npy", npy((len(yml),), list(struct.unpack("%db" % len(yml), yml)), "|i1"))


def ct2(out, vocab_txt, overrides):
    out.mkdir(parents=True, exist_ok=True)
    toks = ["<blank>", "<unk>", "<s>", "</s>"] + [p for p in pieces(vocab_txt) if p not in ("<unk>", "<s>", "</s>", "<pad>")]
    V = len(toks)
    (out / "shared_vocabulary.json").write_text(json.dumps(toks, ensure_ascii=False), encoding="utf-8")
    (out / "config.json").write_text(json.dumps({
        "add_source_bos": False, "add_source_eos": False, "bos_token": "<s>",
        "decoder_start_token": "<s>", "eos_token": "</s>", "layer_norm_epsilon": 1e-6,
        "unk_token": "<unk>"}))
    attrs = {"encoder/num_heads": ("h", H), "encoder/pre_norm": ("b", 1), "encoder/activation": ("b", 0),
             "encoder/embeddings_merge": ("b", 0), "encoder/scale_embeddings": ("b", 1),
             "decoder/num_heads": ("h", H), "decoder/pre_norm": ("b", 1), "decoder/activation": ("b", 0),
             "decoder/alignment_layer": ("h", -1), "decoder/alignment_heads": ("h", 1),
             "decoder/scale_embeddings": ("b", 1), "decoder/start_from_zero_embedding": ("b", 0),
             "decoder/alibi": ("b", 0), "decoder/alibi_use_positive_positions": ("b", 0),
             "decoder/scale_alibi": ("b", 0)}
    drop, add, quant = set(), [], None
    for o in overrides:
        k, v = o.split("=", 1)
        if k == "drop":
            drop.add(v)
        elif k == "add":
            add.append(v)
        elif k == "quant":
            quant = v
        else:
            attrs[k] = ("b", int(v))
    pre = attrs["encoder/pre_norm"][1]
    var = {}

    def put(name, shape):
        n = 1
        for d in shape:
            n *= d
        var[name] = (shape, [1.0 + x for x in rand(n, 0.1)] if name.endswith("gamma") else rand(n))

    put("encoder/embeddings_0/weight", (V, D))
    for side, blocks in (("encoder", ["self_attention"]), ("decoder", ["self_attention", "attention"])):
        for l in range(L):
            p = "%s/layer_%d" % (side, l)
            for b in blocks:
                if b == "self_attention":
                    put(p + "/%s/linear_0/weight" % b, (3 * D, D)); put(p + "/%s/linear_0/bias" % b, (3 * D,))
                    put(p + "/%s/linear_1/weight" % b, (D, D)); put(p + "/%s/linear_1/bias" % b, (D,))
                else:
                    put(p + "/%s/linear_0/weight" % b, (D, D)); put(p + "/%s/linear_0/bias" % b, (D,))
                    put(p + "/%s/linear_1/weight" % b, (2 * D, D)); put(p + "/%s/linear_1/bias" % b, (2 * D,))
                    put(p + "/%s/linear_2/weight" % b, (D, D)); put(p + "/%s/linear_2/bias" % b, (D,))
                put(p + "/%s/layer_norm/gamma" % b, (D,)); put(p + "/%s/layer_norm/beta" % b, (D,))
            put(p + "/ffn/linear_0/weight", (F, D)); put(p + "/ffn/linear_0/bias", (F,))
            put(p + "/ffn/linear_1/weight", (D, F)); put(p + "/ffn/linear_1/bias", (D,))
            put(p + "/ffn/layer_norm/gamma", (D,)); put(p + "/ffn/layer_norm/beta", (D,))
        if pre:
            put(side + "/layer_norm/gamma", (D,)); put(side + "/layer_norm/beta", (D,))
    put("decoder/projection/bias", (V,))
    for n in add:
        put(n, (D,))
    aliases = [("decoder/embeddings/weight", "encoder/embeddings_0/weight"),
               ("decoder/projection/weight", "encoder/embeddings_0/weight")]
    # One weight stored as CTranslate2 quantises it (int8: round(w * 127 /
    # max|row|) with the row's scale beside it; f16), and what it stands for
    # (q / scale, or the half), for the test to compare with the conversion.
    # int8-tied: the tied embedding instead, whose scale CTranslate2 writes
    # under the aliased target's name only (it quantises after aliasing).
    qname = "encoder/embeddings_0/weight" if quant == "int8-tied" else "encoder/layer_0/ffn/linear_0/weight"
    qtype = {}
    if quant:
        shape, values = var[qname]
        rows, cols = shape
        if quant in ("int8", "int8-tied"):
            q, scales, want = [], [], []
            for r in range(rows):
                row = values[r * cols:(r + 1) * cols]
                scale = struct.unpack("<f", struct.pack("<f", 127.0 / max(abs(x) for x in row)))[0]
                qs = [max(-127, min(127, round(x * scale))) for x in row]
                q += qs
                scales.append(scale)
                want += [struct.unpack("<f", struct.pack("<f", v / scale))[0] for v in qs]
            var[qname] = (shape, q)
            var[qname + "_scale"] = ((rows,), scales)
            qtype[qname] = (1, "b")
        else:
            want = [struct.unpack("<e", struct.pack("<e", x))[0] for x in values]
            var[qname] = (shape, want)
            qtype[qname] = (4, "e")
        (out / "expected.json").write_text(json.dumps({"ffn_w1_row0": want[:cols]}))
    names = sorted(n for n in list(var) + list(attrs) if n not in drop)
    with open(out / "model.bin", "wb") as f:
        def s(x):
            b = x.encode() + b"\0"
            f.write(struct.pack("<H", len(b)) + b)
        f.write(struct.pack("<I", 6)); s("TransformerSpec"); f.write(struct.pack("<I", 3))
        f.write(struct.pack("<I", len(names)))
        for n in names:
            s(n)
            if n in attrs:
                t, v = attrs[n]
                f.write(struct.pack("<B", 0) + struct.pack("<B", 1 if t == "b" else 2))
                data = struct.pack("<" + t, v)
            else:
                shape, values = var[n]
                t, fmt = qtype.get(n, (0, "f"))
                f.write(struct.pack("<B", len(shape)) + b"".join(struct.pack("<I", d) for d in shape))
                f.write(struct.pack("<B", t))
                data = struct.pack("<%d%s" % (len(values), fmt), *values)
            f.write(struct.pack("<I", len(data)) + data)
        f.write(struct.pack("<I", len(aliases)))
        for a, t in aliases:
            s(a); s(t)


if __name__ == "__main__":
    random.seed(7)
    kind, out, vocab = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    (marian if kind == "marian" else ct2)(out, vocab, sys.argv[4:])
