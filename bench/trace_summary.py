#!/usr/bin/python3
"""trace_summary.py — averages the step clocks that kernels built with SLUICE_NVRTC_TRACE=1
print (kernels/sl_trace.cuh), so that a traced `gpu_bench` run reads as one line per loop.

Usage: trace_summary.py LOG... (the output of e.g.
`SLUICE_NVRTC_TRACE=1 GPU_BENCH_JOBS=six gpu_bench 26 3`; run one job a log, since the lines
carry the loop's name, not the job's). For each loop it prints the cycles of each step of an
iteration averaged over the traced blocks: the row warps ("overlapped rows"; warp 0, which
takes the next tile, apart as "w0"), the look-back warp, and the per-block sub-step sums of
the ordered look-back ("(substeps)"), the runs' loop of a reduce by key
("runs: before the tiles", once a warp; "runs: tiles") and the offsets segments' loop of a
segmented reduce ("segments: tiles"). The steps are numbered as kernels/sl_tile.cuh's
overlapped_loop, runs_warp_loop and segments_warp_loop name them. Printing slows the kernels: only the shares
mean anything."""
import collections
import re
import sys

WARP_LINE = re.compile(r"sl_trace (.+?) block (\d+) warp (\d+) tiles (\d+): (.*)")
SUBSTEP_LINE = re.compile(r"sl_trace (.+?) block (\d+) tiles (\d+): (.*)")


def summarise(path):
    loops = collections.defaultdict(list)
    with open(path, errors="replace") as log:
        for line in log:
            m = WARP_LINE.match(line)
            if m:
                loop, warp = m.group(1), int(m.group(3))
                key = loop + (" w0" if loop.endswith("rows") and warp == 0 else "")
            else:
                m = SUBSTEP_LINE.match(line)
                if not m:
                    continue
                key = m.group(1) + " (substeps)"
            loops[key].append([int(x) for x in m.groups()[-1].split()])
    print("==", path)
    for key, rows in loops.items():
        steps = len(rows[0])
        avg = [sum(r[i] for r in rows) // len(rows) for i in range(steps)]
        print(f"  {key:40s} n={len(rows):3d} " + " ".join(f"{v:6d}" for v in avg) + f"  sum {sum(avg)}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: trace_summary.py LOG...")
    for log_path in sys.argv[1:]:
        summarise(log_path)
