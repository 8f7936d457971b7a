#!/usr/bin/env python3
"""Random-weight MambaForCausalLM + reference outputs (logits, loss, every gradient, greedy tokens).

  make_mamba_fixture.py --out tests/fixtures/mamba_tiny --preset tiny --dtype f32
  make_mamba_fixture.py --out /tmp/mamba130m --preset 130m --dtype f32                  (GPU machine)
The reference is always transformers' pure-torch path (sequential selective scan, F.conv1d): on the CPU it is
the only one, and on a GPU the fused mamba_ssm / causal_conv1d kernels are switched off, so the fixture does not
depend on which optional kernels a machine has. See fixture_common.py for the contents of reference.safetensors.
"""
import argparse

import torch
import transformers
import transformers.models.mamba.modeling_mamba as modeling_mamba
from transformers import MambaConfig, MambaForCausalLM

import fixture_common as fc

PRESETS = {
    "tiny": dict(vocab_size=256, hidden_size=64, state_size=16, num_hidden_layers=2, expand=2, conv_kernel=4,
                 time_step_rank="auto", tie_word_embeddings=True, bos_token_id=0, eos_token_id=0, pad_token_id=0),
    # state-spaces/mamba-130m-hf's shape.
    "130m": dict(vocab_size=50280, hidden_size=768, state_size=16, num_hidden_layers=24, expand=2, conv_kernel=4,
                 time_step_rank="auto", tie_word_embeddings=True, bos_token_id=0, eos_token_id=0, pad_token_id=0),
}


# transformers' init leaves the residual stream dominated by the (tied) embedding, so the tiny model's greedy
# decoding repeats one token forever (1-3 distinct tokens in 64 steps), which would not test the decode state.
# Scaling every out_proj by 10 makes the mixers matter: ~50 distinct tokens in 64 steps, min margin ~1e-3.
OUT_PROJ_GAIN = {"tiny": 10.0, "130m": 1.0}


def force_slow_path():
    # transformers before the kernels-hub refactor chose cuda_kernels_forward when this flag was set and the
    # weights were on a GPU; later versions use the torch fallbacks unless hub kernels are requested, and only
    # call the fused training kernel in train mode (fc.build_model puts the model in eval mode).
    if hasattr(modeling_mamba, "is_fast_path_available"):
        modeling_mamba.is_fast_path_available = False


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="auto", help="auto (cuda for big presets if present), cpu, cuda")
    ap.add_argument("--grads", choices=["all", "sample", "none"], default="all")
    ap.add_argument("--out-proj-gain", type=float, default=None, help="default: OUT_PROJ_GAIN[preset]")
    ap.add_argument("--exact", action="store_true", help="also save f64 logits (<p>.logits_exact)")
    a = ap.parse_args()

    force_slow_path()
    config = MambaConfig(use_mambapy=False, **PRESETS[a.preset])
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[a.dtype]
    device = fc.pick_device(a.device, a.preset)
    model = fc.build_model(MambaForCausalLM, config, dtype, device, a.seed)
    gain = OUT_PROJ_GAIN[a.preset] if a.out_proj_gain is None else a.out_proj_gain
    with torch.no_grad():
        for layer in model.backbone.layers:
            layer.mixer.out_proj.weight.mul_(gain)
    tensors = fc.reference_run(model, config.vocab_size, device, a.grads)
    if a.exact:
        fc.exact_logits(model, tensors, device)
    fc.save(a.out, model, tensors, dict(model="mamba", preset=a.preset, dtype=a.dtype, seed=a.seed,
                                        out_proj_gain=gain, transformers=transformers.__version__))


if __name__ == "__main__":
    main()
