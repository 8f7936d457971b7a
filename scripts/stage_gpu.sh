#!/usr/bin/env bash
# Builds the CUDA binaries and stages them (with the shared libraries the GPU machine lacks) in .carry/.
set -euo pipefail
cd "$(dirname "$0")/.."
make build-cuda >/dev/null
mkdir -p .carry/bin .carry/lib
cp build-cuda/anvil build-cuda/tests/anvil_op_tests build-cuda/tests/anvil_tests .carry/bin/
cp -L /usr/lib/x86_64-linux-gnu/libgomp.so.1 .carry/lib/
du -sh .carry
