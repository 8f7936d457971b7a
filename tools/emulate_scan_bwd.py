#!/usr/bin/env python3
"""Float64 emulation of the GPU selective-scan backward schedule of selective_scan_bwd_async.cu (variant 2; the
arithmetic is variant 1's) against torch autograd of the plain recurrence. It checks the decomposition (tiles
from last to first, each from the forward's saved state after the tile before -- selective_scan.h: one per 32
steps at N <= 16 --, the 24-step tile forward, 8-step sub-tiles, 4-step reduction rounds, identity padding past
L, N < 16 padding) and variant 2's own hazard: du/ddelta/dz are written into the staged tile's slot of
their step while later rounds still read the tile, and leave only at the end of the tile. Not the CUDA code.

    python3 tools/emulate_scan_bwd.py            # the whole grid (a few minutes on one core)
    python3 tools/emulate_scan_bwd.py --quick    # a few shapes
    python3 tools/emulate_scan_bwd.py --variant=3  # variant 3's schedule: per 4-step round, recompute only that
        round (the second round of a sub-tile first advances its first 4 steps again) and the adjoint reads the
        round's a, h, B, C, (dt, dt u, dy) as held at recompute time
    python3 tools/emulate_scan_bwd.py --wred  # variant 4's warp pre-sum of dB/dC, lane by lane, warp widths 32
        and 64: the butterfly, the slot layout in red and the reducers' reads give every (step, dC|dB, state) its
        32-channel sum; stores and loads hit distinct banks (the schedule's arithmetic is variant 3's)
"""
import itertools
import sys

import numpy as np
import torch

CHUNK, TT, SUB, HALF, NP = 512, 32, 8, 4, 16
VARIANT = 3 if '--variant=3' in sys.argv else 2  # 3: per-round recompute, adjoint inputs held (module doc)
LOG2E, LN2 = 1.4426950408889634, 0.6931471805599453


def reference(u, delta, A, Bm, Cm, Dskip, z, dbias, softplus, dout):
    """Plain recurrence, torch float64 autograd: (out, grads dict)."""
    t = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in
         dict(u=u, delta=delta, A=A, Bm=Bm, Cm=Cm).items()}
    if Dskip is not None: t['D'] = torch.tensor(Dskip, dtype=torch.float64, requires_grad=True)
    if z is not None: t['z'] = torch.tensor(z, dtype=torch.float64, requires_grad=True)
    if dbias is not None: t['bias'] = torch.tensor(dbias, dtype=torch.float64, requires_grad=True)
    Bsz, D, L = u.shape
    G, N = Bm.shape[1], Bm.shape[2]
    grp = np.arange(D) // (D // G)
    dt = t['delta'] + (t['bias'][None, :, None] if dbias is not None else 0)
    if softplus: dt = torch.where(dt <= 20, torch.log1p(torch.exp(dt)), dt)
    Bd, Cd = t['Bm'][:, grp], t['Cm'][:, grp]  # (B, D, N, L)
    h = torch.zeros(Bsz, D, N, dtype=torch.float64)
    ys = []
    for s in range(L):
        h = torch.exp(dt[:, :, s, None] * t['A'][None]) * h + (dt[:, :, s] * t['u'][:, :, s])[..., None] * Bd[..., s]
        ys.append((h * Cd[..., s]).sum(-1))
    y = torch.stack(ys, -1)
    if Dskip is not None: y = y + t['D'][None, :, None] * t['u']
    if z is not None: y = y * t['z'] * torch.sigmoid(t['z'])
    y.backward(torch.tensor(dout))
    return {k: v.grad.numpy() for k, v in t.items()}


def emulate(u, delta, A, Bm, Cm, Dskip, z, dbias, softplus, dout):
    """The kernel's schedule, one (batch, channel) row per array row, states padded to NP."""
    Bsz, D, L = u.shape
    G, N = Bm.shape[1], Bm.shape[2]
    grp = np.arange(D) // (D // G)
    chunks = (L + CHUNK - 1) // CHUNK
    Lp = chunks * CHUNK
    pad = lambda x: np.concatenate([x, np.zeros(x.shape[:-1] + (Lp - L,))], -1)  # zero-filled copies past L
    R = Bsz * D
    U, DL, GO = pad(u).reshape(R, Lp), pad(delta).reshape(R, Lp), pad(dout).reshape(R, Lp)
    Z = pad(z).reshape(R, Lp) if z is not None else None
    Bp = np.zeros((Bsz, D, NP, Lp)); Bp[:, :, :N] = pad(Bm)[:, grp]
    Cp = np.zeros((Bsz, D, NP, Lp)); Cp[:, :, :N] = pad(Cm)[:, grp]
    Bp, Cp = Bp.reshape(R, NP, Lp), Cp.reshape(R, NP, Lp)
    A2 = np.zeros((D, NP)); A2[:, :N] = A * LOG2E
    A2 = np.tile(A2, (Bsz, 1))
    bias = np.tile(dbias if dbias is not None else np.zeros(D), Bsz)
    dsk = np.tile(Dskip if Dskip is not None else np.zeros(D), Bsz)
    sp = lambda v: np.where(v <= 20, np.log1p(np.exp(np.minimum(v, 20))), v)
    sig = lambda v: 1 / (1 + np.exp(-v))

    def stage(kt, full):  # -> d (R, TT, 4), e (R, TT, 2), B, C (R, NP, TT)
        sl = slice(kt * TT, kt * TT + TT)
        v = DL[:, sl] + bias[:, None]
        dt = sp(v) if softplus else v.copy()
        sg = np.where(v <= 20, sig(v), 1.0) if softplus else np.ones_like(v)
        dt[:, np.arange(kt * TT, kt * TT + TT) >= L] = 0.0
        uu = U[:, sl]
        dy, dzf = GO[:, sl].copy(), np.zeros_like(v)
        if Z is not None:
            zz = Z[:, sl]; s = sig(zz)
            dy = GO[:, sl] * zz * s
            dzf = GO[:, sl] * s * (zz * (1 - s) + 1)
        d = np.stack([dt, dt * uu, dy if full else 0 * dy, uu], -1)
        return d, np.stack([sg, dzf], -1), Bp[:, :, sl], Cp[:, :, sl]

    def step(h, d, Bt, s):  # one forward step of every state
        return np.exp2(d[:, s, 0:1] * A2) * h + Bt[:, :, s] * d[:, s, 1:2]

    # The forward's saved states (h after each 32-step tile), computed plainly.
    ntiles = (L + TT - 1) // TT
    states = np.zeros((R, ntiles, NP))
    h = np.zeros((R, NP))
    for kt in range(ntiles):
        d, _, Bt, _ = stage(kt, False)
        for s in range(TT): h = step(h, d, Bt, s)
        states[:, kt] = h

    du, ddelta, dzo = np.zeros((R, Lp)), np.zeros((R, Lp)), np.zeros((R, Lp))
    dB, dC = np.zeros((Bsz, G, NP, Lp)), np.zeros((Bsz, G, NP, Lp))
    dA, qc = np.zeros((R, NP)), np.zeros((R, NP))
    dD, ddb = np.zeros(R), np.zeros(R)
    gidx = np.tile(grp, Bsz) + np.repeat(np.arange(Bsz), D) * G  # (b, g) of each row
    cur = {}  # tt, tb of the sub-tile being reduced

    def reduce(r, vCs, vBs, gB, dtw, ys):  # a round's reducers (both variants)
        nonlocal dD, ddb
        tt, tb = cur['tt'], cur['tb']
        for s in range(r * HALF, r * HALF + HALF):
            t = tt + tb + s
            for bg in np.unique(gidx):
                rows = gidx == bg
                b_, g_ = divmod(bg, G)
                dC[b_, g_, :, t] += vCs[s][rows].sum(0)
                dB[b_, g_, :, t] += vBs[s][rows].sum(0)
            dd = d_cur['d'][:, tb + s].copy()
            ee = d_cur['e'][:, tb + s]
            ddt = (dd[:, 3] * gB[s] + dtw[s] * LN2) * ee[:, 0]
            d_cur['d'][:, tb + s] = np.stack([dd[:, 0] * gB[s] + dsk * dd[:, 2], ddt,
                                              ee[:, 1] * (dsk * dd[:, 3] + ys[s]), 0 * ddt], -1)
            if t < L:
                dD += dd[:, 2] * dd[:, 3]
                ddb += ddt
    d_cur = {}

    for kt in range(ntiles - 1, -1, -1):
        tt = kt * TT
        d, e, Bt, Ct = stage(kt, True)
        ht = states[:, kt - 1] if kt > 0 else np.zeros((R, NP))
        sub, h = {}, ht.copy()
        for i in range(TT // SUB - 1):
            for s in range(i * SUB, (i + 1) * SUB): h = step(h, d, Bt, s)
            sub[i] = h.copy()
        for i in range(TT // SUB - 1, -1, -1):
            tb = i * SUB
            hs = sub[i - 1] if i > 0 else ht
            cur.update(tt=tt, tb=tb); d_cur.update(d=d, e=e)
            if VARIANT == 2:
                a, hh, ys = [], [], []
                hp = hs
                for s in range(SUB):
                    a.append(np.exp2(d[:, tb + s, 0:1] * A2))
                    hp = a[-1] * hp + Bt[:, :, tb + s] * d[:, tb + s, 1:2]
                    hh.append(hp)
                    ys.append((Ct[:, :, tb + s] * hp).sum(-1))
                for r in range(SUB // HALF - 1, -1, -1):
                    gB, dtw, vCs, vBs = {}, {}, {}, {}
                    for s in range(r * HALF + HALF - 1, r * HALF - 1, -1):
                        dd = d[:, tb + s]  # must still be the staged inputs
                        G_ = Ct[:, :, tb + s] * dd[:, 2:3] + qc
                        vCs[s] = dd[:, 2:3] * hh[s]
                        vBs[s] = G_ * dd[:, 1:2]
                        gB[s] = (G_ * Bt[:, :, tb + s]).sum(-1)
                        qc = a[s] * G_
                        w = qc * (hh[s - 1] if s > 0 else hs)
                        dtw[s] = (A2 * w).sum(-1)
                        dA += w * dd[:, 0:1]
                    reduce(r, vCs, vBs, gB, dtw, ys)  # the round's reducers
            else:  # variant 3: per round, recompute only its kHalf steps from hs advanced through the earlier rounds
                for r in range(SUB // HALF - 1, -1, -1):
                    hr = hs.copy()
                    for s in range(r * HALF): hr = step(hr, d, Bt, tb + s)  # the extra advance (r = 1: 4 steps)
                    a, hh, ys = {}, {}, {}
                    hp = hr
                    for s in range(r * HALF, r * HALF + HALF):  # held in registers: a, h, B, C, (dt, dt u, dy)
                        a[s] = np.exp2(d[:, tb + s, 0:1] * A2)
                        hp = a[s] * hp + Bt[:, :, tb + s] * d[:, tb + s, 1:2]
                        hh[s] = hp
                        ys[s] = (Ct[:, :, tb + s] * hp).sum(-1)
                    held = {s: d[:, tb + s].copy() for s in range(r * HALF, r * HALF + HALF)}
                    gB, dtw, vCs, vBs = {}, {}, {}, {}
                    for s in range(r * HALF + HALF - 1, r * HALF - 1, -1):
                        dd = held[s]
                        G_ = Ct[:, :, tb + s] * dd[:, 2:3] + qc
                        vCs[s] = dd[:, 2:3] * hh[s]
                        vBs[s] = G_ * dd[:, 1:2]
                        gB[s] = (G_ * Bt[:, :, tb + s]).sum(-1)
                        qc = a[s] * G_
                        w = qc * (hh[s - 1] if s > r * HALF else hr)
                        dtw[s] = (A2 * w).sum(-1)
                        dA += w * dd[:, 0:1]
                    reduce(r, vCs, vBs, gB, dtw, ys)
        # write_tile: the slots now hold (du, ddelta, dz)
        du[:, tt:tt + TT], ddelta[:, tt:tt + TT], dzo[:, tt:tt + TT] = d[:, :, 0], d[:, :, 1], d[:, :, 2]
    out = dict(u=du[:, :L].reshape(Bsz, D, L), delta=ddelta[:, :L].reshape(Bsz, D, L),
               A=dA[:, :N].reshape(Bsz, D, N).sum(0), Bm=dB[:, :, :N, :L], Cm=dC[:, :, :N, :L])
    if Dskip is not None: out['D'] = dD.reshape(Bsz, D).sum(0)
    if z is not None: out['z'] = dzo[:, :L].reshape(Bsz, D, L)
    if dbias is not None: out['bias'] = ddb.reshape(Bsz, D).sum(0)
    return out


def case(L, N, G, opts, seed):
    rng = np.random.default_rng(seed)
    Bsz, D = 2, 2 * G + 1 if G == 1 else 2 * G  # odd channels per group for G = 1
    u = rng.standard_normal((Bsz, D, L))
    delta = rng.standard_normal((Bsz, D, L)) * 0.5 + (0 if opts['softplus'] else 0.8)
    if not opts['softplus']: delta = np.abs(delta) * 0.3
    A = -np.exp(rng.standard_normal((D, N)) * 0.5)
    Bm, Cm = rng.standard_normal((Bsz, G, N, L)), rng.standard_normal((Bsz, G, N, L))
    Dskip = rng.standard_normal(D) if opts['D'] else None
    z = rng.standard_normal((Bsz, D, L)) if opts['z'] else None
    dbias = rng.standard_normal(D) * 0.3 if opts['bias'] else None
    dout = rng.standard_normal((Bsz, D, L))
    args = (u, delta, A, Bm, Cm, Dskip, z, dbias, opts['softplus'], dout)
    ref, got = reference(*args), emulate(*args)
    worst = 0.0
    for k in ref:
        err = np.abs(ref[k] - got[k]).max() / max(np.abs(ref[k]).max(), 1e-300)
        worst = max(worst, err)
    return worst, sorted(ref)


def check_wred():
    """Variant 4 (warp_chan_sum, wred_slot, reduce_round's WRED branch) for one round, 128 threads; 0 if all pass."""
    threads, cb, q_lanes, red_w = 128, 32, 4, 2 * NP * HALF
    slot = lambda rw, n: NP * rw + (n ^ ((n >> 2) & 2))
    tid = np.arange(threads)
    b4, b3, b2 = (tid & 16) > 0, (tid & 8) > 0, (tid & 4) > 0
    total = 0
    for width in (32, 64):
        warps, bad = threads // width, 0
        vals = np.random.default_rng(width).standard_normal((threads, HALF, 8))  # (thread, step, vC[0..3] vB[0..3])
        cs = np.zeros((threads, HALF))
        for s in range(HALF):
            v = vals[:, s]
            # each round: keep the half named by the lane bit, add the partner's other half (xor stays in the warp)
            r1 = np.stack([np.where(b4, v[:, i + 4], v[:, i]) + np.where(b4, v[:, i], v[:, i + 4])[tid ^ 16]
                           for i in range(4)], 1)
            r2 = np.stack([np.where(b3, r1[:, i + 2], r1[:, i]) + np.where(b3, r1[:, i], r1[:, i + 2])[tid ^ 8]
                           for i in range(2)], 1)
            r = np.where(b2, r2[:, 1], r2[:, 0]) + np.where(b2, r2[:, 0], r2[:, 1])[tid ^ 4]
            cs[:, s] = r + r[tid ^ 32] if width == 64 else r
        red = np.full(warps * red_w, np.nan)
        base = {}
        for t in range(threads):
            if width == 64 and t & 32: continue  # the other half holds the same sums
            q, j = t % q_lanes, (t >> 2) & 7
            base[t] = (t // width) * red_w + 4 * slot(j >> 2, q * 4 + (j & 3))
            if not np.all(np.isnan(red[base[t]:base[t] + HALF])): bad += 1
            red[base[t]:base[t] + HALF] = cs[t]
        if width == 32:  # 16-byte stores by quarter-warps: 8 distinct bank quads each
            bad += sum(len({(base[8 * p + k] // 4) % 8 for k in range(8)}) != 8 for p in range(threads // 8))
        for t in range(threads):
            rs, rn, rw = t % HALF, (t // HALF) % NP, t // (HALF * NP)
            a0 = 4 * slot(rw, rn) + rs
            got = sum(red[a0 + w * red_w] for w in range(warps))
            want = sum(vals[c * q_lanes + rn // 4, rs, rw * 4 + rn % 4] for c in range(cb))
            bad += abs(got - want) > 1e-12 * (1 + abs(want))
        for wr in range(threads // 32):  # a reducer warp's scalar loads: 32 distinct banks
            for w in range(warps):
                banks = {(4 * slot(t // (HALF * NP), (t // HALF) % NP) + t % HALF + w * red_w) % 32
                         for t in range(32 * wr, 32 * wr + 32)}
                bad += len(banks) != 32
        print(f'warp width {width}: {"ok" if bad == 0 else f"{bad} failures"}')
        total += bad
    return 0 if total == 0 else 1


def main():
    if '--wred' in sys.argv: return check_wred()
    quick = '--quick' in sys.argv
    Ls = [1, 7, 40, 513, 1100] if quick else [1, 7, 40, 513, 600, 1024, 1100, 4096]
    Ns = [1, 16] if quick else [1, 4, 16]
    optsets = [dict(z=True, D=True, bias=True, softplus=True), dict(z=False, D=False, bias=False, softplus=False),
               dict(z=True, D=False, bias=True, softplus=False), dict(z=False, D=True, bias=False, softplus=True)]
    worst_all = 0.0
    for i, (L, N, G, opts) in enumerate(itertools.product(Ls, Ns, [1, 2], optsets)):
        if L == 4096 and i % 4 > 1: continue  # the long case: two option sets are enough
        w, keys = case(L, N, G, opts, i)
        worst_all = max(worst_all, w)
        print(f'L={L:5d} N={N:2d} G={G} {"".join(k[0] for k, v in opts.items() if v) or "-":4s} '
              f'worst rel err {w:.1e} over {",".join(keys)}', flush=True)
    print(f'worst relative error over every case and gradient: {worst_all:.1e}')
    return 0 if worst_all < 1e-10 else 1


if __name__ == '__main__':
    sys.exit(main())
