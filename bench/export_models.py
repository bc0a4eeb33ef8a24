"""Peer-bench models of issue 30: a MobileNetV2 (1x3x64x64) and a small causal LM (4 layers,
d_model 128, 32 int64 tokens), exported to ONNX with their inputs as .npy.

Runs with Debian's /usr/bin/python3 and python3-torch (torchvision is not needed: MobileNetV2's
blocks are defined here, as torchvision's mobilenet_v2 at width 1.0). Weights are seeded, so a
re-export gives the same model.  usage: /usr/bin/python3 bench/export_models.py OUTDIR
Writes OUTDIR/{mobilenetv2,causal_lm}.onnx and OUTDIR/{mobilenetv2,causal_lm}_x.npy.
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


class CausalLM(nn.Module):
    def __init__(s, vocab=1024, d=128, layers=4, heads=4, ff=512, seq=32):
        super().__init__()
        s.tok, s.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        s.blocks = nn.Sequential(*[Block(d, heads, ff, seq) for _ in range(layers)])
        s.ln, s.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(s, ids):
        x = s.tok(ids) + s.pos(torch.arange(ids.shape[1]))
        return s.head(s.ln(s.blocks(x)))


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
    export("causal_lm", CausalLM(), torch.randint(0, 1024, (1, 32), dtype=torch.int64))
