#!/usr/bin/env bash
# Training loss parity on the GPU machine: PyTorch (torch.autocast bf16, fp32 master weights) and anvil (dtype
# bf16, fp32 masters) train the committed tiny Llama and Mamba (tests/fixtures/parity) for 200 steps on the same
# batches; the bf16 curves must agree within 3% at every step. anvil's f32 GPU run is also checked against the
# committed PyTorch f32 curve (1%). Prints the comparison table last; curves, SVG plots and logs go to $OUT
# (or ./parity-logs).
#   scripts/parity_gpu.sh [path/to/anvil]      default: .carry/bin/anvil (scripts/stage_gpu.sh), else build-cuda/anvil
set -uo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
export LD_LIBRARY_PATH="$here/.carry/lib:${LD_LIBRARY_PATH:-}"
if [ ! -x .carry/bin/anvil ] && [ -e .carry/anvil.gz ]; then  # staged gzipped, as scripts/gpu_run.sh expects
  mkdir -p .carry/bin && gunzip -c .carry/anvil.gz > .carry/bin/anvil && chmod +x .carry/bin/anvil
fi
bin="${1:-}"
[ -n "$bin" ] || { [ -x .carry/bin/anvil ] && bin=.carry/bin/anvil; } || bin=build-cuda/anvil
[ -x "$bin" ] || { echo "parity_gpu.sh: no anvil binary at '$bin' (pass its path)" >&2; exit 2; }
out="${OUT:-$here/parity-logs}"
mkdir -p "$out"
summary="$out/parity_summary.txt"
: > "$summary"
status=0
for arch in llama mamba; do
  python3 tools/train_parity.py torch --arch $arch --dtype bf16 --device cuda --out "$out/${arch}_torch_bf16.json" \
    > "$out/${arch}_torch_bf16.log" 2>&1 || { echo "$arch bf16: torch run failed (see ${arch}_torch_bf16.log)" >> "$summary"; status=1; }
  python3 tools/train_parity.py anvil --arch $arch --dtype bf16 --bin "$bin" --out "$out/${arch}_anvil_bf16.json" \
    > "$out/${arch}_anvil_bf16.log" 2>&1 || { echo "$arch bf16: anvil run failed (see ${arch}_anvil_bf16.log)" >> "$summary"; status=1; }
  python3 tools/train_parity.py anvil --arch $arch --dtype f32 --device gpu --bin "$bin" \
    --out "$out/${arch}_anvil_gpu_f32.json" > "$out/${arch}_anvil_gpu_f32.log" 2>&1 \
    || { echo "$arch f32 (gpu): anvil run failed (see ${arch}_anvil_gpu_f32.log)" >> "$summary"; status=1; }
  if [ -f "$out/${arch}_torch_bf16.json" ] && [ -f "$out/${arch}_anvil_bf16.json" ]; then
    python3 tools/compare_curves.py "$out/${arch}_torch_bf16.json" "$out/${arch}_anvil_bf16.json" \
      --svg "$out/${arch}_bf16.svg" --summary "$summary" > "$out/${arch}_bf16_compare.txt" || status=1
  fi
  if [ -f "$out/${arch}_anvil_gpu_f32.json" ]; then
    python3 tools/compare_curves.py tests/fixtures/parity/${arch}_torch_f32.json "$out/${arch}_anvil_gpu_f32.json" \
      --svg "$out/${arch}_gpu_f32.svg" --summary "$summary" > "$out/${arch}_gpu_f32_compare.txt" || status=1
  fi
done
echo "==== loss parity (200 steps; bf16: torch autocast vs anvil bf16, both on the GPU; f32: anvil GPU vs committed torch CPU) ===="
cat "$summary"
exit $status
