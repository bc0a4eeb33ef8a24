#!/usr/bin/env node
// onnxruntime (CPU) peer for irtool bench: in-process, after warm-up, intra-op threads as asked.
// usage: node ort_bench.js MODEL.onnx [--input NAME=FILE.npy | FILE.npy]... [--iterations N] [--warmup W]
//        [--threads T] (intraOpNumThreads, default 1; inter-op stays 1, sequential execution)
// prints one JSON line: {"peer":"onnxruntime","median_ms":...,"min_ms":...,"p90_ms":...}
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');

// Minimal .npy reader (format 1.x/2.x, little-endian, C order).
function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${file}: not a .npy file`);
  const major = buf[6];
  const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const hstart = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', hstart, hstart + hlen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${file}: Fortran order not supported`);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map(s => s.trim()).filter(s => s).map(Number);
  const types = {
    '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array], '<i8': ['int64', BigInt64Array],
    '<i4': ['int32', Int32Array], '|u1': ['uint8', Uint8Array], '|i1': ['int8', Int8Array], '|b1': ['bool', Uint8Array],
  };
  if (!types[descr]) throw new Error(`${file}: dtype ${descr} not supported`);
  const [dtype, Arr] = types[descr];
  const off = hstart + hlen, n = shape.reduce((a, b) => a * b, 1);
  const data = new Arr(n);
  new Uint8Array(data.buffer).set(buf.subarray(off, off + n * Arr.BYTES_PER_ELEMENT));
  return new ort.Tensor(dtype, dtype === 'bool' ? Uint8Array.from(data) : data, shape);
}

async function main() {
  const argv = process.argv.slice(2);
  let model = null, iterations = 20, warmup = 3, threads = 1;
  const specs = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--input' || a === '-i') specs.push(argv[++i]);
    else if (a === '--iterations' || a === '-n') iterations = parseInt(argv[++i], 10);
    else if (a === '--warmup') warmup = parseInt(argv[++i], 10);
    else if (a === '--threads') threads = parseInt(argv[++i], 10);
    else if (a.startsWith('-')) throw new Error(`unknown option ${a}`);
    else model = a;
  }
  if (!model) throw new Error('missing MODEL.onnx');
  if (!(threads >= 1)) throw new Error('--threads needs a positive count');
  const sess = await ort.InferenceSession.create(model, {
    intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all', executionProviders: ['cpu'],
  });
  const feeds = {};
  let next = 0;
  for (const s of specs) {
    const eq = s.indexOf('=');
    let name, file;
    if (eq > 0 && sess.inputNames.includes(s.slice(0, eq))) { name = s.slice(0, eq); file = s.slice(eq + 1); }
    else { while (next < sess.inputNames.length && feeds[sess.inputNames[next]]) next++; name = sess.inputNames[next]; file = s; }
    feeds[name] = readNpy(file);
  }
  for (const n of sess.inputNames) if (!feeds[n]) throw new Error(`input ${n} not given`);
  const times = [];
  for (let it = -warmup; it < iterations; it++) {
    const t = process.hrtime.bigint();
    await sess.run(feeds);
    const ms = Number(process.hrtime.bigint() - t) / 1e6;
    if (it >= 0) times.push(ms);
  }
  times.sort((a, b) => a - b);
  const p90 = Math.round((iterations - 1) * 0.9);
  console.log(JSON.stringify({
    peer: 'onnxruntime', version: require('onnxruntime-node/package.json').version, threads, iterations, warmup,
    median_ms: +times[Math.floor(iterations / 2)].toFixed(3), min_ms: +times[0].toFixed(3), p90_ms: +times[p90].toFixed(3),
    peak_rss_kb: Math.round(process.resourceUsage().maxRSS),
  }));
}
main().catch(e => { console.error(`ort_bench: ${e.message}`); process.exit(1); });
