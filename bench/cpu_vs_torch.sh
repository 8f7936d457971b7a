#!/usr/bin/env bash
# anvil beside PyTorch on this machine's CPU, same shapes, random weights from configs/models/NAME.json: training
# steps (f32, AdamW, clipping at 1.0, random tokens) and batch-1 greedy decode. On the CPU machines only ratios
# from one run mean anything (TARGETS.md), so both run here, one after the other, and the table prints the ratio.
#
# Usage: bench/cpu_vs_torch.sh [BIN]       BIN: the anvil binary (default build/anvil)
# Environment:
#   TRAIN   training rows MODEL:BATCH:SEQ (default "mamba-130m:1:256 llama-tiny:4:256"; "" for none)
#   DECODE  decode rows MODEL:DTYPE (default "llama-3.2-1b:f32 llama-3.2-1b:bf16"; "" for none); the checkpoint
#           (5 GB for the 1B shape in f32) is written under OUT by bench/torch_decode_step.py
#   STEPS   timed training steps (default 3); TOKENS decode steps (default 16)
#   OUT     logs and checkpoints (default ./bench-logs)
# Needs python3 with torch and transformers (python3 -m pip install torch transformers).
set -uo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
bin="${1:-build/anvil}"
out="${OUT:-$here/bench-logs}"
steps="${STEPS:-3}"
tokens="${TOKENS:-16}"
train_rows="${TRAIN-mamba-130m:1:256 llama-tiny:4:256}"
decode_rows="${DECODE-llama-3.2-1b:f32 llama-3.2-1b:bf16}"
mkdir -p "$out"
[ -x "$bin" ] || { echo "cpu_vs_torch.sh: no anvil binary at $bin (make build)" >&2; exit 2; }
python3 -c 'import torch, transformers' 2>/dev/null ||
  { echo "cpu_vs_torch.sh: needs torch and transformers (python3 -m pip install torch transformers)" >&2; exit 2; }
ratio() { python3 -c "import sys; a, t = map(float, sys.argv[1:]); print(f'{a / t:.2f}')" "$1" "$2" 2>/dev/null || echo -; }
field() { grep -o "$1=[0-9.]*" | head -1 | cut -d= -f2; }  # field NAME < log: the value of NAME=...

table=()
for row in $train_rows; do
  IFS=: read -r model batch seq <<<"$row"
  log="$out/cpu_train_${model}.log"
  "$bin" bench train --model "$model" --device cpu --batch "$batch" --seq "$seq" --steps "$steps" --warmup 1 \
    >"$log" 2>&1
  python3 bench/torch_train_step.py --config "configs/models/$model.json" --batch "$batch" --seq "$seq" \
    --steps "$steps" --warmup 1 >>"$log" 2>&1
  a=$(grep '^RESULT' "$log" | field tok_s)
  t=$(grep '^TORCH' "$log" | field tok_s)
  table+=("$(printf '| train %-13s | %-10s | %10s tok/s | %10s tok/s | %5s |' "$model" "${batch}x$seq f32" \
    "${a:--}" "${t:--}" "$(ratio "${a:-0}" "${t:-0}")")")
done
for row in $decode_rows; do
  IFS=: read -r model dtype <<<"$row"
  log="$out/cpu_decode_${model}_${dtype}.log"
  ckpt="$out/ckpt_${model}_${dtype}"
  python3 bench/torch_decode_step.py --config "configs/models/$model.json" --out "$ckpt" --dtype "$dtype" \
    --tokens "$tokens" >"$log" 2>&1
  "$bin" bench decode --model "$ckpt" --device cpu --dtype "$dtype" --tokens "$tokens" >>"$log" 2>&1
  t=$(grep '^TORCH_DECODE' "$log" | field ms_token)
  a=$(grep '^decode ' "$log" | grep -o '[0-9.]* ms/step' | cut -d' ' -f1)
  # The ratio is anvil's speed over torch's: torch's ms over anvil's.
  table+=("$(printf '| decode %-12s | %-10s | %7s ms/token | %7s ms/token | %5s |' "$model" "b1 $dtype" \
    "${a:--}" "${t:--}" "$(ratio "${t:-0}" "${a:-0}")")")
done
echo
echo "anvil against PyTorch on the CPU: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'))"
echo "| what                 | shape      | anvil            | torch            | speed |"
echo "| -------------------- | ---------- | ---------------- | ---------------- | ----- |"
printf '%s\n' "${table[@]}"
