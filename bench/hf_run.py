#!/usr/bin/env python3
"""One side of bench/hf_peers.sh: translates stdin line by line to stdout
with a Hugging Face MarianMT directory, through Transformers' generate or
through CTranslate2 (a directory its ct2-transformers-converter wrote),
with the search of the other runs: beam 4, no length normalisation, at
most 256 target pieces, batches of 32 sentences sorted by length.

    hf_run.py transformers HF_DIR THREADS [int8]
    hf_run.py ctranslate2 CT2_DIR HF_DIR INTER INTRA

int8 for Transformers: PyTorch's dynamic quantisation of every Linear
(quantize_dynamic, qint8), the int8 PyTorch offers on CPUs.
"""
import sys

lines = [line.rstrip("\n") for line in sys.stdin]
order = sorted(range(len(lines)), key=lambda i: len(lines[i]))
out = [""] * len(lines)
BATCH = 32

if sys.argv[1] == "transformers":
    import torch
    from transformers import MarianMTModel, MarianTokenizer
    torch.set_num_threads(int(sys.argv[3]))
    tok = MarianTokenizer.from_pretrained(sys.argv[2])
    model = MarianMTModel.from_pretrained(sys.argv[2]).eval()
    if len(sys.argv) > 4 and sys.argv[4] == "int8":
        model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    with torch.inference_mode():
        for b in range(0, len(order), BATCH):
            idx = order[b:b + BATCH]
            enc = tok([lines[i] for i in idx], return_tensors="pt", padding=True)
            ids = model.generate(**enc, num_beams=4, length_penalty=0.0, max_new_tokens=256,
                                 do_sample=False)
            for i, text in zip(idx, tok.batch_decode(ids, skip_special_tokens=True)):
                out[i] = text
else:
    import ctranslate2
    import sentencepiece as spm
    import os
    sp = spm.SentencePieceProcessor(model_file=os.path.join(sys.argv[3], "source.spm"))
    tr = ctranslate2.Translator(sys.argv[2], device="cpu", inter_threads=int(sys.argv[4]),
                                intra_threads=int(sys.argv[5]))
    pieces = [sp.encode(lines[i], out_type=str) + ["</s>"] for i in order]
    res = tr.translate_batch(pieces, beam_size=4, length_penalty=0, max_batch_size=BATCH,
                             max_decoding_length=256)
    for i, r in zip(order, res):
        out[i] = sp.decode(r.hypotheses[0])
sys.stdout.write("".join(t + "\n" for t in out))
