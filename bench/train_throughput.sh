#!/usr/bin/env bash
# Training throughput on one H200: the four rows of issue 5 (targets from docs TARGETS.md), each one
# `anvil bench train` run (seq 2048, bf16, fp32 masters + AdamW), its log under $OUT, a summary table last.
#
# Usage: bench/train_throughput.sh [BIN]        BIN: the anvil binary (default build-cuda/anvil)
# Environment:
#   OUT        log directory (default ./bench-logs)
#   TIMEOUT    seconds per run (default 240)
#   ROWS       a subset, e.g. "mamba-130m llama-3.2-1b" (default: all four)
#   RECOMPUTE  auto (the per-row choice below) | on | off | both (each row twice: the memory/speed trade)
#   STEPS, WARMUP  timed and untimed steps (default 10 and 3)
#
# Recompute per row (auto), from the activation formulas in src/models/*/*_train.cpp at batch x 2048 tokens,
# bf16, with 18 bytes per parameter of state (bf16 weight + fp32 master, grad, two AdamW moments):
#   mamba-130m   state 2.3 GB + 14.8 GB activations  -> fits 37 GB without: off
#   mamba-370m   state 6.7 GB + ~19.7 GB              -> fits 32 GB without: off
#   mamba-1.4b   state 25 GB  + ~19.7 GB  (> 40 GB)   -> on  (~2 GB kept)
#   llama-3.2-1b state 22 GB  + 19.9 GB   (> 40 GB)   -> on  (2.25 GB kept)
set -uo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"  # presets are read from configs/models under the working directory
bin="${1:-build-cuda/anvil}"
out="${OUT:-$here/bench-logs}"
timeout_s="${TIMEOUT:-240}"
steps="${STEPS:-10}"
warmup="${WARMUP:-3}"
mode="${RECOMPUTE:-auto}"
mkdir -p "$out"
[ -x "$bin" ] || { echo "train_throughput: no executable '$bin' (build it: make gpu, or pass its path)" >&2; exit 2; }

#      preset        batch  tok/s target  GB target  recompute (auto)
rows=("mamba-130m    16     250000        37         0"
      "mamba-370m    8      100000        32         0"
      "mamba-1.4b    4      40000         40         1"
      "llama-3.2-1b  8      66000         40         1")

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }
summary=()
for r in "${rows[@]}"; do
  read -r name batch tok mem auto <<<"$r"
  if [ -n "${ROWS:-}" ] && [[ " $ROWS " != *" $name "* ]]; then continue; fi
  case "$mode" in
    auto) recs=("$auto") ;; on) recs=(1) ;; off) recs=(0) ;; both) recs=(0 1) ;;
    *) echo "train_throughput: RECOMPUTE must be auto, on, off or both (got '$mode')" >&2; exit 2 ;;
  esac
  for rec in "${recs[@]}"; do
    log="$out/train_${name}_b${batch}_rc${rec}.log"
    args=(bench train --model "$name" --batch "$batch" --seq 2048 --steps "$steps" --warmup "$warmup"
          --device gpu --dtype bf16 --target-tok-s "$tok" --target-mem-gb "$mem")
    [ "$rec" = 1 ] && args+=(--recompute)
    echo "== $name batch $batch recompute $rec: $bin ${args[*]}"
    timeout "$timeout_s" "$bin" "${args[@]}" >"$log" 2>&1
    rc=$?
    tail -n 12 "$log"
    line="$(grep '^RESULT ' "$log" | tail -n1)"
    if [ $rc -eq 124 ]; then status="TIMEOUT(${timeout_s}s)"
    elif [ $rc -ne 0 ] || [ -z "$line" ]; then status="FAILED(rc=$rc)"
    else status="tok:$(field tok_target "$line") mem:$(field mem_target "$line")"; fi
    summary+=("$(printf '%-13s %5s %4s | %10s %9s | %9s | %6s | %7s %5s | %s' "$name" "$batch" "$rec" \
      "$(field tok_s "$line")" "$tok" "$(field ms_step "$line")" "$(field mfu "$line")" \
      "$(field peak_gb "$line")" "$mem" "$status")")
  done
done

echo
echo "training throughput, seq 2048, bf16 (logs in $out)"
printf '%-13s %5s %4s | %10s %9s | %9s | %6s | %7s %5s | %s\n' model batch rec "tok/s" target "ms/step" MFU \
  "peak GB" "<=" status
for s in "${summary[@]}"; do echo "$s"; done
