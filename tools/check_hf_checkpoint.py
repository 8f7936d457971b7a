#!/usr/bin/env python3
"""Does transformers load a checkpoint directory that anvil wrote, and compute the reference logits with it?

  check_hf_checkpoint.py DIR REFERENCE.safetensors [DIR REFERENCE.safetensors ...]
Each DIR holds config.json and model.safetensors written by anvil (io/hf_config.h, io/safetensors.h). The model is
loaded with AutoModelForCausalLM.from_pretrained; no weight may be missing or unexpected, and the logits of every
prompt.{i}.input_ids in REFERENCE must match prompt.{i}.logits. Prints the loaded config's key fields as JSON.
Exit status 0 when all holds, 1 otherwise, 77 (the "skip" status of automake and ctest) when torch,
safetensors or transformers is not installed. Several pairs share one (slow) import of transformers.
"""
import json
import sys

try:
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM
except ImportError as e:
    print(f"check_hf_checkpoint: {e}", file=sys.stderr)
    sys.exit(77)


def check(ckpt, ref_path):
    model, info = AutoModelForCausalLM.from_pretrained(ckpt, output_loading_info=True)
    model.eval()
    c = model.config
    rope = getattr(c, "rope_parameters", None) or {"rope_theta": getattr(c, "rope_theta", None),
                                                    **(getattr(c, "rope_scaling", None) or {})}
    print(json.dumps({"architectures": c.architectures, "model_type": c.model_type, "dtype": str(model.dtype),
                      "tie_word_embeddings": c.tie_word_embeddings, "rope": rope if c.model_type == "llama" else None}))
    bad = {k: v for k, v in info.items() if k in ("missing_keys", "unexpected_keys", "mismatched_keys") and v}
    if bad:
        print(f"check_hf_checkpoint: loading problems: {bad}", file=sys.stderr)
        return 1
    ref = load_file(ref_path)
    i = 0
    while f"prompt.{i}.input_ids" in ref:
        with torch.no_grad():
            logits = model(input_ids=ref[f"prompt.{i}.input_ids"], use_cache=False).logits.float()
        err = (logits - ref[f"prompt.{i}.logits"]).abs().max().item()
        if err > 1e-4:  # the same f32 weights and math: only summation-order noise (~1e-6) is expected
            print(f"check_hf_checkpoint: prompt {i}: logits differ by {err}", file=sys.stderr)
            return 1
        i += 1
    if i == 0:
        print("check_hf_checkpoint: no prompt.{i}.input_ids in the reference", file=sys.stderr)
        return 1
    print(f"check_hf_checkpoint: {ckpt}: ok ({i} prompts)")
    return 0


def main():
    args = sys.argv[1:]
    if not args or len(args) % 2:
        print(__doc__, file=sys.stderr)
        return 2
    return max(check(args[i], args[i + 1]) for i in range(0, len(args), 2))


if __name__ == "__main__":
    sys.exit(main())
