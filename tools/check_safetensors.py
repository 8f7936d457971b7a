#!/usr/bin/env python3
"""Interop check between anvil's safetensors reader/writer and the reference `safetensors` library.

Both sides build the same canonical tensors from formulas (canonical_tensors below and its twin in
tests/io/safetensors_test.cpp), so neither needs the other's output to know what is right.

  check_safetensors.py write PATH   write the canonical set with the reference library
  check_safetensors.py check PATH   load PATH (written by anvil) with the reference library and compare
Exit status 0 when everything matches; otherwise a message naming the first mismatch and status 1; 77 (the
"skip" status of automake and ctest) when torch or safetensors is not installed.
"""
import sys

try:
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file
except ImportError as e:
    print(f"check_safetensors: {e}", file=sys.stderr)
    sys.exit(77)

METADATA = {"format": "pt", "source": "anvil-interop"}


def float_values(n):
    # (i % 17 - 8) / 4: multiples of 0.25 in [-2, 2], exact in every float dtype down to FP8 e5m2.
    return torch.tensor([((i % 17) - 8) * 0.25 for i in range(n)], dtype=torch.float32)


def canonical_tensors():
    def f(shape, dtype):
        n = 1
        for d in shape:
            n *= d
        return float_values(n).reshape(shape).to(dtype)

    def i(shape, dtype, fn):
        n = 1
        for d in shape:
            n *= d
        return torch.tensor([fn(k) for k in range(n)], dtype=dtype).reshape(shape)

    return {
        "f32": f([3, 5], torch.float32),
        "bf16": f([4, 3], torch.bfloat16),
        "f16": f([7], torch.float16),
        "f8_e4m3": f([2, 4], torch.float8_e4m3fn),
        "f8_e5m2": f([5], torch.float8_e5m2),
        "i32": i([2, 3], torch.int32, lambda k: 7 * k - 20),
        "i64": i([3], torch.int64, lambda k: 1000000007 * k - 5),  # beyond 32 bits
        "u8": i([6], torch.uint8, lambda k: (37 * k) % 256),
        "scalar": torch.tensor(3.5, dtype=torch.float32),  # shape []
        "empty": torch.zeros([0, 4], dtype=torch.float32),
    }


def check(path):
    want = canonical_tensors()
    with open(path, "rb") as fh:
        n = int.from_bytes(fh.read(8), "little")
    if (8 + n) % 8 != 0:
        return f"header length {n}: the data section does not start 8-byte aligned"
    with safe_open(path, framework="pt") as fh:
        meta = fh.metadata() or {}
        if meta != METADATA:
            return f"metadata {meta} != {METADATA}"
        names = set(fh.keys())
        if names != set(want):
            return f"tensor names {sorted(names)} != {sorted(want)}"
        for name, w in want.items():
            got = fh.get_tensor(name)
            if got.dtype != w.dtype or list(got.shape) != list(w.shape):
                return f"{name}: {got.dtype}{list(got.shape)} != {w.dtype}{list(w.shape)}"
            # Bitwise: FP8 tensors have no equality op on every torch version.
            if not torch.equal(got.reshape(-1).view(torch.uint8), w.reshape(-1).view(torch.uint8)):
                return f"{name}: values differ: {got.flatten()[:8]} vs {w.flatten()[:8]}"
    return None


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "check"):
        print(__doc__, file=sys.stderr)
        return 2
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "write":
        save_file(canonical_tensors(), path, metadata=METADATA)
        return 0
    err = check(path)
    if err:
        print(f"check_safetensors: {path}: {err}", file=sys.stderr)
        return 1
    print(f"check_safetensors: {path}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
