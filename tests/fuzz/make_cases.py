#!/usr/bin/python3
"""Writes the cases of issue 29 into tests/fuzz/corpus/<reader>/ (issue-*), beside the mutants a
campaign kept: the replay test (tests/test_fuzz_replay.c) runs them all through the readers.

usage: tests/fuzz/make_cases.py SEED_DIR
  SEED_DIR holds seed.irx and seed.manifest, written by the .irx harness when
  IRTOOL_FUZZ_IRX_SEED_OUT=SEED_DIR is set (tests/fuzz/campaign.sh does it).
.irx cases that are manifests are packed by the harness with the seed's sections; whole-file
cases are the seed changed (checksum left as it was).
"""
import os, sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, 'tests', 'fuzz', 'corpus')


def put(reader, name, data):
    d = os.path.join(OUT, reader)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, 'issue-' + name), 'wb') as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def main():
    seed_dir = sys.argv[1]
    irx = open(os.path.join(seed_dir, 'seed.irx'), 'rb').read()
    man = open(os.path.join(seed_dir, 'seed.manifest'), 'rb').read().decode()
    # item 4: containers nested 2000 deep (an 8 KB file), expressions and regions past their limits
    put('ir', 'seq-opt-2000', 'graph @g(%x: ' + 'opt<seq<' * 1000 + 'f32[1]' + '>>' * 1000 + ') {\n  return %x\n}\n')
    put('ir', 'expr-parens-5000', 'graph @g(%x: f32[' + '(' * 5000 + '1' + ')' * 5000 + ']) {\n  return %x\n}\n')
    put('ir', 'regions-200', 'graph @g(%p: bool[], %x: f32[1]) {\n' +
        ''.join('%%r%d = If(%%p) : f32[1] {\nthen_branch() {\n' % i for i in range(200)))
    # items 5, 6: external weights out of the folder (refused before any file is opened)
    put('ir', 'external-escape', 'graph @g(%x: f32[4]) {\n  const %w: f32[4] = external "../../etc/passwd" offset 0\n'
        '  %y = Add(%x, %w) : f32[4]\n  return %y\n}\n')
    put('ir', 'external-absolute', 'graph @g(%x: f32[4]) {\n  const %w: f32[4] = external "/etc/passwd" offset 0\n'
        '  %y = Add(%x, %w) : f32[4]\n  return %y\n}\n')
    # items 2, 3 on .irx: manifests (the harness packs them with the seed's sections)
    lines = man.splitlines(keepends=True)
    def without(prefix):
        return ''.join(l for l in lines if not l.startswith(prefix))
    def replace(old, new):
        assert old in man, old
        return man.replace(old, new, 1)
    out0 = next(l for l in lines if l.startswith('output 0 '))
    f = out0.split()
    put('irx', 'const-line-removed', without('const 2 '))
    put('irx', 'dtype-size-0', replace('dtype 2 f32 4', 'dtype 2 f32 0'))
    put('irx', 'output-dim-0', replace(out0, ' '.join(f[:5] + ['0'] + f[6:]) + '\n'))
    put('irx', 'output-dims-larger', replace(out0, ' '.join(f[:5] + ['20000'] + f[6:]) + '\n'))
    put('irx', 'output-rank-0', replace(out0, ' '.join(f[:4] + ['0', f[-1]]) + '\n'))
    put('irx', 'output-slot-unheld', replace(out0, ' '.join(f[:-1] + ['1']) + '\n'))
    put('irx', 'slots-huge', replace('slots ', 'slots 4294967295\nx '))
    put('irx', 'workspace-huge', replace('workspace ', 'workspace 18446744073709551615\nx '))
    put('irx', 'kernels-off', replace('kernels ', 'kernels 9\nx '))
    put('irx', 'counts-removed', without('consts '))
    put('irx', 'ws-out-of-workspace', replace('ws 4 0 32', 'ws 4 0 999999'))
    put('irx', 'symbols-without-slot', man + 'symbol 1 N 1 8 1\ninsym 0 0 1\n')
    put('irx', 'batch-bad', man + 'batch B 4 2 1\nbatched output 0\n')
    # whole files: the seed cut short, its header changed, one byte of each section changed
    put('irx', 'truncated-header', irx[:90])
    put('irx', 'truncated-code', irx[:len(irx) // 2])
    def sec(i):
        o = int.from_bytes(irx[16 + 16 * i:24 + 16 * i], 'little')
        n = int.from_bytes(irx[24 + 16 * i:32 + 16 * i], 'little')
        return o, n
    for i, name in enumerate(['manifest', 'constants', 'code']):
        o, n = sec(i)
        b = bytearray(irx)
        b[o + n // 2] ^= 0x20
        put('irx', 'byte-changed-' + name, bytes(b))
    b = bytearray(irx)
    b[12] = 80  # the old header size
    put('irx', 'header-size', bytes(b))
    b = bytearray(irx)
    o, n = sec(2)
    b[o + 8:o + n] = irx[o:o + n - 8]  # code shifted by 8 bytes (crashed inside dlopen)
    put('irx', 'code-shifted', bytes(b))


if __name__ == '__main__':
    main()
