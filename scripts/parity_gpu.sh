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
export HF_HUB_OFFLINE=1  # the GPU machine has no network: no kernel-hub lookups
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
# run NAME CMD...: logs to $out/NAME.log; a failure goes into the summary and the exit status.
run() {
  local name=$1; shift
  "$@" > "$out/$name.log" 2>&1 || { echo "$name: failed (see $out/$name.log)" >> "$summary"; status=1; }
}
for arch in llama mamba; do
  run ${arch}_torch_bf16 python3 tools/train_parity.py torch --arch $arch --dtype bf16 --device cuda \
    --out "$out/${arch}_torch_bf16.json"
  run ${arch}_anvil_bf16 python3 tools/train_parity.py anvil --arch $arch --dtype bf16 --bin "$bin" \
    --out "$out/${arch}_anvil_bf16.json"
  run ${arch}_anvil_gpu_f32 python3 tools/train_parity.py anvil --arch $arch --dtype f32 --device gpu --bin "$bin" \
    --out "$out/${arch}_anvil_gpu_f32.json"
  if [ -f "$out/${arch}_torch_bf16.json" ] && [ -f "$out/${arch}_anvil_bf16.json" ]; then
    python3 tools/compare_curves.py "$out/${arch}_torch_bf16.json" "$out/${arch}_anvil_bf16.json" \
      --svg "$out/${arch}_bf16.svg" --summary "$summary" > "$out/${arch}_bf16_compare.txt" || status=1
  fi
  if [ -f "$out/${arch}_anvil_gpu_f32.json" ]; then
    python3 tools/compare_curves.py tests/fixtures/parity/${arch}_torch_f32.json "$out/${arch}_anvil_gpu_f32.json" \
      --svg "$out/${arch}_gpu_f32.svg" --summary "$summary" > "$out/${arch}_gpu_f32_compare.txt" || status=1
  fi
done
echo "==== loss parity, 200 steps (bf16: torch autocast vs anvil bf16 on the GPU; f32: anvil GPU vs torch CPU) ===="
cat "$summary"
exit $status
