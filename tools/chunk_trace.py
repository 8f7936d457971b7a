#!/usr/bin/env python3
"""Reads decode_stack's chunk timelines (a build with -DANVIL_DECODE_STACK_CHUNK_TRACE=ON, run with
ANVIL_CHUNK_TRACE_OUT=FILE; src/kernels/decode_stack/decode_stack_chunk_trace.cuh) and says what paces the weight
ring: the producer's own path per chunk, the copies, or the consumers.

  tools/chunk_trace.py FILE                          where a chunk's time goes, over all blocks (µs)
  tools/chunk_trace.py FILE --period 104 --phase gate+up:20-75 --phase down:76-103
                                                     per block, each phase from its first chunk's arrival to its
                                                     last chunk's release, and the spread over blocks (chunks
                                                     are numbered within a period of this many: one layer); then
                                                     the per-chunk times of the phase's chunks alone
  tools/chunk_trace.py FILE --block 5 --timeline 60  block 5's first 60 chunks, event by event

Events per chunk (µs): 0 the producer waits for the slot, 1 the slot is free, 2 the copy is issued, 3 / 4 the
first consumer warp starts / ends its wait, 5 the slot's last release. The clocks are per SM: times compare within
a block only.
"""
import argparse
import sys

import numpy as np

MAGIC = b"ANVILCT1"


def load(path):
    """(stamps in µs from each block's first stamp, shape (blocks, chunks, 6); the first chunk's number)."""
    with open(path, "rb") as f:
        head = f.read(48)
        if len(head) < 48 or head[:8] != MAGIC:
            sys.exit(f"chunk_trace: {path} is not a chunk trace (expected the magic {MAGIC!r} and a 48-byte header)")
        blocks, chunks, first, events, khz = np.frombuffer(head[8:], dtype=np.int64)
        data = np.frombuffer(f.read(), dtype=np.uint64)
    if data.size != blocks * chunks * events or events != 6:
        sys.exit(f"chunk_trace: {path} holds {data.size} stamps, expected {blocks} x {chunks} x 6")
    a = data.reshape(blocks, chunks, events).astype(np.float64)
    # The chunks every block stamped completely, from the first on (a step of a small model streams fewer than the
    # window holds; the rest stay zero).
    whole = (a > 0).all(axis=(0, 2))
    n = int(np.argmin(whole)) if not whole.all() else chunks
    if n < 2:
        sys.exit(f"chunk_trace: {path} has {n} chunk(s) that every block stamped, expected 2 or more "
                 f"(did the step stream {first + 2} chunks or more?)")
    a = a[:, :n]
    t0 = a[:, :1, 0:1]
    return (a - t0) / (khz / 1e3), int(first)


def stats(name, x):
    x = x[np.isfinite(x)].ravel()
    if x.size == 0:
        print(f"  {name:36s} (no chunk)")
        return
    print(f"  {name:36s} mean {x.mean():6.3f}  p10 {np.percentile(x, 10):6.3f}  p50 {np.median(x):6.3f}  "
          f"p90 {np.percentile(x, 90):6.3f}")


def summary(a, slots):
    n = a.shape[1]
    interval = (a[:, -1, 2] - a[:, 0, 2]) / (n - 1)
    print(f"{a.shape[0]} blocks x {n} chunks; one chunk issued every {interval.mean():.3f} µs per block "
          f"({16384 / interval.mean() / 1e3:.1f} GB/s per SM at 16 KB a chunk, bubbles included)")
    print("producer (µs per chunk)")
    stats("waits for the slot", a[:, :, 1] - a[:, :, 0])
    stats("slot free -> copy issued", a[:, :, 2] - a[:, :, 1])
    stats("issued -> next chunk's wait", a[:, 1:, 0] - a[:, :-1, 2])
    stats(f"slot released -> claimed ({slots} slots)", a[:, slots:, 1] - a[:, :-slots, 5])
    print("copies and consumers (µs per chunk)")
    early = a[:, :, 3] < a[:, :, 2]
    stats("issued -> seen full", a[:, :, 4] - a[:, :, 2])
    if early.any():
        stats("  the same, consumer already waiting", (a[:, :, 4] - a[:, :, 2])[early])
    stats("consumer's wait", a[:, :, 4] - a[:, :, 3])
    stats("seen full -> last release", a[:, :, 5] - a[:, :, 4])
    print(f"  consumer waiting before the copy was issued: {100 * early.mean():.1f}% of chunks")


def phases(a, first, period, specs):
    for spec in specs:
        name, rng = spec.split(":")
        lo, hi = (int(v) for v in rng.split("-"))
        durs = []
        for base in range(first - first % period, first + a.shape[1], period):
            j0, j1 = base + lo - first, base + hi - first
            if j0 >= 0 and j1 < a.shape[1]:
                durs.append(a[:, j1, 5] - a[:, j0, 4])
        if not durs:
            print(f"{name}: no whole period in the trace")
            continue
        d = np.array(durs)  # periods x blocks
        print(f"{name:10s} {d.shape[0]} periods: block mean {d.mean():6.2f} µs, p10 {np.percentile(d, 10):6.2f}, "
              f"p90 {np.percentile(d, 90):6.2f}, slowest block (mean over periods) {d.max(axis=1).mean():6.2f}")
        # The phase's chunks alone; the trace's last chunk is left out (it has no next chunk to wait for).
        js = np.array([j for base in range(first - first % period, first + a.shape[1], period)
                       for j in range(base + lo - first, base + hi - first + 1) if 0 <= j < a.shape[1] - 1])
        stats("  slot free -> copy issued", a[:, js, 2] - a[:, js, 1])
        stats("  issued -> next chunk's wait", a[:, js + 1, 0] - a[:, js, 2])
        stats("  issued -> seen full", a[:, js, 4] - a[:, js, 2])
        stats("  consumer's wait", a[:, js, 4] - a[:, js, 3])
        stats("  seen full -> last release", a[:, js, 5] - a[:, js, 4])


def timeline(a, first, block, n):
    e = a[block]
    print(f"block {block}, µs: claim wait / free / issued | consumer in / full / released")
    for j in range(min(n, e.shape[0])):
        r = e[j]
        print(f"{first + j:6d}  {r[0]:8.2f} {r[1]:8.2f} {r[2]:8.2f} | {r[3]:8.2f} {r[4]:8.2f} {r[5]:8.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--slots", type=int, default=12, help="ring slots of the run (ANVIL_DECODE_STACK_SLOTS)")
    ap.add_argument("--period", type=int, help="chunks per layer of one block")
    ap.add_argument("--phase", action="append", default=[], help="NAME:FIRST-LAST chunk numbers within a period")
    ap.add_argument("--block", type=int, default=0)
    ap.add_argument("--timeline", type=int, default=0, help="print this many chunks of --block")
    args = ap.parse_args()
    a, first = load(args.file)
    if args.phase and not args.period:
        sys.exit("chunk_trace: --phase needs --period")
    if not 0 <= args.block < a.shape[0]:
        sys.exit(f"chunk_trace: --block {args.block}: the trace has blocks 0 to {a.shape[0] - 1}")
    summary(a, args.slots)
    if args.phase:
        phases(a, first, args.period, args.phase)
    if args.timeline:
        timeline(a, first, args.block, args.timeline)


if __name__ == "__main__":
    main()
