#!/usr/bin/python3
"""cpu_vs_numpy.py — issue 2's CPU performance bar: sluice's CPU backend against NumPy and
memcpy on the same data, in the same run.

Workloads (2^26 rows by default):
  scan    f32 inclusive sum           vs np.cumsum(x)
  filter  x > 0 on f32 (half kept)    vs x[x > 0]
  sort    u32 keys                    vs np.sort(k, kind='stable')

For each: `sluice gen` writes the input once, `sluice bench --in` times the pipeline (one
warm-up, median of --repeat runs) beside a memcpy of the same bytes, then NumPy runs the same
operation on the same file's data. The bar: sluice at least as fast as NumPy on all three, and
scan and filter at least half of memcpy bandwidth (bytes read + bytes written).

Run through bench/cpu_vs_numpy.sh, which clears OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE for
this command only (they slow a current NumPy; see the environment notes).

    bench/cpu_vs_numpy.sh [--rows 2^26] [--repeat 5] [--sluice build/sluice] [--keep DIR]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

WORKLOADS = {
    "scan": {
        "what": "f32 inclusive sum scan",
        "yaml": "sluice: 1\nname: bench-scan-f32\ninput:\n  x: f32\n"
                "stages:\n  - scan: {of: x, op: sum, into: c}\noutput: [c]\n",
        "numpy": lambda cols: np.cumsum(cols["x"]),
        "numpy_text": "np.cumsum(x)",
        "bytes": lambda cols, out: cols["x"].nbytes + out.nbytes,
    },
    "filter": {
        "what": "filter x > 0 on f32",
        "yaml": "sluice: 1\nname: bench-filter-f32\ninput:\n  x: f32\n"
                "stages:\n  - filter: x > 0\noutput: [x]\n",
        "numpy": lambda cols: cols["x"][cols["x"] > 0],
        "numpy_text": "x[x > 0]",
        "bytes": lambda cols, out: cols["x"].nbytes + out.nbytes,
    },
    "sort": {
        "what": "u32 key sort",
        "yaml": "sluice: 1\nname: bench-sort-u32\ninput:\n  k: u32\n"
                "stages:\n  - sort: {key: k}\noutput: [k]\n",
        "numpy": lambda cols: np.sort(cols["k"], kind="stable"),
        "numpy_text": "np.sort(k, kind='stable')",
        "bytes": lambda cols, out: cols["k"].nbytes + out.nbytes,
    },
}

FIGURE = re.compile(r"^\s+(\S+)\s+median ([0-9.]+) s\s+([0-9.]+) Mrows/s\s+([0-9.]+) GB/s")


def parse_rows(text):
    if "^" in text:
        base, exp = text.split("^")
        return int(base) ** int(exp)
    return int(text)


def find_sluice(root):
    for cand in ["build/sluice", "build-cli/sluice", "build-release/sluice"]:
        path = os.path.join(root, cand)
        if os.access(path, os.X_OK):
            return path
    found = shutil.which("sluice")
    if found:
        return found
    sys.exit("cannot find the sluice program: build it or pass --sluice PATH")


def sluice_bench(sluice, yaml_path, data_dir, repeat):
    cmd = [sluice, "bench", yaml_path, "--in", data_dir, "--repeat", str(repeat),
           "--backend", "cpu"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit("`%s` failed (%d):\n%s%s" % (" ".join(cmd), res.returncode, res.stdout,
                                                 res.stderr))
    figures = {}
    for line in res.stdout.splitlines():
        m = FIGURE.match(line)
        if m:
            figures[m.group(1)] = {"s": float(m.group(2)), "gbs": float(m.group(4))}
    if "sluice" not in figures or "memcpy" not in figures:
        sys.exit("cannot read sluice bench's output:\n" + res.stdout)
    return figures


def numpy_time(op, cols, repeat):
    out = op(cols)  # warm-up, also the output whose size is counted
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        op(cols)
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), out


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", default="2^26")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sluice", default=None)
    ap.add_argument("--keep", default=None, help="directory for the generated data (kept)")
    ap.add_argument("--only", default=None, help="comma-separated workloads")
    args = ap.parse_args()
    rows = parse_rows(args.rows)
    sluice = args.sluice or find_sluice(root)
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        if var in os.environ:
            print("note: %s is set; run through bench/cpu_vs_numpy.sh to clear it" % var)
    work = args.keep or tempfile.mkdtemp(prefix="sluice-bench-")
    os.makedirs(work, exist_ok=True)
    names = args.only.split(",") if args.only else list(WORKLOADS)

    commit = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or "unknown"
    print("sluice CPU vs NumPy vs memcpy: %d rows, median of %d, commit %s, %s, numpy %s, "
          "%d CPUs" % (rows, args.repeat, commit, time.strftime("%Y-%m-%d"), np.__version__,
                       os.cpu_count()))
    results = []
    try:
        for name in names:
            w = WORKLOADS[name]
            yaml_path = os.path.join(work, name + ".yaml")
            with open(yaml_path, "w") as f:
                f.write(w["yaml"])
            data = os.path.join(work, name)
            subprocess.run([sluice, "gen", yaml_path, "--rows", str(rows), "--out", data,
                            "--seed", "1"], check=True, capture_output=True)
            fig = sluice_bench(sluice, yaml_path, data, args.repeat)
            cols = {os.path.splitext(fn)[0]: np.load(os.path.join(data, fn))
                    for fn in os.listdir(data) if fn.endswith(".npy")}
            np_s, out = numpy_time(w["numpy"], cols, args.repeat)
            np_gbs = w["bytes"](cols, out) / np_s / 1e9
            results.append((name, w, fig, np_s, np_gbs))
            if not args.keep:
                shutil.rmtree(data)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    print()
    print("| workload | sluice s | sluice GB/s | NumPy (%s) s | sluice speed-up vs NumPy "
          "| memcpy GB/s | sluice / memcpy | bar |" % "same op")
    print("|---|---|---|---|---|---|---|---|")
    failed = 0
    for name, w, fig, np_s, np_gbs in results:
        s, m = fig["sluice"], fig["memcpy"]
        speedup = np_s / s["s"] if s["s"] > 0 else 0.0
        frac = s["gbs"] / m["gbs"] if m["gbs"] > 0 else 0.0
        ok = speedup >= 1.0 and (name == "sort" or frac >= 0.5)
        failed += not ok
        print("| %s: %s vs `%s` | %.4f | %.2f | %.4f | %.2fx | %.2f | %.2f | %s |" % (
            name, w["what"], w["numpy_text"], s["s"], s["gbs"], np_s, speedup, m["gbs"], frac,
            "met" if ok else "NOT met"))
    print()
    print("bar: sluice >= NumPy on each; scan and filter >= 0.5 of memcpy bandwidth. %s" %
          ("all met" if failed == 0 else "%d not met" % failed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
