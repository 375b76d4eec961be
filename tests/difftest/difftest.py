#!/usr/bin/env python3
"""difftest.py — random differential testing of sluice: generates cases (gen.py), runs each
through the library with tests/difftest/driver.c on a backend (or both), judges the outputs
against the reference interpreter of the documented semantics (ref.py), and on a failure
shrinks the case to a minimal repro saved as a self-contained directory.

  difftest.py --driver PATH [--seed S] [--cases N | --seconds T] [--backend cpu|cuda|both]
  difftest.py --driver PATH --seed S --case I [--backend ...]      # one case again
  difftest.py --driver PATH --replay DIR [--backend ...]           # a saved repro again
  difftest.py --export DIR --seed S --cases N --backend both     # cases + run.sh for a GPU box
  difftest.py --judge-results DIR RESULTS.tgz --backend both     # judge what run.sh left

Every case follows from (seed, case index) alone. Exit status: 0 all passed, 1 a failure
(its replay command and repro directory are printed), 2 usage, 77 the backend asked for is not
available here (nothing was tested)."""
import argparse
import atexit
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import gen  # noqa: E402
import ref  # noqa: E402
from sltypes import NP, UINT_OF, is_float, width  # noqa: E402


HANG_SECONDS = 60      # a case runs in well under a second: more is a hang


class Skip(Exception):
    pass


class Refused(Exception):
    """The backend documents that it does not run a stage of this case (a CUDA build with
    SLUICE_CUDA_REDUCE=OFF refuses a `reduce` at session open, "backend not available"): the
    case is judged on the other backends only, and counted."""


REFUSED = []          # (case name, backend) of every such run, for the summary


def unavailable(err):
    """A driver's exit 77: a stage this backend does not run yet, or no backend at all."""
    if 'stage does not run on this backend yet' in err:
        return Refused(err.strip())
    return Skip(err.strip())


class NotRun(Exception):
    """An exported case run.sh did not reach (its time budget ran out)."""


# ---------------------------------------------------------------- files

def write_case(case, data, d):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, 'pipeline.yaml'), 'w') as f:
        f.write(gen.to_yaml(case))
    with open(os.path.join(d, 'case.json'), 'w') as f:
        json.dump(case, f, indent=1)
    for name, t, role in case['inputs']:
        a = data[name]
        if role == 'data' and t == 'bool':
            a = a.astype(np.uint8).view(np.bool_)     # raw bytes, 2 and 255 included
        np.save(os.path.join(d, name + '.npy'), a)
    with open(os.path.join(d, 'cuts.txt'), 'w') as f:
        f.write(''.join('%d\n' % c for c in case['cuts']))
    with open(os.path.join(d, 'params.txt'), 'w') as f:
        f.write(''.join('%d %s %s\n' % tuple(x) for x in case.get('param_sets') or []))


def read_npy(path):
    a = np.load(path, allow_pickle=False)
    if a.dtype == np.bool_:
        a = a.view(np.uint8)
    return a


def load_case(d):
    with open(os.path.join(d, 'case.json')) as f:
        case = json.load(f)
    data = {}
    for name, t, role in case['inputs']:
        a = read_npy(os.path.join(d, name + '.npy'))
        data[name] = a.astype(NP[t]) if role == 'data' else a.astype(np.int64)
    return case, data


def driver_args(case):
    args = ['--threads', str(case['threads']), '--max-batch-rows', str(case['max_batch_rows'])]
    if case.get('sort_memory'):
        args += ['--sort-memory', str(case['sort_memory'])]
    if case.get('mode') in ('warmup', 'oneshot'):
        args.append('--' + case['mode'])
    if case.get('pull_at_end'):
        args.append('--pull-at-end')
    return args


def read_results(outdir):
    """What a driver run left in outdir on another machine: rc, stderr, the outputs."""
    try:
        with open(os.path.join(outdir, 'rc')) as f:
            rc = int(f.read().strip() or '-1')
        with open(os.path.join(outdir, 'stderr')) as f:
            err = f.read()
    except OSError:
        raise NotRun(outdir)
    if rc == 77:
        raise unavailable(err)
    if rc == 124 or rc == 137:
        return 'hang', 'the driver ran over its time limit', None
    if rc > 128:
        return 'crash', 'driver killed by signal %d\n%s' % (rc - 128, err[-2000:]), None
    if rc == 3:
        return 'load', err[-3000:], None
    if rc != 0:
        return 'run', 'driver exit %d\n%s' % (rc, err[-3000:]), None
    return None, '', read_outputs(outdir)


class Outputs(list):
    """A driver run's output columns, (name, type, array) each; pulls: the rows pulled so far
    after each push (pulls.txt; None where the driver pulled only at the end)."""
    pulls = None


def read_outputs(outdir):
    outs = Outputs()
    with open(os.path.join(outdir, 'outputs.txt')) as f:
        for line in f:
            name, t = line.split()
            outs.append((name, t, read_npy(os.path.join(outdir, name + '.npy'))))
    if os.path.exists(os.path.join(outdir, 'pulls.txt')):
        with open(os.path.join(outdir, 'pulls.txt')) as f:
            outs.pulls = [int(x) for x in f.read().split()]
    return outs


def export_cases(args):
    """Writes cases and a shell script that runs them with the driver alone (no python, no
    numpy: for a GPU machine), leaving the results in one archive to judge here."""
    d = os.path.abspath(args.export)
    os.makedirs(d, exist_ok=True)
    lines = ['#!/bin/sh',
             '# run.sh - runs the exported difftest cases with the driver alone; judge the',
             '# results with difftest.py --judge-results. DRIVER (default',
             '# build-gpu/tests/difftest_driver), OUT (default ./out), BACKENDS ("%s"),' % (
                 ' '.join(backends_of(args.backend))),
             '# LIMIT (seconds per driver run, default 120), BUDGET (seconds in all, default',
             '# 480: later cases are left out so the archive is written in time).',
             'here=$(cd "$(dirname "$0")" && pwd)',
             'DRIVER=${DRIVER:-build-gpu/tests/difftest_driver}',
             'OUT=${OUT:-out}',
             'BACKENDS=${BACKENDS:-"%s"}' % ' '.join(backends_of(args.backend)),
             'LIMIT=${LIMIT:-120}',
             'BUDGET=${BUDGET:-480}',
             'start=$(date +%s)',
             'res="$OUT/difftest-results"',
             'mkdir -p "$res"',
             'one() {  # case tag backend args...',
             '  c=$1; tag=$2; be=$3; shift 3',
             '  [ $(( $(date +%s) - start )) -lt "$BUDGET" ] || return 0',
             '  o="$res/$c/${tag}_$be"; mkdir -p "$o"',
             '  timeout "$LIMIT" "$DRIVER" "$here/$c/pipeline.yaml" "$here/$c" "$o" --backend "$be" "$@" 2>"$o/stderr"',
             '  echo $? > "$o/rc"; n=$((n+1))',
             '}',
             'n=0']
    idx = args.start
    count = args.cases if args.cases is not None else 100
    for idx in range(args.start, args.start + count):
        case, data = gen.gen_case(args.seed, idx, args.max_rows, args.avoid,
                                  args.reduce == 'on')
        name = 'case_%d_%d' % (args.seed, idx)
        write_case(case, data, os.path.join(d, name))
        a = ' '.join(driver_args(case))
        lines.append('for be in $BACKENDS; do one %s got "$be" %s; done' % (name, a))
        if case['determinism']:
            lines.append('for be in $BACKENDS; do one %s again "$be" %s; done' % (name, a))
    lines += ['echo "difftest run.sh: $n driver runs in $(( $(date +%s) - start )) s"',
              'tar czf "$OUT/difftest-results.tgz" -C "$OUT" difftest-results && '
              'rm -rf "$res" && echo "results: $OUT/difftest-results.tgz"']
    with open(os.path.join(d, 'run.sh'), 'w') as f:
        f.write('\n'.join(lines) + '\n')
    os.chmod(os.path.join(d, 'run.sh'), 0o755)
    print('exported %d cases (seed %d, indices %d..%d) to %s; on the GPU machine run '
          '%s/run.sh, then judge here with --judge-results %s ARCHIVE' % (
              count, args.seed, args.start, args.start + count - 1, d, d, d))
    return 0


def judge_results(args):
    """Judges the results of an exported run (the archive run.sh wrote, or its folder)."""
    d = os.path.abspath(args.judge_results[0])
    res = args.judge_results[1]
    if os.path.isfile(res):
        tmp = tempfile.mkdtemp(prefix='difftest-results-')
        atexit.register(shutil.rmtree, tmp, True)
        subprocess.run(['tar', 'xzf', res, '-C', tmp], check=True)
        res = os.path.join(tmp, 'difftest-results')
    backends = backends_of(args.backend)
    n = failed = notrun = 0
    for name in sorted(os.listdir(d), key=lambda x: [int(p) if p.isdigit() else p
                                                     for p in x.split('_')]):
        if not name.startswith('case_'):
            continue
        case, data = load_case(os.path.join(d, name))
        try:
            fl = check(case, data, backends, None, results=os.path.join(res, name))
        except NotRun:
            notrun += 1
            continue
        n += 1
        if fl:
            failed += 1
            rep = os.path.join(os.path.abspath(args.out), name)
            shutil.rmtree(rep, ignore_errors=True)
            check(case, data, backends, None, keep=rep, results=os.path.join(res, name))
            for be in backends:
                src = os.path.join(res, name, 'got_' + be)
                if os.path.isdir(src):
                    shutil.rmtree(os.path.join(rep, 'got_' + be), ignore_errors=True)
                    shutil.copytree(src, os.path.join(rep, 'got_' + be))
            with open(os.path.join(rep, 'report.txt'), 'w') as f:
                f.write('%s\n' % fl)
            print('FAIL %s %s\n  repro: %s (replay on the GPU machine with the driver: '
                  '%s PIPELINE DIR OUT --backend cuda %s)' % (
                      name, fl, rep, 'difftest_driver', ' '.join(driver_args(case))))
    print('difftest: judged %d exported cases on %s (%d not run there); %d failed' % (
        n, '+'.join(backends), notrun, failed))
    if REFUSED:
        print('difftest: %d case runs were refused by a backend that does not run one of '
              'their stages yet (judged on the others only)' % len(REFUSED))
    return 1 if failed else 0


def run_driver(driver, d, backend, case, outdir):
    os.makedirs(outdir, exist_ok=True)
    for stale in ('outputs.txt', 'pulls.txt'):
        if os.path.exists(os.path.join(outdir, stale)):
            os.remove(os.path.join(outdir, stale))
    cmd = [driver, os.path.join(d, 'pipeline.yaml'), d, outdir, '--backend', backend] + \
        driver_args(case)
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=HANG_SECONDS)
    except subprocess.TimeoutExpired:
        return 'hang', 'the driver ran over %d s' % HANG_SECONDS, None
    if os.environ.get('DIFFTEST_TRACE'):
        print('  driver %.3f s rc %d: %s' % (time.time() - t0, p.returncode, ' '.join(cmd)),
              file=sys.stderr)
    if p.returncode == 77:
        raise unavailable(p.stderr)
    if p.returncode < 0:
        return 'crash', 'driver killed by signal %d\n%s' % (-p.returncode, p.stderr[-2000:]), None
    if p.returncode == 3:
        return 'load', p.stderr[-3000:], None
    if p.returncode != 0:
        return 'run', 'driver exit %d\n%s' % (p.returncode, p.stderr[-3000:]), None
    return None, '', read_outputs(outdir)


# ---------------------------------------------------------------- one case

class Failure:
    def __init__(self, category, message, backend, columns=()):
        self.category, self.message, self.backend = category, message, backend
        self.columns = list(columns)

    def __str__(self):
        return '[%s, %s] %s' % (self.category, self.backend, self.message)


def check(case, data, backends, driver, keep=None, results=None):
    """Runs one case; returns None or a Failure. keep: a directory that is left holding the
    case, the expected and the got columns (else a reused scratch directory is used).
    results: instead of running the driver, read what it wrote on another machine (the
    directory of this case in an --export run's results)."""
    d = keep or scratch_dir()

    def runner(be, tag):
        if results is not None:
            return read_results(os.path.join(results, tag + '_' + be))
        return run_driver(driver, d, be, case, os.path.join(d, tag + '_' + be))
    try:
        timing = {}
        try:
            expected = ref.run(case, data, timing)
        except Exception:         # a mistake of the tester itself, never a library verdict
            return Failure('reference', 'the reference cannot run this case (a tester bug):\n'
                           + traceback.format_exc(limit=4), '-')
        if results is None or keep:
            write_case(case, data, d)
        if keep:
            os.makedirs(os.path.join(d, 'expected'), exist_ok=True)
            for name, c in expected:
                a = c.data.view(np.bool_) if c.t == 'bool' else c.data
                np.save(os.path.join(d, 'expected', name + '.npy'), a)
        got = {}
        for be in backends:
            try:
                cat, msg, outs = runner(be, 'got')
            except Refused:
                REFUSED.append((case['name'], be))
                continue
            if cat:
                return Failure(cat, msg.strip(), be)
            names = [(n, t) for n, t, _ in outs]
            want = [(n, c.t) for n, c in expected]
            if names != want:
                return Failure('columns', 'outputs %s, expected %s' % (names, want), be)
            bad = []
            for (name, c), (_, _, a) in zip(expected, outs):
                if len(a) != len(c.data):
                    bad.append((name, '%s: %d rows, expected %d' % (name, len(a), len(c.data))))
                    continue
                m = ref.judge(name, c, a)
                if m:
                    bad.append((name, m))
            if bad:
                return Failure('values', '\n'.join(m for _, m in bad), be, [n for n, _ in bad])
            # When rows come out: on the CPU a push's results are complete when it returns
            # (sluice.h: nothing is in flight there), so the pulls after push b hold exactly
            # the rows the reference makes available by then.
            if be == 'cpu' and outs.pulls is not None:
                want = [int(np.count_nonzero(timing['avail'] <= b))
                        for b in range(len(outs.pulls))]
                if outs.pulls != want:
                    b = next(i for i, (g, w) in enumerate(zip(outs.pulls, want)) if g != w)
                    return Failure('timing', 'rows pulled so far after each push %s, expected %s '
                                   '(first differs after push %d)' % (outs.pulls, want, b), be)
            got[be] = outs
            if case['determinism']:
                # run_to_run: bitwise identical between runs on the same device and cutting
                cat, msg, again = runner(be, 'again')
                if cat:
                    return Failure(cat, msg.strip(), be)
                diff = [n for (n, _, a), (_, _, b) in zip(outs, again)
                        if a.tobytes() != b.tobytes()]
                if diff:
                    return Failure('determinism', 'determinism: run_to_run, yet a second run '
                                   'differs in %s' % ', '.join(diff), be, diff)
        if len(got) == 2:                  # CPU against GPU, beyond each against the reference
            bad = []
            for (name, c), (_, _, a), (_, _, b) in zip(expected, got['cpu'], got['cuda']):
                if c.kind != 'exact':
                    continue                # each within its bound already
                if c.t == 'bool':
                    diff = a != b
                elif is_float(c.t):
                    U = UINT_OF[width(c.t)]
                    ua, ub = a.view(U), b.view(U)
                    if c.quiets:          # a signalling NaN may come out quiet on either
                        qb = U(1 << (np.finfo(NP[c.t]).nmant - 1))
                        ua, ub = np.where(np.isnan(a), ua | qb, ua), np.where(np.isnan(b), ub | qb, ub)
                    diff = (ua != ub) & ~(np.isnan(a) & np.isnan(b) & (not c.nanbits))
                else:
                    diff = a != b
                if diff.any():
                    bad.append((name, '%s: CPU and GPU differ at %d rows (first %d)'
                                % (name, int(diff.sum()), int(np.nonzero(diff)[0][0]))))
            if bad:
                return Failure('cpu-gpu', '\n'.join(m for _, m in bad), 'both',
                               [n for n, _ in bad])
        return None
    finally:
        pass


_SCRATCH = []


def scratch_dir():
    """One working directory per process, reused by every case (removed at exit): inputs are
    rewritten per case and the driver's outputs.txt removed before each run."""
    if not _SCRATCH:
        _SCRATCH.append(tempfile.mkdtemp(prefix='difftest-'))
        atexit.register(shutil.rmtree, _SCRATCH[0], True)
    return _SCRATCH[0]


# ---------------------------------------------------------------- shrinking

def refs(e, out):
    if isinstance(e, list):
        if e and e[0] == 'col':
            out.add(e[2])
        for x in e[2:]:
            refs(x, out)
    elif isinstance(e, dict):
        for x in e.values():
            refs(x, out)
    return out


def stage_reads(st):
    r = set()
    k = st['kind']
    if k in ('map', 'flag'):
        for _, e in st['entries']:
            refs(e, r)          # entries read earlier ones: checked in order by validate
    elif k == 'filter':
        refs(st['expr'], r)
    elif k == 'compact':
        r.add(st['by'])
    elif k in ('scan', 'segmented_scan'):
        for key in ('of', 'a', 'b'):
            if st.get(key) is not None:
                refs(st[key], r)
        if k == 'segmented_scan':
            r.add(st['segments'][1])
    elif k == 'sort':
        r.update(st['keys'])
    elif k == 'reduce':
        for v in st['values']:
            for key in ('of', 'a', 'b'):
                if v.get(key) is not None:
                    refs(v[key], r)
        if st['segments'] is not None:
            r.add(st['segments'][1])
    return r


def validate(case):
    """Repairs what a removal leaves dangling (compact columns, sort values, outputs) and
    returns False where the case is no longer a valid pipeline the generator could write."""
    live = [n for n, t, role in case['inputs'] if role == 'data']
    inputs = {n for n, t, role in case['inputs']}
    params = {p for p, _, _ in case.get('params') or []}
    offsets_ok, batch_ok = True, True
    for st in case['stages']:
        k = st['kind']
        if k in ('map', 'flag'):
            for name, e in st['entries']:
                if not refs(e, set()) <= set(live) | params:
                    return False
                live.append(name)
            continue
        seg = st.get('segments') or [None, None]
        offs = {seg[1]} if seg[0] == 'offsets' else set()
        if k == 'reduce' and seg[0] == 'offsets' and (not offsets_ok or seg[1] not in inputs):
            return False
        if not (stage_reads(st) - offs) <= set(live) | params:
            return False
        if k in ('filter', 'compact'):
            offsets_ok = False
            if k == 'compact' and st['columns'] is not None:
                st['columns'] = [c for c in st['columns'] if c in live]
                if not st['columns']:
                    return False
                live = [c for c in live if c in st['columns']]
        elif k in ('scan', 'segmented_scan'):
            if st['reset'] == 'batch' and not batch_ok:
                return False
            if k == 'segmented_scan':
                how, col = st['segments']
                if how == 'offsets':
                    if not offsets_ok or col not in inputs:
                        return False
                elif col not in live:
                    return False
            live += list(st['into'].values()) if isinstance(st['into'], dict) else [st['into']]
        elif k == 'reduce':
            if st['per'] == 'batch' and not batch_ok:
                return False
            if seg[0] in ('flag', 'key') and seg[1] not in live:
                return False
            live = ([seg[1]] if seg[0] == 'key' else []) + \
                ([st['index']] if st['index'] is not None else [])
            for v in st['values']:
                live += list(v['into'].values()) if isinstance(v['into'], dict) else [v['into']]
            offsets_ok = False
            if st['per'] != 'batch' and seg[0] != 'offsets':
                batch_ok = False       # its rows are emitted later or at flush: no push
        elif k == 'sort':
            if st['per'] == 'batch' and not batch_ok:
                return False
            if st['per'] != 'batch':
                batch_ok = False
            offsets_ok = False
            if st['values'] is not None:
                st['values'] = [c for c in st['values'] if c in live]
                live = [c for c in live if c in st['keys'] or c in st['values']]
    if not live:
        return False
    if case['output'] is not None:
        case['output'] = [c for c in case['output'] if c in live] or None
    used = set()
    for st in case['stages']:
        if st['kind'] in ('scan', 'segmented_scan'):
            used.add(st['op'])
        elif st['kind'] == 'reduce':
            used.update(v['op'] for v in st['values'])
    case['operators'] = {k: v for k, v in case['operators'].items() if k in used}
    return True


def remove_rows(case, data, a, b):
    """The case without rows [a, b): data, cuts and offsets follow."""
    case = copy.deepcopy(case)
    m = b - a

    def pos(p):
        return p if p < a else (a if p < b else p - m)
    newdata = {}
    for name, t, role in case['inputs']:
        if role == 'offsets':
            o = [pos(int(p)) for p in data[name]]
            newdata[name] = np.array(o, dtype=np.int64)
        else:
            newdata[name] = np.concatenate([data[name][:a], data[name][b:]])
    case['cuts'] = [pos(c) for c in case['cuts']]
    case['rows'] -= m
    return case, newdata


def expr_slots(case):
    """(getter, setter) pairs for every expression in the case."""
    slots = []
    for st in case['stages']:
        if st['kind'] in ('map', 'flag'):
            for ent in st['entries']:
                slots.append((lambda ent=ent: ent[1], lambda v, ent=ent: ent.__setitem__(1, v)))
        elif st['kind'] == 'filter':
            slots.append((lambda st=st: st['expr'], lambda v, st=st: st.__setitem__('expr', v)))
        elif st['kind'] in ('scan', 'segmented_scan'):
            for key in ('a', 'b'):
                if st.get(key) is not None:
                    slots.append((lambda st=st, key=key: st[key],
                                  lambda v, st=st, key=key: st.__setitem__(key, v)))
            if isinstance(st.get('of'), dict):
                for f in st['of']:
                    slots.append((lambda st=st, f=f: st['of'][f],
                                  lambda v, st=st, f=f: st['of'].__setitem__(f, v)))
            elif st.get('of') is not None:
                slots.append((lambda st=st: st['of'], lambda v, st=st: st.__setitem__('of', v)))
        elif st['kind'] == 'reduce':
            for v in st['values']:
                for key in ('of', 'a', 'b'):
                    if isinstance(v.get(key), dict):
                        for f in v[key]:
                            slots.append((lambda d=v[key], f=f: d[f],
                                          lambda x, d=v[key], f=f: d.__setitem__(f, x)))
                    elif v.get(key) is not None:
                        slots.append((lambda v=v, key=key: v[key],
                                      lambda x, v=v, key=key: v.__setitem__(key, x)))
    return slots


def simpler(e):
    """Smaller expressions of the same type: one node replaced by a descendant of its type, or
    by a cast of a descendant that reads a column."""
    out = []

    def descendants(x):
        for y in x[2:]:
            if isinstance(y, list) and y and y[0] in gen_nodes():
                yield y
                yield from descendants(y)

    def walk(x, rebuild):
        if not (isinstance(x, list) and x and x[0] in gen_nodes()):
            return
        for y in descendants(x):
            if y[1] == x[1]:
                out.append(rebuild(copy.deepcopy(y)))
            elif x[0] != 'cast' and y[0] != 'lit' and gen.has_col(y):
                out.append(rebuild(['cast', x[1], copy.deepcopy(y)]))
        for i in range(2, len(x)):
            walk(x[i], lambda v, i=i, rb=rebuild, x=x: rb(x[:i] + [v] + x[i + 1:]))
    walk(e, lambda v: v)
    return [c for c in out if c != e]


def gen_nodes():
    return ('col', 'lit', 'cast', 'neg', 'pos', 'bnot', 'not', 'bin', 'call', 'cond')


def shrink_rows(case, data, attempt, t_end):
    """Drops big chunks of rows first: the later steps are cheaper on fewer rows."""
    size = case['rows'] // 2
    while size >= 64 and time.time() < t_end:
        c, d = remove_rows(case, data, 0, size)
        if attempt(c, d):
            case, data = c, d
        else:
            c, d = remove_rows(case, data, case['rows'] - size, case['rows'])
            if attempt(c, d):
                case, data = c, d
        size //= 2
    return case, data


def shrink(case, data, fails, budget):
    """Greedy shrinking while fails(case, data) stays true, for about `budget` seconds."""
    t_end = time.time() + budget
    progress = True

    def attempt(c, d):
        if time.time() > t_end:
            return False
        c = copy.deepcopy(c)
        if not validate(c):
            return False
        return fails(c, d)

    while progress and time.time() < t_end:
        progress = False
        case, data = shrink_rows(case, data, attempt, t_end)
        # batch cuts: none at all, then one fewer
        if case['cuts']:
            c = dict(case, cuts=[])
            if attempt(c, data):
                case, progress = c, True
            else:
                for i in range(len(case['cuts'])):
                    c = dict(case, cuts=case['cuts'][:i] + case['cuts'][i + 1:])
                    if attempt(c, data):
                        case, progress = c, True
                        break
        # stages, last first
        for i in reversed(range(len(case['stages']))):
            c = copy.deepcopy(case)
            del c['stages'][i]
            if c['stages'] and validate(c) and attempt(c, data):
                case, progress = c, True
        # map entries
        for i, st in enumerate(case['stages']):
            if st['kind'] in ('map', 'flag') and len(st['entries']) > 1:
                for j in range(len(st['entries'])):
                    c = copy.deepcopy(case)
                    del c['stages'][i]['entries'][j]
                    if validate(c) and attempt(c, data):
                        case, progress = c, True
                        break
        # a reduce's reductions, index and segments
        for i, st in enumerate(case['stages']):
            if st['kind'] != 'reduce':
                continue
            tries = [('values', st['values'][:j] + st['values'][j + 1:])
                     for j in range(len(st['values'])) if len(st['values']) > 1]
            tries += [('index', None)] if st['index'] is not None else []
            tries += [('segments', None)] if st['segments'] is not None else []
            tries += [('per', None)] if st['per'] is not None else []
            for key, val in tries:
                c = copy.deepcopy(case)
                c['stages'][i][key] = copy.deepcopy(val)
                if validate(c) and attempt(c, data):
                    case, progress = c, True
                    break
        # outputs: only what fails
        live_out = [n for n, _ in ref.run(copy.deepcopy(case), data)]
        for name in live_out:
            rest = [n for n in live_out if n != name]
            if rest:
                c = dict(case, output=rest)
                if attempt(c, data):
                    case, progress = c, True
                    live_out = rest
        # unused inputs
        for name, t, role in list(case['inputs']):
            used = set()
            for st in case['stages']:
                used |= stage_reads(st)
            if name not in used and (case['output'] is None or name not in case['output']):
                c = copy.deepcopy(case)
                c['inputs'] = [x for x in c['inputs'] if x[0] != name]
                if any(r == 'data' for _, _, r in c['inputs']):
                    d = {k: v for k, v in data.items() if k != name}
                    if attempt(c, d):
                        case, data, progress = c, d, True
        # rows: chunks of halving size (ddmin-like), the rows left deciding the passes
        size = case['rows'] // 2
        while size >= 1 and time.time() < t_end:
            a, removed = 0, False
            while a + size <= case['rows'] and time.time() < t_end:
                c, d = remove_rows(case, data, a, a + size)
                if attempt(c, d):
                    case, data, progress, removed = c, d, True, True
                else:
                    a += size
            if not removed:
                size //= 2
            else:
                size = min(size, case['rows'] // 2)
        # parameter changes between pushes
        if case.get('param_sets'):
            c = dict(case, param_sets=[])
            if attempt(c, data):
                case, progress = c, True
        # session settings: one thread, no internal cutting
        for key, simple in (('threads', 1), ('max_batch_rows', 0), ('determinism', False),
                            ('mode', 'push'), ('pull_at_end', False), ('sort_memory', 0)):
            if case.get(key, simple) != simple:
                c = dict(case)
                c[key] = simple
                if attempt(c, data):
                    case, progress = c, True
        # expressions
        changed = True
        while changed and time.time() < t_end:
            changed = False
            for idx in range(len(expr_slots(case))):
                e = expr_slots(case)[idx][0]()
                for s in simpler(e):
                    c = copy.deepcopy(case)
                    expr_slots(c)[idx][1](copy.deepcopy(s))
                    if attempt(c, data):
                        case, changed, progress = c, True, True
                        break
    return case, data


# ---------------------------------------------------------------- main

def replay_cmd(args, seed, idx):
    return '%s %s --driver %s --seed %d --case %d --backend %s%s%s' % (
        '/usr/bin/python3', os.path.relpath(os.path.abspath(__file__)), args.driver, seed, idx,
        args.backend, ''.join(' --avoid ' + a for a in args.avoid) +
        (' --reduce on' if args.reduce == 'on' else ''),
        '' if args.max_rows is None else ' --max-rows %d' % args.max_rows)


def backends_of(b):
    return ['cpu', 'cuda'] if b == 'both' else [b]


def handle_failure(args, case, data, fl, seed, idx):
    backends = backends_of(args.backend)
    print('FAIL case %s %s' % ('%d/%d' % (seed, idx) if idx is not None else '(replay)', fl))
    if idx is not None:
        print('replay: ' + replay_cmd(args, seed, idx))
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    tag = 'seed%d_case%d' % (seed, idx) if idx is not None else 'replay'
    orig = os.path.join(out, tag + '_original')
    shutil.rmtree(orig, ignore_errors=True)
    check(case, data, backends, args.driver, keep=orig)
    if not args.no_shrink and fl.category != 'reference':
        def fails(c, d):
            f = check(c, d, backends, args.driver)
            return f is not None and f.category == fl.category
        t0 = time.time()
        case, data = shrink(case, data, fails, args.shrink_seconds)
        print('shrunk in %.0f s to %d rows, %d stages, %d cuts' % (
            time.time() - t0, case['rows'], len(case['stages']), len(case['cuts'])))
    rep = os.path.join(out, tag)
    shutil.rmtree(rep, ignore_errors=True)
    fl2 = check(case, data, backends, args.driver, keep=rep) or fl
    with open(os.path.join(rep, 'report.txt'), 'w') as f:
        f.write('%s\n' % fl2)
        if idx is not None:
            f.write('original case: %s\n' % replay_cmd(args, seed, idx))
    with open(os.path.join(rep, 'replay.sh'), 'w') as f:
        f.write('#!/bin/sh\n# Replays this repro: the driver on pipeline.yaml, the inputs and cuts.txt,\n'
                '# then the judge. SLUICE_ROOT, DRIVER and BACKEND override the defaults.\n'
                'here=$(cd "$(dirname "$0")" && pwd)\n'
                'ROOT=${SLUICE_ROOT:-%s}\n'
                'exec /usr/bin/python3 "$ROOT/tests/difftest/difftest.py" --driver '
                '"${DRIVER:-%s}" --replay "$here" --backend "${BACKEND:-%s}"\n'
                % (os.path.dirname(os.path.dirname(HERE)), os.path.abspath(args.driver),
                   args.backend))
    os.chmod(os.path.join(rep, 'replay.sh'), 0o755)
    print('minimal repro: %s\n%s' % (rep, fl2))
    with open(os.path.join(rep, 'pipeline.yaml')) as f:
        print(f.read())
    if case['rows'] <= 32:            # small enough to read in a CI log
        for name, t, role in case['inputs']:
            a = data[name]
            vals = [float(x) for x in a] if a.dtype.kind == 'f' else [int(x) for x in a]
            print('%s (%s%s): %s' % (name, t, ', offsets' if role == 'offsets' else '', vals))
        print('cuts: %s; params set: %s; threads %d, max_batch_rows %d, sort_memory_bytes %d, '
              'mode %s' % (case['cuts'], case.get('param_sets') or [], case['threads'],
                           case['max_batch_rows'], case.get('sort_memory', 0),
                           case.get('mode', 'push')))
    return rep


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--driver', default=os.environ.get('DIFFTEST_DRIVER'))
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--start', type=int, default=0, help='first case index')
    ap.add_argument('--cases', type=int, default=None)
    ap.add_argument('--seconds', type=float, default=None)
    ap.add_argument('--case', type=int, default=None, help='run this one case')
    ap.add_argument('--replay', default=None, help='a saved repro directory')
    ap.add_argument('--replay-all', default=None, metavar='DIR',
                    help='every saved repro directory in DIR (regressions/)')
    ap.add_argument('--backend', choices=['cpu', 'cuda', 'both'], default='cpu')
    ap.add_argument('--max-rows', type=int, default=None, help='cap on rows per case')
    ap.add_argument('--out', default='difftest-failures')
    ap.add_argument('--no-shrink', action='store_true')
    ap.add_argument('--shrink-seconds', type=float, default=120)
    ap.add_argument('--keep-going', action='store_true', help='record failures and go on')
    ap.add_argument('--avoid', action='append', default=[], choices=sorted(gen.AVOIDABLE),
                    help='steer clear of an open finding: ' + '; '.join(
                        '%s: %s' % kv for kv in sorted(gen.AVOIDABLE.items())))
    ap.add_argument('--reduce', choices=['on', 'off'],
                    default=os.environ.get('DIFFTEST_REDUCE', 'off'),
                    help='generate `reduce` stages too (default off, or DIFFTEST_REDUCE): '
                    'the same seed gives other cases with it on')
    ap.add_argument('--export', metavar='DIR', help='write --cases cases and a run.sh that '
                    'runs them with the driver alone (a GPU machine without numpy)')
    ap.add_argument('--judge-results', nargs=2, metavar=('DIR', 'RESULTS'),
                    help="judge what an exported DIR's run.sh left (its .tgz or folder)")
    ap.add_argument('-v', '--verbose', action='store_true')
    args = ap.parse_args()
    try:
        if args.export:
            return export_cases(args)
        if args.judge_results:
            return judge_results(args)
    except Skip as e:
        print('difftest: SKIPPED: the CUDA backend was not available there (%s)' % e)
        return 77
    if not args.driver or not os.access(args.driver, os.X_OK):
        print('difftest: --driver PATH (the built difftest_driver) is required', file=sys.stderr)
        return 2
    backends = backends_of(args.backend)
    try:
        if args.replay:
            case, data = load_case(args.replay)
            fl = check(case, data, backends, args.driver)
            print('replay %s: %s' % (args.replay, fl or 'passes'))
            return 1 if fl else 0
        if args.replay_all:
            bad = 0
            dirs = sorted(x for x in os.listdir(args.replay_all)
                          if os.path.isfile(os.path.join(args.replay_all, x, 'case.json')))
            for x in dirs:
                case, data = load_case(os.path.join(args.replay_all, x))
                fl = check(case, data, backends, args.driver)
                bad += fl is not None
                print('replay %s: %s' % (x, fl or 'passes'))
            print('difftest: replayed %d repros from %s; %d failed' % (len(dirs), args.replay_all,
                                                                       bad))
            return 1 if bad or not dirs else 0
        if args.case is not None:
            case, data = gen.gen_case(args.seed, args.case, args.max_rows, args.avoid,
                                     args.reduce == 'on')
            if args.verbose:
                print(gen.to_yaml(case), 'rows', case['rows'], 'cuts', case['cuts'])
            fl = check(case, data, backends, args.driver)
            if fl:
                handle_failure(args, case, data, fl, args.seed, args.case)
                return 1
            print('case %d/%d passes' % (args.seed, args.case))
            return 0
        t0 = time.time()
        idx = args.start
        ran = 0
        failures = []
        while True:
            if args.cases is not None and ran >= args.cases:
                break
            if args.seconds is not None and time.time() - t0 >= args.seconds:
                break
            if args.cases is None and args.seconds is None and ran >= 100:
                break
            try:
                case, data = gen.gen_case(args.seed, idx, args.max_rows, args.avoid,
                                  args.reduce == 'on')
            except Exception:     # a mistake of the tester itself
                print('FAIL case %d/%d: the generator failed (a tester bug):\n%s\nreplay: %s' % (
                    args.seed, idx, traceback.format_exc(limit=4), replay_cmd(args, args.seed, idx)))
                failures.append((idx, Failure('generator', '', '-'), '-'))
                if not args.keep_going:
                    break
                idx += 1
                continue
            fl = check(case, data, backends, args.driver)
            ran += 1
            if args.verbose:
                print('case %d: %d rows, %d stages: %s' % (idx, case['rows'],
                                                           len(case['stages']), fl or 'ok'))
            if fl:
                rep = handle_failure(args, case, data, fl, args.seed, idx)
                failures.append((idx, fl, rep))
                if not args.keep_going:
                    break
            idx += 1
        dt = time.time() - t0
        print('difftest: %d cases (seed %d, indices %d..%d) on %s in %.0f s, %.0f cases/min;'
              ' %d failed' % (ran, args.seed, args.start, idx - (0 if failures and not
                                                                args.keep_going else 1),
                              '+'.join(backends), dt, 60.0 * ran / max(dt, 1e-9),
                              len(failures)))
        if REFUSED:
            print('difftest: %d of those case runs were refused by a backend that does not run '
                  'one of their stages yet (judged on the others only): %s' % (
                      len(REFUSED), ', '.join(sorted({be for _, be in REFUSED}))))
        for i, fl, rep in failures:
            print('  case %d: %s -> %s' % (i, fl.category, rep))
        return 1 if failures else 0
    except Skip as e:
        print('difftest: SKIPPED: the CUDA backend is not available here (%s)' % e)
        return 77


if __name__ == '__main__':
    sys.exit(main())
