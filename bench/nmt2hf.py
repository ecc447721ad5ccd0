#!/usr/bin/env python3
"""Writes a model nmt trained with Marian's architecture (-c
bench/peers-marian.json: post-norm, swish, sinusoidal-concat positions, tied
embeddings, an output bias, a zero start embedding) as a Hugging Face
MarianMT directory, the inverse of nmt convert's reader, so that
bench/hf_peers.sh can give Transformers and CTranslate2's converter a
trained model of a size people translate with.

    python3 bench/nmt2hf.py MODEL.nmt OUT_DIR

Runs where transformers, torch and sentencepiece are installed (a virtual
environment outside this repository). The start embedding: Transformers
starts decoding from the pad token's row, a zero row appended as OPUS-MT's
models have it. Transformers' Marian
layer norms use torch's epsilon 1e-5, not the 1e-6 this architecture
trained with, so its translations may differ from nmt's of MODEL.nmt at a
near tie; against the converted directory nmt and Transformers agree.
"""
import json
import os
import sys
import tempfile

import numpy as np
import torch
from transformers import MarianConfig, MarianMTModel, MarianTokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nmt_file import ModelFile  # noqa: E402


def fail(msg):
    sys.exit("nmt2hf: " + msg)


src, out = sys.argv[1], sys.argv[2]
m = ModelFile(src, fail)
c = m.cfg
want = {"norm": "post", "activation": "swish", "positional": "sinusoidal-concat",
        "tie_embeddings": True, "output_bias": True, "decoder_start": "zero"}
for k, v in want.items():
    if c.get(k) != v:
        fail("%s: %s is %r, not %r (train with -c bench/peers-marian.json)" % (src, k, c.get(k), v))
D, V, F = c["d_model"], c["vocab_size"], c["d_ff"]


def t(name, shape):
    h = m.header[name]
    if h["dtype"] != "F32":
        fail(name + " is not f32: give the model before nmt quantize")
    a = np.frombuffer(m.blob(name), dtype="<f4").reshape(shape)
    return torch.from_numpy(a.copy())


if "vocab/sentencepiece" not in m.header or "vocab/tokens" in m.header:
    fail(src + ": a model of nmt's own SentencePiece vocabulary is needed")
spm_bytes = m.blob("vocab/sentencepiece")
# As OPUS-MT's: <pad> is the last token, a zero row that starts the decoder
# (CTranslate2's converter drops it for its zero start embedding); nmt's own
# pad (id 0, never an input nor an output) keeps its row under another name.
PAD = V
cfg = MarianConfig(vocab_size=V + 1, decoder_vocab_size=V + 1, d_model=D, encoder_layers=c["encoder_layers"],
                   decoder_layers=c["decoder_layers"], encoder_attention_heads=c["heads"],
                   decoder_attention_heads=c["heads"], encoder_ffn_dim=F, decoder_ffn_dim=F,
                   max_position_embeddings=c["max_positions"], activation_function="swish",
                   scale_embedding=c.get("scale_embeddings", True), pad_token_id=PAD,
                   eos_token_id=c["eos_id"], decoder_start_token_id=PAD,
                   share_encoder_decoder_embeddings=True, tie_word_embeddings=True,
                   bad_words_ids=[[PAD]], num_beams=4, max_length=256)
model = MarianMTModel(cfg)
sd = {}
sd["model.shared.weight"] = torch.cat([t("embed/tokens", (V, D)), torch.zeros(1, D)])
sd["final_logits_bias"] = torch.cat([t("decoder/output/bias", (V,)), torch.zeros(1)]).reshape(1, V + 1)


def linear(to, frm, rows, cols, parts=1):
    w, b = t(frm + "/weight", (rows * parts, cols)), t(frm + "/bias", (rows * parts,))
    for i, name in enumerate(to):
        sd[name + ".weight"] = w[i * rows:(i + 1) * rows]
        sd[name + ".bias"] = b[i * rows:(i + 1) * rows]


def norm(to, frm):
    sd[to + ".weight"], sd[to + ".bias"] = t(frm + "/gamma", (D,)), t(frm + "/beta", (D,))


for side in ("encoder", "decoder"):
    for i in range(c[side + "_layers"]):
        frm, to = "%s/layer_%d" % (side, i), "model.%s.layers.%d" % (side, i)
        linear([to + ".self_attn." + p for p in ("q_proj", "k_proj", "v_proj")],
               frm + "/self_attn/qkv", D, D, 3)
        linear([to + ".self_attn.out_proj"], frm + "/self_attn/out", D, D)
        norm(to + ".self_attn_layer_norm", frm + "/ln1")
        if side == "decoder":
            linear([to + ".encoder_attn.q_proj"], frm + "/cross_attn/q", D, D)
            linear([to + ".encoder_attn." + p for p in ("k_proj", "v_proj")],
                   frm + "/cross_attn/kv", D, D, 2)
            linear([to + ".encoder_attn.out_proj"], frm + "/cross_attn/out", D, D)
            norm(to + ".encoder_attn_layer_norm", frm + "/ln2")
        linear([to + ".fc1"], frm + "/ffn/w1", F, D)
        linear([to + ".fc2"], frm + "/ffn/w2", D, F)
        norm(to + ".final_layer_norm", frm + ("/ln3" if side == "decoder" else "/ln2"))
missing, unexpected = model.load_state_dict(sd, strict=False)
missing = [k for k in missing if "embed_positions" not in k and "embed_tokens" not in k
           and k != "lm_head.weight"]
if missing or unexpected:
    fail("weights not mapped: %s %s" % (missing, unexpected))
os.makedirs(out, exist_ok=True)
model.save_pretrained(out)
with tempfile.TemporaryDirectory() as tmp:
    import sentencepiece as spm
    path = os.path.join(tmp, "sp.model")
    open(path, "wb").write(spm_bytes)
    sp = spm.SentencePieceProcessor(model_file=path)
    vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    if len(vocab) != V:
        fail("the SentencePiece model has %d pieces for %d rows" % (len(vocab), V))
    vocab["<nmt_pad>"] = vocab.pop(sp.id_to_piece(c["pad_id"]))
    vocab["<pad>"] = PAD
    with open(os.path.join(tmp, "vocab.json"), "w") as f:
        json.dump(vocab, f, ensure_ascii=False)
    tok = MarianTokenizer(source_spm=path, target_spm=path, vocab=os.path.join(tmp, "vocab.json"),
                          unk_token=sp.id_to_piece(c["unk_id"]), eos_token=sp.id_to_piece(c["eos_id"]),
                          pad_token="<pad>")
    tok.save_pretrained(out)
print("nmt2hf: wrote", out, file=sys.stderr)
