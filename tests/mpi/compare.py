#!/usr/bin/env python3
"""compare.py REF_DIR GOT_DIR — the .npy outputs of a distributed run against one process's:
the same files, dtypes and lengths; integer and bool columns byte-identical; float columns
equal within a relative 1e-4 (f32) or 1e-9 (f64) of the larger magnitude (at least 1), with
NaNs in the same places. Float scans are grouped at rank boundaries (sluice_mpi.h,
Numerics), hence the bound; every other float (maps, sorts, min/max) is compared the same way
and is in practice bit-identical. Exit 1 with the first difference per file."""
import os
import sys

import numpy as np

ref_dir, got_dir = sys.argv[1], sys.argv[2]
ref_files = sorted(f for f in os.listdir(ref_dir) if f.endswith(".npy"))
got_files = sorted(f for f in os.listdir(got_dir) if not f.startswith("."))
bad = 0
if ref_files != got_files:
    print(f"files differ: {ref_files} vs {got_files}")
    sys.exit(1)
for f in ref_files:
    a = np.load(os.path.join(ref_dir, f))
    b = np.load(os.path.join(got_dir, f))
    if a.dtype != b.dtype or a.shape != b.shape:
        print(f"{f}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}")
        bad += 1
        continue
    if a.dtype.kind == "f":
        rtol = 1e-4 if a.dtype.itemsize <= 4 else 1e-9
        an, bn = np.isnan(a), np.isnan(b)
        with np.errstate(invalid="ignore", over="ignore"):
            scale = np.maximum(1.0, np.maximum(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64))))
            diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
            ok = (an & bn) | (~an & ~bn & ((a == b) | (diff <= rtol * scale)))
    else:
        w = a.dtype.itemsize
        ok = (a.view(np.uint8).reshape(len(a), w) == b.view(np.uint8).reshape(len(b), w)).all(axis=1)
    if not ok.all():
        i = int(np.argmin(ok))
        print(f"{f}: row {i} of {len(a)}: {a[i]!r} vs {b[i]!r}")
        bad += 1
sys.exit(1 if bad else 0)
