#!/usr/bin/env python3
"""CPU emulation of skinny_gemm's tensor-core path (src/kernels/skinny_gemm/skinny_gemm.cu, skinny_mma_kernel).

Nothing runs on a GPU where this was written, so this script replays the kernel's index arithmetic lane by lane:
which weight and x values each lane loads (launch_mma's grid, warps per slab and K split; the ring of U packs;
mma_quad's register assignment), rebuilds the A, B matrices the hardware sees from those registers with the PTX
ISA's fragment tables for mma.m16n8k16 (.bf16/.f16: "Matrix Fragments for mma.m16n8k16 with floating point
type"), multiplies, hands D back to the lanes with the ISA's C/D table, then applies the kernel's epilogue (NaN
rows, cross-warp sums in order, split-K partials, the (m, n) each d[i] is stored to) and compares with x @ w^T.
It also checks fp8_pair_to_16's bit placement + power-of-two multiply against the e4m3 value of all 256 codes.
Run: python3 tools/emulate_skinny_mma.py   (exit status 0 when every case matches)
"""
import itertools
import math
import sys

import numpy as np

WARP, KWARPS, U = 32, 8, 4


# ---- the PTX ISA fragment tables (independent of the kernel's code) -------------------------------------------
def isa_a(regs):  # regs[lane][r] = (lo, hi): A is 16 x 16
    A = np.zeros((16, 16))
    for lane in range(WARP):
        g, t = lane >> 2, lane % 4
        for i in range(8):  # element a_i sits in register i // 2, half i % 2
            row = g if (i < 2 or 4 <= i < 6) else g + 8
            col = 2 * t + (i & 1) + (8 if i >= 4 else 0)
            A[row, col] = regs[lane][i // 2][i % 2]
    return A


def isa_b(regs):  # regs[lane][r] = (lo, hi): B is 16 (k) x 8 (n)
    B = np.zeros((16, 8))
    for lane in range(WARP):
        g, t = lane >> 2, lane % 4
        for i in range(4):
            row = 2 * t + (i & 1) + (8 if i >= 2 else 0)
            B[row, g] = regs[lane][i // 2][i % 2]
    return B


def isa_d_to_lanes(D):  # D 16 x 8 -> per lane c[0..3]
    out = []
    for lane in range(WARP):
        g, t = lane >> 2, lane % 4
        out.append([D[g if i < 2 else g + 8, 2 * t + (i & 1)] for i in range(4)])
    return out


# ---- fp8 decode as the kernel does it ---------------------------------------------------------------------------
def e4m3_value(code, fnuz):
    s = -1.0 if code & 0x80 else 1.0
    e, m = (code >> 3) & 0xF, code & 7
    if fnuz:
        if code == 0x80:
            return math.nan
        bias = 8
    else:
        if code & 0x7F == 0x7F:
            return math.nan
        bias = 7
    return s * (2.0 ** (1 - bias) * m / 8 if e == 0 else 2.0 ** (e - bias) * (1 + m / 8))


def bits16_value(b, bf16):
    if bf16:
        return float(np.array([b << 16], dtype=np.uint32).view(np.float32)[0])
    return float(np.array([b], dtype=np.uint16).view(np.float16)[0])


def byte_perm(x, y, sel):  # CUDA __byte_perm (no sign-replication modes)
    src = [(x >> (8 * i)) & 0xFF for i in range(4)] + [(y >> (8 * i)) & 0xFF for i in range(4)]
    return sum(src[(sel >> (4 * i)) & 7] << (8 * i) for i in range(4))


def fp8_pair_to_16(x, fnuz, bf16):  # -> (lo value, hi value); the fma by a power of two is exact (checked below)
    shift = 4 if bf16 else 1
    mul = (0x7B00 if fnuz else 0x7B80) if bf16 else (0x5800 if fnuz else 0x5C00)
    v = ((x & 0x7F007F00) >> shift) | (x & 0x80008000)
    c = bits16_value(mul, bf16)
    return bits16_value(v & 0xFFFF, bf16) * c, bits16_value(v >> 16, bf16) * c


def nan_flag(w, fnuz):
    if fnuz:
        z = w ^ 0x80808080
        return ((z - 0x01010101) & ~z & 0x80808080) & 0xFFFFFFFF
    return ((w & 0x7F7F7F7F) + 0x01010101) & 0x80808080


def check_fp8_decode():
    bad = 0
    for fnuz, bf16 in itertools.product((False, True), (True, False)):
        for c0 in range(256):
            c1 = (c0 * 37 + 11) & 0xFF
            w = c0 | (c1 << 8) | (0x3C << 16) | (0x01 << 24)  # bytes 2, 3 finite in both flavours
            lo = fp8_pair_to_16(byte_perm(w, 0, 0x1404), fnuz, bf16)
            for code, got in ((c0, lo[0]), (c1, lo[1])):
                ref = e4m3_value(code, fnuz)
                if math.isnan(ref):
                    if nan_flag(w, fnuz) == 0:
                        bad += 1
                        print(f"NaN code {code:#x} not flagged (fnuz={fnuz})")
                elif got != ref or math.copysign(1, got) != math.copysign(1, ref):
                    bad += 1
                    print(f"code {code:#x} fnuz={fnuz} bf16={bf16}: got {got}, want {ref}")
                elif abs(ref) > 0 and not (abs(ref) >= (2.0**-126 if bf16 else 2.0**-14)):
                    bad += 1  # the product must be a normal 16-bit number (the fma is then exact)
            hi = fp8_pair_to_16(byte_perm(w, 0, 0x3424), fnuz, bf16)
            if hi != (e4m3_value(0x3C, fnuz), e4m3_value(0x01, fnuz)):
                bad += 1
                print(f"hi pair wrong: {hi}")
            if not any(math.isnan(e4m3_value(b, fnuz)) for b in (c0, c1)) and nan_flag(w, fnuz):
                bad += 1
                print(f"false NaN flag for {c0:#x} {c1:#x} fnuz={fnuz}")
    print(f"fp8 decode: 4 x 256 codes, {bad} mismatches")
    return bad == 0


# ---- the kernel, lane by lane ----------------------------------------------------------------------------------
def launch_config(M, N, K, E, cus):  # launch_mma
    STEP = U * 4 * E
    slabs, steps = -(-N // 16), -(-K // STEP)
    slots = 2 * cus * KWARPS
    wps = 1
    while wps < KWARPS and slabs * wps * 2 <= slots and wps * 2 <= steps:
        wps *= 2
    gx = -(-slabs // (KWARPS // wps))
    S = min(max(1, 2 * cus // gx), max(1, steps // wps))
    k_split = -(-(-(-K // S)) // STEP) * STEP
    S = -(-K // k_split)
    return wps, gx, S, k_split


def run_kernel(x, wvals, wcodes, M, N, K, E, fnuz, cus):
    """x (M, K) values; wvals (N, K) values (16-bit) or None; wcodes (N, K) uint8 fp8 codes or None."""
    fp8 = wcodes is not None
    bf16 = True
    MB = 8 if M <= 8 else 16
    MG, Q, PK = MB // 8, E // 4, 4 * E
    STEP = U * PK
    wps, gx, S, k_split = launch_config(M, N, K, E, cus)
    part = np.zeros((S, M, N))
    written = np.zeros((S, M, N), dtype=bool)

    def wpack(n, k, ke):  # the lane's 16-byte pack of row n at k: E values (fp8: codes) past ke / N zero
        if n >= N or k >= ke:
            return [0] * E
        src = wcodes if fp8 else wvals
        return [src[n, k + i] if k + i < ke else 0 for i in range(E)]

    def xpack(m, k, ke):
        if m >= M or k >= ke:
            return [0.0] * E
        return [x[m, k + i] if k + i < ke else 0.0 for i in range(E)]

    def quad(pack, q):  # mma_quad: (lo pair, hi pair, nan flag)
        if not fp8:
            return (pack[4 * q], pack[4 * q + 1]), (pack[4 * q + 2], pack[4 * q + 3]), 0
        w = pack[4 * q] | (pack[4 * q + 1] << 8) | (pack[4 * q + 2] << 16) | (pack[4 * q + 3] << 24)
        lo = fp8_pair_to_16(byte_perm(w, 0, 0x1404), fnuz, bf16)
        hi = fp8_pair_to_16(byte_perm(w, 0, 0x3424), fnuz, bf16)
        return lo, hi, nan_flag(w, fnuz)

    for by in range(S):
        kb, ke = by * k_split, min(K, by * k_split + k_split)
        nsteps = -(-(ke - kb) // STEP)
        for bx in range(gx):
            red = {}
            for warp in range(KWARPS):
                kw = warp % wps
                n0 = (bx * (KWARPS // wps) + warp // wps) * 16
                acc = [[[0.0] * 4 for _ in range(MG)] for _ in range(WARP)]
                nan_lo, nan_hi = [0] * WARP, [0] * WARP
                s = kw
                while s < nsteps:
                    for u in range(U):
                        kp = kb + s * STEP + u * PK
                        if kp >= ke:
                            continue
                        wl = [wpack(n0 + (l >> 2), kp + (l % 4) * E, ke) for l in range(WARP)]
                        wh = [wpack(n0 + (l >> 2) + 8, kp + (l % 4) * E, ke) for l in range(WARP)]
                        xv = [[xpack(mg * 8 + (l >> 2), kp + (l % 4) * E, ke) for l in range(WARP)] for mg in range(MG)]
                        for q in range(Q):
                            a = []
                            for l in range(WARP):
                                lo0, hi0, f0 = quad(wl[l], q)
                                lo1, hi1, f1 = quad(wh[l], q)
                                nan_lo[l] |= f0
                                nan_hi[l] |= f1
                                a.append([lo0, lo1, hi0, hi1])  # a[0], a[1], a[2], a[3]
                            A = isa_a(a)
                            for mg in range(MG):
                                b = [[(xv[mg][l][4 * q], xv[mg][l][4 * q + 1]), (xv[mg][l][4 * q + 2], xv[mg][l][4 * q + 3])]
                                     for l in range(WARP)]
                                D = isa_d_to_lanes(A @ isa_b(b))
                                for l in range(WARP):
                                    for i in range(4):
                                        acc[l][mg][i] += D[l][i]
                    s += wps
                if fp8:  # shuffles xor 1, 2: OR over the 4 lanes of a group
                    for l in range(WARP):
                        fl = nan_lo[l] | nan_lo[l ^ 1] | nan_lo[l ^ 2] | nan_lo[l ^ 3]
                        fh = nan_hi[l] | nan_hi[l ^ 1] | nan_hi[l ^ 2] | nan_hi[l ^ 3]
                        for mg in range(MG):
                            if fl:
                                acc[l][mg][0] = acc[l][mg][1] = math.nan
                            if fh:
                                acc[l][mg][2] = acc[l][mg][3] = math.nan
                red[warp] = acc
            for warp in range(KWARPS):
                if warp % wps:
                    continue
                n0 = (bx * (KWARPS // wps) + warp // wps) * 16
                for l in range(WARP):
                    g, t = l >> 2, l % 4
                    for mg in range(MG):
                        for i in range(4):
                            v = red[warp][l][mg][i]
                            for j in range(1, wps):
                                v += red[warp + j][l][mg][i]
                            m, n = mg * 8 + 2 * t + (i & 1), n0 + g + 8 * (i >> 1)
                            if m >= M or n >= N:
                                continue
                            assert not written[by, m, n], "output written twice"
                            written[by, m, n] = True
                            part[by, m, n] = v
    assert written.all(), "an output was never written"
    return part.sum(axis=0), (wps, gx, S)


def case(M, N, K, kind, cus, rng, nan=False):
    fnuz = kind == "e4m3fnuz"
    fp8 = kind.startswith("e4m3")
    E = 16 if fp8 else 8
    # Small integers times powers of two: every product and sum is exact in f32 and f64, so equality is the test.
    x = rng.integers(-8, 9, size=(M, K)) / 8.0
    if fp8:
        codes = rng.integers(0, 256, size=(N, K), dtype=np.int64)
        nanc = 0x80 if fnuz else 0x7F
        codes[codes == nanc] = 0x38  # no NaN unless asked
        codes[(codes & 0x7F) == 0x7F] = 0x38
        if nan:
            codes[min(3, N - 1), K // 2] = nanc
        wv = np.vectorize(lambda c: e4m3_value(int(c), fnuz))(codes)
        got, cfg = run_kernel(x, None, codes, M, N, K, E, fnuz, cus)
    else:
        wv = rng.integers(-16, 17, size=(N, K)) / 16.0
        codes = None
        got, cfg = run_kernel(x, wv, None, M, N, K, E, False, cus)
    with np.errstate(invalid="ignore"):
        ref = x @ wv.T
    ok = np.array_equal(np.isnan(got), np.isnan(ref)) and np.allclose(got[~np.isnan(ref)], ref[~np.isnan(ref)],
                                                                      rtol=1e-12, atol=1e-12)
    print(f"{'ok  ' if ok else 'FAIL'} {kind:9s} M={M:2d} N={N:3d} K={K:4d} cus={cus:3d} (wps, blocks, splits)={cfg}"
          + (" NaN row" if nan else ""))
    return ok


def main():
    rng = np.random.default_rng(7)
    ok = check_fp8_decode()
    cases = [
        # (M, N, K, kind, cus): K tails (not a multiple of 16 / the pack), N tails, 9..15 rows, several warps per
        # slab, K splits (few SMs -> no split; many SMs with small N -> split).
        (2, 33, 71, "bf16", 132), (7, 16, 40, "bf16", 132), (9, 40, 300, "bf16", 132), (16, 33, 1000, "bf16", 132),
        (15, 24, 520, "bf16", 4), (4, 130, 256, "bf16", 1), (16, 48, 2048, "bf16", 132),
        (3, 33, 71, "e4m3fn", 132), (8, 40, 1000, "e4m3fn", 132), (12, 17, 300, "e4m3fnuz", 132),
        (16, 40, 2048, "e4m3fnuz", 132), (5, 64, 520, "e4m3fn", 2),
    ]
    for c in cases:
        ok &= case(*c, rng)
    ok &= case(4, 20, 200, "e4m3fn", 132, rng, nan=True)
    ok &= case(11, 20, 200, "e4m3fnuz", 132, rng, nan=True)
    print("all match" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
