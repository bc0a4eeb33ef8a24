#!/usr/bin/python3
"""Deterministic file mutants for a reader's campaign (tests/fuzz/campaign.sh): COUNT files in
OUT_DIR, each a seed from SEED_DIR with 1-4 mutations: bits flipped, bytes set to edge values,
ranges deleted, duplicated or inserted, the file cut short, and for text (.ir, manifests) lines
dropped, doubled or swapped and numbers replaced by edge values (0, -1, 2^31, 2^63 - 1, ...).

usage: tests/fuzz/mutate.py SEED_DIR OUT_DIR COUNT [RNG_SEED]
"""
import os, random, re, sys

EDGE_BYTES = [0x00, 0xff, 0x7f, 0x80, 0x01, 0x20, 0x0a, 0x3c, 0x3e, 0x25]
EDGE_NUMS = ['0', '-1', '1', '2', '65', '255', '4096', '2147483647', '2147483648', '4294967295', '4294967296',
             '9223372036854775807', '18446744073709551615', '-9223372036854775808', '1099511627776', '99999999999999999999']
NUM = re.compile(rb'-?\d+')


def mutate_bytes(r, b):
    k = r.randrange(7)
    n = len(b)
    if n == 0:
        return bytearray(r.randbytes(r.randrange(1, 16)))
    i = r.randrange(n)
    if k == 0:
        b[i] ^= 1 << r.randrange(8)
    elif k == 1:
        b[i] = r.choice(EDGE_BYTES)
    elif k == 2:
        del b[i:i + r.randrange(1, 64)]
    elif k == 3:
        j = r.randrange(n)
        b[j:j] = b[i:i + r.randrange(1, 64)]
    elif k == 4:
        b[i:i] = r.randbytes(r.randrange(1, 16))
    elif k == 5:
        del b[r.randrange(n):]
    else:  # a little-endian field set to an edge value
        w = r.choice([2, 4, 8])
        v = r.choice([0, 1, 0x7f, 0xff, 0x8000, 0xffff, 0x7fffffff, 0xffffffff, 1 << 40, (1 << 63) - 1, (1 << 64) - 1])
        b[i:i + w] = (v & ((1 << (8 * w)) - 1)).to_bytes(w, 'little')
    return b


def mutate_text(r, b):
    lines = bytes(b).split(b'\n')
    k = r.randrange(5)
    if k == 0 and len(lines) > 1:
        del lines[r.randrange(len(lines))]
    elif k == 1:
        i = r.randrange(len(lines))
        lines.insert(i, lines[i])
    elif k == 2 and len(lines) > 1:
        i, j = r.randrange(len(lines)), r.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    else:
        nums = [(i, m) for i, l in enumerate(lines) for m in NUM.finditer(l)]
        if nums:
            i, m = r.choice(nums)
            l = lines[i]
            lines[i] = l[:m.start()] + r.choice(EDGE_NUMS).encode() + l[m.end():]
    return bytearray(b'\n'.join(lines))


def is_text(b):
    return len(b) > 0 and all(c in b'\t\n\r' or 32 <= c < 127 for c in b[:512])


def main():
    seed_dir, out_dir, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    r = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 1)
    seeds = sorted(f for f in os.listdir(seed_dir) if not f.startswith('.'))
    data = [open(os.path.join(seed_dir, f), 'rb').read() for f in seeds]
    os.makedirs(out_dir, exist_ok=True)
    for n in range(count):
        k = n % len(seeds)
        b = bytearray(data[k])
        text = is_text(b)
        for _ in range(r.randrange(1, 5)):
            b = mutate_text(r, b) if text and r.random() < 0.6 else mutate_bytes(r, b)
        with open(os.path.join(out_dir, '%05d-%s' % (n, seeds[k])), 'wb') as f:
            f.write(b)


if __name__ == '__main__':
    main()
