"""sltypes.py — the element types of pipelines/SCHEMA.md and the typing rules of
pipelines/EXPRESSIONS.md ("Types", "Promotion", the common-type table) and SCHEMA.md's
accumulator table, written once for both the generator and the reference."""
import numpy as np

TYPES = ['bool', 'i8', 'i16', 'i32', 'i64', 'u8', 'u16', 'u32', 'u64', 'f16', 'f32', 'f64']
INTS = ['i8', 'i16', 'i32', 'i64', 'u8', 'u16', 'u32', 'u64']
FLOATS = ['f16', 'f32', 'f64']
# bool columns are kept as their raw bytes (uint8): a byte other than 0 or 1 is test data.
NP = {'bool': np.uint8, 'i8': np.int8, 'i16': np.int16, 'i32': np.int32, 'i64': np.int64,
      'u8': np.uint8, 'u16': np.uint16, 'u32': np.uint32, 'u64': np.uint64,
      'f16': np.float16, 'f32': np.float32, 'f64': np.float64}
UINT_OF = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
NPY_DESCR = {'bool': '|b1', 'i8': '|i1', 'i16': '<i2', 'i32': '<i4', 'i64': '<i8', 'u8': '|u1',
             'u16': '<u2', 'u32': '<u4', 'u64': '<u8', 'f16': '<f2', 'f32': '<f4', 'f64': '<f8'}
DESCR_TYPE = {v: k for k, v in NPY_DESCR.items()}


def width(t):
    return 8 if t == 'bool' else int(t[1:])


def is_int(t):
    return t in INTS


def is_float(t):
    return t in FLOATS


def is_signed(t):
    return t[0] == 'i'


def int_range(t):
    w = width(t)
    if is_signed(t):
        return -(1 << (w - 1)), (1 << (w - 1)) - 1
    return 0, (1 << w) - 1


def promote(t):
    """EXPRESSIONS.md, Promotion: i8 i16 u8 u16 compute as i32, f16 as f32."""
    if t in ('i8', 'i16', 'u8', 'u16'):
        return 'i32'
    if t == 'f16':
        return 'f32'
    return t


PROMOTED = ['i32', 'i64', 'u32', 'u64', 'f32', 'f64']


def common(a, b):
    """The common type of two typed numeric operands after promotion, or None where the docs
    make it an error (a signed and an unsigned integer where the signed one is not wider)."""
    a, b = promote(a), promote(b)
    if is_float(a) and is_float(b):
        return a if width(a) >= width(b) else b
    if is_float(a):
        return a
    if is_float(b):
        return b
    if is_signed(a) == is_signed(b):
        return a if width(a) >= width(b) else b
    s, u = (a, b) if is_signed(a) else (b, a)
    return s if width(s) > width(u) else None


# ---------------------------------------------------------------- accumulators (SCHEMA.md)

def default_acc(op, t):
    """SCHEMA.md's 'accumulator by default' column; t is the type of `of`."""
    if op == 'count':
        return 'i64'
    if op in ('sum', 'prod'):
        if t == 'f16':
            return 'f32'
        if is_float(t):
            return t
        if t == 'bool' or is_signed(t):
            return 'i64'
        return 'u64'
    if op in ('min', 'max'):
        return 'f32' if t == 'f16' else t
    if op in ('and', 'or', 'xor'):
        return t
    raise ValueError(op)


def legal_accs(op, t):
    """Every `acc` SCHEMA.md's rules allow for op over an input of type t (a subset where the
    rules leave a case open: bool inputs get their default only)."""
    if op == 'count':
        return ['i64', 'u64']
    if t == 'bool':
        return [default_acc(op, t)]
    out = []
    for a in TYPES:
        if a in ('f16', 'bool'):
            continue
        if is_float(a):
            if op in ('and', 'or', 'xor'):
                continue
            if is_float(t):
                if width(a) >= width(t):
                    out.append(a)
            elif (a == 'f32' and width(t) <= 16) or (a == 'f64' and width(t) <= 32):
                out.append(a)
        else:
            if is_float(t):
                continue
            if width(a) < width(t):
                continue
            if is_signed(t) and not is_signed(a):
                continue
            if not is_signed(t) and is_signed(a) and width(a) <= width(t):
                continue
            out.append(a)
    return out


def linrec_acc(ta, tb):
    """SCHEMA.md: f64 if a or b is f64; else f32 if either is a float; else i64."""
    if 'f64' in (ta, tb):
        return 'f64'
    if is_float(ta) or is_float(tb):
        return 'f32'
    return 'i64'


def float_info(t):
    return np.finfo(NP[t])
