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
#   KEEP       per-row --keep-layers overrides, e.g. "mamba-1.4b:24 llama-3.2-1b:2" (with recompute on: the
#              last N layers keep their activations, the others are recomputed; default: the keep column)
#   STEPS, WARMUP  timed and untimed steps (default 10 and 3)
#
# Recompute per row (auto), from the activation formulas in src/models/*/*_train.cpp at batch x 2048 tokens,
# bf16, with 18 bytes per parameter of state (bf16 weight + fp32 master, grad, two AdamW moments):
#   mamba-130m   state 2.3 GB + 14.6 GB activations  -> fits 37 GB without: off (19.1 GB peak measured)
#   mamba-370m   state 6.7 GB + 19.5 GB               -> fits 32 GB without: off (27.9 GB peak measured)
#   mamba-1.4b   state 25 GB  + 19.5 GB   (> 40 GB)   -> on  (keep 48, every layer slim: 11.4 GB kept)
#   llama-3.2-1b state 22 GB  + 19.9 GB   (> 40 GB)   -> on  (2.25 GB kept)
#
# Keep (--keep-layers, with recompute on): each kept layer costs its activations less the input h it keeps anyway,
# and saves one recomputed layer forward. With recompute a kept Mamba layer keeps the slim set
# (src/models/mamba/mamba_train.cpp): h (C), x, z (2D), dtr (R), B, C (2N) bf16 = 2 x 10,400 = 20,800 B per token
# at Mamba-1.4B (C 2048, D 4096, R 128, N 16, 48 layers), + D*N*4/32 = 8,192 B of scan states (one per 32-step
# tile, selective_scan.h) = 28,992 B; at 4 x 2048 = 8,192 tokens 0.24 GB a layer, of which h (4,096 B, 0.034 GB)
# is kept anyway: +0.20 GB per extra kept layer (0.27 GB while y was kept, 0.44 GB when kept layers kept
# everything). Measured on the H200 (2026-12-01): keep 48 38.22 GB peak with the default cross-entropy passes
# (37.25 GB with ~512 MB passes, keep 44 36.44 GB); the 1.4B row keeps every layer, 1.8 GB under the 40 GB cap.
# Llama-3.2-1B (1.18 GB a layer at 8 x 2048): keep 4 29.84 GB, keep 11 38.07 GB.
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

#      preset        batch  tok/s target  GB target  recompute (auto)  keep (optional, default 1)
rows=("mamba-130m    16     250000        37         0"
      "mamba-370m    8      100000        32         0"
      "mamba-1.4b    4      40000         40         1                 48"
      "llama-3.2-1b  8      66000         40         1                 11")

names=" $(for r in "${rows[@]}"; do read -r n _ <<<"$r"; printf '%s ' "$n"; done)"
for kv in ${KEEP:-}; do  # checked before any run: a typo must not cost the runs before its row
  n="${kv%%:*}" k="${kv#*:}"
  if [[ "$kv" != *:* || "$names" != *" $n "* || -z "$k" || "$k" == *[!0-9]* ]]; then
    echo "train_throughput: KEEP entries must be PRESET:N with N >= 0 and PRESET one of:$names(got '$kv')" >&2
    exit 2
  fi
done
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }
summary=()
for r in "${rows[@]}"; do
  read -r name batch tok mem auto keep <<<"$r"
  if [ -n "${ROWS:-}" ] && [[ " $ROWS " != *" $name "* ]]; then continue; fi
  keep="${keep:-1}"
  for kv in ${KEEP:-}; do
    [ "${kv%%:*}" = "$name" ] && keep="${kv#*:}"
  done
  case "$mode" in
    auto) recs=("$auto") ;; on) recs=(1) ;; off) recs=(0) ;; both) recs=(0 1) ;;
    *) echo "train_throughput: RECOMPUTE must be auto, on, off or both (got '$mode')" >&2; exit 2 ;;
  esac
  for rec in "${recs[@]}"; do
    k="-"
    [ "$rec" = 1 ] && k="$keep"
    log="$out/train_${name}_b${batch}_rc${rec}$([ "$k" != - ] && [ "$k" != 1 ] && echo "_k$k").log"
    args=(bench train --model "$name" --batch "$batch" --seq 2048 --steps "$steps" --warmup "$warmup"
          --device gpu --dtype bf16 --target-tok-s "$tok" --target-mem-gb "$mem")
    [ "$rec" = 1 ] && args+=(--recompute --keep-layers "$keep")
    echo "== $name batch $batch recompute $rec keep $k: $bin ${args[*]}"
    timeout "$timeout_s" "$bin" "${args[@]}" >"$log" 2>&1
    rc=$?
    tail -n 12 "$log"
    line="$(grep '^RESULT ' "$log" | tail -n1)"
    if [ $rc -eq 124 ]; then status="TIMEOUT(${timeout_s}s)"
    elif [ $rc -ne 0 ] || [ -z "$line" ]; then status="FAILED(rc=$rc)"
    else status="tok:$(field tok_target "$line") mem:$(field mem_target "$line")"; fi
    summary+=("$(printf '%-13s %5s %4s %4s | %10s %9s | %9s | %6s | %7s %5s | %s' "$name" "$batch" "$rec" "$k" \
      "$(field tok_s "$line")" "$tok" "$(field ms_step "$line")" "$(field mfu "$line")" \
      "$(field peak_gb "$line")" "$mem" "$status")")
  done
done

echo
echo "training throughput, seq 2048, bf16 (logs in $out)"
printf '%-13s %5s %4s %4s | %10s %9s | %9s | %6s | %7s %5s | %s\n' model batch rec keep "tok/s" target "ms/step" MFU \
  "peak GB" "<=" status
for s in "${summary[@]}"; do echo "$s"; done
