"""PyTorch references that ../shared/torch-models does not hold, made with the same code.

Runs export.py's model definitions in export.py's order under its seed, so the encoder gets
exactly the weights of the shared export (checked below against the shared file; branchy's one
Linear layer is loaded from the shared export), then:
  - encoder_dynamic/: the encoder exported with a symbolic batch and sequence (dynamic axes
    B, S), with PyTorch eager outputs for the shared input and for a [3, 7, 32] input;
  - branchy_then/ (or branchy_else/): an input for which the branchy model takes the other
    branch of its `if` than the shared input does, with PyTorch's eager output;
  - tiny_bert_dynamic/ and rnn_dynamic/ (a bidirectional LSTM and a GRU): symbolic batch and
    sequence, PyTorch eager outputs at two shapes.
Needs Debian's python3-torch and python3-onnx; run with /usr/bin/python3 from this folder:
    /usr/bin/python3 make_models.py ../../../shared/torch-models/export.py
"""
import importlib.util, os, sys
import numpy as np
import torch

spec = importlib.util.spec_from_file_location("export", sys.argv[1])
ex = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ex)  # seeds torch with 1234; __main__ block does not run
SHARED = os.path.dirname(os.path.abspath(sys.argv[1]))
HERE = os.path.dirname(os.path.abspath(__file__))
ex.OUT = os.path.join(HERE, "_scratch")


def same_as_shared(name, out_dir):
    import onnx, onnx.numpy_helper
    a = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(os.path.join(out_dir, "model.onnx")).graph.initializer}
    b = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(os.path.join(SHARED, name, "model.onnx")).graph.initializer}
    assert sorted(a) == sorted(b), name
    for k in a:
        assert np.array_equal(a[k], b[k]), (name, k)
    ya, yb = np.load(os.path.join(out_dir, "output_y.npy")), np.load(os.path.join(SHARED, name, "output_y.npy"))
    assert np.allclose(ya, yb, rtol=1e-5, atol=1e-6), (name, np.abs(ya - yb).max())  # same weights; CPU kernels may differ in the last bits


# export.py's sequence, step by step, so the random stream matches
ex.export("tiny_mlp", ex.TinyMLP(), (torch.randn(4, 64),), dyn={"x": {0: "batch"}, "y": {0: "batch"}})
ex.export("convnet", ex.ConvNet(), (torch.randn(2, 1, 28, 28),), dyn={"x": {0: "batch"}, "y": {0: "batch"}})
enc = ex.Encoder()
x_enc = torch.randn(2, 10, 32)
ex.export("encoder", enc, (x_enc,), opset=17)
same_as_shared("encoder", os.path.join(ex.OUT, "encoder"))
# branchy: one Linear(16, 16); its weights are taken from the shared export itself
import onnx, onnx.numpy_helper
br = ex.Branchy()
inits = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(os.path.join(SHARED, "branchy", "model.onnx")).graph.initializer}
with torch.no_grad():
    br.l.weight.copy_(torch.from_numpy(inits["l.weight"].copy()))
    br.l.bias.copy_(torch.from_numpy(inits["l.bias"].copy()))
br.eval()
x_br = torch.from_numpy(np.load(os.path.join(SHARED, "branchy", "input_x.npy")))
assert np.allclose(br(x_br).detach().numpy(), np.load(os.path.join(SHARED, "branchy", "output_y.npy")), rtol=1e-5, atol=1e-6)

# encoder with a symbolic batch and sequence
d = os.path.join(HERE, "encoder_dynamic")
os.makedirs(d, exist_ok=True)
enc.eval()
torch.onnx.export(enc, (x_enc,), os.path.join(d, "model.onnx"), opset_version=17, input_names=["x"],
                  output_names=["y"], dynamic_axes={"x": {0: "B", 1: "S"}, "y": {0: "B", 1: "S"}})
np.save(os.path.join(d, "input_x.npy"), x_enc.numpy())
np.save(os.path.join(d, "output_y.npy"), enc(x_enc).detach().numpy())
x2 = torch.randn(3, 7, 32)
np.save(os.path.join(d, "input_x2.npy"), x2.numpy())
np.save(os.path.join(d, "output_y2.npy"), enc(x2).detach().numpy())

# the other branch of branchy (the folder is named after the branch its input takes)
taken = bool(br.l(x_br).mean() > 0.0)
d = os.path.join(HERE, "branchy_else" if taken else "branchy_then")
os.makedirs(d, exist_ok=True)
for scale in (-1.0, -2.0, 2.0, -4.0, 4.0):
    x = x_br * scale + (1.0 if scale > 0 else -1.0) * (1 if taken else -1) * -1.0
    if bool(br.l(x).mean() > 0.0) != taken:
        break
else:
    raise SystemExit("no input found for the other branch")
np.save(os.path.join(d, "input_x.npy"), x.numpy())
np.save(os.path.join(d, "output_y.npy"), br(x).detach().numpy())
print("shared input takes the", "then" if taken else "else", "branch; wrote", os.path.basename(d))

# a tiny BERT-like block with a symbolic batch and sequence: token and position embeddings
# (Gather, Range over the sequence length), one attention with an additive padding mask made
# from an i64 mask (Cast, Sub, Mul), LayerNorm, and padded positions zeroed by Where
import torch.nn as nn


class TinyBert(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb = nn.Embedding(100, 32); s.pos = nn.Embedding(64, 32)
        s.qkv = nn.Linear(32, 96); s.out = nn.Linear(32, 32); s.ln = nn.LayerNorm(32)
    def forward(s, ids, mask):
        B, S = ids.shape
        pos = torch.arange(S, device=ids.device).unsqueeze(0)
        x = s.emb(ids) + s.pos(pos)
        q, k, v = s.qkv(x).chunk(3, dim=-1)
        sc = q @ k.transpose(1, 2) / 32 ** 0.5
        sc = sc + (1.0 - mask[:, None, :].float()) * -10000.0
        a = torch.softmax(sc, dim=-1) @ v
        y = s.ln(x + s.out(a))
        return torch.where(mask[:, :, None] > 0, y, torch.zeros_like(y))


def tiny_bert(out_dir):
    torch.manual_seed(2)
    m = TinyBert().eval()
    os.makedirs(out_dir, exist_ok=True)
    ids = torch.randint(0, 100, (2, 9))
    mask = torch.ones(2, 9, dtype=torch.int64)
    mask[1, 6:] = 0
    torch.onnx.export(m, (ids, mask), os.path.join(out_dir, "model.onnx"), input_names=["ids", "mask"], output_names=["y"],
                      dynamic_axes={"ids": {0: "B", 1: "S"}, "mask": {0: "B", 1: "S"}, "y": {0: "B", 1: "S"}},
                      opset_version=17)
    for suffix, (b, s) in (("", (2, 9)), ("2", (3, 20))):
        ids = torch.randint(0, 100, (b, s))
        mask = torch.ones(b, s, dtype=torch.int64)
        mask[-1, s // 2:] = 0
        np.save(os.path.join(out_dir, f"input_ids{suffix}.npy"), ids.numpy())
        np.save(os.path.join(out_dir, f"input_mask{suffix}.npy"), mask.numpy())
        with torch.no_grad():
            np.save(os.path.join(out_dir, f"output_y{suffix}.npy"), m(ids, mask).numpy())


# recurrent layers with a symbolic batch and sequence: a bidirectional LSTM, then a GRU over its
# outputs (ONNX LSTM and GRU with run-time sequence length and batch)
class Recurrent(nn.Module):
    def __init__(s):
        super().__init__()
        s.lstm = nn.LSTM(8, 12, batch_first=True, bidirectional=True)
        s.gru = nn.GRU(24, 10, batch_first=True)
    def forward(s, x):
        return s.gru(s.lstm(x)[0])[0]


def rnn_dynamic(out_dir):
    torch.manual_seed(3)
    m = Recurrent().eval()
    os.makedirs(out_dir, exist_ok=True)
    torch.onnx.export(m, (torch.randn(2, 5, 8),), os.path.join(out_dir, "model.onnx"), input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "B", 1: "S"}, "y": {0: "B", 1: "S"}}, opset_version=17)
    for suffix, (b, s) in (("", (2, 5)), ("2", (3, 17))):
        x = torch.randn(b, s, 8)
        np.save(os.path.join(out_dir, f"input_x{suffix}.npy"), x.numpy())
        with torch.no_grad():
            np.save(os.path.join(out_dir, f"output_y{suffix}.npy"), m(x).numpy())


if __name__ == "__main__":
    tiny_bert(os.path.join(HERE, "tiny_bert_dynamic"))
    print("wrote tiny_bert_dynamic")
    rnn_dynamic(os.path.join(HERE, "rnn_dynamic"))
    print("wrote rnn_dynamic")
