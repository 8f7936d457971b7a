#!/usr/bin/env bash
# The README's `make run`: train a small Llama on the fortune corpus (Debian's `fortunes` package), then
# generate from it. Uses the GPU build when a GPU is present, the CPU build otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/anvil
device=cpu
dtype=f32
if [ -x build-cuda/anvil ] && command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  bin=build-cuda/anvil; device=gpu; dtype=bf16
fi
corpus=/usr/share/games/fortunes
data=data/fortunes
run=runs/quickstart
[ -d "$corpus" ] || { echo "quickstart: $corpus not found (install Debian's 'fortunes' package: scripts/setup.sh)" >&2; exit 1; }

echo "== 1/4 tokenizer: byte-level BPE, 2048 tokens, trained on $corpus"
# The corpus files are those without an extension (.dat are fortune's binary indexes, .u8 symlinks).
texts=$(find $corpus -maxdepth 1 -type f ! -name '*.*' | sort)
[ -f $data/tokenizer.json ] || $bin tokenizer train --input $texts --vocab-size 2048 --style neox \
                                   --out $data/tokenizer.json
echo "== 2/4 prepare: token shards with a held-out split"
[ -f $data/meta.json ] || $bin prepare --tokenizer $data/tokenizer.json --input $corpus --separator % --out $data
echo "== 3/4 train: configs/quickstart.toml on $device ($dtype)"
rm -rf $run
$bin train configs/quickstart.toml --set device=$device --set dtype=$dtype --set out_dir=$run
ckpt=$run/$(cat $run/latest)
echo "== 4/4 generate from $ckpt"
$bin generate --model $ckpt --prompt "The meaning of life is" --max-tokens 60 --temperature 0.8 --top-k 40 \
              --seed 1 --device $device
echo
echo "checkpoint: $ckpt (Hugging Face layout: config.json + model.safetensors + tokenizer.json)"
echo "metrics:    $run/metrics.jsonl"
echo "loss curve: $run/loss.svg"
