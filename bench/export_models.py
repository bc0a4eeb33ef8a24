"""Peer-bench models of issue 30: a MobileNetV2 (1x3x64x64), a small causal LM (4 layers,
d_model 128, 32 int64 tokens) and that LM's decode step (one new token, the KV cache of a past
length P as inputs and outputs, P a dynamic axis), exported to ONNX with their inputs as .npy.

Runs with Debian's /usr/bin/python3 and python3-torch (torchvision is not needed: MobileNetV2's
blocks are defined here, as torchvision's mobilenet_v2 at width 1.0). Weights are seeded, so a
re-export gives the same model.  usage: /usr/bin/python3 bench/export_models.py OUTDIR
Writes OUTDIR/{mobilenetv2,causal_lm,decode_step}.onnx, their inputs OUTDIR/*_x.npy (the decode
step's also past_{key,value}_L.npy at P = 31) and decode_step_logits.npy (PyTorch eager).
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn

OUT = sys.argv[1] if len(sys.argv) > 1 else "."


def conv_bn(cin, cout, k, stride, groups=1, act=True):
    layers = [nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    if act:
        layers.append(nn.ReLU6(inplace=False))
    return nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    def __init__(s, cin, cout, stride, expand):
        super().__init__()
        hid = cin * expand
        s.res = stride == 1 and cin == cout
        layers = [] if expand == 1 else [conv_bn(cin, hid, 1, 1)]
        layers += [conv_bn(hid, hid, 3, stride, groups=hid), conv_bn(hid, cout, 1, 1, act=False)]
        s.body = nn.Sequential(*layers)

    def forward(s, x):
        return x + s.body(x) if s.res else s.body(x)


class MobileNetV2(nn.Module):
    CFG = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]

    def __init__(s, classes=1000):
        super().__init__()
        layers, cin = [conv_bn(3, 32, 3, 2)], 32
        for t, c, n, st in s.CFG:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, st if i == 0 else 1, t))
                cin = c
        layers.append(conv_bn(cin, 1280, 1, 1))
        s.features = nn.Sequential(*layers)
        s.fc = nn.Linear(1280, classes)
        for m in s.modules():  # BatchNorm statistics that are not the identity, so folding them matters
            if isinstance(m, nn.BatchNorm2d):
                nn.init.uniform_(m.weight, 0.5, 1.5); nn.init.uniform_(m.bias, -0.1, 0.1)
                m.running_mean.uniform_(-0.1, 0.1); m.running_var.uniform_(0.5, 1.5)

    def forward(s, x):
        return s.fc(torch.flatten(s.features(x).mean((2, 3)), 1))


class Block(nn.Module):
    def __init__(s, d, heads, ff, seq):
        super().__init__()
        s.h = heads
        s.ln1, s.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        s.qkv, s.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        s.fc1, s.fc2 = nn.Linear(d, ff), nn.Linear(ff, d)
        s.register_buffer("mask", torch.full((seq, seq), float("-inf")).triu(1))

    def forward(s, x):
        b, t, d = x.shape
        q, k, v = s.qkv(s.ln1(x)).split(d, dim=2)
        q, k, v = (z.reshape(b, t, s.h, d // s.h).transpose(1, 2) for z in (q, k, v))
        att = torch.softmax(q @ k.transpose(2, 3) * (d // s.h) ** -0.5 + s.mask[:t, :t], dim=-1)
        x = x + s.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + s.fc2(torch.nn.functional.gelu(s.fc1(s.ln2(x))))

    def step(s, x, pk, pv):
        """One new position x [b, 1, d] over the cache pk, pv [b, h, P, d/h]: no mask (the new
        token sees every past one); returns x and the cache with the new key and value."""
        b, _, d = x.shape
        q, k, v = s.qkv(s.ln1(x)).split(d, dim=2)
        q, k, v = (z.reshape(b, 1, s.h, d // s.h).transpose(1, 2) for z in (q, k, v))
        k, v = torch.cat([pk, k], dim=2), torch.cat([pv, v], dim=2)
        att = torch.softmax(q @ k.transpose(2, 3) * (d // s.h) ** -0.5, dim=-1)
        x = x + s.proj((att @ v).transpose(1, 2).reshape(b, 1, d))
        return x + s.fc2(torch.nn.functional.gelu(s.fc1(s.ln2(x)))), k, v


class CausalLM(nn.Module):
    def __init__(s, vocab=1024, d=128, layers=4, heads=4, ff=512, seq=32):
        super().__init__()
        s.tok, s.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        s.blocks = nn.Sequential(*[Block(d, heads, ff, seq) for _ in range(layers)])
        s.ln, s.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(s, ids):
        x = s.tok(ids) + s.pos(torch.arange(ids.shape[1]))
        return s.head(s.ln(s.blocks(x)))


class DecodeStep(nn.Module):
    """CausalLM's decode step: token ids [1, 1] at position P, then past_key_L, past_value_L
    [1, heads, P, d/heads] per layer; returns logits [1, 1, vocab] and present_key_L,
    present_value_L [1, heads, P + 1, d/heads]."""

    def __init__(s, lm):
        super().__init__()
        s.lm = lm

    def forward(s, ids, *past):
        x = s.lm.tok(ids) + s.lm.pos(torch.arange(past[0].shape[2], past[0].shape[2] + 1))
        present = []
        for i, blk in enumerate(s.lm.blocks):
            x, k, v = blk.step(x, past[2 * i], past[2 * i + 1])
            present += [k, v]
        return (s.lm.head(s.lm.ln(x)), *present)


def past_cache(lm, ids):
    """The keys and values of every layer for the tokens ids [1, P], as the full model computes them."""
    cache = []
    with torch.no_grad():
        x = lm.tok(ids) + lm.pos(torch.arange(ids.shape[1]))
        for blk in lm.blocks:
            b, t, d = x.shape
            _, k, v = blk.qkv(blk.ln1(x)).split(d, dim=2)
            cache += [z.reshape(b, t, blk.h, d // blk.h).transpose(1, 2).contiguous() for z in (k, v)]
            x = blk(x)
    return cache


def export_decode(lm, ids):
    """The decode step at the last of ids' positions, its cache from the others; checks that its
    logits are the full model's last row before writing them as the expected output."""
    lm.eval()
    step, past, tok = DecodeStep(lm).eval(), past_cache(lm, ids[:, :-1]), ids[:, -1:]
    layers = len(lm.blocks)
    names = [f"past_{kv}_{i}" for i in range(layers) for kv in ("key", "value")]
    outs = ["logits"] + [f"present_{kv}_{i}" for i in range(layers) for kv in ("key", "value")]
    with torch.no_grad():
        got = step(tok, *past)
        full = lm(ids)[:, -1:]
        err = (got[0] - full).abs().max().item()
        if err > 1e-4:
            sys.exit(f"export_models: decode step differs from the full model by {err}")
        axes = {n: {2: "P"} for n in names}
        axes.update({n: {2: "P1"} for n in outs[1:]})
        torch.onnx.export(step, (tok, *past), os.path.join(OUT, "decode_step.onnx"), opset_version=17,
                          input_names=["x"] + names, output_names=outs, dynamic_axes=axes,
                          do_constant_folding=True)
    np.save(os.path.join(OUT, "decode_step_x.npy"), tok.numpy())
    for n, t in zip(names, past):
        np.save(os.path.join(OUT, f"decode_step_{n}.npy"), t.numpy())
    np.save(os.path.join(OUT, "decode_step_logits.npy"), got[0].numpy())


def export(name, model, x):
    model.eval()
    with torch.no_grad():
        torch.onnx.export(model, (x,), os.path.join(OUT, name + ".onnx"), opset_version=17,
                          input_names=["x"], output_names=["y"], do_constant_folding=True)
    np.save(os.path.join(OUT, name + "_x.npy"), x.numpy())


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(30)
    export("mobilenetv2", MobileNetV2(), torch.rand(1, 3, 64, 64))
    lm, ids = CausalLM(), torch.randint(0, 1024, (1, 32), dtype=torch.int64)
    export("causal_lm", lm, ids)
    export_decode(lm, ids)
