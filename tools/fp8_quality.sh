#!/usr/bin/env bash
# FP8 quality check on a small trained Llama (CPU): train the quickstart model, its LM head untied from the
# embedding, on the fortune corpus minus one file, then score that held-out file with the f32 model against its
# --dtype fp8 version, with the LM head 16-bit and then FP8 too (anvil perplexity --vs fp8 [--fp8-lm-head]).
# Usage: tools/fp8_quality.sh [WORK_DIR] [STEPS]     (defaults: /tmp/anvil_fp8_quality, 200; ~3 min on 2 free cores)
# Needs build/anvil and the `fortunes` package. The numbers of a run are in docs/decode_kernels.md.
set -euo pipefail
ANVIL="$(cd "$(dirname "$0")/.." && pwd)"
W="${1:-/tmp/anvil_fp8_quality}"
STEPS="${2:-200}"
HELD_OUT=wisdom
mkdir -p "$W/train_text"
for f in /usr/share/games/fortunes/*; do
  b="$(basename "$f")"
  case "$b" in *.dat|*.u8) continue ;; esac
  [ -f "$f" ] || continue
  if [ "$b" = "$HELD_OUT" ]; then cp -L "$f" "$W/held_out.txt"; else cp -L "$f" "$W/train_text/"; fi
done
"$ANVIL/build/anvil" tokenizer train --input "$W"/train_text/* --vocab-size 2048 --style neox \
  --out "$W/data/tokenizer.json" --quiet
"$ANVIL/build/anvil" prepare --tokenizer "$W/data/tokenizer.json" --input "$W/train_text" --separator % \
  --out "$W/data" --quiet
sed -e 's/"tie_word_embeddings": true/"tie_word_embeddings": false/' "$ANVIL/configs/models/llama-tiny.json" \
  > "$W/llama-tiny-untied.json"
sed -e "s#^out_dir = .*#out_dir = \"$W/run\"#" -e "s#^steps = .*#steps = $STEPS#" \
    -e "s#^config = .*#config = \"$W/llama-tiny-untied.json\"#" -e "s#^dir = .*#dir = \"$W/data\"#" \
    "$ANVIL/configs/quickstart.toml" > "$W/recipe.toml"
"$ANVIL/build/anvil" train "$W/recipe.toml"
CKPT="$(ls -d "$W"/run/checkpoint-* | sort -t- -k2 -n | tail -1)"
"$ANVIL/build/anvil" perplexity --model "$CKPT" --text "$W/held_out.txt" --device cpu --dtype f32 --vs fp8 \
  --ctx 128 --greedy-tokens 64
"$ANVIL/build/anvil" perplexity --model "$CKPT" --text "$W/held_out.txt" --device cpu --dtype f32 --vs fp8 \
  --fp8-lm-head --ctx 128 --greedy-tokens 64
