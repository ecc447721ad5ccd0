#!/usr/bin/env python3
"""An independent reference for nmt's golden loss curve, in PyTorch.

It builds the paper's Transformer as nmt does (post-LN, sinusoidal positions,
embeddings tied and scaled by sqrt(d_model), fused QKV projection, label
smoothing, Adam 0.9/0.98/1e-9 with the warm-up schedule) from scratch on
torch tensors, with the same initial weights (a formula of each parameter's
name), the same ten batches and dropout off, trains it for ten steps and
writes the per-step losses. tests/test_train.cpp runs nmt on the same setup
and compares. Nothing here is shared with nmt's code.

    /usr/bin/python3 tests/reference/golden_curve.py > tests/fixtures/golden_curve.json

(PyTorch from Debian: apt-get install python3-torch.)
"""
import json
import math
import sys

import torch

torch.set_num_threads(1)
torch.manual_seed(0)

# transformer-tiny as tests/test_helpers.h's tiny_config(24) has it.
V, D, F, H, DK, DV, LAYERS, EPS_LS, LN_EPS = 24, 16, 32, 4, 4, 4, 2, 0.1, 1e-6
STEPS, WARMUP, LR_SCALE = 10, 4, 0.5
PAD, BOS, EOS = 0, 2, 3


def init_value(name, shape):
    """The formula both sides use: sin of the element index, phase from the name."""
    h = sum(name.encode()) % 97
    n = 1
    for d in shape:
        n *= d
    x = [math.sin(0.37 * i + 1.11 * h) for i in range(n)]
    if name.endswith("/gamma"):
        vals = [1 + 0.1 * v for v in x]
    elif name.endswith("/beta") or name.endswith("/bias"):
        vals = [0.1 * v for v in x]
    else:
        a = 1.4 / math.sqrt(shape[1])
        vals = [a * v for v in x]
    return torch.tensor(vals, dtype=torch.float64).to(torch.float32).reshape(shape)


def linear(p, name, n_in, n_out):
    p[name + "/weight"] = init_value(name + "/weight", (n_out, n_in))
    p[name + "/bias"] = init_value(name + "/bias", (n_out,))


def norm(p, name):
    p[name + "/gamma"] = init_value(name + "/gamma", (D,))
    p[name + "/beta"] = init_value(name + "/beta", (D,))


def build():
    p = {"embed/tokens": init_value("embed/tokens", (V, D))}
    for i in range(LAYERS):
        e = f"encoder/layer_{i}"
        linear(p, e + "/self_attn/qkv", D, 2 * H * DK + H * DV)
        linear(p, e + "/self_attn/out", H * DV, D)
        linear(p, e + "/ffn/w1", D, F)
        linear(p, e + "/ffn/w2", F, D)
        norm(p, e + "/ln1")
        norm(p, e + "/ln2")
    for i in range(LAYERS):
        d = f"decoder/layer_{i}"
        linear(p, d + "/self_attn/qkv", D, 2 * H * DK + H * DV)
        linear(p, d + "/self_attn/out", H * DV, D)
        linear(p, d + "/cross_attn/q", D, H * DK)
        linear(p, d + "/cross_attn/kv", D, H * DK + H * DV)
        linear(p, d + "/cross_attn/out", H * DV, D)
        linear(p, d + "/ffn/w1", D, F)
        linear(p, d + "/ffn/w2", F, D)
        norm(p, d + "/ln1")
        norm(p, d + "/ln2")
        norm(p, d + "/ln3")
    for t in p.values():
        t.requires_grad_(True)
    return p


def positions(n):
    pe = torch.zeros(n, D, dtype=torch.float64)
    for pos in range(n):
        for i in range(0, D, 2):
            angle = pos / math.pow(10000.0, i / D)
            pe[pos, i] = math.sin(angle)
            pe[pos, i + 1] = math.cos(angle)
    return pe.to(torch.float32)


PE = positions(64)


def batch(step):
    """Six sentences of step `step`: ids 4..23, lengths 2..7, target reversed."""
    src, tgt = [], []
    for j in range(6):
        n = 2 + (step * 7 + j * 3) % 6
        s = [4 + (step * 13 + j * 5 + k * 7) % 20 for k in range(n)]
        src.append(s)
        tgt.append(list(reversed(s)))
    S = max(len(s) for s in src) + 1
    T = max(len(t) for t in tgt) + 1
    src_ids = [s + [EOS] + [PAD] * (S - len(s) - 1) for s in src]
    tgt_in = [[BOS] + t + [PAD] * (T - len(t) - 1) for t in tgt]
    tgt_out = [t + [EOS] + [PAD] * (T - len(t) - 1) for t in tgt]
    return torch.tensor(src_ids), torch.tensor(tgt_in), torch.tensor(tgt_out)


def embed(p, ids):
    return p["embed/tokens"][ids] * math.sqrt(D) + PE[: ids.shape[1]]


def attention(p, name, xq, xkv, mask, self_attn):
    B, T, _ = xq.shape
    S = xkv.shape[1]
    if self_attn:
        proj = xq @ p[name + "/qkv/weight"].T + p[name + "/qkv/bias"]
        q, k, v = proj[..., : H * DK], proj[..., H * DK : 2 * H * DK], proj[..., 2 * H * DK :]
    else:
        q = xq @ p[name + "/q/weight"].T + p[name + "/q/bias"]
        kv = xkv @ p[name + "/kv/weight"].T + p[name + "/kv/bias"]
        k, v = kv[..., : H * DK], kv[..., H * DK :]
    q = q.reshape(B, T, H, DK).transpose(1, 2)
    k = k.reshape(B, S, H, DK).transpose(1, 2)
    v = v.reshape(B, S, H, DV).transpose(1, 2)
    scores = q @ k.transpose(-1, -2) / math.sqrt(DK) + mask
    ctx = torch.softmax(scores, dim=-1) @ v
    ctx = ctx.transpose(1, 2).reshape(B, T, H * DV)
    return ctx @ p[name + "/out/weight"].T + p[name + "/out/bias"]


def layer_norm(p, name, x):
    return torch.nn.functional.layer_norm(x, (D,), p[name + "/gamma"], p[name + "/beta"], LN_EPS)


def ffn(p, name, x):
    h = torch.relu(x @ p[name + "/w1/weight"].T + p[name + "/w1/bias"])
    return h @ p[name + "/w2/weight"].T + p[name + "/w2/bias"]


def forward(p, src, tgt_in):
    src_mask = torch.where(src == PAD, -1e9, 0.0)[:, None, None, :]
    T = tgt_in.shape[1]
    causal = torch.triu(torch.full((T, T), -1e9), diagonal=1)[None, None]
    x = embed(p, src)
    for i in range(LAYERS):
        e = f"encoder/layer_{i}"
        h1 = layer_norm(p, e + "/ln1", x + attention(p, e + "/self_attn", x, x, src_mask, True))
        x = layer_norm(p, e + "/ln2", h1 + ffn(p, e + "/ffn", h1))
    enc = x
    y = embed(p, tgt_in)
    for i in range(LAYERS):
        d = f"decoder/layer_{i}"
        h1 = layer_norm(p, d + "/ln1", y + attention(p, d + "/self_attn", y, y, causal, True))
        h2 = layer_norm(p, d + "/ln2", h1 + attention(p, d + "/cross_attn", h1, enc, src_mask, False))
        y = layer_norm(p, d + "/ln3", h2 + ffn(p, d + "/ffn", h2))
    return y @ p["embed/tokens"].T


def loss_per_token(logits, tgt_out):
    logp = torch.log_softmax(logits, dim=-1)
    keep = tgt_out != PAD
    nll = -logp.gather(-1, tgt_out[..., None]).squeeze(-1)
    smooth = -logp.mean(dim=-1)
    per = (1 - EPS_LS) * nll + EPS_LS * smooth
    return per[keep].sum() / keep.sum()


def main():
    p = build()
    opt = torch.optim.Adam(list(p.values()), lr=0.0, betas=(0.9, 0.98), eps=1e-9)
    losses = []
    for step in range(1, STEPS + 1):
        src, tgt_in, tgt_out = batch(step - 1)
        loss = loss_per_token(forward(p, src, tgt_in), tgt_out)
        opt.zero_grad()
        loss.backward()
        lr = LR_SCALE * D ** -0.5 * min(step ** -0.5, step * WARMUP ** -1.5)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        losses.append(loss.item())
    json.dump({"generator": "tests/reference/golden_curve.py, PyTorch " + torch.__version__ +
               " on the CPU, float32", "steps": STEPS, "losses": losses}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
