#!/usr/bin/env bash
# Runs on the GPU machine over a copy of the tree: the CUDA binaries built here travel in .carry/bin, the
# libraries Debian has and that machine lacks in .carry/lib. Usage: scripts/gpu_run.sh STEP...
#   info     nvidia-smi and device properties
#   ops      the op harness on the GPU backend (test mode), then with ANVIL_GEMM=tiled for matmul
#   grad     the op harness, grad mode
#   perf     the op harness, perf mode, next to PyTorch's anchors measured in the same run
#   unit     the gtest suite against the GPU build
# Logs go to $OUT (or ./gpu-logs); a short table is printed last.
set -uo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bin="$here/.carry/bin"
export LD_LIBRARY_PATH="$here/.carry/lib:${LD_LIBRARY_PATH:-}"
out="${OUT:-$here/gpu-logs}"
mkdir -p "$out" "$bin"
# Binaries travel gzipped (the GPU build's fat binaries are over the transfer limit uncompressed).
for z in "$here"/.carry/*.gz; do [ -e "$z" ] && gunzip -c "$z" > "$bin/$(basename "$z" .gz)" && chmod +x "$bin/$(basename "$z" .gz)"; done
summary=()
for step in "$@"; do
  case "$step" in
    info) nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv | tee "$out/info.txt" ;;
    ops)
      "$bin/anvil_op_tests" --backend gpu --mode test 2>&1 | tee "$out/ops_gpu.txt" | grep -E "FAIL|passed"
      summary+=("ops(gpu):   $(tail -n1 "$out/ops_gpu.txt")")
      ANVIL_GEMM=tiled "$bin/anvil_op_tests" --backend gpu --mode test --op matmul 2>&1 | tee "$out/ops_gpu_tiled.txt" | grep -E "FAIL|passed"
      summary+=("matmul(tiled): $(tail -n1 "$out/ops_gpu_tiled.txt")") ;;
    grad)
      "$bin/anvil_op_tests" --backend gpu --mode grad 2>&1 | tee "$out/grad_gpu.txt" | grep -E "FAIL|passed"
      summary+=("grad(gpu):  $(tail -n1 "$out/grad_gpu.txt")") ;;
    perf)
      python3 "$here/bench/torch_anchors.py" 2>&1 | tee "$out/anchors.txt"
      "$bin/anvil_op_tests" --backend gpu --mode perf 2>&1 | tee "$out/perf_gpu.txt"
      summary+=("$(grep -h -E "ANCHOR|CEILING" "$out/anchors.txt" "$out/perf_gpu.txt")") ;;
    unit)
      "$bin/anvil_tests" 2>&1 | tee "$out/unit_gpu.txt" | tail -n 3
      summary+=("unit(gpu):  $(grep -E "PASSED|FAILED" "$out/unit_gpu.txt" | head -n 3 | tr '\n' ' ')") ;;
    *) echo "gpu_run.sh: unknown step '$step' (expected info, ops, grad, perf, unit)" >&2; exit 2 ;;
  esac
done
echo "==== summary ===="
printf '%s\n' "${summary[@]}"
