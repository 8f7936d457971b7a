#!/usr/bin/env python3
"""Summarise a kernel timeline written by tools/kernel_trace (libkernel_trace.so, CUDA_INJECTION64_PATH).

Over a window of the device timeline (by default its last --last-ms milliseconds, which skips start-up and warm-up):
  - busy and idle time of the device (the union of kernels, copies and memsets);
  - every idle gap classified: 'host' when the call that launched the next operation returned after the device had
    gone idle (the host was late), 'device' otherwise (launch latency, a dependency, a wait on an event);
  - the largest gaps with the operations on each side;
  - kernels by total time.

  python3 tools/kernel_trace.py trace.csv --last-ms 1000
"""
import argparse
import csv
import re
import sys
from collections import defaultdict

DEVICE_KINDS = ("kernel", "memcpy", "memset")


def short(name, width=70):
    # Template argument lists make kernel names unreadable: keep the function and a few leading characters.
    name = re.sub(r"\(.*$", "", name)
    depth, out = 0, []
    for ch in name:
        if ch == "<":
            if depth == 0:
                out.append("<…>")
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif depth == 0:
            out.append(ch)
    s = "".join(out).replace("void ", "").replace("(anonymous namespace)::", "")
    return s if len(s) <= width else s[: width - 1] + "…"


def load(path):
    dev, api = [], {}
    with open(path, newline="") as f:
        r = csv.reader(f)
        header = next(r, None)
        if header is None or header[:2] != ["kind", "start_ns"]:
            sys.exit(f"{path}: expected a kernel_trace CSV (header 'kind,start_ns,...'), got {header}")
        for row in r:
            if len(row) < 6:
                continue
            kind, start, end, _, corr, name = row[0], int(row[1]), int(row[2]), row[3], int(row[4]), row[5]
            if kind in DEVICE_KINDS:
                dev.append((start, end, kind, corr, name))
            elif kind in ("runtime", "driver"):
                # A runtime launch and the driver call under it share the correlation id only for the runtime;
                # keep the latest end for an id: the call that the device op waited for.
                prev = api.get(corr)
                if prev is None or end > prev[1]:
                    api[corr] = (start, end, name)
    if not dev:
        sys.exit(f"{path}: no kernels, copies or memsets recorded")
    dev.sort()
    return dev, api


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--last-ms", type=float, default=0, help="window: the last N ms of device activity (0: all)")
    ap.add_argument("--top", type=int, default=15)
    a = ap.parse_args()
    dev, api = load(a.csv)
    t_end = max(e for _, e, *_ in dev)
    t0 = t_end - a.last_ms * 1e6 if a.last_ms > 0 else dev[0][0]
    win = [d for d in dev if d[0] >= t0]
    if not win:
        sys.exit(f"no device operation in the last {a.last_ms} ms")
    span = t_end - win[0][0]

    busy, gaps, frontier, prev = 0, [], win[0][0], None
    for d in win:
        start, end = d[0], d[1]
        if start > frontier:
            launch = api.get(d[3])
            host_late = launch is not None and launch[1] > frontier
            gaps.append((start - frontier, frontier, host_late, prev, d))
        if end > frontier:
            busy += end - max(start, frontier)
            frontier = end
            prev = d
    idle = span - busy
    host = sum(g[0] for g in gaps if g[2])
    print(f"window {span / 1e6:.3f} ms: {len(win)} device operations, busy {busy / 1e6:.3f} ms "
          f"({100 * busy / span:.1f}%), idle {idle / 1e6:.3f} ms in {len(gaps)} gaps "
          f"(host late: {host / 1e6:.3f} ms; device side: {(idle - host) / 1e6:.3f} ms)")

    buckets = [(0, 2e3), (2e3, 1e4), (1e4, 1e5), (1e5, float("inf"))]
    print("\n| gap | count | ms | host late (ms) |\n|---|---|---|---|")
    for lo, hi in buckets:
        sel = [g for g in gaps if lo <= g[0] < hi]
        label = f"{lo / 1e3:g}-{hi / 1e3:g} us" if hi != float("inf") else f">= {lo / 1e3:g} us"
        print(f"| {label} | {len(sel)} | {sum(g[0] for g in sel) / 1e6:.3f} | "
              f"{sum(g[0] for g in sel if g[2]) / 1e6:.3f} |")

    leads = sorted(d[0] - api[d[3]][1] for d in win if d[3] in api)
    if leads:
        q = lambda p: leads[min(int(p * len(leads)), len(leads) - 1)] / 1e3
        print(f"\nhow far the host ran ahead (device start - launch call end), us: p10 {q(0.1):.1f}, "
              f"median {q(0.5):.1f}, p90 {q(0.9):.1f}")

    print(f"\nlargest gaps (us, at ms from the window's start):\n| gap | at | host late | before | after |")
    print("|---|---|---|---|---|")
    for g in sorted(gaps, key=lambda g: -g[0])[: a.top]:
        before = short(g[3][4], 45) if g[3] else "-"
        print(f"| {g[0] / 1e3:.1f} | {(g[1] - win[0][0]) / 1e6:.3f} | {'yes' if g[2] else 'no'} | {before} | "
              f"{short(g[4][4], 45)} |")

    by = defaultdict(lambda: [0, 0])
    for d in win:
        k = by[short(d[4])]
        k[0] += 1
        k[1] += d[1] - d[0]
    print(f"\nby kernel (sum of durations; overlapping streams count twice):\n| kernel | count | ms | mean us | % |")
    print("|---|---|---|---|---|")
    for name, (n, t) in sorted(by.items(), key=lambda kv: -kv[1][1])[: a.top * 2]:
        print(f"| {name} | {n} | {t / 1e6:.3f} | {t / n / 1e3:.1f} | {100 * t / busy:.1f} |")


if __name__ == "__main__":
    main()
