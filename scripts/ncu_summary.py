#!/usr/bin/env python3
"""Summarises `ncu --csv --page details` output: one line per profiled kernel with its duration,
DRAM throughput, SM frequency, occupancy and issue statistics (for docs/CUDA_DECODE.md)."""
import csv
import re
import sys

WANT = [
    ("Duration", "dur"),
    ("DRAM Throughput", "dram%"),
    ("Memory Throughput", "mem%"),
    ("SM Frequency", "smclk"),
    ("Achieved Occupancy", "occ%"),
    ("Registers Per Thread", "regs"),
    ("No Eligible", "noelig%"),
    ("Issued Warp Per Scheduler", "issue"),
    ("Warp Cycles Per Issued Instruction", "cyc/inst"),
]
# Raw stall metrics (warps stalled per issued instruction), when ncu was given them.
STALL = "smsp__average_warps_issue_stalled_"
STALL_SUFFIX = "_per_issue_active.ratio"


def short(name):
    name = re.sub(r"\(.*", "", name)
    name = re.sub(r"rl::cuda::(\(anonymous namespace\)::)?", "", name)
    return name[:40]


def main(path):
    rows = {}
    order = []
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]
    for r in csv.DictReader(lines):
        key = r["ID"]
        if key not in rows:
            rows[key] = {"name": short(r["Kernel Name"]), "grid": r.get("Grid Size", ""),
                         "block": r.get("Block Size", "")}
            order.append(key)
        for metric, label in WANT:
            if r["Metric Name"] == metric:
                rows[key][label] = f'{r["Metric Value"]} {r["Metric Unit"]}'.strip()
        m = r["Metric Name"]
        if m.startswith(STALL) and m.endswith(STALL_SUFFIX):
            rows[key].setdefault("stalls", []).append((float(r["Metric Value"] or 0),
                                                       m[len(STALL):-len(STALL_SUFFIX)]))
    for row in rows.values():  # the three largest stall reasons
        top = sorted(row.pop("stalls", []), reverse=True)[:3]
        row["stalls"] = " ".join(f"{n}={v:.1f}" for v, n in top)
    cols = ["name", "grid", "block"] + [l for _, l in WANT] + ["stalls"]
    print(" | ".join(cols))
    for k in order:
        print(" | ".join(rows[k].get(c, "") for c in cols))


if __name__ == "__main__":
    main(sys.argv[1])
