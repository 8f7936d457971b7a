#!/usr/bin/env bash
# Builds the CUDA binaries and stages them (with the shared libraries the GPU machine lacks) in .carry/:
# stripped and xz-compressed, since the fat binaries are over the transfer limit as they are. scripts/gpu_run.sh
# unpacks them on the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
make build-cuda >/dev/null
mkdir -p .carry/lib
rm -rf .carry/bin .carry/*.xz .carry/*.gz
for b in build-cuda/anvil build-cuda/tests/anvil_op_tests build-cuda/tests/anvil_tests; do
  strip -o ".carry/$(basename "$b")" "$b"
  xz -T2 -3 -f ".carry/$(basename "$b")"
done
cp -L /usr/lib/x86_64-linux-gnu/libgomp.so.1 .carry/lib/
# The kernel timeline recorder and the CUPTI it was linked with (scripts/gpu_run.sh trace).
if [ -f build-cuda/libkernel_trace.so ]; then
  cp build-cuda/libkernel_trace.so .carry/lib/
  cp -L "$(ldd build-cuda/libkernel_trace.so | awk '/libcupti/ {print $3}')" .carry/lib/
fi
du -sh .carry
