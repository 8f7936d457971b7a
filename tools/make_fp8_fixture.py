"""FP8 fixtures for anvil's FP8 Llama loader, made from tests/fixtures/llama_tiny (f32) with torch/transformers.

Writes two compressed-tensors checkpoints (format float-quantized, e4m3fn weights of q/k/v/o/gate/up/down,
embeddings, norms and lm_head kept f32, "ignore": ["lm_head"]):
  tests/fixtures/llama_tiny_fp8_channel: weight_scale f32 [OC, 1] (strategy "channel"), dynamic per-token
      activations. The quantisation is exactly anvil's --dtype fp8 at load: scale = max(amax_row / 448, 2^-126)
      in f32, codes = e4m3fn(w * f32(1 / scale)) rounded to nearest even; so anvil's quantise-at-load of
      llama_tiny must reproduce these bytes.
  tests/fixtures/llama_tiny_fp8_tensor: weight_scale f32 [1] (strategy "tensor"), static input_scale f32 [1]
      per module, calibrated as amax/448 of the module's input over a calibration batch.
and in each, reference.safetensors:
  batch.input_ids     i64 [B, T]
  batch.logits        f32 [B, T, V]  transformers, f32, on the dequantised weights (scale * decode(code)) and
                                     16/32-bit activations: what weight-only FP8 computes
  batch.logits_w8a8   f32 [B, T, V]  the same with every quantised linear's input also rounded to e4m3 (per
                                     token with scale amax/448, or with the static input_scale, saturating at
                                     +-448): what the prefill path (activation quantisation + FP8 GEMM) computes
Run from the repository root: python tools/make_fp8_fixture.py   (CPU, a few seconds)
"""
import copy
import json
import os

import torch
from safetensors.torch import load_file, save_file
from transformers import LlamaForCausalLM

SRC = "tests/fixtures/llama_tiny"
PROJ = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
        "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
FP8_MAX = 448.0
MIN_SCALE = 2.0 ** -126
B, T = 2, 12


def quantise(w, per_channel):
    amax = w.abs().amax(dim=1, keepdim=True) if per_channel else w.abs().amax().reshape(1, 1)
    scale = torch.clamp(amax.float() / FP8_MAX, min=MIN_SCALE)
    inv = (1.0 / scale).float()
    q = (w.float() * inv).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q, scale  # scale [OC, 1] or [1, 1]


def fake_quant_input(x, input_scale):
    if input_scale is None:  # dynamic per token
        s = torch.clamp(x.abs().amax(dim=-1, keepdim=True).float() / FP8_MAX, min=MIN_SCALE)
    else:
        s = input_scale
    q = (x.float() * (1.0 / s)).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q.float() * s


def quant_config(strategy, static):
    act = ({"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False, "symmetric": True}
           if static else {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True, "symmetric": True})
    return {
        "quant_method": "compressed-tensors",
        "format": "float-quantized",
        "quantization_status": "compressed",
        "config_groups": {"group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 8, "type": "float", "strategy": strategy, "dynamic": False, "symmetric": True},
            "input_activations": act,
        }},
        "ignore": ["lm_head"],
    }


def main():
    torch.manual_seed(0)
    base = LlamaForCausalLM.from_pretrained(SRC, dtype=torch.float32).eval()
    V = base.config.vocab_size
    g = torch.Generator().manual_seed(1234)
    ids = torch.randint(0, V, (B, T), generator=g, dtype=torch.int64)
    calib = torch.randint(0, V, (4, 32), generator=g, dtype=torch.int64)
    src = load_file(os.path.join(SRC, "model.safetensors"))

    for variant, per_channel, static in (("channel", True, False), ("tensor", False, True)):
        out_dir = f"tests/fixtures/llama_tiny_fp8_{variant}"
        os.makedirs(out_dir, exist_ok=True)
        model = copy.deepcopy(base)
        modules = {n: m for n, m in model.named_modules() if any(n.endswith(p) for p in PROJ)}
        # Static input scales from a calibration batch through the original model.
        input_scales = {}
        if static:
            amax = {}
            hooks = [m.register_forward_pre_hook(
                lambda mod, args, n=n: amax.__setitem__(n, max(amax.get(n, 0.0), args[0].abs().max().item())))
                for n, m in modules.items()]
            with torch.no_grad():
                model(calib)
            for h in hooks:
                h.remove()
            input_scales = {n: torch.tensor([amax[n] / FP8_MAX], dtype=torch.float32) for n in modules}
        tensors = {}
        for name, t in src.items():
            mod = name[: -len(".weight")]
            if mod in modules:
                q, s = quantise(t, per_channel)
                tensors[name] = q.contiguous()
                tensors[mod + ".weight_scale"] = (s if per_channel else s.reshape(1)).contiguous()
                if static:
                    tensors[mod + ".input_scale"] = input_scales[mod]
                with torch.no_grad():
                    modules[mod].weight.copy_(q.float() * s)
            else:
                tensors[name] = t.contiguous()
        save_file(tensors, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
        cfg = json.load(open(os.path.join(SRC, "config.json")))
        cfg["quantization_config"] = quant_config(variant, static)
        with open(os.path.join(out_dir, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        with torch.no_grad():
            logits = model(ids).logits.float()
            hooks = [m.register_forward_pre_hook(
                lambda mod, args, n=n: (fake_quant_input(args[0], input_scales.get(n)),))
                for n, m in modules.items()]
            logits_w8a8 = model(ids).logits.float()
            for h in hooks:
                h.remove()
        save_file({"batch.input_ids": ids, "batch.logits": logits.contiguous(),
                   "batch.logits_w8a8": logits_w8a8.contiguous()}, os.path.join(out_dir, "reference.safetensors"))
        rel = ((logits_w8a8 - logits).abs().max() / logits.abs().max()).item()
        print(f"{out_dir}: {len(tensors)} tensors; w8a8 vs weight-only max|diff|/max|logit| {rel:.3g}")


if __name__ == "__main__":
    main()
