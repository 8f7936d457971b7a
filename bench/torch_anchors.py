"""PyTorch anchors timed in the same run as anvil (on the GPU machine): copy bandwidth and bf16 GEMM.

Prints one line per measurement: `ANCHOR <name> <value> <unit>`.
"""
import argparse

import torch


def bench(fn, reps=20, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]  # median ms


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gemm", type=int, default=8192)
    args = p.parse_args()
    n = 1 << 30  # 1 Gi bf16 elements = 2 GiB
    src = torch.randn(n, dtype=torch.bfloat16, device="cuda")
    dst = torch.empty_like(src)
    ms = bench(lambda: dst.copy_(src))
    print(f"ANCHOR copy_bandwidth {2 * src.numel() * 2 / (ms * 1e-3) / 1e12:.3f} TB/s")
    del src, dst
    s = args.gemm
    a = torch.randn(s, s, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(s, s, dtype=torch.bfloat16, device="cuda")
    ms = bench(lambda: a @ b)
    print(f"ANCHOR torch_matmul_bf16_{s} {2 * s**3 / (ms * 1e-3) / 1e12:.1f} TFLOP/s ({ms * 1e3:.0f} us)")
    # bf16 GEMV 14336x4096, one row: the cuBLAS path a user gets for decode.
    w = torch.randn(14336, 4096, dtype=torch.bfloat16, device="cuda")
    v = torch.randn(1, 4096, dtype=torch.bfloat16, device="cuda")
    ms = bench(lambda: v @ w.t(), reps=200)
    print(f"ANCHOR torch_gemv_bf16_14336x4096 {w.numel() * 2 / (ms * 1e-3) / 1e12:.3f} TB/s ({ms * 1e3:.1f} us)")


if __name__ == "__main__":
    main()
