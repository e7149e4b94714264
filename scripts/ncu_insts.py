#!/usr/bin/env python3
"""Per-step instruction and byte counts of a decode step from `ncu --csv --page raw` over a window
of whole steps (every kernel of the step appears `steps` times in it): per kernel, the warp
instructions executed, shared-memory wavefronts and DRAM bytes read per step, and what the
instructions alone take at the GPU's peak issue rate (4 per SM per cycle).

    ncu_insts.py LOG STEPS SMS CLOCK_MHZ [STEP_US]

STEP_US, the step's measured time in the CUDA graph, adds the step's average issue rate."""
import collections
import csv
import math
import re
import sys

INST = "smsp__inst_executed.sum"
SMEM = "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"
DRAM = "dram__bytes_read.sum"
TIME = "gpu__time_duration.sum"


def short(name):
    name = re.sub(r"^void ", "", name)
    name = re.sub(r"(?<=<)unnamed>::", "", name)  # a template argument's namespace (ncu's raw names)
    name = re.sub(r"\(anonymous namespace\)::|<unnamed>::|unnamed>::|rl::(cuda|gguf)::", "", name)
    name = re.sub(r"\(TensorType\)", "", name)
    return re.sub(r"\(.*", "", name)[:34]


def number(text, unit):
    v = float(text.replace(",", ""))
    scale = {"": 1, "inst": 1, "byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "nsecond": 1e-3,
             "usecond": 1, "msecond": 1e3, "ns": 1e-3, "us": 1, "ms": 1e3, "B": 1, "KB": 1e3,
             "MB": 1e6, "GB": 1e9}
    return v * scale.get(unit, 1)


def main(path, steps, sms, clock_mhz, step_us=None):
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]
    rows = list(csv.reader(lines))
    head, units, data = rows[0], rows[1], rows[2:]
    col = {name: i for i, name in enumerate(head)}
    per = collections.OrderedDict()
    for r in data:
        k = short(r[col["Kernel Name"]])
        # One kernel serves several matrices: tell them apart by the grid and block.
        grid = math.prod(int(d) for d in r[col["Grid Size"]].strip("()").split(","))
        block = math.prod(int(d) for d in r[col["Block Size"]].strip("()").split(","))
        k = f"{k[:24]} {grid:>4}x{block:<3}"
        e = per.setdefault(k, collections.Counter())
        e["launches"] += 1
        for m in (INST, SMEM, DRAM, TIME):
            e[m] += number(r[col[m]], units[col[m]])
    odd = [k for k, e in per.items() if e["launches"] % steps]
    if odd:
        print(f"warning: launches not a multiple of {steps} for: {', '.join(odd)}")
    peak = sms * 4 * clock_mhz  # warp instructions per microsecond
    print(f"{len(data)} launches = {steps} steps; peak issue {peak / 1e6:.3f} M warp-inst/us")
    print(f"{'kernel':34} {'per step':>8} {'Minst':>8} {'us@peak':>8} {'smem Mwf':>9} "
          f"{'DRAM MB':>8} {'ncu us':>8}")
    tot = collections.Counter()
    for k, e in sorted(per.items(), key=lambda kv: -kv[1][INST]):
        n = e["launches"] / steps
        inst, smem, dram, t = (e[m] / steps for m in (INST, SMEM, DRAM, TIME))
        for m, v in ((INST, inst), (SMEM, smem), (DRAM, dram), (TIME, t)):
            tot[m] += v
        tot["n"] += n
        print(f"{k:34} {n:8.0f} {inst / 1e6:8.2f} {inst / peak:8.1f} {smem / 1e6:9.2f} "
              f"{dram / 1e6:8.1f} {t:8.1f}")
    print(f"{'total':34} {tot['n']:8.0f} {tot[INST] / 1e6:8.2f} {tot[INST] / peak:8.1f} "
          f"{tot[SMEM] / 1e6:9.2f} {tot[DRAM] / 1e6:8.1f} {tot[TIME]:8.1f}")
    if step_us:
        rate = tot[INST] / step_us / sms / clock_mhz
        print(f"step {step_us:.1f} us in the graph: {rate:.2f} warp-inst per SM per cycle "
              f"({100 * rate / 4:.1f} % of issue peak)")


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], int(a[1]), int(a[2]), float(a[3]), float(a[4]) if len(a) > 4 else None)
