"""A transformers model with random weights from one of anvil's config.json files, for the PyTorch sides of the
CPU comparisons (bench/torch_train_step.py, bench/torch_decode_step.py)."""
import json
import sys


def model_from_config(path, threads, script):
    """(torch, model, config) for a Llama or Mamba config.json; seeded, torch on `threads` threads."""
    import torch
    import transformers

    torch.manual_seed(0)
    torch.set_num_threads(threads)
    with open(path) as f:
        raw = json.load(f)
    arch = raw.get("architectures", [""])[0]
    if arch not in ("LlamaForCausalLM", "MambaForCausalLM"):
        sys.exit(f"{script}: expected a Llama or Mamba config in {path}, got {raw.get('architectures')}")
    cfg = transformers.AutoConfig.for_model(**raw)
    return torch, getattr(transformers, arch)(cfg), cfg
