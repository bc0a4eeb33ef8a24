#!/usr/bin/python3
"""Differential fuzzing of the LLVM backend: random graphs (gen.py) run by the reference
interpreter, by `irtool run --backend llvm` and as compiled artifacts, outputs compared (rtol 1e-4,
atol 1e-5; f16 1e-2/1e-3; NaN equals NaN). Not part of CI (minutes per thousand graphs).

Usage: /usr/bin/python3 tests/fuzz/backends/run.py IRTOOL FIRST_SEED COUNT [WORK_DIR]
One line per seed in WORK_DIR/log_FIRST_SEED.txt: ok, unsupported (a clean refusal),
interp_fail (a generator slip) or BUG with the differences; failing cases stay in
WORK_DIR/cases/SEED (g.ir and its .npy inputs) for minimizing.
"""
import sys, os, subprocess, json, glob, shutil, time
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen

B = None  # the irtool binary (argv[1])
WORK = '/tmp/irtool-fuzz'


def sh(cmd, timeout):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, (p.stdout + p.stderr)[-3000:]
    except subprocess.TimeoutExpired:
        return 'timeout', ''


def load_dir(d):
    out = {}
    for f in sorted(glob.glob(os.path.join(d, '*.npy'))):
        out[os.path.basename(f)] = np.load(f)
    return out


def compare(ref, got, loose=False):
    msgs = []
    if set(ref) != set(got):
        return ['file sets differ: %s vs %s' % (sorted(ref), sorted(got))]
    for k in ref:
        a, b = ref[k], got[k]
        if a.dtype != b.dtype or a.shape != b.shape:
            msgs.append('%s: dtype/shape %s%s vs %s%s' % (k, a.dtype, a.shape, b.dtype, b.shape))
            continue
        if a.dtype.kind in 'fc':
            rt, at = (1e-4, 1e-5)
            if a.dtype == np.float16:
                rt, at = (1e-2, 1e-3)
            if loose:
                rt, at = rt * 100, at * 100
            af, bf = a.astype(np.float64), b.astype(np.float64)
            ok = np.isclose(af, bf, rtol=rt, atol=at, equal_nan=True)
            # inf == inf
            ok |= (af == bf)
            if not ok.all():
                bad = np.argwhere(~ok)
                i = tuple(bad[0])
                msgs.append('%s: %d/%d mismatched, first at %s: ref %r got %r; maxabs ref %g' %
                            (k, len(bad), a.size, i, af[i], bf[i], np.nanmax(np.abs(af[np.isfinite(af)])) if np.isfinite(af).any() else 0))
        else:
            if not np.array_equal(a, b):
                bad = np.argwhere(a != b)
                i = tuple(bad[0])
                msgs.append('%s: %d/%d mismatched, first at %s: ref %r got %r' % (k, len(bad), a.size, i, a[i], b[i]))
    return msgs


def run_case(d, inputs):
    ins = []
    for n in inputs:
        ins += ['--input', '%s=%s' % (n, os.path.join(d, n + '.npy'))]
    g = os.path.join(d, 'g.ir')
    res = {}
    for sub in ('oi', 'ol', 'oa'):
        shutil.rmtree(os.path.join(d, sub), ignore_errors=True)
    rc, out = sh([B, 'run', g, '--output-dir', os.path.join(d, 'oi')] + ins, 120)
    res['interp'] = (rc, out)
    if rc != 0:
        return 'interp_fail', res
    rc, out = sh([B, 'run', g, '--backend', 'llvm', '--output-dir', os.path.join(d, 'ol')] + ins, 180)
    res['llvm'] = (rc, out)
    rc2, out2 = sh([B, 'compile', g, '-o', os.path.join(d, 'g.irx'), '--no-validate', '--cache-dir',
                    os.path.join(WORK, 'cache')] + ins, 180)
    res['compile'] = (rc2, out2)
    if rc2 == 0:
        rc3, out3 = sh([B, 'run', os.path.join(d, 'g.irx'), '--output-dir', os.path.join(d, 'oa')] + ins, 120)
        res['art'] = (rc3, out3)
    ref = load_dir(os.path.join(d, 'oi'))
    problems = []
    if rc != 0:
        if 'does not support' in out:
            return 'unsupported', res
        problems.append('llvm rc=%s: %s' % (rc, out[-600:]))
    else:
        m = compare(ref, load_dir(os.path.join(d, 'ol')))
        if m:
            problems.append('llvm mismatch: ' + '; '.join(m))
    if rc2 != 0:
        if 'does not support' not in out2:
            problems.append('compile rc=%s: %s' % (rc2, out2[-600:]))
    else:
        rc3, out3 = res['art']
        if rc3 != 0:
            problems.append('artifact rc=%s: %s' % (rc3, out3[-600:]))
        else:
            m = compare(ref, load_dir(os.path.join(d, 'oa')))
            if m:
                problems.append('artifact mismatch: ' + '; '.join(m))
    if problems:
        res['problems'] = problems
        return 'BUG', res
    return 'ok', res


def main():
    global B, WORK
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    B, start, count = os.path.abspath(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    WORK = sys.argv[4] if len(sys.argv) > 4 else WORK
    root = os.path.join(WORK, 'cases')
    os.makedirs(root, exist_ok=True)
    log = open(os.path.join(WORK, 'log_%d.txt' % start), 'a')
    stats = {}
    for seed in range(start, start + count):
        d = os.path.join(root, str(seed))
        try:
            g = gen.Gen(seed, d)
            g.build()
            g.write()
        except Exception as e:
            log.write('%d GENFAIL %r\n' % (seed, e))
            log.flush()
            continue
        t = time.time()
        st, res = run_case(d, list(g.inputs))
        stats[st] = stats.get(st, 0) + 1
        line = '%d %s %.1fs' % (seed, st, time.time() - t)
        if st == 'BUG':
            line += ' ' + ' || '.join(res['problems'])[:1500].replace('\n', ' ')
        elif st == 'interp_fail':
            line += ' ' + res['interp'][1][-300:].replace('\n', ' ')
        elif st == 'unsupported':
            line += ' ' + res['llvm'][1][-200:].replace('\n', ' ')
        log.write(line + '\n')
        log.flush()
        if st in ('ok', 'unsupported'):
            shutil.rmtree(d, ignore_errors=True)
    log.write('STATS %s\n' % json.dumps(stats))
    log.close()


if __name__ == '__main__':
    main()
