#!/usr/bin/env python3
"""Fills the weight constants of the hand-written corpus models.

Each corpus/*.ir.in file is a hand-written model in which a constant may be written as
`= random(SEED, SCALE)`; this script replaces that with deterministic pseudo-random f32 data
(uniform in [-SCALE, SCALE]) encoded as base64, and writes corpus/NAME.ir. Python stdlib only,
so the output is the same on every machine. Re-run after editing a .ir.in file:
    python3 corpus/gen_weights.py
"""
import base64, glob, os, random, re, struct

HERE = os.path.dirname(os.path.abspath(__file__))
CONST = re.compile(r'const (%\w+): f32\[([^\]]*)\] = random\((\d+), ([0-9.e-]+)\)')

def fill(m):
    name, dims, seed, scale = m.group(1), m.group(2), int(m.group(3)), float(m.group(4))
    n = 1
    for d in dims.split(','):
        n *= int(d)
    rng = random.Random(seed)
    data = struct.pack('<%df' % n, *[rng.uniform(-scale, scale) for _ in range(n)])
    if n <= 16:
        vals = struct.unpack('<%df' % n, data)
        return 'const %s: f32[%s] = [%s]' % (name, dims, ', '.join(repr(float(v)) for v in vals))
    return 'const %s: f32[%s] = base64 "%s"' % (name, dims, base64.b64encode(data).decode())

for src in sorted(glob.glob(os.path.join(HERE, '*.ir.in'))):
    out = src[:-3]
    with open(src) as f:
        text = f.read()
    with open(out, 'w') as f:
        f.write(CONST.sub(fill, text))
    print('wrote', os.path.relpath(out))
