"""Where the GPU sits idle during training steps, from an Nsight Systems trace of `anvil bench train`.

    nsys profile -t cuda -o run anvil bench train --model mamba-130m --batch 16 --seq 2048 --warmup 1 --steps 3
    nsys stats --report cuda_gpu_trace --format csv --output run run.nsys-rep   # -> run_cuda_gpu_trace.csv
    python3 tools/train_gaps.py run_cuda_gpu_trace.csv --steps 3

The GPU trace lists every kernel, memset and copy with its start and duration. Taking the last --steps steps
(each starts at the embedding forward kernel, the first launch of a step), the script sums busy time and the
gaps between consecutive operations, then groups the gaps by the operation that ends them (the one the GPU was
waiting for): a gap before a kernel that follows a device-to-host copy is a host round trip, a run of short
gaps before memsets is launch-bound work. Every number is per step.
"""
import argparse
import csv
import re
import sys
from collections import defaultdict


def col(header, *keys):
    for k in keys:
        for i, h in enumerate(header):
            if h.strip().lower().startswith(k):
                return i
    sys.exit(f"train_gaps: no column starting with {keys} in {header}")


def short(name):
    name = re.sub(r"\(.*", "", name.replace("(anonymous namespace)::", "").replace("void ", ""))
    depth, out = 0, []
    for ch in name:
        depth += ch == "<"
        if depth == 0:
            out.append(ch)
        depth -= ch == ">"
    s = "".join(out).split("::")[-1].strip()
    return (s or name)[:60]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--step-marker", default="embedding_fwd", help="substring of the first kernel of a step")
    ap.add_argument("--top", type=int, default=15)
    a = ap.parse_args()
    with open(a.csv, newline="") as f:
        rows = list(csv.reader(f))
    hi = next(i for i, r in enumerate(rows) if r and any(c.strip().lower().startswith("start") for c in r))
    header, body = rows[hi], [r for r in rows[hi + 1:] if len(r) == len(rows[hi])]
    cs, cd, cn = col(header, "start"), col(header, "duration"), col(header, "name")
    ops = sorted((int(float(r[cs])), int(float(r[cd])), r[cn]) for r in body)
    marks = [i for i, o in enumerate(ops) if a.step_marker in o[2]]
    if len(marks) < a.steps:
        sys.exit(f"train_gaps: found {len(marks)} step starts ('{a.step_marker}'), expected >= {a.steps}")
    first = marks[-a.steps]
    ops = ops[first:]
    span = ops[-1][0] + ops[-1][1] - ops[0][0]
    busy = sum(d for _, d, _ in ops)
    by_next, count = defaultdict(int), defaultdict(int)
    gaps, end = [], ops[0][0] + ops[0][1]
    for i in range(1, len(ops)):
        s, d, n = ops[i]
        g = max(0, s - end)
        prev = ops[i - 1][2]
        key = f"{short(prev)} -> {short(n)}"
        by_next[key] += g
        count[key] += 1
        gaps.append((g, key))
        end = max(end, s + d)
    st = a.steps
    print(f"{len(ops) // st} GPU operations per step; span {span / 1e6 / st:.2f} ms, busy {busy / 1e6 / st:.2f} ms, "
          f"idle {(span - busy) / 1e6 / st:.2f} ms per step (includes the last step's tail only once)")
    print()
    print("| gap before (previous -> next) | count per step | idle µs per step | µs each |")
    print("|---|---|---|---|")
    for k, v in sorted(by_next.items(), key=lambda kv: -kv[1])[:a.top]:
        print(f"| {k} | {count[k] / st:.0f} | {v / 1e3 / st:.1f} | {v / 1e3 / max(count[k], 1):.2f} |")
    print()
    big = sorted(gaps, reverse=True)[:a.top]
    print("largest single gaps (µs): " + ", ".join(f"{g / 1e3:.0f} ({k})" for g, k in big))


if __name__ == "__main__":
    main()
