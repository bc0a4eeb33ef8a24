#!/usr/bin/python3
"""Random irtool text-IR graph generator for differential testing."""
import numpy as np, random, base64, os, sys, json

FLOATS = ['f32', 'f64', 'f16']
INTS = ['i32', 'i64']
NP = {'f32': np.float32, 'f64': np.float64, 'f16': np.float16, 'i32': np.int32,
      'i64': np.int64, 'bool': np.bool_, 'i8': np.int8, 'u8': np.uint8}


def prod(s):
    p = 1
    for d in s:
        p *= d
    return p


def bcast(a, b):
    n = max(len(a), len(b))
    a = [1] * (n - len(a)) + list(a)
    b = [1] * (n - len(b)) + list(b)
    out = []
    for x, y in zip(a, b):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            return None
    return out


def slice_len(d, st, en, step):
    if step > 0:
        st = st + d if st < 0 else st
        st = min(max(st, 0), d)
        en = en + d if en < 0 else en
        en = min(max(en, 0), d)
        return max(0, -(-(en - st) // step))
    st = st + d if st < 0 else st
    st = min(max(st, 0), d - 1)
    en = en + d if en < 0 else en
    en = min(max(en, -1), d - 1)
    return max(0, -(-(st - en) // (-step)))


def tystr(dt, shape):
    return '%s[%s]' % (dt, ', '.join(str(d) for d in shape))


def fmtnum(v, dt):
    if dt == 'bool':
        return 'true' if v else 'false'
    if dt in INTS or dt in ('i8', 'u8'):
        return str(int(v))
    v = float(v)
    if np.isnan(v):
        return 'nan'
    if np.isinf(v):
        return 'inf' if v > 0 else '-inf'
    return repr(v)


class Gen:
    def __init__(self, seed, outdir):
        self.r = random.Random(seed)
        self.np = np.random.RandomState(seed)
        self.out = outdir
        self.vals = {}     # name -> (dt, shape)
        self.order = []
        self.args = []
        self.consts = []
        self.nodes = []
        self.uses = {}
        self.n = 0
        self.inputs = {}
        self.outputs = []
        self.maxel = self.r.choice([2000, 6000, 20000, 70000]) if self.r.random() < 0.3 else 4000

    def fresh(self, p='v'):
        self.n += 1
        return '%s%d' % (p, self.n)

    # ---------- values ----------
    def rand_shape(self, rank=None, maxel=None):
        maxel = maxel or self.maxel
        rank = rank if rank is not None else self.r.choice([1, 2, 2, 3, 3, 4, 4])
        for _ in range(50):
            s = []
            for _ in range(rank):
                c = self.r.random()
                if c < 0.2:
                    s.append(1)
                elif c < 0.6:
                    s.append(self.r.randint(2, 8))
                elif c < 0.85:
                    s.append(self.r.randint(5, 20))
                else:
                    s.append(self.r.randint(17, 40))
            if prod(s) <= maxel:
                return s
        return [self.r.randint(1, 5) for _ in range(rank)]

    def rand_data(self, dt, shape, kind='normal'):
        if dt in FLOATS:
            a = self.np.randn(*shape) if shape else np.array(self.np.randn())
            if kind == 'pos':
                a = np.abs(a) + 0.1
            return a.astype(NP[dt])
        if dt == 'bool':
            return (self.np.rand(*shape) < 0.5) if shape else np.array(self.np.rand() < 0.5)
        if kind == 'pos':
            return self.np.randint(1, 7, size=shape).astype(NP[dt])
        return self.np.randint(-9, 10, size=shape).astype(NP[dt])

    def add_input(self, dt, shape, kind='normal'):
        name = self.fresh('in')
        self.args.append((name, dt, shape))
        self.inputs[name] = self.rand_data(dt, shape, kind)
        self.vals[name] = (dt, list(shape))
        self.order.append(name)
        return name

    def add_const(self, dt, shape, data=None, kind='normal', pool=True):
        name = self.fresh('c')
        if data is None:
            data = self.rand_data(dt, shape, kind)
        data = np.asarray(data).astype(NP[dt]).reshape(shape)
        if data.size <= 16:
            body = '[' + ', '.join(fmtnum(x, dt) for x in data.flatten()) + ']'
        else:
            if dt == 'bool':
                raw = data.astype(np.uint8).tobytes()
            else:
                raw = data.astype(np.dtype(NP[dt]).newbyteorder('<')).tobytes()
            body = 'base64 "%s"' % base64.b64encode(raw).decode()
        self.consts.append('  const %%%s: %s = %s' % (name, tystr(dt, shape), body))
        if pool:
            self.vals[name] = (dt, list(shape))
            self.order.append(name)
        return name

    def i64c(self, lst):
        return self.add_const('i64', [len(lst)], np.array(lst, dtype=np.int64), pool=False)

    def node(self, op, ins, attrs, outs_types, names=None):
        """outs_types: list of (dt, shape)."""
        outs = names or [self.fresh() for _ in outs_types]
        a = ''
        if attrs:
            a = ' {' + ', '.join('%s = %s' % (k, v) for k, v in sorted(attrs.items())) + '}'
        ins_s = ', '.join(('%' + i) if i else '_' for i in ins)
        outs_s = ', '.join('%' + o for o in outs)
        ty = ', '.join(tystr(d, s) for d, s in outs_types)
        self.nodes.append('  %s = %s(%s)%s : %s' % (outs_s, op, ins_s, a, ty))
        for i in ins:
            if i:
                self.uses[i] = self.uses.get(i, 0) + 1
        for o, (d, s) in zip(outs, outs_types):
            self.vals[o] = (d, list(s))
            self.order.append(o)
        return outs if len(outs) > 1 else outs[0]

    def pick(self, pred=lambda n, d, s: True, recent=True):
        cands = [n for n in self.order if pred(n, *self.vals[n])]
        if not cands:
            return None
        if recent and self.r.random() < 0.6:
            cands = cands[-4:]
        return self.r.choice(cands)

    def pick_float(self, minrank=0, maxrank=4, dts=None):
        dts = dts or FLOATS
        return self.pick(lambda n, d, s: d in dts and minrank <= len(s) <= maxrank)

    def get_float(self, minrank=1, maxrank=4, dt=None):
        v = self.pick_float(minrank, maxrank, [dt] if dt else None)
        if v is None or self.r.random() < 0.1:
            dt = dt or (self.main_dt if self.main_dt in FLOATS else 'f32')
            rank = self.r.randint(minrank, maxrank)
            v = self.add_input(dt, self.rand_shape(rank))
        return v

    def pick_any(self):
        """Any value of the pool, else a float one (made when there is none)."""
        v = self.pick(lambda n, d, s: True)
        return v if v is not None else self.get_float()

    def bshape(self, s):
        """A shape broadcastable to s."""
        s2 = [d if self.r.random() < 0.7 else 1 for d in s]
        if self.r.random() < 0.3 and len(s2) > 0:
            s2 = s2[self.r.randint(0, len(s2)):]
        return s2

    def other_operand(self, v, allow_grow=True):
        dt, s = self.vals[v]
        c = self.r.random()
        if c < 0.45:
            w = self.pick(lambda n, d, s2: d == dt and bcast(s, s2) is not None and
                          (allow_grow or bcast(s, s2) == s) and prod(bcast(s, s2)) <= self.maxel * 2)
            if w is not None:
                return w
        s2 = self.bshape(s)
        if allow_grow and self.r.random() < 0.15:
            # grow: a size-1 dim of s gets a size in s2
            ones = [i for i, d in enumerate(s) if d == 1]
            if ones:
                i = self.r.choice(ones)
                s2 = list(s)
                s2[i] = self.r.randint(2, 6)
                s2 = [d if (j == i or self.r.random() < 0.5) else 1 for j, d in enumerate(s2)]
        if self.r.random() < 0.5:
            return self.add_input(dt, s2)
        return self.add_const(dt, s2)

    # ---------- op families ----------
    def op_unary(self):
        v = self.get_float()
        dt, s = self.vals[v]
        op = self.r.choice(['Relu', 'Neg', 'Abs', 'Tanh', 'Sigmoid', 'Exp', 'Sqrt', 'Log', 'Floor',
                            'Ceil', 'Erf', 'LeakyRelu', 'Elu', 'HardSigmoid', 'Softplus', 'Clip',
                            'Sin', 'Cos', 'Reciprocal', 'Gelu', 'HardSwish', 'Round', 'Sign',
                            'Selu', 'Softsign', 'Identity', 'Mish', 'Celu'])
        attrs = {}
        ins = [v]
        if op in ('Sqrt', 'Log'):
            v2 = self.node('Abs', [v], {}, [(dt, s)])
            ins = [v2]
        if op == 'Exp':
            v2 = self.node('Tanh', [v], {}, [(dt, s)]) if self.r.random() < 0.5 else v
            ins = [v2]
        if op == 'LeakyRelu':
            attrs['alpha'] = self.r.choice(['0.1', '0.01', '0.3'])
        if op == 'Elu':
            attrs['alpha'] = '0.7'
        if op == 'Clip':
            lo = self.add_const(dt, [], np.array(-0.5), pool=False)
            hi = self.add_const(dt, [], np.array(self.r.choice([0.5, 1.0, 6.0])), pool=False)
            ins = [v, lo, hi] if self.r.random() < 0.7 else [v, '', hi]
        if op == 'Gelu' and self.r.random() < 0.5:
            attrs['approximate'] = '"tanh"'
        return self.node(op, ins, attrs, [(dt, s)])

    def op_binary(self):
        v = self.get_float()
        dt, s = self.vals[v]
        w = self.other_operand(v)
        op = self.r.choice(['Add', 'Add', 'Sub', 'Mul', 'Mul', 'Div', 'Max', 'Min', 'Pow', 'Sum',
                            'Mean', 'PRelu'])
        ws = self.vals[w][1]
        out = bcast(s, ws)
        if op == 'Div':
            a = self.node('Abs', [w], {}, [(dt, ws)])
            one = self.add_const(dt, [], np.array(0.5), pool=False)
            w = self.node('Add', [a, one], {}, [(dt, ws)])
        if op == 'Pow':
            a = self.node('Abs', [v], {}, [(dt, s)])
            e = self.add_const(dt, self.bshape(s), None, pool=False) if False else self._powc(dt, s) \
                if self.r.random() < 0.6 else w
            es = self.vals[e][1] if e in self.vals else None
            if es is None:
                # recover shape of const
                es = []
            return self.node('Pow', [a, e], {}, [(dt, bcast(s, self._shape_of(e)))])
        if op == 'PRelu':
            if bcast(s, ws) != s:
                op = 'Add'
        if op in ('Sum', 'Mean') and self.r.random() < 0.5:
            u = self.other_operand(v, allow_grow=False)
            return self.node(op, [v, w, u], {}, [(dt, bcast(out, self.vals[u][1]))])
        if self.r.random() < 0.3:
            return self.node(op, [w, v] if op != 'PRelu' else [v, w], {}, [(dt, out)])
        return self.node(op, [v, w], {}, [(dt, out)])

    def _powc(self, dt, s):
        sh = self.bshape(s)
        return self.add_const(dt, sh, np.full(sh, self.r.choice([0.5, 2.0, 3.0, 1.5])), pool=False)

    def _shape_of(self, name):
        if name in self.vals:
            return self.vals[name][1]
        for c in self.consts:
            if c.startswith('  const %%%s:' % name):
                t = c.split(':', 1)[1].split('=')[0].strip()
                inner = t[t.index('[') + 1:t.index(']')]
                return [int(x) for x in inner.split(',')] if inner.strip() else []
        raise KeyError(name)

    def op_chain(self):
        """Elementwise chain with broadcasting (fusion target)."""
        v = self.get_float()
        for _ in range(self.r.randint(2, 6)):
            c = self.r.random()
            if c < 0.5:
                v = self.op_binary_on(v)
            else:
                dt, s = self.vals[v]
                op = self.r.choice(['Relu', 'Neg', 'Tanh', 'Sigmoid', 'Abs', 'Identity', 'Erf', 'Softsign'])
                v = self.node(op, [v], {}, [(dt, s)])
        return v

    def op_binary_on(self, v):
        dt, s = self.vals[v]
        w = self.other_operand(v)
        op = self.r.choice(['Add', 'Sub', 'Mul', 'Max', 'Min'])
        out = bcast(s, self.vals[w][1])
        ins = [v, w] if self.r.random() < 0.6 else [w, v]
        return self.node(op, ins, {}, [(dt, out)])

    def op_copy(self):
        v = self.pick_any()
        dt, s = self.vals[v]
        op = self.r.choice(['Identity', 'Reshape', 'Reshape', 'Flatten', 'Squeeze', 'Unsqueeze'])
        if op == 'Identity':
            return self.node('Identity', [v], {}, [(dt, s)])
        if op == 'Reshape':
            n = prod(s)
            # random factorization
            dims = []
            rem = n
            for _ in range(self.r.randint(0, 3)):
                divs = [d for d in range(1, min(rem, 40) + 1) if rem % d == 0]
                d = self.r.choice(divs)
                dims.append(d)
                rem //= d
            dims.append(rem)
            self.r.shuffle(dims)
            spec = list(dims)
            if self.r.random() < 0.4:
                spec[self.r.randrange(len(spec))] = -1
            if self.r.random() < 0.3 and len(s) > 0 and len(spec) > 0 and spec[0] == s[0]:
                spec[0] = 0
            return self.node('Reshape', [v, self.i64c(spec)], {}, [(dt, dims)])
        if op == 'Flatten':
            ax = self.r.randint(0, len(s))
            a = ax if self.r.random() < 0.7 else ax - len(s)
            if a == 0 and ax != 0:
                a = ax
            return self.node('Flatten', [v], {'axis': str(a)}, [(dt, [prod(s[:ax]), prod(s[ax:])])])
        if op == 'Squeeze':
            ones = [i for i, d in enumerate(s) if d == 1]
            if not ones:
                op = 'Unsqueeze'
            else:
                k = self.r.sample(ones, self.r.randint(1, len(ones)))
                k2 = [i if self.r.random() < 0.7 else i - len(s) for i in k]
                ns = [d for i, d in enumerate(s) if i not in k]
                if self.r.random() < 0.2:
                    return self.node('Squeeze', [v], {}, [(dt, [d for d in s if d != 1])])
                return self.node('Squeeze', [v, self.i64c(k2)], {}, [(dt, ns)])
        if len(s) >= 4:
            return self.node('Identity', [v], {}, [(dt, s)])
        nr = len(s) + 1
        ax = self.r.randint(0, len(s))
        ns = list(s)
        ns.insert(ax, 1)
        a = ax if self.r.random() < 0.7 else ax - nr
        return self.node('Unsqueeze', [v, self.i64c([a])], {}, [(dt, ns)])

    def op_concat(self):
        v = self.pick(lambda n, d, s: len(s) >= 1)
        if v is None:
            v = self.get_float()
        dt, s = self.vals[v]
        ax = self.r.randrange(len(s))
        parts = []
        for _ in range(self.r.randint(1, 4)):
            c = self.r.random()
            if c < 0.25:
                parts.append(v)
            elif c < 0.6 and dt in FLOATS:
                op = self.r.choice(['Relu', 'Neg', 'Tanh', 'Sigmoid'])
                parts.append(self.node(op, [v], {}, [(dt, s)]))
            elif c < 0.8:
                ns = list(s)
                ns[ax] = self.r.randint(1, 7)
                w = self.pick(lambda n, d, s2: d == dt and len(s2) == len(s) and
                              all(s2[i] == s[i] for i in range(len(s)) if i != ax))
                if w is None:
                    w = self.add_input(dt, ns) if self.r.random() < 0.5 else self.add_const(dt, ns)
                parts.append(w)
            else:
                ns = list(s)
                ns[ax] = self.r.randint(1, 7)
                w = self.add_input(dt, ns)
                if dt in FLOATS:
                    w = self.node('Abs', [w], {}, [(dt, ns)])
                elif dt == 'bool':
                    w = self.node('Not', [w], {}, [(dt, ns)])
                else:
                    w = self.node('Neg', [w], {}, [(dt, ns)])
                parts.append(w)
        if v not in parts and self.r.random() < 0.5:
            parts.insert(self.r.randint(0, len(parts)), v)
        tot = sum(self.vals[p][1][ax] for p in parts)
        ns = list(s)
        ns[ax] = tot
        a = ax if self.r.random() < 0.7 else ax - len(s)
        return self.node('Concat', parts, {'axis': str(a)}, [(dt, ns)])

    def op_conv(self):
        dt = 'f32'
        v = self.pick(lambda n, d, s: d == dt and len(s) == 4 and s[2] >= 3 and s[3] >= 3 and
                      s[1] <= 48)
        if v is None or self.r.random() < 0.3:
            N = self.r.choice([1, 1, 1, 2, 3])
            C = self.r.choice([1, 2, 3, 4, 8, 16, 17, 24, 32])
            H = self.r.randint(3, 24)
            W = self.r.randint(3, 24)
            while N * C * H * W > 30000:
                H = max(3, H // 2)
                W = max(3, W // 2)
            v = self.add_input(dt, [N, C, H, W])
        N, C, H, W = self.vals[v][1]
        divs = [g for g in range(1, C + 1) if C % g == 0]
        g = 1
        if self.r.random() < 0.3:
            g = self.r.choice(divs)
        cpg = C // g
        M = g * self.r.choice([1, 1, 2, 3, 4, 8, 16]) if g > 1 else self.r.choice([1, 3, 4, 8, 16, 17, 24, 32, 48])
        kh = self.r.choice([1, 1, 3, 3, 3, 5, 2, 7])
        kw = kh if self.r.random() < 0.8 else self.r.choice([1, 3, 5])
        kh = min(kh, H)
        kw = min(kw, W)
        sh = self.r.choice([1, 1, 1, 2, 3])
        sw = sh if self.r.random() < 0.8 else self.r.choice([1, 2])
        dh = dw = 1
        if self.r.random() < 0.15:
            dh = dw = 2
        pads = [0, 0, 0, 0]
        if self.r.random() < 0.6:
            p = self.r.choice([0, 1, 2, 3])
            pads = [p, p, p, p]
        if self.r.random() < 0.2:
            pads = [self.r.randint(0, 2) for _ in range(4)]
        pads = [min(p, k - 1) if k > 1 else 0 for p, k in zip(pads, [kh, kw, kh, kw])] if self.r.random() < 0.8 else pads
        OH = (H + pads[0] + pads[2] - ((kh - 1) * dh + 1)) // sh + 1
        OW = (W + pads[1] + pads[3] - ((kw - 1) * dw + 1)) // sw + 1
        if OH < 1 or OW < 1:
            dh = dw = 1
            kh = kw = 1
            OH = (H + pads[0] + pads[2] - 1) // sh + 1
            OW = (W + pads[1] + pads[3] - 1) // sw + 1
        wt = self.add_const(dt, [M, cpg, kh, kw], self.np.randn(M, cpg, kh, kw) * (1.0 / np.sqrt(cpg * kh * kw)), pool=False)
        ins = [v, wt]
        if self.r.random() < 0.6:
            ins.append(self.add_const(dt, [M], self.np.randn(M) * 0.3, pool=False))
        attrs = {'kernel_shape': '[%d, %d]' % (kh, kw)}
        if sh != 1 or sw != 1 or self.r.random() < 0.3:
            attrs['strides'] = '[%d, %d]' % (sh, sw)
        if any(pads) or self.r.random() < 0.2:
            attrs['pads'] = '[%s]' % ', '.join(map(str, pads))
        if dh != 1:
            attrs['dilations'] = '[%d, %d]' % (dh, dw)
        if g != 1:
            attrs['group'] = str(g)
        if self.r.random() < 0.15:
            del attrs['kernel_shape']
        os_ = [N, M, OH, OW]
        y = self.node('Conv', ins, attrs, [(dt, os_)])
        if self.r.random() < 0.3:
            # batchnorm
            bn = [self.add_const(dt, [M], self.np.randn(M) * 0.5, pool=False),
                  self.add_const(dt, [M], self.np.randn(M) * 0.1, pool=False),
                  self.add_const(dt, [M], self.np.randn(M) * 0.1, pool=False),
                  self.add_const(dt, [M], np.abs(self.np.randn(M)) + 0.5, pool=False)]
            y = self.node('BatchNormalization', [y] + bn, {}, [(dt, os_)])
        c = self.r.random()
        if c < 0.3:
            y = self.node('Relu', [y], {}, [(dt, os_)])
        if self.r.random() < 0.4:
            res = self.pick(lambda n, d, s: d == dt and bcast(os_, s) == os_)
            if res is None:
                res = self.add_input(dt, os_ if self.r.random() < 0.7 else [1, M, 1, 1])
            y = self.node('Add', [y, res] if self.r.random() < 0.5 else [res, y], {}, [(dt, os_)])
            if self.r.random() < 0.5:
                y = self.node(self.r.choice(['Relu', 'Sigmoid', 'Tanh']), [y], {}, [(dt, os_)])
        if self.r.random() < 0.2:
            k = self.r.choice([2, 3])
            if OH >= k and OW >= k:
                op = self.r.choice(['MaxPool', 'AveragePool'])
                st = self.r.choice([1, 2])
                y = self.node(op, [y], {'kernel_shape': '[%d, %d]' % (k, k), 'strides': '[%d, %d]' % (st, st)},
                              [(dt, [N, M, (OH - k) // st + 1, (OW - k) // st + 1])])
        if self.r.random() < 0.15:
            y = self.node(self.r.choice(['GlobalAveragePool', 'GlobalMaxPool']), [y], {},
                          [(dt, [N, self.vals[y][1][1], 1, 1])])
        return y

    def op_matmul(self):
        dt = 'f32'
        if self.r.random() < 0.4:
            # Gemm
            M = self.r.randint(1, 40)
            K = self.r.randint(1, 40)
            N = self.r.randint(1, 40)
            if self.r.random() < 0.15:
                M, K, N = self.r.randint(30, 90), self.r.randint(30, 90), self.r.randint(30, 90)
            ta = self.r.random() < 0.3
            tb = self.r.random() < 0.5
            ash = [K, M] if ta else [M, K]
            bsh = [N, K] if tb else [K, N]
            a = self.pick(lambda n, d, s: d == dt and s == ash)
            if a is None:
                a = self.add_input(dt, ash)
            b = self.add_const(dt, bsh) if self.r.random() < 0.7 else self.add_input(dt, bsh)
            ins = [a, b]
            attrs = {}
            if ta:
                attrs['transA'] = '1'
            if tb:
                attrs['transB'] = '1'
            if self.r.random() < 0.3:
                attrs['alpha'] = self.r.choice(['0.5', '2.0', '-1.0'])
            if self.r.random() < 0.7:
                cs = self.r.choice([[N], [M, N], [1, N], [M, 1], [], [1]])
                ins.append(self.add_const(dt, cs))
                if self.r.random() < 0.3:
                    attrs['beta'] = self.r.choice(['0.5', '2.0', '0.0'])
            y = self.node('Gemm', ins, attrs, [(dt, [M, N])])
            if self.r.random() < 0.4:
                y = self.node(self.r.choice(['Relu', 'Sigmoid', 'Tanh']), [y], {}, [(dt, [M, N])])
            return y
        a = self.pick(lambda n, d, s: d == dt and len(s) >= 1 and s[-1] <= 64)
        if a is None or self.r.random() < 0.3:
            a = self.add_input(dt, self.rand_shape(self.r.randint(1, 4), maxel=3000))
        sa = self.vals[a][1]
        K = sa[-1]
        N = self.r.randint(1, 40)
        c = self.r.random()
        if len(sa) == 1:
            sb = [K, N] if self.r.random() < 0.7 else [self.r.randint(1, 4), K, N]
        else:
            batch = sa[:-2]
            if c < 0.4:
                sb = [K, N]
            elif c < 0.7:
                sb = [d if self.r.random() < 0.6 else 1 for d in batch] + [K, N]
            elif c < 0.85:
                sb = [K]
            else:
                sb = [self.r.randint(1, 3)] + [1] * len(batch) + [K, N] if len(batch) < 2 else [K, N]
        if prod(sb) > 20000:
            sb = [K, N]
        b = self.pick(lambda n, d, s: d == dt and s == sb)
        if b is None:
            b = self.add_const(dt, sb) if self.r.random() < 0.6 else self.add_input(dt, sb)
        # output shape
        A = list(sa)
        B = list(sb)
        pa = pb = False
        if len(A) == 1:
            A = [1] + A
            pa = True
        if len(B) == 1:
            B = B + [1]
            pb = True
        bt = bcast(A[:-2], B[:-2])
        out = bt + [A[-2], B[-1]]
        if pa:
            out.pop(-2)
        if pb:
            out.pop(-1)
        ins = [a, b]
        y = self.node('MatMul', ins, {}, [(dt, out)])
        if self.r.random() < 0.4 and len(out) >= 1:
            bias = self.add_const(dt, [out[-1]])
            y = self.node('Add', [y, bias], {}, [(dt, out)])
            if self.r.random() < 0.5:
                y = self.node(self.r.choice(['Relu', 'Gelu', 'Sigmoid']), [y], {}, [(dt, out)])
        return y

    def op_reduce(self):
        v = self.pick(lambda n, d, s: d in FLOATS + INTS and len(s) >= 1)
        if v is None:
            v = self.get_float()
        dt, s = self.vals[v]
        op = self.r.choice(['ReduceSum', 'ReduceSum', 'ReduceMean', 'ReduceMax', 'ReduceMin',
                            'ReduceProd', 'ReduceL2', 'ReduceL1', 'ReduceSumSquare',
                            'ReduceLogSumExp', 'ArgMax', 'ArgMin'])
        if dt in INTS and op in ('ReduceMean', 'ReduceL2', 'ReduceLogSumExp', 'ReduceProd'):
            op = 'ReduceSum'
        r = len(s)
        keep = self.r.choice([0, 1])
        if op in ('ArgMax', 'ArgMin'):
            ax = self.r.randrange(r)
            attrs = {'axis': str(ax if self.r.random() < 0.7 else ax - r), 'keepdims': str(keep)}
            if self.r.random() < 0.3:
                attrs['select_last_index'] = '1'
            ns = [1 if i == ax else d for i, d in enumerate(s)] if keep else [d for i, d in enumerate(s) if i != ax]
            return self.node(op, [v], attrs, [('i64', ns)])
        c = self.r.random()
        if c < 0.15:
            axes = None
        else:
            axes = sorted(self.r.sample(range(r), self.r.randint(1, r)))
        red = set(range(r)) if axes is None else set(axes)
        ns = [1 if i in red else d for i, d in enumerate(s)] if keep else [d for i, d in enumerate(s) if i not in red]
        attrs = {'keepdims': str(keep)}
        ins = [v]
        if axes is not None:
            ax2 = [a if self.r.random() < 0.7 else a - r for a in axes]
            if op == 'ReduceSum':
                ins.append(self.i64c(ax2))
            else:
                attrs['axes'] = '[%s]' % ', '.join(map(str, ax2))
        return self.node(op, ins, attrs, [(dt, ns)])

    def op_norm(self):
        v = self.get_float()
        dt, s = self.vals[v]
        r = len(s)
        op = self.r.choice(['Softmax', 'LogSoftmax', 'LayerNormalization', 'Softmax', 'LayerNormalization',
                            'Hardmax', 'CumSum'])
        if op in ('Softmax', 'LogSoftmax', 'Hardmax', 'LayerNormalization') and dt != 'f32':
            v = self.get_float(dt='f32')
            dt, s = self.vals[v]
            r = len(s)
        ax = self.r.randrange(r)
        a = ax if self.r.random() < 0.5 else ax - r
        if op == 'LayerNormalization' and self.r.random() < 0.7:
            ax = r - 1
            a = -1 if self.r.random() < 0.5 else ax
        if op == 'LayerNormalization':
            ss = s[ax:]
            ins = [v, self.add_const(dt, ss, pool=False)]
            ins.append(self.add_const(dt, ss, pool=False))
            return self.node(op, ins, {'axis': str(a)}, [(dt, s)])
        if op == 'CumSum':
            axc = self.add_const('i64', [], np.array(a), pool=False)
            attrs = {}
            if self.r.random() < 0.3:
                attrs['exclusive'] = '1'
            if self.r.random() < 0.3:
                attrs['reverse'] = '1'
            return self.node(op, [v, axc], attrs, [(dt, s)])
        if op == 'LpNormalization':
            return self.node(op, [v], {'axis': str(a), 'p': self.r.choice(['1', '2'])}, [(dt, s)])
        attrs = {'axis': str(a)} if self.r.random() < 0.85 else {}
        return self.node(op, [v], attrs, [(dt, s)])

    def op_transpose(self):
        v = self.pick(lambda n, d, s: len(s) >= 2)
        if v is None:
            v = self.get_float(2)
        dt, s = self.vals[v]
        p = list(range(len(s)))
        self.r.shuffle(p)
        if self.r.random() < 0.15:
            return self.node('Transpose', [v], {}, [(dt, s[::-1])])
        return self.node('Transpose', [v], {'perm': '[%s]' % ', '.join(map(str, p))}, [(dt, [s[i] for i in p])])

    def op_slice(self):
        v = self.pick(lambda n, d, s: len(s) >= 1)
        if v is None:
            v = self.get_float()
        dt, s = self.vals[v]
        r = len(s)
        axes = sorted(self.r.sample(range(r), self.r.randint(1, r)))
        starts, ends, steps, ns = [], [], [], list(s)
        for ax in axes:
            d = s[ax]
            step = self.r.choice([1, 1, 1, 2, 3, -1, -1, -2])
            if step > 0:
                st = self.r.randint(-d - 2, d)
                en = self.r.choice([self.r.randint(-d, d + 3), 2**62, -1])
            else:
                st = self.r.choice([self.r.randint(-d, d + 2), 2**62, -1])
                en = self.r.choice([self.r.randint(-d - 3, d), -2**62])
            ln = slice_len(d, st, en, step)
            if ln == 0:
                st, en, step = 0, d, 1
                ln = d
            starts.append(st)
            ends.append(en)
            steps.append(step)
            ns[ax] = ln
        ins = [v, self.i64c(starts), self.i64c(ends)]
        allone = all(x == 1 for x in steps)
        if self.r.random() < 0.8 or not allone:
            ins.append(self.i64c([a if self.r.random() < 0.7 else a - r for a in axes]))
            ins.append(self.i64c(steps))
        elif axes != list(range(len(axes))):
            ins.append(self.i64c(axes))
        return self.node('Slice', ins, {}, [(dt, ns)])

    def op_gather(self):
        v = self.pick(lambda n, d, s: len(s) >= 1)
        if v is None:
            v = self.get_float()
        dt, s = self.vals[v]
        r = len(s)
        ax = self.r.randrange(r)
        d = s[ax]
        ish = self.r.choice([[], [self.r.randint(1, 6)], [self.r.randint(1, 3), self.r.randint(1, 4)]])
        idx = self.np.randint(-d, d, size=ish)
        it = self.r.choice(['i64', 'i32'])
        ic = self.add_const(it, ish, idx, pool=False)
        ns = s[:ax] + ish + s[ax + 1:]
        if prod(ns) > self.maxel * 4:
            ish = []
            ic = self.add_const(it, [], np.array(0), pool=False)
            ns = s[:ax] + s[ax + 1:]
        if self.r.random() < 0.2 and r >= 1:
            # GatherElements
            ish2 = [self.r.randint(1, d) if i == ax else s[i] for i, d in enumerate(s)]
            idx = self.np.randint(-s[ax], s[ax], size=ish2)
            ic = self.add_const('i64', ish2, idx, pool=False)
            return self.node('GatherElements', [v, ic], {'axis': str(ax)}, [(dt, ish2)])
        return self.node('Gather', [v, ic], {'axis': str(ax if self.r.random() < 0.7 else ax - r)}, [(dt, ns)])

    def op_expand_tile(self):
        v = self.pick(lambda n, d, s: prod(s) <= 2000)
        if v is None:
            v = self.get_float()
        dt, s = self.vals[v]
        if self.r.random() < 0.5:
            tgt = [d if d != 1 else self.r.choice([1, 2, 3, 5]) for d in s]
            if self.r.random() < 0.4 and len(tgt) < 4:
                tgt = [self.r.randint(1, 4)] + tgt
            spec = [1 if (i >= len(tgt) - len(s) and self.r.random() < 0.2) else t for i, t in enumerate(tgt)]
            # spec dims of 1 where s dim non-1 still broadcast back to s dim
            out = bcast(s, spec)
            return self.node('Expand', [v, self.i64c(spec)], {}, [(dt, out)])
        reps = [self.r.choice([1, 1, 2, 3]) for _ in s]
        return self.node('Tile', [v, self.i64c(reps)], {}, [(dt, [a * b for a, b in zip(s, reps)])])

    def op_pad(self):
        v = self.pick(lambda n, d, s: len(s) >= 1 and d != 'bool')
        if v is None:
            v = self.get_float()
        dt, s = self.vals[v]
        r = len(s)
        mode = self.r.choice(['constant', 'constant', 'reflect', 'edge'])
        pads = []
        for i in range(2 * r):
            d = s[i % r]
            if mode == 'reflect':
                pads.append(self.r.randint(0, max(0, min(d - 1, 3))))
            elif mode == 'constant':
                pads.append(self.r.randint(-1 if d > 2 else 0, 3))
            else:
                pads.append(self.r.randint(0, 3))
        ns = [s[i] + pads[i] + pads[i + r] for i in range(r)]
        ins = [v, self.i64c(pads)]
        if mode == 'constant' and self.r.random() < 0.5:
            ins.append(self.add_const(dt, [], np.array(1.5 if dt in FLOATS else 3), pool=False))
        attrs = {} if mode == 'constant' and self.r.random() < 0.5 else {'mode': '"%s"' % mode}
        return self.node('Pad', ins, attrs, [(dt, ns)])

    def op_where(self):
        v = self.get_float()
        dt, s = self.vals[v]
        w = self.other_operand(v)
        ws = self.vals[w][1]
        cmp = self.r.choice(['Greater', 'Less', 'Equal', 'GreaterOrEqual', 'LessOrEqual'])
        zero = self.add_const(dt, [], np.array(0.0), pool=False)
        c = self.node(cmp, [v, zero], {}, [('bool', s)])
        if self.r.random() < 0.3:
            c2 = self.node('Greater', [w, zero], {}, [('bool', ws)])
            op = self.r.choice(['And', 'Or', 'Xor'])
            c = self.node(op, [c, c2], {}, [('bool', bcast(s, ws))])
            if self.r.random() < 0.5:
                c = self.node('Not', [c], {}, [('bool', bcast(s, ws))])
        cs = self.vals[c][1]
        out = bcast(cs, bcast(s, ws))
        ins = [c, v, w] if self.r.random() < 0.5 else [c, w, v]
        return self.node('Where', ins, {}, [(dt, out)])

    def op_cast(self):
        v = self.pick_any()
        dt, s = self.vals[v]
        to = self.r.choice(['f32', 'i64', 'i32', 'f16', 'f64', 'bool'])
        if dt in FLOATS and to in INTS:
            # avoid out-of-range float->int UB
            if self.r.random() < 0.5:
                v = self.node('Mul', [v, self.add_const(dt, [], np.array(3.0), pool=False)], {}, [(dt, s)])
        return self.node('Cast', [v], {'to': to}, [(to, s)])

    def op_split(self):
        v = self.pick(lambda n, d, s: any(x >= 2 for x in s))
        if v is None:
            v = self.add_input(self.main_dt, [self.r.randint(2, 9), self.r.randint(1, 9)])
        dt, s = self.vals[v]
        axs = [i for i, d in enumerate(s) if d >= 2]
        ax = self.r.choice(axs)
        d = s[ax]
        if self.r.random() < 0.5:
            k = self.r.randint(2, min(d, 4))
            parts = []
            rem = d
            for i in range(k - 1):
                p = self.r.randint(1 if self.r.random() < 0.9 else 0, rem - (k - 1 - i))
                parts.append(p)
                rem -= p
            parts.append(rem)
            ins = [v, self.i64c(parts)]
        else:
            k = self.r.choice([x for x in range(2, 5) if d % x == 0] or [1])
            if k == 1:
                k = 2
                parts = [d - d // 2, d // 2] if False else None
                # ONNX opset 17: equal split requires divisibility; fall back to explicit
                parts = [d // 2, d - d // 2]
                ins = [v, self.i64c(parts)]
            else:
                parts = [d // k] * k
                ins = [v]
        outs = [(dt, [p if i == ax else x for i, x in enumerate(s)]) for p in parts]
        res = self.node('Split', ins, {'axis': str(ax if self.r.random() < 0.7 else ax - len(s))}, outs)
        return res if isinstance(res, list) else [res]

    def op_int(self):
        dt = self.r.choice(INTS)
        v = self.pick(lambda n, d, s: d == dt)
        if v is None or self.r.random() < 0.2:
            v = self.add_input(dt, self.rand_shape())
        s = self.vals[v][1]
        op = self.r.choice(['Add', 'Sub', 'Mul', 'Neg', 'Abs', 'Max', 'Min', 'Div', 'Mod', 'Sign',
                            'BitwiseAnd', 'BitwiseOr', 'BitwiseXor', 'Equal', 'Greater', 'Clip', 'ReduceSum'])
        if op in ('Neg', 'Abs', 'Sign'):
            return self.node(op, [v], {}, [(dt, s)])
        if op == 'ReduceSum':
            return self.op_reduce()
        if op == 'Clip':
            lo = self.add_const(dt, [], np.array(-3), pool=False)
            hi = self.add_const(dt, [], np.array(4), pool=False)
            return self.node(op, [v, lo, hi], {}, [(dt, s)])
        w = self.other_operand(v)
        ws = self.vals[w][1]
        out = bcast(s, ws)
        if op in ('Div', 'Mod'):
            w = self.add_const(dt, self.bshape(s), kind='pos', pool=False)
            if self.r.random() < 0.5:
                w2 = self.node('Neg', [w], {}, [(dt, self._shape_of(w))])
                w = w2
            ws = self._shape_of(w)
            out = bcast(s, ws)
            attrs = {}
            if op == 'Mod' and self.r.random() < 0.5:
                attrs['fmod'] = '1'
            return self.node(op, [v, w], attrs, [(dt, out)])
        if op in ('Equal', 'Greater'):
            return self.node(op, [v, w], {}, [('bool', out)])
        return self.node(op, [v, w], {}, [(dt, out)])

    def op_misc(self):
        c = self.r.random()
        if c < 0.2:
            v = self.pick(lambda n, d, s: len(s) >= 1 and d in FLOATS + INTS)
            if v is None:
                v = self.get_float()
            dt, s = self.vals[v]
            ax = self.r.randrange(len(s))
            k = self.r.randint(1, s[ax])
            kc = self.add_const('i64', [1], np.array([k]), pool=False)
            ns = list(s)
            ns[ax] = k
            attrs = {'axis': str(ax)}
            if self.r.random() < 0.3:
                attrs['largest'] = '0'
            return self.node('TopK', [v, kc], attrs, [(dt, ns), ('i64', ns)])[0]
        if c < 0.35:
            v = self.pick(lambda n, d, s: len(s) == 4 and s[1] % 4 == 0 and d in FLOATS)
            if v is not None:
                dt, s = self.vals[v]
                return self.node('DepthToSpace', [v], {'blocksize': '2', 'mode': self.r.choice(['"DCR"', '"CRD"'])},
                                 [(dt, [s[0], s[1] // 4, s[2] * 2, s[3] * 2])])
        if c < 0.5:
            v = self.pick(lambda n, d, s: len(s) >= 2 and d in FLOATS)
            if v is not None:
                dt, s = self.vals[v]
                return self.node('Trilu', [v], {'upper': str(self.r.choice([0, 1]))}, [(dt, s)])
        if c < 0.7:
            v = self.pick(lambda n, d, s: len(s) == 4 and d == 'f32')
            if v is not None:
                dt, s = self.vals[v]
                op = self.r.choice(['InstanceNormalization', 'LRN'])
                if op == 'LRN':
                    return self.node('LRN', [v], {'size': '3'}, [(dt, s)])
                C = s[1]
                return self.node(op, [v, self.add_const(dt, [C], pool=False), self.add_const(dt, [C], pool=False)], {}, [(dt, s)])
        if c < 0.85:
            v = self.pick(lambda n, d, s: d in FLOATS and len(s) >= 1)
            if v is not None:
                dt, s = self.vals[v]
                sh = self.node('Shape', [v], {}, [('i64', [len(s)])])
                return self.node('Expand', [self.add_const(dt, [1], pool=False), sh], {}, [(dt, s)])
        return self.op_copy()

    def copyop(self, v):
        dt, s = self.vals[v]
        c = self.r.random()
        if c < 0.3:
            return self.node('Identity', [v], {}, [(dt, s)])
        if c < 0.6:
            spec = list(s)
            if spec:
                spec[self.r.randrange(len(spec))] = -1
            return self.node('Reshape', [v, self.i64c(spec)], {}, [(dt, s)])
        if c < 0.8 and len(s) < 4:
            u = self.node('Unsqueeze', [v, self.i64c([0])], {}, [(dt, [1] + s)])
            return self.node('Squeeze', [u, self.i64c([0])], {}, [(dt, s)])
        if len(s) >= 1:
            f = self.node('Flatten', [v], {'axis': '0'}, [(dt, [1, prod(s)])])
            return self.node('Reshape', [f, self.i64c(s)], {}, [(dt, s)])
        return self.node('Identity', [v], {}, [(dt, s)])

    def op_planner(self):
        v = self.get_float(1, 4, dt='f32' if self.r.random() < 0.7 else None)
        dt, s = self.vals[v]
        ax = self.r.randrange(len(s))
        un = lambda x: self.node(self.r.choice(['Relu', 'Neg', 'Tanh', 'Sigmoid', 'Abs']), [x], {}, [self.vals[x]])
        pool = [v]
        for _ in range(self.r.randint(1, 4)):
            c = self.r.random()
            src = self.r.choice(pool)
            if c < 0.4:
                pool.append(un(src))
            elif c < 0.7:
                pool.append(self.copyop(src))
            else:
                pool.append(self.node(self.r.choice(['Add', 'Mul', 'Sub']), [src, self.r.choice(pool)], {}, [(dt, s)]))
        parts = [self.r.choice(pool) for _ in range(self.r.randint(1, 4))]
        if self.r.random() < 0.5:
            parts = [self.copyop(p) if self.r.random() < 0.3 else p for p in parts]
        a = ax if self.r.random() < 0.7 else ax - len(s)
        ns = list(s)
        ns[ax] = s[ax] * len(parts)
        cc = self.node('Concat', parts, {'axis': str(a)}, [(dt, ns)])
        c = self.r.random()
        if c < 0.3:
            # nested concat with one of the parts
            p = self.r.choice(parts)
            ns2 = list(ns)
            ns2[ax] += s[ax]
            cc = self.node('Concat', [cc, p] if self.r.random() < 0.5 else [p, cc], {'axis': str(a)}, [(dt, ns2)])
            ns = ns2
        elif c < 0.55:
            # split back and concat reversed
            k = ns[ax] // s[ax]
            outs = self.node('Split', [cc, self.i64c([s[ax]] * k)], {'axis': str(a)}, [(dt, s)] * k)
            outs = outs if isinstance(outs, list) else [outs]
            outs = [un(o) if self.r.random() < 0.4 else o for o in outs]
            outs.reverse()
            cc = self.node('Concat', outs, {'axis': str(a)}, [(dt, ns)])
        if self.r.random() < 0.5:
            # use parts after the concat
            p = self.r.choice(parts)
            self.node(self.r.choice(['Add', 'Mul']), [p, self.r.choice(pool)], {}, [(dt, s)])
        if self.r.random() < 0.3:
            cc = self.copyop(cc)
        return cc

    def _hide(self, name):
        """An FP8 value: kept out of the pool (numpy reads no FP8 .npy, so never an output)."""
        self.order.remove(name)
        return name

    def _fp8_scale(self, shape, axis=None):
        if axis is None:
            return self.add_const('f32', [], np.array(self.r.choice([1.0, 0.5, 0.03, 7.0, 1e-3])), pool=False), {}
        n = shape[axis]
        data = (np.abs(self.np.randn(n)) * self.r.choice([0.05, 1.0, 4.0]) + 1e-3).astype(np.float32)
        return self.add_const('f32', [n], data, pool=False), {'axis': str(axis - len(shape) if self.r.random() < 0.3 else axis)}

    def _quantize(self, v, fmt=None, per_channel=None):
        dt, s = self.vals[v]
        fmt = fmt or self.r.choice(['e4m3fn', 'e5m2'])
        axis = None
        if (per_channel if per_channel is not None else self.r.random() < 0.4) and s:
            axis = self.r.randrange(len(s))
        sc, attrs = self._fp8_scale(s, axis)
        attrs['format'] = '"%s"' % fmt
        if self.r.random() < 0.3:
            attrs['saturate'] = '0'
        q = self.node('irtool.quantize_fp8', [v, sc], attrs, [('f8' + fmt, s)])
        return self._hide(q), sc, attrs.get('axis')

    def op_fp8(self):
        """irtool's FP8 ops: quantize then dequantize (scales per tensor or per channel), or
        fp8_matmul of a quantized activation and a quantized constant weight."""
        if self.r.random() < 0.5:
            v = self.get_float(0, 4) if self.r.random() < 0.5 else self.add_input(self.r.choice(FLOATS), self.rand_shape())
            dt, s = self.vals[v]
            q, sc, axis = self._quantize(v)
            attrs = {'axis': axis} if axis is not None else {}
            to = self.r.choice(['f32', 'f32', dt, 'f64'])
            if to != 'f32':
                attrs['to'] = to
            self.node('irtool.dequantize_fp8', [q, sc], attrs, [(to, s)])
            return
        v = self.get_float(1, 3, 'f32')
        dt, s = self.vals[v]
        K = s[-1]
        if K > 64:
            return
        N = self.r.choice([1, 3, 16, 17, 40, 64, 70])
        w = self.add_const('f32', [K, N])
        qa, _, _ = self._quantize(v, per_channel=False)
        qw, _, _ = self._quantize(w, per_channel=False)
        M = s[-2] if len(s) >= 2 else 1
        asc = self.add_const('f32', [], np.array(self.r.choice([1.0, 0.25, 3.0])), pool=False)
        if len(s) >= 2 and self.r.random() < 0.4:
            asc = self.add_const('f32', [M], (np.abs(self.np.randn(M)) + 0.1).astype(np.float32), pool=False)
        bsc = self.add_const('f32', [N], (np.abs(self.np.randn(N)) + 0.1).astype(np.float32), pool=False) \
            if self.r.random() < 0.5 else self.add_const('f32', [], np.array(0.5), pool=False)
        ins = [qa, qw, asc, bsc]
        if self.r.random() < 0.5:
            ins.append(self.add_const('f32', [N] if self.r.random() < 0.7 else [], pool=False))
        out = self.r.choice(['f32'] * 4 + ['f16', 'f64'])
        attrs = {'out_dtype': out} if out != 'f32' else {}
        self.node('irtool.fp8_matmul', ins, attrs, [(out, list(s[:-1]) + [N])])

    def build(self):
        self.main_dt = self.r.choice(['f32'] * 6 + ['f64', 'f16', 'i32', 'i64'])
        nin = self.r.randint(1, 3)
        for _ in range(nin):
            dt = self.main_dt if self.r.random() < 0.8 else self.r.choice(FLOATS + INTS + ['bool'])
            self.add_input(dt, self.rand_shape())
        fams = [(self.op_unary, 6), (self.op_binary, 8), (self.op_chain, 6), (self.op_copy, 8),
                (self.op_concat, 6), (self.op_conv, 5), (self.op_matmul, 5), (self.op_reduce, 5),
                (self.op_norm, 5), (self.op_transpose, 4), (self.op_slice, 4), (self.op_gather, 3),
                (self.op_expand_tile, 3), (self.op_pad, 3), (self.op_where, 3), (self.op_cast, 3),
                (self.op_split, 3), (self.op_int, 4), (self.op_misc, 3), (self.op_planner, 8),
                (self.op_fp8, 3)]
        # bias towards a few families per graph
        focus = self.r.sample(fams, 3)
        weights = [w * (4 if (f, w) in focus else 1) for f, w in fams]
        nn = self.r.randint(2, 22)
        for _ in range(nn):
            f = self.r.choices([f for f, _ in fams], weights)[0]
            f()
        # outputs
        produced = [n for n in self.order if n not in self.inputs and not n.startswith('c')]
        dead = [n for n in produced if self.uses.get(n, 0) == 0]
        outs = list(dead)
        for n in produced:
            if self.r.random() < 0.15 and n not in outs:
                outs.append(n)
        if not outs:
            outs = [self.order[-1]]
        if self.r.random() < 0.15:
            outs.append(self.r.choice(outs))
        if self.r.random() < 0.1:
            outs.append(self.r.choice(list(self.inputs)))
        if self.r.random() < 0.3:
            self.r.shuffle(outs)
        self.outputs = outs

    def text(self):
        args = ', '.join('%%%s: %s' % (n, tystr(d, s)) for n, d, s in self.args)
        lines = ['graph @g(%s) {' % args] + self.consts + self.nodes + \
                ['  return ' + ', '.join('%' + o for o in self.outputs), '}']
        return '\n'.join(lines) + '\n'

    def write(self):
        os.makedirs(self.out, exist_ok=True)
        with open(os.path.join(self.out, 'g.ir'), 'w') as f:
            f.write(self.text())
        for n, a in self.inputs.items():
            np.save(os.path.join(self.out, n + '.npy'), a)


if __name__ == '__main__':
    seed = int(sys.argv[1])
    g = Gen(seed, sys.argv[2])
    g.build()
    g.write()
    print(g.text())
