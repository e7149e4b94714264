#!/usr/bin/env python3
"""Compares two float32 logit files [positions x vocab] (redlite eval output, goldens).

Prints max |a-b|, rms, argmax agreement and, with --greedy, whether the argmax of rows
OFFSET.. reproduces a greedy continuation; with --worst N, also the N rows whose largest
|a-b| is largest (where a few positions stand out from the rest). Exit status 1 if a given
tolerance is exceeded.
Uses numpy when present, else the standard library (slow for big files).
"""
import argparse
import array
import math
import sys


def load(path):
    try:
        import numpy as np
        return np.fromfile(path, dtype="<f4")
    except ImportError:
        a = array.array("f")
        with open(path, "rb") as f:
            a.frombytes(f.read())
        return a


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--rows", type=int, default=0, help="compare only the first N rows of each")
    p.add_argument("--max-abs", type=float, default=None, help="fail above this max |a-b|")
    p.add_argument("--rms", type=float, default=None, help="fail above this rms")
    p.add_argument("--argmax", type=float, default=None, help="fail below this argmax agreement")
    p.add_argument("--greedy", help="file of token ids: a greedy continuation to check")
    p.add_argument("--offset", type=int, default=0, help="row of a whose argmax is greedy[0]")
    p.add_argument("--worst", type=int, default=0, help="also list the N rows of largest |a-b|")
    p.add_argument("--label", default="")
    args = p.parse_args()
    if args.worst < 0:
        p.error(f"--worst {args.worst}: a number of rows, 0 or more")
    a, b = load(args.a), load(args.b)
    v = args.vocab
    rows = min(len(a), len(b)) // v
    if args.rows:
        rows = min(rows, args.rows)
    if rows == 0:
        print(f"{args.label}: no rows to compare ({len(a)} and {len(b)} values)")
        return 1
    try:
        import numpy as np
        A = np.asarray(a[: rows * v], dtype=np.float64).reshape(rows, v)
        B = np.asarray(b[: rows * v], dtype=np.float64).reshape(rows, v)
        d = np.abs(A - B)
        row_max = [float(x) for x in np.nan_to_num(d, nan=np.inf).max(axis=1)]
        max_abs = max(row_max)
        rms = float(np.sqrt(np.mean(d * d)))
        am_a, am_b = A.argmax(axis=1), B.argmax(axis=1)
        agree = float(np.mean(am_a == am_b))
    except ImportError:
        max_abs, ss, agree_n = 0.0, 0.0, 0
        am_a, row_max = [], []
        for r in range(rows):
            ra, rb = a[r * v:(r + 1) * v], b[r * v:(r + 1) * v]
            worst = 0.0
            for x, y in zip(ra, rb):
                e = abs(x - y)
                worst = max(worst, e if e == e else math.inf)
                ss += e * e
            max_abs = max(max_abs, worst)
            row_max.append(worst)
            ia = max(range(v), key=ra.__getitem__)
            am_a.append(ia)
            agree_n += ia == max(range(v), key=rb.__getitem__)
        rms, agree = math.sqrt(ss / (rows * v)), agree_n / rows
    ok = True
    msg = f"{args.label}: {rows} rows, max abs {max_abs:.3g}, rms {rms:.3g}, argmax agree {100 * agree:.2f}%"
    if args.max_abs is not None and not max_abs <= args.max_abs:
        ok = False
    if args.rms is not None and not rms <= args.rms:
        ok = False
    if args.argmax is not None and not agree >= args.argmax:
        ok = False
    if args.greedy:
        want = [int(t) for t in open(args.greedy).read().split()]
        got = [int(am_a[args.offset + i]) for i in range(len(want)) if args.offset + i < rows]
        same = got == want[: len(got)] and len(got) == len(want)
        msg += f", greedy {len(want)} tokens {'identical' if same else 'DIFFER'}"
        ok = ok and same
    print(msg + ("  ok" if ok else "  FAIL"))
    if args.worst:
        order = sorted(range(rows), key=lambda r: -row_max[r])[: args.worst]
        median = sorted(row_max)[rows // 2]
        print(f"{args.label}: worst rows " + ", ".join(f"{r} ({row_max[r]:.3g})" for r in order) +
              f"; median row {median:.3g}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
