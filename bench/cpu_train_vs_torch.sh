#!/usr/bin/env bash
# CPU training steps, anvil beside PyTorch on the same machine and shapes (f32, AdamW, clipping at 1.0; random
# weights from configs/models/NAME.json, random tokens). On the CPU machines only ratios from one run mean
# anything (TARGETS.md), so both run here, one after the other, and the table prints their ratio.
#
# Usage: bench/cpu_train_vs_torch.sh [BIN]       BIN: the anvil binary (default build/anvil)
# Environment: ROWS (default "mamba-130m:1:256 llama-tiny:4:256", MODEL:BATCH:SEQ), STEPS (default 3),
#              OUT (logs, default ./bench-logs). Needs python3 with torch and transformers (pip install).
set -uo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
bin="${1:-build/anvil}"
out="${OUT:-$here/bench-logs}"
steps="${STEPS:-3}"
rows="${ROWS:-mamba-130m:1:256 llama-tiny:4:256}"
mkdir -p "$out"
[ -x "$bin" ] || { echo "cpu_train_vs_torch.sh: no anvil binary at $bin (make build)" >&2; exit 2; }
python3 -c 'import torch, transformers' 2>/dev/null ||
  { echo "cpu_train_vs_torch.sh: needs torch and transformers (python3 -m pip install torch transformers)" >&2; exit 2; }

table=()
for row in $rows; do
  IFS=: read -r model batch seq <<<"$row"
  log="$out/cpu_train_${model}.log"
  "$bin" bench train --model "$model" --device cpu --batch "$batch" --seq "$seq" --steps "$steps" --warmup 1 \
    >"$log" 2>&1
  a=$(grep -o 'tok_s=[0-9.]*' "$log" | head -1 | cut -d= -f2)
  python3 bench/torch_train_step.py --config "configs/models/$model.json" --batch "$batch" --seq "$seq" \
    --steps "$steps" --warmup 1 >>"$log" 2>&1
  t=$(grep -o 'TORCH .*tok_s=[0-9.]*' "$log" | grep -o 'tok_s=[0-9.]*' | cut -d= -f2)
  ratio=$(python3 -c "print(f'{float(\"${a:-0}\") / float(\"${t:-0}\"):.2f}')" 2>/dev/null || echo "-")
  table+=("$(printf '| %-11s | %5s x %-4s | %12s | %12s | %6s |' "$model" "$batch" "$seq" "${a:--}" "${t:--}" "$ratio")")
done
echo
echo "CPU training, f32, $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'))"
echo "| model       | batch x seq  | anvil tok/s  | torch tok/s  | ratio  |"
echo "| ----------- | ------------ | ------------ | ------------ | ------ |"
printf '%s\n' "${table[@]}"
