"""gen.py — the random side of the differential tester: from (seed, case index) alone, a
well-typed pipeline over every stage kind, scan operator (declared ones included), element
type, accumulator, reset, sort order/bits/per, with edge data and random batch cuts; and the
printer that writes a case as a pipeline file.

A case is a plain JSON-able dict (see new_case) plus a dict of numpy input columns. Expression
trees carry the type the documented rules give every node (EXPRESSIONS.md), so the printed
text and the reference (ref.py) read the same tree. The generator keeps to constructs whose
meaning the docs fix; where they allow two readings (listed in README.md) it does not go."""
import random

import numpy as np

from sltypes import (TYPES, INTS, FLOATS, NP, PROMOTED, UINT_OF, width, is_int, is_float,
                     int_range, promote, common, default_acc, legal_accs, linrec_acc)

CPU_TILE = 16384                       # core/cpu/fused.h SL_CPU_TILE_ROWS
GPU_TILES = [512, 1024, 2048, 4096]    # kernels/tuning.h: 256 threads x 2..16 items
STRIP = 512                            # the CPU evaluator's strip (EXPRESSIONS.md, Evaluation)
EDGE_ROWS = sorted({e + d for e in [STRIP, 1024, 2048, 4096, CPU_TILE, 2 * CPU_TILE]
                    for d in (-1, 0, 1)} | {4 * CPU_TILE + 1})   # 5 tiles: threads hand off

# ---------------------------------------------------------------- declared operators
# Each template is associative and has an identity by construction (integer rings wrap at
# their width, so affine maps and sums stay exact); the float ones are judged with bounds.
TEMPLATES = {
    'affine': lambda t: {'fields': [['a', t], ['b', t]],
                         'identity': {'a': '1', 'b': '0'},
                         'combine': {'a': 'l.a * r.a', 'b': 'r.a * l.b + r.b'}},
    'tuple': lambda t: {'fields': [['s', 'i64'], ['x', 'u32'], ['m', 'i16']],
                        'identity': {'s': '0', 'x': '0', 'm': '-32768'},
                        'combine': {'s': 'l.s + r.s', 'x': 'l.x ^ r.x', 'm': 'max(l.m, r.m)'}},
    'sumcount': lambda t: {'fields': [['s', 'f64'], ['n', 'i64']],
                           'identity': {'s': '0.0', 'n': '0'},
                           'combine': {'s': 'l.s + r.s', 'n': 'l.n + r.n'}},
}
AFFINE_TYPES = ['i16', 'i32', 'i64', 'u8', 'u32', 'u64', 'f32', 'f64']


# ---------------------------------------------------------------- data

def _float_specials(t, rng):
    """Edge values of float type t as raw bit patterns (NaN payloads and signs, infinities,
    signed zeros, subnormals, the extremes)."""
    w = width(t)
    U = UINT_OF[w]
    e = {16: 5, 32: 8, 64: 11}[w]
    m = w - 1 - e
    sign = 1 << (w - 1)
    exp_all = ((1 << e) - 1) << m
    quiet = 1 << (m - 1)
    pats = [0, sign, exp_all, exp_all | sign,           # +0 -0 +inf -inf
            exp_all | quiet, exp_all | quiet | sign,      # +qNaN -qNaN
            exp_all | quiet | 0x5, exp_all | 1,           # payload, signalling
            exp_all | quiet | sign | 0x3,
            1, sign | 1, (1 << m) - 1, sign | ((1 << m) - 1),  # subnormals
            1 << m, sign | (1 << m),                      # smallest normals
            exp_all - 1, sign | (exp_all - 1)]            # largest finite
    return [U(p) for p in pats]


def gen_column(rng, t, n, profile):
    """n values of type t; profile picks the distribution. Returns an array of NP[t]."""
    nr = np.random.default_rng(rng.getrandbits(64))
    if t == 'bool':
        v = (nr.random(n) < rng.choice([0.1, 0.5, 0.9])).astype(np.uint8)
        if profile == 'runs':
            v = _runs(rng, nr, n, [0, 1]).astype(np.uint8)
        if profile == 'rawbool':
            raw = nr.choice(np.array([2, 3, 0x80, 0xff], dtype=np.uint8), n)
            v = np.where((v != 0) & (nr.random(n) < 0.3), raw, v).astype(np.uint8)
        return v
    if is_int(t):
        lo, hi = int_range(t)
        if profile == 'small':
            vals = [int(v) for v in nr.integers(max(lo, -6), min(hi, 6) + 1, n)]
        elif profile == 'runs':
            vals = list(_runs(rng, nr, n, [max(lo, -3), 0, 1, 2, min(hi, 7), hi, lo]))
        elif profile == 'unit':
            vals = [int(v) for v in nr.integers(max(lo, -1), 2, n)]
        else:
            vals = [rng.randint(lo, hi) for _ in range(n)]
        if profile in ('edge', 'uniform'):
            specials = [lo, hi, lo + 1, hi - 1, 0, 1, min(hi, 2), max(lo, -1)]
            for i in np.nonzero(nr.random(n) < (0.3 if profile == 'edge' else 0.05))[0]:
                vals[i] = rng.choice(specials)
        return np.array(vals, dtype=object).astype(NP[t]) if n else np.zeros(0, NP[t])
    # floats
    if profile == 'small':
        a = (nr.integers(-8, 9, n) / 4.0)
    elif profile == 'unit':
        a = nr.uniform(-1.0, 1.0, n)
    elif profile == 'runs':
        a = _runs(rng, nr, n, [-1.5, 0.0, 2.0, 7.25, 1e3]).astype(np.float64)
    else:
        a = nr.standard_normal(n) * (10.0 ** nr.integers(-3, 4, n))
    a = a.astype(NP[t]) if t != 'f16' else a.astype(np.float32).astype(np.float16)
    if profile in ('edge', 'uniform', 'runs') and n:
        specials = _float_specials(t, rng)
        bits = a.view(UINT_OF[width(t)]).copy()
        rate = {'edge': 0.3, 'uniform': 0.03, 'runs': 0.02}[profile]
        for i in np.nonzero(nr.random(n) < rate)[0]:
            bits[i] = rng.choice(specials)
        if profile == 'runs' and n > 4:       # a run of identical NaNs / zeros of one sign
            i = rng.randrange(n)
            bits[i:i + rng.randint(2, 40)] = rng.choice(specials[:6])
        a = bits.view(NP[t])
    return a


def _runs(rng, nr, n, values):
    out = np.empty(n, dtype=object)
    i = 0
    while i < n:
        r = rng.choice([1, 2, 5, 30, 600, 5000, CPU_TILE + 3])
        out[i:i + r] = rng.choice(values)
        i += r
    return out


def gen_offsets(rng, n):
    """Offsets of a whole stream: k+1 non-decreasing, first 0, last n, with empty segments."""
    k = rng.choice([0, 1, 2, 5, 20, max(1, n // 7)]) if n else rng.choice([0, 2])
    pts = sorted(rng.randint(0, n) for _ in range(k))
    if pts and rng.random() < 0.5:
        pts.append(pts[rng.randrange(len(pts))])   # an empty segment
        pts.sort()
    return np.array([0] + pts + [n], dtype=np.int64)


def gen_cuts(rng, n):
    """Row positions where the stream is cut into pushes (a repeat is a zero-row push)."""
    s = rng.random()
    if s < 0.25:
        cuts = []
    elif s < 0.55:
        cuts = sorted(rng.randint(0, n) for _ in range(rng.randint(1, 6)))
    elif s < 0.75:
        edges = [e + d for e in [STRIP, 1024, 2048, 4096, CPU_TILE, 2 * CPU_TILE]
                 for d in (-1, 0, 1)]
        cuts = sorted(c for c in edges if 0 <= c <= n and rng.random() < 0.5)
    else:
        cuts, pos = [], 0
        step = max(1, n // 50)
        while pos < n and len(cuts) < 200:
            pos = min(n, pos + rng.randint(0, 2 * step))
            cuts.append(pos)
    if rng.random() < 0.3:                      # zero-row pushes at the ends and inside
        cuts = sorted(cuts + [0] + [n] + ([cuts[0]] if cuts else []))
    return cuts


# ---------------------------------------------------------------- expressions
# A node is a list: [op, type, ...]. 'col' name | 'lit' text | 'cast' e | 'neg'/'pos'/'bnot'/
# 'not' e | 'bin' opstr ctype a b | 'call' fname ctype args... | 'cond' c a b.
# ctype is the type the operation computes in (operands are converted to it first; for a
# shift, the left operand's promoted type).

def _int_lit(rng, t):
    lo, hi = int_range(t)
    v = rng.choice([0, 1, 2, 3, 7, -1, -2, lo, hi, rng.randint(lo, hi), rng.randint(-100, 100)])
    v = min(max(v, lo), hi)
    return v


def lit_text_int(rng, v):
    if v < 0:
        return '(-%d)' % -v
    if rng.random() < 0.2:
        return hex(v)
    return str(v)


FLOAT_LITS = ['0.0', '0.5', '1.0', '1.5', '2.0', '-2.25', '3.0', '1024.0', '0.125', 'inf',
              '-inf', 'nan', '0.375', '65504.0']


def lit(rng, t):
    """A constant that takes type t where it meets an operand of type t."""
    if t == 'bool':
        return ['lit', 'bool', rng.choice(['true', 'false'])]
    if is_float(t):
        if rng.random() < 0.3:
            return ['lit', t, str(rng.randint(-5, 5)) if rng.random() < 0.5 else '0']
        txt = rng.choice(FLOAT_LITS)
        if txt == '65504.0' and t == 'f16':
            txt = '2.0'
        if txt.startswith('-'):
            txt = '(' + txt + ')'
        return ['lit', t, txt]
    return ['lit', t, lit_text_int(rng, _int_lit(rng, t))]


class ExprGen:
    """Random expressions over `cols` (name -> type) that the documented rules type."""

    def __init__(self, rng, cols):
        self.rng = rng
        self.cols = cols

    def leaf(self, want=None, cols_only=False):
        r = self.rng
        names = [c for c, t in self.cols.items() if want is None or t == want or
                 (want == 'num' and t != 'bool')]
        if names and (cols_only or r.random() < 0.85):
            c = r.choice(names)
            return ['col', self.cols[c], c]
        if want == 'bool':
            return lit(r, 'bool')
        t = want if want not in (None, 'num') else r.choice(['i32', 'i64', 'u32', 'f32', 'f64'])
        return ['cast', t, lit(r, t)] if r.random() < 0.5 else self.castlit(t)

    def castlit(self, t):
        # T(constant): the constant is computed at load time, then cast (a cast converts
        # anything); only values that fit t are used, so wrap-vs-refuse never arises.
        return ['cast', t, lit(self.rng, t if t != 'bool' else 'i32')]

    def num(self, d):
        e = self.expr(d, 'num')
        return e if e[1] != 'bool' else ['cast', self.rng.choice(['i32', 'u8', 'f32']), e]

    def boolean(self, d):
        e = self.expr(d, 'bool')
        return e if e[1] == 'bool' else ['cast', 'bool', e]

    def expr(self, d, want=None):
        e = self._expr(d, want)
        if e[0] in ('col', 'lit') or (e[0] == 'cast' and e[2][0] == 'lit') or has_col(e):
            return e
        # Constant-only operations are computed exactly at load time (EXPRESSIONS.md), not
        # in the types written; the generator keeps every operation reading a column.
        return self.leaf(want, cols_only=True)

    def _expr(self, d, want=None):
        r = self.rng
        if d <= 0 or r.random() < 0.25:
            return self.leaf(want)
        if want == 'bool':
            k = r.choice(['cmp', 'cmp', 'logic', 'not', 'isnan', 'boolcmp', 'cond', 'cast',
                          'bitbool'])
        elif want == 'num':
            k = r.choice(['arith', 'arith', 'arith', 'bit', 'shift', 'neg', 'bnot', 'pos',
                          'cond', 'call', 'call', 'cast'])
        else:
            k = r.choice(['arith', 'arith', 'cmp', 'logic', 'bit', 'shift', 'neg', 'bnot',
                          'cond', 'call', 'cast', 'isnan'])
        if k == 'arith':
            op = r.choice(['+', '-', '*', '/', '%'])
            a, b, ct = self.operands(d)
            if is_float(ct) and op == '%':
                op = '*'                      # float % is left out: see README (ambiguous)
            return ['bin', ct, op, ct, a, b]
        if k == 'cmp':
            op = r.choice(['<', '<=', '>', '>=', '==', '!='])
            a, b, ct = self.operands(d)
            return ['bin', 'bool', op, ct, a, b]
        if k == 'boolcmp':
            return ['bin', 'bool', r.choice(['==', '!=']), 'bool', self.boolean(d - 1),
                    self.boolean(d - 1)]
        if k == 'logic':
            return ['bin', 'bool', r.choice(['&&', '||']), 'bool', self.boolean(d - 1),
                    self.boolean(d - 1)]
        if k == 'bitbool':
            return ['bin', 'bool', r.choice(['&', '|', '^']), 'bool', self.boolean(d - 1),
                    self.boolean(d - 1)]
        if k == 'not':
            return ['not', 'bool', self.boolean(d - 1)]
        if k == 'isnan':
            a = self.expr(d - 1, 'num')
            if not is_float(a[1]):
                a = ['cast', r.choice(FLOATS), a]
            return ['call', 'bool', r.choice(['isnan', 'isinf']), a[1], a]
        if k == 'bit':
            a, b, ct = self.operands(d, ints=True)
            return ['bin', ct, r.choice(['&', '|', '^']), ct, a, b]
        if k == 'shift':
            a = self.intexpr(d - 1)
            if r.random() < 0.5:
                v = r.choice([0, 1, 3, 7, 15, 31, 32, 33, 63, 64, 65, 100, -1, -5,
                              2**63, 2**64 - 1])
                # a constant count is typed as a lone constant: i64, u64 from 2^63 on
                cnt = ['lit', 'u64' if v >= 2**63 else 'i64', lit_text_int(r, v)]
            else:
                cnt = self.intexpr(d - 1)
            if r.random() < 0.1 and cnt[0] != 'lit':   # constant on the left: i64
                a = ['lit', 'i64', lit_text_int(r, r.choice([1, 3, -1, 255]))]
            return ['bin', promote(a[1]), r.choice(['<<', '>>']), promote(a[1]), a, cnt]
        if k == 'neg':
            a = self.num(d - 1)
            return ['neg', promote(a[1]), a]
        if k == 'pos':                                # promotes as unary - does (as C)
            a = self.num(d - 1)
            return ['pos', promote(a[1]), a]
        if k == 'bnot':
            a = self.intexpr(d - 1)
            return ['bnot', promote(a[1]), a]
        if k == 'cond':
            c = self.boolean(d - 1)
            if want == 'bool':
                return ['cond', 'bool', c, self.boolean(d - 1), self.boolean(d - 1)]
            a = self.num(d - 1)
            if r.random() < 0.3:                       # a constant branch takes the other's type
                b = lit(r, a[1])
                if a[1] == 'f16':
                    b = ['lit', 'f16', r.choice(['0', '1', '2', '0.5'])]
            else:
                b = self.num(d - 1)
                if b[1] != a[1]:
                    if a[1] in PROMOTED and b[1] in PROMOTED and common(a[1], b[1]):
                        t = common(a[1], b[1])
                        return ['cond', t, c, a, b]   # unified as in arithmetic
                    b = ['cast', a[1], b]
            if r.random() < 0.5:
                a, b = b, a
            return ['cond', a[1] if a[0] != 'lit' else b[1], c, a, b]
        if k == 'call':
            f = r.choice(['abs', 'min', 'max', 'sqrt', 'floor', 'ceil', 'min', 'max'])
            if f in ('min', 'max'):
                a, b, ct = self.operands(d)
                return ['call', ct, f, ct, a, b]
            a = self.num(d - 1)
            if f == 'abs':
                return ['call', promote(a[1]), 'abs', promote(a[1]), a]
            if f == 'sqrt':
                t = promote(a[1]) if is_float(a[1]) else 'f64'
                return ['call', t, 'sqrt', t, a]
            if a[1] not in PROMOTED:                  # floor/ceil of narrow types: README
                a = ['cast', promote(a[1]), a]
            return ['call', a[1], f, a[1], a]
        if k == 'cast':
            t = r.choice(TYPES)
            return ['cast', t, self.expr(d - 1)]
        return self.leaf(want)

    def intexpr(self, d):
        e = self.num(d)
        if not is_int(e[1]):
            e = ['cast', self.rng.choice(INTS), e]
        return e

    def operands(self, d, ints=False):
        """Two operands and the type they compute in (the common type of the table), with a
        cast where the docs make the mix an error, or a constant that takes the other's type."""
        r = self.rng
        a = self.intexpr(d - 1) if ints else self.num(d - 1)
        pa = promote(a[1])
        if r.random() < 0.3 and a[1] == pa:        # a bare constant meets a promoted operand
            if not ints and is_int(pa) and r.random() < 0.15:
                b = ['lit', 'f64', r.choice(['0.5', '1.5', '2.0', '(-0.25)'])]
                ct = 'f64'                          # float constant with an integer: both f64
            else:
                b, ct = lit(r, pa), pa
            if r.random() < 0.5:
                return b, a, ct
            return a, b, ct
        b = self.intexpr(d - 1) if ints else self.num(d - 1)
        ct = common(a[1], b[1])
        if ct is None:
            b = ['cast', pa, b]
            ct = pa
        return a, b, ct


def has_col(e):
    if e[0] == 'col':
        return True
    return any(isinstance(x, list) and has_col(x) for x in e[2:])


# ---------------------------------------------------------------- printing

def expr_text(e):
    op = e[0]
    if op == 'col':
        return e[2]
    if op == 'lit':
        return e[2]
    if op == 'cast':
        return '%s(%s)' % (e[1], expr_text(e[2]))
    if op in ('neg', 'pos', 'bnot', 'not'):
        return '%s(%s)' % ({'neg': '-', 'pos': '+', 'bnot': '~', 'not': '!'}[op], expr_text(e[2]))
    if op == 'bin':
        return '(%s %s %s)' % (expr_text(e[4]), e[2], expr_text(e[5]))
    if op == 'call':
        return '%s(%s)' % (e[2], ', '.join(expr_text(x) for x in e[4:]))
    if op == 'cond':
        return '(%s ? %s : %s)' % (expr_text(e[2]), expr_text(e[3]), expr_text(e[4]))
    raise ValueError(op)


def q(text):
    return "'" + text.replace("'", "''") + "'"


def op_parts(s):
    """The keys of a scan, or of one reduction of a reduce's `values`, as flow-mapping items."""
    parts = ['op: %s' % s['op']]
    if s['op'] == 'linrec':
        parts += ['a: %s' % q(expr_text(s['a'])), 'b: %s' % q(expr_text(s['b']))]
    elif isinstance(s['of'], dict):
        parts.append('of: {%s}' % ', '.join('%s: %s' % (f, q(expr_text(e)))
                                             for f, e in s['of'].items()))
    elif s['of'] is not None:
        parts.append('of: %s' % q(expr_text(s['of'])))
    if isinstance(s['into'], dict):
        parts.append('into: {%s}' % ', '.join('%s: %s' % kv for kv in s['into'].items()))
    else:
        parts.append('into: %s' % s['into'])
    if s['skind'] is not None:
        parts.append('kind: %s' % s['skind'])
    if s['acc'] is not None:
        parts.append('acc: %s' % s['acc'])
    return parts


def to_yaml(case):
    L = ['sluice: 1', 'name: %s' % case['name']]
    if case.get('determinism'):
        L.append('determinism: run_to_run')
    if case.get('params'):
        L.append('params:')
        for name, t, text in case['params']:
            L.append('  %s: {type: %s, default: %s}' % (name, t, text))
    L.append('input:')
    for name, t, role in case['inputs']:
        L.append('  %s: %s' % (name, '{type: i64, role: offsets}' if role == 'offsets' else t))
    if case['operators']:
        L.append('operators:')
        for name, o in case['operators'].items():
            L.append('  %s:' % name)
            L.append('    state: {%s}' % ', '.join('%s: %s' % (f, t) for f, t in o['fields']))
            L.append('    identity: {%s}' % ', '.join('%s: %s' % (f, o['identity'][f])
                                                     for f, _ in o['fields']))
            L.append('    combine:')
            for f, _ in o['fields']:
                L.append('      %s: %s' % (f, q(o['combine'][f])))
    L.append('stages:')
    for s in case['stages']:
        k = s['kind']
        if k in ('map', 'flag'):
            L.append('  - %s:' % k)
            for name, e in s['entries']:
                L.append('      %s: %s' % (name, q(expr_text(e))))
        elif k == 'filter':
            L.append('  - filter: %s' % q(expr_text(s['expr'])))
        elif k == 'compact':
            extra = ', columns: [%s]' % ', '.join(s['columns']) if s['columns'] is not None else ''
            L.append('  - compact: {by: %s%s}' % (s['by'], extra))
        elif k in ('scan', 'segmented_scan'):
            parts = op_parts(s)
            if s['reset'] is not None:
                parts.append('reset: %s' % s['reset'])
            if k == 'segmented_scan':
                how, col = s['segments']
                parts.append('segments: %s' % ('{key: %s}' % col if how == 'key' else col))
            L.append('  - %s: {%s}' % (k, ', '.join(parts)))
        elif k == 'reduce':
            L.append('  - reduce:')
            seg = s['segments']
            if seg is not None:
                L.append('      segments: %s' % ('{key: %s}' % seg[1] if seg[0] == 'key'
                                                else seg[1]))
            if s['index'] is not None:
                L.append('      index: %s' % s['index'])
            L.append('      values:')
            for v in s['values']:
                L.append('        - {%s}' % ', '.join(op_parts(v)))
            if s['per'] is not None:
                L.append('      per: %s' % s['per'])
        elif k == 'sort':
            parts = ['key: %s' % s['keys'][0]] if s['single'] else \
                ['keys: [%s]' % ', '.join(s['keys'])]
            if s['order'] is not None:
                parts.append('order: %s' % s['order'])
            if s['bits'] is not None:
                parts.append('bits: [%d, %d]' % tuple(s['bits']))
            if s['values'] is not None:
                parts.append('values: [%s]' % ', '.join(s['values']))
            if s['per'] is not None:
                parts.append('per: %s' % s['per'])
            L.append('  - sort: {%s}' % ', '.join(parts))
        else:
            raise ValueError(k)
    if case['output'] is not None:
        L.append('output: [%s]' % ', '.join(case['output']))
    return '\n'.join(L) + '\n'


# ---------------------------------------------------------------- pipelines

class PipeGen:
    def __init__(self, rng):
        self.rng = rng
        self.info = {}        # name -> {'t', 'exact', 'nanbits', 'rawbool'}
        self.live = []        # live names, in definition order
        self.n = 0
        self.batch_valid = True   # no stream-wide sort yet: batches still mean pushes
        self.rows_original = True  # no compact/filter/sort yet: offsets still describe rows
        self.stages = []
        self.operators = {}
        self.offsets = None
        self.avoid = ()       # names of open findings the generator steers clear of
        self.params = {}      # name -> type
        self.params_change = False
        self.reduce = False   # generate `reduce` stages (off: the cases of a library without)

    def fresh(self):
        self.n += 1
        return 'c%d' % self.n

    def usable(self):
        """Columns (and params) expressions may read: exactly computed by the reference. A
        param that changes between pushes is read only while rows still belong to the push
        they came in (before a stream-wide sort)."""
        u = {c: self.info[c]['t'] for c in self.live if self.info[c]['exact']}
        if self.batch_valid or not self.params_change:
            u.update(self.params)
        return u

    def define(self, name, t, exact=True, nanbits=False, rawbool=False):
        self.info[name] = {'t': t, 'exact': exact, 'nanbits': nanbits, 'rawbool': rawbool}
        self.live.append(name)

    def stage(self):
        r = self.rng
        if self.reduce and r.random() < 0.12:
            return self.g_reduce()
        k = r.choice(['map', 'map', 'flag', 'filter', 'compact', 'compact', 'scan', 'scan',
                      'scan', 'segmented_scan', 'segmented_scan', 'sort'])
        return getattr(self, 'g_' + k)()

    def g_map(self, flag=False):
        r = self.rng
        entries = []
        cols = self.usable()
        for _ in range(r.randint(1, 3)):
            name = self.fresh()
            g = ExprGen(r, cols)
            x = r.random()
            exact, nanbits, raw = True, False, False
            if flag:
                e = g.boolean(r.randint(1, 3))
            elif x < 0.05:
                e = ['lit', 'i64', lit_text_int(r, r.randint(-9, 9))] if r.random() < 0.5 else \
                    ['lit', 'f64', r.choice(['0.5', '2.0', '(-1.25)'])]
            elif x < 0.12:
                a = g.num(r.randint(0, 2))
                t = promote(a[1]) if is_float(a[1]) else 'f64'
                e = ['call', t, r.choice(['exp', 'log']), t, a]
                exact = False          # exp/log: each platform's libm, within 2 ulp
            elif x < 0.25 and cols:
                c = r.choice(list(cols))
                e = ['col', cols[c], c]  # a plain copy keeps the bits of NaNs (and bool bytes)
            else:
                e = g.expr(r.randint(1, 4))
            if e[0] == 'col' and e[2] in self.info:   # a plain copy keeps NaN bits and
                nanbits = self.info[e[2]]['nanbits']       # raw bool bytes
                raw = self.info[e[2]]['rawbool']
            entries.append([name, e])
            self.define(name, e[1], exact, nanbits, raw)
            if exact:
                cols[name] = e[1]
        return {'kind': 'flag' if flag else 'map', 'entries': entries}

    def g_flag(self):
        return self.g_map(flag=True)

    def g_filter(self):
        self.rows_original = False
        return {'kind': 'filter', 'expr': ExprGen(self.rng, self.usable()).boolean(
            self.rng.randint(1, 3))}

    def g_compact(self):
        r = self.rng
        flags = [c for c in self.live if self.info[c]['t'] == 'bool']
        if not flags:
            st = self.g_flag()
            self.stages.append(st)
            flags = [st['entries'][0][0]]
        by = r.choice(flags)
        columns = None
        if r.random() < 0.35:
            columns = [c for c in self.live if r.random() < 0.6] or [r.choice(self.live)]
            self.live = [c for c in self.live if c in columns]
        self.rows_original = False
        return {'kind': 'compact', 'by': by, 'columns': columns}

    def g_scan(self, seg=None):
        r = self.rng
        cols = self.usable()
        g = ExprGen(r, cols)
        ops = ['sum', 'prod', 'min', 'max', 'and', 'or', 'xor', 'count', 'linrec', 'declared']
        op = r.choice(ops)
        st = {'kind': 'segmented_scan' if seg else 'scan', 'op': op, 'of': None, 'acc': None,
              'skind': r.choice([None, 'inclusive', 'exclusive']), 'reset': None,
              'segments': seg}
        if self.batch_valid and r.random() < 0.3:
            st['reset'] = r.choice(['batch', 'never'])
        elif r.random() < 0.1:
            st['reset'] = 'never'
        for name, info in self.operation(st, g, op):
            self.define(name, **info)
        return st

    def operation(self, st, g, op):
        """Fills in a scan's (or a reduction's) op, of / a / b, acc and into, reading the
        columns g offers; returns the columns it defines, (name, define()'s keywords) each,
        for the caller to define (a reduce defines them only after all its values)."""
        r = self.rng
        defs = []
        if op == 'declared':
            tmpl = r.choice(list(TEMPLATES))
            t = r.choice(AFFINE_TYPES)
            oname = '%s_%s' % (tmpl, t) if tmpl == 'affine' else tmpl
            o = TEMPLATES[tmpl](t)
            o['template'] = tmpl
            self.operators[oname] = o
            st['op'] = oname
            st['of'] = {}
            for f, ft in o['fields']:
                e = self._of_expr(g, tmpl, f, ft)
                st['of'][f] = e if e[1] == ft else ['cast', ft, e]
            keep = [f for f, _ in o['fields'] if r.random() < 0.7] or [o['fields'][-1][0]]
            st['into'] = {}
            for f, ft in o['fields']:
                if f in keep:
                    name = self.fresh()
                    st['into'][f] = name
                    defs.append((name, {'t': ft, 'exact': not is_float(ft)}))
            st['acct'] = None
            return defs
        if op == 'count':
            st['acc'] = r.choice([None, None, 'i64', 'u64'])
            acct = st['acc'] or 'i64'
        elif op == 'linrec':
            st['a'] = self._scan_arg(g, 'num', unit=True)
            st['b'] = self._scan_arg(g, 'num')
            acct = linrec_acc(st['a'][1], st['b'][1])
            if acct == 'f32' and r.random() < 0.3:
                st['acc'] = 'f64'
                acct = 'f64'
        else:
            want = 'int' if op in ('and', 'or', 'xor') else 'num'
            if r.random() < 0.15:
                want = 'bool'
            e = self._scan_arg(g, want)
            if 'raw-bool-scans' in self.avoid and e[0] == 'col' and e[2] in self.info and \
                    self.info[e[2]]['rawbool']:
                e = ['bin', 'bool', '!=', 'bool', e, ['lit', 'bool', 'false']]
            st['of'] = e
            accs = legal_accs(op, e[1])
            acct = default_acc(op, e[1])
            if r.random() < 0.4 and accs:
                st['acc'] = r.choice(accs)
                acct = st['acc']
        st['acct'] = acct
        name = self.fresh()
        st['into'] = name
        inexact = is_float(acct) and op not in ('min', 'max')
        nanbits = (op in ('min', 'max') and st['of'][0] == 'col' and
                   st['of'][2] in self.info and self.info[st['of'][2]]['nanbits'] and
                   acct == st['of'][1])
        return [(name, {'t': acct, 'exact': not inexact, 'nanbits': nanbits})]

    def _of_expr(self, g, tmpl, f, ft):
        if tmpl == 'affine' and f == 'a':
            return self._scan_arg(g, 'num', unit=True)
        return self._scan_arg(g, 'num')

    def _scan_arg(self, g, want, unit=False):
        r = self.rng
        cols = g.cols
        if want == 'bool':
            e = g.boolean(r.randint(0, 2))
        elif want == 'int':
            e = g.intexpr(r.randint(0, 2))
        else:
            pick = [c for c, t in cols.items() if t != 'bool']
            if pick and r.random() < 0.6:
                c = r.choice(pick)
                e = ['col', cols[c], c]
            else:
                e = g.num(r.randint(0, 2))
        if unit and is_float(e[1]) and r.random() < 0.7:
            # keep |a| <= 1 most of the time so products stay in range and can be judged
            e = ['call', promote(e[1]), 'min', promote(e[1]),
                 ['call', promote(e[1]), 'abs', promote(e[1]), e], ['lit', promote(e[1]), '1.0']]
        return e

    def g_segmented_scan(self):
        r = self.rng
        how = r.choice(['offsets', 'offsets', 'flag', 'key', 'key'])
        if how == 'offsets' and self.offsets and self.rows_original:
            seg = ['offsets', self.offsets]
        elif how == 'flag' or how == 'offsets':
            flags = [c for c in self.live if self.info[c]['t'] == 'bool']
            if not flags:
                return None
            seg = ['flag', r.choice(flags)]
        else:
            keys = [c for c in self.live if self.info[c]['exact'] and
                    (not is_float(self.info[c]['t']) or self.info[c]['nanbits'])]
            if not keys:
                return None
            seg = ['key', r.choice(keys)]
        return self.g_scan(seg)

    def g_reduce(self):
        """A `reduce` (the contract of issue 10 item 6): segments absent, from an offsets input,
        a head-flag column or `{key:}`; an optional index; 1 to 4 reductions (now and then up
        to 32, SCHEMA.md's limit) of every operator, all reading the columns live before the
        stage; `per` batch or stream. Afterwards only the key, the index and the reductions
        are live."""
        r = self.rng
        how = r.choice([None, None, 'offsets', 'offsets', 'flag', 'key', 'key', 'key'])
        seg = None
        if self.offsets and self.rows_original and r.random() < 0.5:
            how = 'offsets'             # (offsets inputs are rarer than the other kinds)
        if how == 'offsets' and self.offsets and self.rows_original:
            seg = ['offsets', self.offsets]
        elif how == 'flag' or (how == 'offsets' and r.random() < 0.5):
            flags = [c for c in self.live if self.info[c]['t'] == 'bool']
            if flags:
                seg = ['flag', r.choice(flags)]
        elif how is not None:
            keys = [c for c in self.live if self.info[c]['exact'] and
                    (not is_float(self.info[c]['t']) or self.info[c]['nanbits'])]
            if keys:
                seg = ['key', r.choice(keys)]
        st = {'kind': 'reduce', 'segments': seg, 'index': None, 'values': [], 'per': None}
        if r.random() < 0.4:
            st['index'] = self.fresh()
        cols = self.usable()
        ops = ['sum', 'prod', 'min', 'max', 'and', 'or', 'xor', 'count', 'linrec', 'declared']
        defs = []
        for _ in range(r.choice([1, 1, 2, 2, 3, 4]) if r.random() < 0.95 else r.randint(5, 32)):
            op = r.choice(ops)
            v = {'op': op, 'of': None, 'acc': None, 'skind': None}
            defs += self.operation(v, ExprGen(r, cols), op)
            st['values'].append(v)
        if self.batch_valid and r.random() < 0.4:
            st['per'] = 'batch'
        elif r.random() < 0.2:
            st['per'] = 'stream'
        key = seg[1] if seg and seg[0] == 'key' else None
        self.live = [key] if key else []
        if key:
            # a bool key comes out as 0/1 (the contract), whatever bytes it held
            self.info[key] = dict(self.info[key], rawbool=False)
        if st['index']:
            self.define(st['index'], 'i64')
        for name, info in defs:
            self.define(name, **info)
        # Rows of a stream-wide reduce (one row at flush, or a run emitted when the next one
        # starts) belong to no push: a batch means nothing afterwards, as after a stream sort.
        if st['per'] != 'batch' and (seg is None or seg[0] != 'offsets'):
            self.batch_valid = False
        self.rows_original = False
        return st

    def g_sort(self):
        r = self.rng
        keys = [c for c in self.live if self.info[c]['exact'] and self.info[c]['t'] != 'bool' and
                (not is_float(self.info[c]['t']) or self.info[c]['nanbits'])]
        if not keys:
            return None
        nk = 1 if r.random() < 0.6 else r.randint(1, min(3 if r.random() < 0.8 else 8, len(keys)))
        ks = r.sample(keys, min(nk, len(keys)))
        single = len(ks) == 1 and r.random() < 0.7
        st = {'kind': 'sort', 'keys': ks, 'single': single,
              'order': r.choice([None, 'ascending', 'descending']), 'bits': None,
              'values': None, 'per': None}
        if len(ks) == 1 and r.random() < 0.3:
            w = width(self.info[ks[0]]['t'])
            lo = r.randint(0, w - 1)
            st['bits'] = [lo, r.randint(lo + 1, w)]
        if r.random() < 0.3:
            st['values'] = [c for c in self.live if c not in ks and r.random() < 0.5]
            self.live = [c for c in self.live if c in ks or c in st['values']]
        if self.batch_valid and r.random() < 0.4:
            st['per'] = 'batch'
        else:
            st['per'] = r.choice([None, 'stream'])
            self.batch_valid = False
        self.rows_original = False
        return st


def param_text(rng, t):
    """A parameter value as text (a default in the file, or for sluice_session_set_param)."""
    if t == 'bool':
        return rng.choice(['true', 'false'])
    if is_float(t):
        return rng.choice(['0.5', '-2.25', '3.0', '0.0', '1024.0', '-0.125', '7'])
    lo, hi = int_range(t)
    return str(min(max(rng.choice([0, 1, -1, 5, -7, lo, hi, rng.randint(lo, hi)]), lo), hi))


AVOIDABLE = {
    # name: what the generator does instead. None open now; an entry looks like this one,
    # kept for the finding it was written for (fixed by 3b0c812):
    'raw-bool-scans': 'a scan of a bare bool column holding bytes other than 0/1 reads it '
                      'through `!= false`',
}


def gen_case(seed, idx, max_rows=None, avoid=(), reduce=False):
    """The case (pipeline, data, cuts, session settings) of (seed, idx), always the same
    (for the same `avoid`, which changes only the constructs it names, and the same
    `reduce`: with it off, the cases are those of a generator that knows no `reduce`)."""
    rng = random.Random('%d:%d' % (seed, idx))
    x = rng.random()
    if x < 0.45:
        n = rng.choice([0, 1, 2, 3, rng.randint(0, 40)])
    elif x < 0.75:
        n = rng.randint(0, 3000)
    else:
        n = rng.choice(EDGE_ROWS)
    if max_rows is not None:
        n = min(n, max_rows)
    pg = PipeGen(rng)
    pg.avoid = tuple(avoid)
    pg.reduce = reduce
    inputs = []
    data = {}
    for i in range(rng.randint(1, 4)):
        t = rng.choice(TYPES)
        name = 'x%d' % i
        prof = rng.choice(['edge', 'small', 'uniform', 'runs', 'unit'])
        if t == 'bool':
            prof = rng.choice(['plain', 'rawbool', 'runs'])
        data[name] = gen_column(rng, t, n, prof)
        inputs.append([name, t, 'data'])
        pg.define(name, t, nanbits=True, rawbool=(prof == 'rawbool'))
    if rng.random() < 0.2:
        inputs.append(['off', 'i64', 'offsets'])
        data['off'] = gen_offsets(rng, n)
        pg.offsets = 'off'
    cuts = gen_cuts(rng, n)
    params, param_sets = [], []
    if rng.random() < 0.3:
        for i in range(rng.randint(1, 2)):
            t = rng.choice(TYPES)
            params.append(['p%d' % i, t, param_text(rng, t)])
            pg.params['p%d' % i] = t
        if cuts and rng.random() < 0.6:
            for _ in range(rng.randint(1, 3)):
                name, t, _ = rng.choice(params)
                param_sets.append([rng.randint(1, len(cuts)), name, param_text(rng, t)])
            param_sets.sort(key=lambda x: x[0])
            pg.params_change = True
    target = rng.randint(1, 6) if rng.random() < 0.85 else rng.randint(7, 12)
    tries = 0
    while len(pg.stages) < target and tries < 40:
        tries += 1
        st = pg.stage()
        if st is not None:
            pg.stages.append(st)
    if reduce and rng.random() < 0.15:     # a reduce that ends the pipeline, besides those
        pg.stages.append(pg.g_reduce())    # stage() places anywhere
    output = None
    visible = [c for c in pg.live]
    if rng.random() < 0.3 and visible:
        output = [c for c in visible if rng.random() < 0.5] or [rng.choice(visible)]
        rng.shuffle(output)
    case = {'name': 'dt_%d_%d' % (seed, idx), 'seed': seed, 'index': idx,
            'inputs': inputs, 'operators': pg.operators, 'stages': pg.stages,
            'output': output, 'determinism': rng.random() < 0.1, 'rows': n,
            'params': params, 'param_sets': param_sets,
            'cuts': cuts, 'threads': rng.choice([1, 2, 3]),
            'max_batch_rows': rng.choice([0, 0, 0, 0, 1000, 4097, 20000])}
    # how the driver runs it: pushes (the default), the whole stream pushed once and reset
    # first, or sluice_run (only where there is nothing to cut)
    case['mode'] = rng.choice(['push'] * 8 + ['warmup', 'oneshot'])
    if case['mode'] == 'oneshot' and (case['cuts'] or case['param_sets']):
        case['mode'] = 'push'
    case['pull_at_end'] = rng.random() < 0.2     # outputs left to pile up until the flush
    # a stream-wide sort's memory budget (sort_memory_bytes; results are the same with any):
    # from a generator of its own, so a seed's cases are what they were before this setting
    # existed but for it (CI's fixed seed stays the range that was run clean)
    srng = random.Random('%d:%d:sort-memory' % (seed, idx))
    case['sort_memory'] = srng.choice([0, 0, 0, 1, 4096, 65536])

    return case, data
