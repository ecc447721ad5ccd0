#!/usr/bin/env python3
"""Writes tiny models in CTranslate2's and Marian's file layouts, well formed
or damaged in one named way, for cli_imports.sh and the importers' fuzz seeds:
what `nmt convert` must read, or refuse with one line naming the file and the
variable, key or token, in bounded time and memory.

  hostile_models.py ct2 DIR [key=value ...]
  hostile_models.py npz DIR [key=value ...]     (DIR/model.npz, DIR/vocab.yml)

ct2 keys: D F V (sizes), token3=TEXT (token 3's text, JSON-escaped), txt=1 (the
vocabulary as one token per line), favourite=ID (the output bias makes it win),
nan=1 (a NaN in the first FFN weight), int8_scale=X (that weight as int8, its
row scales X), dup=1 (a variable written twice), no_nul=1 (the spec name's NUL
replaced), junk=N (N unknown scalars behind aliases), ffn_rows=N (the first
FFN's declared rows, its data still D x N), no_ffn_bias=1 (the first FFN
without its bias), name_suffix=TEXT (appended to an
unknown variable's name, JSON-escaped).
npz keys: D F V, pieces=FILE.vocab (the tokens: a SentencePiece model's), bomb=N (N extra entries of 64 MB of zeros each, deflated),
neg_shape=1, dup=1 (an entry written twice), empty=1 (an extra (0, D) array),
deep=N (special:model.yml nested N deep), nan=1."""
import json
import random
import struct
import sys
import warnings
import zipfile
from pathlib import Path


def args_of(argv):
    return dict(a.split("=", 1) for a in argv)


def ct2(out, a):
    D, F, V, H = int(a.get("D", 8)), int(a.get("F", 16)), int(a.get("V", 12)), 2
    rnd = random.Random(1)
    out.mkdir(parents=True, exist_ok=True)
    tokens = ["<unk>", "<s>", "</s>"] + ["w%d" % i for i in range(V - 3)]
    if "token3" in a:
        tokens[3] = json.loads('"%s"' % a["token3"])
    variables, aliases = [], []

    def var(name, dims, typ, data):
        variables.append((name, dims, typ, data))

    def f32(name, dims, values=None):
        n = 1
        for d in dims:
            n *= d
        values = values if values is not None else [rnd.uniform(-0.3, 0.3) for _ in range(n)]
        var(name, dims, 0, struct.pack("<%df" % n, *values))

    for side in ("encoder", "decoder"):
        var(side + "/activation", [], 1, b"\0")
        var(side + "/pre_norm", [], 1, b"\0")
        var(side + "/num_heads", [], 2, struct.pack("<h", H))
    var("decoder/start_from_zero_embedding", [], 1, b"\0")
    f32("decoder/embeddings/weight", [V, D])
    bias = [0.0] * V
    if "favourite" in a:
        bias[int(a["favourite"])] = 50.0
    f32("decoder/projection/bias", [V], bias)
    aliases += [("decoder/projection/weight", "decoder/embeddings/weight"),
                ("encoder/embeddings_0/weight", "decoder/embeddings/weight")]

    def lin(p, o, i, bias=True):
        f32(p + "/weight", [o, i])
        if bias:
            f32(p + "/bias", [o])

    def ln(p):
        f32(p + "/gamma", [D], [1.0] * D)
        f32(p + "/beta", [D], [0.0] * D)

    for side in ("encoder", "decoder"):
        L = side + "/layer_0"
        lin(L + "/self_attention/linear_0", 3 * D, D)
        lin(L + "/self_attention/linear_1", D, D)
        ln(L + "/self_attention/layer_norm")
        if side == "decoder":
            lin(L + "/attention/linear_0", D, D)
            lin(L + "/attention/linear_1", 2 * D, D)
            lin(L + "/attention/linear_2", D, D)
            ln(L + "/attention/layer_norm")
        lin(L + "/ffn/linear_0", F, D, bias=not a.get("no_ffn_bias"))
        lin(L + "/ffn/linear_1", D, F)
        ln(L + "/ffn/layer_norm")
    first_ffn = [i for i, v in enumerate(variables) if v[0] == "encoder/layer_0/ffn/linear_0/weight"][0]
    if a.get("nan"):
        name, dims, typ, data = variables[first_ffn]
        variables[first_ffn] = (name, dims, typ, struct.pack("<f", float("nan")) + data[4:])
    if "int8_scale" in a:
        name, dims, typ, data = variables[first_ffn]
        variables[first_ffn] = (name, dims, 1, bytes(dims[0] * dims[1]))
        var(name + "_scale", [dims[0]], 0, struct.pack("<%df" % dims[0], *[float(a["int8_scale"])] * dims[0]))
    if "ffn_rows" in a:
        name, dims, typ, data = variables[first_ffn]
        variables[first_ffn] = (name, [int(a["ffn_rows"]), dims[1]], typ, data)
    if a.get("dup"):
        variables.append(variables[first_ffn])
    for i in range(int(a.get("junk", 0))):
        var("junk/%d" % i, [], 1, b"\0")
        aliases.append(("alias/%d" % i, "junk/%d" % i))
    if "name_suffix" in a:
        var("encoder/unknown" + json.loads('"%s"' % a["name_suffix"]), [], 1, b"\0")

    def s(x):
        x = x.encode("utf-8", "surrogateescape")
        return struct.pack("<H", len(x) + 1) + x + b"\0"

    spec = s("TransformerSpec")
    if a.get("no_nul"):
        spec = spec[:-1] + b"X"
    b = [struct.pack("<I", 6), spec, struct.pack("<I", 7), struct.pack("<I", len(variables))]
    for name, dims, typ, data in variables:
        b += [s(name), bytes([len(dims)]), struct.pack("<%dI" % len(dims), *dims), bytes([typ]),
              struct.pack("<I", len(data)), data]
    b.append(struct.pack("<I", len(aliases)))
    for alias, target in aliases:
        b += [s(alias), s(target)]
    (out / "model.bin").write_bytes(b"".join(b))
    if a.get("txt"):
        (out / "shared_vocabulary.txt").write_bytes(b"".join(t.encode() + b"\n" for t in tokens))
    else:
        (out / "shared_vocabulary.json").write_text(json.dumps(tokens))
    (out / "config.json").write_text(json.dumps({
        "add_source_bos": False, "add_source_eos": True, "bos_token": "<s>", "eos_token": "</s>",
        "unk_token": "<unk>", "decoder_start_token": "<s>", "layer_norm_epsilon": None}))


def npy(dims, payload, descr="<f4", shape_text=None):
    shape = shape_text or ("(%d,)" % dims[0] if len(dims) == 1 else "(" + ", ".join(map(str, dims)) + ")")
    h = ("{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)).encode()
    h += b" " * ((64 - (10 + len(h) + 1) % 64) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + payload


def marian(out, a):
    D, F, V, H = int(a.get("D", 8)), int(a.get("F", 16)), int(a.get("V", 12)), 2
    rnd = random.Random(1)
    out.mkdir(parents=True, exist_ok=True)
    tokens = ["</s>", "<unk>"] + ["w%d" % i for i in range(V - 2)]
    if "pieces" in a:  # a SentencePiece .vocab: its pieces, so that its model cuts text into them
        pieces = [l.split("\t")[0] for l in Path(a["pieces"]).read_text(encoding="utf-8").splitlines()]
        tokens = ["</s>", "<unk>"] + [p for p in pieces if p not in ("<unk>", "<s>", "</s>")]
        V = len(tokens)
    (out / "vocab.yml").write_text("".join("%s: %d\n" % (json.dumps(t), i) for i, t in enumerate(tokens)))
    arrays = {}

    def put(name, dims, ones=False):
        n = 1
        for d in dims:
            n *= d
        values = [1.0] * n if ones else [rnd.uniform(-0.3, 0.3) for _ in range(n)]
        arrays[name] = npy(dims, struct.pack("<%df" % n, *values))

    put("Wemb", (V, D))
    put("decoder_ff_logit_out_b", (1, V))
    for side, blocks in (("encoder", ["self"]), ("decoder", ["self", "context"])):
        for b in blocks:
            p = "%s_l1_%s" % (side, b)
            for w in ("Wq", "Wk", "Wv", "Wo"):
                put("%s_%s" % (p, w), (D, D))
                put("%s_b%s" % (p, w[1]), (1, D))
            put(p + "_Wo_ln_scale", (1, D), ones=True)
            put(p + "_Wo_ln_bias", (1, D))
        p = side + "_l1_ffn"
        put(p + "_W1", (D, F))
        put(p + "_b1", (1, F))
        put(p + "_W2", (F, D))
        put(p + "_b2", (1, D))
        put(p + "_ffn_ln_scale", (1, D), ones=True)
        put(p + "_ffn_ln_bias", (1, D))
    if a.get("nan"):
        arrays["encoder_l1_ffn_W1"] = npy((D, F), struct.pack("<f", float("nan")) + struct.pack("<%df" % (D * F - 1), *[0.0] * (D * F - 1)))
    if a.get("neg_shape"):
        arrays["encoder_l1_ffn_W1"] = npy((D, F), struct.pack("<%df" % (D * F), *[0.0] * (D * F)), shape_text="(-%d, %d)" % (D, F))
    if a.get("empty"):
        arrays["encoder_extra"] = npy((0, D), b"")
    opts = {"type": "transformer", "dim-emb": D, "dim-vocabs": [V, V], "enc-depth": 1, "dec-depth": 1,
            "transformer-heads": H, "transformer-dim-ffn": F, "transformer-ffn-activation": "relu",
            "transformer-preprocess": "", "transformer-postprocess": "dan", "tied-embeddings-all": True}
    yml = "".join("%s: %s\n" % (k, json.dumps(v)) for k, v in opts.items()).encode()
    if "deep" in a:
        yml = b"x: " + b"[" * int(a["deep"]) + b"]" * int(a["deep"]) + b"\n" + yml
    yml += b"\0"
    arrays["special:model.yml"] = npy((len(yml),), yml, descr="|i1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate on purpose
        with zipfile.ZipFile(out / "model.npz", "w", zipfile.ZIP_DEFLATED) as z:
            for name, data in arrays.items():
                z.writestr(name + ".npy", data)
            if a.get("dup"):
                z.writestr("Wemb.npy", arrays["Wemb"])
            for i in range(int(a.get("bomb", 0))):
                n = 16 << 20
                with z.open("zz_%d.npy" % i, "w", force_zip64=True) as f:
                    f.write(npy((n,), b""))
                    for _ in range(16):
                        f.write(bytes(4 << 20))


if __name__ == "__main__":
    kind, out = sys.argv[1], Path(sys.argv[2])
    {"ct2": ct2, "npz": marian}[kind](out, args_of(sys.argv[3:]))
