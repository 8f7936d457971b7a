"""One decode step's GPU time split by kernel, from an Nsight Compute CSV of `anvil bench decode` run eagerly.

    ANVIL_GRAPHS=0 ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
        anvil bench decode --model DIR --device gpu --batch 1 --tokens 4 > prof.csv
    python3 tools/decode_profile.py prof.csv --step-ms 5.0 [--weights-gb 16.06 --copy-tbs 4.2]

ncu runs kernels one at a time, so each duration is the kernel alone: no launch gaps and no overlap. The step is
the kernels between the last two launches of the embedding kernel (the first kernel of every step); --step-ms
(the graph-replayed step time measured by `anvil bench decode`) shows how much of the real step lies between
kernels. The skinny GEMMs of a layer come in a fixed order (q|k|v, o, gate|up, down), which names them.
"""
import argparse
import csv
import re
import sys
from collections import OrderedDict

LAYER_GEMMS = ["gemm q|k|v", "gemm o", "gemm gate|up", "gemm down"]
GROUPS = [  # (substring of the demangled kernel name, label); first match wins
    ("embedding", "embedding"),
    ("add_rms_norm", "add + rms_norm"),
    ("rms_norm", "rms_norm"),
    ("rope_append", "rope_append"),
    ("attention_decode", "attention_decode"),
    ("decode_", "attention_decode"),
    ("swiglu", "swiglu"),
    ("splitk_reduce", "gemm split-K reduce"),
    ("skinny_kernel", "gemm"),
]


def read_rows(path):
    """(kernel name, grid, ns) per launch, in launch order."""
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu prints its own log lines before the CSV
    rows = []
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        rows.append((r["Kernel Name"], r.get("Grid Size", ""), float(r["Metric Value"].replace(",", ""))))
    return rows


def label(name):
    for key, lab in GROUPS:
        if key in name:
            return lab
    return re.sub(r"\(.*", "", name)[:60]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--step-ms", type=float, default=0.0, help="graph-replayed step time, for the gap line")
    ap.add_argument("--weights-gb", type=float, default=0.0, help="bytes read per step (weights), for % of floor")
    ap.add_argument("--copy-tbs", type=float, default=4.2, help="copy bandwidth the floor is taken at")
    a = ap.parse_args()
    rows = read_rows(a.csv)
    starts = [i for i, (n, _, _) in enumerate(rows) if "embedding_fwd" in n]
    if len(starts) < 2:
        sys.exit(f"decode_profile: expected at least 2 launches of the embedding kernel in {a.csv}, got "
                 f"{len(starts)} (of {len(rows)} kernels): profile at least 2 decode steps")
    step = rows[starts[-2]:starts[-1]]
    groups = OrderedDict()
    gemm_i = 0
    for name, grid, ns in step:
        lab = label(name)
        if lab == "gemm":
            lab = LAYER_GEMMS[gemm_i % 4] if "matmul" not in name else "gemm lm_head"
            gemm_i += 1
        g = groups.setdefault(lab, [0, 0.0])
        g[0] += 1
        g[1] += ns
    # The last skinny launch of the step after 32 layers x 4 is the lm_head when it runs the skinny kernel.
    if gemm_i % 4 == 1 and "gemm q|k|v" in groups:
        extra = [ns for name, _, ns in step if label(name) == "gemm"][-1]
        groups["gemm q|k|v"][0] -= 1
        groups["gemm q|k|v"][1] -= extra
        groups["gemm lm_head"] = [1, extra]
    total = sum(g[1] for g in groups.values())
    print(f"kernels in one step: {len(step)}; sum of kernel times {total / 1e3:.1f} us")
    print()
    print("| kernel | launches | total us | us per launch | share of kernel time |")
    print("|---|---|---|---|---|")
    for lab, (n, ns) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
        print(f"| {lab} | {n} | {ns / 1e3:.1f} | {ns / 1e3 / n:.2f} | {100 * ns / total:.1f}% |")
    print()
    if a.step_ms > 0:
        gap = a.step_ms * 1e3 - total / 1e3
        print(f"graph-replayed step {a.step_ms * 1e3:.1f} us: kernels {total / 1e3:.1f} us, between kernels "
              f"{gap:.1f} us ({gap / len(step):.2f} us per launch)")
    if a.weights_gb > 0:
        floor_us = a.weights_gb * 1e9 / (a.copy_tbs * 1e12) * 1e6
        print(f"weight-read floor {floor_us:.1f} us at {a.copy_tbs} TB/s: kernel time is {100 * floor_us / (total / 1e3):.1f}% "
              f"efficient")
    print(f"PROFILE kernels={len(step)} kernel_us={total / 1e3:.1f}")


if __name__ == "__main__":
    main()
