"""A 4-layer causal decoder stack (pre-norm GPT blocks: LayerNorm, causal self-attention with 4
heads of 16, LayerNorm, a GELU MLP of 256; d_model 64) exported from PyTorch to ONNX with
dynamic batch and sequence axes (B, S) and no bounds, for bench/run_symbolic_bench.sh. The
causal mask is built from the sequence length inside the model (arange, comparison), so one
ONNX file serves every length. Writes OUT/model.onnx, and OUT/input_x.npy with OUT/output_y.npy
(PyTorch eager) at [2, 9, 64].
Needs Debian's python3-torch:  /usr/bin/python3 bench/decoder_stack.py OUT
"""
import math, os, sys
import numpy as np
import torch, torch.nn as nn, torch.nn.functional as F

D, H, FF, LAYERS = 64, 4, 256, 4


class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.ln1 = nn.LayerNorm(D); s.qkv = nn.Linear(D, 3 * D); s.proj = nn.Linear(D, D)
        s.ln2 = nn.LayerNorm(D); s.fc1 = nn.Linear(D, FF); s.fc2 = nn.Linear(FF, D)

    def forward(s, x, mask):
        B, S, _ = x.shape
        q, k, v = s.qkv(s.ln1(x)).chunk(3, dim=-1)
        q = q.reshape(B, S, H, D // H).transpose(1, 2)
        k = k.reshape(B, S, H, D // H).transpose(1, 2)
        v = v.reshape(B, S, H, D // H).transpose(1, 2)
        a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(D // H) + mask, dim=-1) @ v
        x = x + s.proj(a.transpose(1, 2).reshape(B, S, D))
        return x + s.fc2(F.gelu(s.fc1(s.ln2(x))))


class Decoder(nn.Module):
    def __init__(s):
        super().__init__()
        s.blocks = nn.ModuleList([Block() for _ in range(LAYERS)]); s.ln = nn.LayerNorm(D)

    def forward(s, x):
        i = torch.arange(x.shape[1])
        mask = (i[None, :] > i[:, None]).float() * -1e9  # keys after the query are masked
        for b in s.blocks:
            x = b(x, mask)
        return s.ln(x)


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(5)
    m = Decoder().eval()
    x = torch.randn(2, 9, D)
    torch.onnx.export(m, (x,), os.path.join(out, "model.onnx"), input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "B", 1: "S"}, "y": {0: "B", 1: "S"}}, opset_version=17)
    with torch.no_grad():
        np.save(os.path.join(out, "input_x.npy"), x.numpy())
        np.save(os.path.join(out, "output_y.npy"), m(x).numpy())
    print("wrote", os.path.join(out, "model.onnx"))
