"""GPU time of training steps split by kernel, from an Nsight Compute CSV of `anvil bench train`.

    ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
        anvil bench train --model mamba-130m --batch 16 --seq 2048 --warmup 0 --steps 1 > prof.csv
    python3 tools/train_profile.py prof.csv --steps 1 --step-ms 199

ncu runs kernels one at a time, so each duration is the kernel alone (no launch gaps, no overlap); the sum is
what the step would take back to back. Kernels are grouped by name (template arguments and parameters dropped),
largest first; --steps divides the totals into per-step numbers and --step-ms (the step time `anvil bench
train` printed without ncu) shows how much of the real step lies between kernels.
"""
import argparse
import csv
import re
import sys
from collections import defaultdict


def read_rows(path):
    """(kernel name, ns) per launch, in launch order."""
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu prints its own log lines before the CSV
    rows = []
    for r in csv.DictReader(lines):
        if r.get("Metric Name") == "gpu__time_duration.sum":
            rows.append((r["Kernel Name"], float(r["Metric Value"].replace(",", ""))))
    return rows


def label(name):
    """The kernel's name without its namespace, template arguments and parameter list."""
    base = re.sub(r"\(.*", "", name.replace("(anonymous namespace)::", ""))
    depth, out = 0, []
    for ch in base:  # drop <...> (nested)
        depth += ch == "<"
        if depth == 0:
            out.append(ch)
        depth -= ch == ">"
    base = "".join(out).replace("void ", "").strip()
    short = base.split("::")[-1]
    return short[:70] if short and not short.startswith("Kernel") else name[:70]  # cutlass::Kernel2<...>: keep args


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--steps", type=int, default=1, help="training steps the CSV covers")
    ap.add_argument("--step-ms", type=float, default=0.0, help="step time measured without the profiler")
    ap.add_argument("--top", type=int, default=30)
    a = ap.parse_args()
    rows = read_rows(a.csv)
    if not rows:
        sys.exit(f"train_profile: no gpu__time_duration rows in {a.csv} (expected ncu --csv output)")
    total = defaultdict(float)
    count = defaultdict(int)
    for name, ns in rows:
        total[label(name)] += ns
        count[label(name)] += 1
    all_ms = sum(total.values()) / 1e6 / a.steps
    print(f"{len(rows) // a.steps} kernels per step, {all_ms:.2f} ms of kernel time per step"
          + (f" (step measured {a.step_ms:.2f} ms: {a.step_ms - all_ms:+.2f} ms outside kernels)" if a.step_ms else ""))
    print(f"| kernel | launches/step | ms/step | % |")
    print(f"|---|---|---|---|")
    for lab, ns in sorted(total.items(), key=lambda kv: -kv[1])[: a.top]:
        ms = ns / 1e6 / a.steps
        print(f"| {lab} | {count[lab] / a.steps:g} | {ms:.3f} | {100 * ms / all_ms:.1f} |")


if __name__ == "__main__":
    main()
