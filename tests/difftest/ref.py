"""ref.py — the reference interpreter of the differential tester, written from the documented
semantics only (pipelines/SCHEMA.md, pipelines/EXPRESSIONS.md, README.md, DESIGN.md §2-3),
never from the implementation; and the judge that compares a backend's outputs with it.

The reference runs the whole stream at once and remembers each row's batch (the push it came
in), which is all that `reset: batch`, `per: batch` sorts and offsets segments depend on: the
docs promise the output does not depend on the cutting otherwise.

Each column is computed either exactly (integers, bools, counts, compaction, sorts, float
expressions of + - * / sqrt floor ceil abs min max and casts, float min/max scans), or as a
value with an error bound valid for ANY order of evaluation (float sum/prod/linrec scans and
declared float operators), or within a few ulp (exp, log)."""
import math

import numpy as np

from sltypes import NP, UINT_OF, width, is_int, is_float, is_signed, int_range


np.seterr(all='ignore')     # IEEE results (inf, NaN) are the point, not warnings


class Col:
    """A reference column: its type and values (bool as raw bytes), and how it is judged.
    kind 'exact': bit for bit (bools by truth; NaNs by bits only if nanbits, else any NaN).
    kind 'approx': |got - v| <= b row by row (b NaN: the row is not judged; v non-finite: got
    must be the same infinity / a NaN). kind 'ulp': within `ulps` units in the last place."""

    def __init__(self, t, data, kind='exact', nanbits=False, v=None, b=None, ulps=0,
                 quiets=False):
        self.t, self.data, self.kind, self.nanbits = t, data, kind, nanbits
        self.v, self.b, self.ulps = v, b, ulps
        # quiets: a signalling NaN may come out quiet (same sign and payload, quiet bit set):
        # the docs say min/max return the NaN operand, not whether an operation may quiet it
        self.quiets = quiets

    def take(self, idx):
        return Col(self.t, self.data[idx], self.kind, self.nanbits,
                   None if self.v is None else self.v[idx],
                   None if self.b is None else self.b[idx], self.ulps, self.quiets)


class RefError(Exception):
    """A case the reference cannot interpret (a generator mistake, never a library verdict)."""


# ---------------------------------------------------------------- conversions (EXPRESSIONS.md)

def convert(a, frm, to):
    """The cast table of 'Defined results': a is an array of NP[frm] (bool: 0/1 or raw bytes)."""
    if frm == to:
        return a
    with np.errstate(all='ignore'):
        if to == 'bool':
            return (a != 0).astype(np.uint8)          # NaN is true, -0.0 false
        if frm == 'bool':
            a = (a != 0).astype(np.uint8)              # a byte other than 0 reads as true
            return a.astype(np.float32).astype(np.float16) if to == 'f16' else a.astype(NP[to])
        if is_int(to):
            if is_int(frm):
                return a.astype(NP[to])                # keep the low bits
            x = a.astype(np.float64)
            lo, hi = int_range(to)
            t = np.trunc(x)
            nan = np.isnan(x)
            over = x >= float(hi + 1)                  # hi + 1 is a power of two: exact
            under = t < float(lo)
            ok = ~(nan | over | under)
            out = np.where(ok, t, 0).astype(NP[to])
            out = np.where(over, NP[to](hi), out)
            out = np.where(under, NP[to](lo), out)
            return np.where(nan, NP[to](0), out).astype(NP[to])
        if to == 'f16':                                # through f32 first
            return (a if frm == 'f32' else convert(a, frm, 'f32')).astype(np.float16)
        if is_int(frm) and width(frm) == 64 and to == 'f32':
            # round to nearest even once (not through f64, which could round twice)
            return np.array([_int_to_f32(int(v)) for v in a], dtype=np.float32) \
                if len(a) else np.zeros(0, np.float32)
        return a.astype(NP[to])


def _int_to_f32(v):
    """Exact integer -> nearest-even float32, without going through float64's rounding."""
    if v == 0:
        return 0.0
    s = -1 if v < 0 else 1
    m = abs(v)
    e = m.bit_length()
    if e <= 24:
        return float(s * m)
    shift = e - 24
    q, r = divmod(m, 1 << shift)
    half = 1 << (shift - 1)
    if r > half or (r == half and q & 1):
        q += 1
    return float(s * q * (1 << shift))


def lit_value(text, t, n):
    s = text.strip()
    while s.startswith('(') and s.endswith(')'):
        s = s[1:-1].strip()
    neg = s.startswith('-')
    if neg:
        s = s[1:]
    if s in ('true', 'false'):
        return np.full(n, 1 if s == 'true' else 0, np.uint8)
    if s in ('inf', 'nan') or '.' in s or 'e' in s and not s.startswith('0x'):
        v = float(s)
        v = -v if neg else v
        if t == 'f16':
            return np.full(n, v, np.float32).astype(np.float16)
        if is_int(t):
            raise RefError('float constant %s typed %s' % (text, t))
        return np.full(n, v, NP[t])
    v = int(s, 0)
    v = -v if neg else v
    if is_float(t):
        if abs(v) > 2**24:
            raise RefError('integer constant %s typed %s is not exact' % (text, t))
        return convert(np.full(n, float(v), np.float64), 'f64', t)
    lo, hi = int_range(t)
    if not lo <= v <= hi:
        raise RefError('constant %s does not fit %s' % (text, t))
    return np.full(n, v, dtype=object).astype(NP[t]) if n else np.zeros(0, NP[t])


# ---------------------------------------------------------------- expressions

def _uview(a):
    return a.view(UINT_OF[a.dtype.itemsize * 8])


def _shift(op, a, t, cnt):
    w = width(t)
    ok = (cnt >= 0) & (cnt < w) if is_signed_arr(cnt) else (cnt < w)
    c = np.where(ok, cnt, 0).astype(np.uint64)
    u = _uview(a).astype(np.uint64)
    if op == '<<':
        r = (u << c) & np.uint64((1 << w) - 1)
        r = np.where(ok, r, 0).astype(UINT_OF[w]).view(NP[t])
        return r
    if is_signed(t):
        r = a.astype(np.int64) >> c.astype(np.int64)
        fill = np.where(a < 0, -1, 0)
        return np.where(ok, r, fill).astype(NP[t])
    r = u >> c
    return np.where(ok, r, 0).astype(NP[t])


def is_signed_arr(a):
    return a.dtype.kind == 'i'


def _divmod_int(a, b, t):
    """Integer / and % with the documented results for 0 and INT_MIN / -1, truncating."""
    z = b == 0
    if is_signed(t):
        lo, _ = int_range(t)
        ovf = (a == lo) & (b == -1)
        bb = np.where(z | ovf, 1, b).astype(a.dtype)
        q = np.floor_divide(a, bb)
        r = a - q * bb
        fix = (r != 0) & ((a < 0) != (bb < 0))   # floor -> toward zero
        q = np.where(fix, q + 1, q).astype(a.dtype)
        q = np.where(z, 0, np.where(ovf, a, q)).astype(a.dtype)
        rem = np.where(z, a, np.where(ovf, 0, a - q * bb)).astype(a.dtype)
        return q, rem
    bb = np.where(z, 1, b).astype(a.dtype)
    q = np.where(z, 0, a // bb).astype(a.dtype)
    rem = np.where(z, a, a % bb).astype(a.dtype)
    return q, rem


def _fminmax(f, a, b):
    an, bn = np.isnan(a), np.isnan(b)
    pick_b = (b < a) if f == 'min' else (b > a)
    out = np.where(pick_b, b, a)
    out = np.where(an & ~bn, b, out)                   # a NaN loses to a number
    return np.where(bn & ~an, a, out).astype(a.dtype)


def eval_expr(e, env, n):
    """Evaluates node e over the columns in env (name -> Col); returns an array of NP[e[1]]
    (bools as 0/1 bytes)."""
    op, t = e[0], e[1]
    with np.errstate(all='ignore'):
        if op == 'col':
            c = env[e[2]]
            return (c.data != 0).astype(np.uint8) if t == 'bool' else c.data
        if op == 'lit':
            return lit_value(e[2], t, n)
        if op == 'cast':
            return convert(eval_expr(e[2], env, n), e[2][1], t)
        if op in ('neg', 'pos', 'bnot', 'not'):
            x = eval_expr(e[2], env, n)
            if op == 'not':
                return (x == 0).astype(np.uint8)
            x = convert(x, e[2][1], t)
            if op == 'pos':
                return x
            if op == 'bnot':
                return ~x
            return np.negative(x)
        if op == 'bin':
            o, ct = e[2], e[3]
            a = eval_expr(e[4], env, n)
            b = eval_expr(e[5], env, n)
            if o in ('<<', '>>'):
                return _shift(o, convert(a, e[4][1], ct), ct, b)
            a = convert(a, e[4][1], ct)
            b = convert(b, e[5][1], ct)
            if ct == 'bool':
                a, b = a != 0, b != 0
                r = {'==': a == b, '!=': a != b, '&&': a & b, '||': a | b, '&': a & b,
                     '|': a | b, '^': a ^ b}[o]
                return r.astype(np.uint8)
            if o in ('<', '<=', '>', '>=', '==', '!='):
                r = {'<': a < b, '<=': a <= b, '>': a > b, '>=': a >= b, '==': a == b,
                     '!=': a != b}[o]
                return r.astype(np.uint8)
            if o == '+':
                return (a + b).astype(a.dtype)
            if o == '-':
                return (a - b).astype(a.dtype)
            if o == '*':
                return (a * b).astype(a.dtype)
            if o in ('/', '%'):
                if is_float(ct):
                    if o == '%':
                        raise RefError('float %')
                    return (a / b).astype(a.dtype)
                q, r = _divmod_int(a, b, ct)
                return q if o == '/' else r
            if o == '&':
                return a & b
            if o == '|':
                return a | b
            if o == '^':
                return a ^ b
            raise RefError(o)
        if op == 'call':
            f, ct = e[2], e[3]
            args = [convert(eval_expr(x, env, n), x[1], ct if f not in ('isnan', 'isinf')
                            else x[1]) for x in e[4:]]
            a = args[0]
            if f == 'isnan':
                return np.isnan(a).astype(np.uint8)
            if f == 'isinf':
                return np.isinf(a).astype(np.uint8)
            if f == 'abs':
                return np.abs(a).astype(a.dtype)
            if f in ('min', 'max'):
                if is_float(ct):
                    return _fminmax(f, a, args[1])
                return (np.minimum if f == 'min' else np.maximum)(a, args[1])
            if f == 'sqrt':
                return np.sqrt(a)
            if f in ('floor', 'ceil'):
                if is_int(ct):
                    return a
                return (np.floor if f == 'floor' else np.ceil)(a)
            if f == 'exp':
                return np.exp(a.astype(np.float64)).astype(NP[ct])
            if f == 'log':
                return np.log(a.astype(np.float64)).astype(NP[ct])
            raise RefError(f)
        if op == 'cond':
            c = eval_expr(e[2], env, n) != 0
            a = convert(eval_expr(e[3], env, n), e[3][1], t)
            b = convert(eval_expr(e[4], env, n), e[4][1], t)
            return np.where(c, a, b).astype(NP[t])
    raise RefError(op)


# ---------------------------------------------------------------- scans

def _wrap(v, t):
    w = width(t)
    v &= (1 << w) - 1
    if is_signed(t) and v >> (w - 1):
        v -= 1 << w
    return v


def _identity(op, t):
    if op in ('sum', 'or', 'xor', 'count'):
        return 0
    if op == 'prod':
        return 1
    if op == 'and':
        return 1 if t == 'bool' else _wrap(-1, t)
    lo, hi = (0, 1) if t == 'bool' else int_range(t)
    return hi if op == 'min' else lo


def _int_combine(op, t):
    if t == 'bool':
        return {'sum': None, 'min': lambda s, x: s & x, 'max': lambda s, x: s | x,
                'and': lambda s, x: s & x, 'or': lambda s, x: s | x,
                'xor': lambda s, x: s ^ x}[op]
    return {'sum': lambda s, x: _wrap(s + x, t), 'prod': lambda s, x: _wrap(s * x, t),
            'min': lambda s, x: x if x < s else s, 'max': lambda s, x: x if x > s else s,
            'and': lambda s, x: _wrap(s & x, t), 'or': lambda s, x: _wrap(s | x, t),
            'xor': lambda s, x: _wrap(s ^ x, t), 'count': lambda s, x: _wrap(s + 1, t)}[op]


def scan_int(op, t, xs, heads, exclusive):
    """An integer or bool scan: exact. xs a list of Python ints (bools as 0/1)."""
    comb = _int_combine(op, t)
    ident = _identity(op, t)
    out = [0] * len(xs)
    s = ident
    for i, x in enumerate(xs):
        if heads[i]:
            s = ident
        if exclusive:
            out[i] = s
            s = comb(s, x)
        else:
            s = comb(s, x)
            out[i] = s
    return out


def scan_fminmax(op, t, x, heads, exclusive):
    """Float min/max: exact; the result is one of the (acc-typed) inputs or the identity.
    NaN if either side is NaN (the left one if both); ties keep the left operand."""
    n = len(x)
    vals = x.astype(np.float64).tolist()
    sel = np.full(n, -1, dtype=np.int64)
    cur = -1
    for i in range(n):
        if heads[i]:
            cur = -1
        if exclusive:
            sel[i] = cur
        if cur < 0:
            s = math.inf if op == 'min' else -math.inf
        else:
            s = vals[cur]
        xi = vals[i]
        if cur >= 0 and math.isnan(s):
            pass
        elif math.isnan(xi):
            cur = i
        elif (xi < s) if op == 'min' else (xi > s):
            cur = i
        elif cur < 0 and xi == s:
            # identity (left) on a tie keeps the identity's value: same value, same bits
            # unless x is that infinity, whose bits are the identity's anyway
            pass
        if not exclusive:
            sel[i] = cur
    ident = np.array([np.inf if op == 'min' else -np.inf], dtype=x.dtype)
    return np.where(sel >= 0, x[np.maximum(sel, 0)] if n else x, ident[0]).astype(x.dtype)


def _eps(t):
    return 2.0 ** -24 if t == 'f32' else 2.0 ** -53


def _fmax(t):
    return float(np.finfo(NP[t]).max)


def _tiny(t):
    return float(np.finfo(NP[t]).tiny)


def scan_fsum(t, x, heads, exclusive):
    """Float sum in accumulator t, for any order of evaluation: value and bound per row."""
    n = len(x)
    xs = x.astype(np.float64).tolist()
    v = np.zeros(n)
    b = np.zeros(n)
    eps, big = _eps(t), _fmax(t) / 4
    digits = 2.0 ** (24 if t == 'f32' else 53)
    s = sa = 0.0
    k = 0
    q = math.inf          # the coarsest power of two every finite x is a multiple of
    nan = pinf = ninf = False
    for i in range(n):
        if heads[i]:
            s = sa = 0.0
            k = 0
            q = math.inf
            nan = pinf = ninf = False
        if not exclusive:
            s, sa, k, nan, pinf, ninf = _fsum_add(s, sa, k, nan, pinf, ninf, xs[i])
            q = min(q, _grain(xs[i]))
        if nan or (pinf and ninf):
            v[i], b[i] = math.nan, 0.0
        elif sa > big:
            v[i], b[i] = 0.0, math.nan
        elif pinf or ninf:
            v[i], b[i] = (math.inf if pinf else -math.inf), 0.0
        elif sa <= digits * q:
            # every partial sum, in any order, is a multiple of q below 2^p * q: exact
            v[i], b[i] = s, 0.0
        else:
            v[i], b[i] = s, 3.0 * (k + 1) * eps * sa
        if exclusive:
            s, sa, k, nan, pinf, ninf = _fsum_add(s, sa, k, nan, pinf, ninf, xs[i])
            q = min(q, _grain(xs[i]))
    return v, b


def _grain(x):
    """The largest power of two that divides x (inf for 0 and non-finite x)."""
    if x == 0 or not math.isfinite(x):
        return math.inf
    num, den = abs(x).as_integer_ratio()
    return (num & -num) / den


def _fsum_add(s, sa, k, nan, pinf, ninf, x):
    if math.isnan(x):
        nan = True
    elif math.isinf(x):
        pinf |= x > 0
        ninf |= x < 0
    else:
        s += x
        sa += abs(x)
        k += 1
    return s, sa, k, nan, pinf, ninf


def scan_fprod(t, x, heads, exclusive):
    """Float product in accumulator t: judged where no order can overflow or underflow."""
    n = len(x)
    xs = x.astype(np.float64).tolist()
    v = np.zeros(n)
    b = np.zeros(n)
    eps = _eps(t)
    lmax = math.log2(_fmax(t)) - 2
    lmin = math.log2(_tiny(t)) + 2
    st = None
    for i in range(n):
        if heads[i] or st is None:
            st = [1.0, 0, False, False, False, 0.0, 0.0, False]  # p k nan zero inf lbig lsmall neg
        if not exclusive:
            _fprod_add(st, xs[i])
        p, k, nan, zero, inf, lbig, lsmall, neg = st
        unsafe_big, unsafe_small = lbig > lmax, lsmall < lmin
        if nan or (zero and inf):
            v[i], b[i] = math.nan, 0.0
        elif inf:
            v[i], b[i] = (-math.inf if neg else math.inf), (math.nan if unsafe_small else 0.0)
        elif zero:
            v[i], b[i] = 0.0, (math.nan if unsafe_big else 0.0)
        elif unsafe_big or unsafe_small:
            v[i], b[i] = 0.0, math.nan
        else:
            v[i], b[i] = p, 3.0 * (k + 1) * eps * abs(p)
        if exclusive:
            _fprod_add(st, xs[i])
    return v, b


def _fprod_add(st, x):
    st[1] += 1
    if math.isnan(x):
        st[2] = True
        return
    if x < 0 or (x == 0 and math.copysign(1, x) < 0):
        st[7] = not st[7]
    if x == 0:
        st[3] = True
    elif math.isinf(x):
        st[4] = True
    else:
        a = abs(x)
        if a > 1:
            st[5] += math.log2(a)
        elif a < 1:
            st[6] += math.log2(a)
        st[0] *= x


def scan_flinrec(t, a, bcol, heads, exclusive):
    """Float linrec h = a*h + b in accumulator t, through the pair operator in any order."""
    n = len(a)
    av = a.astype(np.float64).tolist()
    bv = bcol.astype(np.float64).tolist()
    v = np.zeros(n)
    bd = np.zeros(n)
    eps = _eps(t)
    lmax = math.log2(_fmax(t)) - 4
    tiny = _tiny(t)
    st = None
    for i in range(n):
        if heads[i] or st is None:
            st = [0.0, 0.0, 0, True, 0.0, 0.0]    # h H k finite lbigA sumB
        if not exclusive:
            _lin_add(st, av[i], bv[i])
        h, H, k, fin, lbig, sb = st
        if fin and lbig + max(0.0, math.log2(max(H, tiny))) > lmax:
            # a sub-range's value is at most H at its end: once H could overflow, some order
            # of evaluation may overflow for the rest of the segment
            st[3] = fin = False
        if not fin:
            v[i], bd[i] = 0.0, math.nan
        else:
            v[i], bd[i] = h, 4.0 * (k + 1) * eps * H + (k + 1) * tiny * (sb + 1.0)
        if exclusive:
            _lin_add(st, av[i], bv[i])
    return v, bd


def _lin_add(st, a, b):
    if not (math.isfinite(a) and math.isfinite(b)):
        st[3] = False
        return
    st[0] = a * st[0] + b
    st[1] = abs(a) * st[1] + abs(b)
    st[2] += 1
    if abs(a) > 1:
        st[4] += math.log2(abs(a))
    st[5] += abs(b)
    if not (math.isfinite(st[0]) and math.isfinite(st[1])):
        st[3] = False


def scan_intlinrec(xa, xb, heads, exclusive):
    n = len(xa)
    out = [0] * n
    h = 0
    for i in range(n):
        if heads[i]:
            h = 0
        if exclusive:
            out[i] = h
        h = _wrap(xa[i] * h + xb[i], 'i64')
        if not exclusive:
            out[i] = h
    return out


def scan_declared(o, xs, heads, exclusive):
    """A declared operator from gen.TEMPLATES: exact for integer fields; float fields with
    the bounds of linrec (affine) and sum (sumcount). xs: field -> array of its type."""
    tmpl = o['template']
    fields = dict((f, t) for f, t in o['fields'])
    n = len(next(iter(xs.values())))
    out = {}
    if tmpl == 'affine' and is_float(fields['a']):
        t = fields['a']
        va, ba = scan_fprod(t, xs['a'], heads, exclusive)
        vb, bb = scan_flinrec(t, xs['a'], xs['b'], heads, exclusive)
        out['a'] = ('approx', va, ba)
        out['b'] = ('approx', vb, bb)
        return out
    if tmpl == 'sumcount':
        v, b = scan_fsum('f64', xs['s'], heads, exclusive)
        out['s'] = ('approx', v, b)
        out['n'] = ('exact', scan_int('sum', 'i64', [int(x) for x in xs['n'].tolist()],
                                      heads, exclusive))
        return out
    if tmpl == 'affine':
        t = fields['a']
        A = [int(x) for x in xs['a'].tolist()]
        B = [int(x) for x in xs['b'].tolist()]
        ra, rb = [0] * n, [0] * n
        sa, sb = 1, 0
        for i in range(n):
            if heads[i]:
                sa, sb = 1, 0
            if exclusive:
                ra[i], rb[i] = sa, sb
            sa, sb = _wrap(sa * A[i], t), _wrap(A[i] * sb + B[i], t)
            if not exclusive:
                ra[i], rb[i] = sa, sb
        return {'a': ('exact', ra), 'b': ('exact', rb)}
    if tmpl == 'tuple':
        return {'s': ('exact', scan_int('sum', 'i64', [int(x) for x in xs['s'].tolist()],
                                        heads, exclusive)),
                'x': ('exact', scan_int('xor', 'u32', [int(x) for x in xs['x'].tolist()],
                                        heads, exclusive)),
                'm': ('exact', scan_int('max', 'i16', [int(x) for x in xs['m'].tolist()],
                                        heads, exclusive))}
    raise RefError(tmpl)


# ---------------------------------------------------------------- sorts

def sort_image(a, t):
    """The order-preserving unsigned image of SCHEMA.md / DESIGN §3, as uint64."""
    w = width(t)
    u = _uview(a).astype(np.uint64)
    top = np.uint64(1 << (w - 1))
    mask = np.uint64((1 << w) - 1)
    if is_float(t):
        neg = (u & top) != 0
        return np.where(neg, (~u) & mask, u | top)
    if is_signed(t):
        return u ^ top
    return u


# ---------------------------------------------------------------- the pipeline

def run(case, data, timing=None):
    """Runs a case; returns (outputs: list of (name, Col)). data: name -> numpy array.
    timing: a dict that gets 'avail', the push after which each output row must have come
    out of the CPU backend's pulls (len(cuts) + 1: only after the flush): a row comes out
    with its push, except behind a stream-wide sort (at flush) and from a reduce (the
    contract: with its push for `per: batch` and offsets segments; for the others when the
    row that closes the segment comes out, the last segment's at flush)."""
    n = case['rows']
    cuts = case['cuts']
    batch = np.zeros(n, dtype=np.int64)
    for c in cuts:
        batch[c:] += 1
    avail = batch.copy()
    env = {}
    order = []
    offs_heads = {}
    offs_segs = {}      # offsets input -> its segments as the driver pushes them (reduce)
    nbatches = len(cuts) + 1
    # params: the value in effect for each push (the default, then every change made before it)
    pvals = {}
    for name, t, text in case.get('params') or []:
        v = [text] * (len(cuts) + 1)
        for b, pn, ptext in case.get('param_sets') or []:
            if pn == name and b <= len(cuts):
                v[b:] = [ptext] * (len(cuts) + 1 - b)
        pvals[name] = (t, np.concatenate([lit_value(x, t, 1) for x in v]))

    def scope(env, n, batch):
        if not pvals:
            return env
        e = dict(env)
        for name, (t, per_batch) in pvals.items():
            e[name] = Col(t, per_batch[batch] if n else per_batch[:0])
        return e
    for name, t, role in case['inputs']:
        if role == 'offsets':
            h = np.zeros(n, dtype=bool)
            o = data[name]
            h[o[(o >= 0) & (o < n)]] = True
            h[[c for c in cuts if c < n]] = True       # each push is whole segments
            if n:
                h[0] = True
            offs_heads[name] = h
            offs_segs[name] = batch_segments(o, cuts, n, case.get('mode') == 'oneshot')
            continue
        env[name] = Col(t, data[name], nanbits=True)
        order.append(name)
    live = list(order)
    for st in case['stages']:
        k = st['kind']
        if k in ('map', 'flag'):
            for name, e in st['entries']:
                val = eval_expr(e, scope(env, n, batch), n)
                if e[0] == 'call' and e[2] in ('exp', 'log'):
                    c = Col(e[1], val, kind='ulp', ulps=4)
                else:
                    c = Col(e[1], val, nanbits=(e[0] == 'col' and e[2] in env and
                                                env[e[2]].nanbits))
                env[name] = c
                order.append(name)
                live.append(name)
        elif k in ('filter', 'compact'):
            if k == 'filter':
                keep = eval_expr(st['expr'], scope(env, n, batch), n) != 0
            else:
                keep = env[st['by']].data != 0
                if st['columns'] is not None:
                    live = [c for c in live if c in st['columns']]
            idx = np.nonzero(keep)[0]
            env = {c: env[c].take(idx) for c in live}
            batch = batch[idx]
            avail = avail[idx]
            offs_heads, offs_segs = {}, {}
            n = len(idx)
        elif k in ('scan', 'segmented_scan'):
            heads = np.zeros(n, dtype=bool)
            if n:
                heads[0] = True
            if st['reset'] == 'batch':
                heads[1:] |= batch[1:] != batch[:-1]
            if k == 'segmented_scan':
                how, col = st['segments']
                if how == 'offsets':
                    heads |= offs_heads[col]
                elif how == 'flag':
                    heads |= env[col].data != 0
                else:
                    kc = env[col]
                    u = _uview(kc.data) if kc.t != 'bool' else (kc.data != 0).astype(np.uint8)
                    heads[1:] |= u[1:] != u[:-1]
            new = do_scan(case, st, scope(env, n, batch), n, heads.tolist())
            for name, c in new:
                env[name] = c
                order.append(name)
                live.append(name)
        elif k == 'sort':
            keys = []
            for kn in st['keys']:
                img = sort_image(env[kn].data, env[kn].t)
                w = width(env[kn].t)
                if st['bits'] is not None:
                    lo, hi = st['bits']
                    img = (img >> np.uint64(lo)) & np.uint64((1 << (hi - lo)) - 1)
                    w = hi - lo
                if st['order'] == 'descending':
                    img = np.uint64((1 << w) - 1) - img
                keys.append(img)
            if st['per'] == 'batch':
                keys.insert(0, batch.astype(np.uint64))
            idx = np.lexsort(list(reversed(keys))) if keys and n else np.arange(n)
            if st['values'] is not None:
                live = [c for c in live if c in st['keys'] or c in st['values']]
            env = {c: env[c].take(idx) for c in live}
            batch = batch[idx]
            avail = avail[idx] if st['per'] == 'batch' else np.full(n, nbatches, np.int64)
            offs_heads, offs_segs = {}, {}
        elif k == 'reduce':
            segs = reduce_segments(st, env, n, batch, nbatches, offs_segs)
            avail = reduce_avail(st, segs, avail, nbatches)
            new, batch = do_reduce(case, st, scope(env, n, batch), n, segs)
            live = [name for name, _ in new]
            env = dict(new)
            order += [name for name, _ in new if name not in order]
            n = len(segs)
            offs_heads, offs_segs = {}, {}
        else:
            raise RefError(k)
    outs = case['output'] if case['output'] is not None else [c for c in order if c in live]
    if timing is not None:
        timing['avail'] = avail
    return [(c, env[c]) for c in outs]


# ---------------------------------------------------------------- reduce (issue 10 item 6)

def batch_segments(o, cuts, n, oneshot):
    """The segments of an offsets input as the driver pushes them: (batch, start, end) each,
    in stream order, rows counted in the stream. Each push [lo, hi) gets the stream's segments
    cut at lo and hi; an empty segment (a repeated offset) goes to the push whose rows start at
    or after it (the last one with rows for those at the stream's end); a zero-row push gets
    no segment. sluice_run (oneshot) gets the offsets whole."""
    o = [int(x) for x in o]
    if oneshot:
        return [(0, o[j], o[j + 1]) for j in range(len(o) - 1)]
    bounds = [0] + list(cuts) + [n]
    out = []
    for b in range(len(bounds) - 1):
        lo, hi = bounds[b], bounds[b + 1]
        if hi <= lo:
            continue
        pts, skip = [lo], lo > 0     # the push's first offset stands for one at lo, if any
        for x in o[1:-1]:
            if x < lo or x > hi or (x == hi and hi < n):
                continue
            if x == lo and skip:
                skip = False
                continue
            pts.append(x)
        pts.append(hi)
        out += [(b, pts[j], pts[j + 1]) for j in range(len(pts) - 1)]
    return out


def reduce_segments(st, env, n, batch, nbatches, offs_segs):
    """A reduce's segments over the n rows reaching it: (batch, start, end) each, in stream
    order; `batch` is the push each output row belongs to (for the stream-wide kinds, whose
    rows are emitted later or at flush, the last row's push: later stages never use it)."""
    seg, per_batch = st['segments'], st['per'] == 'batch'
    last = nbatches - 1
    if seg is None:
        if not per_batch:
            return [(int(batch[-1]) if n else last, 0, n)]
        # one per pushed batch, empty ones too; rows of a batch are contiguous (no stream
        # sort before a per-batch stage)
        return [(b, int(np.searchsorted(batch, b, 'left')),
                 int(np.searchsorted(batch, b, 'right'))) for b in range(nbatches)]
    how, col = seg
    if how == 'offsets':
        return offs_segs[col]
    heads = np.zeros(n, dtype=bool)
    if n:
        heads[0] = True
    if how == 'flag':
        heads |= env[col].data != 0
    else:
        kc = env[col]
        u = _uview(kc.data) if kc.t != 'bool' else (kc.data != 0).astype(np.uint8)
        heads[1:] |= u[1:] != u[:-1]
    if per_batch:
        heads[1:] |= batch[1:] != batch[:-1]
    starts = np.nonzero(heads)[0].tolist()
    ends = starts[1:] + [n]
    return [(int(batch[e - 1]), s, e) for s, e in zip(starts, ends)]


def reduce_avail(st, segs, avail, nbatches):
    """After which push each row of a reduce comes out (see run's timing): with its push for
    `per: batch` and offsets segments (or later, if its rows came later); at flush for the
    whole stream; else with the row that starts the next segment, the last one at flush."""
    seg = st['segments']
    if st['per'] == 'batch' or (seg is not None and seg[0] == 'offsets'):
        return np.array([max([b] + avail[a:e].tolist()) for b, a, e in segs], dtype=np.int64)
    if seg is None:
        return np.full(len(segs), nbatches, np.int64)
    return np.array([avail[segs[j + 1][1]] for j in range(len(segs) - 1)] + [nbatches] *
                    (1 if segs else 0), dtype=np.int64)


def _reduction_identity(case, v, t, field=None):
    """The value of a reduction over an empty segment: its operator's identity (SCHEMA.md's
    table; a declared operator's own), as a one-element array of NP[t]."""
    op = v['op']
    if op in case['operators']:
        return lit_value(case['operators'][op]['identity'][field], t, 1)
    if op in ('count', 'linrec'):
        return np.zeros(1, NP[t])
    if is_float(t):
        x = {'sum': 0.0, 'prod': 1.0, 'min': math.inf, 'max': -math.inf}[op]
        return np.array([x], dtype=NP[t])
    return np.array([_identity(op, t)], dtype=object).astype(NP[t])


def do_reduce(case, st, env, n, segs):
    """The rows of a reduce over the n rows in env: one per segment, the value of each
    reduction that of an inclusive scan over the segment at its last row (the identity for an
    empty segment). Returns ([(name, Col)] in the live order: key, index, values; the push of
    each row)."""
    heads = np.zeros(n, dtype=bool)
    last = []
    for _, a, b in segs:
        if b > a:
            heads[a] = True
        last.append(b - 1 if b > a else -1)
    last = np.array(last, dtype=np.int64)
    empty = last < 0
    pick = np.maximum(last, 0)
    out = []
    seg = st['segments']
    if seg is not None and seg[0] == 'key':
        kc = env[seg[1]]
        first = np.array([a for _, a, _ in segs], dtype=np.int64)
        k = kc.take(first)
        if kc.t == 'bool':
            k = Col('bool', (k.data != 0).astype(np.uint8))   # a bool key comes out as 0/1
        out.append((seg[1], k))
    if st['index'] is not None:
        out.append((st['index'], Col('i64', np.arange(len(segs), dtype=np.int64))))
    for v in st['values']:
        sc = dict(v, kind='scan', skind=None, reset=None)
        cols = do_scan(case, sc, env, n, heads.tolist())
        fields = {}
        if isinstance(v['into'], dict):
            fields = {name: f for f, name in v['into'].items()}
        for name, c in cols:
            if n:
                r = c.take(pick)
            else:                   # no rows at all: every segment is empty
                r = Col(c.t, np.zeros(len(segs), NP[c.t]), c.kind, c.nanbits,
                        None if c.v is None else np.zeros(len(segs)),
                        None if c.b is None else np.zeros(len(segs)), c.ulps, c.quiets)
            if empty.any():
                ident = _reduction_identity(case, v, c.t, fields.get(name))
                r.data = np.where(empty, ident[0], r.data).astype(NP[c.t])
                if r.v is not None:
                    r.v = np.where(empty, float(ident[0]), r.v)
                    r.b = np.where(empty, 0.0, r.b)
            out.append((name, r))
    batch = np.array([b for b, _, _ in segs], dtype=np.int64)
    return out, batch


def do_scan(case, st, env, n, heads):
    op = st['op']
    excl = st['skind'] == 'exclusive'
    if op in case['operators']:
        o = case['operators'][op]
        ft = dict((f, t) for f, t in o['fields'])
        xs = {f: convert(eval_expr(e, env, n), e[1], ft[f]) for f, e in st['of'].items()}
        res = scan_declared(o, xs, heads, excl)
        out = []
        for f, name in st['into'].items():
            r = res[f]
            if r[0] == 'exact':
                out.append((name, Col(ft[f], np.array(r[1], dtype=object).astype(NP[ft[f]])
                                      if n else np.zeros(0, NP[ft[f]]))))
            else:
                out.append((name, approx_col(ft[f], r[1], r[2])))
        return out
    t = st['acct']
    name = st['into']
    if op == 'count':
        vals = scan_int('count', t, [0] * n, heads, excl)
        return [(name, int_col(t, vals))]
    if op == 'linrec':
        a = convert(eval_expr(st['a'], env, n), st['a'][1], t)
        b = convert(eval_expr(st['b'], env, n), st['b'][1], t)
        if is_float(t):
            v, bd = scan_flinrec(t, a, b, heads, excl)
            return [(name, approx_col(t, v, bd))]
        vals = scan_intlinrec([int(x) for x in a.tolist()], [int(x) for x in b.tolist()],
                              heads, excl)
        return [(name, int_col(t, vals))]
    e = st['of']
    x = convert(eval_expr(e, env, n), e[1], t)
    if is_float(t):
        if op in ('min', 'max'):
            nb = e[0] == 'col' and env[e[2]].nanbits and e[1] == t and \
                e[2] not in (p for p, _, _ in case.get('params') or [])
            return [(name, Col(t, scan_fminmax(op, t, x, heads, excl), nanbits=nb,
                               quiets=True))]
        if op == 'sum':
            v, bd = scan_fsum(t, x, heads, excl)
        elif op == 'prod':
            v, bd = scan_fprod(t, x, heads, excl)
        else:
            raise RefError(op)
        return [(name, approx_col(t, v, bd))]
    xs = (x != 0).astype(np.int64).tolist() if t == 'bool' else [int(v) for v in x.tolist()]
    return [(name, int_col(t, scan_int(op, t, xs, heads, excl)))]


def int_col(t, vals):
    if not vals:
        return Col(t, np.zeros(0, NP[t]))
    return Col(t, np.array(vals, dtype=object).astype(NP[t]))


def approx_col(t, v, b):
    with np.errstate(all='ignore'):
        return Col(t, v.astype(NP[t]), kind='approx', v=v, b=b)


# ---------------------------------------------------------------- judging

def _ord(a):
    """Integers that step by one per float value (ulp distance), NaN aside."""
    w = a.dtype.itemsize * 8
    u = a.view(UINT_OF[w]).astype(np.int64 if w < 64 else object)
    top = 1 << (w - 1)
    if w == 64:
        return np.array([(-(x - top) if x >= top else x) for x in u], dtype=object)
    return np.where(u >= top, -(u - top), u)


def judge(name, exp, got, tol=1.0):
    """Compares one output column; returns None or a message naming the first bad rows."""
    if exp.t == 'bool':
        # EXPRESSIONS.md, Bools: every bool sluice computes is 0 or 1 (the reference computes
        # 0/1 too); an input passed through keeps its bytes. So bytes are compared exactly.
        bad = np.nonzero(got.view(np.uint8) != exp.data.view(np.uint8))[0]
    elif exp.kind == 'exact':
        if is_float(exp.t):
            U = UINT_OF[width(exp.t)]
            same = got.view(U) == exp.data.view(U)
            if exp.quiets:
                qb = U(1 << (np.finfo(NP[exp.t]).nmant - 1))
                same |= np.isnan(got) & ((got.view(U) | qb) == (exp.data.view(U) | qb))
            if not exp.nanbits:
                same |= np.isnan(got) & np.isnan(exp.data)
            bad = np.nonzero(~same)[0]
        else:
            bad = np.nonzero(got != exp.data)[0]
    elif exp.kind == 'ulp':
        gn, en = np.isnan(got), np.isnan(exp.data)
        d = np.abs(_ord(got) - _ord(exp.data))
        ok = (gn & en) | (~gn & ~en & (d <= exp.ulps * tol))
        bad = np.nonzero(~ok)[0]
    else:
        with np.errstate(all='ignore'):
            g = got.astype(np.float64)
            judged = ~np.isnan(exp.b)
            fin = np.isfinite(exp.v)
            ok_fin = np.abs(g - exp.v) <= exp.b * tol
            ok_nan = np.isnan(g) & np.isnan(exp.v)
            ok_inf = (g == exp.v) & np.isinf(exp.v)
            ok = ~judged | np.where(fin, ok_fin, ok_nan | ok_inf)
        bad = np.nonzero(~ok)[0]
    if len(bad) == 0:
        return None
    rows = bad[:5]
    desc = []
    for i in rows:
        e = exp.data[i] if exp.kind != 'approx' else '%r±%r' % (exp.v[i], exp.b[i])
        desc.append('row %d: expected %s got %s' % (i, _show(e, exp.t), _show(got[i], exp.t)))
    return '%s: %d bad rows of %d; %s' % (name, len(bad), len(got), '; '.join(desc))


def _show(v, t):
    if isinstance(v, str):
        return v
    if is_float(t):
        b = np.array([v], dtype=NP[t]).view(UINT_OF[width(t)])[0]
        return '%r(0x%x)' % (float(v), int(b))
    return repr(int(v))
