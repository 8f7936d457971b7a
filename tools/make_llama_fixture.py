#!/usr/bin/env python3
"""Random-weight LlamaForCausalLM + reference outputs (logits, loss, every gradient, greedy tokens).

  make_llama_fixture.py --out tests/fixtures/llama_tiny --preset tiny --dtype f32
  make_llama_fixture.py --out /tmp/llama8b --preset 8b --dtype bf16 --grads sample     (GPU machine)
See fixture_common.py for the contents of reference.safetensors.
"""
import argparse

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM

import fixture_common as fc

LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}

PRESETS = {
    # head_dim 16 -> 8 frequencies with theta 500000: wavelengths from 6 to ~1e6 tokens, so the llama3 scaling
    # keeps some, blends some (between 2048 and 8192) and divides the rest by 8: all three branches are tested.
    # initializer_range 0.1 (HF default 0.02) spreads the logits so greedy tokens are not near-ties.
    "tiny": dict(vocab_size=256, hidden_size=64, intermediate_size=176, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, rms_norm_eps=1e-5, rope_theta=500000.0, rope_scaling=LLAMA3_ROPE,
                 max_position_embeddings=131072, tie_word_embeddings=False, initializer_range=0.1,
                 bos_token_id=1, eos_token_id=2),
    # Llama-3.1-8B's shape.
    "8b": dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
               num_attention_heads=32, num_key_value_heads=8, rms_norm_eps=1e-5, rope_theta=500000.0,
               rope_scaling=LLAMA3_ROPE, max_position_embeddings=131072, tie_word_embeddings=False,
               bos_token_id=128000, eos_token_id=[128001, 128008, 128009]),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    ap.add_argument("--tied", action="store_true", help="tie_word_embeddings=True (lm_head shares the embedding)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="auto", help="auto (cuda for big presets if present), cpu, cuda")
    ap.add_argument("--grads", choices=["all", "sample", "none"], default="all",
                    help="which parameter gradients to store (8b: 'sample' keeps the file near 3 GB)")
    a = ap.parse_args()

    kw = dict(PRESETS[a.preset])
    if a.tied:
        kw["tie_word_embeddings"] = True
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[a.dtype]
    config = LlamaConfig(**kw)
    config._attn_implementation = "eager"  # plain softmax(QK^T)V, the same math on every device and version
    device = fc.pick_device(a.device, a.preset)
    model = fc.build_model(LlamaForCausalLM, config, dtype, device, a.seed)
    tensors = fc.reference_run(model, config.vocab_size, device, a.grads)
    fc.save(a.out, model, tensors, dict(model="llama", preset=a.preset, dtype=a.dtype, seed=a.seed, tied=a.tied,
                                        transformers=transformers.__version__))


if __name__ == "__main__":
    main()
