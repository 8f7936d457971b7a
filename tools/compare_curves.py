#!/usr/bin/env python3
"""Compares two loss curves step by step (JSON from tools/train_parity.py, or an anvil metrics.jsonl).

  compare_curves.py REF.json TEST.json [--tol 0.01] [--svg plot.svg] [--every 20] [--summary table.txt]

Relative difference per step = |test - ref| / |ref|. PASS when the largest one is within the tolerance:
1% for f32 and 3% for bf16 mixed precision (the issue's bounds; --tol overrides). Exit code 0 on PASS, 1 on FAIL.
The SVG has both curves on one axis and the relative difference below them.
"""
import argparse
import json
import sys


def load(path):
    with open(path) as f:
        text = f.read()
    if path.endswith(".jsonl"):  # anvil's metrics.jsonl
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        rows = [r for r in rows if "loss" in r and "step" in r]
        return {"trainer": "anvil", "dtype": "?", "loss": [r["loss"] for r in rows]}
    return json.loads(text)


def polyline(values, x0, y0, w, h, lo, hi, n):
    pts = []
    for i, v in enumerate(values):
        x = x0 + w * (i / max(1, n - 1))
        y = y0 + h * (1 - (v - lo) / (hi - lo if hi > lo else 1))
        pts.append(f"{x:.1f},{y:.1f}")
    return " ".join(pts)


def write_svg(path, title, ref, test, rel, tol, names):
    W, H, L, R, T = 720, 480, 60, 20, 30
    top_h, bot_y, bot_h = 270, 350, 90
    n = len(ref)
    lo, hi = min(ref + test), max(ref + test)
    rhi = max(max(rel), tol) * 1.1
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" '
             f'font-size="12"><rect width="{W}" height="{H}" fill="white"/>',
             f'<text x="{L}" y="18" font-size="14">{title}</text>']
    pw = W - L - R
    for y0, h, a, b, fmt in ((T, top_h, lo, hi, "{:.2f}"), (bot_y, bot_h, 0, rhi, "{:.2%}")):
        parts.append(f'<rect x="{L}" y="{y0}" width="{pw}" height="{h}" fill="none" stroke="#888"/>')
        for k in range(5):
            v = a + (b - a) * k / 4
            y = y0 + h * (1 - k / 4)
            parts.append(f'<text x="{L - 5}" y="{y + 4:.1f}" text-anchor="end">{fmt.format(v)}</text>')
    for k in range(5):
        step = round(1 + (n - 1) * k / 4)
        x = L + pw * (step - 1) / max(1, n - 1)
        parts.append(f'<text x="{x:.1f}" y="{bot_y + bot_h + 16}" text-anchor="middle">{step}</text>')
    parts.append(f'<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" '
                 f'points="{polyline(ref, L, T, pw, top_h, lo, hi, n)}"/>')
    parts.append(f'<polyline fill="none" stroke="#d62728" stroke-width="1" stroke-dasharray="4,2" '
                 f'points="{polyline(test, L, T, pw, top_h, lo, hi, n)}"/>')
    ty = bot_y + bot_h * (1 - tol / rhi)
    parts.append(f'<line x1="{L}" x2="{L + pw}" y1="{ty:.1f}" y2="{ty:.1f}" stroke="#999" stroke-dasharray="2,2"/>')
    parts.append(f'<text x="{L + pw - 4}" y="{ty - 3:.1f}" text-anchor="end" fill="#666">tolerance {tol:.0%}</text>')
    parts.append(f'<polyline fill="none" stroke="#2ca02c" stroke-width="1" '
                 f'points="{polyline(rel, L, bot_y, pw, bot_h, 0, rhi, n)}"/>')
    lx = L + pw - 230
    for i, (name, color, dash) in enumerate(((names[0], "#1f77b4", ""), (names[1], "#d62728", "4,2"))):
        y = T + 18 + 16 * i
        parts.append(f'<line x1="{lx}" x2="{lx + 24}" y1="{y - 4}" y2="{y - 4}" stroke="{color}" '
                     f'stroke-width="1.5" stroke-dasharray="{dash}"/><text x="{lx + 30}" y="{y}">{name}</text>')
    parts.append(f'<text x="{L}" y="{T + top_h + 16}">loss (top), |difference| / reference (bottom) vs step</text>')
    parts.append("</svg>\n")
    with open(path, "w") as f:
        f.write("\n".join(parts))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ref")
    ap.add_argument("test")
    ap.add_argument("--tol", type=float, default=None, help="default: 0.01 (f32), 0.03 (bf16)")
    ap.add_argument("--svg")
    ap.add_argument("--every", type=int, default=20, help="print every Nth step (and the worst one)")
    ap.add_argument("--summary", help="append the one-line verdict to this file")
    a = ap.parse_args()
    ref, test = load(a.ref), load(a.test)
    dtype = ref.get("dtype", "f32")
    tol = a.tol if a.tol is not None else (0.03 if dtype == "bf16" else 0.01)
    r, t = ref["loss"], test["loss"]
    if len(r) != len(t) or not r:
        print(f"FAIL: {len(r)} reference steps, {len(t)} test steps")
        return 1
    rel = [abs(b - x) / abs(x) for x, b in zip(r, t)]
    worst = max(range(len(rel)), key=rel.__getitem__)
    names = (ref.get("trainer", "ref"), test.get("trainer", "test"))
    print(f"{'step':>5} {names[0][:12]:>12} {names[1][:12]:>12} {'rel diff':>9}")
    for i in range(len(r)):
        if i == 0 or (i + 1) % a.every == 0 or i == worst or i == len(r) - 1:
            print(f"{i + 1:5d} {r[i]:12.5f} {t[i]:12.5f} {rel[i]:9.2e}{'  <- max' if i == worst else ''}")
    ok = rel[worst] <= tol
    label = f"{ref.get('arch', '?')} {dtype}"
    verdict = (f"{label:12s} steps {len(r):4d}  max rel diff {rel[worst]:.2e} at step {worst + 1}  "
               f"mean {sum(rel) / len(rel):.1e}  tol {tol:.0%}  {'PASS' if ok else 'FAIL'}")
    print(verdict)
    if a.svg:
        write_svg(a.svg, f"{label}: {names[0]} vs {names[1]} (max rel diff {rel[worst]:.2e})", r, t, rel, tol,
                  names)
    if a.summary:
        with open(a.summary, "a") as f:
            f.write(verdict + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
