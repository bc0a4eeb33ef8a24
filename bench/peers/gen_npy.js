#!/usr/bin/env node
// Writes a deterministic f32 .npy (uniform [0, 1), fixed-seed LCG) of the given shape.
// usage: node gen_npy.js 1x3x224x224 OUT.npy [SEED]
'use strict';
const fs = require('fs');
const [shapeArg, out, seedArg] = process.argv.slice(2);
if (!shapeArg || !out) { console.error('usage: gen_npy.js DIMxDIM... OUT.npy [SEED]'); process.exit(2); }
const shape = shapeArg.split('x').map(Number);
const n = shape.reduce((a, b) => a * b, 1);
const data = new Float32Array(n);
let x = BigInt(seedArg || 1234) ^ 0x9E3779B97F4A7C15n;
const M = (1n << 64n) - 1n;
for (let i = 0; i < n; i++) {
  x = (x * 6364136223846793005n + 1442695040888963407n) & M;
  data[i] = Number(x >> 40n) / 16777216;
}
let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${shape.join(', ')}${shape.length === 1 ? ',' : ''}), }`;
header += ' '.repeat(63 - ((10 + header.length) % 64)) + '\n';  // total header multiple of 64
const pre = Buffer.alloc(10);
pre.write('\x93NUMPY', 0, 'latin1'); pre[6] = 1; pre[7] = 0; pre.writeUInt16LE(header.length, 8);
fs.writeFileSync(out, Buffer.concat([pre, Buffer.from(header, 'latin1'), Buffer.from(data.buffer)]));
