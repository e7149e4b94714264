#!/usr/bin/env python3
"""Instructions executed per CUDA source line, per profiled launch, from `ncu --section
SourceCounters --page source --print-source cuda,sass --csv` (a -lineinfo build), with the shares
of the tensor-core kernels' parts: the formats' item work (tc_gemv.cuh's Tc<T>), the input staging
(write_digits, stage_own_blocks, input_factor, and the warp_sum of an RmsNorm's squares they
inline) and the router fold.

    ncu_lines.py LOG TC_GEMV [TOP]

TC_GEMV is the profiled build's src/cuda/tc_gemv.cuh: its section comments delimit the parts (the
items from the top to "---- The staged input", the staging from there to "A warp item"); the
device_utils.cuh beside it gives warp_sum's line (in these kernels only the staging calls it). TOP:
lines listed per launch (default 25)."""
import collections
import csv
import os
import re
import sys

def part_ranges(tc_gemv):
    lines = open(tc_gemv).read().splitlines()
    staged = next(i for i, l in enumerate(lines, 1) if l.startswith("// ---- The staged input"))
    item = next(i for i, l in enumerate(lines, 1) if l.startswith("// A warp item"))
    return range(1, staged), range(staged, item)


def warp_sum_line(tc_gemv):
    path = os.path.join(os.path.dirname(tc_gemv), "device_utils.cuh")
    lines = open(path).read().splitlines()
    head = next(i for i, l in enumerate(lines) if " warp_sum(" in l)
    return next(i for i, l in enumerate(lines[head:], head + 1) if "__shfl_xor_sync" in l)


def main(path, tc_gemv, top):
    ITEMS, STAGING = part_ranges(tc_gemv)
    WARP_SUM = warp_sum_line(tc_gemv)
    rows = list(csv.reader(open(path, errors="replace")))
    launches, cur, seen, file, col, bad = [], None, set(), None, None, 0
    for r in rows:
        if not r:
            continue
        if r[0] == "File Path":
            file = r[1].split("/")[-1]
        elif r[0] == "Function Name":
            # A launch's listing is one block per source file; a file seen again starts the next.
            if cur is None or r[1] != cur[0] or file in seen:
                cur = [r[1], collections.OrderedDict()]
                launches.append(cur)
                seen = set()
            seen.add(file)
        elif r[0] == "Line No":
            col = r.index("Instructions Executed")
        elif col is not None and r[0].isdigit():
            try:
                v = int(r[col].replace(",", "")) if r[col] not in ("-", "") else 0
            except (ValueError, IndexError):  # asm text with quotes breaks a few rows
                bad += 1
                continue
            e = cur[1].setdefault((file, int(r[0])), [0, r[1][:90]])
            e[0] += v
    if bad:
        print(f"({bad} unreadable rows skipped)")
    for fn, lines in launches:
        total = sum(v for v, _ in lines.values())
        part = collections.Counter()
        for (f, l), (v, _) in lines.items():
            if f == "tc_gemv.cuh" and l in ITEMS:
                part["items"] += v
            elif (f == "tc_gemv.cuh" and l in STAGING) or (f == "device_utils.cuh" and l == WARP_SUM):
                part["staging"] += v
            elif f == "router_fold.cuh":
                part["fold"] += v
        name = re.sub(r"\(rl::cuda::<unnamed>::.*", "", fn).replace("rl::cuda::<unnamed>::", "")
        print(f"\n{name}: {total / 1e6:.3f} M warp instructions; " + ", ".join(
            f"{k} {v / 1e6:.3f} M ({100 * v / total:.0f} %)" for k, v in part.items()))
        for (f, l), (v, text) in sorted(lines.items(), key=lambda kv: -kv[1][0])[:top]:
            print(f"  {v / 1e3:9.1f} K {100 * v / total:5.1f} %  {f}:{l}  {text}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 25)
