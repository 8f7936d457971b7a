"""Llama-3.1-8B-shaped decode on the GPU machine: makes a random-weight bf16 checkpoint for anvil and times
transformers' static-cache generate (the strongest PyTorch baseline in TARGETS.md) in the same run.

Prints `ANCHOR transformers_static_ms_per_token X`.
"""
import argparse
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

CONFIG = dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
              num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=131072, rms_norm_eps=1e-5,
              rope_theta=500000.0, tie_word_embeddings=False, bos_token_id=128000, eos_token_id=128001,
              rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                original_max_position_embeddings=8192))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--skip-transformers", action="store_true")
    a = ap.parse_args()
    torch.manual_seed(0)
    cfg = LlamaConfig(**CONFIG)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    t = time.time()
    model.save_pretrained(a.out, safe_serialization=True)
    print(f"saved {a.out} in {time.time() - t:.1f} s", flush=True)
    if a.skip_transformers:
        return
    model.eval()
    ids = torch.tensor([[128000]], device="cuda")
    gen = dict(max_new_tokens=a.tokens, min_new_tokens=a.tokens, do_sample=False, cache_implementation="static")
    with torch.no_grad():
        model.generate(ids, **gen)  # compile + warm-up
        torch.cuda.synchronize()
        times = []
        for _ in range(3):
            t = time.time()
            model.generate(ids, **gen)
            torch.cuda.synchronize()
            times.append((time.time() - t) * 1e3 / a.tokens)
    times.sort()
    print(f"ANCHOR transformers_static_ms_per_token {times[1]:.2f}", flush=True)


if __name__ == "__main__":
    main()
