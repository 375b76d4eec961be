#!/usr/bin/python3
"""make_golden.py — the independent oracle of the cookbook: writes each shipped pipeline's
small input and its expected outputs, computed here with NumPy straight from the meaning of
the stages (pipelines/SCHEMA.md, the primer), never by running sluice.

    /usr/bin/python3 pipelines/data/make_golden.py        # rewrites pipelines/data/<name>/{in,golden}

Layout: pipelines/data/<name>/in/COLUMN.npy (or in.csv), golden/COLUMN.npy, one per output
column in the pipeline's output order. tests/test_pipelines.c runs `sluice run` over `in`
and compares with `golden`: integers exactly, floats with a relative tolerance (floats here
are computed in float64 where the pipeline accumulates, so a wrong accumulation order or an
f16-style stall shows up, while rounding differences do not).
"""
import os
import shutil

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
f32 = np.float32


def save(name, inputs, golden, csv=None):
    """Writes inputs (dict of arrays, or a CSV text when csv is given) and golden outputs."""
    root = os.path.join(HERE, name)
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(os.path.join(root, "golden"))
    if csv is not None:
        with open(os.path.join(root, "in.csv"), "w") as f:
            f.write(csv)
    else:
        os.makedirs(os.path.join(root, "in"))
        for col, arr in inputs.items():
            np.save(os.path.join(root, "in", col + ".npy"), np.ascontiguousarray(arr))
    for col, arr in golden.items():
        np.save(os.path.join(root, "golden", col + ".npy"), np.ascontiguousarray(arr))


def cull_visible(rng):
    n = 1000
    x = rng.normal(size=n).astype(f32)
    y = rng.normal(size=n).astype(f32)
    x[[5, 77, 500]] = np.nan  # NaN positions are never visible
    ids = (np.uint64(1) << np.uint64(60)) + np.arange(n, dtype=np.uint64) * np.uint64(3)
    cx, cy, radius = f32(0.0), f32(0.0), f32(1.0)
    # Elementwise in f32, exactly as the pipeline's expressions are typed.
    dx, dy = x - cx, y - cy
    r2 = dx * dx + dy * dy
    keep = (r2 <= radius * radius) & ~np.isnan(r2)
    golden = {
        "id": ids[keep], "x": x[keep], "y": y[keep], "r2": r2[keep],
        "slot": np.arange(int(keep.sum()), dtype=np.int64),  # exclusive count of kept rows
    }
    save("cull-visible", {"x": x, "y": y, "id": ids}, golden)


def output_offsets(rng):
    n = 1500
    item = np.arange(n, dtype=np.uint32) * np.uint32(2) + np.uint32(1)
    count = rng.integers(0, 10, size=n).astype(np.uint32)
    count[:3] = 0  # leading empty items: the first offset is still 0
    first = np.zeros(n, dtype=np.uint64)
    first[1:] = np.cumsum(count.astype(np.uint64))[:-1]  # exclusive scan
    end = first + count.astype(np.uint64)
    save("output-offsets", {"item": item, "count": count},
         {"item": item, "count": count, "first": first, "end": end})


def ragged_cumsum(rng):
    lengths = rng.integers(0, 21, size=120)
    lengths[[0, 7, 8, 119]] = 0  # empty rows, also at both ends
    rows = np.zeros(len(lengths) + 1, dtype=np.int64)
    rows[1:] = np.cumsum(lengths)
    n = int(rows[-1])
    value = rng.normal(size=n).astype(f32)
    cumsum = np.empty(n, dtype=np.float64)
    running_max = np.empty(n, dtype=f32)
    for j in range(len(lengths)):
        a, b = rows[j], rows[j + 1]
        cumsum[a:b] = np.cumsum(value[a:b].astype(np.float64))
        running_max[a:b] = np.maximum.accumulate(value[a:b])
    save("ragged-cumsum", {"value": value, "rows": rows},
         {"value": value, "cumsum": cumsum.astype(f32), "running_max": running_max})


def linrec(rng):
    n = 800
    x = rng.normal(loc=5.0, size=n).astype(f32)
    dt = rng.uniform(0.0, 2.0, size=n).astype(f32)
    dt[::17] *= f32(-1.0)  # the pipeline takes |dt|
    tau = f32(4.0)
    decay = np.exp(-np.abs(dt) / tau).astype(f32)
    gain = ((f32(1.0) - decay) * x).astype(f32)
    h = np.empty(n, dtype=np.float64)
    prev = 0.0
    for t in range(n):  # the recurrence itself, from h[-1] = 0
        prev = float(decay[t]) * prev + float(gain[t])
        h[t] = prev
    save("linrec", {"x": x, "dt": dt}, {"x": x, "ema": h.astype(f32)})


def sort_by_depth(rng):
    n = 900
    x = rng.normal(size=n).astype(f32)
    y = rng.normal(size=n).astype(f32)
    z = rng.normal(size=n).astype(f32)
    # Duplicated points tie on depth: a stable sort keeps them in input order.
    for src, dst in [(3, 10), (3, 400), (50, 51), (700, 20)]:
        x[dst], y[dst], z[dst] = x[src], y[src], z[src]
    ids = np.arange(n, dtype=np.uint32)
    camera_z = f32(-10.0)
    dz = z - camera_z
    depth = np.sqrt(x * x + y * y + dz * dz)
    order = np.argsort(-depth, kind="stable")  # descending, ties in input order
    save("sort-by-depth", {"x": x, "y": y, "z": z, "id": ids},
         {"id": ids[order], "depth": depth[order]})


def trades_vwap(rng):
    n = 1200
    symbol = rng.integers(1, 9, size=n).astype(np.uint32)
    price = np.round(100.0 + 10.0 * rng.normal(size=n) + symbol * 5.0, 2)
    size = rng.integers(1, 500, size=n).astype(np.int64)
    size[rng.choice(n, 20, replace=False)] = 0
    size[rng.choice(n, 10, replace=False)] = -5
    bad_price = rng.choice(n, 12, replace=False)
    price[bad_price[:4]] = -1.0
    price[bad_price[4:8]] = np.nan
    price[bad_price[8:]] = np.inf
    time = np.arange(n) * 10 + 1_700_000_000_000

    def fmt(p):
        return "nan" if np.isnan(p) else ("inf" if np.isinf(p) else repr(float(p)))

    lines = ["time,symbol,price,size"]
    lines += [f"{t},{s},{fmt(p)},{q}" for t, s, p, q in zip(time, symbol, price, size)]
    csv = "\n".join(lines) + "\n"

    keep = (size > 0) & (price > 0) & ~np.isinf(price)
    symbol, price, size = symbol[keep], price[keep], size[keep]
    notional = price * size.astype(np.float64)
    order = np.argsort(symbol, kind="stable")  # groups symbols, keeps time order within
    symbol, price, size, notional = symbol[order], price[order], size[order], notional[order]
    volume = np.empty(len(size), dtype=np.int64)
    turnover = np.empty(len(size), dtype=np.float64)
    starts = np.flatnonzero(np.r_[True, symbol[1:] != symbol[:-1]])  # runs of equal keys
    bounds = list(starts) + [len(symbol)]
    for a, b in zip(bounds[:-1], bounds[1:]):
        volume[a:b] = np.cumsum(size[a:b])
        turnover[a:b] = np.cumsum(notional[a:b])
    vwap = turnover / volume.astype(np.float64)
    save("trades-vwap", None,
         {"symbol": symbol, "price": price, "size": size, "volume": volume, "vwap": vwap},
         csv=csv)


def drawdown(rng):
    n = 1500
    price = 100.0 * np.exp(np.cumsum(0.01 * rng.normal(size=n)))
    price[700:720] = price[699]  # a flat stretch: no new peak, no new fall
    peak = np.maximum.accumulate(price)
    # Every candidate fall is one exact subtraction price[i] - price[j], whatever the
    # grouping, so the oracle and the parallel scan agree bit for bit.
    fall = np.maximum.accumulate(peak - price)
    save("drawdown", {"price": price}, {"price": price, "peak": peak, "drawdown": fall})


def user_totals(rng):
    # Accounts in increasing order (the stream is grouped by account), 1 to 40 trades each.
    accounts = np.sort(rng.choice(np.arange(1, 1_000_000), size=150, replace=False))
    counts = rng.integers(1, 41, size=len(accounts))
    counts[[0, 1, 149]] = 1  # one-trade accounts, also first and last
    account = np.repeat(accounts, counts).astype(np.uint32)
    n = len(account)
    price = np.round(50.0 + 100.0 * rng.random(n), 2)
    qty = rng.integers(-500, 501, size=n).astype(np.int64)
    qty[rng.choice(n, 40, replace=False)] = 0
    bad = rng.choice(n, 30, replace=False)
    price[bad[:10]] = -price[bad[:10]]
    price[bad[10:15]] = 0.0
    price[bad[15:22]] = np.nan
    price[bad[22:]] = np.inf
    # Whole accounts of bad trades have no row: one in the middle, and the last one.
    for a in (accounts[70], accounts[-1]):
        qty[account == a] = 0

    keep = (qty != 0) & (price > 0) & ~np.isinf(price)  # NaN > 0 is false: dropped too
    acc, p, q = account[keep], price[keep], qty[keep]
    starts = np.flatnonzero(np.r_[True, acc[1:] != acc[:-1]])  # runs of equal accounts
    ends = np.r_[starts[1:], len(acc)]
    trades = (ends - starts).astype(np.int64)
    position = np.array([q[a:b].sum() for a, b in zip(starts, ends)], dtype=np.int64)
    volume = np.array([np.abs(q[a:b]).sum() for a, b in zip(starts, ends)], dtype=np.int64)
    turnover = np.array([np.sum(p[a:b] * np.abs(q[a:b]).astype(np.float64))
                         for a, b in zip(starts, ends)])
    golden = {
        "account": acc[starts], "rank": np.arange(len(starts), dtype=np.int64),
        "trades": trades, "position": position, "volume": volume,
        "vwap": turnover / volume.astype(np.float64),
        "low": np.array([p[a:b].min() for a, b in zip(starts, ends)]),
        "high": np.array([p[a:b].max() for a, b in zip(starts, ends)]),
    }
    save("user-totals", {"account": account, "price": price, "qty": qty}, golden)


def main():
    makers = [cull_visible, output_offsets, ragged_cumsum, linrec, sort_by_depth, trades_vwap,
              drawdown, user_totals]
    for i, make in enumerate(makers):
        make(np.random.default_rng(1000 + i))
        print("wrote", make.__name__)


if __name__ == "__main__":
    main()
